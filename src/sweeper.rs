//! The server keeps time: a background task runs the script's upkeep (`sweep`), so
//! scheduled jobs become waiting, recurring jobs spawn and workers hear about expired
//! locks at the due time even on queues nobody pops; and it tops up the fire times of
//! cron templates ([`crate::cron::top_up`]).
//!
//! It visits what is due, not every queue: the script keeps `<own prefix>due` (the
//! prefix of qlessd's own keys: `qlessd:` beside the plain `ql:`, which belongs to the
//! qless protocol; the namespace's own in a namespace), a sorted
//! set of queue → the earliest time something of that queue falls due (a scheduled
//! job, a recurring spawn, a lock expiry), lowered on every write that sets such a
//! time, and a sweep visits only the queues due by now and reports when the next one
//! is. The task sleeps until then (at least [`MIN_IDLE`], at most [`MAX_IDLE`]: a
//! time set by another gateway meanwhile is seen within a tick). Whatever the sweep
//! makes poppable (promotions, spawns, expired locks past their notice) the script
//! announces itself on `<own prefix>available`, so the long-poll waiters of every gateway
//! wake for it: the sweeper wakes nobody.
//!
//! Clients that do not run this script (stock qless clients on the legacy prefix)
//! write schedules without touching `<own prefix>due`. For them each tick also visits a
//! slice of the registered queues, sized so that a slow pass covers them all every
//! [`SLOW_PASS`]; visiting a queue also files its next due time in the index.
//!
//! Several qlessd processes may serve the same Redis, but only one at a time sweeps a
//! namespace: the one holding its sweeper lease (`<own prefix>sweeper`, the holder's
//! [`gateway_id`], expiring after [`LEASE_TTL`] unless the holder renews it). The others
//! try to take the lease every [`MAX_IDLE`], so when the holder dies one of them takes
//! over within [`LEASE_TTL`] and a second. (Should two ever sweep at once, nothing
//! breaks: each sweep is one atomic script call, so a due job is promoted or spawned
//! exactly once whoever gets there first.)
//!
//! On the plain prefix the sweeper also moves, every [`SLOW_PASS`], whatever a gateway
//! of the version before qlessd's keys left `ql:` still wrote there during an upgrade
//! ([`Qless::migrate`]: due times, cron ticks and throttles, once the gateway's pass at
//! start-up has moved the rest; the whole pass again if that one failed).

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::clock::Clock;
use crate::core::Qless;

/// Longest sleep between two sweeps: bounds how late a due time written while the
/// sweeper sleeps (by another gateway) is acted on, and paces the slow pass.
pub const MAX_IDLE: Duration = Duration::from_secs(1);

/// How long the slow pass takes to visit every registered queue: bounds how late
/// schedules written by clients that do not keep `<own prefix>due` are acted on.
pub const SLOW_PASS: Duration = Duration::from_secs(30);

/// Shortest sleep, so a due time in the past cannot make the loop spin.
const MIN_IDLE: Duration = Duration::from_millis(5);

/// Most items of each kind one sweep handles per queue, and most due queues it visits.
const LIMIT: u32 = 1000;

/// How long the sweeper lease lasts without renewal: how long a namespace may go
/// unswept after its sweeper dies.
pub const LEASE_TTL: Duration = Duration::from_secs(5);

/// How often the holder renews its lease (at most: it renews before a sweep once this
/// long has passed since the last renewal), well inside [`LEASE_TTL`].
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The lease's key under qlessd's own prefix.
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

/// How many queues one tick of the slow pass visits so that `queues` are all visited
/// within [`SLOW_PASS`].
fn slice(queues: i64) -> u32 {
    let ticks = (SLOW_PASS.as_secs_f64() / MAX_IDLE.as_secs_f64()).max(1.0);
    ((queues.max(1) as f64 / ticks).ceil() as u32).clamp(1, LIMIT)
}

/// Runs until `stop` turns true, sweeping while this gateway (`holder`) holds the
/// namespace's sweeper lease, and giving the lease up when it stops.
pub async fn run(qless: Qless, clock: Clock, holder: String, mut stop: watch::Receiver<bool>) {
    let mut failures = 0u32;
    let mut holding = false;
    let mut renewed: Option<Instant> = None;
    // The slow pass: where its next slice starts, how long it is, when it was taken.
    let mut cursor = 0u64;
    let mut queues = 0i64;
    let mut sliced: Option<Instant> = None;
    // The last look for keys written under their old names (plain prefix only).
    let legacy = qless.namespace_key().is_none();
    let mut migrated: Option<Instant> = None;
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
            let scan = if sliced.is_none_or(|at| at.elapsed() >= MAX_IDLE) {
                slice(queues)
            } else {
                0
            };
            let started = Instant::now();
            let swept = qless.sweep(now, LIMIT, scan, cursor).await;
            crate::metrics::METRICS.sweep(started.elapsed(), swept.is_err());
            if legacy && migrated.is_none_or(|at| at.elapsed() >= SLOW_PASS) {
                migrated = Some(Instant::now());
                match qless.migrate(now, true).await {
                    Ok(0) => {}
                    Ok(moved) => tracing::info!(moved, "moved qlessd's own keys from ql:"),
                    Err(err) => tracing::debug!(%err, "moving qlessd's own keys failed"),
                }
            }
            // After the sweep, so ticks missed while nothing ran have fired first.
            if let Err(err) = crate::cron::top_up(&qless, now).await {
                tracing::debug!(%err, "cron top-up failed");
            }
            match swept {
                Ok(report) => {
                    failures = 0;
                    tracing::trace!(?report, "swept");
                    if report.promoted + report.spawned + report.stalled + report.expired > 0 {
                        tracing::debug!(?report, "sweep");
                    }
                    if scan > 0 {
                        sliced = Some(Instant::now());
                        cursor = u64::try_from(report.cursor).unwrap_or(0);
                        queues = report.queues;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slow_pass_visits_every_queue_within_its_period() {
        let ticks = (SLOW_PASS.as_secs_f64() / MAX_IDLE.as_secs_f64()) as i64;
        for queues in [0, 1, 29, 30, 31, 1000, 100_000] {
            let per_tick = i64::from(slice(queues));
            assert!(per_tick >= 1);
            assert!(
                per_tick * ticks >= queues || per_tick == i64::from(LIMIT),
                "{queues} queues, {per_tick} a tick"
            );
        }
        assert_eq!(slice(1000), 34);
    }
}
