//! The server keeps time: a background task runs the script's upkeep (`sweep`) for
//! every queue, so scheduled jobs become waiting, recurring jobs spawn and workers
//! hear about expired locks at the due time even on queues nobody pops. It sleeps
//! until the next due time the sweep reports (at most [`MAX_IDLE`]), and wakes the
//! long-poll waiters whenever something fell due.
//!
//! Several qlessd processes may sweep the same Redis: each sweep is one atomic script
//! call, so a due job is promoted or spawned exactly once whoever gets there first.

use std::sync::Arc;
use std::time::Duration;

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

/// Runs until `stop` turns true.
pub async fn run(
    qless: Qless,
    clock: Clock,
    leasing: Arc<Leasing>,
    mut stop: watch::Receiver<bool>,
) {
    let mut failures = 0u32;
    let mut due_at = 0.0;
    loop {
        let now = clock.now();
        let started = std::time::Instant::now();
        let swept = qless.sweep(now, LIMIT).await;
        crate::metrics::METRICS.sweep(started.elapsed(), swept.is_err());
        let pause = match swept {
            Ok(report) => {
                failures = 0;
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
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}
