//! Live parts of the dashboard: per-minute throughput from the counts of jobs ended
//! that the event bridge keeps, and `/ui/live`, a Server-Sent Events stream that tells
//! open pages "something changed" (at most once a second) so htmx refreshes them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};
use tokio::sync::broadcast::error::RecvError;

use super::Ui;
use crate::core::events::EventBus;

/// Minutes of throughput kept (and drawn).
pub const MINUTES: usize = 30;

/// How often the counts of jobs ended are read into the current minute (a page shown
/// reads them too, so it is never behind).
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Completions and failures per minute over the last [`MINUTES`] minutes, of every
/// job whose end this process heard of since it started.
#[derive(Debug)]
pub struct Throughput {
    events: EventBus,
    counted: Mutex<Counted>,
}

/// What [`Throughput`] has read so far.
#[derive(Debug, Default)]
struct Counted {
    /// The bridge's counts `(completed, failed)` when last read.
    read: (u64, u64),
    /// `(minute since the epoch, completed, failed)`, oldest first.
    minutes: Vec<(u64, u64, u64)>,
}

impl Throughput {
    /// Starts reading the counts of jobs ended that `events` keeps, every
    /// [`SAMPLE_EVERY`] (a task that ends with the dashboard).
    pub(super) fn start(events: &EventBus) -> Arc<Self> {
        let throughput = Arc::new(Throughput {
            events: events.clone(),
            counted: Mutex::new(Counted {
                read: events.ended(),
                minutes: Vec::new(),
            }),
        });
        let dashboard = Arc::downgrade(&throughput);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match dashboard.upgrade() {
                    Some(throughput) => throughput.sample(),
                    None => return,
                }
            }
        });
        throughput
    }

    /// Adds the jobs ended since the last reading to the current minute.
    fn sample(&self) {
        let mut counted = self.counted.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.events.ended();
        let (completed, failed) = (now.0 - counted.read.0, now.1 - counted.read.1);
        counted.read = now;
        if completed > 0 || failed > 0 {
            counted.record(now_minute(), completed, failed);
        }
    }

    /// `(completed, failed)` for each of the last [`MINUTES`] minutes, oldest first,
    /// zero for minutes without events.
    pub fn series(&self) -> Vec<(u64, u64)> {
        self.sample();
        let now = now_minute();
        let counted = self.counted.lock().unwrap_or_else(|e| e.into_inner());
        (0..MINUTES as u64)
            .rev()
            .map(|ago| {
                let minute = now.saturating_sub(ago);
                counted
                    .minutes
                    .iter()
                    .find(|m| m.0 == minute)
                    .map_or((0, 0), |m| (m.1, m.2))
            })
            .collect()
    }
}

impl Counted {
    fn record(&mut self, minute: u64, completed: u64, failed: u64) {
        if self.minutes.last().is_none_or(|last| last.0 != minute) {
            self.minutes.push((minute, 0, 0));
            let excess = self.minutes.len().saturating_sub(MINUTES);
            self.minutes.drain(..excess);
        }
        let last = self.minutes.last_mut().expect("pushed above");
        last.1 += completed;
        last.2 += failed;
    }
}

/// Wall-clock minute (throughput is about real time, not the script's clock).
fn now_minute() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

/// `GET /ui/live`: a `changed` event at most once a second while jobs move.
pub(super) async fn stream(
    State(ui): State<Ui>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let mut receiver = ui.app.events.subscribe();
    let mut shutdown = ui.app.shutdown.clone();
    let stream = async_stream(move |tx| async move {
        loop {
            tokio::select! {
                got = receiver.recv() => match got {
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                },
                _ = shutdown.changed() => break,
            }
            if tx
                .send(SseEvent::default().event("changed").data("1"))
                .await
                .is_err()
            {
                break;
            }
            // Coalesce: whatever happens in the next second is one more refresh.
            tokio::time::sleep(Duration::from_secs(1)).await;
            while let Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
                receiver.try_recv()
            {}
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// A stream fed by a task through a small channel.
fn async_stream<F, Fut>(produce: F) -> impl Stream<Item = Result<SseEvent, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<SseEvent>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(produce(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_counts_per_minute_and_keeps_the_last_thirty() {
        let mut counted = Counted::default();
        for minute in 0..40 {
            counted.record(minute, 1, 0);
        }
        counted.record(39, 2, 1);
        assert_eq!(counted.minutes.len(), MINUTES);
        assert_eq!(counted.minutes.first().unwrap().0, 10);
        assert_eq!(*counted.minutes.last().unwrap(), (39, 3, 1));
    }
}
