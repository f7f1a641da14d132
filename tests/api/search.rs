//! `/v1/search`: every filter, paging with the cursor, bad input, and the bulk actions
//! (each one, dry runs, going on across requests, jobs moving between requests, the
//! log line, and a read-only token refused).

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use qlessd::core::{CompleteArgs, PutArgs};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::metrics::capture_logs;
use crate::support::{START, TestApp, TestResponse};

// ---- helpers --------------------------------------------------------------------

/// A put of `jid` into `queue` with class `klass` and `data`.
fn job(queue: &str, jid: &str, klass: &str, data: Value) -> PutArgs {
    PutArgs {
        worker: String::new(),
        queue: queue.into(),
        jid: jid.into(),
        klass: klass.into(),
        data: data.to_string(),
        ..PutArgs::default()
    }
}

async fn put(app: &TestApp, args: PutArgs) {
    let jid = args.jid.clone();
    assert_eq!(app.qless.put(app.clock.now(), args).await.unwrap(), jid);
}

async fn pop(app: &TestApp, queue: &str, worker: &str, count: u32) -> Vec<String> {
    let jobs = app.qless.pop(app.clock.now(), queue, worker, count).await;
    jobs.unwrap().into_iter().map(|job| job.jid).collect()
}

async fn fail(app: &TestApp, jid: &str, worker: &str, group: &str, message: &str) {
    let now = app.clock.now();
    let failed = app.qless.fail(now, jid, worker, group, message, None).await;
    assert_eq!(failed.unwrap(), jid);
}

/// Puts `jid` into `queue`, leases it and fails it into `group`.
async fn failed(app: &TestApp, queue: &str, jid: &str, group: &str) {
    put(app, job(queue, jid, "K", json!({}))).await;
    assert_eq!(pop(app, queue, "fw", 1).await, [jid]);
    fail(app, jid, "fw", group, "it broke").await;
}

/// `GET /v1/search` with these parameters (URL-encoded here).
async fn search(app: &TestApp, params: &[(&str, &str)]) -> TestResponse {
    let query = serde_urlencoded::to_string(params).unwrap();
    app.get(&format!("/v1/search?{query}")).await
}

/// The jids of a search's answer, which must be a 200.
fn jids(response: &TestResponse) -> BTreeSet<String> {
    assert_eq!(response.status.as_u16(), 200, "{}", response.text);
    response.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Searches until done, `limit` at a time: every jid found, in order, and how many
/// requests it took. Each answer examines at most `scan` entries.
async fn search_all(app: &TestApp, params: &[(&str, &str)], scan: u64) -> (Vec<String>, usize) {
    let (mut found, mut requests) = (Vec::new(), 0);
    let mut cursor: Option<String> = None;
    loop {
        let mut params = params.to_vec();
        if let Some(cursor) = &cursor {
            params.push(("cursor", cursor));
        }
        let page = search(app, &params).await;
        assert_eq!(page.status.as_u16(), 200, "{}", page.text);
        requests += 1;
        assert!(
            page.body["examined"].as_u64().unwrap() <= scan,
            "{}",
            page.text
        );
        for job in page.body["jobs"].as_array().unwrap() {
            found.push(job["jid"].as_str().unwrap().to_owned());
        }
        if page.body["done"] == true {
            assert_eq!(page.body["cursor"], Value::Null, "{}", page.text);
            return (found, requests);
        }
        cursor = Some(page.body["cursor"].as_str().unwrap().to_owned());
        assert!(requests < 100, "the search does not end");
    }
}

/// `POST /v1/search/{action}` with `body`.
async fn act(app: &TestApp, action: &str, body: Value) -> TestResponse {
    app.post(&format!("/v1/search/{action}"), body).await
}

/// Runs an action until done, sending each answer's cursor back: the summed counts
/// (matched, changed, skipped) and the number of requests. `between` runs after each
/// request but the last.
async fn act_all(
    app: &TestApp,
    action: &str,
    body: Value,
    mut between: impl AsyncFnMut(usize),
) -> ([u64; 3], usize) {
    let (mut sums, mut requests) = ([0; 3], 0);
    let mut body = body;
    loop {
        let answer = act(app, action, body.clone()).await;
        assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
        requests += 1;
        for (sum, field) in sums.iter_mut().zip(["matched", "changed", "skipped"]) {
            *sum += answer.body[field].as_u64().unwrap();
        }
        if answer.body["done"] == true {
            assert_eq!(answer.body["cursor"], Value::Null);
            return (sums, requests);
        }
        body["cursor"] = answer.body["cursor"].clone();
        between(requests).await;
        assert!(requests < 100, "the action does not end");
    }
}

async fn state_of(app: &TestApp, jid: &str) -> (String, String) {
    let job = app.get(&format!("/v1/jobs/{jid}")).await;
    assert_eq!(job.status.as_u16(), 200, "{jid}: {}", job.text);
    let field = |name: &str| job.body[name].as_str().unwrap().to_owned();
    (field("state"), field("queue"))
}

/// An app whose searches look at no more than `scan` entries.
async fn scanning(scan: u32) -> TestApp {
    TestApp::start_configured(None, |settings| settings.search_scan_limit = scan).await
}

// ---- searching --------------------------------------------------------------------

/// Jobs of every kind, at known times (the clock ends at START + 50):
///   mail: a, b waiting; c scheduled; d depends on a   (put at START)
///   work: e running (w1, popped at START + 10), f failed (group boom, START + 20)
///   done: g complete (START + 30)
///   slow: h leased by w3 with an expired lock, i timed out (both START + 30)
async fn zoo(app: &TestApp) {
    let ada = json!({"user": {"id": 1, "name": "ada"}, "plan": "pro", "items": [{"sku": "x1"}]});
    put(
        app,
        PutArgs {
            tags: Some(vec!["vip".into()]),
            ..job("mail", "a", "Send", ada)
        },
    )
    .await;
    let bob = json!({"user": {"id": 2, "name": "bob"}, "plan": "free"});
    put(app, job("mail", "b", "Send", bob)).await;
    put(
        app,
        PutArgs {
            delay: 3600.0,
            ..job("mail", "c", "Bill", json!({"user": {"id": 1}}))
        },
    )
    .await;
    put(
        app,
        PutArgs {
            depends: Some(vec!["a".into()]),
            ..job("mail", "d", "Send", json!({}))
        },
    )
    .await;
    app.clock.set(START + 10.0);
    put(
        app,
        PutArgs {
            tags: Some(vec!["vip".into()]),
            ..job("work", "e", "Crunch", json!({"n": 5}))
        },
    )
    .await;
    put(app, job("work", "f", "Crunch", json!({"n": 6}))).await;
    assert_eq!(pop(app, "work", "w1", 2).await.len(), 2);
    app.clock.set(START + 20.0);
    fail(app, "f", "w1", "boom", "disk full on /var").await;
    app.clock.set(START + 30.0);
    put(app, job("done", "g", "Report", json!({}))).await;
    assert_eq!(pop(app, "done", "w2", 1).await, ["g"]);
    let complete = CompleteArgs {
        jid: "g".into(),
        worker: "w2".into(),
        queue: "done".into(),
        data: "{}".into(),
        ..CompleteArgs::default()
    };
    app.qless.complete(START + 30.0, complete).await.unwrap();
    app.qless
        .config_set(START, "slow-heartbeat", "10")
        .await
        .unwrap();
    put(app, job("slow", "h", "Slow", json!({}))).await;
    put(app, job("slow", "i", "Slow", json!({}))).await;
    assert_eq!(pop(app, "slow", "w3", 2).await.len(), 2);
    app.qless
        .timeout(START + 30.0, &["i".into()])
        .await
        .unwrap();
    app.clock.set(START + 50.0);
}

#[tokio::test]
async fn every_filter_finds_the_jobs_it_describes() {
    let app = TestApp::start().await;
    zoo(&app).await;
    let at = |offset: f64| (START + offset).to_string();
    let (t5, t15, t19, t20) = (at(5.0), at(15.0), at(19.0), at(20.0));
    type Case<'a> = (Vec<(&'a str, &'a str)>, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        (vec![("queue", "mail")], &["a", "b", "c", "d"]),
        (vec![("queue", "mail"), ("state", "waiting")], &["a", "b"]),
        (vec![("queue", "mail"), ("state", "scheduled")], &["c"]),
        (vec![("queue", "mail"), ("state", "depends")], &["d"]),
        (vec![("queue", "work"), ("state", "running")], &["e"]),
        (vec![("queue", "slow"), ("state", "stalled")], &["h", "i"]),
        (vec![("queue", "slow"), ("state", "running")], &[]),
        (vec![("state", "failed")], &["f"]),
        (vec![("state", "failed"), ("queue", "work")], &["f"]),
        (vec![("state", "failed"), ("queue", "mail")], &[]),
        (vec![("state", "complete")], &["g"]),
        (vec![("group", "boom")], &["f"]),
        (vec![("group", "other")], &[]),
        (vec![("tag", "vip")], &["a", "e"]),
        (vec![("worker", "w1")], &["e"]),
        (vec![("worker", "w3")], &["h", "i"]),
        (vec![("queue", "mail"), ("klass", "Send")], &["a", "b", "d"]),
        (vec![("tag", "vip"), ("klass", "Crunch")], &["e"]),
        (
            vec![("queue", "mail"), ("data", r#"{"user.id": 1}"#)],
            &["a", "c"],
        ),
        (
            vec![("queue", "mail"), ("data", r#"{"user.name": "bob"}"#)],
            &["b"],
        ),
        (
            vec![("queue", "mail"), ("data", r#"{"items.0.sku": "x1"}"#)],
            &["a"],
        ),
        (
            vec![
                ("queue", "mail"),
                ("data", r#"{"user": {"name": "bob", "id": 2}}"#),
            ],
            &["b"],
        ),
        (
            vec![("queue", "mail"), ("data", r#"{"user.id": "1"}"#)],
            &[],
        ),
        (
            vec![
                ("queue", "mail"),
                ("data", r#"{"plan": "pro", "user.id": 1}"#),
            ],
            &["a"],
        ),
        (vec![("queue", "mail"), ("data", r#"{"plan": null}"#)], &[]),
        (vec![("state", "failed"), ("text", "disk full")], &["f"]),
        (vec![("state", "failed"), ("text", "on /var")], &["f"]),
        (vec![("state", "failed"), ("text", "boom")], &[]),
        (vec![("queue", "mail"), ("text", "ada")], &["a"]),
        (vec![("queue", "mail"), ("text", "ADA")], &[]),
        (vec![("tag", "vip"), ("since", &t5)], &["e"]),
        (vec![("tag", "vip"), ("until", &t5)], &["a"]),
        (vec![("group", "boom"), ("until", &t19)], &[]),
        (
            vec![("group", "boom"), ("since", &t20), ("until", &t20)],
            &["f"],
        ),
        (vec![("queue", "work"), ("since", &t15)], &[]),
    ];
    for (params, expected) in cases {
        let found = search(&app, &params).await;
        assert_eq!(jids(&found), set(expected), "{params:?}: {}", found.text);
        assert_eq!(found.body["done"], true, "{params:?}");
        assert_eq!(found.body["cursor"], Value::Null, "{params:?}");
    }
}

#[tokio::test]
async fn jobs_are_found_as_get_shows_them() {
    let app = TestApp::start().await;
    zoo(&app).await;
    let found = search(&app, &[("queue", "mail"), ("state", "waiting")]).await;
    let jobs = found.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{}", found.text);
    for job in jobs {
        let jid = job["jid"].as_str().unwrap();
        let one = app.get(&format!("/v1/jobs/{jid}")).await;
        assert_eq!(job, &one.body, "{jid}");
    }
    // A queue's waiting jobs come in pop order.
    put(
        &app,
        PutArgs {
            priority: Some(9.0),
            ..job("mail", "urgent", "Send", json!({}))
        },
    )
    .await;
    let found = search(&app, &[("queue", "mail"), ("state", "waiting")]).await;
    assert_eq!(found.body["jobs"][0]["jid"], "urgent", "{}", found.text);
}

#[tokio::test]
async fn a_search_pages_through_its_index_a_bounded_slice_at_a_time() {
    let app = scanning(3).await;
    for n in 0..12 {
        let klass = if n % 2 == 1 { "Odd" } else { "Even" };
        put(
            &app,
            job("many", &format!("j{n:02}"), klass, json!({"n": n})),
        )
        .await;
    }
    let params = [("queue", "many"), ("klass", "Odd"), ("limit", "2")];
    let (found, requests) = search_all(&app, &params, 3).await;
    let mut sorted = found.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        found.len(),
        "a job was found twice: {found:?}"
    );
    assert_eq!(
        sorted,
        ["j01", "j03", "j05", "j07", "j09", "j11"],
        "{found:?}"
    );
    assert!(requests >= 4, "12 jobs, 3 a request: {requests}");

    // Jobs joining the index after the search began are not met by its cursor.
    let first = search(&app, &[("queue", "many"), ("limit", "1")]).await;
    let cursor = first.body["cursor"].as_str().unwrap().to_owned();
    app.clock.advance(1.0);
    put(&app, job("many", "late", "Odd", json!({}))).await;
    let (mut rest, mut cursor) = (Vec::new(), Some(cursor));
    while let Some(c) = cursor {
        let page = search(&app, &[("queue", "many"), ("limit", "1"), ("cursor", &c)]).await;
        rest.extend(jids(&page));
        cursor = page.body["cursor"].as_str().map(str::to_owned);
    }
    assert_eq!(rest.len(), 11, "{rest:?}");
    assert!(!rest.contains(&"late".to_owned()), "{rest:?}");
    // A new search finds it.
    let (all, _) = search_all(&app, &[("queue", "many"), ("klass", "Odd")], 3).await;
    assert!(all.contains(&"late".to_owned()), "{all:?}");
}

#[tokio::test]
async fn a_filter_without_an_index_is_refused_saying_what_to_add() {
    let app = TestApp::start().await;
    for params in [
        vec![("klass", "Send")],
        vec![("state", "waiting")],
        vec![("data", r#"{"a": 1}"#), ("text", "x")],
        vec![],
    ] {
        let refused = search(&app, &params).await;
        refused.assert_problem(400, "bad_request");
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("add queue, tag, worker or group"),
            "{params:?}: {detail}"
        );
    }
}

#[tokio::test]
async fn bad_parameters_are_400s_naming_them() {
    let app = TestApp::start().await;
    zoo(&app).await;
    let other = search(&app, &[("queue", "mail"), ("limit", "1")]).await;
    let cursor = other.body["cursor"].as_str().unwrap().to_owned();
    let long = "x".repeat(1001);
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("queue", "mail"), ("colour", "red")], "colour"),
        (
            vec![("queue", "mail"), ("queue", "work")],
            "queue is given more than once",
        ),
        (vec![("queue", "bad name")], "queue"),
        (vec![("queue", "")], "queue"),
        (vec![("tag", "a{b}")], "tag"),
        (
            vec![("queue", "mail"), ("state", "sleeping")],
            "state must be one of",
        ),
        (vec![("queue", "mail"), ("limit", "0")], "limit"),
        (vec![("queue", "mail"), ("limit", "501")], "limit"),
        (vec![("queue", "mail"), ("limit", "many")], "limit"),
        (vec![("queue", "mail"), ("since", "yesterday")], "since"),
        (vec![("queue", "mail"), ("until", "-1")], "until"),
        (
            vec![("queue", "mail"), ("since", "20"), ("until", "10")],
            "since must not be after until",
        ),
        (
            vec![("queue", "mail"), ("data", "[1]")],
            "data must be a JSON object",
        ),
        (
            vec![("queue", "mail"), ("data", "{nope")],
            "data must be a JSON object",
        ),
        (
            vec![("queue", "mail"), ("data", r#"{"a..b": 1}"#)],
            "data key",
        ),
        (vec![("queue", "mail"), ("text", "")], "text must be"),
        (vec![("queue", "mail"), ("text", &long)], "text must be"),
        (vec![("queue", "mail"), ("klass", " ")], "klass"),
        (vec![("queue", "mail"), ("cursor", "%%%")], "cursor"),
        (
            vec![("queue", "work"), ("cursor", &cursor)],
            "cursor belongs to another search",
        ),
    ];
    for (params, needle) in cases {
        let refused = search(&app, &params).await;
        refused.assert_problem(400, "bad_request");
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(needle),
            "{params:?}: {needle:?} not in {detail:?}"
        );
    }
    // A cursor of the right search holding a position that is not one of the filter's
    // indexes is refused by the script.
    let sealed = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
    let mut opened: Value = serde_json::from_slice(&sealed).unwrap();
    opened["s"] = json!(["tag", 1, 0, false, false]);
    let forged = URL_SAFE_NO_PAD.encode(opened.to_string());
    let refused = search(
        &app,
        &[("queue", "mail"), ("limit", "1"), ("cursor", &forged)],
    )
    .await;
    refused.assert_problem(400, "bad_request");
    assert!(refused.text.contains("cursor"), "{}", refused.text);
}

// ---- acting on what matches ---------------------------------------------------------

#[tokio::test]
async fn retry_puts_failed_running_and_scheduled_jobs_back_and_a_dry_run_changes_nothing() {
    let app = TestApp::start().await;
    let tagged = |queue: &str, jid: &str| PutArgs {
        tags: Some(vec!["r".into()]),
        ..job(queue, jid, "K", json!({}))
    };
    put(&app, tagged("q1", "r1")).await;
    assert_eq!(pop(&app, "q1", "w", 1).await, ["r1"]);
    fail(&app, "r1", "w", "boom", "no").await;
    put(&app, tagged("q2", "r2")).await;
    assert_eq!(pop(&app, "q2", "w", 1).await, ["r2"]);
    put(
        &app,
        PutArgs {
            delay: 600.0,
            ..tagged("q3", "r3")
        },
    )
    .await;
    put(&app, tagged("q4", "r4")).await;
    put(&app, tagged("q5", "r5")).await;
    assert_eq!(pop(&app, "q5", "w", 1).await, ["r5"]);
    let complete = CompleteArgs {
        jid: "r5".into(),
        worker: "w".into(),
        queue: "q5".into(),
        data: "{}".into(),
        ..CompleteArgs::default()
    };
    app.qless.complete(app.clock.now(), complete).await.unwrap();
    app.clock.advance(5.0);

    let body = json!({"filter": {"tag": "r"}, "dry_run": true});
    let dry = act(&app, "retry", body).await;
    assert_eq!(dry.status.as_u16(), 200, "{}", dry.text);
    assert_eq!(
        (
            &dry.body["matched"],
            &dry.body["changed"],
            &dry.body["skipped"]
        ),
        (&json!(5), &json!(3), &json!(2)),
        "{}",
        dry.text
    );
    assert_eq!(dry.body["done"], true);
    assert_eq!(state_of(&app, "r1").await.0, "failed");
    assert_eq!(state_of(&app, "r2").await.0, "running");
    assert_eq!(state_of(&app, "r3").await.0, "scheduled");

    let real = act(&app, "retry", json!({"filter": {"tag": "r"}})).await;
    assert_eq!(real.status.as_u16(), 200, "{}", real.text);
    assert_eq!(
        (&real.body["changed"], &real.body["skipped"]),
        (&json!(3), &json!(2))
    );
    for (jid, queue) in [("r1", "q1"), ("r2", "q2"), ("r3", "q3"), ("r4", "q4")] {
        assert_eq!(
            state_of(&app, jid).await,
            ("waiting".into(), queue.into()),
            "{jid}"
        );
    }
    assert_eq!(state_of(&app, "r5").await.0, "complete");
    let r2 = app.get("/v1/jobs/r2").await;
    assert_eq!(r2.body["worker"], "", "{}", r2.text);
    // Once back, they match and are left alone.
    let again = act(&app, "retry", json!({"filter": {"tag": "r"}})).await;
    assert_eq!(
        (&again.body["changed"], &again.body["skipped"]),
        (&json!(0), &json!(5))
    );
}

#[tokio::test]
async fn unfail_puts_failed_jobs_back_into_the_queues_they_failed_in() {
    let app = TestApp::start().await;
    failed(&app, "q1", "u1", "boom").await;
    failed(&app, "q2", "u2", "boom").await;
    failed(&app, "q3", "u3", "other").await;
    app.clock.advance(5.0);
    let dry = act(
        &app,
        "unfail",
        json!({"filter": {"state": "failed"}, "dry_run": true}),
    )
    .await;
    assert_eq!(
        (&dry.body["matched"], &dry.body["changed"]),
        (&json!(3), &json!(3))
    );
    assert_eq!(state_of(&app, "u1").await.0, "failed");
    let done = act(&app, "unfail", json!({"filter": {"group": "boom"}})).await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);
    assert_eq!(
        (&done.body["matched"], &done.body["changed"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(state_of(&app, "u1").await, ("waiting".into(), "q1".into()));
    assert_eq!(state_of(&app, "u2").await, ("waiting".into(), "q2".into()));
    assert_eq!(state_of(&app, "u3").await.0, "failed");
    let groups = app.get("/v1/failures").await;
    assert_eq!(groups.body, json!({"other": 1}), "{}", groups.text);
}

#[tokio::test]
async fn cancel_leaves_a_job_whose_dependent_stays() {
    let app = TestApp::start().await;
    failed(&app, "q", "c1", "boom").await;
    failed(&app, "q", "c2", "boom").await;
    // c3's dependent (c4) is not failed, so not canceled: c3 stays.
    put(&app, job("q", "c3", "K", json!({}))).await;
    put(
        &app,
        PutArgs {
            depends: Some(vec!["c3".into()]),
            ..job("q", "c4", "K", json!({}))
        },
    )
    .await;
    assert_eq!(pop(&app, "q", "fw", 1).await, ["c3"]);
    fail(&app, "c3", "fw", "boom", "it broke").await;
    let dry = act(
        &app,
        "cancel",
        json!({"filter": {"group": "boom"}, "dry_run": true}),
    )
    .await;
    assert_eq!(
        (&dry.body["changed"], &dry.body["skipped"]),
        (&json!(2), &json!(1))
    );
    let done = act(&app, "cancel", json!({"filter": {"group": "boom"}})).await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);
    assert_eq!(
        (&done.body["changed"], &done.body["skipped"]),
        (&json!(2), &json!(1))
    );
    for gone in ["c1", "c2"] {
        assert_eq!(
            app.get(&format!("/v1/jobs/{gone}")).await.status.as_u16(),
            404
        );
    }
    assert_eq!(state_of(&app, "c3").await.0, "failed");
    // With its dependent in the filter too, both go.
    let both = act(&app, "cancel", json!({"filter": {"queue": "q"}})).await;
    assert_eq!(both.body["changed"], 1, "{}", both.text);
    let rest = act(&app, "cancel", json!({"filter": {"state": "failed"}})).await;
    assert_eq!(rest.body["changed"], 1, "{}", rest.text);
}

#[tokio::test]
async fn move_requeues_into_the_queue_and_leaves_the_jobs_there_already() {
    let app = TestApp::start().await;
    for jid in ["m1", "m2", "m3"] {
        put(
            &app,
            PutArgs {
                tags: Some(vec!["m".into()]),
                ..job("from", jid, "K", json!({}))
            },
        )
        .await;
    }
    put(
        &app,
        PutArgs {
            tags: Some(vec!["m".into()]),
            ..job("to", "m4", "K", json!({}))
        },
    )
    .await;
    app.clock.advance(5.0);
    let body = json!({"filter": {"tag": "m"}, "queue": "to"});
    let done = act(&app, "move", body).await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);
    assert_eq!(
        (&done.body["changed"], &done.body["skipped"]),
        (&json!(3), &json!(1))
    );
    for jid in ["m1", "m2", "m3", "m4"] {
        assert_eq!(
            state_of(&app, jid).await,
            ("waiting".into(), "to".into()),
            "{jid}"
        );
    }
    let from = app.get("/v1/queues/from").await;
    assert_eq!(from.body["waiting"], 0, "{}", from.text);
}

#[tokio::test]
async fn priority_tag_and_untag_change_only_what_differs() {
    let app = TestApp::start().await;
    for (jid, priority) in [("p1", 0.0), ("p2", 7.0), ("p3", 0.0)] {
        put(
            &app,
            PutArgs {
                priority: Some(priority),
                tags: Some(vec!["old".into()]),
                ..job("p", jid, "K", json!({}))
            },
        )
        .await;
    }
    let done = act(
        &app,
        "priority",
        json!({"filter": {"queue": "p"}, "priority": 7}),
    )
    .await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);
    assert_eq!(
        (&done.body["changed"], &done.body["skipped"]),
        (&json!(2), &json!(1))
    );
    for jid in ["p1", "p2", "p3"] {
        let job = app.get(&format!("/v1/jobs/{jid}")).await;
        assert_eq!(job.body["priority"], 7, "{jid}");
    }

    app.qless
        .tag_add(app.clock.now(), "p2", &["new".into()])
        .await
        .unwrap();
    let body = json!({"filter": {"queue": "p"}, "tags": ["new", "vip"], "dry_run": true});
    let dry = act(&app, "tag", body).await;
    assert_eq!(dry.body["changed"], 3, "{}", dry.text);
    let tags = app.get("/v1/jobs/p1").await.body["tags"].clone();
    assert_eq!(tags, json!(["old"]));
    let tagged = act(
        &app,
        "tag",
        json!({"filter": {"queue": "p"}, "tags": ["new"]}),
    )
    .await;
    assert_eq!(
        (&tagged.body["changed"], &tagged.body["skipped"]),
        (&json!(2), &json!(1))
    );
    assert_eq!(
        app.get("/v1/jobs/p1").await.body["tags"],
        json!(["old", "new"])
    );
    let found = search(&app, &[("tag", "new")]).await;
    assert_eq!(jids(&found), set(&["p1", "p2", "p3"]));

    let untagged = act(
        &app,
        "untag",
        json!({"filter": {"tag": "new"}, "tags": ["old", "gone"]}),
    );
    let untagged = untagged.await;
    assert_eq!(untagged.body["changed"], 3, "{}", untagged.text);
    assert_eq!(app.get("/v1/jobs/p2").await.body["tags"], json!(["new"]));
    assert_eq!(jids(&search(&app, &[("tag", "old")]).await), set(&[]));
}

#[tokio::test]
async fn an_action_goes_on_with_its_cursor_a_bounded_slice_per_request() {
    let app = scanning(4).await;
    for n in 0..10 {
        failed(&app, "q", &format!("f{n}"), "boom").await;
    }
    app.clock.advance(5.0);
    let body = json!({"filter": {"group": "boom"}, "limit": 3});
    let (sums, requests) = act_all(&app, "retry", body, async |_| {}).await;
    assert_eq!(sums, [10, 10, 0]);
    assert!(requests >= 4, "{requests} requests for 10 jobs, 3 each");
    for n in 0..10 {
        assert_eq!(state_of(&app, &format!("f{n}")).await.0, "waiting", "f{n}");
    }
    assert_eq!(app.get("/v1/failures").await.body, json!({}));
}

#[tokio::test]
async fn jobs_moving_between_requests_are_left_alone_and_none_is_missed() {
    let app = TestApp::start().await;
    // A failure list, walked from its oldest failure: f0, f1, ...
    for n in 0..8 {
        failed(&app, "q", &format!("f{n}"), "boom").await;
        app.clock.advance(1.0);
    }
    let body = json!({"filter": {"group": "boom"}, "queue": "elsewhere", "limit": 2});
    let (sums, _) = act_all(&app, "move", body, async |request| {
        if request == 1 {
            // The next job in line (the cursor's anchor) is canceled, and one further
            // on is put back into its queue by someone else: it no longer matches.
            app.qless
                .cancel(app.clock.now(), &["f2".into()])
                .await
                .unwrap();
            let requeue = app
                .post("/v1/jobs/f5/requeue", json!({"queue": "mail"}))
                .await;
            assert_eq!(requeue.status.as_u16(), 200, "{}", requeue.text);
        }
    })
    .await;
    assert_eq!(sums[1], 6, "{sums:?}");
    for jid in ["f0", "f1", "f3", "f4", "f6", "f7"] {
        assert_eq!(
            state_of(&app, jid).await,
            ("waiting".into(), "elsewhere".into()),
            "{jid}"
        );
    }
    assert_eq!(
        state_of(&app, "f5").await,
        ("waiting".into(), "mail".into())
    );

    // The same in a sorted set (a queue's waiting jobs): jobs leaving it before the
    // cursor shift the ranks, and no job after them is skipped.
    for n in 0..8 {
        put(&app, job("z", &format!("z{n}"), "K", json!({}))).await;
    }
    let body = json!({"filter": {"queue": "z", "state": "waiting"}, "tags": ["seen"], "limit": 2});
    let (sums, _) = act_all(&app, "tag", body, async |request| {
        if request == 1 {
            let seen = search(&app, &[("tag", "seen")]).await;
            let tagged: Vec<String> = jids(&seen).into_iter().collect();
            assert_eq!(tagged.len(), 2, "{tagged:?}");
            // Both tagged jobs leave the queue, and one not yet tagged too.
            let mut gone = tagged.clone();
            let untagged = (0..8)
                .map(|n| format!("z{n}"))
                .find(|jid| !tagged.contains(jid))
                .unwrap();
            gone.push(untagged);
            app.qless.cancel(app.clock.now(), &gone).await.unwrap();
        }
    })
    .await;
    assert_eq!(sums[1], 2 + 5, "{sums:?}");
    let tagged = jids(&search(&app, &[("tag", "seen")]).await);
    assert_eq!(tagged.len(), 5, "{tagged:?}");
    let left = jids(&search(&app, &[("queue", "z")]).await);
    assert_eq!(left, tagged);
}

#[tokio::test]
async fn bad_action_requests_are_400s_and_change_nothing() {
    let app = TestApp::start().await;
    failed(&app, "q", "x", "boom").await;
    let filter = json!({"group": "boom"});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("explode", json!({"filter": filter}), "explode"),
        (
            "move",
            json!({"filter": filter}),
            "queue is required for move",
        ),
        (
            "retry",
            json!({"filter": filter, "queue": "q"}),
            "queue is only for the move action",
        ),
        (
            "priority",
            json!({"filter": filter}),
            "priority is required",
        ),
        (
            "priority",
            json!({"filter": filter, "priority": "high"}),
            "priority",
        ),
        (
            "tag",
            json!({"filter": filter, "tags": []}),
            "tags must hold 1 to 100",
        ),
        ("untag", json!({"filter": filter}), "tags is required"),
        (
            "cancel",
            json!({"filter": filter, "tags": ["a"]}),
            "tags is only for",
        ),
        ("cancel", json!({}), "filter"),
        (
            "cancel",
            json!({"filter": {"klass": "K"}}),
            "add queue, tag, worker or group",
        ),
        (
            "cancel",
            json!({"filter": {"group": "boom", "colour": 1}}),
            "colour",
        ),
        ("cancel", json!({"filter": {"group": "a b"}}), "group"),
        ("cancel", json!({"filter": filter, "limit": 0}), "limit"),
        ("cancel", json!({"filter": filter, "limit": 501}), "limit"),
        (
            "cancel",
            json!({"filter": filter, "cursor": "abc"}),
            "cursor",
        ),
        ("cancel", json!({"filter": filter, "wat": true}), "wat"),
    ];
    for (action, body, needle) in cases {
        let refused = act(&app, action, body.clone()).await;
        refused.assert_problem(400, "bad_request");
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(needle),
            "{action} {body}: {needle:?} not in {detail:?}"
        );
    }
    assert_eq!(state_of(&app, "x").await.0, "failed");
    // A cursor of the dry run is not one of the action, nor of another filter.
    failed(&app, "q", "y", "boom").await;
    let dry = act(
        &app,
        "cancel",
        json!({"filter": filter, "dry_run": true, "limit": 1}),
    )
    .await;
    let cursor = dry.body["cursor"].clone();
    assert!(cursor.is_string(), "{}", dry.text);
    let real = act(&app, "cancel", json!({"filter": filter, "cursor": cursor})).await;
    real.assert_problem(400, "bad_request");
    let other =
        json!({"filter": {"group": "boom", "queue": "q"}, "dry_run": true, "cursor": cursor});
    act(&app, "cancel", other)
        .await
        .assert_problem(400, "bad_request");
    assert_eq!(state_of(&app, "x").await.0, "failed");
}

// ---- who may act, and the log ----------------------------------------------------

fn token_entry(name: &str, scopes: &[&str]) -> String {
    let digest: String = Sha256::digest(format!("secret-{name}").as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("[[tokens]]\nname = \"{name}\"\nsha256 = \"{digest}\"\nscopes = {scopes:?}\n")
}

async fn as_token(
    app: &TestApp,
    token: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> TestResponse {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer secret-{token}"));
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let body = body.map_or_else(Body::empty, |json| Body::from(json.to_string()));
    app.send(request.body(body).unwrap()).await
}

#[tokio::test]
async fn a_read_token_searches_and_every_action_refuses_it() {
    let tokens = token_entry("reader", &["read"]) + &token_entry("ops", &["admin"]);
    let app = TestApp::start_with_auth(None, &tokens).await;
    failed(&app, "q", "x", "boom").await;
    let found = as_token(&app, "reader", Method::GET, "/v1/search?group=boom", None).await;
    assert_eq!(jids(&found), set(&["x"]));
    let bodies = [
        ("retry", json!({})),
        ("cancel", json!({})),
        ("move", json!({"queue": "q2"})),
        ("unfail", json!({})),
        ("priority", json!({"priority": 1})),
        ("tag", json!({"tags": ["t"]})),
        ("untag", json!({"tags": ["t"]})),
    ];
    for (action, extra) in &bodies {
        let mut body = json!({"filter": {"group": "boom"}, "dry_run": true});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let uri = format!("/v1/search/{action}");
        let refused = as_token(&app, "reader", Method::POST, &uri, Some(body.clone())).await;
        refused.assert_problem(403, "forbidden");
        assert!(refused.text.contains("admin"), "{action}: {}", refused.text);
        let allowed = as_token(&app, "ops", Method::POST, &uri, Some(body)).await;
        assert_eq!(allowed.status.as_u16(), 200, "{action}: {}", allowed.text);
    }
    assert_eq!(state_of_as(&app, "x").await, "failed");

    // The action is logged once, with the token's name (never its secret), the
    // filter and the counts.
    let (captured, _capturing) = capture_logs();
    let body = json!({"filter": {"group": "boom"}});
    let done = as_token(&app, "ops", Method::POST, "/v1/search/retry", Some(body)).await;
    assert_eq!(done.body["changed"], 1, "{}", done.text);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "bulk action")
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let fields = &lines[0]["fields"];
    assert_eq!(fields["token"], "ops", "{text}");
    assert_eq!(fields["action"], "retry", "{text}");
    assert_eq!(fields["filter"], r#"{"group":"boom"}"#, "{text}");
    assert_eq!(
        (&fields["matched"], &fields["changed"]),
        (&json!(1), &json!(1)),
        "{text}"
    );
    assert!(!text.contains("secret-ops"), "{text}");
}

async fn state_of_as(app: &TestApp, jid: &str) -> String {
    let job = as_token(app, "ops", Method::GET, &format!("/v1/jobs/{jid}"), None).await;
    job.body["state"].as_str().unwrap().to_owned()
}

// ---- throttles -------------------------------------------------------------------------

#[tokio::test]
async fn every_throttle_is_listed_by_name() {
    let app = TestApp::start().await;
    let empty = app.get("/v1/throttles").await;
    assert_eq!(
        (empty.status.as_u16(), &empty.body),
        (200, &json!([])),
        "{}",
        empty.text
    );
    for (name, body) in [
        ("smtp", json!({"maximum": 5})),
        ("api", json!({"rate": {"jobs": 10, "seconds": 60}})),
        (
            "db",
            json!({"maximum": 2, "rate": {"jobs": 1, "seconds": 1}}),
        ),
    ] {
        let set = app
            .request(Method::PUT, &format!("/v1/throttles/{name}"), Some(body))
            .await;
        assert_eq!(set.status.as_u16(), 204, "{}", set.text);
    }
    let all = app.get("/v1/throttles").await;
    let names: Vec<&str> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "db", "smtp"], "{}", all.text);
    assert_eq!(all.body[2], app.get("/v1/throttles/smtp").await.body);
    let page = app.get("/v1/throttles?offset=1&count=1").await;
    assert_eq!(page.body.as_array().unwrap().len(), 1);
    assert_eq!(page.body[0]["name"], "db");
    app.get("/v1/throttles?count=0")
        .await
        .assert_problem(400, "bad_request");
}
