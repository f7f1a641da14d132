//! `core::Error`: what can go wrong below the HTTP layer. Script errors carry the code
//! the Lua raised (the table in `lua/README.md`); everything else is transport.

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

    pub(crate) fn reply(what: impl fmt::Display) -> Self {
        Error::Reply(what.to_string())
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        if let Some(code) = err.code().and_then(ScriptCode::parse) {
            let message = err.detail().unwrap_or_default().trim().to_owned();
            return Error::Script { code, message };
        }
        let transport = err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
            || matches!(err.code(), Some("LOADING" | "MASTERDOWN" | "TRYAGAIN"));
        if transport {
            Error::Unavailable(err.to_string())
        } else {
            Error::Redis(err.to_string())
        }
    }
}

impl<E: std::error::Error> From<bb8::RunError<E>> for Error {
    fn from(err: bb8::RunError<E>) -> Self {
        match err {
            bb8::RunError::User(inner) => Error::Unavailable(inner.to_string()),
            bb8::RunError::TimedOut => {
                Error::Unavailable("timed out waiting for a Redis connection".to_owned())
            }
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
}
