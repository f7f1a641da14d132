//! The `qlessd` binary: parse settings, set up logging, run the server.

use clap::Parser;
use qlessd::settings::Settings;
use qlessd::{core, server, telemetry};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let settings = Settings::parse();
    if settings.print_lua {
        print!("{}", core::script::SOURCE);
        return std::process::ExitCode::SUCCESS;
    }
    telemetry::init(settings.log_format);
    match server::run(settings).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("qlessd: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
