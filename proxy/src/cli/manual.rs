//! The manual page (`--help`) and the usage said after a wrong command line, both laid out
//! from clap's [`Command`] for the options (see [`options`](super::options)): its `about`
//! (NAME), its usage (SYNOPSIS), its `before_long_help` (DESCRIPTION), each argument's
//! heading and long help (OPTIONS) and its `after_long_help` (ENVIRONMENT, EXAMPLES, EXIT
//! STATUS). The texts of this file are those parts; an option's entry is its doc comment.
//!
//! clap's own help renderer is not used: it writes `--runtime-arn <ARN>` two columns in, under
//! `Options:`, and the manual keeps the layout of a manual page (sections, `--runtime-arn ARN`
//! four columns in, its text under it at eight, 80 columns), which its readers and the README
//! know.

use clap::Command;
use clap::builder::StyledStr;

/// NAME: what the proxy is, in a line or two.
pub const NAME: &str = "\
agentcore-mcp-proxy - an MCP proxy to AWS Bedrock AgentCore Runtime,
AgentCore Gateway or any MCP URL, over stdio or local HTTP";

/// SYNOPSIS, and the usage after a wrong command line: each form of the command line, its
/// continuation lines indented; then what TOKEN and COMMON stand for. Every option is named
/// here (a test holds it to the options clap knows).
pub const SYNOPSIS: &str = "\
agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
    [--qualifier QUALIFIER] [--endpoint URL] [--stop-session-on-exit]
    [--runtime-user-id ID] [--runtime-idle-timeout DURATION]
    [--runtime-max-lifetime DURATION] [TOKEN | --profile NAME] [COMMON]
agentcore-mcp-proxy --gateway-url URL [--region REGION]
    [TOKEN | --profile NAME] [COMMON]
agentcore-mcp-proxy --url URL --signing-name NAME [--region REGION]
    [--profile NAME] [COMMON]
agentcore-mcp-proxy --url URL TOKEN [COMMON]
agentcore-mcp-proxy check DOOR-OPTIONS...
agentcore-mcp-proxy --help | --version

TOKEN:  --bearer-token-env VAR | --bearer-token-command CMD  (else SigV4)
COMMON: [--timeout DURATION] [--idle-timeout DURATION]
        [--no-tasks] [--max-task-duration DURATION]
        [--bridge-modern-clients]
        [--idempotent-tool NAME]... [--strict-tool NAME]...
        [--trust-tool-annotations] [--read-only]
        [--allow-tool PATTERN]... [--deny-tool PATTERN]...
        [--header NAME=VALUE]...
        [--listen ADDRESS:PORT [--listen-token-file PATH]]";

/// DESCRIPTION.
pub const DESCRIPTION: &str = "\
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
deadline for the whole call (--timeout, 15 minutes unless told
otherwise), MCP session recovery (a server that no
longer knows the session, after a runtime's idle timeout or a gateway
session's end, answers 404: a new session is opened with the session's
own initialize and the request sent once more), the replay guard,
throttle retry (HTTP 429, honouring Retry-After), session-busy retry (a
runtime session still provisioning or stopping: waited out for up to
45 s), then the signer (InvokeAgentRuntime for a runtime, the
request as it is for a URL), which signs (or sets the token) afresh for
every attempt, over HTTPS (rustls, the webpki roots; http:// only for a
local test server). A request whose answer may have been lost after it
ran (a dropped connection, a 5xx) is sent again only when it calls a
tool named by --idempotent-tool (or, with --trust-tool-annotations, one
the server annotates as safe to repeat): any other may have run, and
never runs twice.

Tools: with --allow-tool, --deny-tool or --read-only, the client sees
only the tools let through. Each tools/list answer (JSON or SSE) comes
without the others, its nextCursor untouched (a page may come empty),
and a tools/call of a hidden tool is answered here with an
invalid-params error (-32602) naming the tool and the rule that hides
it: nothing is sent. A batch holding such a call is not sent at all.

A request the stack gives up on is answered with a JSON-RPC error (code
-32000) naming what happened, the record of every attempt in
error.data.attempts; so is a call cut by --timeout or --idle-timeout
(the message names the limit and its value, as do error.data.limit and
error.data.limitMs); so is an HTTP error without a JSON-RPC body
(error.data.httpStatus, error.data.errorType; for a refused token,
error.data.resourceMetadata: where the server's OAuth metadata is). A
message that is not JSON gets a parse error (-32700), and nothing is
sent.

An HTTP error names its case in error.data.kind, and what to do in the
message and error.data.advice: expired_credentials (403
ExpiredTokenException: refresh them, e.g. aws sso login --profile
NAME), auth_method_mismatch (403 \"Authorization method mismatch\": use
the other door, a TOKEN option or SigV4), access_denied (403
AccessDeniedException: the identity lacks
bedrock-agentcore:InvokeAgentRuntime, or InvokeGateway), not_found (404
ResourceNotFoundException: the ARN, URL, qualifier or region),
throttled (429 or 402, after the proxy's waits), session_busy (409, the
runtime session still starting or stopping after the proxy's waits),
not_ready (424, the runtime's container did not become ready in time),
unauthorized (401), refused (another 4xx), server_error (a 5xx). The
same refusals in their JSON-RPC form (HTTP 200 with -32003, -32005 or
-32010) keep their code and message and say the same in error.data.

check: with the same door options, says where the credentials come
from (the AWS provider that answered and the profile, or the TOKEN
option; for expired SSO credentials the aws sso login command to run),
the region and the target; then asks the server which protocol it
speaks (server/discover of MCP 2026-07-28, else initialize) and lists
its tools, through the proxy's stack, and prints the server's name, the
protocol version and how it was agreed, each tool with its replay
status (declared idempotent, strict, by server annotation with
--trust-tool-annotations, or not replayable) and the attempt record of
each request, or the error and its kind. On stdout, without a secret;
exit 0 only when all is well.";

/// What follows OPTIONS: ENVIRONMENT, EXAMPLES and EXIT STATUS, each with its heading.
pub const AFTER_OPTIONS: &str = "\
ENVIRONMENT
    AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, ...
        With SigV4: the standard AWS credentials chain: environment,
        profiles (SSO and assume-role included; --profile names one), web
        identity, container and instance roles. Credentials are cached, and
        resolved again 5 minutes before they expire. Not read with a TOKEN
        option.

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

    OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
        Export OpenTelemetry over OTLP/HTTP: each call's span (\"tools/call
        TOOL\" and the like, as the MCP semantic conventions name them), a
        child span per HTTP attempt with the layers' decisions as events,
        the histograms mcp.client.operation.duration,
        mcp.client.session.duration and http.client.request.duration, and
        the retry budget's counters (agentcore_tower.retry_budget.*). The
        first variable sends both
        (to its URL with /v1/traces and /v1/metrics after it); a signal's
        own sends that signal to its URL as it is (a URL with a user or
        password in it is refused). Each attempt then carries the trace
        (traceparent, X-Amzn-Trace-Id): AgentCore's spans join it. What is
        left is sent at exit, for up to 5 s. With none of the three set,
        nothing is exported and none of it runs.

        OTEL_EXPORTER_OTLP_PROTOCOL (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
        ..._METRICS_PROTOCOL): http/protobuf (the default) or http/json;
        grpc is not supported (a warning, and nothing is sent over it).
        Also read: OTEL_EXPORTER_OTLP_HEADERS (e.g. a collector's API key;
        never logged), OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_SERVICE_NAME
        (default agentcore-mcp-proxy), OTEL_RESOURCE_ATTRIBUTES,
        OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL; OTEL_SDK_DISABLED=true,
        OTEL_TRACES_EXPORTER=none and OTEL_METRICS_EXPORTER=none turn it
        off. https:// uses rustls and the webpki roots.

        Nothing secret is exported: no credentials, tokens, signatures,
        URL users or passwords, nor query values (a URL's query values are
        REDACTED); nor the proxy's log lines.

EXAMPLES
    The command of a desktop MCP client (stdio), a runtime behind IAM:
        agentcore-mcp-proxy --runtime-arn \\
            arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/srv-AbC123

    An SSO profile, a tool safe to repeat, the microVM stopped at exit:
        agentcore-mcp-proxy --runtime-arn ARN --profile dev \\
            --idempotent-tool lookup --stop-session-on-exit

    Read-only tools only, a secret one hidden, the server's annotations
    trusted, calls cut after 5 minutes:
        agentcore-mcp-proxy --gateway-url URL --read-only \\
            --deny-tool '*secret*' --trust-tool-annotations --timeout 5m

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
    With check: 0 when all is well, 1 otherwise, 2 for a wrong command
    line.";

/// `--help`: the manual page of `command` (the proxy's, with its options).
pub fn page(command: &Command) -> String {
    let mut page = String::new();
    for (title, body) in [
        ("NAME", command.get_about()),
        ("SYNOPSIS", command.get_overridden_usage()),
        ("DESCRIPTION", command.get_before_long_help()),
    ] {
        page.push_str(title);
        page.push('\n');
        page.push_str(&indented(&text(body), 4));
        page.push_str("\n\n");
    }
    page.push_str("OPTIONS\n");
    page.push_str(&options(command));
    page.push('\n');
    page.push_str(&text(command.get_after_long_help()));
    page.push('\n');
    page
}

/// The usage said after a wrong command line: the synopsis of `command`.
pub fn usage(command: &Command) -> String {
    let mut usage = String::new();
    for (at, line) in text(command.get_overridden_usage()).lines().enumerate() {
        let lead = match (at, line.is_empty()) {
            (0, _) => "usage: ",
            (_, true) => "",
            (_, false) => "       ",
        };
        usage.push_str(lead);
        usage.push_str(line);
        usage.push('\n');
    }
    usage
}

/// OPTIONS: each option's heading (`--runtime-arn ARN`, `-h, --help`) four columns in, its
/// entry under it at eight; an option without an entry shares the next one's (its heading
/// right above that one's).
fn options(command: &Command) -> String {
    let mut entries = String::new();
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        entries.push_str("    ");
        if let Some(short) = arg.get_short() {
            entries.push_str(&format!("-{short}, "));
        }
        if let Some(long) = arg.get_long() {
            entries.push_str(&format!("--{long}"));
        }
        let values = arg
            .get_action()
            .takes_values()
            .then(|| arg.get_value_names());
        for value in values.flatten().into_iter().flatten() {
            entries.push_str(&format!(" {value}"));
        }
        entries.push('\n');
        if let Some(entry) = arg.get_long_help().or(arg.get_help()) {
            entries.push_str(&indented(&entry.to_string(), 8));
            entries.push_str("\n\n");
        }
    }
    entries.truncate(entries.trim_end().len());
    entries.push('\n');
    entries
}

/// A text of the command, or none.
fn text(styled: Option<&StyledStr>) -> String {
    styled.map(ToString::to_string).unwrap_or_default()
}

/// `text` with each line that is not blank `by` columns in.
fn indented(text: &str, by: usize) -> String {
    let lead = " ".repeat(by);
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.trim().is_empty() {
                String::new()
            } else {
                format!("{lead}{line}")
            }
        })
        .collect();
    lines.join("\n")
}
