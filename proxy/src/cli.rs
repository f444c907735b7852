//! The command line: its options read by clap (derive, [`options`]), checked against each
//! other ([`rules`]), the values of single options (a URL, an address, a DURATION) in
//! [`values`] and [`headers`]; the manual page and the usage, laid out from the same clap
//! definitions, in [`manual`].
//!
//! Why clap's derive and not `lexopt` (ripgrep's choice): the options are declared once, each
//! with its manual entry, its value's name and its reader, and clap reads the argument list
//! (`--flag value`, `--flag=value`, a value that looks like a flag, repeats, `check`); the
//! manual, the synopsis and the checks that they name every option come from that one
//! declaration. `lexopt` would leave the table of options, and so a second copy of it for the
//! manual, to the proxy, which is what it had. clap is built without its default features:
//! no colours, no suggestions, no help renderer of its own (the manual keeps the layout of a
//! manual page, see [`manual`]); `error-context` names the option in what it refuses, which
//! the proxy says in its own words ([`said`]), as it always has. Nothing is read from the
//! environment here: AWS_REGION, AWS_PROFILE and the rest are the AWS SDK's to read.

mod headers;
mod manual;
mod options;
mod rules;
mod values;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};
use http::Uri;

pub use headers::Headers;
pub use values::{is_loopback_host, parse_token, shown, shown_duration};

/// Where the proxy sends, as the command line names it.
#[derive(Debug, PartialEq, Eq)]
pub enum Door {
    /// `--runtime-arn`: `InvokeAgentRuntime` on an AgentCore Runtime.
    Runtime(String),
    /// `--gateway-url`: an AgentCore Gateway's MCP URL, plain MCP.
    Gateway(Uri),
    /// `--url`: any MCP URL, plain MCP.
    Url(Uri),
}

impl Door {
    /// The flag that names it.
    pub fn flag(&self) -> &'static str {
        match self {
            Door::Runtime(_) => "--runtime-arn",
            Door::Gateway(_) => "--gateway-url",
            Door::Url(_) => "--url",
        }
    }
}

/// Where the bearer token comes from (no SigV4 then).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `--bearer-token-env VAR`.
    Env(String),
    /// `--bearer-token-command CMD`.
    Command(String),
}

impl TokenSource {
    /// The flag that names it.
    pub fn flag(&self) -> &'static str {
        match self {
            TokenSource::Env(_) => "--bearer-token-env",
            TokenSource::Command(_) => "--bearer-token-command",
        }
    }
}

/// The proxy's settings, as the command line gives them.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub door: Door,
    pub region: Option<String>,
    /// Runtime only.
    pub qualifier: Option<String>,
    /// Runtime only.
    pub endpoint: Option<String>,
    /// `--url` with SigV4 only.
    pub signing_name: Option<String>,
    /// A bearer token instead of SigV4.
    pub tokens: Option<TokenSource>,
    pub idempotent_tools: Vec<String>,
    /// Never sent again, not even after a refusal.
    pub strict_tools: Vec<String>,
    /// The server's `tools/list` annotations declare tools idempotent.
    pub trust_tool_annotations: bool,
    /// Tool name patterns: what the client sees and may call.
    pub allow_tools: Vec<String>,
    pub deny_tools: Vec<String>,
    /// Only tools annotated `readOnlyHint: true`.
    pub read_only: bool,
    /// One deadline for a whole call.
    pub timeout: Duration,
    /// How long an answer may send nothing.
    pub idle_timeout: Duration,
    /// Tasks run on behalf of clients that do not declare the extension (off: `--no-tasks`).
    pub tasks: bool,
    /// `--max-task-duration`: how long a job run as a task may take (default: the task's TTL,
    /// or 8 hours).
    pub max_task_duration: Option<Duration>,
    /// `--bridge-modern-clients`: a client pinned to MCP 2026-07-28 is bridged to a server of
    /// the `initialize` era.
    pub bridge_modern_clients: bool,
    /// Runtime only.
    pub runtime_user_id: Option<String>,
    /// Runtime only: the runtime's `idleRuntimeSessionTimeout` (default: AgentCore's, 900 s).
    pub runtime_idle_timeout: Option<Duration>,
    /// Runtime only: the runtime's `maxLifetime` (default: AgentCore's, 8 hours).
    pub runtime_max_lifetime: Option<Duration>,
    /// SigV4 only: the AWS profile.
    pub profile: Option<String>,
    /// Runtime only.
    pub stop_session_on_exit: bool,
    /// `--listen`: serve HTTP there instead of stdio.
    pub listen: Option<SocketAddr>,
    pub listen_token_file: Option<PathBuf>,
    /// `--header`: added to every request (checked against the door's rules).
    pub headers: Headers,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Box<Args>),
    /// `check`: the credentials, the target and the server's tools, then exit.
    Check(Box<Args>),
    Help,
    Version,
}

/// Reads the arguments (without the program name): what they ask for, or what is wrong with
/// them.
pub fn parse_args(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let program = OsString::from(NAME);
    let cli = match options::Cli::try_parse_from(std::iter::once(program).chain(raw)) {
        Ok(cli) => cli,
        Err(asked) if asked.kind() == ErrorKind::DisplayHelp => return Ok(Parsed::Help),
        Err(asked) if asked.kind() == ErrorKind::DisplayVersion => return Ok(Parsed::Version),
        Err(refused) => return Err(said(&refused)),
    };
    match cli.command {
        Some(options::Subcommand::Check(options)) => {
            let args = options.check()?;
            if args.listen.is_some() {
                return Err("check sends two requests and exits: it does not take --listen".into());
            }
            Ok(Parsed::Check(Box::new(args)))
        }
        None => Ok(Parsed::Run(Box::new(cli.options.check()?))),
    }
}

/// The program's name: clap's, the messages', the telemetry's service.
pub const NAME: &str = "agentcore-mcp-proxy";

/// `--help`: the manual page.
pub fn help() -> String {
    manual::page(&options::Cli::command())
}

/// The usage, said after a wrong command line.
pub fn usage() -> String {
    manual::usage(&options::Cli::command())
}

/// What clap refused, in the proxy's words: `--timeout soon: not a DURATION …` (a value's
/// reader says it whole), `--runtime-arn needs a value`, `--timeout is given twice`,
/// `--read-only takes no value`, ``unknown option `--nope` ``, ``unexpected argument `stray` ``.
fn said(error: &clap::Error) -> String {
    let context = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.as_str()),
        _ => None,
    };
    if let Some(message) = context(ContextKind::Custom) {
        return message.to_owned();
    }
    // clap names an option with its value: `--runtime-arn <ARN>`.
    let option = context(ContextKind::InvalidArg).and_then(|arg| arg.split(' ').next());
    match (error.kind(), option) {
        (ErrorKind::InvalidValue, Some(flag)) => format!("{flag} needs a value"),
        (ErrorKind::ArgumentConflict, Some(flag)) => format!("{flag} is given twice"),
        (ErrorKind::TooManyValues, Some(flag)) => format!("{flag} takes no value"),
        (ErrorKind::UnknownArgument, Some(flag)) if flag.starts_with('-') => {
            format!("unknown option `{flag}`")
        }
        (ErrorKind::UnknownArgument, Some(word)) => format!("unexpected argument `{word}`"),
        // A word where no argument goes: before or after `check`, or after `--`.
        _ => match context(ContextKind::InvalidSubcommand) {
            Some(word) => format!("unexpected argument `{word}`"),
            None => error.kind().to_string(),
        },
    }
}

#[cfg(test)]
mod tests;
