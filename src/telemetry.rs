//! Logging setup: text or JSON lines, filtered by `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// Installs the global subscriber. Safe to call once per process.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
