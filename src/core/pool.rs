//! The Redis connection pool for everything but script calls (start-up checks,
//! readiness, loading the script): bb8 over bb8-redis's multiplexed connections, with
//! one addition. bb8-redis never reports a multiplexed connection as broken, so after
//! a Redis restart every pooled connection would keep failing; testing each one on
//! checkout would cost a PING per request instead. Here a connection that saw a
//! transport error is flagged, and bb8 drops it when it comes back to the pool.
//!
//! Connections wait as long as the caller allows for Redis's answer. redis-rs gives up
//! after 500 ms by default, which would report a slow but successful command (loading
//! the script into a busy Redis, say) as failed. So connections are opened here with
//! the configured response timeout rather than by bb8-redis's manager, which keeps the
//! default.

use std::time::Duration;

use bb8_redis::RedisConnectionManager;
use redis::AsyncConnectionConfig;
use redis::aio::{ConnectionLike as _, MultiplexedConnection};

use super::Error;

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
        if let Err(err) = &result
            && (err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error())
        {
            self.broken = true;
        }
        result
    }
}

/// bb8 manager: connections opened with our timeouts, validated by
/// [`RedisConnectionManager`]'s PING.
pub struct Manager {
    inner: RedisConnectionManager,
    client: redis::Client,
    config: AsyncConnectionConfig,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Connection, redis::RedisError> {
        let inner = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Connection {
            inner,
            broken: false,
        })
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), redis::RedisError> {
        self.inner.is_valid(&mut conn.inner).await
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        conn.broken
    }
}

/// The pool type used throughout `core`.
pub type Pool = bb8::Pool<Manager>;

/// Builds a pool without connecting yet (start-up checks connect explicitly, so a
/// wrong URL gives one clear error instead of a pool-level timeout). Calls wait up to
/// `response_timeout` for Redis's answer. A `rediss://` URL trusts `ca_file`'s
/// certificates, or the system's roots.
pub fn build(
    url: &str,
    ca_file: Option<&std::path::Path>,
    size: u32,
    checkout_timeout: Duration,
    response_timeout: Duration,
) -> Result<Pool, Error> {
    let invalid = |err: redis::RedisError| {
        Error::Startup(format!("invalid Redis URL {}: {err}", super::redacted(url)))
    };
    let inner = RedisConnectionManager::new(url).map_err(invalid)?;
    let client = match ca_file {
        // The pool's side of a `rediss://` URL with our own CA; without one, redis-rs
        // trusts the system's roots.
        Some(path) => {
            let pem = std::fs::read(path).map_err(|err| {
                Error::Startup(format!(
                    "cannot read CA certificates from {}: {err}",
                    path.display()
                ))
            })?;
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            };
            redis::Client::build_with_tls(url, certificates).map_err(invalid)?
        }
        None => redis::Client::open(url).map_err(invalid)?,
    };
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(checkout_timeout))
        .set_response_timeout(Some(response_timeout));
    Ok(bb8::Pool::builder()
        .max_size(size)
        .min_idle(Some(1))
        .test_on_check_out(false)
        .connection_timeout(checkout_timeout)
        .build_unchecked(Manager {
            inner,
            client,
            config,
        }))
}
