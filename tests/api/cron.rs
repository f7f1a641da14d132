//! Cron schedules of recurring jobs over HTTP: creating, reading and changing them,
//! refusing bad expressions and zones, daylight saving time in real zones, ticks
//! firing once with two gateways on one Redis, and the missed-run policy. Time is
//! logical: the tests move the app's clock and run the sweeper's work by hand
//! (`sweep`, then the cron top-up), as the sweeper does.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use qlessd::core::Qless;
use qlessd::server::{self, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::{Value, json};

use crate::support::{TestApp, TestResponse, connect};

/// 2024-03-09 00:00 UTC, the day before New York springs forward.
const NY_BEFORE_SPRING: f64 = 1_709_942_400.0;
/// 2024-10-26 12:00 UTC, the day before Berlin falls back.
const BERLIN_BEFORE_FALL: f64 = 1_729_944_000.0;

async fn patch(app: &TestApp, uri: &str, body: Value) -> TestResponse {
    app.send(
        Request::builder()
            .method(Method::PATCH)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

/// Creates template `jid` in queue `q` with these schedule fields.
async fn create(app: &TestApp, jid: &str, schedule: Value) -> TestResponse {
    let mut body = json!({"jid": jid, "klass": "Report"});
    body.as_object_mut()
        .unwrap()
        .extend(schedule.as_object().unwrap().clone());
    app.post("/v1/queues/q/recurring", body).await
}

/// What the sweeper does at `now`: the script's upkeep, then the cron top-up.
async fn sweep(qless: &Qless, now: f64) {
    qless.sweep(now, 1000, 0, 0).await.expect("sweep");
    qlessd::cron::top_up(qless, now).await.expect("top up");
}

/// How many children template `jid` has spawned.
async fn spawned(app: &TestApp, jid: &str) -> i64 {
    let body = app.get(&format!("/v1/recurring/{jid}")).await.body;
    body["count"].as_i64().expect("count")
}

fn next(body: &Value) -> Vec<i64> {
    body["next"]
        .as_array()
        .expect("next")
        .iter()
        .map(|t| t.as_i64().expect("whole seconds"))
        .collect()
}

#[tokio::test]
async fn a_cron_template_shows_its_schedule_and_next_fire_times() {
    let app = TestApp::start().await;
    // START is 2023-11-14 22:13:20 UTC; 09:00 in Berlin (CET) is 08:00 UTC.
    let response = create(
        &app,
        "daily",
        json!({"cron": "0 9 * * *", "timezone": "Europe/Berlin"}),
    )
    .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    let body = app.get("/v1/recurring/daily").await.body;
    assert_eq!(body["cron"], "0 9 * * *");
    assert_eq!(body["timezone"], "Europe/Berlin");
    let first = 1_700_035_200;
    assert_eq!(
        next(&body),
        (0..5).map(|day| first + day * 86_400).collect::<Vec<_>>()
    );
    // Stock qless clients read a positive interval: the gap between two ticks.
    assert_eq!(body["interval"], 86_400);
    assert_eq!(body["count"], 0);

    // The zone defaults to UTC; six fields put seconds first.
    create(&app, "often", json!({"cron": "*/20 * * * * *"})).await;
    let body = app.get("/v1/recurring/often").await.body;
    assert_eq!(body["timezone"], "UTC");
    assert_eq!(
        &next(&body)[..3],
        &[1_700_000_020, 1_700_000_040, 1_700_000_060]
    );

    // An interval template has no cron fields, and its next times step by interval.
    create(&app, "plain", json!({"interval": 60, "offset": 10})).await;
    let body = app.get("/v1/recurring/plain").await.body;
    assert!(body.get("cron").is_none() && body.get("timezone").is_none());
    assert_eq!(&next(&body)[..2], &[1_700_000_010, 1_700_000_070]);
}

#[tokio::test]
async fn bad_schedules_are_refused_by_name_and_nothing_is_written() {
    let app = TestApp::start().await;
    let cases = [
        (json!({"cron": "61 * * * *"}), "61 * * * *"),
        (json!({"cron": "* * *"}), "3 fields"),
        (json!({"cron": "0 0 0 1 1 * 2030"}), "7 fields"),
        (json!({"cron": "every day"}), "every day"),
        (json!({"cron": "0 0 30 2 *"}), "never fires"),
        (
            json!({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}),
            "Mars/Olympus",
        ),
        (json!({"cron": "0 9 * * *", "interval": 60}), "exactly one"),
        (json!({}), "exactly one"),
        (
            json!({"interval": 60, "timezone": "Europe/Berlin"}),
            "timezone",
        ),
        (json!({"cron": "0 9 * * *", "offset": 5}), "offset"),
    ];
    for (schedule, named) in cases {
        let response = create(&app, "bad", schedule.clone()).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(named), "{schedule}: {detail}");
        assert_eq!(
            app.get("/v1/recurring/bad").await.status,
            StatusCode::NOT_FOUND,
            "{schedule} wrote a template"
        );
    }
}

#[tokio::test]
async fn a_time_skipped_by_spring_forward_fires_once_right_after_the_gap() {
    let app = TestApp::start().await;
    app.clock.set(NY_BEFORE_SPRING);
    create(
        &app,
        "nightly",
        json!({"cron": "30 2 * * *", "timezone": "America/New_York"}),
    )
    .await;
    // 02:30 EST on the 9th; 02:30 does not exist on the 10th: 03:00 EDT; 02:30 EDT on
    // the 11th.
    let expected = [1_709_969_400, 1_710_054_000, 1_710_138_600];
    let body = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(&next(&body)[..3], &expected);
    // Walk the three nights a quarter of an hour at a time: one child per tick, at it.
    let mut children = 0;
    let mut now = NY_BEFORE_SPRING;
    while now < 1_710_180_000.0 {
        now += 900.0;
        app.clock.set(now);
        sweep(&app.qless, now).await;
        let due = expected.iter().filter(|t| **t as f64 <= now).count() as i64;
        children = spawned(&app, "nightly").await;
        assert_eq!(children, due, "at {now}");
    }
    assert_eq!(children, 3);
    let child = app.get("/v1/jobs/nightly-2").await.body;
    assert_eq!(child["history"][0]["when"], 1_710_054_000, "{child}");
}

#[tokio::test]
async fn a_time_repeated_by_fall_back_fires_once() {
    let app = TestApp::start().await;
    app.clock.set(BERLIN_BEFORE_FALL);
    create(
        &app,
        "nightly",
        json!({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}),
    )
    .await;
    // 02:30 CEST (00:30 UTC) on the 27th, not again at 02:30 CET; 02:30 CET on the 28th.
    let body = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(&next(&body)[..2], &[1_729_989_000, 1_730_079_000]);
    let mut now = BERLIN_BEFORE_FALL;
    while now < 1_730_070_000.0 {
        now += 600.0;
        app.clock.set(now);
        sweep(&app.qless, now).await;
    }
    assert_eq!(spawned(&app, "nightly").await, 1);
}

/// A second gateway (its own state and connections) on `app`'s Redis and clock.
async fn second_gateway(app: &TestApp) -> (Qless, server::App) {
    let qless = connect(&app.redis, None).await;
    let settings = Settings::for_redis(app.redis.url());
    let state = AppState::new(
        qless.clone(),
        app.clock.clone(),
        Limits::from_settings(&settings),
    );
    (qless, server::router(state))
}

#[tokio::test]
async fn two_gateways_fire_each_tick_once() {
    let app = TestApp::start().await;
    let (other, _router) = second_gateway(&app).await;
    create(&app, "minutely", json!({"cron": "* * * * *", "backlog": 5})).await;
    let first = next(&app.get("/v1/recurring/minutely").await.body)[0] as f64;
    // Both gateways sweep, top up and pop at every tick, concurrently, for 20 ticks
    // (more than the stored list, so the top-ups race too).
    for minute in 0..20 {
        let now = first + 60.0 * f64::from(minute);
        app.clock.set(now);
        let pop = |qless: Qless| async move {
            qless.pop(now, "q", "w", 1).await.expect("pop");
        };
        tokio::join!(
            sweep(&app.qless, now),
            sweep(&other, now),
            pop(app.qless.clone()),
            pop(other.clone()),
        );
        assert_eq!(spawned(&app, "minutely").await, i64::from(minute) + 1);
    }
    // Twenty children, one per tick, each at its own tick.
    for n in 1..=20 {
        let child = app.get(&format!("/v1/jobs/minutely-{n}")).await.body;
        assert_eq!(child["history"][0]["when"], first as i64 + 60 * (n - 1));
    }
    assert_eq!(
        app.get("/v1/jobs/minutely-21").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn missed_ticks_fire_once_or_up_to_the_backlog() {
    let app = TestApp::start().await;
    create(&app, "skip", json!({"cron": "* * * * *"})).await;
    create(&app, "catch", json!({"cron": "* * * * *", "backlog": 3})).await;
    let ticks = next(&app.get("/v1/recurring/skip").await.body);
    // Nothing ran for five ticks.
    let late = ticks[4] as f64 + 30.0;
    app.clock.set(late);
    sweep(&app.qless, late).await;
    assert_eq!(spawned(&app, "skip").await, 1);
    assert_eq!(spawned(&app, "catch").await, 3);
    // The one run of `skip` is for the latest missed tick; `catch` ran the last three.
    let child = app.get("/v1/jobs/skip-1").await.body;
    assert_eq!(child["history"][0]["when"], ticks[4]);
    let child = app.get("/v1/jobs/catch-1").await.body;
    assert_eq!(child["history"][0]["when"], ticks[2]);
    // The schedule goes on from now.
    let upcoming = next(&app.get("/v1/recurring/skip").await.body);
    assert_eq!(upcoming[0], ticks[4] + 60);
    assert!(upcoming.len() >= 3, "topped up: {upcoming:?}");
}

#[tokio::test]
async fn cron_and_timezone_can_be_changed_and_an_interval_replaces_them() {
    let app = TestApp::start().await;
    create(&app, "daily", json!({"cron": "0 9 * * *"})).await;
    // A new zone keeps the expression: 09:00 in Berlin is 08:00 UTC in November.
    let response = patch(
        &app,
        "/v1/recurring/daily",
        json!({"timezone": "Europe/Berlin"}),
    )
    .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    let body = app.get("/v1/recurring/daily").await.body;
    assert_eq!(body["cron"], "0 9 * * *");
    assert_eq!(body["timezone"], "Europe/Berlin");
    assert_eq!(next(&body)[0], 1_700_035_200);
    // A new expression keeps the zone.
    patch(&app, "/v1/recurring/daily", json!({"cron": "0 12 * * *"})).await;
    let body = app.get("/v1/recurring/daily").await.body;
    assert_eq!(body["timezone"], "Europe/Berlin");
    assert_eq!(next(&body)[0], 1_700_046_000);
    // Refused changes change nothing.
    for (change, named) in [
        (json!({"cron": "0 25 * * *"}), "0 25 * * *"),
        (json!({"timezone": "Atlantis"}), "Atlantis"),
        (json!({"cron": "0 9 * * *", "interval": 60}), "not both"),
    ] {
        let response = patch(&app, "/v1/recurring/daily", change).await;
        response.assert_problem(400, "bad_request");
        assert!(response.text.contains(named), "{}", response.text);
    }
    assert_eq!(app.get("/v1/recurring/daily").await.body, body);
    // An interval makes it an interval template again, next spawn an interval on.
    patch(&app, "/v1/recurring/daily", json!({"interval": 300})).await;
    let body = app.get("/v1/recurring/daily").await.body;
    assert!(body.get("cron").is_none(), "{body}");
    assert_eq!(next(&body)[0], 1_700_000_300);
    // A zone alone cannot make an interval template a cron one.
    patch(&app, "/v1/recurring/daily", json!({"timezone": "UTC"}))
        .await
        .assert_problem(400, "bad_request");
    // An expression can.
    patch(&app, "/v1/recurring/daily", json!({"cron": "*/10 * * * *"})).await;
    let body = app.get("/v1/recurring/daily").await.body;
    assert_eq!(body["timezone"], "UTC");
    assert_eq!(next(&body)[0], 1_700_000_400);
}

#[tokio::test]
async fn a_cron_template_spawns_through_the_gateway_sweeper() {
    let app = TestApp::start().await;
    create(&app, "soon", json!({"cron": "*/5 * * * * *"})).await;
    let first = next(&app.get("/v1/recurring/soon").await.body)[0] as f64;
    app.clock.set(first);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(qlessd::sweeper::run(
        app.qless.clone(),
        app.clock.clone(),
        qlessd::sweeper::gateway_id(),
        stopped,
    ));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while spawned(&app, "soon").await < 1 {
        assert!(std::time::Instant::now() < deadline, "no child spawned");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = stop.send(true);
    assert_eq!(spawned(&app, "soon").await, 1);
}
