//! Shared test support: a private Redis per test and an app around it.

pub mod app;
pub mod redis;
pub mod topology;

#[allow(unused_imports)]
pub use app::{START, TestApp, TestResponse, connect};
#[allow(unused_imports)]
pub use redis::RedisServer;
