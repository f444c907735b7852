//! The command line: the manual page, the arguments, and what is wrong with them.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use http::Uri;

/// The short usage, after an error.
pub const USAGE: &str = "\
usage: agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
           [--qualifier QUALIFIER] [--endpoint URL] [--stop-session-on-exit]
           [TOKEN] [COMMON]
       agentcore-mcp-proxy --gateway-url URL [--region REGION] [TOKEN] [COMMON]
       agentcore-mcp-proxy --url URL --signing-name NAME [--region REGION]
           [COMMON]
       agentcore-mcp-proxy --url URL TOKEN [COMMON]
       agentcore-mcp-proxy --help | --version
TOKEN:  --bearer-token-env VAR | --bearer-token-command CMD  (else SigV4)
COMMON: [--idempotent-tool NAME]...
        [--listen ADDRESS:PORT [--listen-token-file PATH]]
";

/// `--help`: the manual page.
pub const HELP: &str = "\
NAME
    agentcore-mcp-proxy - an MCP proxy to AWS Bedrock AgentCore Runtime,
    AgentCore Gateway or any MCP URL, over stdio or local HTTP

SYNOPSIS
    agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
                        [--qualifier QUALIFIER] [--endpoint URL]
                        [--stop-session-on-exit] [TOKEN] [COMMON]
    agentcore-mcp-proxy --gateway-url URL [--region REGION] [TOKEN] [COMMON]
    agentcore-mcp-proxy --url URL --signing-name NAME [--region REGION]
                        [COMMON]
    agentcore-mcp-proxy --url URL TOKEN [COMMON]
    agentcore-mcp-proxy --help | --version

    TOKEN:  --bearer-token-env VAR | --bearer-token-command CMD
    COMMON: [--idempotent-tool NAME]...
            [--listen ADDRESS:PORT [--listen-token-file PATH]]

DESCRIPTION
    Lets an MCP client use an MCP server that needs AWS credentials or an
    OAuth token, through one of three doors:

      * --runtime-arn: a server hosted on AgentCore Runtime, called through
        InvokeAgentRuntime;
      * --gateway-url: an AgentCore Gateway's MCP URL;
      * --url: any MCP server behind SigV4 (API Gateway, a Lambda function
        URL, an AWS-managed MCP server) or a bearer token.

    Each request is signed with SigV4 (IAM), with the credentials of the
    standard AWS chain; or, with --bearer-token-env or
    --bearer-token-command (OAuth inbound auth), carries
    \"Authorization: Bearer TOKEN\" instead, and then no AWS credentials are
    read at all. A request refused with HTTP 401 is sent once more with a
    token asked for afresh. The token is never logged or printed.

    stdio (the default): the MCP stdio transport. Newline-delimited JSON-RPC
    messages on standard input; every answer and every server message (JSON
    or SSE from the server) as one line on standard output, which carries
    nothing else; logs on standard error. The handshake is serial
    (initialize, then notifications/initialized, before anything else) and
    a notification is never overtaken; requests run concurrently: a slow
    tool does not hold up a ping. Once the session is initialized, the
    server's own stream (GET) is opened where the door offers one, relayed,
    and resumed with Last-Event-ID when it ends; so is an answer's stream
    the server ends before its answer (not sent again: it is the same
    call). When standard input closes, or on SIGINT
    or SIGTERM, requests still running get up to 10 s to finish. For a
    runtime, one runtime session (one microVM) serves the whole run, and is
    then stopped with --stop-session-on-exit; for a gateway or a URL, the
    MCP session the server opened is then ended with an MCP DELETE.

    HTTP (--listen): the MCP Streamable HTTP transport at
    http://ADDRESS:PORT/mcp, for clients that take a URL instead of a
    command. POST carries JSON-RPC messages, answered as JSON or as an SSE
    stream. For a runtime, GET is answered 405 (AgentCore Runtime sends
    server messages only in the answer to a POST, and MCP clients read 405
    as \"no stream offered\"), and DELETE ends the MCP session and stops its
    runtime session; each MCP session gets a runtime session of its own, and
    requests outside any (from a client of MCP's stateless versions, which
    never initializes) share one. For a gateway or a URL, GET (the server's
    stream, with Last-Event-ID) and DELETE go to the server as they are.
    SSE events keep their id: and retry: lines, priming events included.
    The endpoint acts with your identity, so it binds to loopback
    addresses only, and refuses, with nothing sent, every request
      * whose Origin, when it has one, is not a loopback origin
        (http://localhost, http://127.0.0.1 or http://[::1], any port): 403,
        the MCP specification's defence against DNS rebinding;
      * whose Host is not a loopback name: 421;
      * without \"Authorization: Bearer TOKEN\", when --listen-token-file is
        given: 401;
      * to any path but /mcp: 404.
    It runs until SIGINT or SIGTERM; requests still running then get up to
    10 s to finish.

    Every request goes through the agentcore-tower stack, outer to inner: one
    120 s deadline for the whole call, MCP session recovery (a server that no
    longer knows the session, after a runtime's idle timeout or a gateway
    session's end, answers 404: a new session is opened with the session's
    own initialize and the request sent once more), the replay guard,
    throttle retry (HTTP 429, honouring Retry-After), session-busy retry (a
    runtime session still provisioning: a cold start is waited out for up to
    30 s), then the signer (InvokeAgentRuntime for a runtime, the
    request as it is for a URL), which signs (or sets the token) afresh for
    every attempt, over HTTPS (rustls, the webpki roots; http:// only for a
    local test server). A request whose answer may have been lost after it
    ran (a dropped connection, a 5xx) is sent again only when it calls a
    tool named by --idempotent-tool: any other may have run, and never runs
    twice.

    A request the stack gives up on is answered with a JSON-RPC error (code
    -32000) naming what happened, the record of every attempt in
    error.data.attempts; so is an HTTP error without a JSON-RPC body
    (error.data.httpStatus, error.data.errorType; for a refused token,
    error.data.resourceMetadata: where the server's OAuth metadata is). A
    message that is not JSON gets a parse error (-32700), and nothing is
    sent.

OPTIONS
    --runtime-arn ARN
        The runtime to invoke:
        arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID.

    --gateway-url URL
        The MCP URL of an AgentCore Gateway:
        https://ID.gateway.bedrock-agentcore.REGION.amazonaws.com/mcp.
        Signed for bedrock-agentcore in the region the host names (else
        --region, else the configured one), unless a TOKEN option is given.

    --url URL
        Any MCP URL; every request goes to it, path and query as given.
        Needs --signing-name (SigV4) or a TOKEN option. A user or password
        in the URL is refused; http:// is for a loopback address only.

    --signing-name NAME
        With --url: the service to sign for, e.g. execute-api (API
        Gateway), lambda (a Lambda function URL), aws-mcp (the AWS MCP
        Server). Not with a TOKEN option.

    --region REGION
        The region to sign for (or, for a runtime with a token, to call).
        For a runtime: default the ARN's (a profile's default region never
        sends the call elsewhere), else the configured one. For a gateway:
        the one in its host name wins. For --url: default the configured
        one; there is none to guess from the URL.

    --bearer-token-env VAR
        Send \"Authorization: Bearer TOKEN\", TOKEN being the value of the
        environment variable VAR (read once, at start: a running process's
        environment does not change, so a 401 is answered, not retried), in
        place of SigV4. A value that is no usable bearer token (RFC 6750's
        letters, digits and -._~+/ then =s, at least 8 characters) stops
        the proxy at start (exit code 2).

    --bearer-token-command CMD
        Send \"Authorization: Bearer TOKEN\", TOKEN being the standard output
        of CMD (run by sh -c; cmd /C on Windows) without the whitespace
        around it, in place of SigV4. CMD runs at start, then again after a
        401, and before a token that is a JWT expiring within 60 s is used;
        its token is kept in memory only. CMD gets no standard input, cannot
        prompt on the terminal, and may run for 60 s; on Unix it runs in a
        process group of its own, and one that runs longer is stopped with
        every process of that group. A CMD that fails (a non-zero exit, no
        token, or no usable bearer token, as for --bearer-token-env) is an
        error naming its exit status and
        the first line of its standard error, never what it printed on
        standard output.

    --qualifier QUALIFIER
        For a runtime: the endpoint to invoke. Default: DEFAULT.

    --endpoint URL
        For a runtime: where to send, e.g. a VPC endpoint. Default:
        AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, else AWS_ENDPOINT_URL, else the
        region's.

    --idempotent-tool NAME
        A tool that may be sent again after its answer was lost: one that is
        safe to run twice. Repeatable.

    --stop-session-on-exit
        For a runtime: at exit, stop the runtime session
        (StopRuntimeSession) rather than leave it to expire; with --listen,
        every runtime session not ended with DELETE.

    --listen ADDRESS:PORT
        Serve MCP Streamable HTTP at http://ADDRESS:PORT/mcp instead of
        stdio. ADDRESS is a loopback address: 127.0.0.1 (or another
        127.x.x.x), [::1], or localhost (127.0.0.1). PORT 0 picks a free
        port; the log names the URL.

    --listen-token-file PATH
        With --listen, require \"Authorization: Bearer TOKEN\" on every
        request, TOKEN being the file's content without the whitespace
        around it: one word of visible ASCII, at least 16 characters. Keep
        the file readable by you alone. (Not the token sent to the server.)

    -h, --help
        This page, on standard output.

    -V, --version
        The version, on standard output.

ENVIRONMENT
    AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, ...
        With SigV4: the standard AWS credentials chain: environment,
        profiles (SSO and assume-role included), web identity, container
        and instance roles. Credentials are cached, and resolved again 5
        minutes before they expire. Not read with a TOKEN option.

    AWS_REGION, AWS_DEFAULT_REGION
        The configured region (see --region).

    AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, AWS_ENDPOINT_URL
        For a runtime: the endpoint (see --endpoint); not read when
        AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true.

    VAR (as --bearer-token-env names it)
        The bearer token.

    RUST_LOG
        What to log on standard error: a level (error, warn, info, debug,
        trace, off) or tracing directives (agentcore_tower=debug,info).
        Default: info. No secret is logged, nor a URL's query.

EXAMPLES
    The command of a desktop MCP client (stdio), a runtime behind IAM:
        agentcore-mcp-proxy --runtime-arn \\
            arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/srv-AbC123

    An SSO profile, a tool safe to repeat, the microVM stopped at exit:
        AWS_PROFILE=dev agentcore-mcp-proxy --runtime-arn ARN \\
            --idempotent-tool lookup --stop-session-on-exit

    A runtime with OAuth inbound auth, the token from a command:
        agentcore-mcp-proxy --runtime-arn ARN \\
            --bearer-token-command 'my-idp-cli token --audience mcp'

    An AgentCore Gateway behind IAM:
        agentcore-mcp-proxy --gateway-url \\
            https://gw-1.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp

    An AgentCore Gateway with a JWT authorizer, the token in a variable:
        MCP_TOKEN=eyJ... agentcore-mcp-proxy --gateway-url URL \\
            --bearer-token-env MCP_TOKEN

    An MCP server behind API Gateway with IAM auth:
        agentcore-mcp-proxy \\
            --url https://abc123.execute-api.us-west-2.amazonaws.com/prod/mcp \\
            --signing-name execute-api --region us-west-2

    Any MCP server that takes an OAuth token:
        agentcore-mcp-proxy --url https://mcp.example.com/mcp \\
            --bearer-token-command 'cat ~/.config/mcp/token'

    A local URL for clients that take one, guarded by a token:
        (umask 077; head -c 32 /dev/urandom | base64 > ~/.agentcore-mcp-token)
        agentcore-mcp-proxy --runtime-arn ARN --listen 127.0.0.1:8765 \\
            --listen-token-file ~/.agentcore-mcp-token
    and in the client: the URL http://127.0.0.1:8765/mcp, the header
    \"Authorization: Bearer\" and the file's content.

EXIT STATUS
    0   Standard input closed (stdio), or SIGINT or SIGTERM: the proxy
        shut down.
    1   The proxy could not start: no credentials provider, no TLS, the
        listen address taken, a --bearer-token-command that failed.
    2   The command line is wrong, or a file or variable it names cannot be
        used: nothing was started.
";

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
    /// Runtime only.
    pub stop_session_on_exit: bool,
    /// `--listen`: serve HTTP there instead of stdio.
    pub listen: Option<SocketAddr>,
    pub listen_token_file: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Box<Args>),
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
    stop_session_on_exit: bool,
    listen: Option<SocketAddr>,
    listen_token_file: Option<PathBuf>,
}

/// Reads the arguments (without the program name).
pub fn parse_args(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
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
            "--idempotent-tool" => args.idempotent_tools.push(value("--idempotent-tool")?),
            "--stop-session-on-exit" if inline.is_none() => args.stop_session_on_exit = true,
            "--stop-session-on-exit" => return Err("--stop-session-on-exit takes no value".into()),
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
        if self.listen_token_file.is_some() && self.listen.is_none() {
            return Err("--listen-token-file needs --listen".into());
        }
        Ok(Args {
            door,
            region: self.region,
            qualifier: self.qualifier,
            endpoint: self.endpoint,
            signing_name: self.signing_name,
            tokens,
            idempotent_tools: self.idempotent_tools,
            stop_session_on_exit: self.stop_session_on_exit,
            listen: self.listen,
            listen_token_file: self.listen_token_file,
        })
    }
}

/// A `--gateway-url` or `--url`: an absolute `https://` URL (`http://` for a loopback test
/// server only), without a user or password. A message about it shows no query: it may carry
/// a secret.
pub fn parse_url(flag: &str, text: &str) -> Result<Uri, String> {
    let not_a_url =
        || format!("{flag}: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)");
    if text.contains('#') {
        return Err(format!(
            "{flag}: the URL has a fragment (#…), which is never sent"
        ));
    }
    let uri: Uri = text.parse().map_err(|_| not_a_url())?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(not_a_url());
    };
    if authority.as_str().contains('@') {
        return Err(format!(
            "{flag}: the URL carries a user or password; give a token with --bearer-token-env or \
             --bearer-token-command instead"
        ));
    }
    if authority.host().is_empty() {
        return Err(not_a_url());
    }
    match scheme {
        "https" => {}
        "http" if is_loopback_host(authority.host()) => {}
        "http" => {
            return Err(format!(
                "{flag} {}: http:// is for a loopback test server only (localhost, 127.0.0.1, \
                 [::1]): the request's credentials would cross the network in the clear; use \
                 https://",
                shown(&uri)
            ));
        }
        other => return Err(format!("{flag}: the scheme `{other}` is not https")),
    }
    Ok(uri)
}

/// Whether a URL's host is a loopback one: `localhost`, `127.x.x.x`, `[::1]`.
fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A URL to show (in a log line, a message): scheme, host, port and path; never the query (it
/// may carry a secret) nor a user or password.
pub fn shown(uri: &Uri) -> String {
    let mut text = String::new();
    if let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) {
        text.push_str(scheme);
        text.push_str("://");
        text.push_str(authority.host());
        if let Some(port) = authority.port() {
            text.push(':');
            text.push_str(port.as_str());
        }
    }
    text.push_str(uri.path());
    if uri.query().is_some() {
        text.push_str("?…");
    }
    text
}

/// Refuses a second value for a single-valued option.
fn once<T>(slot: &Option<T>, flag: &str) -> Result<(), String> {
    match slot {
        Some(_) => Err(format!("{flag} is given twice")),
        None => Ok(()),
    }
}

/// A `--listen` address: a loopback IP address (or `localhost`) and a port.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let address = match text.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .map_err(|_| format!("--listen {text}: `{port}` is not a port (0 to 65535)"))?,
        None => text.parse::<SocketAddr>().map_err(|_| {
            format!(
                "--listen {text}: not an ADDRESS:PORT (e.g. 127.0.0.1:8765, [::1]:8765, \
                 localhost:8765)"
            )
        })?,
    };
    if !address.ip().is_loopback() {
        let what = if address.ip().is_unspecified() {
            "binds every network interface"
        } else {
            "is not a loopback address"
        };
        return Err(format!(
            "--listen {text}: {} {what}; the endpoint acts with your AWS identity, so it listens \
             on loopback only (127.0.0.1, [::1] or localhost)",
            address.ip()
        ));
    }
    Ok(address)
}

/// The bearer token in a `--listen-token-file`'s content.
pub fn parse_token(path: &std::path::Path, content: &[u8]) -> Result<String, String> {
    let shown = path.display();
    let token = std::str::from_utf8(content)
        .map_err(|_| format!("--listen-token-file {shown}: the token is not text"))?
        .trim();
    if token.is_empty() {
        return Err(format!("--listen-token-file {shown}: the file is empty"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--listen-token-file {shown}: the token must be one word of visible ASCII characters"
        ));
    }
    if token.len() < 16 {
        return Err(format!(
            "--listen-token-file {shown}: the token has {} characters; use at least 16 (e.g. \
             `head -c 32 /dev/urandom | base64`)",
            token.len()
        ));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123";
    const GATEWAY: &str = "https://gw-abc.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn every_option_is_read_in_both_spellings() {
        let parsed = parse(&[
            "--runtime-arn",
            ARN,
            "--region=eu-west-1",
            "--qualifier",
            "prod",
            "--endpoint=http://127.0.0.1:9",
            "--idempotent-tool",
            "add",
            "--idempotent-tool=echo",
            "--stop-session-on-exit",
            "--listen",
            "127.0.0.1:0",
            "--listen-token-file=/tmp/token",
            "--bearer-token-env=MCP_TOKEN",
        ])
        .unwrap();
        assert_eq!(
            parsed,
            Parsed::Run(Box::new(Args {
                door: Door::Runtime(ARN.into()),
                region: Some("eu-west-1".into()),
                qualifier: Some("prod".into()),
                endpoint: Some("http://127.0.0.1:9".into()),
                signing_name: None,
                tokens: Some(TokenSource::Env("MCP_TOKEN".into())),
                idempotent_tools: vec!["add".into(), "echo".into()],
                stop_session_on_exit: true,
                listen: Some("127.0.0.1:0".parse().unwrap()),
                listen_token_file: Some("/tmp/token".into()),
            }))
        );
        assert_eq!(parse(&["--runtime-arn", ARN, "-h"]).unwrap(), Parsed::Help);
        assert_eq!(parse(&["-V"]).unwrap(), Parsed::Version);
    }

    #[test]
    fn each_door_is_read_with_its_auth() {
        let Parsed::Run(args) = parse(&[
            "--gateway-url",
            GATEWAY,
            "--bearer-token-command=get-token --audience 'x y'",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(args.door, Door::Gateway(GATEWAY.parse().unwrap()));
        assert_eq!(
            args.tokens,
            Some(TokenSource::Command("get-token --audience 'x y'".into()))
        );
        assert_eq!(args.signing_name, None);

        let Parsed::Run(args) =
            parse(&["--gateway-url", GATEWAY, "--region", "us-west-2"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((args.tokens, args.region), (None, Some("us-west-2".into())));

        let url = "https://abc.execute-api.us-west-2.amazonaws.com/prod/mcp?stage=1";
        let Parsed::Run(args) = parse(&["--url", url, "--signing-name", "execute-api"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(args.door, Door::Url(url.parse().unwrap()));
        assert_eq!(args.signing_name.as_deref(), Some("execute-api"));

        let Parsed::Run(args) = parse(&[
            "--url",
            "http://localhost:8080/mcp",
            "--bearer-token-env",
            "T",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(args.tokens, Some(TokenSource::Env("T".into())));
    }

    #[test]
    fn bad_input_is_named() {
        let url = "https://example.com/mcp";
        let cases: &[(&[&str], &str)] = &[
            (
                &[],
                "one of --runtime-arn, --gateway-url or --url is required",
            ),
            (
                &["--region", "us-east-1"],
                "one of --runtime-arn, --gateway-url or --url is required",
            ),
            (&["--runtime-arn"], "--runtime-arn needs a value"),
            (&["--runtime-arn="], "--runtime-arn needs a non-empty value"),
            (
                &["--runtime-arn", ARN, "--runtime-arn", ARN],
                "--runtime-arn is given twice",
            ),
            (&["--runtime-arn", ARN, "--nope"], "unknown option `--nope`"),
            (
                &["--runtime-arn", ARN, "stray"],
                "unexpected argument `stray`",
            ),
            (
                &["--runtime-arn", ARN, "--stop-session-on-exit=yes"],
                "--stop-session-on-exit takes no value",
            ),
            (
                &["--runtime-arn", ARN, "--listen-token-file", "/tmp/t"],
                "--listen-token-file needs --listen",
            ),
            (
                &["--runtime-arn", ARN, "--listen", "8080"],
                "--listen 8080: not an ADDRESS:PORT (e.g. 127.0.0.1:8765, [::1]:8765, \
                 localhost:8765)",
            ),
            // One door.
            (
                &[
                    "--url",
                    url,
                    "--runtime-arn",
                    ARN,
                    "--bearer-token-env",
                    "T",
                ],
                "--runtime-arn and --url exclude each other: give one of them",
            ),
            (
                &["--gateway-url", GATEWAY, "--url", url],
                "--gateway-url and --url exclude each other: give one of them",
            ),
            // One token source.
            (
                &[
                    "--url",
                    url,
                    "--bearer-token-env",
                    "T",
                    "--bearer-token-command",
                    "get-token",
                ],
                "--bearer-token-env and --bearer-token-command exclude each other: give one of \
                 them",
            ),
            (
                &["--url", url, "--bearer-token-env", "A=B"],
                "--bearer-token-env A=B: not an environment variable name",
            ),
            // Runtime flags with a URL.
            (
                &["--gateway-url", GATEWAY, "--qualifier", "prod"],
                "--qualifier applies to --runtime-arn only, not to --gateway-url",
            ),
            (
                &["--url", url, "--bearer-token-env", "T", "--endpoint", url],
                "--endpoint applies to --runtime-arn only, not to --url",
            ),
            (
                &["--gateway-url", GATEWAY, "--stop-session-on-exit"],
                "--stop-session-on-exit applies to --runtime-arn only, not to --gateway-url",
            ),
            // The signing name.
            (
                &["--url", url],
                "--url needs --signing-name NAME (SigV4: e.g. execute-api for API Gateway, \
                 lambda for a Lambda function URL) or a bearer token (--bearer-token-env or \
                 --bearer-token-command)",
            ),
            (
                &[
                    "--url",
                    url,
                    "--signing-name",
                    "lambda",
                    "--bearer-token-command",
                    "t",
                ],
                "--signing-name is for SigV4, and --bearer-token-command sends a bearer token \
                 instead: give one of them",
            ),
            (
                &["--gateway-url", GATEWAY, "--signing-name", "lambda"],
                "--signing-name applies to --url only: --gateway-url signs for bedrock-agentcore",
            ),
            (
                &["--runtime-arn", ARN, "--signing-name", "lambda"],
                "--signing-name applies to --url only: --runtime-arn signs for bedrock-agentcore",
            ),
            // The URLs.
            (
                &["--url", "example.com/mcp"],
                "--url: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)",
            ),
            (
                &["--gateway-url", "https://"],
                "--gateway-url: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)",
            ),
            (
                &["--url", "ftp://example.com/mcp"],
                "--url: the scheme `ftp` is not https",
            ),
            (
                &["--url", "https://user:pa55@example.com/mcp"],
                "--url: the URL carries a user or password; give a token with \
                 --bearer-token-env or --bearer-token-command instead",
            ),
            (
                &["--url", "http://example.com/mcp?key=s3cr3t"],
                "--url http://example.com/mcp?…: http:// is for a loopback test server only \
                 (localhost, 127.0.0.1, [::1]): the request's credentials would cross the \
                 network in the clear; use https://",
            ),
            (
                &["--url", "https://example.com/mcp#part"],
                "--url: the URL has a fragment (#…), which is never sent",
            ),
        ];
        for (args, expected) in cases {
            let error = parse(args).unwrap_err();
            assert_eq!(&error, expected, "{args:?}");
            assert!(
                !error.contains("s3cr3t") && !error.contains("pa55"),
                "{error}"
            );
        }
    }

    #[test]
    fn urls_are_shown_without_their_query() {
        let url = parse_url("--url", "https://h.example:8443/a/mcp?token=s3cr3t").unwrap();
        assert_eq!(shown(&url), "https://h.example:8443/a/mcp?…");
        assert_eq!(url.query(), Some("token=s3cr3t"), "sent as given");
        let url = parse_url("--url", "https://h.example").unwrap();
        assert_eq!(shown(&url), "https://h.example/");
        for loopback in [
            "http://localhost:1/mcp",
            "http://127.0.0.2/mcp",
            "http://[::1]:9/mcp",
        ] {
            assert!(parse_url("--url", loopback).is_ok(), "{loopback}");
        }
    }

    #[test]
    fn only_loopback_addresses_are_listened_on() {
        for ok in ["127.0.0.1:8765", "127.1.2.3:1", "[::1]:8765", "localhost:0"] {
            let address = parse_listen(ok).unwrap();
            assert!(address.ip().is_loopback(), "{ok}");
        }
        assert_eq!(
            parse_listen("localhost:80").unwrap(),
            "127.0.0.1:80".parse().unwrap()
        );
        for (bad, why) in [
            ("0.0.0.0:8765", "binds every network interface"),
            ("[::]:8765", "binds every network interface"),
            ("192.168.1.10:8765", "is not a loopback address"),
            ("[::ffff:127.0.0.1]:8765", "is not a loopback address"),
            ("example.com:80", "not an ADDRESS:PORT"),
            ("localhost:http", "`http` is not a port"),
        ] {
            let error = parse_listen(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn a_token_is_one_long_enough_word() {
        let path = std::path::Path::new("t");
        assert_eq!(
            parse_token(path, b"  0123456789abcdef\n").unwrap(),
            "0123456789abcdef"
        );
        for (content, why) in [
            (&b" \n"[..], "empty"),
            (b"short", "use at least 16"),
            (b"0123456789 abcdef", "one word"),
            (b"\xff\xfe0123456789abcdef", "not text"),
        ] {
            let error = parse_token(path, content).unwrap_err();
            assert!(error.contains(why), "{content:?}: {error}");
        }
    }
}
