//! `agentcore-mcp-proxy`: an MCP proxy to an AWS Bedrock AgentCore Runtime, an AgentCore
//! Gateway or any MCP URL — SigV4 (IAM) or a bearer token (OAuth) — for MCP clients that speak
//! stdio (the default) or take a URL (`--listen`). `--help` is its manual page.
//!
//! ```text
//! cargo install agentcore-mcp-proxy
//! agentcore-mcp-proxy --runtime-arn ARN [--listen 127.0.0.1:PORT [--listen-token-file PATH]]
//! agentcore-mcp-proxy --gateway-url https://ID.gateway.bedrock-agentcore.REGION.amazonaws.com/mcp
//! agentcore-mcp-proxy --url URL --bearer-token-command 'get-token'
//! ```

#![forbid(unsafe_code)]

mod answers;
mod call;
mod check;
mod cli;
mod listen;
mod otlp;
mod shutdown;
mod sse;
mod stack;
mod stdio;
mod tokens;
mod tools;

use std::process::ExitCode;

use tracing::warn;

use cli::{Args, NAME, Parsed};
use stack::StartError;

fn main() -> ExitCode {
    let args = match cli::parse_args(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(args)) => *args,
        Ok(Parsed::Check(args)) => return run_check(*args),
        Ok(Parsed::Help) => {
            print!("{}", cli::help());
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            println!("{NAME} {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(message) => return usage_error(&message),
    };
    // Read before anything starts: a bad file is a bad command line.
    let token = match &args.listen_token_file {
        Some(path) => match read_token(path) {
            Ok(token) => Some(token),
            Err(message) => return usage_error(&message),
        },
        None => None,
    };
    let plan = otlp::Plan::from_env();
    let runtime = match start_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let export = start_logging(plan, &runtime);
    // Before anything can start a process (the credential chain): see `take_stdin`.
    let input = match args.listen {
        Some(_) => None,
        None => Some(stdio::take_stdin().unwrap_or_else(|e| {
            // A closed or odd fd 0: read it as it is (a child could inherit it then).
            warn!("cannot take the standard input for the proxy alone: {e}");
            Box::new(std::io::stdin())
        })),
    };
    let telemetry = for_stack(export.as_ref());
    let code = runtime.block_on(run(args, token, input, telemetry));
    // While the runtime still runs: the exporter's requests run on it.
    if let Some(export) = export {
        export.shutdown(otlp::SHUTDOWN_TIMEOUT);
    }
    // The stdin reader may still be blocked in a read: do not wait for it.
    runtime.shutdown_background();
    code
}

/// The async runtime, or the exit code after saying why there is none.
fn start_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("{NAME}: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Logging, and the OpenTelemetry export `plan` asks for (see `otlp`): its providers, to shut
/// down at exit.
fn start_logging(plan: otlp::Plan, runtime: &tokio::runtime::Runtime) -> Option<otlp::Export> {
    let export = plan.start(runtime.handle());
    init_logging(export.as_ref().and_then(otlp::Export::tracer));
    if let Some(export) = &export {
        export.report();
    }
    export
}

/// What the stack records for the export, if there is one.
fn for_stack(export: Option<&otlp::Export>) -> stack::Telemetry {
    export.map(otlp::Export::for_stack).unwrap_or_default()
}

/// `check`: its own runtime, no stdin taken (it reads none, and starts no relay).
fn run_check(args: Args) -> ExitCode {
    let plan = otlp::Plan::from_env();
    let runtime = match start_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let export = start_logging(plan, &runtime);
    let code = runtime.block_on(check::run(args, for_stack(export.as_ref())));
    if let Some(export) = export {
        export.shutdown(otlp::SHUTDOWN_TIMEOUT);
    }
    code
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!(
        "{NAME}: {message}\n\n{}\nSee `{NAME} --help`.",
        cli::usage()
    );
    ExitCode::from(2)
}

fn read_token(path: &std::path::Path) -> Result<String, String> {
    let content =
        std::fs::read(path).map_err(|e| format!("--listen-token-file {}: {e}", path.display()))?;
    let token = cli::parse_token(path, &content)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "{NAME}: warning: --listen-token-file {} can be read by other users (chmod 600 it)",
                path.display()
            );
        }
    }
    Ok(token)
}

/// tracing to stderr, filtered by `RUST_LOG` (a level or directives; info by default); and,
/// with `tracer` (traces exported), agentcore-tower's spans and events at info and above to it,
/// whatever `RUST_LOG` says.
fn init_logging(tracer: Option<opentelemetry_sdk::trace::SdkTracer>) {
    use tracing_subscriber::EnvFilter;
    let given = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let (filter, bad) = match given.as_deref().map(EnvFilter::try_new) {
        None => (EnvFilter::new("info"), None),
        Some(Ok(filter)) => (filter, None),
        Some(Err(e)) => (EnvFilter::new("info"), Some(e)),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match tracer {
        None => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_env_filter(filter)
            .init(),
        Some(tracer) => {
            use tracing_subscriber::filter::Targets;
            use tracing_subscriber::prelude::*;
            // Each layer its own filter: RUST_LOG=warn must not turn the export off.
            let log = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_filter(filter);
            // The crate's fields alone: not tracing's file, line, thread, target and timings.
            let export = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
                .with_filter(Targets::new().with_target("agentcore_tower", tracing::Level::INFO));
            tracing_subscriber::registry().with(log).with(export).init();
        }
    }
    if let (Some(given), Some(e)) = (given, bad) {
        warn!("RUST_LOG={given:?} is not a filter ({e}); logging at info");
    }
}

async fn run(
    args: Args,
    token: Option<String>,
    input: Option<stdio::MessagesIn>,
    telemetry: stack::Telemetry,
) -> ExitCode {
    let mode = stack::Mode {
        // Many MCP sessions may share a listener: each gets its microVM, and ends it with
        // DELETE. On stdio, one client: one runtime session, stopped at exit when asked.
        per_mcp_session: args.listen.is_some(),
        stop_session_on_delete: args.listen.is_some() || args.stop_session_on_exit,
    };
    let built = match stack::build(&args, mode, &telemetry).await {
        Ok(built) => built,
        Err(StartError::Usage(message)) => return usage_error(&message),
        Err(StartError::Failed(message)) => {
            tracing::error!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let tools = tools::Tools::new(&args);
    match args.listen {
        Some(address) => listen::run(built, tools, address, token, args.stop_session_on_exit).await,
        None => {
            // At exit: a runtime session is stopped when asked; an MCP endpoint's session is
            // ended, as an MCP client that goes away does (a stdio client cannot send it).
            let at_exit = match built.kind {
                stack::Kind::Runtime if args.stop_session_on_exit => {
                    stdio::AtExit::StopRuntimeSession
                }
                stack::Kind::Runtime => stdio::AtExit::Nothing,
                stack::Kind::Endpoint => stdio::AtExit::EndMcpSession,
            };
            let Some(input) = input else {
                unreachable!("stdio mode takes stdin at start")
            };
            stdio::run(input, built, tools, at_exit).await
        }
    }
}
