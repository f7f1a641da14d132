//! The reference point of the HTTP figures: the least any HTTP gateway can do for a
//! put. One axum route that reads the body, makes one EVALSHA `put` over a multiplexed
//! connection and answers 201, with no validation, no error mapping, no middleware and
//! no event subscription. The bench binary runs it in its own process
//! (`--serve-bare <redis-url> <addr>`), as the real gateway is, so both are measured
//! the same way.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use redis::aio::MultiplexedConnection;
use serde_json::value::RawValue;

#[derive(Clone)]
struct Bare {
    conn: MultiplexedConnection,
    sha: Arc<str>,
}

#[derive(serde::Deserialize)]
struct PutBody<'a> {
    jid: &'a str,
    klass: &'a str,
    #[serde(borrow)]
    data: &'a RawValue,
}

/// Serves `POST /put` on `addr` in front of the Redis at `url`, until killed.
pub async fn serve(url: &str, addr: &str) {
    let client = redis::Client::open(url).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(qlessd::core::script::SOURCE)
        .query_async(&mut conn)
        .await
        .expect("load the script");
    let state = Bare {
        conn,
        sha: sha.into(),
    };
    let app = axum::Router::new()
        .route("/put", post(put))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    axum::serve(listener, app).await.expect("serve");
}

async fn put(State(mut bare): State<Bare>, body: axum::body::Bytes) -> StatusCode {
    let Ok(job) = serde_json::from_slice::<PutBody>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let now = qlessd::core::format_now(qlessd::clock::Clock::system().now());
    let reply: redis::RedisResult<redis::Value> = redis::cmd("EVALSHA")
        .arg(&*bare.sha)
        .arg(0)
        .arg("put")
        .arg(now)
        .arg("")
        .arg("bench")
        .arg(job.jid)
        .arg(job.klass)
        .arg(job.data.get())
        .arg(0)
        .query_async(&mut bare.conn)
        .await;
    match reply {
        Ok(_) => StatusCode::CREATED,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
