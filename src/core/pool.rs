//! The Redis connection pool: bb8 over bb8-redis's multiplexed connections, with one
//! addition. bb8-redis never reports a multiplexed connection as broken, so after a
//! Redis restart every pooled connection would keep failing; testing each one on
//! checkout would cost a PING per request instead. Here a connection that saw a
//! transport error is flagged, and bb8 drops it when it comes back to the pool.
//!
//! Calls do not hold a connection: they take a clone of its handle and give the
//! connection straight back (see `Qless::connection`), so concurrent calls share a
//! few sockets and redis-rs pipelines them; clones share the broken flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bb8_redis::RedisConnectionManager;
use redis::aio::{ConnectionLike as _, MultiplexedConnection};

use super::Error;

/// A pooled connection that remembers whether its socket failed. Clones share the
/// socket (redis-rs pipelines concurrent requests over it) and the broken flag.
#[derive(Clone)]
pub struct Connection {
    inner: MultiplexedConnection,
    broken: Arc<AtomicBool>,
}

impl Connection {
    /// Sends one command, flagging the connection when the transport fails. An error
    /// reply is an `Err`, but errors nested in an array reply stay in the array (a
    /// `batch` reply holds one error per failed call).
    pub async fn query(&mut self, cmd: &redis::Cmd) -> Result<redis::Value, redis::RedisError> {
        let result = match self.inner.req_packed_command(cmd).await {
            Ok(redis::Value::ServerError(err)) => Err(err.into()),
            other => other,
        };
        if let Err(err) = &result
            && (err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error())
        {
            self.broken.store(true, Ordering::Release);
        }
        result
    }

    /// Sends a pipeline, flagging the connection when the transport fails.
    pub async fn query_pipeline(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<redis::Value>, redis::RedisError> {
        let result = pipe.query_async(&mut self.inner).await;
        if let Err(err) = &result
            && (err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error())
        {
            self.broken.store(true, Ordering::Release);
        }
        result
    }
}

/// bb8 manager wrapping [`RedisConnectionManager`].
pub struct Manager {
    inner: RedisConnectionManager,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Connection, redis::RedisError> {
        let inner = self.inner.connect().await?;
        Ok(Connection {
            inner,
            broken: Arc::new(AtomicBool::new(false)),
        })
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), redis::RedisError> {
        self.inner.is_valid(&mut conn.inner).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.broken.load(Ordering::Acquire)
    }
}

/// The pool type used throughout `core`.
pub type Pool = bb8::Pool<Manager>;

/// Builds a pool without connecting yet (start-up checks connect explicitly, so a
/// wrong URL gives one clear error instead of a pool-level timeout).
pub fn build(url: &str, size: u32, checkout_timeout: Duration) -> Result<Pool, Error> {
    let inner = RedisConnectionManager::new(url)
        .map_err(|err| Error::Startup(format!("invalid Redis URL {url:?}: {err}")))?;
    Ok(bb8::Pool::builder()
        .max_size(size)
        .min_idle(Some(1))
        .test_on_check_out(false)
        .connection_timeout(checkout_timeout)
        .build_unchecked(Manager { inner }))
}
