//! The options as clap reads them, each with its manual entry: the doc comment of a field is
//! what `--help` says of the option (kept verbatim, line breaks included: the manual is laid
//! out for 80 columns), its `value_name` the word the manual and the synopsis name its value
//! with. An option without a comment shares the entry of the one after it.
//!
//! Every option that takes a value takes the next argument whatever it looks like
//! (`allow_hyphen_values`: `--bearer-token-command '-x'`, `--idempotent-tool --read-only`), as
//! the proxy always has; each value is read by its function in [`values`](super::values)
//! through [`Checked`], which names the option in the message.

// The field comments are the manual's plain text for a terminal, not Markdown: a URL in them
// is no link to make, `[::1]` no item to link to.
#![allow(rustdoc::bare_urls, rustdoc::broken_intra_doc_links)]

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentcore_tower::invoke::MAX_RUNTIME_SESSION_TIME;
use clap::builder::TypedValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, Command};
use http::{HeaderName, HeaderValue, Uri};

use super::headers::parse_header;
use super::manual;
use super::values::{parse_duration, parse_duration_up_to, parse_listen, parse_pattern, parse_url};

/// The command line: `check` and its options, or the options alone.
#[derive(clap::Parser, Debug)]
#[command(
    name = super::NAME,
    version,
    about = manual::NAME,
    override_usage = manual::SYNOPSIS,
    before_long_help = manual::DESCRIPTION,
    after_long_help = manual::AFTER_OPTIONS,
    disable_help_flag = true,
    disable_version_flag = true,
    disable_help_subcommand = true,
    // `--runtime-arn ARN check` is no `check`: an argument, and a wrong one.
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Subcommand>,
    #[command(flatten)]
    pub options: Options,
}

/// What the proxy does instead of relaying.
#[derive(clap::Subcommand, Debug)]
pub enum Subcommand {
    /// The credentials, the target and the server's tools, then exit.
    #[command(version, disable_help_flag = true, disable_version_flag = true)]
    Check(Options),
}

/// The options as given, before they are checked against each other
/// ([`Options::check`](super::rules)).
#[derive(clap::Args, Debug)]
pub struct Options {
    /// The runtime to invoke:
    /// arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID.
    #[arg(long, value_name = "ARN", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub runtime_arn: Option<String>,

    /// The MCP URL of an AgentCore Gateway:
    /// https://ID.gateway.bedrock-agentcore.REGION.amazonaws.com/mcp.
    /// Signed for bedrock-agentcore in the region the host names (else
    /// --region, else the configured one), unless a TOKEN option is given.
    #[arg(long, value_name = "URL", value_parser = Checked(parse_url))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub gateway_url: Option<Uri>,

    /// Any MCP URL; every request goes to it, path and query as given.
    /// Needs --signing-name (SigV4) or a TOKEN option. A user or password
    /// in the URL is refused; http:// is for a loopback address only.
    #[arg(long, value_name = "URL", value_parser = Checked(parse_url))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub url: Option<Uri>,

    /// With --url: the service to sign for, e.g. execute-api (API
    /// Gateway), lambda (a Lambda function URL), aws-mcp (the AWS MCP
    /// Server). Not with a TOKEN option.
    #[arg(long, value_name = "NAME", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub signing_name: Option<String>,

    /// The region to sign for (or, for a runtime with a token, to call).
    /// For a runtime: default the ARN's (a profile's default region never
    /// sends the call elsewhere), else the configured one. For a gateway:
    /// the one in its host name wins. For --url: default the configured
    /// one; there is none to guess from the URL.
    #[arg(long, value_name = "REGION", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub region: Option<String>,

    /// Send "Authorization: Bearer TOKEN", TOKEN being the value of the
    /// environment variable VAR (read once, at start: a running process's
    /// environment does not change, so a 401 is answered, not retried), in
    /// place of SigV4. A value that is no usable bearer token (RFC 6750's
    /// letters, digits and -._~+/ then =s, at least 8 characters) stops
    /// the proxy at start (exit code 2).
    #[arg(long, value_name = "VAR", value_parser = Checked(variable))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub bearer_token_env: Option<String>,

    /// Send "Authorization: Bearer TOKEN", TOKEN being the standard output
    /// of CMD (run by sh -c; cmd /C on Windows) without the whitespace
    /// around it, in place of SigV4. CMD runs at start, then again after a
    /// 401, and before a token that is a JWT expiring within 60 s is used;
    /// its token is kept in memory only. CMD gets no standard input, cannot
    /// prompt on the terminal, and may run for 60 s; on Unix it runs in a
    /// process group of its own, and one that runs longer is stopped with
    /// every process of that group. A CMD that fails (a non-zero exit, no
    /// token, or no usable bearer token, as for --bearer-token-env) is an
    /// error naming its exit status and
    /// the first line of its standard error, never what it printed on
    /// standard output.
    #[arg(long, value_name = "CMD", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub bearer_token_command: Option<String>,

    /// For a runtime: the endpoint to invoke. Default: DEFAULT.
    #[arg(long, value_name = "QUALIFIER", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub qualifier: Option<String>,

    /// For a runtime: where to send, e.g. a VPC endpoint. Default:
    /// AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, else AWS_ENDPOINT_URL, else the
    /// region's.
    #[arg(long, value_name = "URL", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub endpoint: Option<String>,

    /// With SigV4: the credentials (SSO, assume-role and credential_process
    /// included) and the region of this AWS profile, as AWS_PROFILE=NAME
    /// would give them. Credentials in the environment (AWS_ACCESS_KEY_ID)
    /// still come first, as in every AWS SDK. Not with a TOKEN option.
    #[arg(long, value_name = "NAME", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub profile: Option<String>,

    /// For a runtime: send X-Amzn-Bedrock-AgentCore-Runtime-User-Id: ID
    /// with every invocation, the user the runtime acts for (needs the
    /// bedrock-agentcore:InvokeAgentRuntimeForUser permission).
    #[arg(long, value_name = "ID", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub runtime_user_id: Option<String>,

    // Its entry is --runtime-max-lifetime's.
    #[arg(long, value_name = "DURATION", value_parser = Checked(up_to_14_days))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub runtime_idle_timeout: Option<Duration>,

    /// For a runtime: its idleRuntimeSessionTimeout and maxLifetime, when
    /// they are not AgentCore's defaults (15m and 8h). At most 14d, what a
    /// runtime on AgentCore Instances takes (8h on microVMs); less than
    /// 60s is taken as 60s. With --listen, an MCP session idle that long,
    /// or whose runtime session is that old, gets a new runtime session
    /// with its next request: AgentCore has ended its microVM. (Over
    /// stdio, the one runtime session starts again under its id.)
    #[arg(long, value_name = "DURATION", value_parser = Checked(up_to_14_days))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub runtime_max_lifetime: Option<Duration>,

    /// Repeatable: add this header to every request, signed with the rest.
    /// For a runtime, only X-Amzn-Bedrock-AgentCore-Runtime-Custom-* names
    /// (any case), which AgentCore passes to the container when the
    /// runtime's request-header allowlist names them. For a gateway or a
    /// URL, any name except those the proxy, the signature or the transport
    /// set: authorization, host, accept, last-event-id, x-amz-*, mcp-*,
    /// content-*, and the hop-by-hop connection, keep-alive, proxy-*, te,
    /// trailer, transfer-encoding, upgrade. For a runtime or a gateway,
    /// AgentCore's limits: at most 20, each value at most 4 KB (and, for a
    /// gateway, names of at most 100 characters, what a target's allowlist
    /// takes). A name given twice (names are case-insensitive), or outside
    /// these rules, is refused at start (exit 2), naming the rule. Values
    /// are never logged nor shown in an error: they may be secrets. With
    /// --listen, a client's request that carries a header the proxy passes
    /// on (traceparent, tracestate, baggage) with another value than
    /// --header's is refused (HTTP 400): neither value is dropped silently.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = Checked(header))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub headers: Vec<(HeaderName, HeaderValue)>,

    /// One deadline for each whole call: its retries, its waits and the
    /// reading of its answer. Default: 15m, AgentCore Runtime's limit for a
    /// synchronous request, so no call the service would still answer is
    /// cut. A call cut by it is answered with an error naming it.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    #[arg(default_value = "15m")]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub timeout: Duration,

    /// How long an answer that has begun (its headers came: a JSON body, an
    /// SSE stream) may send nothing before it is taken for stalled and cut,
    /// with an error naming it; and after which the server's own stream is
    /// opened again. Default: 5m. A tool that streams its answer but works
    /// in silence for longer needs more. The wait for an answer to begin is
    /// --timeout's alone.
    ///
    /// A DURATION is a whole number with a unit: 1500ms, 90s, 5m, 1h, 2d; a
    /// number alone is seconds. More than zero, at most 24h.
    #[arg(long, value_name = "DURATION", value_parser = Checked(parse_duration))]
    #[arg(default_value = "5m")]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub idle_timeout: Duration,

    /// Leave MCP's Tasks extension to the client. By default the proxy runs
    /// it on behalf of a client that does not declare it: every tools/call
    /// is sent declaring it (a server without Tasks ignores what it does
    /// not know), so that a long tool the server can run as a task runs as
    /// one, and a task the server answers with is polled
    /// (tasks/get, on the task's runtime session) until it ends: the client
    /// gets the final result as the answer to its own tools/call, however
    /// long the job ran, with progress for its progressToken meanwhile. A
    /// job past --max-task-duration, or that the server cancels, fails or
    /// forgets, is answered with an error naming the task (error.data.kind:
    /// task_limit, task_cancelled, task_lost). A client that declares the
    /// extension itself gets the server's task handles untouched.
    /// --timeout bounds each request of the job, never the job.
    #[arg(verbatim_doc_comment, long, overrides_with = "no_tasks")]
    pub no_tasks: bool,

    /// Bridge a client pinned to MCP 2026-07-28 to a server that speaks
    /// only the initialize era: its server/discover, refused, is answered
    /// from an initialize the proxy makes itself, and its requests are sent
    /// in that session. Off by default, since a client of both eras falls
    /// back to initialize by itself. A client of the initialize era at a
    /// server that speaks only 2026-07-28 is always bridged, once its
    /// initialize is refused.
    #[arg(verbatim_doc_comment, long, overrides_with = "bridge_modern_clients")]
    pub bridge_modern_clients: bool,

    /// How long a job run as a task may take before it is cancelled.
    /// Default: the task's own TTL (ttlMs), or 8h. At most 14d.
    #[arg(long, value_name = "DURATION", value_parser = Checked(up_to_14_days))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub max_task_duration: Option<Duration>,

    /// A tool that may be sent again after its answer was lost: one that is
    /// safe to run twice. Repeatable.
    #[arg(long = "idempotent-tool", value_name = "NAME", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub idempotent_tools: Vec<String>,

    /// A tool never sent again, not even after a refusal that ran nothing
    /// (429, a session still starting). Repeatable.
    #[arg(long = "strict-tool", value_name = "NAME", value_parser = Checked(text))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub strict_tools: Vec<String>,

    /// Take the server's tools/list annotations at their word (MCP calls
    /// them hints, not to be trusted from an untrusted server): a tool
    /// annotated readOnlyHint: true, or idempotentHint: true without
    /// destructiveHint: true, may be sent again as if named by
    /// --idempotent-tool, once listed; the attempt record says "by server
    /// annotation". --idempotent-tool and --strict-tool still win. Off by
    /// default.
    #[arg(verbatim_doc_comment, long, overrides_with = "trust_tool_annotations")]
    pub trust_tool_annotations: bool,

    /// Let through only the tools whose name matches a PATTERN: * for any
    /// run of characters, ? for any one, e.g. 'get_*'. Repeatable.
    #[arg(long = "allow-tool", value_name = "PATTERN", value_parser = Checked(parse_pattern))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub allow_tools: Vec<String>,

    /// Hide the tools whose name matches PATTERN, even one an --allow-tool
    /// pattern matches. Repeatable.
    #[arg(long = "deny-tool", value_name = "PATTERN", value_parser = Checked(parse_pattern))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub deny_tools: Vec<String>,

    /// Let through only the tools the server annotates readOnlyHint: true.
    /// A tool the proxy has not seen in a tools/list answer is refused: its
    /// annotations are not known.
    #[arg(verbatim_doc_comment, long, overrides_with = "read_only")]
    pub read_only: bool,

    /// For a runtime: at exit, stop the runtime session
    /// (StopRuntimeSession) rather than leave it to expire; with --listen,
    /// every runtime session not ended with DELETE.
    #[arg(verbatim_doc_comment, long, overrides_with = "stop_session_on_exit")]
    pub stop_session_on_exit: bool,

    /// Serve MCP Streamable HTTP at http://ADDRESS:PORT/mcp instead of
    /// stdio. ADDRESS is a loopback address: 127.0.0.1 (or another
    /// 127.x.x.x), [::1], or localhost (127.0.0.1). PORT 0 picks a free
    /// port; the log names the URL.
    #[arg(long, value_name = "ADDRESS:PORT", value_parser = Checked(listen))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub listen: Option<SocketAddr>,

    /// With --listen, require "Authorization: Bearer TOKEN" on every
    /// request, TOKEN being the file's content without the whitespace
    /// around it: one word of visible ASCII, at least 16 characters. Keep
    /// the file readable by you alone. (Not the token sent to the server.)
    #[arg(long, value_name = "PATH", value_parser = Checked(path))]
    #[arg(verbatim_doc_comment, allow_hyphen_values = true)]
    pub listen_token_file: Option<PathBuf>,

    /// This page, on standard output.
    #[arg(verbatim_doc_comment, short, long, action = ArgAction::Help)]
    pub help: Option<bool>,

    /// The version, on standard output.
    #[arg(verbatim_doc_comment, short = 'V', long, action = ArgAction::Version)]
    pub version: Option<bool>,
}

/// A value read by `check(flag, text)` (a function of [`values`](super::values)), whose
/// message names the option: `--timeout soon: not a DURATION …`. An empty value, or one that
/// is not UTF-8, is refused first. The message travels in the error's [`ContextKind::Custom`],
/// and is said as it is.
#[derive(Clone, Copy)]
pub struct Checked<T>(pub fn(&str, &str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Checked<T> {
    type Value = T;

    fn parse_ref(&self, _: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(Arg::get_long)
            .map(|long| format!("--{long}"))
            .unwrap_or_default();
        let Some(text) = value.to_str() else {
            return Err(refused(format!(
                "the value {value:?} of {flag} is not valid UTF-8"
            )));
        };
        if text.is_empty() {
            return Err(refused(format!("{flag} needs a non-empty value")));
        }
        (self.0)(&flag, text).map_err(refused)
    }
}

/// A refused value, `message` saying why.
fn refused(message: String) -> clap::Error {
    let mut error = clap::Error::new(ErrorKind::ValueValidation);
    error.insert(ContextKind::Custom, ContextValue::String(message));
    error
}

/// Any text.
fn text(_: &str, text: &str) -> Result<String, String> {
    Ok(text.to_owned())
}

/// A `--header NAME=VALUE`.
fn header(_: &str, text: &str) -> Result<(HeaderName, HeaderValue), String> {
    parse_header(text)
}

/// The name of an environment variable.
fn variable(flag: &str, name: &str) -> Result<String, String> {
    if name.contains(['=', '\0']) {
        return Err(format!("{flag} {name}: not an environment variable name"));
    }
    Ok(name.to_owned())
}

/// A `--listen` address.
fn listen(_: &str, text: &str) -> Result<SocketAddr, String> {
    parse_listen(text)
}

/// A path.
fn path(_: &str, text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

/// A DURATION of a runtime session, or of a task: at most 14 days, AgentCore Instances'
/// longest runtime session, idle or in all.
fn up_to_14_days(flag: &str, text: &str) -> Result<Duration, String> {
    parse_duration_up_to(flag, text, MAX_RUNTIME_SESSION_TIME, "14d")
}
