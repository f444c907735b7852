//! The command line: the manual page, the arguments, and what is wrong with them.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// The short usage, after an error.
pub const USAGE: &str = "\
usage: agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
           [--qualifier QUALIFIER] [--endpoint URL] [--idempotent-tool NAME]...
           [--stop-session-on-exit]
           [--listen ADDRESS:PORT [--listen-token-file PATH]]
       agentcore-mcp-proxy --help | --version
";

/// `--help`: the manual page.
pub const HELP: &str = "\
NAME
    agentcore-mcp-proxy - an MCP proxy to AWS Bedrock AgentCore Runtime,
    over stdio or local HTTP

SYNOPSIS
    agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
                        [--qualifier QUALIFIER] [--endpoint URL]
                        [--idempotent-tool NAME]... [--stop-session-on-exit]
                        [--listen ADDRESS:PORT [--listen-token-file PATH]]
    agentcore-mcp-proxy --help | --version

DESCRIPTION
    Lets an MCP client use an MCP server hosted on AgentCore Runtime behind
    IAM (SigV4) authentication, with the credentials of the standard AWS
    chain.

    stdio (the default): the MCP stdio transport. Newline-delimited JSON-RPC
    messages on standard input; every answer and every server message (JSON
    or SSE from the runtime) as one line on standard output, which carries
    nothing else; logs on standard error. Requests run concurrently: a slow
    tool does not hold up a ping. One runtime session (one microVM) serves
    the whole run. When standard input closes, or on SIGINT or SIGTERM,
    requests still running get up to 10 s to finish; with
    --stop-session-on-exit the runtime session is then stopped.

    HTTP (--listen): the MCP Streamable HTTP transport at
    http://ADDRESS:PORT/mcp, for clients that take a URL instead of a
    command. POST carries JSON-RPC messages, answered as JSON or as an SSE
    stream. GET is answered 405: AgentCore Runtime sends server messages only
    in the answer to a POST, and MCP clients read 405 as \"no stream offered\".
    DELETE ends the MCP session and stops its runtime session. Each MCP
    session gets a runtime session of its own; requests outside any (from a
    client of MCP's stateless versions, which never initializes) share one.
    The endpoint acts with your AWS identity, so it binds to loopback
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
    120 s deadline for the whole call, the replay guard, throttle retry (HTTP
    429, honouring Retry-After), session-busy retry (a runtime session still
    provisioning), then SigV4 signing of InvokeAgentRuntime, afresh for every
    attempt, over HTTPS (rustls, the webpki roots; http:// only for a local
    test endpoint). A request whose answer may have been lost after it ran (a
    dropped connection, a 5xx) is sent again only when it calls a tool named
    by --idempotent-tool: any other may have run, and never runs twice.

    A request the stack gives up on is answered with a JSON-RPC error (code
    -32000) naming what happened, the record of every attempt in
    error.data.attempts; so is an HTTP error from AgentCore without a
    JSON-RPC body (error.data.httpStatus, error.data.errorType). A message
    that is not JSON gets a parse error (-32700), and nothing is sent.

OPTIONS
    --runtime-arn ARN
        The runtime to invoke:
        arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID. Required.

    --region REGION
        The region to sign for. Default: the ARN's (a profile's default
        region never sends the call elsewhere), else the configured one.

    --qualifier QUALIFIER
        The runtime endpoint to invoke. Default: DEFAULT.

    --endpoint URL
        Where to send, e.g. a VPC endpoint. Default:
        AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, else AWS_ENDPOINT_URL, else the
        region's.

    --idempotent-tool NAME
        A tool that may be sent again after its answer was lost: one that is
        safe to run twice. Repeatable.

    --stop-session-on-exit
        At exit, stop the runtime session (StopRuntimeSession) rather than
        leave it to expire; with --listen, every runtime session not ended
        with DELETE.

    --listen ADDRESS:PORT
        Serve MCP Streamable HTTP at http://ADDRESS:PORT/mcp instead of
        stdio. ADDRESS is a loopback address: 127.0.0.1 (or another
        127.x.x.x), [::1], or localhost (127.0.0.1). PORT 0 picks a free
        port; the log names the URL.

    --listen-token-file PATH
        With --listen, require \"Authorization: Bearer TOKEN\" on every
        request, TOKEN being the file's content without the whitespace
        around it: one word of visible ASCII, at least 16 characters. Keep
        the file readable by you alone.

    -h, --help
        This page, on standard output.

    -V, --version
        The version, on standard output.

ENVIRONMENT
    AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, ...
        The standard AWS credentials chain: environment, profiles (SSO and
        assume-role included), web identity, container and instance roles.
        Credentials are cached, and resolved again 5 minutes before they
        expire.

    AWS_REGION, AWS_DEFAULT_REGION
        The configured region (see --region).

    AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, AWS_ENDPOINT_URL
        The endpoint (see --endpoint); not read when
        AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true.

    RUST_LOG
        What to log on standard error: a level (error, warn, info, debug,
        trace, off) or tracing directives (agentcore_tower=debug,info).
        Default: info. No secret is logged.

EXAMPLES
    The command of a desktop MCP client (stdio):
        agentcore-mcp-proxy --runtime-arn \\
            arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/srv-AbC123

    An SSO profile, a tool safe to repeat, the microVM stopped at exit:
        AWS_PROFILE=dev agentcore-mcp-proxy --runtime-arn ARN \\
            --idempotent-tool lookup --stop-session-on-exit

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
        listen address taken.
    2   The command line is wrong, or a file it names cannot be used:
        nothing was started.
";

/// The proxy's settings, as the command line gives them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    pub runtime_arn: String,
    pub region: Option<String>,
    pub qualifier: Option<String>,
    pub endpoint: Option<String>,
    pub idempotent_tools: Vec<String>,
    pub stop_session_on_exit: bool,
    /// `--listen`: serve HTTP there instead of stdio.
    pub listen: Option<SocketAddr>,
    pub listen_token_file: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Args),
    Help,
    Version,
}

/// Reads the arguments (without the program name).
pub fn parse_args(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut args = Args::default();
    let mut arn = None;
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
                once(&arn, "--runtime-arn")?;
                arn = Some(value("--runtime-arn")?);
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
    args.runtime_arn = arn.ok_or("--runtime-arn is required")?;
    if args.listen_token_file.is_some() && args.listen.is_none() {
        return Err("--listen-token-file needs --listen".into());
    }
    Ok(Parsed::Run(args))
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
        ])
        .unwrap();
        assert_eq!(
            parsed,
            Parsed::Run(Args {
                runtime_arn: ARN.into(),
                region: Some("eu-west-1".into()),
                qualifier: Some("prod".into()),
                endpoint: Some("http://127.0.0.1:9".into()),
                idempotent_tools: vec!["add".into(), "echo".into()],
                stop_session_on_exit: true,
                listen: Some("127.0.0.1:0".parse().unwrap()),
                listen_token_file: Some("/tmp/token".into()),
            })
        );
        assert_eq!(parse(&["--runtime-arn", ARN, "-h"]).unwrap(), Parsed::Help);
        assert_eq!(parse(&["-V"]).unwrap(), Parsed::Version);
    }

    #[test]
    fn bad_input_is_named() {
        let cases: [(&[&str], &str); 9] = [
            (&[], "--runtime-arn is required"),
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
                "--listen 8080: not an ADDRESS:PORT",
            ),
        ];
        for (args, expected) in cases {
            let error = parse(args).unwrap_err();
            assert!(error.starts_with(expected), "{args:?}: {error}");
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
