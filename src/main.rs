//! The `qlessd` binary: parse settings, set up logging, run the server (or the
//! subcommand asked for).

use clap::Parser;
use qlessd::settings::{Command, Settings};
use qlessd::{auth, core, healthcheck, server, telemetry};

// A request allocates and frees many small buffers (bodies, JSON, Redis replies) across
// threads; mimalloc's per-thread heaps cost the gateway about a tenth less CPU per
// request than the system allocator (`cargo bench --bench lifecycle -- http`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let settings = Settings::parse();
    if settings.print_lua {
        print!("{}", core::script::SOURCE);
        return std::process::ExitCode::SUCCESS;
    }
    // The server's log (a subcommand writes only what it prints). Kept until the process
    // exits: dropping the guard writes out the lines still buffered.
    let log = settings
        .command
        .is_none()
        .then(|| telemetry::init_log(settings.log_format));
    // The server on `--threads` threads; a subcommand makes one request at most. One
    // thread is a current-thread runtime: the multi-thread scheduler with one worker
    // kept `block_on`'s future on a second thread and paid for work-stealing nobody
    // could do (single-job worker path: 2.6% fewer instructions, `docs/archive/benchmarks-2026-11.md`).
    let runtime = match settings.command {
        None if settings.threads() > 1 => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(settings.threads())
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    };
    let code = match runtime {
        Ok(runtime) => runtime.block_on(run(settings)),
        Err(err) => {
            eprintln!("qlessd: cannot start the runtime: {err}");
            std::process::ExitCode::FAILURE
        }
    };
    drop(log);
    code
}

async fn run(settings: Settings) -> std::process::ExitCode {
    let outcome = match &settings.command {
        Some(Command::Healthcheck(args)) => healthcheck::run(&settings.listen, args).await,
        Some(Command::Token(args)) => match auth::new_token(args) {
            Ok((secret, entry)) => {
                eprintln!(
                    "The token's secret is on the first line, shown only now: clients send \
                     `Authorization: Bearer <secret>`. Add the entry below it to the auth file \
                     (it holds only the secret's SHA-256), then send qlessd a SIGHUP."
                );
                println!("{secret}\n\n{entry}");
                Ok(())
            }
            Err(message) => Err(message),
        },
        None => match telemetry::init_tracing(
            settings.otlp_endpoint.as_deref(),
            settings.otlp_sample_ratio,
        ) {
            Ok(tracing) => {
                let outcome = server::run(settings).await;
                if let Some(tracing) = tracing {
                    tracing.shutdown().await;
                }
                outcome
            }
            Err(message) => Err(message),
        },
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("qlessd: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
