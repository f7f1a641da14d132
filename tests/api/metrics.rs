//! `/metrics`: the fixed metric names in a real scrape, counted as work passes through
//! the gateway and read from Redis; and the access log's one line per request.

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::header;
use serde_json::{Value, json};

use crate::support::app::TestApp;

/// The value of the sample `series` (name and labels exactly as exposed), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split(' ').next()?.parse().ok()
    })
}

/// Puts `jid` on `queue`.
async fn put(app: &TestApp, queue: &str, jid: &str) {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/jobs"),
            json!({"jid": jid, "klass": "K", "data": {}}),
        )
        .await;
    assert!(response.status.is_success(), "{}", response.text);
}

#[tokio::test]
async fn a_scrape_names_every_fixed_metric_with_counts_from_redis_and_the_gateway() {
    let app = TestApp::start().await;
    // A queue name no other test uses: the gateway's counters are process-wide.
    let queue = "metrics-scrape";
    put(&app, queue, "m1").await;
    put(&app, queue, "m2").await;
    put(&app, queue, "m3").await;
    app.clock.advance(2.0);
    let popped = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": "w", "count": 2}),
        )
        .await;
    assert!(popped.status.is_success(), "{}", popped.text);
    let jids: Vec<String> = popped.body["jobs"]
        .as_array()
        .or(popped.body.as_array())
        .expect("popped jobs")
        .iter()
        .map(|job| job["jid"].as_str().expect("jid").to_owned())
        .collect();
    assert_eq!(jids.len(), 2, "{}", popped.text);
    let completed = app
        .post(
            &format!("/v1/jobs/{}/complete", jids[0]),
            json!({"worker": "w", "queue": queue}),
        )
        .await;
    assert!(completed.status.is_success(), "{}", completed.text);
    let failed = app
        .post(
            &format!("/v1/jobs/{}/fail", jids[1]),
            json!({"worker": "w", "group": "metrics-boom", "message": "it broke"}),
        )
        .await;
    assert!(failed.status.is_success(), "{}", failed.text);

    let scrape = openmetrics_scrape(&app).await;
    assert_eq!(scrape.status.as_u16(), 200, "{}", scrape.text);
    let content_type = scrape.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(content_type.contains("openmetrics-text"), "{content_type}");
    let text = &scrape.text;
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");

    let state = |name: &str| {
        sample(
            text,
            &format!("qless_queue_jobs{{namespace=\"\",queue=\"{queue}\",state=\"{name}\"}}"),
        )
    };
    assert_eq!(state("waiting"), Some(1.0), "{text}");
    assert_eq!(state("running"), Some(0.0), "{text}");
    for name in ["scheduled", "stalled", "depends", "recurring"] {
        assert_eq!(state(name), Some(0.0), "{name}: {text}");
    }
    assert_eq!(
        sample(
            text,
            &format!("qless_queue_paused{{namespace=\"\",queue=\"{queue}\"}}")
        ),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(
            text,
            "qless_failed_jobs{namespace=\"\",group=\"metrics-boom\"}"
        ),
        Some(1.0),
        "{text}"
    );
    let counted = |event: &str| {
        sample(
            text,
            &format!("qless_jobs_total{{namespace=\"\",queue=\"{queue}\",event=\"{event}\"}}"),
        )
    };
    assert_eq!(counted("put"), Some(3.0), "{text}");
    assert_eq!(counted("popped"), Some(2.0), "{text}");
    assert_eq!(counted("completed"), Some(1.0), "{text}");
    // A fail names no queue: it counts under the queue the job was leased from.
    assert_eq!(counted("failed"), Some(1.0), "{text}");
    // Two seconds passed between the puts and the pop: both waits are in the
    // bucket up to 2.56 s and not in the one up to 0.64 s.
    assert_eq!(
        sample(
            text,
            &format!("qless_job_wait_seconds_count{{namespace=\"\",queue=\"{queue}\"}}")
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            text,
            &format!("qless_job_wait_seconds_sum{{namespace=\"\",queue=\"{queue}\"}}")
        ),
        Some(4.0),
        "{text}"
    );
    // The route is the template, never the raw path.
    assert!(
        text.contains(
            "http_server_request_duration_seconds_count{method=\"POST\",route=\"/v1/jobs/{jid}/complete\",status=\"200\"}"
        ),
        "{text}"
    );
    assert!(
        !text.contains(&format!("route=\"/v1/jobs/{}", jids[0])),
        "{text}"
    );
    for name in [
        "qless_job_run_seconds",
        "qless_redis_call_duration_seconds_count{command=\"put\"}",
        "qless_redis_group_size_count",
        "qless_longpoll_waiters{namespace=\"\"} 0",
        "qless_event_stream_clients",
        "qless_sweeper_runs_total",
        "qless_sweeper_duration_seconds",
        "qless_embedded_redis_restarts_total",
        "qless_spans_dropped_total",
        "qless_redis_memory_used_bytes",
        "qless_redis_memory_max_bytes",
    ] {
        assert!(text.contains(name), "{name} missing: {text}");
    }
    assert!(
        sample(text, "qless_redis_memory_used_bytes").unwrap_or(0.0) > 0.0,
        "{text}"
    );
}

#[tokio::test]
async fn redis_figures_are_cached_between_close_scrapes() {
    let app = TestApp::start().await;
    put(&app, "metrics-cache", "c1").await;
    let first = app.get("/metrics").await;
    let series = "qless_queue_jobs{namespace=\"\",queue=\"metrics-cache\",state=\"waiting\"}";
    assert_eq!(sample(&first.text, series), Some(1.0), "{}", first.text);
    put(&app, "metrics-cache", "c2").await;
    let second = app.get("/metrics").await;
    assert_eq!(sample(&second.text, series), Some(1.0), "{}", second.text);
}

#[tokio::test]
async fn metrics_need_a_token_with_the_read_scope() {
    let digest = |secret: &str| -> String {
        use sha2::Digest;
        sha2::Sha256::digest(secret.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    };
    let file = format!(
        "[[tokens]]\nname = \"reader\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n\
         [[tokens]]\nname = \"producer\"\nsha256 = \"{}\"\nscopes = [\"produce\"]\n",
        digest("secret-reader"),
        digest("secret-producer")
    );
    let app = TestApp::start_with_auth(None, &file).await;
    let scrape = |token: Option<&'static str>| {
        let mut request = axum::http::Request::get("/metrics");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        app.send(request.body(axum::body::Body::empty()).unwrap())
    };
    scrape(None).await.assert_problem(401, "unauthorized");
    scrape(Some("secret-producer"))
        .await
        .assert_problem(403, "forbidden");
    let read = scrape(Some("secret-reader")).await;
    assert_eq!(read.status.as_u16(), 200, "{}", read.text);
    assert!(
        read.text.contains("qless_redis_memory_used_bytes"),
        "{}",
        read.text
    );
}

/// Captured log output.
#[derive(Clone, Default)]
pub(super) struct Captured(pub(super) Arc<Mutex<Vec<u8>>>);

thread_local! {
    /// Where the log lines of events on this thread go, while a test captures them.
    static CAPTURE: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// The global subscriber's writer: this thread's capture, if any, else nowhere.
struct ThreadCapture;

impl Write for ThreadCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|capture| {
            if let Some(captured) = &*capture.borrow() {
                captured.0.lock().unwrap().extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures the JSON log lines of the events emitted on this thread until the guard
/// drops. The subscriber is global (installed once for the test binary) rather than
/// a thread's default: tracing caches per call site whether anyone listens, and with
/// only a thread-local subscriber another test's thread could cache "nobody" for the
/// access log at the very moment this one starts, losing its lines.
pub(super) fn capture_logs() -> (Captured, impl Drop) {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(|| ThreadCapture)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the test binary's subscriber");
    });
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            CAPTURE.with(|capture| capture.borrow_mut().take());
        }
    }
    let captured = Captured::default();
    CAPTURE.with(|capture| *capture.borrow_mut() = Some(captured.clone()));
    (captured, Stop)
}

#[tokio::test]
async fn every_request_leaves_one_access_log_line_with_its_route_status_and_id() {
    let app = TestApp::start().await;
    let (captured, _capturing) = capture_logs();
    put(&app, "metrics-log", "l1").await;
    let fetched = app.get("/v1/jobs/l1").await;
    assert_eq!(fetched.status.as_u16(), 200);
    let missing = app.get("/v1/jobs/nope").await;
    assert_eq!(missing.status.as_u16(), 404);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "qlessd::access")
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let fields = |at: usize| &lines[at]["fields"];
    assert_eq!(fields(0)["method"], "POST", "{text}");
    assert_eq!(fields(0)["route"], "/v1/queues/{queue}/jobs", "{text}");
    assert_eq!(fields(1)["route"], "/v1/jobs/{jid}", "{text}");
    assert_eq!(fields(1)["status"], 200, "{text}");
    assert_eq!(fields(2)["status"], 404, "{text}");
    assert!(fields(1)["bytes"].as_u64().unwrap() > 0, "{text}");
    assert!(fields(1)["latency_ms"].as_f64().is_some(), "{text}");
    // Whole microseconds, written as such (not 0.5098929999999999).
    assert!(
        fields(1)["latency_ms"]
            .to_string()
            .split('.')
            .nth(1)
            .is_none_or(|d| d.len() <= 3),
        "{text}"
    );
    assert_eq!(
        fields(1)["id"],
        fetched.headers["x-request-id"].to_str().unwrap(),
        "{text}"
    );
}

/// The metric names an expression uses (PromQL identifiers of ours, without the
/// `_bucket`/`_count`/`_sum` a histogram's series add).
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.starts_with("qless_") || word.starts_with("http_server_"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_alert_rules_and_dashboard_parse_and_name_only_metrics_a_scrape_has() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let read = |path: &str| -> Value {
        let text = std::fs::read_to_string(root.join(path)).expect("the file");
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
    };
    let mut exprs: Vec<String> = Vec::new();
    let rules = read("prometheus/qlessd-alerts.json");
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            assert!(rule["alert"].is_string(), "{rule}");
            assert!(rule["annotations"]["summary"].is_string(), "{rule}");
            exprs.push(rule["expr"].as_str().expect("expr").to_owned());
        }
    }
    assert!(exprs.len() >= 6, "{exprs:?}");
    let dashboard = read("grafana/qlessd-dashboard.json");
    let mut watched = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            // Every query follows the dashboard's namespace choice (process figures
            // through the instances that serve the namespaces chosen).
            assert!(expr.contains("$namespace"), "{expr} ignores the namespace");
            watched.extend(metric_names(expr));
            exprs.push(expr.to_owned());
        }
    }
    for alerted in ["qless_queue_oldest_waiting_seconds", "qless_queue_paused"] {
        assert!(
            watched.iter().any(|name| name == alerted),
            "no panel shows {alerted}, which the alerts use"
        );
    }

    // A scrape with every kind of series present: jobs put, popped, completed, failed.
    let app = TestApp::start().await;
    put(&app, "metrics-deploy", "d1").await;
    put(&app, "metrics-deploy", "d2").await;
    let popped = app
        .post(
            "/v1/queues/metrics-deploy/pop",
            json!({"worker": "w", "count": 2}),
        )
        .await;
    assert!(popped.status.is_success(), "{}", popped.text);
    let complete = app
        .post(
            "/v1/jobs/d1/complete",
            json!({"worker": "w", "queue": "metrics-deploy"}),
        )
        .await;
    assert!(complete.status.is_success(), "{}", complete.text);
    let fail = app
        .post(
            "/v1/jobs/d2/fail",
            json!({"worker": "w", "group": "deploy-boom", "message": "no"}),
        )
        .await;
    assert!(fail.status.is_success(), "{}", fail.text);
    // And one left waiting, for the oldest-waiting gauge.
    put(&app, "metrics-deploy", "d3").await;
    let scrape = app.get("/metrics").await;
    let exposed: Vec<&str> = scrape
        .text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .collect();
    for expr in &exprs {
        let names = metric_names(expr);
        // (Prometheus's own `up` of the scrape job is the one other metric named.)
        assert!(
            !names.is_empty() || expr.starts_with("up{job=\"qlessd\"}"),
            "no metric in {expr}"
        );
        for name in names {
            assert!(
                exposed.contains(&name.as_str()),
                "{name} (in {expr}) is not in a scrape:\n{}",
                scrape.text
            );
        }
    }
}

#[tokio::test]
async fn with_redis_down_a_scrape_still_answers_and_says_so() {
    let mut app = TestApp::start().await;
    // A request served before Redis went away: its figures must still be scraped.
    // (Families with no sample yet are left out of a scrape, so without it the last
    // assertion would hold only when other tests in the process had made requests.)
    assert_eq!(app.get("/v1/queues").await.status.as_u16(), 200);
    app.kill_redis();
    let scrape = app.get("/metrics").await;
    assert_eq!(scrape.status.as_u16(), 200, "{}", scrape.text);
    assert_eq!(
        sample(&scrape.text, "qless_redis_up"),
        Some(0.0),
        "{}",
        scrape.text
    );
    assert!(
        scrape.text.contains("http_server_request_duration_seconds"),
        "{}",
        scrape.text
    );
}

#[tokio::test]
async fn batch_puts_and_completions_that_lease_the_next_job_are_counted_too() {
    let app = TestApp::start().await;
    // A queue name no other test uses: the gateway's counters are process-wide.
    let queue = "metrics-chained";
    let batch = app
        .post(
            &format!("/v1/queues/{queue}/jobs/batch"),
            json!({"jobs": [{"jid": "c1", "klass": "K"}, {"jid": "c2", "klass": "K"}]}),
        )
        .await;
    assert!(batch.status.is_success(), "{}", batch.text);
    let popped = app
        .post(&format!("/v1/queues/{queue}/pop"), json!({"worker": "w"}))
        .await;
    let first = popped.body[0]["jid"]
        .as_str()
        .expect("a leased job")
        .to_owned();
    let chained = app
        .post(
            &format!("/v1/jobs/{first}/complete"),
            json!({"worker": "w", "queue": queue, "pop": {"count": 1}}),
        )
        .await;
    assert_eq!(
        chained.body["popped"].as_array().map(Vec::len),
        Some(1),
        "{}",
        chained.text
    );

    let scrape = app.get("/metrics").await;
    let count = |event: &str| {
        sample(
            &scrape.text,
            &format!("qless_jobs_total{{namespace=\"\",queue=\"{queue}\",event=\"{event}\"}}"),
        )
    };
    assert_eq!(count("put"), Some(2.0), "{}", scrape.text);
    assert_eq!(count("popped"), Some(2.0), "{}", scrape.text);
    assert_eq!(count("completed"), Some(1.0), "{}", scrape.text);
}

#[tokio::test]
async fn the_oldest_waiting_gauge_is_the_age_of_the_job_next_in_line() {
    let app = TestApp::start().await;
    app.clock.set(1000.0);
    put(&app, "aging", "first").await;
    app.clock.set(1030.0);
    put(&app, "aging", "second").await;
    put(&app, "idle", "gone").await;
    let popped = app
        .post("/v1/queues/idle/pop", json!({"worker": "w"}))
        .await;
    assert!(popped.status.is_success(), "{}", popped.text);
    app.clock.set(1100.0);
    let scrape = app.get("/metrics").await;
    let series: Vec<&str> = scrape
        .text
        .lines()
        .filter(|line| line.starts_with("qless_queue_oldest_waiting_seconds{"))
        .collect();
    assert_eq!(
        series.len(),
        1,
        "only queues with a waiting job: {series:?}"
    );
    assert!(series[0].contains("queue=\"aging\""), "{series:?}");
    let age: f64 = series[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert!(
        (age - 100.0).abs() < 0.01,
        "the first put is 100 s old: {series:?}"
    );
}

#[tokio::test]
async fn a_tenants_job_counters_and_waits_carry_its_namespace() {
    let app = TestApp::start_with(Some("metrics-tenant")).await;
    let queue = "metrics-tenant-q";
    put(&app, queue, "t1").await;
    app.clock.advance(1.0);
    let popped = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": "w", "count": 1}),
        )
        .await;
    assert!(popped.status.is_success(), "{}", popped.text);
    let failed = app
        .post(
            "/v1/jobs/t1/fail",
            json!({"worker": "w", "group": "g", "message": "no"}),
        )
        .await;
    assert!(failed.status.is_success(), "{}", failed.text);

    let scrape = app.get("/metrics").await;
    let labels = format!("namespace=\"metrics-tenant\",queue=\"{queue}\"");
    for event in ["put", "popped", "failed"] {
        assert_eq!(
            sample(
                &scrape.text,
                &format!("qless_jobs_total{{{labels},event=\"{event}\"}}")
            ),
            Some(1.0),
            "{event}: {}",
            scrape.text
        );
    }
    assert_eq!(
        sample(
            &scrape.text,
            &format!("qless_job_wait_seconds_count{{{labels}}}")
        ),
        Some(1.0),
        "{}",
        scrape.text
    );
    // Nothing of the tenant's is counted without its namespace.
    assert!(
        !scrape
            .text
            .contains(&format!("namespace=\"\",queue=\"{queue}\"")),
        "{}",
        scrape.text
    );
}

/// A job leased through this gateway and then ended by another client of the same
/// Redis (another qlessd, a stock qless client) leaves the gateway's record of its
/// leases: the script announces every job's end to every gateway. (Before, such a
/// lease stayed until a restart, and once 100,000 had piled up no run was timed.)
#[tokio::test]
async fn a_job_ended_through_another_client_leaves_the_gateways_leases() {
    let namespace = "leased-ends";
    let app = TestApp::start_with(Some(namespace)).await;
    assert!(
        app.state
            .events
            .wait_subscribed(std::time::Duration::from_secs(10))
            .await
    );
    let queue = "leased-ends-q";
    put(&app, queue, "ended-1").await;
    put(&app, queue, "ended-2").await;
    let gauge = format!("qless_leased_jobs{{namespace=\"{namespace}\"}}");
    let leases = async || sample(&app.get("/metrics").await.text, &gauge);
    // Another client's call: the script by its SHA on a connection of its own.
    let elsewhere = |command: &str, args: &[&str]| {
        let mut conn = app.redis.client().get_connection().unwrap();
        redis::cmd("EVALSHA")
            .arg(app.qless.script().sha())
            .arg(1)
            .arg(format!("ql:{{{namespace}}}"))
            .arg(command)
            .arg(crate::support::app::START + 10.0)
            .arg(args)
            .query::<redis::Value>(&mut conn)
            .unwrap();
    };
    for end in ["cancel", "complete"] {
        let popped = app
            .post(
                &format!("/v1/queues/{queue}/pop"),
                json!({"worker": "w", "count": 1}),
            )
            .await;
        let jid = popped.body[0]["jid"]
            .as_str()
            .expect(&popped.text)
            .to_owned();
        let jid = jid.as_str();
        assert_eq!(leases().await, Some(1.0), "{jid}");
        match end {
            "cancel" => elsewhere("cancel", &[jid]),
            _ => elsewhere("complete", &[jid, "w", queue, "{}"]),
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while leases().await != Some(0.0) {
            assert!(
                std::time::Instant::now() < deadline,
                "{jid} is still held as leased after its {end} elsewhere"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// A scrape asking for OpenMetrics, as Prometheus does.
async fn openmetrics_scrape(app: &TestApp) -> crate::support::TestResponse {
    let request = axum::http::Request::get("/metrics")
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    app.send(request).await
}

#[tokio::test]
async fn a_scrape_not_asking_for_openmetrics_is_prometheus_text_that_promtool_accepts() {
    let app = TestApp::start().await;
    let queue = "metrics-promtool";
    put(&app, queue, "p1").await;
    put(&app, queue, "p2").await;
    let popped = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": "w", "count": 2}),
        )
        .await;
    assert!(popped.status.is_success(), "{}", popped.text);
    for (jid, end, body) in [
        ("p1", "complete", json!({"worker": "w", "queue": queue})),
        (
            "p2",
            "fail",
            json!({"worker": "w", "group": "g", "message": "m"}),
        ),
    ] {
        let ended = app.post(&format!("/v1/jobs/{jid}/{end}"), body).await;
        assert!(ended.status.is_success(), "{}", ended.text);
    }
    let scrape = app.get("/metrics").await;
    assert_eq!(scrape.status.as_u16(), 200, "{}", scrape.text);
    let content_type = scrape.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = &scrape.text;
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
    assert!(text.contains("# TYPE qless_jobs_total counter"), "{text}");
    assert!(text.contains("# HELP qless_jobs_total "), "{text}");

    let test = "a_scrape_not_asking_for_openmetrics_is_prometheus_text_that_promtool_accepts";
    if !crate::process::running::toolchain("promtool", "--version", test) {
        return;
    }
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs");
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = check.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_alert_rules_pass_their_promtool_unit_tests() {
    let test = "the_alert_rules_pass_their_promtool_unit_tests";
    if !crate::process::running::toolchain("promtool", "--version", test) {
        return;
    }
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    for args in [
        ["check", "rules", "qlessd-alerts.json"],
        ["test", "rules", "qlessd-alerts.test.yml"],
    ] {
        let output = std::process::Command::new("promtool")
            .args(args)
            .current_dir(&rules)
            .output()
            .expect("promtool runs");
        assert!(
            output.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
