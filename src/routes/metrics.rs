//! `GET /metrics`: the process's registry (`crate::metrics`), then the figures read
//! from Redis at scrape time for the namespace the scrape addresses (cached in the state's `scrape`): jobs
//! per queue and state (the script's `queues`, so work done by any qless client
//! counts), paused queues, the oldest waiting job, failure groups and Redis memory
//! (`INFO memory`), cached for [`SCRAPE_CACHE`] so frequent scrapes of many queues
//! stay cheap for Redis; then this process's long-poll waiters.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::ApiError;
use crate::metrics::METRICS;
use crate::model::NamespaceName;
use crate::state::AppState;

/// How long a scrape's Redis figures are reused.
pub const SCRAPE_CACHE: Duration = Duration::from_secs(5);

/// The content type of OpenMetrics, served to scrapers that ask for it.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus's text format, served unless OpenMetrics is asked
/// for: what `promtool check metrics` and a plain `curl` read.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`: the process-wide metrics and this namespace's Redis figures, in
/// OpenMetrics when the `Accept` header names it, else in Prometheus's text format.
pub async fn serve(
    State(state): State<AppState>,
    seen: Option<axum::Extension<crate::auth::SeenNamespaces>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let redis = {
        let mut cached = state.scrape.cached.lock().await;
        match &*cached {
            Some((at, text)) if at.elapsed() < SCRAPE_CACHE => text.clone(),
            _ => match redis_figures(&state).await {
                Ok(text) => {
                    *cached = Some((Instant::now(), text.clone()));
                    text
                }
                // The gateway's own figures are still worth a scrape: Redis is down.
                Err(err) => {
                    tracing::warn!(%err, "metrics: cannot read Redis's figures");
                    redis_up(false)?
                }
            },
        }
    };
    let mut text = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode_registry(&mut text, METRICS.registry())
        .map_err(|err| ApiError::Internal(format!("encoding metrics: {err}")))?;
    text.push_str(&redis);
    text.push_str(&live_figures(&state)?);
    prometheus_client::encoding::text::encode_eof(&mut text)
        .map_err(|err| ApiError::Internal(format!("encoding metrics: {err}")))?;
    // A token granted some namespaces sees their series, and no others: the process's
    // counters hold every namespace's queues.
    if let Some(axum::Extension(crate::auth::SeenNamespaces(Some(granted)))) = seen {
        text = visible_to(&text, &granted);
    }
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    if openmetrics {
        Ok(([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response())
    } else {
        let text = prometheus_text(&text);
        Ok(([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response())
    }
}

/// The exposition `text` as a token granted the namespaces `granted` may see it: the
/// samples labelled with one of those namespaces; none without a `namespace` label
/// (HTTP, Redis calls, the process: they belong to every namespace at once); a
/// family's `#` lines only when one of its samples is shown.
fn visible_to(text: &str, granted: &[NamespaceName]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut header: Vec<&str> = Vec::new();
    let mut family_shown = false;
    for line in text.lines() {
        if line == "# EOF" {
            out.push_str("# EOF\n");
        } else if line.starts_with("# HELP ") {
            header.clear();
            header.push(line);
            family_shown = false;
        } else if line.starts_with('#') {
            if family_shown {
                out.push_str(line);
                out.push('\n');
            } else {
                header.push(line);
            }
        } else if namespace_of_sample(line).is_some_and(|ns| granted.iter().any(|g| g == ns)) {
            for kept in header.drain(..) {
                out.push_str(kept);
                out.push('\n');
            }
            family_shown = true;
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The value of a sample line's `namespace` label, if it has one.
fn namespace_of_sample(line: &str) -> Option<&str> {
    let labels = &line[line.find('{')? + 1..];
    let at = labels
        .match_indices("namespace=\"")
        .find(|(at, _)| *at == 0 || labels[..*at].ends_with(','))?
        .0;
    let value = &labels[at + "namespace=\"".len()..];
    // (Namespace names hold no quote or backslash, so no escape can end the value.)
    value.split('"').next()
}

/// An OpenMetrics exposition (what the registry encodes) in Prometheus's text format
/// 0.0.4: a counter's family takes the name of its samples (`foo_total`, where
/// OpenMetrics names the family `foo`), an info family becomes a gauge of its
/// `_info` sample, `unknown` is `untyped`, and the `# UNIT` and `# EOF` lines, which
/// that format does not have, go.
fn prometheus_text(openmetrics: &str) -> String {
    // Each family's kind, from its `# TYPE` line (which follows its `# HELP` line).
    let kinds: std::collections::HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let renamed = |name: &str| match kinds.get(name).copied() {
        Some("counter") if !name.ends_with("_total") => format!("{name}_total"),
        Some("info") => format!("{name}_info"),
        _ => name.to_owned(),
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some((name, kind)) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_once(' '))
        {
            let kind = match kind {
                "info" => "gauge",
                "unknown" => "untyped",
                other => other,
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
        } else if let Some((name, help)) = line
            .strip_prefix("# HELP ")
            .and_then(|rest| rest.split_once(' '))
        {
            out.push_str(&format!("# HELP {} {help}\n", renamed(name)));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueState {
    namespace: String,
    queue: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceQueue {
    namespace: String,
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceGroup {
    namespace: String,
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabel {
    namespace: String,
}

fn namespace_of(state: &AppState) -> String {
    state
        .qless
        .namespace_key()
        .map(|key| {
            key.trim_start_matches("ql:{")
                .trim_end_matches('}')
                .to_owned()
        })
        .unwrap_or_default()
}

/// `qless_redis_up`, alone.
fn redis_up(up: bool) -> Result<String, ApiError> {
    let mut registry = Registry::default();
    let gauge = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    gauge.set(i64::from(up));
    registry.register("qless_redis_up", "1 when Redis answered the scrape", gauge);
    let mut text = String::new();
    prometheus_client::encoding::text::encode_registry(&mut text, &registry)
        .map_err(|err| ApiError::Internal(format!("encoding metrics: {err}")))?;
    Ok(text)
}

/// Figures read from Redis: two script calls and one `INFO memory`.
async fn redis_figures(state: &AppState) -> Result<String, ApiError> {
    let namespace = namespace_of(state);
    let now = state.clock.now();
    let queues = state.qless.queues(now).await?;
    let failed = state.qless.failed(now).await?;
    let memory = state.qless.memory().await?;
    let mut registry = Registry::default();
    let jobs = Family::<QueueState, Gauge>::default();
    let paused = Family::<NamespaceQueue, Gauge>::default();
    for counts in &queues {
        for (name, value) in [
            ("waiting", counts.waiting),
            ("running", counts.running),
            ("scheduled", counts.scheduled),
            ("stalled", counts.stalled),
            ("depends", counts.depends),
            ("recurring", counts.recurring),
        ] {
            jobs.get_or_create(&QueueState {
                namespace: namespace.clone(),
                queue: counts.name.clone(),
                state: name,
            })
            .set(value);
        }
        paused
            .get_or_create(&NamespaceQueue {
                namespace: namespace.clone(),
                queue: counts.name.clone(),
            })
            .set(i64::from(counts.paused));
    }
    let oldest = Family::<NamespaceQueue, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    for (queue, put) in state.qless.oldest_waiting(now).await? {
        oldest
            .get_or_create(&NamespaceQueue {
                namespace: namespace.clone(),
                queue,
            })
            .set((now - put).max(0.0));
    }
    registry.register(
        "qless_queue_oldest_waiting_seconds",
        "Age of the job next in line per queue (its oldest waiting job when priorities \
         are equal), for queues with a waiting job",
        oldest,
    );
    registry.register("qless_queue_jobs", "Jobs per queue and state", jobs);
    registry.register("qless_queue_paused", "1 when the queue is paused", paused);
    let groups = Family::<NamespaceGroup, Gauge>::default();
    for (group, count) in failed {
        groups
            .get_or_create(&NamespaceGroup {
                namespace: namespace.clone(),
                group,
            })
            .set(count);
    }
    registry.register("qless_failed_jobs", "Failed jobs per failure group", groups);
    let used = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    used.set(i64::try_from(memory.used).unwrap_or(i64::MAX));
    registry.register(
        "qless_redis_memory_used_bytes",
        "Memory Redis uses (INFO memory used_memory)",
        used,
    );
    let max = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    max.set(i64::try_from(memory.max).unwrap_or(i64::MAX));
    registry.register(
        "qless_redis_memory_max_bytes",
        "Redis's memory limit (maxmemory; 0: none)",
        max,
    );
    let mut text = redis_up(true)?;
    prometheus_client::encoding::text::encode_registry(&mut text, &registry)
        .map_err(|err| ApiError::Internal(format!("encoding metrics: {err}")))?;
    Ok(text)
}

/// Figures of this process, read at every scrape.
fn live_figures(state: &AppState) -> Result<String, ApiError> {
    let mut registry = Registry::default();
    let waiters = Family::<NamespaceLabel, Gauge>::default();
    waiters
        .get_or_create(&NamespaceLabel {
            namespace: namespace_of(state),
        })
        .set(i64::try_from(state.leasing.waiting()).unwrap_or(i64::MAX));
    registry.register(
        "qless_longpoll_waiters",
        "Pop requests waiting for jobs",
        waiters,
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode_registry(&mut text, &registry)
        .map_err(|err| ApiError::Internal(format!("encoding metrics: {err}")))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_sees_only_the_series_of_its_namespaces() {
        let text = "\
# HELP qless_jobs Jobs.
# TYPE qless_jobs counter
qless_jobs_total{namespace=\"a\",queue=\"q\",event=\"put\"} 1
qless_jobs_total{namespace=\"b\",queue=\"q\",event=\"put\"} 2
# HELP http Requests.
# TYPE http counter
http_total{route=\"/v1/queues\"} 3
# HELP waits Waits.
# TYPE waits histogram
waits_bucket{namespace=\"a\",le=\"1\"} 1
waits_count{namespace=\"a\"} 1
# HELP tricky Names that end in namespace.
# TYPE tricky gauge
tricky{subnamespace=\"b\"} 1
# EOF
";
        let shown = visible_to(text, &["b".parse().unwrap()]);
        assert_eq!(
            shown,
            "\
# HELP qless_jobs Jobs.
# TYPE qless_jobs counter
qless_jobs_total{namespace=\"b\",queue=\"q\",event=\"put\"} 2
# EOF
"
        );
        let shown = visible_to(text, &["a".parse().unwrap()]);
        assert!(shown.contains("waits_bucket") && !shown.contains("namespace=\"b\""));
    }

    #[test]
    fn counters_and_infos_are_named_as_their_samples_in_prometheus_text() {
        let openmetrics = "\
# HELP qless_jobs Jobs through this gateway.
# TYPE qless_jobs counter
qless_jobs_total{queue=\"q\"} 3
# HELP http_seconds Request time.
# TYPE http_seconds histogram
# UNIT http_seconds seconds
http_seconds_bucket{le=\"+Inf\"} 1
http_seconds_sum 0.5
http_seconds_count 1
# HELP build Build information.
# TYPE build info
build_info{version=\"1\"} 1
# HELP odd Something.
# TYPE odd unknown
odd 1
# EOF
";
        let text = prometheus_text(openmetrics);
        assert_eq!(
            text,
            "\
# HELP qless_jobs_total Jobs through this gateway.
# TYPE qless_jobs_total counter
qless_jobs_total{queue=\"q\"} 3
# HELP http_seconds Request time.
# TYPE http_seconds histogram
http_seconds_bucket{le=\"+Inf\"} 1
http_seconds_sum 0.5
http_seconds_count 1
# HELP build_info Build information.
# TYPE build_info gauge
build_info{version=\"1\"} 1
# HELP odd Something.
# TYPE odd untyped
odd 1
"
        );
    }
}
