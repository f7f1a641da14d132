//! `/v1/queues/{queue}/push`: a queue worked by an HTTP endpoint that qlessd calls
//! (push delivery, `src/push/`): subscribe, show, stop, rotate the signing secret.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path};
use crate::core::push::{PushConfig, PushRate};
use crate::error::ApiError;
use crate::model::{
    PayloadTooLarge, Problem, PushSettings, PushSubscription, QueueName, RotatePushRequest,
    SetPushRequest, ThrottleRate, Unavailable,
};
use crate::push::{endpoint, shown, signature};
use crate::state::AppState;

/// Longest endpoint URL.
const MOST_URL_BYTES: usize = 2048;
/// Most static headers, and the longest name and value.
const MOST_HEADERS: usize = 20;
const MOST_HEADER_NAME: usize = 64;
const MOST_HEADER_VALUE: usize = 1024;
/// Longest grace a rotated-out secret may have (30 days), and the default (a day).
const MOST_GRACE: u64 = 30 * 86_400;
const DEFAULT_GRACE: u64 = 86_400;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_push, set_push, delete_push))
        .routes(routes!(rotate_push_secret))
}

/// Subscribe a queue to an endpoint, or change its settings.
///
/// From then on qlessd POSTs each of the queue's jobs to `url`, signed (Standard
/// Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`), within
/// `concurrency` and `rate` across every qlessd on the namespace. A 2xx answer
/// completes the job (a JSON body becomes its `result`); 429 or 503 with
/// `Retry-After` retries it after that delay; another 5xx, 408, a timeout or a
/// connection error retries it with its backoff, failing it into `push-http-<status>`,
/// `push-timeout`, `push-connect` or `push-tls` when its retries are used up; any other
/// 4xx fails it at once into `push-http-<status>`. The first PUT answers 201 with the
/// signing secret, shown only then; a later PUT changes the settings, keeps the
/// secret and answers 200 without it.
#[utoipa::path(put, path = "/v1/queues/{queue}/push", tag = "push",
    operation_id = "set_queue_push",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    request_body = SetPushRequest,
    responses(
        (status = 201, description = "The queue is pushed from now on; `secret` is its \
         signing secret, shown this once", body = PushSubscription),
        (status = 200, description = "The settings changed; the secrets are kept \
         (`secret` is null)", body = PushSubscription),
        (status = 400, description = "A malformed body, a URL that is not http(s), \
         carries a user name, or is on a non-public address (see \
         `--push-allow-private`), a setting out of range, or a reserved header",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn set_push(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Json(body): Json<SetPushRequest>,
) -> Result<(StatusCode, Json<PushSubscription>), ApiError> {
    let config = push_config(body)?;
    endpoint::check(&config.url, state.limits.push)
        .await
        .map_err(|err| ApiError::BadRequest(err.to_string()))?;
    let secret = signature::new_secret();
    let now = state.clock.now();
    let created = state
        .qless
        .push_set(now, queue.as_str(), &config, &secret)
        .await?;
    state.pushes_changed.changed();
    let settings = read(&state, &queue).await?;
    let (status, secret) = if created {
        (StatusCode::CREATED, Some(secret.expose().to_owned()))
    } else {
        (StatusCode::OK, None)
    };
    Ok((status, Json(PushSubscription { secret, settings })))
}

/// A pushed queue's settings, secrets' fingerprints and counts.
#[utoipa::path(get, path = "/v1/queues/{queue}/push", tag = "push",
    operation_id = "get_queue_push",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The queue's push settings", body = PushSettings),
        (status = 400, description = "The name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The queue is not pushed", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_push(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<Json<PushSettings>, ApiError> {
    Ok(Json(read(&state, &queue).await?))
}

/// Stop pushing a queue.
///
/// Deliveries in flight end as they would have; the queue's jobs stay, and pull
/// workers lease them as before.
#[utoipa::path(delete, path = "/v1/queues/{queue}/push", tag = "push",
    operation_id = "delete_queue_push",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 204, description = "The queue is no longer pushed"),
        (status = 400, description = "The name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The queue was not pushed", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn delete_push(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<StatusCode, ApiError> {
    if state
        .qless
        .push_forget(state.clock.now(), queue.as_str())
        .await?
    {
        state.pushes_changed.changed();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_pushed(&queue))
    }
}

/// Make a new signing secret.
///
/// Answers it, this once. Every delivery is signed with both the new and the old
/// secret (two entries in `webhook-signature`) until `grace` seconds have passed;
/// then only with the new one.
#[utoipa::path(post, path = "/v1/queues/{queue}/push/rotate", tag = "push",
    operation_id = "rotate_queue_push_secret",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    request_body(content = Option<RotatePushRequest>, description = "Optional; without it \
        the old secret signs for a day more"),
    responses(
        (status = 200, description = "The new secret, shown this once, and the settings",
         body = PushSubscription),
        (status = 400, description = "A malformed body or a grace out of range, or an \
         invalid name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The queue is not pushed", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn rotate_push_secret(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    body: Option<Json<RotatePushRequest>>,
) -> Result<Json<PushSubscription>, ApiError> {
    let grace = body.and_then(|Json(b)| b.grace).unwrap_or(DEFAULT_GRACE);
    if grace > MOST_GRACE {
        return Err(ApiError::BadRequest(format!(
            "grace must be 0 to {MOST_GRACE} seconds"
        )));
    }
    let secret = signature::new_secret();
    let rotated = state
        .qless
        .push_rotate(state.clock.now(), queue.as_str(), &secret, grace)
        .await?;
    if !rotated {
        return Err(not_pushed(&queue));
    }
    state.pushes_changed.changed();
    let settings = read(&state, &queue).await?;
    Ok(Json(PushSubscription {
        secret: Some(secret.expose().to_owned()),
        settings,
    }))
}

/// The checked settings of a request.
fn push_config(body: SetPushRequest) -> Result<PushConfig, ApiError> {
    let bad = |message: String| Err(ApiError::BadRequest(message));
    if body.url.len() > MOST_URL_BYTES {
        return bad(format!("url must be at most {MOST_URL_BYTES} bytes"));
    }
    endpoint::check_form(&body.url).map_err(|err| ApiError::BadRequest(err.to_string()))?;
    let timeout = body.timeout.unwrap_or(30);
    if !(1..=900).contains(&timeout) {
        return bad("timeout must be 1 to 900 seconds".to_owned());
    }
    let concurrency = body.concurrency.unwrap_or(10);
    if !(1..=10_000).contains(&concurrency) {
        return bad("concurrency must be 1 to 10000".to_owned());
    }
    let rate = match body.rate {
        Some(ThrottleRate { jobs, seconds }) => {
            if jobs == 0 {
                return bad("rate.jobs must be at least 1".to_owned());
            }
            if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
                return bad("rate.seconds must be above 0 and at most 86400".to_owned());
            }
            Some(PushRate { jobs, seconds })
        }
        None => None,
    };
    let headers = body.headers.unwrap_or_default();
    if headers.len() > MOST_HEADERS {
        return bad(format!("at most {MOST_HEADERS} headers"));
    }
    let mut checked = BTreeMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if name.is_empty()
            || name.len() > MOST_HEADER_NAME
            || axum::http::HeaderName::from_bytes(lower.as_bytes()).is_err()
        {
            return bad(format!(
                "header name {name:?} is not a valid HTTP header name"
            ));
        }
        if reserved(&lower) {
            return bad(format!("header {lower} is set by qlessd itself"));
        }
        if value.len() > MOST_HEADER_VALUE || axum::http::HeaderValue::from_str(&value).is_err() {
            return bad(format!(
                "header {lower}'s value must be visible ASCII text of at most \
                 {MOST_HEADER_VALUE} bytes"
            ));
        }
        if checked.insert(lower.clone(), value).is_some() {
            return bad(format!("header {lower} is given twice"));
        }
    }
    Ok(PushConfig {
        url: body.url,
        timeout,
        concurrency,
        rate,
        headers: checked,
    })
}

/// Headers qlessd sets on every delivery, or that belong to the connection.
fn reserved(name: &str) -> bool {
    matches!(
        name,
        "content-type"
            | "content-length"
            | "content-encoding"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "upgrade"
            | "te"
            | "trailer"
            | "host"
            | "user-agent"
            | "traceparent"
            | "tracestate"
            | "expect"
    ) || name.starts_with("webhook-")
        || name.starts_with("qlessd-")
        || name.starts_with("proxy-")
}

/// The queue's settings as they may be shown, or 404.
async fn read(state: &AppState, queue: &QueueName) -> Result<PushSettings, ApiError> {
    match state
        .qless
        .push_get(state.clock.now(), queue.as_str())
        .await?
    {
        Some(pushed) => Ok(shown::settings(pushed)),
        None => Err(not_pushed(queue)),
    }
}

fn not_pushed(queue: &QueueName) -> ApiError {
    ApiError::NotFound(format!("Queue {queue} is not pushed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: serde_json::Value) -> SetPushRequest {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn bad_settings_are_refused_with_what_is_wrong() {
        let long = format!("https://example.com/{}", "a".repeat(2048));
        let many: BTreeMap<String, String> = (0..21)
            .map(|i| (format!("x-h{i}"), "v".to_owned()))
            .collect();
        for (body, needle) in [
            (
                serde_json::json!({"url": "ftp://example.com"}),
                "http or https",
            ),
            (
                serde_json::json!({"url": "https://u:p@example.com"}),
                "user name",
            ),
            (serde_json::json!({"url": long}), "at most 2048"),
            (
                serde_json::json!({"url": "https://example.com", "timeout": 0}),
                "timeout",
            ),
            (
                serde_json::json!({"url": "https://example.com", "timeout": 901}),
                "timeout",
            ),
            (
                serde_json::json!({"url": "https://example.com", "concurrency": 0}),
                "concurrency",
            ),
            (
                serde_json::json!({"url": "https://example.com", "rate": {"jobs": 0, "seconds": 1}}),
                "rate.jobs",
            ),
            (
                serde_json::json!({"url": "https://example.com", "rate": {"jobs": 1, "seconds": 0}}),
                "rate.seconds",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": {"webhook-id": "x"}}),
                "set by qlessd",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": {"Content-Type": "x"}}),
                "set by qlessd",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": {"x bad": "x"}}),
                "valid HTTP header name",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": {"x-a": "line\nbreak"}}),
                "visible ASCII",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": {"X-A": "1", "x-a": "2"}}),
                "twice",
            ),
            (
                serde_json::json!({"url": "https://example.com", "headers": many}),
                "at most 20",
            ),
        ] {
            let err = push_config(request(body.clone())).unwrap_err();
            assert!(err.to_string().contains(needle), "{body}: {err}");
        }
    }

    #[test]
    fn defaults_fill_what_is_left_out() {
        let config =
            push_config(request(serde_json::json!({"url": "https://example.com/h"}))).unwrap();
        assert_eq!((config.timeout, config.concurrency), (30, 10));
        assert!(config.rate.is_none() && config.headers.is_empty());
    }
}
