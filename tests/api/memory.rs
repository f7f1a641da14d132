//! Redis out of memory, through the API: a write is answered with a problem whose
//! code says so, and the calls that only delete (cancel, forgetting a queue) still
//! run, so memory can be freed without going around the gateway.

use serde_json::json;

use crate::support::RedisServer;
use crate::support::app::TestApp;

fn memory(redis: &RedisServer, field: &str) -> u64 {
    let mut conn = redis.client().get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("memory").query(&mut conn).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in INFO memory"))
}

fn exists(redis: &RedisServer, key: &str) -> bool {
    let mut conn = redis.client().get_connection().unwrap();
    redis::cmd("EXISTS").arg(key).query(&mut conn).unwrap()
}

/// Fills Redis with jobs of queue `fill` until it refuses a put, and lowers
/// `maxmemory` under what it then uses, so that it stays full. Returns the limit it
/// was filled to and the jids of the jobs put.
async fn fill_up(app: &TestApp) -> (u64, Vec<String>) {
    // A megabyte of room from here (the test Redis's policy is `noeviction`, Redis's
    // default), then jobs until Redis refuses one.
    let limit = memory(&app.redis, "used_memory") + (1 << 20);
    let mut conn = app.redis.client().get_connection().unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query::<()>(&mut conn)
        .unwrap();
    let data = format!("\"{}\"", "x".repeat(200));
    let mut filled = Vec::new();
    // The puts' events wait in the gateway's subscription until it reads them, and
    // Redis counts them as used memory meanwhile: once a put is refused, wait for that
    // buffer to drain, and fill again if that made room, so that Redis stays full.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    'filling: loop {
        loop {
            let jid = format!("fill-{}", filled.len());
            let args = ["w", "fill", &jid, "K", &data, "0"].map(str::to_owned);
            match app.qless.call("put", 0.0, args).await {
                Ok(_) => filled.push(jid),
                Err(err) if err.is_out_of_memory() => break,
                Err(err) => panic!("{err}"),
            }
        }
        while memory(&app.redis, "mem_clients_normal") > 256 << 10 {
            assert!(
                std::time::Instant::now() < deadline,
                "the subscription never drained"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if memory(&app.redis, "used_memory") > memory(&app.redis, "maxmemory") {
            break 'filling;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis never stayed full"
        );
    }
    assert!(
        filled.len() > 100,
        "{} jobs filled a megabyte",
        filled.len()
    );
    // Full by a margin: what client buffers still hold (and may free) cannot bring
    // Redis back under the limit before the calls that follow.
    let full = memory(&app.redis, "used_memory") - (512 << 10);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(full)
        .query::<()>(&mut conn)
        .unwrap();
    (limit, filled)
}

#[tokio::test]
async fn out_of_memory_a_put_says_so_and_cancel_and_forget_still_free_memory() {
    let app = TestApp::start().await;
    let (limit, filled) = fill_up(&app).await;
    let mut conn = app.redis.client().get_connection().unwrap();

    // A write: 503 with its own word (not the bare "Redis is unavailable"), nothing
    // written.
    let put = app
        .post(
            "/v1/queues/more/jobs",
            json!({"jid": "late", "klass": "K", "data": {}}),
        )
        .await;
    put.assert_problem(503, "out_of_memory");
    assert_eq!(put.headers["retry-after"], "1");
    assert!(
        put.body["detail"]
            .as_str()
            .unwrap()
            .contains("out of memory"),
        "{}",
        put.text
    );
    assert!(!exists(&app.redis, "ql:j:late"));

    // Deleting still works: one job, then all the others in one call.
    let before_freeing = memory(&app.redis, "used_memory");
    let one = app
        .request(axum::http::Method::DELETE, "/v1/jobs/fill-0", None)
        .await;
    assert_eq!(one.status.as_u16(), 204, "{}", one.text);
    assert!(!exists(&app.redis, "ql:j:fill-0"));
    for chunk in filled[1..].chunks(1000) {
        let canceled = app.post("/v1/jobs/cancel", json!({ "jids": chunk })).await;
        assert_eq!(canceled.status.as_u16(), 200, "{}", canceled.text);
        assert_eq!(
            canceled.body["canceled"].as_array().unwrap().len(),
            chunk.len()
        );
    }
    assert!(!exists(
        &app.redis,
        &format!("ql:j:{}", filled[filled.len() - 1])
    ));
    let forgotten = app
        .request(axum::http::Method::DELETE, "/v1/queues/fill", None)
        .await;
    assert_eq!(forgotten.status.as_u16(), 204, "{}", forgotten.text);
    let listed: Option<f64> = redis::cmd("ZSCORE")
        .arg("ql:queues")
        .arg("fill")
        .query(&mut conn)
        .unwrap();
    assert_eq!(listed, None, "the queue is still listed");
    // (The cancels' events wait in the gateway's subscription until it reads them, and
    // Redis counts them as used memory until then: see the wait below.)

    // With the memory freed, writes are taken again. The events of the cancels wait in
    // the gateway's subscription until it reads them, and Redis counts them as used
    // memory until then: wait for the figure to fall under the limit first.
    // Back to the first limit: the margin taken above only kept Redis full through the
    // refused put, and the gateway has since loaded the script's other copies (the
    // `allow-oom` one for the cancels), which take room of their own.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query::<()>(&mut conn)
        .unwrap();
    let maxmemory = memory(&app.redis, "maxmemory");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let used = memory(&app.redis, "used_memory");
        if used < maxmemory {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "used memory stays at {used} bytes against maxmemory {maxmemory} after the cancels \
             (clients {}, dataset {})",
            memory(&app.redis, "mem_clients_normal"),
            memory(&app.redis, "used_memory_dataset")
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(memory(&app.redis, "used_memory") < before_freeing);
    let put = app
        .post(
            "/v1/queues/more/jobs",
            json!({"jid": "late", "klass": "K", "data": {}}),
        )
        .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
}

/// Cancel runs through the `allow-oom` copy of the script, and cancelling the last
/// open job of a batch settles it, which puts its `on_complete` callback: that put is
/// not lost for lack of memory (lua/README.md, "Out of memory", says why the copy may
/// write it).
#[tokio::test]
async fn out_of_memory_cancelling_the_last_job_of_a_batch_still_puts_its_callback() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({
                "jobs": [{"queue": "work", "klass": "K", "jid": "member"}],
                "on_complete": {"queue": "report", "klass": "Done", "jid": "done",
                                "data": {"to": "ops"}}
            }),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text);
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    fill_up(&app).await;
    let put = app
        .post(
            "/v1/queues/more/jobs",
            json!({"jid": "late", "klass": "K", "data": {}}),
        )
        .await;
    put.assert_problem(503, "out_of_memory");

    let canceled = app
        .request(axum::http::Method::DELETE, "/v1/jobs/member", None)
        .await;
    assert_eq!(canceled.status.as_u16(), 204, "{}", canceled.text);
    assert!(!exists(&app.redis, "ql:j:member"));
    assert!(exists(&app.redis, "ql:j:done"), "the callback was not put");
    let callback = app.get("/v1/jobs/done").await;
    assert_eq!(callback.status.as_u16(), 200, "{}", callback.text);
    assert_eq!(callback.body["queue"], "report");
    assert_eq!(callback.body["state"], "waiting");
    assert_eq!(callback.body["data"]["to"], "ops");
    assert_eq!(callback.body["data"]["batch"]["bid"], bid.as_str());
    assert_eq!(callback.body["data"]["batch"]["canceled"], 1);
    let batch = app.get(&format!("/v1/batches/{bid}")).await;
    assert_eq!(batch.status.as_u16(), 200, "{}", batch.text);
    assert_eq!(batch.body["state"], "settled", "{}", batch.text);
}
