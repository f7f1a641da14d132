//! Where the Redis that serves a namespace is right now. A plain URL names one server;
//! a Sentinel URL names a primary that the sentinels elect (and re-elect after a
//! failover); a Cluster URL names seed nodes, and the namespace's hash tag picks the
//! slot, whose primary serves it. Every connection (script calls and commands, the
//! event subscription) asks where the primary is each time it opens
//! (`resp::Endpoint::primary`), so after a failover or a slot move the next
//! connection lands on the new primary without a restart; a connection told "not
//! here" (`READONLY`, `MOVED`, ...) is dropped by its owner, which is what makes it
//! open anew. (`ASK`, a slot half-way through moving, is followed for the one call
//! instead: `group.rs`.)
//!
//! URL forms (the credentials and the database are the data nodes'):
//!
//! * `redis+sentinel://[user:pass@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB]`, and
//!   `rediss+sentinel://...` for TLS to the sentinels and the nodes alike; sentinels
//!   that require a password of their own (`requirepass` in their configuration) get
//!   it from the query, `?sentinel_password=...` (and `&sentinel_username=...` for an
//!   ACL user), percent-encoded like any URL query;
//! * `redis+cluster://[user:pass@]HOST:PORT[,HOST:PORT...]`, and `rediss+cluster://`.
//!
//! The sentinel side is the redis crate's (`SENTINEL MASTERS`, then `ROLE` on the
//! primary it names); the cluster side asks a seed for the slot's owner
//! (`CLUSTER KEYSLOT`, `CLUSTER SLOTS`), over the connection of `resp.rs`.

use std::io;

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsMode};

use super::Error;

/// How the Redis of one namespace is found.
pub(super) enum Topology {
    /// One server, as its URL says (`redis://`, `rediss://`, `unix://`).
    Direct(String),
    /// The primary the sentinels name for a master name.
    Sentinel(Box<tokio::sync::Mutex<SentinelClient>>),
    /// The primary owning the slot of `key` (the namespace key) in a cluster.
    Cluster {
        seeds: Vec<ConnectionInfo>,
        key: String,
    },
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Topology::Direct(_) => "Direct",
            Topology::Sentinel(_) => "Sentinel",
            Topology::Cluster { .. } => "Cluster",
        })
    }
}

/// The parts of a `redis+sentinel://` or `redis+cluster://` URL.
struct Multi<'a> {
    /// `redis` or `rediss`: how each node is reached.
    scheme: &'a str,
    /// `user:pass@` or empty, as written.
    user_info: &'a str,
    hosts: Vec<&'a str>,
    path: &'a str,
    /// After `?`, as written (percent-encoded).
    query: &'a str,
}

fn split_multi(url: &str) -> Option<Multi<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.split_once('+')?.0;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (user_info, hosts) = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => (&authority[..user_info.len() + 1], hosts),
        None => ("", authority),
    };
    let hosts: Vec<&str> = hosts.split(',').filter(|host| !host.is_empty()).collect();
    Some(Multi {
        scheme,
        user_info,
        hosts,
        path,
        query,
    })
}

/// Whether `url` names a Sentinel-managed or clustered Redis.
pub(super) fn is_multi(url: &str) -> bool {
    scheme_of(url).contains('+') && !scheme_of(url).ends_with("+unix")
}

/// Whether `url` names a Redis Cluster.
pub fn is_cluster(url: &str) -> bool {
    scheme_of(url).ends_with("+cluster")
}

/// Whether the Redis of `url` runs on this machine: a Unix socket, or one host that
/// is a loopback address (`None`, the embedded Redis, is local too). Sentinel and
/// Cluster URLs name several hosts and count as remote, as does a URL that does not
/// parse.
pub fn is_local(url: Option<&str>) -> bool {
    let Some(url) = url else {
        return true;
    };
    if is_multi(url) {
        return false;
    }
    let Ok(info) = url.into_connection_info() else {
        return false;
    };
    match info.addr() {
        ConnectionAddr::Unix(_) => true,
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        _ => false,
    }
}

fn scheme_of(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}

impl Topology {
    /// Reads `url`; `namespace_key` (`ql:{ns}`) picks the slot in a cluster, which
    /// therefore needs one. `ca_pem` is trusted for TLS instead of the system's roots.
    pub(super) fn parse(
        url: &str,
        ca_pem: Option<&[u8]>,
        namespace_key: Option<&str>,
    ) -> Result<Self, Error> {
        let invalid = |why: &dyn std::fmt::Display| {
            Error::Startup(format!("invalid Redis URL {}: {why}", super::redacted(url)))
        };
        if !is_multi(url) {
            return Ok(Topology::Direct(url.to_owned()));
        }
        let kind = scheme_of(url).split_once('+').map_or("", |(_, kind)| kind);
        let multi = split_multi(url).ok_or_else(|| invalid(&"not a URL"))?;
        if !matches!(multi.scheme, "redis" | "rediss") {
            return Err(invalid(&"the scheme must be redis+... or rediss+..."));
        }
        if multi.hosts.is_empty() {
            return Err(invalid(&"no HOST:PORT given"));
        }
        let tls = multi.scheme == "rediss";
        let query: Vec<(String, String)> =
            serde_urlencoded::from_str(multi.query).map_err(|err| invalid(&err))?;
        let mut sentinel_username = None;
        let mut sentinel_password = None;
        for (key, value) in query {
            match (kind, key.as_str()) {
                ("sentinel", "sentinel_username") => sentinel_username = Some(value),
                ("sentinel", "sentinel_password") => sentinel_password = Some(value),
                _ => {
                    return Err(invalid(&format!(
                        "unknown parameter {key:?} (a Sentinel URL takes sentinel_username \
                         and sentinel_password)"
                    )));
                }
            }
        }
        let node = |host: &str, db: &str| -> Result<ConnectionInfo, Error> {
            format!("{}://{}{host}/{db}", multi.scheme, multi.user_info)
                .into_connection_info()
                .map_err(|err| invalid(&err))
        };
        match kind {
            "sentinel" => {
                let mut path = multi.path.split('/');
                let master = path.next().filter(|name| !name.is_empty()).ok_or_else(|| {
                    invalid(&"a Sentinel URL names the master: redis+sentinel://HOST:PORT/NAME")
                })?;
                let db = path.next().unwrap_or("0");
                let settings = node(multi.hosts[0], db)?;
                let settings = settings.redis_settings();
                let sentinels = multi
                    .hosts
                    .iter()
                    .map(|host| {
                        let host = with_port(host, 26379);
                        format!("{}://{host}", multi.scheme)
                            .into_connection_info()
                            .map(|info| info.addr().clone())
                            .map_err(|err| invalid(&err))
                    })
                    .collect::<Result<Vec<ConnectionAddr>, Error>>()?;
                let mut builder =
                    SentinelClientBuilder::new(sentinels, master, SentinelServerType::Master)
                        .map_err(|err| invalid(&err))?
                        .set_client_to_redis_db(settings.db());
                if let Some(user) = settings.username() {
                    builder = builder.set_client_to_redis_username(user);
                }
                if let Some(password) = settings.password() {
                    builder = builder.set_client_to_redis_password(password);
                }
                if let Some(user) = sentinel_username {
                    builder = builder.set_client_to_sentinel_username(user);
                }
                if let Some(password) = sentinel_password {
                    builder = builder.set_client_to_sentinel_password(password);
                }
                if tls {
                    builder = builder
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure);
                    if let Some(pem) = ca_pem {
                        let certificates = || redis::TlsCertificates {
                            client_tls: None,
                            root_cert: Some(pem.to_vec()),
                        };
                        builder = builder
                            .set_client_to_redis_certificates(certificates())
                            .set_client_to_sentinel_certificates(certificates());
                    }
                }
                let client = builder.build().map_err(|err| invalid(&err))?;
                Ok(Topology::Sentinel(Box::new(tokio::sync::Mutex::new(
                    client,
                ))))
            }
            "cluster" => {
                let Some(key) = namespace_key else {
                    return Err(Error::Startup(
                        "a Redis Cluster needs a namespace (--namespace NAME): each \
                         namespace lives in one slot through its hash tag, while the \
                         plain ql: prefix would spread a queue's keys over the cluster"
                            .to_owned(),
                    ));
                };
                if !multi.path.is_empty() && multi.path != "0" {
                    return Err(invalid(&"a Redis Cluster has only database 0"));
                }
                let seeds = multi
                    .hosts
                    .iter()
                    .map(|host| node(&with_port(host, 6379), ""))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Topology::Cluster {
                    seeds,
                    key: key.to_owned(),
                })
            }
            other => Err(invalid(&format!(
                "unknown kind {other:?} (redis+sentinel:// or redis+cluster://)"
            ))),
        }
    }

    /// Whether a connection must check that the node is a primary before use (a
    /// plain URL is taken as given).
    pub(super) fn checks_role(&self) -> bool {
        !matches!(self, Topology::Direct(_))
    }

    /// Whether the database is always 0 here (no `SELECT`).
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Topology::Cluster { .. })
    }
}

/// The one server a plain URL names.
pub(super) fn direct(url: &str) -> io::Result<ConnectionInfo> {
    url.into_connection_info().map_err(io::Error::other)
}

/// The primary the sentinels name now, with the credentials and database to use on it.
pub(super) async fn elected(
    client: &tokio::sync::Mutex<SentinelClient>,
) -> io::Result<ConnectionInfo> {
    let client = client
        .lock()
        .await
        .async_get_client()
        .await
        .map_err(|err| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                format!("no primary from the sentinels: {err}"),
            )
        })?;
    Ok(client.get_connection_info().clone())
}

/// `host` with `:port` added when it has none.
fn with_port(host: &str, port: u16) -> String {
    if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    }
}

/// The primary that serves `slot` by `ranges` (a `CLUSTER SLOTS` reply from `seed`),
/// with `seed`'s credentials.
pub(super) fn slot_owner(
    seed: &ConnectionInfo,
    slot: i64,
    ranges: redis::Value,
) -> io::Result<ConnectionInfo> {
    let redis::Value::Array(ranges) = ranges else {
        return Err(io::Error::other(format!(
            "CLUSTER SLOTS answered {ranges:?}"
        )));
    };
    for range in ranges {
        let redis::Value::Array(fields) = range else {
            continue;
        };
        let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end))) =
            (fields.first(), fields.get(1))
        else {
            continue;
        };
        if !(*start..=*end).contains(&slot) {
            continue;
        }
        let Some(redis::Value::Array(primary)) = fields.get(2) else {
            break;
        };
        let host = match primary.first() {
            Some(redis::Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
            _ => break,
        };
        let Some(redis::Value::Int(port)) = primary.get(1) else {
            break;
        };
        return node_at(seed, &host, *port as u16);
    }
    Err(io::Error::new(
        io::ErrorKind::NotConnected,
        format!("CLUSTERDOWN: no primary serves slot {slot}"),
    ))
}

/// The node at `host:port` of the cluster that `seed` is in, reached as `seed` is
/// (credentials, TLS). An empty host means "the address you reached me at"
/// (cluster-announce), as Redis writes it in `CLUSTER SLOTS` and in redirections.
pub(super) fn node_at(seed: &ConnectionInfo, host: &str, port: u16) -> io::Result<ConnectionInfo> {
    let host = if host.is_empty() || host == "?" {
        match seed.addr() {
            ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
            _ => host.to_owned(),
        }
    } else {
        host.to_owned()
    };
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls { .. } => format!("rediss://{host}:{port}")
            .into_connection_info()
            .map_err(io::Error::other)?
            .addr()
            .clone(),
        _ => ConnectionAddr::Tcp(host, port),
    };
    Ok(seed.clone().set_addr(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_on_this_machine_is_told_apart_from_a_remote_one() {
        for local in [
            None,
            Some("unix:///run/redis.sock"),
            Some("redis://127.0.0.1:6379/0"),
            Some("redis://localhost"),
            Some("rediss://user:secret@127.0.0.2:6380"),
            Some("redis://[::1]:6379"),
        ] {
            assert!(is_local(local), "{local:?}");
        }
        for remote in [
            Some("redis://redis.internal:6379"),
            Some("redis://10.0.0.5"),
            Some("redis://localhost.example.com"),
            Some("redis://[2001:db8::1]:6379"),
            Some("redis+sentinel://127.0.0.1:26379/mymaster"),
            Some("redis+cluster://127.0.0.1:7000"),
            Some("not a url"),
        ] {
            assert!(!is_local(remote), "{remote:?}");
        }
    }

    #[test]
    fn multi_node_urls_are_split_into_their_parts() {
        let multi = split_multi("rediss+sentinel://u:p@a:1,b:2/mymaster/3").unwrap();
        assert_eq!(
            (multi.scheme, multi.user_info, multi.hosts, multi.path),
            ("rediss", "u:p@", vec!["a:1", "b:2"], "mymaster/3")
        );
        let multi = split_multi("redis+cluster://a:1,b:2").unwrap();
        assert_eq!((multi.user_info, multi.path, multi.query), ("", "", ""));
        let multi = split_multi("redis+sentinel://a:1/m/2?sentinel_password=p%40ss").unwrap();
        assert_eq!(
            (multi.hosts, multi.path, multi.query),
            (vec!["a:1"], "m/2", "sentinel_password=p%40ss")
        );
        assert!(is_multi("redis+sentinel://a/m"));
        assert!(!is_multi("redis+unix:///tmp/r.sock"));
        assert!(!is_multi("redis://a"));
        assert!(is_cluster("rediss+cluster://a"));
    }

    #[test]
    fn a_cluster_without_a_namespace_or_a_sentinel_without_a_master_is_refused() {
        let err = Topology::parse("redis+cluster://127.0.0.1:7000", None, None).unwrap_err();
        assert!(err.to_string().contains("needs a namespace"), "{err}");
        let err = Topology::parse("redis+sentinel://127.0.0.1:26379", None, None).unwrap_err();
        assert!(err.to_string().contains("names the master"), "{err}");
        let err = Topology::parse("redis+sentinel://:s3cret@h:1", None, None).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(Topology::parse("redis+sentinel://h:1,h:2/m/2", None, None).is_ok());
        assert!(Topology::parse("redis+cluster://h:1", None, Some("ql:{a}")).is_ok());
    }

    #[test]
    fn sentinels_take_their_own_credentials_from_the_query_and_nothing_else() {
        let url = "redis+sentinel://:node@h:1,h:2/m?sentinel_username=s&sentinel_password=p%26w";
        assert!(Topology::parse(url, None, None).is_ok());
        for url in [
            "redis+sentinel://h:1/m?sentinel_pasword=s3cret",
            "redis+cluster://h:1?sentinel_password=s3cret",
        ] {
            let err = Topology::parse(url, None, Some("ql:{a}")).unwrap_err();
            assert!(err.to_string().contains("unknown parameter"), "{err}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
    }
}
