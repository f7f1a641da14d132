//! Worker-side features: long-poll pops, multi-queue pops, batch heartbeat and
//! complete, Server-Sent Events, and the sweeper keeping time on idle queues.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use qlessd::core::{PutArgs, RecurArgs};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{START, TestApp};

async fn put(app: &TestApp, queue: &str, jid: &str) {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/jobs"),
            json!({"jid": jid, "klass": "K"}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
}

async fn ready(app: &TestApp) {
    assert!(
        app.state
            .events
            .wait_subscribed(Duration::from_secs(5))
            .await,
        "event subscription never became active"
    );
}

async fn until_waiting(app: &TestApp, waiters: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.state.leasing.waiting() != waiters {
        assert!(Instant::now() < deadline, "waiters never reached {waiters}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Starts a long-polling pop on queue `q` in the background; it resolves to the
/// instant the response arrived and its body.
fn spawn_pop(app: &TestApp, body: Value) -> tokio::task::JoinHandle<(Instant, Value)> {
    let router = app.router.clone();
    tokio::spawn(async move {
        let request = Request::post("/v1/queues/q/pop")
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = router.oneshot(request).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            Instant::now(),
            serde_json::from_slice::<Value>(&bytes).unwrap(),
        )
    })
}

/// Runs the sweeper over `app` until the returned guard is dropped.
struct Sweeper(tokio::sync::watch::Sender<bool>);

impl Drop for Sweeper {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

fn start_sweeper(app: &TestApp) -> Sweeper {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(qlessd::sweeper::run(
        app.qless.clone(),
        app.clock.clone(),
        qlessd::sweeper::gateway_id(),
        stopped,
    ));
    Sweeper(stop)
}

fn jids(body: &Value) -> Vec<String> {
    body.as_array()
        .expect("a list of jobs")
        .iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_poll_returns_within_milliseconds_of_a_put() {
    let app = TestApp::start().await;
    ready(&app).await;
    let waiter = spawn_pop(&app, json!({"worker": "w", "wait": 10}));
    until_waiting(&app, 1).await;
    let put_at = Instant::now();
    put(&app, "q", "job-1").await;
    let (returned_at, body) = waiter.await.unwrap();
    let latency = returned_at.duration_since(put_at);
    assert_eq!(jids(&body), ["job-1"]);
    assert!(
        latency < Duration::from_millis(500),
        "woke after {latency:?}"
    );
}

/// Puts `jid` in `q` and leases it to `worker`.
async fn leased(app: &TestApp, jid: &str, worker: &str) {
    put(app, "q", jid).await;
    let response = app
        .post("/v1/queues/q/pop", json!({"worker": worker}))
        .await;
    assert_eq!(jids(&response.body), [jid]);
}

/// Waits on `q` as worker `w2` while `release` makes a job available again, and
/// checks the waiter got it at once: the script announced it, long before any re-check.
async fn assert_wakes_waiter(app: &TestApp, jid: &str, release: Value, path: &str) {
    let waiter = spawn_pop(app, json!({"worker": "w2", "wait": 10}));
    until_waiting(app, 1).await;
    let released_at = Instant::now();
    let response = app.post(path, release).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let (returned_at, body) = waiter.await.unwrap();
    assert_eq!(jids(&body), [jid]);
    let latency = returned_at.duration_since(released_at);
    assert!(
        latency < Duration::from_millis(500),
        "woke after {latency:?}"
    );
}

#[tokio::test]
async fn a_long_poll_wakes_when_a_job_is_retried() {
    let app = TestApp::start().await;
    ready(&app).await;
    leased(&app, "job-1", "w1").await;
    let retry = json!({"worker": "w1", "queue": "q"});
    assert_wakes_waiter(&app, "job-1", retry, "/v1/jobs/job-1/retry").await;
}

#[tokio::test]
async fn a_long_poll_wakes_when_failed_jobs_are_unfailed() {
    let app = TestApp::start().await;
    ready(&app).await;
    leased(&app, "job-1", "w1").await;
    let failed = app
        .post(
            "/v1/jobs/job-1/fail",
            json!({"worker": "w1", "group": "boom", "message": "m"}),
        )
        .await;
    assert_eq!(failed.status, StatusCode::OK, "{}", failed.text);
    let unfail = json!({"queue": "q"});
    assert_wakes_waiter(&app, "job-1", unfail, "/v1/failures/boom/unfail").await;
}

/// `parent` leased to `w1` from queue `p`, and `job-1` in `q` waiting for it.
async fn child_waiting_on_leased_parent(app: &TestApp) {
    put(app, "p", "parent").await;
    let popped = app.post("/v1/queues/p/pop", json!({"worker": "w1"})).await;
    assert_eq!(jids(&popped.body), ["parent"]);
    let child = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "job-1", "klass": "K", "depends": ["parent"]}),
        )
        .await;
    assert_eq!(child.status, StatusCode::CREATED, "{}", child.text);
}

#[tokio::test]
async fn a_long_poll_wakes_when_the_job_a_job_depends_on_completes() {
    let app = TestApp::start().await;
    ready(&app).await;
    child_waiting_on_leased_parent(&app).await;
    let complete = json!({"worker": "w1", "queue": "p"});
    assert_wakes_waiter(&app, "job-1", complete, "/v1/jobs/parent/complete").await;
}

#[tokio::test]
async fn a_long_poll_wakes_when_a_batch_completion_releases_a_dependent() {
    let app = TestApp::start().await;
    ready(&app).await;
    child_waiting_on_leased_parent(&app).await;
    let complete = json!({"jobs": [{"jid": "parent", "worker": "w1", "queue": "p"}]});
    assert_wakes_waiter(&app, "job-1", complete, "/v1/jobs/complete").await;
}

#[tokio::test]
async fn a_long_poll_returns_an_empty_list_when_the_wait_is_over() {
    let app = TestApp::start().await;
    let started = Instant::now();
    let response = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "wait": 0.3}))
        .await;
    let waited = started.elapsed();
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.body, json!([]));
    assert!(
        waited >= Duration::from_millis(300),
        "returned early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "returned late: {waited:?}");
    assert_eq!(app.state.leasing.waiting(), 0);
}

#[tokio::test]
async fn many_waiters_each_get_a_distinct_job() {
    let app = TestApp::start().await;
    ready(&app).await;
    let waiters: Vec<_> = (0..8)
        .map(|i| spawn_pop(&app, json!({"worker": format!("w{i}"), "wait": 10})))
        .collect();
    until_waiting(&app, 8).await;
    for i in 0..8 {
        put(&app, "q", &format!("job-{i}")).await;
    }
    let mut seen = HashSet::new();
    for waiter in waiters {
        let (_, body) = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("a waiter was never served")
            .unwrap();
        let got = jids(&body);
        assert_eq!(got.len(), 1, "{body}");
        assert!(seen.insert(got[0].clone()), "{} leased twice", got[0]);
    }
    assert_eq!(seen.len(), 8);
}

#[tokio::test]
async fn a_waiter_that_disconnects_stops_waiting_and_leases_nothing() {
    let app = TestApp::start().await;
    ready(&app).await;
    let waiter = spawn_pop(&app, json!({"worker": "gone", "wait": 10}));
    until_waiting(&app, 1).await;
    waiter.abort();
    until_waiting(&app, 0).await;
    put(&app, "q", "job-1").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let job = app.get("/v1/jobs/job-1").await;
    assert_eq!(job.body["state"], "waiting", "{}", job.text);
    assert_eq!(job.body["worker"], "");
}

#[tokio::test]
async fn a_long_poll_wakes_when_a_scheduled_job_falls_due() {
    let app = TestApp::start().await;
    let _sweeper = start_sweeper(&app);
    let response = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "later", "klass": "K", "delay": 30}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    let waiter = spawn_pop(&app, json!({"worker": "w", "wait": 10}));
    until_waiting(&app, 1).await;
    app.clock.advance(31.0);
    let (_, body) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the due job")
        .unwrap();
    assert_eq!(jids(&body), ["later"]);
}

#[tokio::test]
async fn the_sweeper_promotes_scheduled_jobs_on_a_queue_nobody_pops() {
    let app = TestApp::start().await;
    let _sweeper = start_sweeper(&app);
    let response = app
        .post(
            "/v1/queues/idle/jobs",
            json!({"jid": "later", "klass": "K", "delay": 60}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    assert_eq!(app.get("/v1/jobs/later").await.body["state"], "scheduled");
    app.clock.advance(61.0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if app.get("/v1/jobs/later").await.body["state"] == "waiting" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sweeper never promoted the job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_gateways_sweeping_one_redis_spawn_each_recurring_child_once() {
    let app = TestApp::start().await;
    let other = crate::support::connect(&app.redis, None).await;
    app.qless
        .recur(
            START,
            RecurArgs {
                queue: "q".into(),
                jid: "every-10s".into(),
                klass: "K".into(),
                data: "{}".into(),
                interval: 10.0,
                offset: 0.0,
                ..RecurArgs::default()
            },
        )
        .await
        .unwrap();
    // Both gateways sweep the same instants, interleaved as tightly as the runtime
    // allows; the script's atomicity must keep the children unique.
    for step in 0..20 {
        let now = START + step as f64 * 5.0;
        let (a, b) = tokio::join!(
            app.qless.sweep(now, 1000, 0, 0),
            other.sweep(now, 1000, 0, 0)
        );
        a.unwrap();
        b.unwrap();
    }
    let template = app
        .qless
        .recur_get(START, "every-10s")
        .await
        .unwrap()
        .unwrap();
    // Slots at START, +10, ..., +90: ten children, each exactly once.
    assert_eq!(template.count, 10);
    let waiting = app
        .qless
        .jobs_waiting(START + 100.0, "q", 0, 100)
        .await
        .unwrap();
    let unique: HashSet<_> = waiting.iter().collect();
    assert_eq!(waiting.len(), 10);
    assert_eq!(unique.len(), 10);
}

#[tokio::test]
async fn an_ordered_multi_queue_pop_takes_from_the_first_non_empty_queue() {
    let app = TestApp::start().await;
    put(&app, "low", "l1").await;
    app.clock.advance(1.0);
    put(&app, "high", "h1").await;
    let body = json!({"worker": "w", "count": 2, "strategy": "ordered",
        "queues": [{"name": "empty"}, {"name": "high"}, {"name": "low"}]});
    let response = app.post("/v1/pop", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(jids(&response.body), ["h1", "l1"]);
    assert_eq!(response.body[0]["queue"], "high");
    assert_eq!(response.body[1]["queue"], "low");
}

#[tokio::test]
async fn a_round_robin_multi_queue_pop_takes_one_job_from_each_queue_in_turn() {
    let app = TestApp::start().await;
    for i in 0..3 {
        put(&app, "a", &format!("a{i}")).await;
        put(&app, "b", &format!("b{i}")).await;
        app.clock.advance(1.0);
    }
    let body = json!({"worker": "w", "count": 4, "strategy": "round_robin",
        "queues": [{"name": "a"}, {"name": "b"}]});
    let response = app.post("/v1/pop", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let queues: Vec<&str> = response
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["queue"].as_str().unwrap())
        .collect();
    assert_eq!(queues.len(), 4);
    assert_eq!(
        queues.iter().filter(|q| **q == "a").count(),
        2,
        "{queues:?}"
    );
    assert!(
        queues.windows(2).all(|pair| pair[0] != pair[1]),
        "not alternating: {queues:?}"
    );
}

#[tokio::test]
async fn a_weighted_pop_never_starves_a_light_queue_when_heavy_ones_are_empty() {
    let app = TestApp::start().await;
    put(&app, "light", "only").await;
    let body = json!({"worker": "w", "strategy": "weighted",
        "queues": [{"name": "heavy", "weight": 1000}, {"name": "light", "weight": 1}]});
    let response = app.post("/v1/pop", body).await;
    assert_eq!(jids(&response.body), ["only"], "{}", response.text);
}

#[tokio::test]
async fn a_weighted_pop_favours_heavier_queues() {
    let app = TestApp::start().await;
    for i in 0..200 {
        put(&app, "heavy", &format!("h{i}")).await;
        put(&app, "light", &format!("l{i}")).await;
    }
    let mut heavy = 0;
    for _ in 0..100 {
        let body = json!({"worker": "w", "strategy": "weighted",
            "queues": [{"name": "heavy", "weight": 9}, {"name": "light", "weight": 1}]});
        let response = app.post("/v1/pop", body).await;
        if response.body[0]["queue"] == "heavy" {
            heavy += 1;
        }
    }
    // Expected 90; the chance of fewer than 75 is far below one in a million.
    assert!(heavy >= 75, "heavy won only {heavy} of 100 draws");
    assert!(heavy < 100, "light never won: {heavy}");
}

#[tokio::test]
async fn multi_queue_pops_refuse_bad_requests() {
    let app = TestApp::start().await;
    let bad = [
        json!({"worker": "w", "queues": []}),
        json!({"worker": "w", "queues": [{"name": "a"}, {"name": "a"}]}),
        json!({"worker": "w", "queues": [{"name": "a", "weight": 0}]}),
        json!({"worker": "w", "queues": [{"name": "a", "weight": -1}]}),
        json!({"worker": "w", "queues": [{"name": "a b"}]}),
        json!({"worker": "", "queues": [{"name": "a"}]}),
        json!({"worker": "w", "queues": [{"name": "a"}], "strategy": "random"}),
        json!({"worker": "w", "queues": [{"name": "a"}], "count": 0}),
        json!({"worker": "w", "queues": [{"name": "a"}], "wait": -1}),
        json!({"worker": "w", "queues": [{"name": "a"}], "surprise": 1}),
    ];
    for body in bad {
        app.post("/v1/pop", body.clone())
            .await
            .assert_problem(400, "bad_request");
    }
    let workers = app.get("/v1/workers").await;
    assert_eq!(workers.body, json!([]), "a refused pop registered a worker");
}

#[tokio::test]
async fn batch_complete_reports_each_job_on_its_own() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    put(&app, "q", "b").await;
    app.post("/v1/queues/q/pop", json!({"worker": "w", "count": 2}))
        .await;
    let body = json!({"jobs": [
        {"jid": "a", "worker": "w", "queue": "q"},
        {"jid": "b", "worker": "intruder", "queue": "q"},
        {"jid": "ghost", "worker": "w", "queue": "q"},
        {"jid": "b", "worker": "w", "queue": "q", "next": "audit"},
    ]});
    let response = app.post("/v1/jobs/complete", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let outcomes = response.body["jobs"].as_array().unwrap();
    assert_eq!(outcomes[0], json!({"jid": "a", "state": "complete"}));
    assert_eq!(outcomes[1]["problem"]["code"], "lock_lost");
    assert_eq!(outcomes[2]["problem"]["code"], "not_found");
    assert_eq!(outcomes[3], json!({"jid": "b", "state": "waiting"}));
    assert_eq!(app.get("/v1/jobs/b").await.body["queue"], "audit");
}

#[tokio::test]
async fn batch_complete_refuses_a_malformed_item_and_completes_nothing() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    let body = json!({"jobs": [
        {"jid": "a", "worker": "w", "queue": "q"},
        {"jid": "b", "worker": "w", "queue": "q", "delay": 5},
    ]});
    let response = app.post("/v1/jobs/complete", body).await;
    response.assert_problem(400, "bad_request");
    assert!(
        response.body["detail"]
            .as_str()
            .unwrap()
            .contains("jobs[1]"),
        "{}",
        response.text
    );
    assert_eq!(app.get("/v1/jobs/a").await.body["state"], "running");
    app.post("/v1/jobs/complete", json!({"jobs": []}))
        .await
        .assert_problem(400, "bad_request");
}

#[tokio::test]
async fn batch_heartbeat_renews_held_locks_and_reports_lost_ones() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    put(&app, "q", "b").await;
    let popped = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "count": 2}))
        .await;
    let expires = popped.body[0]["expires"].as_f64().unwrap();
    app.clock.advance(10.0);
    let body = json!({"jobs": [
        {"jid": "a", "worker": "w"},
        {"jid": "b", "worker": "someone-else"},
    ]});
    let response = app.post("/v1/jobs/heartbeat", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let outcomes = response.body["jobs"].as_array().unwrap();
    assert!(
        outcomes[0]["expires"].as_f64().unwrap() > expires,
        "{}",
        response.text
    );
    assert!(outcomes[0].get("problem").is_none());
    assert_eq!(outcomes[1]["problem"]["code"], "lock_lost");
}

/// Reads SSE frames until one carries `event: <kind>`; returns its data line.
async fn next_event(body: &mut Body, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buffer = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .unwrap_or_else(|_| panic!("no {kind} event; stream so far: {buffer}"))
            .expect("stream ended")
            .expect("stream error");
        if let Ok(data) = frame.into_data() {
            buffer.push_str(&String::from_utf8_lossy(&data));
        }
        while let Some(end) = buffer.find("\n\n") {
            let message: String = buffer.drain(..end + 2).collect();
            let event = message.lines().find_map(|l| l.strip_prefix("event: "));
            let data = message.lines().find_map(|l| l.strip_prefix("data: "));
            if event == Some(kind) {
                return serde_json::from_str(data.unwrap_or("null")).unwrap();
            }
        }
    }
}

async fn open_events(app: &TestApp, query: &str) -> Body {
    let request = Request::get(format!("/v1/events{query}"))
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let ready = next_event(&mut body, "ready").await;
    assert_eq!(ready, json!({"subscribed": true}));
    body
}

#[tokio::test]
async fn events_tell_a_worker_at_once_that_it_lost_its_job() {
    let app = TestApp::start().await;
    let mut stream = open_events(&app, "?worker=w1&events=lock_lost,canceled").await;
    put(&app, "q", "job-1").await;
    app.post("/v1/queues/q/pop", json!({"worker": "w1"})).await;
    let response = app
        .request(axum::http::Method::POST, "/v1/jobs/job-1/timeout", None)
        .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    let event = next_event(&mut stream, "lock_lost").await;
    assert_eq!(
        event,
        json!({"jid": "job-1", "event": "lock_lost", "worker": "w1"})
    );
}

#[tokio::test]
async fn events_tell_a_worker_its_job_was_canceled() {
    let app = TestApp::start().await;
    let mut stream = open_events(&app, "?worker=w1").await;
    put(&app, "q", "job-1").await;
    app.post("/v1/queues/q/pop", json!({"worker": "w1"})).await;
    app.request(axum::http::Method::DELETE, "/v1/jobs/job-1", None)
        .await;
    let event = next_event(&mut stream, "canceled").await;
    assert_eq!(
        event,
        json!({"jid": "job-1", "queue": "q", "event": "canceled", "worker": "w1"})
    );
}

#[tokio::test]
async fn events_can_be_filtered_by_queue() {
    let app = TestApp::start().await;
    let mut stream = open_events(&app, "?queue=wanted").await;
    put(&app, "other", "x").await;
    put(&app, "wanted", "y").await;
    let event = next_event(&mut stream, "put").await;
    assert_eq!(
        event,
        json!({"jid": "y", "event": "put", "queue": "wanted"})
    );
}

#[tokio::test]
async fn events_report_transitions_of_tracked_jobs() {
    let app = TestApp::start().await;
    put(&app, "q", "watched").await;
    let mut stream = open_events(&app, "?jid=watched&events=tracked").await;
    app.request(axum::http::Method::PUT, "/v1/jobs/watched/tracked", None)
        .await;
    app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    let event = next_event(&mut stream, "tracked").await;
    assert_eq!(event, json!({"jid": "watched", "transition": "popped"}));
}

#[tokio::test]
async fn event_streams_refuse_unknown_parameters() {
    let app = TestApp::start().await;
    app.get("/v1/events?colour=red")
        .await
        .assert_problem(400, "bad_request");
    app.get("/v1/events?worker=a%20b")
        .await
        .assert_problem(400, "bad_request");
}

#[tokio::test]
async fn event_streams_refuse_unknown_event_types_naming_them() {
    let app = TestApp::start().await;
    let cases = [
        ("lock-lost", "lock-lost"),
        ("lock_lost,cancelled", "cancelled"),
        ("ready", "ready"),
        ("PUT", "PUT"),
        ("", "no event type"),
        (",,", "no event type"),
    ];
    for (events, named) in cases {
        let response = app.get(&format!("/v1/events?events={events}")).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(named), "{events}: {detail}");
    }
}

#[tokio::test]
async fn put_if_absent_over_the_core_creates_once() {
    // The unique-add used by producers that may retry: the second call is a no-op.
    let app = TestApp::start().await;
    let args = PutArgs {
        queue: "q".into(),
        jid: "unique".into(),
        klass: "K".into(),
        data: r#"{"v":1}"#.into(),
        ..PutArgs::default()
    };
    assert_eq!(
        app.qless
            .put_if_absent(START, args.clone())
            .await
            .unwrap()
            .as_deref(),
        Some("unique")
    );
    let again = PutArgs {
        data: r#"{"v":2}"#.into(),
        ..args
    };
    assert_eq!(
        app.qless.put_if_absent(START + 1.0, again).await.unwrap(),
        None
    );
    let job = app.qless.get(START, "unique").await.unwrap().unwrap();
    assert_eq!(job.data, json!({"v": 1}));
}

#[tokio::test]
async fn graceful_shutdown_answers_long_polls_and_ends_event_streams() {
    let app = TestApp::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = app.state.clone();
    let server = tokio::spawn(qlessd::server::serve(
        listener,
        app.router.clone(),
        async move {
            let _ = stopped.await;
            state.begin_shutdown();
        },
    ));
    let client = crate::support::http();
    let events = client
        .get(format!("{base}/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let poll = tokio::spawn(
        client
            .post(format!("{base}/v1/queues/q/pop"))
            .json(&json!({"worker": "w", "wait": 30}))
            .send(),
    );
    until_waiting(&app, 1).await;
    let started = Instant::now();
    stop.send(()).unwrap();
    let response = poll.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), json!([]));
    tokio::time::timeout(Duration::from_secs(5), events.bytes())
        .await
        .expect("the event stream did not end")
        .ok();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server did not stop")
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_sweeper_keeps_going_after_a_job_scheduled_beyond_any_duration() {
    let app = TestApp::start().await;
    let _sweeper = start_sweeper(&app);
    let never = json!({"jid": "never", "klass": "K", "delay": 1e300});
    assert_eq!(
        app.post("/v1/queues/idle/jobs", never).await.status,
        StatusCode::CREATED
    );
    // Long enough for a sweep to see that job as the next one due.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let later = json!({"jid": "later", "klass": "K", "delay": 60});
    assert_eq!(
        app.post("/v1/queues/idle/jobs", later).await.status,
        StatusCode::CREATED
    );
    app.clock.advance(61.0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.get("/v1/jobs/later").await.body["state"] != "waiting" {
        assert!(Instant::now() < deadline, "the sweeper stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.get("/v1/jobs/never").await.body["state"], "scheduled");
}

#[tokio::test]
async fn a_wait_too_long_for_any_clock_is_capped_not_a_server_error() {
    let app = TestApp::start().await;
    for jid in ["a", "b"] {
        let job = json!({"jid": jid, "klass": "K"});
        let response = app.post("/v1/queues/q/jobs", job).await;
        assert_eq!(response.status, StatusCode::CREATED);
    }
    let response = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "wait": 1.7e308}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let mut leased = jids(&response.body);
    let multi = json!({"worker": "w", "queues": [{"name": "q"}], "strategy": "ordered",
        "wait": 2.5e47});
    let response = app.post("/v1/pop", multi).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    leased.extend(jids(&response.body));
    leased.sort();
    assert_eq!(leased, ["a", "b"]);
}
