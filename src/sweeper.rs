//! The server keeps time: a background task runs the script's upkeep (`sweep`) for
//! every queue, so scheduled jobs become waiting, recurring jobs spawn and workers
//! hear about expired locks at the due time even on queues nobody pops; and it tops
//! up the fire times of cron templates ([`crate::cron::top_up`]). It sleeps
//! until the next due time the sweep reports (at most [`MAX_IDLE`]), and wakes the
//! long-poll waiters whenever something fell due.
//!
//! Several qlessd processes may serve the same Redis, but only one at a time sweeps a
//! namespace: the one holding its sweeper lease (`<prefix>sweeper`, the holder's
//! [`gateway_id`], expiring after [`LEASE_TTL`] unless the holder renews it). The others
//! try to take the lease every [`MAX_IDLE`], so when the holder dies one of them takes
//! over within [`LEASE_TTL`] and a second. (Should two ever sweep at once, nothing
//! breaks: each sweep is one atomic script call, so a due job is promoted or spawned
//! exactly once whoever gets there first.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::clock::Clock;
use crate::core::Qless;
use crate::leasing::Leasing;

/// Longest sleep between two sweeps: also bounds how late work written by a client
/// that bypasses qlessd (and so announces nothing) is noticed.
pub const MAX_IDLE: Duration = Duration::from_secs(1);

/// Shortest sleep, so a due time in the past cannot make the loop spin.
const MIN_IDLE: Duration = Duration::from_millis(5);

/// Most items of each kind one sweep handles per queue.
const LIMIT: u32 = 1000;

/// How long the sweeper lease lasts without renewal: how long a namespace may go
/// unswept after its sweeper dies.
pub const LEASE_TTL: Duration = Duration::from_secs(5);

/// How often the holder renews its lease (at most: it renews before a sweep once this
/// long has passed since the last renewal), well inside [`LEASE_TTL`].
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The lease's key under the namespace's prefix.
const LEASE: &str = "sweeper";

/// This process's name as a lease holder: its process id and start time, unique
/// among the gateways sharing a Redis.
pub fn gateway_id() -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{}-{started:x}", std::process::id())
}

/// Runs until `stop` turns true, sweeping while this gateway (`holder`) holds the
/// namespace's sweeper lease, and giving the lease up when it stops.
pub async fn run(
    qless: Qless,
    clock: Clock,
    leasing: Arc<Leasing>,
    holder: String,
    mut stop: watch::Receiver<bool>,
) {
    let mut failures = 0u32;
    let mut due_at = 0.0;
    let mut holding = false;
    let mut renewed: Option<Instant> = None;
    loop {
        if renewed.is_none_or(|at| at.elapsed() >= RENEW_EVERY) {
            let held = match qless.hold_lease(LEASE, &holder, LEASE_TTL).await {
                Ok(held) => held,
                // Redis is unreachable: nobody can sweep; the sweep below fails too.
                Err(_) => holding,
            };
            if held != holding {
                if held {
                    tracing::info!(prefix = %qless.prefix(), "this gateway sweeps the namespace");
                } else {
                    tracing::info!(prefix = %qless.prefix(), "another gateway sweeps the namespace");
                }
            }
            holding = held;
            renewed = held.then(Instant::now);
        }
        let pause = if !holding {
            MAX_IDLE
        } else {
            let now = clock.now();
            let started = Instant::now();
            let swept = qless.sweep(now, LIMIT).await;
            crate::metrics::METRICS.sweep(started.elapsed(), swept.is_err());
            // After the sweep, so ticks missed while nothing ran have fired first.
            if let Err(err) = crate::cron::top_up(&qless, now).await {
                tracing::debug!(%err, "cron top-up failed");
            }
            match swept {
                Ok(report) => {
                    failures = 0;
                    tracing::trace!(?report, "swept");
                    if report.promoted + report.spawned + report.stalled > 0 {
                        tracing::debug!(?report, "sweep");
                    }
                    // Something due now may have made a job poppable: promotions, spawns,
                    // and locks whose grace period ran out (which only a pop hands over).
                    let fell_due = due_at > 0.0 && now >= due_at;
                    if report.promoted + report.spawned > 0 || fell_due {
                        leasing.wake_all();
                    }
                    due_at = report.next;
                    if report.next > 0.0 {
                        // A job may be scheduled centuries ahead (any finite delay is
                        // accepted): a wait too long for a Duration is simply the longest.
                        Duration::try_from_secs_f64((report.next - clock.now()).max(0.0))
                            .unwrap_or(MAX_IDLE)
                            .clamp(MIN_IDLE, MAX_IDLE)
                    } else {
                        MAX_IDLE
                    }
                }
                Err(err) => {
                    failures += 1;
                    if failures == 1 || failures.is_multiple_of(60) {
                        tracing::warn!(%err, "sweep failed");
                    }
                    MAX_IDLE
                }
            }
        };
        let stopping = tokio::select! {
            _ = tokio::time::sleep(pause) => false,
            _ = stop.wait_for(|stopped| *stopped) => true,
        };
        if stopping {
            if holding {
                let _ = qless.release_lease(LEASE, &holder).await;
            }
            return;
        }
    }
}
