//! `/v1/batches` and `/v1/workflows` over HTTP: creation in one call (or nothing),
//! callbacks put as the batch settles, workflow tasks released with their parents'
//! results, cancellation, and every bad input a 4xx problem that writes nothing.

use std::collections::BTreeMap;

use axum::http::Method;
use serde_json::{Value, json};

use crate::support::{RedisServer, TestApp};

fn snapshot(redis: &RedisServer) -> BTreeMap<String, Vec<u8>> {
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).unwrap();
            (key, dump)
        })
        .collect()
}

/// Pops one job of `queue` for worker `w` and completes it with `result`.
async fn work_one(app: &TestApp, queue: &str, result: Value) -> Option<Value> {
    let popped = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": "w", "count": 1}),
        )
        .await;
    assert_eq!(popped.status.as_u16(), 200, "{}", popped.text);
    let job = popped.body.as_array().unwrap().first()?.clone();
    let jid = job["jid"].as_str().unwrap();
    let done = app
        .post(
            &format!("/v1/jobs/{jid}/complete"),
            json!({"worker": "w", "queue": queue, "result": result}),
        )
        .await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);
    Some(job)
}

#[tokio::test]
async fn a_batch_is_created_in_one_call_and_its_callback_is_put_when_it_succeeds() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({
                "description": "import",
                "jobs": [
                    {"queue": "rows", "klass": "Row", "data": {"n": 1}},
                    {"queue": "rows", "klass": "Row", "data": {"n": 2}, "jid": "row-2"}
                ],
                "on_success": {"queue": "report", "klass": "Report", "jid": "report",
                               "data": {"to": "ops"}},
                "on_complete": {"queue": "report", "klass": "Done", "jid": "done"}
            }),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text);
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    assert_eq!(created.headers["location"], format!("/v1/batches/{bid}"));
    let jids = created.body["jids"].as_array().unwrap();
    assert_eq!(jids.len(), 2);
    assert_eq!(jids[1], "row-2");
    let job = app.get("/v1/jobs/row-2").await;
    assert_eq!(job.body["batch"], bid.as_str());

    let shown = app.get(&format!("/v1/batches/{bid}")).await;
    assert_eq!(shown.status.as_u16(), 200, "{}", shown.text);
    assert_eq!(shown.body["description"], "import");
    assert_eq!(shown.body["state"], "open");
    assert_eq!(shown.body["counts"]["total"], 2);
    assert_eq!(shown.body["counts"]["waiting"], 2);
    assert_eq!(shown.body["callbacks"]["on_success"]["state"], "pending");
    assert_eq!(shown.body["callbacks"]["on_success"]["jid"], "report");
    assert_eq!(shown.body["parent"], Value::Null);

    while work_one(&app, "rows", json!(null)).await.is_some() {}
    let report = app.get("/v1/jobs/report").await;
    assert_eq!(report.status.as_u16(), 200, "{}", report.text);
    assert_eq!(report.body["queue"], "report");
    assert_eq!(report.body["data"]["to"], "ops");
    assert_eq!(report.body["data"]["batch"]["bid"], bid.as_str());
    assert_eq!(report.body["data"]["batch"]["completed"], 2);
    assert_eq!(app.get("/v1/jobs/done").await.status.as_u16(), 200);
    let settled = app.get(&format!("/v1/batches/{bid}?count=1")).await;
    assert_eq!(settled.body["state"], "settled");
    assert_eq!(settled.body["callbacks"]["on_success"]["state"], "fired");
    assert_eq!(settled.body["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(settled.body["next"], 1);
}

#[tokio::test]
async fn jobs_added_later_join_the_batch_until_it_has_finished() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({"jobs": [{"queue": "q", "klass": "Seed"}],
                   "on_success": {"queue": "cb", "klass": "Cb", "jid": "cb"}}),
        )
        .await;
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    // A running job of the batch fans out.
    let popped = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "count": 1}))
        .await;
    let seed = popped.body[0]["jid"].as_str().unwrap().to_owned();
    let added = app
        .post(
            &format!("/v1/batches/{bid}/jobs"),
            json!({"jobs": [{"queue": "q", "klass": "Leaf"}, {"queue": "q", "klass": "Leaf"}]}),
        )
        .await;
    assert_eq!(added.status.as_u16(), 200, "{}", added.text);
    assert_eq!(added.body["jids"].as_array().unwrap().len(), 2);
    let done = app
        .post(
            &format!("/v1/jobs/{seed}/complete"),
            json!({"worker": "w", "queue": "q"}),
        )
        .await;
    assert_eq!(done.status.as_u16(), 200);
    assert_eq!(app.get("/v1/jobs/cb").await.status.as_u16(), 404);
    while work_one(&app, "q", json!(null)).await.is_some() {}
    assert_eq!(app.get("/v1/jobs/cb").await.status.as_u16(), 200);
    // Finished: no more jobs.
    let late = app
        .post(
            &format!("/v1/batches/{bid}/jobs"),
            json!({"jobs": [{"queue": "q", "klass": "Late", "jid": "late"}]}),
        )
        .await;
    late.assert_problem(409, "conflict");
    assert_eq!(app.get("/v1/jobs/late").await.status.as_u16(), 404);
    let unknown = app
        .post(
            "/v1/batches/nope/jobs",
            json!({"jobs": [{"queue": "q", "klass": "Late"}]}),
        )
        .await;
    unknown.assert_problem(404, "not_found");
}

#[tokio::test]
async fn bad_batches_are_4xx_problems_and_write_nothing() {
    let app = TestApp::start().await;
    app.post("/v1/queues/q/jobs", json!({"jid": "taken", "klass": "K"}))
        .await;
    let before = snapshot(&app.redis);
    let cases = [
        (json!({"jobs": [{"klass": "K"}]}), 400, "queue"),
        (
            json!({"jobs": [{"queue": "q", "klass": ""}]}),
            400,
            "jobs[0]",
        ),
        (
            json!({"jobs": [{"queue": "q", "klass": "K", "jid": "a"},
                            {"queue": "q", "klass": "K", "jid": "a"}]}),
            400,
            "given twice",
        ),
        (
            json!({"jobs": [], "on_success": {"queue": "q", "klass": "K", "data": [1]}}),
            400,
            "on_success.data must be a JSON object",
        ),
        (
            json!({"jobs": [], "on_death": {"queue": "q", "klass": "K", "data": {"batch": 1}}}),
            400,
            "must not hold",
        ),
        (json!({"jobs": [], "surprise": 1}), 400, "surprise"),
        (
            json!({"jobs": [{"queue": "q", "klass": "K", "after": ["x"]}]}),
            400,
            "after is for the tasks of a workflow",
        ),
        (json!({"jobs": [], "parent": "a{b}"}), 400, "bid"),
        (json!({"jobs": [], "parent": "missing"}), 404, "missing"),
        (
            json!({"jobs": [{"queue": "q", "klass": "K", "jid": "new"},
                            {"queue": "q", "klass": "K", "jid": "taken"}]}),
            409,
            "taken already exists",
        ),
    ];
    for (body, status, needle) in cases {
        let answer = app.post("/v1/batches", body.clone()).await;
        assert_eq!(answer.status.as_u16(), status, "{body}: {}", answer.text);
        assert!(
            answer.text.contains(needle),
            "{body}: {needle:?} not in {}",
            answer.text
        );
        assert_eq!(
            answer.headers["content-type"], "application/problem+json",
            "{body}"
        );
    }
    assert_eq!(snapshot(&app.redis), before, "nothing was written");
    assert_eq!(app.get("/v1/batches/nope").await.status.as_u16(), 404);
    assert_eq!(app.get("/v1/batches/x?count=0").await.status.as_u16(), 400);
}

#[tokio::test]
async fn deleting_a_batch_cancels_its_waiting_jobs_and_fires_nothing() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({"jobs": [{"queue": "q", "klass": "K"}, {"queue": "q", "klass": "K"}],
                   "on_complete": {"queue": "cb", "klass": "Cb", "jid": "cb"}}),
        )
        .await;
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    let deleted = app
        .request(Method::DELETE, &format!("/v1/batches/{bid}"), None)
        .await;
    assert_eq!(deleted.status.as_u16(), 200, "{}", deleted.text);
    assert_eq!(deleted.body["canceled"], 2);
    let shown = app.get(&format!("/v1/batches/{bid}")).await;
    assert_eq!(shown.body["state"], "canceled");
    assert_eq!(shown.body["counts"]["canceled"], 2);
    assert_eq!(app.get("/v1/jobs/cb").await.status.as_u16(), 404);
    let again = app.request(Method::DELETE, "/v1/batches/nope", None).await;
    again.assert_problem(404, "not_found");
}

#[tokio::test]
async fn a_workflow_releases_each_task_with_its_parents_results() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/workflows",
            json!({"name": "thumbnail", "tasks": {
                "fetch": {"queue": "io", "klass": "Fetch", "data": {"url": "u"}},
                "resize": {"queue": "io", "klass": "Resize", "after": ["fetch"]},
                "notify": {"queue": "io", "klass": "Notify", "after": ["resize"],
                           "on_parent_failure": "cancel"}
            }}),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text);
    let wid = created.body["wid"].as_str().unwrap().to_owned();
    let jids = created.body["jids"].clone();
    assert_eq!(jids.as_object().unwrap().len(), 3);

    let fetched = work_one(&app, "io", json!({"bytes": 10})).await.unwrap();
    assert_eq!(fetched["jid"], jids["fetch"]);
    let resize = work_one(&app, "io", json!("small")).await.unwrap();
    assert_eq!(resize["jid"], jids["resize"]);
    assert_eq!(
        resize["parents"],
        json!({"fetch": {"jid": jids["fetch"], "state": "complete", "result": {"bytes": 10}}})
    );
    let shown = app.get(&format!("/v1/workflows/{wid}")).await;
    assert_eq!(shown.status.as_u16(), 200, "{}", shown.text);
    assert_eq!(shown.body["name"], "thumbnail");
    let tasks = shown.body["tasks"].as_array().unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fetch", "resize", "notify"]);
    assert_eq!(tasks[2]["state"], "waiting");
    assert_eq!(tasks[2]["after"], json!(["resize"]));
    let job = app
        .get(&format!("/v1/jobs/{}", jids["notify"].as_str().unwrap()))
        .await;
    assert_eq!(job.body["workflow"], wid.as_str());

    let canceled = app
        .request(Method::DELETE, &format!("/v1/workflows/{wid}"), None)
        .await;
    assert_eq!(canceled.body["canceled"], 1);
    let after = app.get(&format!("/v1/workflows/{wid}")).await;
    assert_eq!(after.body["tasks"][2]["state"], "canceled");
}

#[tokio::test]
async fn a_bad_graph_is_a_400_naming_the_cycle_or_the_unknown_task_and_writes_nothing() {
    let app = TestApp::start().await;
    let before = snapshot(&app.redis);
    let cycle = app
        .post(
            "/v1/workflows",
            json!({"tasks": {
                "a": {"queue": "q", "klass": "K", "after": ["c"]},
                "b": {"queue": "q", "klass": "K", "after": ["a"]},
                "c": {"queue": "q", "klass": "K", "after": ["b"]}
            }}),
        )
        .await;
    cycle.assert_problem(400, "bad_request");
    assert!(cycle.text.contains("a -> c -> b -> a"), "{}", cycle.text);
    let unknown = app
        .post(
            "/v1/workflows",
            json!({"tasks": {"a": {"queue": "q", "klass": "K", "after": ["ghost"]}}}),
        )
        .await;
    unknown.assert_problem(400, "bad_request");
    assert!(unknown.text.contains("ghost"), "{}", unknown.text);
    let empty = app.post("/v1/workflows", json!({"tasks": {}})).await;
    empty.assert_problem(400, "bad_request");
    let policy = app
        .post(
            "/v1/workflows",
            json!({"tasks": {"a": {"queue": "q", "klass": "K", "on_parent_failure": "panic"}}}),
        )
        .await;
    assert_eq!(policy.status.as_u16(), 400, "{}", policy.text);
    let many: serde_json::Map<String, Value> = (0..1001)
        .map(|i| (format!("t{i}"), json!({"queue": "q", "klass": "K"})))
        .collect();
    let too_many = app.post("/v1/workflows", json!({ "tasks": many })).await;
    too_many.assert_problem(400, "bad_request");
    assert_eq!(snapshot(&app.redis), before, "nothing was written");
    assert_eq!(app.get("/v1/workflows/nope").await.status.as_u16(), 404);
}
