//! The Redis connection pool for everything but script calls (start-up checks,
//! readiness, loading the script): bb8 over redis-rs's multiplexed connections, opened
//! to wherever the endpoint's primary is now. A multiplexed connection is never
//! reported broken by redis-rs, so after a Redis restart (or a failover) every pooled
//! connection would keep failing; testing each one on checkout would cost a PING per
//! request instead. Here a connection that saw a transport error, or was told that
//! its node is not the primary, is flagged, and bb8 drops it when it comes back.
//!
//! Connections wait as long as the caller allows for Redis's answer. redis-rs gives up
//! after 500 ms by default, which would report a slow but successful command (loading
//! the script into a busy Redis, say) as failed. So connections are opened here with
//! the configured response timeout.

use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::{ConnectionLike as _, MultiplexedConnection};

use super::Endpoint;

/// A pooled connection that remembers whether its socket failed.
pub struct Connection {
    inner: MultiplexedConnection,
    broken: bool,
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
        // A node that is no longer the primary (or no longer owns the slot) is left
        // for a connection to the node that is.
        if let Err(err) = &result
            && (err.is_io_error()
                || err.is_connection_dropped()
                || err.is_unrecoverable_error()
                || super::error::not_here(err.code()).is_some())
        {
            self.broken = true;
        }
        result
    }
}

/// bb8 manager: connections opened with our timeouts to wherever the endpoint's
/// primary is now (a Sentinel or cluster primary checked with `ROLE`), validated by
/// PING.
pub struct Manager {
    endpoint: Endpoint,
    config: AsyncConnectionConfig,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Connection, redis::RedisError> {
        let info = self.endpoint.primary().await?;
        let mut inner = self
            .endpoint
            .client(info)?
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        if self.endpoint.checks_role() {
            let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut inner).await?;
            if !matches!(role.first(), Some(redis::Value::BulkString(role)) if role == b"master") {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "READONLY",
                    "the node is not the primary (yet)".to_owned(),
                )));
            }
        }
        Ok(Connection {
            inner,
            broken: false,
        })
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query_async::<()>(&mut conn.inner).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.broken
    }
}

/// The pool type used throughout `core`.
pub type Pool = bb8::Pool<Manager>;

/// Builds a pool without connecting yet (start-up checks connect explicitly, so a
/// wrong URL gives one clear error instead of a pool-level timeout). Calls wait up to
/// `response_timeout` for Redis's answer. TLS trusts the endpoint's certificates.
pub fn build(
    endpoint: Endpoint,
    size: u32,
    checkout_timeout: Duration,
    response_timeout: Duration,
) -> Pool {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(checkout_timeout))
        .set_response_timeout(Some(response_timeout));
    bb8::Pool::builder()
        .max_size(size)
        .min_idle(Some(1))
        .test_on_check_out(false)
        .connection_timeout(checkout_timeout)
        .build_unchecked(Manager { endpoint, config })
}
