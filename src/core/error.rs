//! `core::Error`: what can go wrong below the HTTP layer. Script errors carry the code
//! the Lua raised (the table in `lua/README.md`); everything else is transport.
//!
//! A script error reply reads `<CODE> user_script:<n>: <Command>(): <message>`: the
//! code for us, the marker for qless clients (which tell script errors from Redis
//! errors by it). Parsing keeps the code and drops the marker, so the message the
//! HTTP client sees is the clean `<Command>(): <message>`.

use std::fmt;

/// The error codes the script raises, first word of its error replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptCode {
    /// `QL_ARG`: a missing or malformed argument.
    Argument,
    /// `QL_NOTFOUND`: the job or recurring template does not exist.
    NotFound,
    /// `QL_STATE`: the job is not in a state that allows the command.
    State,
    /// `QL_WORKER`: the job is held by another worker (the caller lost its lock).
    Worker,
    /// `QL_QUEUE`: the job runs in another queue.
    Queue,
    /// `QL_DEPENDENCY`: cancelling would break a dependency.
    Dependency,
    /// `QL_COMMAND`: unknown or missing command (a gateway bug).
    Command,
    /// `QL_KEYS`: the namespace key was refused (a gateway bug).
    Keys,
    /// `QL_TIMEDOUT`: the job's run was ended by its `max_run` (`lua/deadlines.lua`).
    TimedOut,
}

impl ScriptCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptCode::Argument => "QL_ARG",
            ScriptCode::NotFound => "QL_NOTFOUND",
            ScriptCode::State => "QL_STATE",
            ScriptCode::Worker => "QL_WORKER",
            ScriptCode::Queue => "QL_QUEUE",
            ScriptCode::Dependency => "QL_DEPENDENCY",
            ScriptCode::Command => "QL_COMMAND",
            ScriptCode::Keys => "QL_KEYS",
            ScriptCode::TimedOut => "QL_TIMEDOUT",
        }
    }

    /// Parses the first word of an error reply.
    pub fn parse(code: &str) -> Option<Self> {
        Some(match code {
            "QL_ARG" => ScriptCode::Argument,
            "QL_NOTFOUND" => ScriptCode::NotFound,
            "QL_STATE" => ScriptCode::State,
            "QL_WORKER" => ScriptCode::Worker,
            "QL_QUEUE" => ScriptCode::Queue,
            "QL_DEPENDENCY" => ScriptCode::Dependency,
            "QL_COMMAND" => ScriptCode::Command,
            "QL_KEYS" => ScriptCode::Keys,
            "QL_TIMEDOUT" => ScriptCode::TimedOut,
            _ => return None,
        })
    }
}

impl fmt::Display for ScriptCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of the `core` layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The script refused the call; `message` is its `Command(): message` text.
    #[error("{code} {message}")]
    Script { code: ScriptCode, message: String },
    /// Redis could not be reached, or no connection was free in time.
    #[error("redis unavailable: {0}")]
    Unavailable(String),
    /// Redis answered with an error that is not the script's (OOM, READONLY, ...).
    #[error("redis error: {0}")]
    Redis(String),
    /// The reply did not have the shape this code expects (a bug, here or in Lua).
    #[error("unexpected reply from the script: {0}")]
    Reply(String),
    /// The server could not start (missing binary, unreachable Redis, old version).
    #[error("{0}")]
    Startup(String),
}

impl Error {
    /// The script code, when this is a script error.
    pub fn script_code(&self) -> Option<ScriptCode> {
        match self {
            Error::Script { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether Redis refused the call for lack of memory.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::Unavailable(why) if why == OUT_OF_MEMORY)
    }

    /// The stable word saying why Redis is unavailable, for clients and probes: a
    /// [`NOT_HERE`] code (`READONLY`, `MOVED`, ...), or none. It never holds a secret.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Error::Unavailable(why) | Error::Redis(why) => not_here(why.split([' ', ':']).next()),
            _ => None,
        }
    }

    pub(crate) fn reply(what: impl fmt::Display) -> Self {
        Error::Reply(what.to_string())
    }
}

/// The Redis error codes that mean "not here" or "not now": the node is not the
/// primary, does not own the slot, is loading, or the cluster or the replicas are
/// down. Nothing ran; the call may succeed on the right node or a moment later.
const NOT_HERE: &[&str] = &[
    "MOVED",
    "ASK",
    "READONLY",
    "LOADING",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "NOREPLICAS",
];

/// `code` when it is one of the [`NOT_HERE`] codes.
pub(crate) fn not_here(code: Option<&str>) -> Option<&'static str> {
    let code = code?;
    NOT_HERE.iter().copied().find(|word| *word == code)
}

/// What a refusal for lack of memory says (HTTP clients get `ApiError::OutOfMemory`):
/// Redis's own text names the script's SHA and changes between versions, this does
/// not.
pub(crate) const OUT_OF_MEMORY: &str =
    "Redis is out of memory and refuses writes; nothing was changed";

/// The message of a script error reply's text after its code, without the
/// `user_script:<n>: ` marker (kept as it is when there is none).
fn strip_marker(detail: &str) -> &str {
    let detail = detail.trim();
    let Some(rest) = detail.strip_prefix("user_script:") else {
        return detail;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[digits..].strip_prefix(':') {
        Some(message) if digits > 0 => message.trim_start(),
        _ => detail,
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        if let Some(code) = err.code().and_then(ScriptCode::parse) {
            let message = strip_marker(err.detail().unwrap_or_default()).to_owned();
            return Error::Script { code, message };
        }
        // Redis refuses the whole call before the script starts (its shebang asks for
        // that), so nothing was written: a temporary condition, like an unreachable
        // Redis, with a stable message.
        if err.code() == Some("OOM") {
            return Error::Unavailable(OUT_OF_MEMORY.to_owned());
        }
        if let Some(word) = not_here(err.code()) {
            return Error::Unavailable(format!(
                "{word} {}",
                err.detail().unwrap_or_default().trim()
            ));
        }
        let transport = err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout();
        if transport {
            Error::Unavailable(err.to_string())
        } else {
            Error::Redis(err.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        use ScriptCode::*;
        for code in [
            Argument, NotFound, State, Worker, Queue, Dependency, Command, Keys,
        ] {
            assert_eq!(ScriptCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ScriptCode::parse("ERR"), None);
    }

    #[test]
    fn the_marker_is_dropped_from_script_messages() {
        let cases = [
            (
                "user_script:1: Complete(): Job a does not exist",
                "Complete(): Job a does not exist",
            ),
            ("user_script:123:  Put(): x", "Put(): x"),
            ("Complete(): no marker", "Complete(): no marker"),
            ("user_script:: Put(): x", "user_script:: Put(): x"),
            ("user_script:1 Put(): x", "user_script:1 Put(): x"),
        ];
        for (detail, message) in cases {
            assert_eq!(strip_marker(detail), message, "{detail}");
        }
    }

    #[test]
    fn out_of_memory_is_unavailable_with_a_stable_message() {
        let reply = redis::parse_redis_value(
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
        )
        .unwrap();
        let redis::Value::ServerError(reply) = reply else {
            panic!("an error value");
        };
        let err = Error::from(redis::RedisError::from(reply));
        assert!(err.is_out_of_memory(), "{err:?}");
        assert!(matches!(&err, Error::Unavailable(why) if why == OUT_OF_MEMORY));
        assert!(!Error::Unavailable("cannot reach Redis".into()).is_out_of_memory());
    }

    #[test]
    fn not_here_and_not_now_replies_are_unavailable_with_their_word() {
        for (reply, word) in [
            (&b"-MOVED 3999 127.0.0.1:6381\r\n"[..], "MOVED"),
            (b"-ASK 3999 127.0.0.1:6381\r\n", "ASK"),
            (
                b"-READONLY You can't write against a read only replica.\r\n",
                "READONLY",
            ),
            (
                b"-LOADING Redis is loading the dataset in memory\r\n",
                "LOADING",
            ),
            (
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                "TRYAGAIN",
            ),
            (b"-CLUSTERDOWN The cluster is down\r\n", "CLUSTERDOWN"),
            (b"-MASTERDOWN Link with MASTER is down\r\n", "MASTERDOWN"),
            (
                b"-NOREPLICAS Not enough good replicas to write.\r\n",
                "NOREPLICAS",
            ),
        ] {
            let redis::Value::ServerError(reply) = redis::parse_redis_value(reply).unwrap() else {
                panic!("an error value");
            };
            let err = Error::from(redis::RedisError::from(reply));
            assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
            assert_eq!(err.reason(), Some(word), "{err:?}");
        }
        assert_eq!(
            Error::Unavailable("Connection refused".into()).reason(),
            None
        );
    }

    #[test]
    fn a_script_error_reply_keeps_its_code_and_a_clean_message() {
        let reply = redis::parse_redis_value(
            b"-QL_STATE user_script:1: Complete(): Job a is not currently running: waiting\r\n",
        )
        .unwrap();
        let redis::Value::ServerError(reply) = reply else {
            panic!("an error value");
        };
        let err = Error::from(redis::RedisError::from(reply));
        assert_eq!(err.script_code(), Some(ScriptCode::State));
        let Error::Script { message, .. } = err else {
            unreachable!()
        };
        assert_eq!(
            message,
            "Complete(): Job a is not currently running: waiting"
        );
    }
}
