//! The `qlessd` binary and its embedded Redis, as a user runs them; the examples and
//! the README's walkthrough and clients generated from the OpenAPI document, run
//! against it.

mod auth;
mod batch_crash;
mod batch_examples;
mod binary;
mod clients;
mod connection_limits;
mod embedded;
mod examples;
mod gateways;
mod hardening;
mod push;
mod push_examples;
mod readme;
pub(crate) mod running;
mod topology;
mod traces;
