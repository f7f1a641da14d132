//! qlessd: an HTTP/JSON job-queue server speaking the qless protocol over Redis.
//!
//! # Map of the crate
//!
//! * [`settings`]: process configuration (flags with `QLESSD_*` environment twins).
//! * [`server`]: builds the application (router, layers) and serves it gracefully;
//!   [`server::run`] starts embedded Redis when no URL is given.
//! * [`state`]: what every handler can reach ([`state::AppState`]) and the request
//!   limits, in a module of its own so that the server and the handlers both import
//!   it and neither imports the other.
//! * [`browser`]: the checks that keep web pages from forging requests (Origin,
//!   Content-Type, Host on loopback).
//! * [`connections`]: the accept loop and its limits (header and idle timeouts,
//!   connection cap, bounded shutdown).
//! * [`middleware`]: the one layer every request goes through (request id, deadline,
//!   panic catcher, request span and server-error log).
//! * [`metrics`]: the Prometheus registry of what is counted as things happen (served
//!   at `/metrics` by `routes::metrics`, with the figures read from Redis at scrape
//!   time, cached briefly).
//! * [`auth`]: bearer tokens (by their SHA-256) from `--auth-file`, the table of each
//!   route's scope, and the layer checking every request against both.
//! * [`telemetry`]: the log (text or JSON, filtered by `RUST_LOG`) and, with
//!   `--otlp-endpoint`, OpenTelemetry spans: small records of qlessd's own, encoded to
//!   OTLP protobuf and posted in batches by a task.
//! * `log_fields`: how the text log writes fields (cheaply: the access log writes a
//!   line per request).
//! * [`clock`]: the one source of `now` (a manual clock in tests).
//! * [`cron`]: cron expressions in time zones, and the fire times of cron templates
//!   the gateway computes for the script.
//! * [`error`]: [`error::ApiError`], rendered as `application/problem+json`.
//! * [`routes`]: one module per resource; thin handlers.
//! * [`core`]: the only code touching Redis: the Lua script (`lua/`, joined at compile
//!   time), one transport (a hand-written RESP connection: per namespace, one that
//!   script calls share with group commit above it, one for the other commands, one
//!   for the event subscription), where the primary is (one server,
//!   Sentinel, or the cluster slot of the namespace, following `ASK` for a slot that
//!   is moving), the embedded `redis-server` supervisor, one typed function per Lua
//!   command, and each command a type (`core::command`: its arguments, whether it
//!   writes, its weight in a group, whether it must go alone rather than grouped,
//!   its subject, what it counts and how its reply decodes), every call recorded (span, timing, job events) in one place. The
//!   driver is in layers (`core::group`): a connection (`link`), the recovery rules
//!   as plain functions from a reply to an action (`recovery`), and grouping by
//!   weight (`grouping`), each tested alone and together against a scripted fake
//!   Redis over an in-memory stream.
//! * [`model`]: request and response types (serde + utoipa), and the names requests
//!   carry (`Jid`, `QueueName`, ..., and the settings' `NamespaceName` and
//!   `TokenName`), which check themselves when deserialized.
//! * [`leasing`]: long-poll pops (waiters woken by the script's events) and
//!   multi-queue selection (ordered, round-robin, weighted lottery).
//! * [`push`]: push delivery: pushed queues' jobs POSTed to their endpoints, signed
//!   (Standard Webhooks), within each queue's concurrency and rate.
//! * [`sweeper`]: the background upkeep that keeps time, visiting the queues that are due.
//! * [`tenants`]: several namespaces in one gateway, chosen by the `Qless-Namespace`
//!   header (or the token); each with its own state.
//! * [`openapi`]: the OpenAPI document served at `/openapi.json`.
//! * [`ui`]: the dashboard at `/ui` (server-rendered HTML, vendored htmx, SVG charts),
//!   calling the same `core` methods as the routes.
//! * [`healthcheck`]: `qlessd healthcheck`, the container health probe.
//!
//! # Imports run one way
//!
//! `core`, `model`, `telemetry` and `metrics` import nothing from `routes`, `server`,
//! `ui` or `middleware`, and no module imports one that imports it back:
//! `tests/architecture.rs` checks the module graph of `src/` on every test run.
//!
//! # The path of one request
//!
//! ```text
//! HTTP -> connections (accept loop: header/idle timeouts, connection cap)
//!      -> middleware (request id, span, panic catcher, deadline)
//!      -> auth (bearer token, scope, namespace) -> browser checks -> body limit
//!      -> routes::<resource>::<handler>     extract (names check themselves) + validate
//!      -> core::Qless::<command>(now, ..)    a command type -> EVALSHA, alone or grouped
//!                                           with concurrent calls (reload on NOSCRIPT)
//!      -> lua: api.lua dispatch -> class files: validate everything, then write
//!      <- reply, or a "CODE Command(): message" error reply
//!      <- core::Error -> ApiError -> problem+json with the right status
//! ```

pub mod auth;
pub mod browser;
pub mod clock;
pub mod connections;
pub mod core;
pub mod cron;
pub mod error;
pub mod healthcheck;
pub mod leasing;
mod log_fields;
pub mod metrics;
pub mod middleware;
pub mod model;
pub mod openapi;
pub mod push;
pub mod routes;
pub mod server;
pub mod settings;
pub mod state;
pub mod sweeper;
pub mod telemetry;
pub mod tenants;
pub mod ui;
