//! The one source of `now`. The server owns time: every script call receives the
//! gateway's clock, never a client's. Tests use a [`Clock::manual`] clock and move it
//! by hand, so lock expiry and scheduling are deterministic.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, with millisecond precision.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicU64>>,
}

impl Clock {
    /// The wall clock.
    pub fn system() -> Self {
        Clock { manual: None }
    }

    /// A clock that only moves when told to, starting at `start` seconds.
    pub fn manual(start: f64) -> Self {
        Clock {
            manual: Some(Arc::new(AtomicU64::new(start.to_bits()))),
        }
    }

    /// The current time in seconds (fractions are milliseconds).
    pub fn now(&self) -> f64 {
        match &self.manual {
            Some(cell) => f64::from_bits(cell.load(Ordering::SeqCst)),
            None => {
                let since = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                // Millisecond precision keeps FIFO order within a second without
                // producing long decimal strings on every call.
                since.as_millis() as f64 / 1000.0
            }
        }
    }

    /// Sets a manual clock; a no-op on the system clock.
    pub fn set(&self, seconds: f64) {
        if let Some(cell) = &self.manual {
            cell.store(seconds.to_bits(), Ordering::SeqCst);
        }
    }

    /// Moves a manual clock forward; a no-op on the system clock.
    pub fn advance(&self, seconds: f64) {
        if self.manual.is_some() {
            self.set(self.now() + seconds);
        }
    }
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
}
