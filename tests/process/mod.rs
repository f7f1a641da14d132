//! The `qlessd` binary and its embedded Redis, as a user runs them.

mod auth;
mod binary;
mod embedded;
