//! What the driver does with each reply: the recovery rules as plain functions from
//! a reply (and what was sent) to an [`Action`], so that each rule is a row of a
//! table test rather than a branch buried in the connection task.
//!
//! The rule behind them: a call Redis certainly did not run (it refused it before
//! the script started: the error codes below) may go once more, on a new connection
//! or after a short backoff; a call whose outcome is unknown (its connection failed
//! or fell silent, or the replicas did not confirm its write) is reported
//! unavailable and never sent again, since a write could run twice. Nothing is sent
//! a third time.
//!
//! | reply                                   | script call, group, batch            | plain command | once sent again |
//! |-----------------------------------------|--------------------------------------|---------------|-----------------|
//! | `NOSCRIPT` (Redis lost its scripts)     | load the script, send again here     | its answer    | fails           |
//! | `MOVED`, `READONLY`, `MASTERDOWN`       | drop the connection, send again on a new one (with the script) | same | drop, fail |
//! | `ASK <slot> <node>`                     | send once to that node, after `ASKING` | same        | same            |
//! | `LOADING`, `TRYAGAIN`, `CLUSTERDOWN`, `NOREPLICAS` | send again after [`BACKOFF`] | fails unavailable | fails unavailable |
//! | another error, to a group               | each call again alone                | -             | each fails      |
//! | `ROLE` of a node that is not a primary  | -                                    | fails `READONLY`, connection dropped | - |
//!
//! Dropping a connection fails everything else in flight on it as unavailable: the
//! driver does not know whether Redis ran those. A `SCRIPT LOAD` or `WAIT` told "not
//! here" drops the connection too; after `WAIT`, the invocation it follows is
//! delivered only when enough replicas acknowledged it ([`acknowledged`]).

use std::time::Duration;

use redis::{ConnectionInfo, ServerError, Value};

use super::super::resp::is_primary;
use super::super::{Error, Replicas, topology};

/// How long a call refused "not now" (`LOADING`, `TRYAGAIN`, ...) waits before it
/// goes again: long enough for a slot migration's step or a failover's election to
/// move on, short next to a request's deadline.
pub(super) const BACKOFF: Duration = Duration::from_millis(100);

/// What was sent, as the recovery rules tell it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// One script invocation answered whole: a call alone, or a `batch` of
    /// `Qless::call_many`.
    Script,
    /// A group of calls as one `batch` invocation, one reply per call.
    Group,
    /// A plain command, answered as Redis answers it (an error reply is a value).
    Command,
    /// `ROLE`: answered as a command, and the connection is dropped when the node is
    /// not a primary.
    Role,
    /// `SCRIPT LOAD` before invocations sent again after `NOSCRIPT`.
    Load,
    /// `WAIT` for replicas after an invocation that may have written.
    Wait,
}

/// What to do with a reply.
#[derive(Debug)]
pub(super) enum Action {
    /// Hand it to its callers (for an invocation followed by `WAIT`, once the
    /// replicas acknowledged it).
    Deliver(Value),
    /// `NOSCRIPT`: nothing ran; load the script and send the invocation again, on this
    /// connection.
    Reload,
    /// Not the primary, or not the slot's owner: nothing ran, and nothing will on
    /// this connection. Drop it, failing what is in flight behind with `err`, and send
    /// this once more on a new connection (where the primary is now, loading the
    /// script first) when `again`; otherwise fail it with `err` too.
    Reconnect { err: Error, again: bool },
    /// `ASK`: the slot is moving and the keys are on `node` already; send it there
    /// once, after `ASKING`, on a connection of its own.
    Redirect(ConnectionInfo),
    /// Not now: nothing ran; send it again after [`BACKOFF`].
    Backoff,
    /// The script refused the group as a whole, which it does only before any call
    /// ran (a command it does not know, or a call with a malformed argument): each
    /// call goes again alone, so each gets its own answer.
    Split,
    /// Its callers get `err`; the connection stays.
    Fail(Error),
}

/// What to do with `reply`, the answer to what was sent (`kind`), on a connection to
/// `node`; `again` is whether it was sent once more already.
pub(super) fn decide(kind: Kind, reply: Value, again: bool, node: &ConnectionInfo) -> Action {
    let Value::ServerError(err) = reply else {
        if kind == Kind::Role && !is_primary(&reply) {
            let err = Error::Unavailable("READONLY the Redis node is not a primary".to_owned());
            return Action::Reconnect { err, again: false };
        }
        return Action::Deliver(reply);
    };
    let invocation = matches!(kind, Kind::Script | Kind::Group);
    match err.code() {
        "MOVED" | "READONLY" | "MASTERDOWN" => Action::Reconnect {
            again: !again && !matches!(kind, Kind::Load | Kind::Wait),
            err: error(err),
        },
        "ASK" => match asked(node, &err) {
            Some(node) if !matches!(kind, Kind::Load | Kind::Wait) => Action::Redirect(node),
            _ => Action::Reconnect {
                err: error(err),
                again: false,
            },
        },
        "NOSCRIPT" if invocation && !again => Action::Reload,
        "LOADING" | "TRYAGAIN" | "CLUSTERDOWN" | "NOREPLICAS"
            if !matches!(kind, Kind::Load | Kind::Wait) =>
        {
            if invocation && !again {
                Action::Backoff
            } else {
                Action::Fail(error(err))
            }
        }
        _ if kind == Kind::Group && !again => Action::Split,
        _ => Action::Deliver(Value::ServerError(err)),
    }
}

/// Whether `reply` to what was sent (`kind`) means that the node lacks the script
/// the invocation names.
pub(super) fn needs_script(kind: Kind, reply: &Value) -> bool {
    matches!(kind, Kind::Script | Kind::Group)
        && matches!(reply, Value::ServerError(err) if err.code() == "NOSCRIPT")
}

/// An error reply as the callers hear it ("not here" and "not now" codes are
/// unavailable, with their word first).
fn error(err: ServerError) -> Error {
    redis::RedisError::from(err).into()
}

/// The node an `ASK <slot> <host>:<port>` reply names, reached as `node` (the
/// connection's node) is: same credentials, and an empty host is `node`'s own.
fn asked(node: &ConnectionInfo, err: &ServerError) -> Option<ConnectionInfo> {
    let (_slot, address) = err.details()?.trim().split_once(' ')?;
    let (host, port) = address.rsplit_once(':')?;
    topology::node_at(node, host, port.parse().ok()?).ok()
}

/// Whether the write behind `reply` reached the replicas, as `WAIT` answered
/// (`ack`). An invocation refused whole (an error reply) wrote nothing and needs no
/// acknowledgement; any other is reported unavailable unless enough replicas have it,
/// since a failover now would lose it: its outcome is unknown, so it is never sent
/// again.
pub(super) fn acknowledged(replicas: &Replicas, reply: &Value, ack: &Value) -> Result<(), Error> {
    if matches!(reply, Value::ServerError(_)) {
        return Ok(());
    }
    match ack {
        Value::Int(count) if *count >= i64::from(replicas.count) => Ok(()),
        Value::Int(count) => Err(Error::Unavailable(format!(
            "NOREPLICAS the write reached {count} of {} replicas within {} ms; it may or \
             may not survive a failover",
            replicas.count,
            replicas.timeout.as_millis()
        ))),
        other => Err(Error::Unavailable(format!(
            "NOREPLICAS WAIT answered {other:?}; the write may or may not survive a failover"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use Kind::*;

    fn reply(text: &str) -> Value {
        redis::parse_redis_value(text.as_bytes()).unwrap()
    }

    fn node() -> ConnectionInfo {
        topology::direct("redis://:pw@10.0.0.1:7000/0").unwrap()
    }

    /// The action for `reply` as a short word, with what it carries.
    fn decided(kind: Kind, text: &str, again: bool) -> String {
        match decide(kind, reply(text), again, &node()) {
            Action::Deliver(Value::ServerError(err)) => format!("deliver -{}", err.code()),
            Action::Deliver(_) => "deliver".to_owned(),
            Action::Reload => "reload".to_owned(),
            Action::Reconnect { err, again } => {
                let word = err.reason().unwrap_or("?");
                let unavailable = matches!(err, Error::Unavailable(_));
                assert!(unavailable, "{err:?}");
                if again {
                    format!("reconnect, again ({word})")
                } else {
                    format!("reconnect, fail ({word})")
                }
            }
            Action::Redirect(at) => format!("redirect {}", at.addr()),
            Action::Backoff => "backoff".to_owned(),
            Action::Split => "split".to_owned(),
            Action::Fail(err) => format!("fail {}", err.reason().unwrap_or("?")),
        }
    }

    const MOVED: &str = "-MOVED 3999 10.0.0.2:7001\r\n";
    const ASK: &str = "-ASK 3999 10.0.0.2:7001\r\n";
    const READONLY: &str = "-READONLY You can't write against a read only replica.\r\n";
    const MASTERDOWN: &str = "-MASTERDOWN Link with MASTER is down\r\n";
    const NOSCRIPT: &str = "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    const LOADING: &str = "-LOADING Redis is loading the dataset in memory\r\n";
    const TRYAGAIN: &str = "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
    const CLUSTERDOWN: &str = "-CLUSTERDOWN The cluster is down\r\n";
    const NOREPLICAS: &str = "-NOREPLICAS Not enough good replicas to write.\r\n";
    const SCRIPT_ERROR: &str = "-QL_ARG user_script:1: Put(): bad\r\n";
    const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    const PRIMARY: &str = "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";
    const REPLICA: &str =
        "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:1\r\n";

    #[test]
    fn every_reply_to_every_kind_of_request_has_one_action() {
        #[rustfmt::skip]
        let table: &[(Kind, &str, bool, &str)] = &[
            // What was sent, the reply, whether it was sent again already: the action.
            (Script, ":1\r\n", false, "deliver"),
            (Script, SCRIPT_ERROR, false, "deliver -QL_ARG"),
            (Script, OOM, false, "deliver -OOM"),
            (Script, NOSCRIPT, false, "reload"),
            (Script, NOSCRIPT, true, "deliver -NOSCRIPT"),
            (Script, MOVED, false, "reconnect, again (MOVED)"),
            (Script, MOVED, true, "reconnect, fail (MOVED)"),
            (Script, READONLY, false, "reconnect, again (READONLY)"),
            (Script, READONLY, true, "reconnect, fail (READONLY)"),
            (Script, MASTERDOWN, false, "reconnect, again (MASTERDOWN)"),
            (Script, MASTERDOWN, true, "reconnect, fail (MASTERDOWN)"),
            (Script, ASK, false, "redirect 10.0.0.2:7001"),
            (Script, ASK, true, "redirect 10.0.0.2:7001"),
            (Script, "-ASK 3999\r\n", false, "reconnect, fail (ASK)"),
            (Script, LOADING, false, "backoff"),
            (Script, LOADING, true, "fail LOADING"),
            (Script, TRYAGAIN, false, "backoff"),
            (Script, TRYAGAIN, true, "fail TRYAGAIN"),
            (Script, CLUSTERDOWN, false, "backoff"),
            (Script, CLUSTERDOWN, true, "fail CLUSTERDOWN"),
            (Script, NOREPLICAS, false, "backoff"),
            (Script, NOREPLICAS, true, "fail NOREPLICAS"),
            (Group, "*2\r\n:1\r\n:2\r\n", false, "deliver"),
            (Group, SCRIPT_ERROR, false, "split"),
            (Group, SCRIPT_ERROR, true, "deliver -QL_ARG"),
            (Group, NOSCRIPT, false, "reload"),
            (Group, NOSCRIPT, true, "deliver -NOSCRIPT"),
            (Group, MOVED, false, "reconnect, again (MOVED)"),
            (Group, ASK, false, "redirect 10.0.0.2:7001"),
            (Group, LOADING, false, "backoff"),
            (Group, CLUSTERDOWN, true, "fail CLUSTERDOWN"),
            (Command, "+OK\r\n", false, "deliver"),
            (Command, NOSCRIPT, false, "deliver -NOSCRIPT"),
            (Command, SCRIPT_ERROR, false, "deliver -QL_ARG"),
            (Command, MOVED, false, "reconnect, again (MOVED)"),
            (Command, READONLY, true, "reconnect, fail (READONLY)"),
            (Command, ASK, false, "redirect 10.0.0.2:7001"),
            (Command, LOADING, false, "fail LOADING"),
            (Command, TRYAGAIN, false, "fail TRYAGAIN"),
            (Command, NOREPLICAS, false, "fail NOREPLICAS"),
            (Role, PRIMARY, false, "deliver"),
            (Role, REPLICA, false, "reconnect, fail (READONLY)"),
            (Role, LOADING, false, "fail LOADING"),
            (Role, MOVED, false, "reconnect, again (MOVED)"),
            (Load, "$40\r\n0123456789012345678901234567890123456789\r\n", false, "deliver"),
            (Load, "-ERR Error compiling script\r\n", true, "deliver -ERR"),
            (Load, MOVED, true, "reconnect, fail (MOVED)"),
            (Load, READONLY, true, "reconnect, fail (READONLY)"),
            (Load, ASK, true, "reconnect, fail (ASK)"),
            (Load, LOADING, true, "deliver -LOADING"),
            (Wait, ":1\r\n", false, "deliver"),
            (Wait, MOVED, false, "reconnect, fail (MOVED)"),
            (Wait, ASK, false, "reconnect, fail (ASK)"),
            (Wait, NOREPLICAS, false, "deliver -NOREPLICAS"),
        ];
        for &(kind, text, again, action) in table {
            assert_eq!(
                decided(kind, text, again),
                action,
                "{kind:?} answered {text:?} (sent again already: {again})"
            );
        }
    }

    #[test]
    fn only_invocations_need_the_script_loaded_after_noscript() {
        for (kind, needs) in [
            (Script, true),
            (Group, true),
            (Command, false),
            (Role, false),
            (Load, false),
            (Wait, false),
        ] {
            assert_eq!(needs_script(kind, &reply(NOSCRIPT)), needs, "{kind:?}");
            assert!(!needs_script(kind, &reply(SCRIPT_ERROR)));
            assert!(!needs_script(kind, &reply(":1\r\n")));
        }
    }

    #[test]
    fn ask_names_the_node_to_send_to_reached_as_the_connection_was() {
        let at = |text: &str| match decide(Script, reply(text), false, &node()) {
            Action::Redirect(at) => at,
            other => panic!("{other:?}"),
        };
        let to = at(ASK);
        assert_eq!(
            to.addr(),
            &redis::ConnectionAddr::Tcp("10.0.0.2".into(), 7001)
        );
        assert_eq!(to.redis_settings().password(), Some("pw"));
        // An empty host is the address the connection reached (cluster-announce).
        let to = at("-ASK 3999 :7002\r\n");
        assert_eq!(
            to.addr(),
            &redis::ConnectionAddr::Tcp("10.0.0.1".into(), 7002)
        );
        for bad in ["-ASK 3999\r\n", "-ASK 3999 10.0.0.2:port\r\n", "-ASK\r\n"] {
            assert!(
                matches!(
                    decide(Script, reply(bad), false, &node()),
                    Action::Reconnect { again: false, .. }
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_write_is_delivered_only_when_enough_replicas_acknowledged_it() {
        let replicas = Replicas {
            count: 2,
            timeout: Duration::from_millis(250),
        };
        #[rustfmt::skip]
        let table: &[(&str, &str, Result<(), &str>)] = &[
            // The invocation's reply, WAIT's answer: delivered, or the error's start.
            (":1\r\n", ":2\r\n", Ok(())),
            (":1\r\n", ":3\r\n", Ok(())),
            (":1\r\n", ":1\r\n", Err("NOREPLICAS the write reached 1 of 2 replicas within 250 ms")),
            (":1\r\n", ":0\r\n", Err("NOREPLICAS the write reached 0 of 2")),
            (":1\r\n", "-ERR WAIT cannot be used with replica instances\r\n", Err("NOREPLICAS WAIT answered")),
            // Refused whole, it wrote nothing: nothing to acknowledge.
            (SCRIPT_ERROR, ":0\r\n", Ok(())),
            (NOSCRIPT, ":0\r\n", Ok(())),
        ];
        for &(answer, ack, expected) in table {
            let result = acknowledged(&replicas, &reply(answer), &reply(ack));
            match (result, expected) {
                (Ok(()), Ok(())) => {}
                (Err(Error::Unavailable(why)), Err(start)) => {
                    assert!(
                        why.starts_with(start),
                        "{why:?} for {answer:?} then {ack:?}"
                    );
                }
                (result, expected) => {
                    panic!("{result:?}, not {expected:?}: {answer:?} then {ack:?}")
                }
            }
        }
    }
}
