//! The one integration-test binary: `support` (a private redis-server per test, a test
//! app), `lua` (the script's semantics through `core`, in logical time), `api` (the
//! HTTP contract), `process` (the `qlessd` binary itself).

mod support;

mod api;
mod architecture;
mod lua;
mod process;
mod ui;
