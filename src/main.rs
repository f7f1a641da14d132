//! The `qlessd` binary: parse settings, set up logging, run the server (or the
//! subcommand asked for).

use clap::Parser;
use qlessd::settings::{Command, Settings};
use qlessd::{core, healthcheck, server, telemetry};

// A request allocates and frees many small buffers (bodies, JSON, Redis replies) across
// threads; mimalloc's per-thread heaps cost the gateway about a tenth less CPU per
// request than the system allocator (`cargo bench --bench lifecycle -- http`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let settings = Settings::parse();
    if settings.print_lua {
        print!("{}", core::script::SOURCE);
        return std::process::ExitCode::SUCCESS;
    }
    let outcome = match &settings.command {
        Some(Command::Healthcheck(args)) => healthcheck::run(settings.listen, args).await,
        None => {
            telemetry::init(settings.log_format);
            server::run(settings).await
        }
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("qlessd: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
