//! `GET /v1/events`: the script's pub/sub as Server-Sent Events, so an HTTP worker
//! hears at once that it lost a job or that its job was canceled, instead of finding
//! out at its next heartbeat.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::Query;
use crate::core::events::Event;
use crate::error::ApiError;
use crate::model::{EventsQuery, Problem};
use crate::state::AppState;

/// How often an idle stream sends a comment so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_events))
}

/// Stream job events (Server-Sent Events).
///
/// A `text/event-stream` of what happens to jobs, as it happens. Each SSE message has
/// an `event:` type and a JSON `data:` line. The first message is `ready` (once the
/// server's subscription is live, events published after it are delivered); `lagged`
/// (`{"missed": n}`) says this client fell behind and missed `n` events. Job events,
/// with the JSON the qless core publishes (byte for byte):
///
/// * `put` `{"jid","event","queue"}`: a job was put in a queue;
/// * `lock_lost` `{"jid","event","worker"}`: `worker` lost the job (its lock expired,
///   it was timed out, or it was put again elsewhere): stop working on it;
/// * `canceled` `{"jid","queue","event","worker"}`: the job was canceled;
/// * `completed` `{"jid","event","queue"}`, `advanced` `{"jid","to","event","queue"}`:
///   the job finished, or moved on to queue `to`;
/// * `failed` `{"message","jid","group","event","worker"}`: the job failed;
/// * `unthrottled` `{"jid","event","queue"}`: a job that waited for room in a
///   throttle is back in its queue (qlessd's throttles; other qless clients ignore it);
/// * `batch_fired` `{"bid","event","kind","jid","queue"}`: a batch's callback (`kind`
///   `on_success`, `on_complete` or `on_death`) was put as job `jid` (qlessd's batches);
/// * `expired` `{"jid","event","queue","start_by"}`: a job not popped by its
///   `start_by` failed into the group `expired` (qlessd's deadlines);
/// * `timed_out` `{"jid","event","queue","worker","max_run"}`: a job ran longer than its
///   `max_run`; `worker`'s run of it is over (qlessd's deadlines);
/// * `config_set` `{"option","event","value"}`, `config_unset` `{"event","option"}`.
///
/// For tracked jobs also `tracked` `{"jid","transition"}` with `transition` one of
/// `put`, `popped`, `completed`, `failed`, `stalled`, `canceled`; and `tracking`
/// `{"jid","tracked"}` when tracking starts or stops. Filters combine: a worker
/// typically listens with `?worker=<its name>&events=lock_lost,canceled`. Comments are
/// sent every 15 seconds to keep idle connections open.
#[utoipa::path(get, path = "/v1/events", tag = "events", operation_id = "stream_events",
    params(EventsQuery),
    responses(
        (status = 200, description = "An endless `text/event-stream`", body = String,
         content_type = "text/event-stream"),
        (status = 400, description = "An unknown parameter, an invalid name, or an \
         unknown event type in `events`", body = Problem,
         content_type = "application/problem+json"),
    ))]
async fn stream_events(
    State(state): State<AppState>,
    Query(query): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let filter = Filter::new(query)?;
    let receiver = state.events.subscribe();
    let subscribed = state.events.wait_subscribed(Duration::from_secs(2)).await;
    let ready = SseEvent::default()
        .event("ready")
        .data(json!({ "subscribed": subscribed }).to_string());
    let shutdown = state.shutdown.clone();
    let events = stream::unfold(
        (receiver, filter, shutdown),
        |(mut receiver, filter, mut shutdown)| async move {
            loop {
                let received = tokio::select! {
                    received = receiver.recv() => received,
                    _ = shutdown.wait_for(|stopping| *stopping) => return None,
                };
                match received {
                    Ok(event) => {
                        if let Some(message) = filter.render(&event) {
                            return Some((message, (receiver, filter, shutdown)));
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        let message = SseEvent::default()
                            .event("lagged")
                            .data(json!({ "missed": missed }).to_string());
                        return Some((message, (receiver, filter, shutdown)));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    // The stream counts as an open client until it is dropped.
    let open = crate::metrics::METRICS.event_stream();
    let messages = stream::once(async { ready })
        .chain(events)
        .map(move |message| {
            let _ = &open;
            Ok(message)
        });
    Ok(Sse::new(messages).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The filters of one stream, checked against each event.
struct Filter {
    queue: Option<String>,
    jid: Option<String>,
    worker: Option<String>,
    kinds: Option<HashSet<String>>,
}

/// Channels of tracked-job transitions (payload: the jid).
const TRANSITIONS: [&str; 6] = [
    "put",
    "popped",
    "completed",
    "failed",
    "stalled",
    "canceled",
];

/// The event types a stream can be filtered by (`ready` and `lagged` are always sent).
const EVENT_KINDS: [&str; 14] = [
    "put",
    "unthrottled",
    "batch_fired",
    "expired",
    "timed_out",
    "lock_lost",
    "canceled",
    "completed",
    "advanced",
    "failed",
    "config_set",
    "config_unset",
    "tracked",
    "tracking",
];

/// The kinds of `?events=a,b`: at least one, each a known event type, so a typo is a
/// 400 rather than a stream that stays silent.
fn event_kinds(list: &str) -> Result<HashSet<String>, ApiError> {
    let kinds: HashSet<String> = list
        .split(',')
        .map(str::trim)
        .filter(|kind| !kind.is_empty())
        .map(str::to_owned)
        .collect();
    if kinds.is_empty() {
        return Err(ApiError::BadRequest(
            "events names no event type; leave it out to receive every event".to_owned(),
        ));
    }
    let mut unknown: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|kind| !EVENT_KINDS.contains(kind))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        return Err(ApiError::BadRequest(format!(
            "unknown event type {}; known: {}",
            unknown.join(", "),
            EVENT_KINDS.join(", ")
        )));
    }
    Ok(kinds)
}

impl Filter {
    fn new(query: EventsQuery) -> Result<Self, ApiError> {
        let kinds = query.events.as_deref().map(event_kinds).transpose()?;
        Ok(Filter {
            queue: query.queue.map(String::from),
            jid: query.jid.map(String::from),
            worker: query.worker.map(String::from),
            kinds,
        })
    }

    /// The SSE message for `event`, or `None` when it is filtered out.
    fn render(&self, event: &Arc<Event>) -> Option<SseEvent> {
        let (kind, data, fields) = match event.channel.as_str() {
            "log" => {
                let fields: Value = serde_json::from_str(&event.payload).ok()?;
                let kind = fields["event"].as_str()?.to_owned();
                (kind, event.payload.clone(), fields)
            }
            "track" | "untrack" => {
                let fields = json!({"jid": event.payload, "tracked": event.channel == "track"});
                ("tracking".to_owned(), fields.to_string(), fields)
            }
            channel if TRANSITIONS.contains(&channel) => {
                let fields = json!({"jid": event.payload, "transition": channel});
                ("tracked".to_owned(), fields.to_string(), fields)
            }
            // `w:<worker>` repeats the log's lock_lost/canceled events.
            _ => return None,
        };
        if let Some(kinds) = &self.kinds
            && !kinds.contains(&kind)
        {
            return None;
        }
        let field_is = |name: &str, wanted: &Option<String>| match wanted {
            None => true,
            Some(wanted) => fields[name].as_str() == Some(wanted.as_str()),
        };
        let queue_matches = match &self.queue {
            None => true,
            Some(queue) => {
                fields["queue"].as_str() == Some(queue.as_str())
                    || fields["to"].as_str() == Some(queue.as_str())
            }
        };
        if !(queue_matches && field_is("jid", &self.jid) && field_is("worker", &self.worker)) {
            return None;
        }
        Some(SseEvent::default().event(kind).data(data))
    }
}
