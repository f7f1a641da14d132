//! Request and response types of the HTTP API: serde for the wire, utoipa for the
//! OpenAPI document, nothing else.

mod problem;

pub use problem::{Health, Problem};
