//! The command line: the arguments, read and checked against each other. The manual page is in
//! [`manual`], the values of single options (a URL, an address, a token) in [`values`].

mod headers;
mod manual;
mod values;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentcore_tower::invoke::MAX_RUNTIME_SESSION_TIME;
use http::Uri;

pub use headers::Headers;
pub use manual::{HELP, USAGE};
pub use values::{is_loopback_host, parse_token, shown, shown_duration};
use values::{parse_duration, parse_duration_up_to, parse_listen, parse_pattern, parse_url};

/// `--timeout`'s default: AgentCore Runtime's limit for a synchronous request (15 minutes), so
/// that no call the service would still answer is cut here.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// `--idle-timeout`'s default: how long an answer may send nothing before it is taken for
/// stalled.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

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

/// The options as given, before they are checked against each other.
#[derive(Default)]
struct Given {
    runtime_arn: Option<String>,
    gateway_url: Option<Uri>,
    url: Option<Uri>,
    region: Option<String>,
    qualifier: Option<String>,
    endpoint: Option<String>,
    signing_name: Option<String>,
    token_env: Option<String>,
    token_command: Option<String>,
    idempotent_tools: Vec<String>,
    strict_tools: Vec<String>,
    trust_tool_annotations: bool,
    allow_tools: Vec<String>,
    deny_tools: Vec<String>,
    read_only: bool,
    timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    no_tasks: bool,
    max_task_duration: Option<Duration>,
    bridge_modern_clients: bool,
    runtime_user_id: Option<String>,
    runtime_idle_timeout: Option<Duration>,
    runtime_max_lifetime: Option<Duration>,
    profile: Option<String>,
    stop_session_on_exit: bool,
    listen: Option<SocketAddr>,
    listen_token_file: Option<PathBuf>,
    headers: Headers,
}

/// Reads the arguments (without the program name).
pub fn parse_args(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut raw = raw.into_iter().peekable();
    if raw.peek().is_some_and(|first| first == "check") {
        raw.next();
        return match parse_options(raw)? {
            Parsed::Run(args) if args.listen.is_some() => {
                Err("check sends two requests and exits: it does not take --listen".into())
            }
            Parsed::Run(args) => Ok(Parsed::Check(args)),
            other => Ok(other),
        };
    }
    parse_options(raw)
}

/// Reads the options (after the `check` subcommand, if any).
fn parse_options(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut args = Given::default();
    let mut raw = raw.into_iter();
    while let Some(arg) = raw.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("the argument {a:?} is not valid UTF-8"))?;
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        let mut value = |flag: &str| -> Result<String, String> {
            let value = match inline.clone() {
                Some(value) => value,
                None => raw
                    .next()
                    .ok_or_else(|| format!("{flag} needs a value"))?
                    .into_string()
                    .map_err(|a| format!("the value {a:?} of {flag} is not valid UTF-8"))?,
            };
            if value.is_empty() {
                return Err(format!("{flag} needs a non-empty value"));
            }
            Ok(value)
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-V" | "--version" => return Ok(Parsed::Version),
            "--runtime-arn" => {
                once(&args.runtime_arn, "--runtime-arn")?;
                args.runtime_arn = Some(value("--runtime-arn")?);
            }
            "--gateway-url" => {
                once(&args.gateway_url, "--gateway-url")?;
                args.gateway_url = Some(parse_url("--gateway-url", &value("--gateway-url")?)?);
            }
            "--url" => {
                once(&args.url, "--url")?;
                args.url = Some(parse_url("--url", &value("--url")?)?);
            }
            "--region" => {
                once(&args.region, "--region")?;
                args.region = Some(value("--region")?);
            }
            "--qualifier" => {
                once(&args.qualifier, "--qualifier")?;
                args.qualifier = Some(value("--qualifier")?);
            }
            "--endpoint" => {
                once(&args.endpoint, "--endpoint")?;
                args.endpoint = Some(value("--endpoint")?);
            }
            "--signing-name" => {
                once(&args.signing_name, "--signing-name")?;
                args.signing_name = Some(value("--signing-name")?);
            }
            "--bearer-token-env" => {
                once(&args.token_env, "--bearer-token-env")?;
                let name = value("--bearer-token-env")?;
                if name.contains(['=', '\0']) {
                    return Err(format!(
                        "--bearer-token-env {name}: not an environment variable name"
                    ));
                }
                args.token_env = Some(name);
            }
            "--bearer-token-command" => {
                once(&args.token_command, "--bearer-token-command")?;
                args.token_command = Some(value("--bearer-token-command")?);
            }
            "--header" => headers::parse_header(&mut args.headers, &value("--header")?)?,
            "--idempotent-tool" => args.idempotent_tools.push(value("--idempotent-tool")?),
            "--strict-tool" => args.strict_tools.push(value("--strict-tool")?),
            "--allow-tool" => {
                let pattern = parse_pattern("--allow-tool", &value("--allow-tool")?)?;
                args.allow_tools.push(pattern);
            }
            "--deny-tool" => {
                let pattern = parse_pattern("--deny-tool", &value("--deny-tool")?)?;
                args.deny_tools.push(pattern);
            }
            "--timeout" => {
                once(&args.timeout, "--timeout")?;
                args.timeout = Some(parse_duration("--timeout", &value("--timeout")?)?);
            }
            "--idle-timeout" => {
                once(&args.idle_timeout, "--idle-timeout")?;
                let duration = parse_duration("--idle-timeout", &value("--idle-timeout")?)?;
                args.idle_timeout = Some(duration);
            }
            "--max-task-duration" | "--runtime-idle-timeout" | "--runtime-max-lifetime" => {
                let slot = match flag.as_str() {
                    "--max-task-duration" => &mut args.max_task_duration,
                    "--runtime-idle-timeout" => &mut args.runtime_idle_timeout,
                    _ => &mut args.runtime_max_lifetime,
                };
                once(slot, &flag)?;
                // AgentCore Instances' longest runtime session, idle or in all: 14 days.
                let max = MAX_RUNTIME_SESSION_TIME;
                *slot = Some(parse_duration_up_to(&flag, &value(&flag)?, max, "14d")?);
            }
            "--runtime-user-id" => {
                once(&args.runtime_user_id, "--runtime-user-id")?;
                args.runtime_user_id = Some(value("--runtime-user-id")?);
            }
            "--profile" => {
                once(&args.profile, "--profile")?;
                args.profile = Some(value("--profile")?);
            }
            "--stop-session-on-exit"
            | "--trust-tool-annotations"
            | "--read-only"
            | "--no-tasks"
            | "--bridge-modern-clients"
                if inline.is_some() =>
            {
                return Err(format!("{flag} takes no value"));
            }
            "--stop-session-on-exit" => args.stop_session_on_exit = true,
            "--trust-tool-annotations" => args.trust_tool_annotations = true,
            "--read-only" => args.read_only = true,
            "--no-tasks" => args.no_tasks = true,
            "--bridge-modern-clients" => args.bridge_modern_clients = true,
            "--listen" => {
                once(&args.listen, "--listen")?;
                args.listen = Some(parse_listen(&value("--listen")?)?);
            }
            "--listen-token-file" => {
                once(&args.listen_token_file, "--listen-token-file")?;
                args.listen_token_file = Some(value("--listen-token-file")?.into());
            }
            other if other.starts_with('-') => return Err(format!("unknown option `{other}`")),
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    args.check().map(|args| Parsed::Run(Box::new(args)))
}

impl Given {
    /// The settings, once the options are known to go together.
    fn check(self) -> Result<Args, String> {
        let mut doors = Vec::new();
        if let Some(arn) = self.runtime_arn {
            doors.push(Door::Runtime(arn));
        }
        if let Some(url) = self.gateway_url {
            doors.push(Door::Gateway(url));
        }
        if let Some(url) = self.url {
            doors.push(Door::Url(url));
        }
        if doors.len() > 1 {
            return Err(format!(
                "{} and {} exclude each other: give one of them",
                doors[0].flag(),
                doors[1].flag()
            ));
        }
        let door = doors
            .pop()
            .ok_or("one of --runtime-arn, --gateway-url or --url is required")?;
        let tokens = match (self.token_env, self.token_command) {
            (Some(_), Some(_)) => {
                return Err(
                    "--bearer-token-env and --bearer-token-command exclude each other: give one \
                     of them"
                        .into(),
                );
            }
            (Some(name), None) => Some(TokenSource::Env(name)),
            (None, Some(command)) => Some(TokenSource::Command(command)),
            (None, None) => None,
        };
        if !matches!(door, Door::Runtime(_)) {
            let runtime_only = [
                ("--qualifier", self.qualifier.is_some()),
                ("--endpoint", self.endpoint.is_some()),
                ("--stop-session-on-exit", self.stop_session_on_exit),
                ("--runtime-user-id", self.runtime_user_id.is_some()),
                (
                    "--runtime-idle-timeout",
                    self.runtime_idle_timeout.is_some(),
                ),
                (
                    "--runtime-max-lifetime",
                    self.runtime_max_lifetime.is_some(),
                ),
            ];
            if let Some((flag, _)) = runtime_only.iter().find(|(_, given)| *given) {
                return Err(format!(
                    "{flag} applies to --runtime-arn only, not to {}",
                    door.flag()
                ));
            }
        }
        if self.signing_name.is_some() {
            if !matches!(door, Door::Url(_)) {
                return Err(format!(
                    "--signing-name applies to --url only: {} signs for bedrock-agentcore",
                    door.flag()
                ));
            }
            if let Some(tokens) = &tokens {
                return Err(format!(
                    "--signing-name is for SigV4, and {} sends a bearer token instead: give one \
                     of them",
                    tokens.flag()
                ));
            }
        }
        if matches!(door, Door::Url(_)) && self.signing_name.is_none() && tokens.is_none() {
            return Err(
                "--url needs --signing-name NAME (SigV4: e.g. execute-api for API Gateway, lambda \
                 for a Lambda function URL) or a bearer token (--bearer-token-env or \
                 --bearer-token-command)"
                    .into(),
            );
        }
        if let (Some(_), Some(tokens)) = (&self.profile, &tokens) {
            return Err(format!(
                "--profile is for SigV4 (the AWS credentials of that profile), and {} sends a \
                 bearer token instead: give one of them",
                tokens.flag()
            ));
        }
        match &door {
            Door::Runtime(_) => headers::check_runtime(&self.headers)?,
            Door::Gateway(_) => headers::check_gateway(&self.headers)?,
            Door::Url(_) => headers::check_endpoint("--url", &self.headers)?,
        }
        if self.listen_token_file.is_some() && self.listen.is_none() {
            return Err("--listen-token-file needs --listen".into());
        }
        if let Some(tool) = self
            .strict_tools
            .iter()
            .find(|tool| self.idempotent_tools.contains(tool))
        {
            return Err(format!(
                "{tool} is given to both --idempotent-tool and --strict-tool: a tool is one or \
                 the other"
            ));
        }
        Ok(Args {
            door,
            region: self.region,
            qualifier: self.qualifier,
            endpoint: self.endpoint,
            signing_name: self.signing_name,
            tokens,
            idempotent_tools: self.idempotent_tools,
            strict_tools: self.strict_tools,
            trust_tool_annotations: self.trust_tool_annotations,
            allow_tools: self.allow_tools,
            deny_tools: self.deny_tools,
            read_only: self.read_only,
            timeout: self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            idle_timeout: self.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT),
            tasks: !self.no_tasks,
            max_task_duration: self.max_task_duration,
            bridge_modern_clients: self.bridge_modern_clients,
            runtime_user_id: self.runtime_user_id,
            runtime_idle_timeout: self.runtime_idle_timeout,
            runtime_max_lifetime: self.runtime_max_lifetime,
            profile: self.profile,
            stop_session_on_exit: self.stop_session_on_exit,
            listen: self.listen,
            listen_token_file: self.listen_token_file,
            headers: self.headers,
        })
    }
}

/// Refuses a second value for a single-valued option.
fn once<T>(slot: &Option<T>, flag: &str) -> Result<(), String> {
    match slot {
        Some(_) => Err(format!("{flag} is given twice")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
