//! Live parts of the dashboard: per-minute throughput counted from the script's
//! events, and `/ui/live`, a Server-Sent Events stream that tells open pages
//! "something changed" (at most once a second) so htmx refreshes them.

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

/// Completions and failures per minute over the last [`MINUTES`] minutes, counted
/// from the events this process heard since it started.
#[derive(Debug, Default)]
pub struct Throughput {
    /// `(minute since the epoch, completed, failed)`, oldest first.
    minutes: Mutex<Vec<(u64, u64, u64)>>,
}

impl Throughput {
    /// Starts counting from `events` (a task that ends when the bus closes).
    pub(super) fn start(events: &EventBus) -> Arc<Self> {
        let throughput = Arc::new(Throughput::default());
        let mut receiver = events.subscribe();
        let counter = throughput.clone();
        tokio::spawn(async move {
            loop {
                match receiver.recv().await {
                    Ok(event) => match event.channel.as_str() {
                        "completed" => counter.record(now_minute(), true),
                        "failed" => counter.record(now_minute(), false),
                        _ => {}
                    },
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                }
            }
        });
        throughput
    }

    fn record(&self, minute: u64, completed: bool) {
        let mut minutes = self.minutes.lock().unwrap_or_else(|e| e.into_inner());
        if minutes.last().is_none_or(|last| last.0 != minute) {
            minutes.push((minute, 0, 0));
            let excess = minutes.len().saturating_sub(MINUTES);
            minutes.drain(..excess);
        }
        let last = minutes.last_mut().expect("pushed above");
        if completed {
            last.1 += 1;
        } else {
            last.2 += 1;
        }
    }

    /// `(completed, failed)` for each of the last [`MINUTES`] minutes, oldest first,
    /// zero for minutes without events.
    pub fn series(&self) -> Vec<(u64, u64)> {
        let now = now_minute();
        let minutes = self.minutes.lock().unwrap_or_else(|e| e.into_inner());
        (0..MINUTES as u64)
            .rev()
            .map(|ago| {
                let minute = now.saturating_sub(ago);
                minutes
                    .iter()
                    .find(|m| m.0 == minute)
                    .map_or((0, 0), |m| (m.1, m.2))
            })
            .collect()
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
        let t = Throughput::default();
        for minute in 0..40 {
            t.record(minute, true);
        }
        t.record(39, false);
        let minutes = t.minutes.lock().unwrap();
        assert_eq!(minutes.len(), MINUTES);
        assert_eq!(minutes.first().unwrap().0, 10);
        assert_eq!(*minutes.last().unwrap(), (39, 1, 1));
    }
}
