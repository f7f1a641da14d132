//! The one source of `now`. The server owns time: every script call receives the
//! gateway's clock, never a client's. Gateways sharing a Redis must agree on `now`
//! (a lease one of them grants must not expire early in another), so a running
//! gateway follows Redis's clock ([`Clock::redis`]): `TIME` sampled at start and
//! again every [`RESAMPLE`], with the time in between measured by the monotonic
//! clock, never by this machine's wall clock. Tests use a [`Clock::manual`] clock and
//! move it by hand, so lock expiry and scheduling are deterministic.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::core::{Error, Qless};

/// How often a Redis-following clock samples `TIME` again: monotonic clocks drift
/// from Redis's by parts per million, so milliseconds at most between samples.
pub const RESAMPLE: Duration = Duration::from_secs(15);

/// Seconds since the Unix epoch, with millisecond precision.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    source: Source,
}

#[derive(Debug, Clone, Default)]
enum Source {
    /// This machine's wall clock.
    #[default]
    System,
    /// Set by hand (tests), in `f64` bits.
    Manual(Arc<AtomicU64>),
    /// Redis's clock, carried forward by the monotonic clock.
    Redis(Arc<Followed>),
}

/// Redis's time as `offset + (Instant::now() - anchor)`, in milliseconds. `latest`
/// is the largest time handed out, so a sample that puts Redis's clock behind what
/// was already handed out (a slow reply, Redis's clock stepped back) never makes time
/// run backwards: it stands still until it catches up.
#[derive(Debug)]
struct Followed {
    anchor: Instant,
    offset_ms: AtomicI64,
    latest_ms: AtomicI64,
}

impl Followed {
    fn elapsed_ms(&self, at: Instant) -> i64 {
        at.saturating_duration_since(self.anchor).as_millis() as i64
    }

    fn now_ms(&self) -> i64 {
        let computed = self.offset_ms.load(Ordering::Acquire) + self.elapsed_ms(Instant::now());
        // fetch_max returns the previous maximum: the answer is the larger of the two.
        let before = self.latest_ms.fetch_max(computed, Ordering::AcqRel);
        before.max(computed)
    }

    /// Records that Redis's clock read `redis_ms` at monotonic instant `at`.
    fn sample(&self, redis_ms: i64, at: Instant) {
        self.offset_ms
            .store(redis_ms - self.elapsed_ms(at), Ordering::Release);
    }
}

impl Clock {
    /// The wall clock.
    pub fn system() -> Self {
        Clock {
            source: Source::System,
        }
    }

    /// A clock that only moves when told to, starting at `start` seconds.
    pub fn manual(start: f64) -> Self {
        Clock {
            source: Source::Manual(Arc::new(AtomicU64::new(start.to_bits()))),
        }
    }

    /// Redis's clock, sampled now; keep it in step with [`Clock::follow`].
    pub async fn redis(qless: &Qless) -> Result<Self, Error> {
        let anchor = Instant::now();
        let followed = Followed {
            anchor,
            offset_ms: AtomicI64::new(0),
            latest_ms: AtomicI64::new(0),
        };
        let (redis_ms, at) = sample(qless).await?;
        followed.sample(redis_ms, at);
        Ok(Clock {
            source: Source::Redis(Arc::new(followed)),
        })
    }

    /// Samples Redis's `TIME` every [`RESAMPLE`] until `stop` turns true (a no-op for
    /// other clocks). A failed sample keeps the last one: the monotonic clock carries
    /// on from it.
    pub async fn follow(self, qless: Qless, mut stop: watch::Receiver<bool>) {
        let Source::Redis(followed) = &self.source else {
            return;
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RESAMPLE) => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            match sample(&qless).await {
                Ok((redis_ms, at)) => followed.sample(redis_ms, at),
                Err(err) => {
                    tracing::warn!(%err, "cannot read Redis's clock; keeping the last sample")
                }
            }
        }
    }

    /// The current time in seconds (fractions are milliseconds).
    pub fn now(&self) -> f64 {
        match &self.source {
            Source::Manual(cell) => f64::from_bits(cell.load(Ordering::SeqCst)),
            Source::Redis(followed) => followed.now_ms() as f64 / 1000.0,
            Source::System => {
                let since = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                // Millisecond precision keeps FIFO order within a second without
                // producing long decimal strings on every call.
                since.as_millis() as f64 / 1000.0
            }
        }
    }

    /// Sets a manual clock; a no-op on the others.
    pub fn set(&self, seconds: f64) {
        if let Source::Manual(cell) = &self.source {
            cell.store(seconds.to_bits(), Ordering::SeqCst);
        }
    }

    /// Moves a manual clock forward; a no-op on the others.
    pub fn advance(&self, seconds: f64) {
        if matches!(self.source, Source::Manual(_)) {
            self.set(self.now() + seconds);
        }
    }
}

/// Redis's time in milliseconds, and the monotonic instant it is taken to belong to:
/// the middle of the round trip, so half the latency is the largest error.
async fn sample(qless: &Qless) -> Result<(i64, Instant), Error> {
    let sent = Instant::now();
    let (seconds, micros) = qless.time().await?;
    let received = Instant::now();
    let at = sent + received.saturating_duration_since(sent) / 2;
    Ok((seconds * 1000 + micros / 1000, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = Clock::manual(100.0);
        assert_eq!(clock.now(), 100.0);
        clock.advance(2.5);
        assert_eq!(clock.now(), 102.5);
        let shared = clock.clone();
        shared.set(7.0);
        assert_eq!(clock.now(), 7.0);
    }

    #[test]
    fn the_system_clock_is_in_seconds() {
        let now = Clock::system().now();
        assert!(now > 1.6e9 && now < 1.0e10, "{now}");
    }

    fn followed(anchor: Instant) -> Followed {
        Followed {
            anchor,
            offset_ms: AtomicI64::new(0),
            latest_ms: AtomicI64::new(0),
        }
    }

    #[test]
    fn a_followed_clock_runs_on_from_its_sample() {
        let anchor = Instant::now();
        let clock = followed(anchor);
        clock.sample(5_000_000, anchor);
        let now = clock.now_ms();
        let elapsed = anchor.elapsed().as_millis() as i64;
        assert!((5_000_000..=5_000_000 + elapsed).contains(&now), "{now}");
    }

    #[test]
    fn a_sample_behind_what_was_handed_out_never_sends_time_backwards() {
        let anchor = Instant::now();
        let clock = followed(anchor);
        clock.sample(5_000_000, anchor);
        let before = clock.now_ms();
        // Redis's clock read ten seconds earlier than expected.
        clock.sample(4_990_000, Instant::now());
        let after = clock.now_ms();
        assert!(after >= before, "{before} then {after}");
        // A later sample moves it forward again.
        clock.sample(5_020_000, Instant::now());
        assert!(clock.now_ms() >= 5_020_000);
    }
}
