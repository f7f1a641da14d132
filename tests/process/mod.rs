//! The `qlessd` binary and its embedded Redis, as a user runs them.

mod binary;
mod embedded;
mod hardening;
