//! Shared test support: a private Redis per test and an app around it.

pub mod app;
pub mod redis;
pub mod topology;

#[allow(unused_imports)]
pub use app::{START, TestApp, TestResponse, connect};
#[allow(unused_imports)]
pub use redis::RedisServer;

/// reqwest is built with rustls but no crypto provider of its own (qlessd's push
/// deliveries give it a TLS configuration on the `ring` provider), so a client built
/// with its defaults needs the process's provider installed first.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP client for driving qlessd from outside.
#[allow(dead_code)]
pub fn http() -> reqwest::Client {
    http_builder().build().expect("an HTTP client")
}

/// [`http`], to be configured.
#[allow(dead_code)]
pub fn http_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}
