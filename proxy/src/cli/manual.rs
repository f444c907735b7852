//! The manual page (`--help`) and the short usage shown after a wrong command line.

/// The short usage, after an error.
pub const USAGE: &str = "\
usage: agentcore-mcp-proxy --runtime-arn ARN [--region REGION]
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
                        [--stop-session-on-exit] [--runtime-user-id ID]
                        [--runtime-idle-timeout DURATION]
                        [--runtime-max-lifetime DURATION]
                        [TOKEN | --profile NAME] [COMMON]
    agentcore-mcp-proxy --gateway-url URL [--region REGION]
                        [TOKEN | --profile NAME] [COMMON]
    agentcore-mcp-proxy --url URL --signing-name NAME [--region REGION]
                        [--profile NAME] [COMMON]
    agentcore-mcp-proxy --url URL TOKEN [COMMON]
    agentcore-mcp-proxy check DOOR-OPTIONS...
    agentcore-mcp-proxy --help | --version

    TOKEN:  --bearer-token-env VAR | --bearer-token-command CMD
    COMMON: [--timeout DURATION] [--idle-timeout DURATION]
            [--no-tasks] [--max-task-duration DURATION]
            [--bridge-modern-clients]
            [--idempotent-tool NAME]... [--strict-tool NAME]...
            [--trust-tool-annotations] [--read-only]
            [--allow-tool PATTERN]... [--deny-tool PATTERN]...
            [--header NAME=VALUE]...
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
    exit 0 only when all is well.

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

    --profile NAME
        With SigV4: the credentials (SSO, assume-role and credential_process
        included) and the region of this AWS profile, as AWS_PROFILE=NAME
        would give them. Credentials in the environment (AWS_ACCESS_KEY_ID)
        still come first, as in every AWS SDK. Not with a TOKEN option.

    --runtime-user-id ID
        For a runtime: send X-Amzn-Bedrock-AgentCore-Runtime-User-Id: ID
        with every invocation, the user the runtime acts for (needs the
        bedrock-agentcore:InvokeAgentRuntimeForUser permission).

    --runtime-idle-timeout DURATION
    --runtime-max-lifetime DURATION
        For a runtime: its idleRuntimeSessionTimeout and maxLifetime, when
        they are not AgentCore's defaults (15m and 8h). At most 14d, what a
        runtime on AgentCore Instances takes (8h on microVMs); less than
        60s is taken as 60s. With --listen, an MCP session idle that long,
        or whose runtime session is that old, gets a new runtime session
        with its next request: AgentCore has ended its microVM. (Over
        stdio, the one runtime session starts again under its id.)

    --header NAME=VALUE
        Repeatable: add this header to every request, signed with the rest.
        For a runtime, only X-Amzn-Bedrock-AgentCore-Runtime-Custom-* names
        (any case), which AgentCore passes to the container when the
        runtime's request-header allowlist names them. For a gateway or a
        URL, any name except those the proxy, the signature or the transport
        set: authorization, host, accept, last-event-id, x-amz-*, mcp-*,
        content-*, and the hop-by-hop connection, keep-alive, proxy-*, te,
        trailer, transfer-encoding, upgrade. For a runtime or a gateway,
        AgentCore's limits: at most 20, each value at most 4 KB (and, for a
        gateway, names of at most 100 characters, what a target's allowlist
        takes). A name given twice (names are case-insensitive), or outside
        these rules, is refused at start (exit 2), naming the rule. Values
        are never logged nor shown in an error: they may be secrets. With
        --listen, a client's request that carries a header the proxy passes
        on (traceparent, tracestate, baggage) with another value than
        --header's is refused (HTTP 400): neither value is dropped silently.

    --timeout DURATION
        One deadline for each whole call: its retries, its waits and the
        reading of its answer. Default: 15m, AgentCore Runtime's limit for a
        synchronous request, so no call the service would still answer is
        cut. A call cut by it is answered with an error naming it.

    --idle-timeout DURATION
        How long an answer that has begun (its headers came: a JSON body, an
        SSE stream) may send nothing before it is taken for stalled and cut,
        with an error naming it; and after which the server's own stream is
        opened again. Default: 5m. A tool that streams its answer but works
        in silence for longer needs more. The wait for an answer to begin is
        --timeout's alone.

        A DURATION is a whole number with a unit: 1500ms, 90s, 5m, 1h, 2d; a
        number alone is seconds. More than zero, at most 24h.

    --no-tasks
        Leave MCP's Tasks extension to the client. By default the proxy runs
        it on behalf of a client that does not declare it: every tools/call
        is sent declaring it (a server without Tasks ignores what it does
        not know), so that a long tool the server can run as a task runs as
        one, and a task the server answers with is polled
        (tasks/get, on the task's runtime session) until it ends: the client
        gets the final result as the answer to its own tools/call, however
        long the job ran, with progress for its progressToken meanwhile. A
        job past --max-task-duration, or that the server cancels, fails or
        forgets, is answered with an error naming the task (error.data.kind:
        task_limit, task_cancelled, task_lost). A client that declares the
        extension itself gets the server's task handles untouched.
        --timeout bounds each request of the job, never the job.

    --bridge-modern-clients
        Bridge a client pinned to MCP 2026-07-28 to a server that speaks
        only the initialize era: its server/discover, refused, is answered
        from an initialize the proxy makes itself, and its requests are sent
        in that session. Off by default, since a client of both eras falls
        back to initialize by itself. A client of the initialize era at a
        server that speaks only 2026-07-28 is always bridged, once its
        initialize is refused.

    --max-task-duration DURATION
        How long a job run as a task may take before it is cancelled.
        Default: the task's own TTL (ttlMs), or 8h. At most 14d.

    --idempotent-tool NAME
        A tool that may be sent again after its answer was lost: one that is
        safe to run twice. Repeatable.

    --strict-tool NAME
        A tool never sent again, not even after a refusal that ran nothing
        (429, a session still starting). Repeatable.

    --trust-tool-annotations
        Take the server's tools/list annotations at their word (MCP calls
        them hints, not to be trusted from an untrusted server): a tool
        annotated readOnlyHint: true, or idempotentHint: true without
        destructiveHint: true, may be sent again as if named by
        --idempotent-tool, once listed; the attempt record says \"by server
        annotation\". --idempotent-tool and --strict-tool still win. Off by
        default.

    --allow-tool PATTERN
        Let through only the tools whose name matches a PATTERN: * for any
        run of characters, ? for any one, e.g. 'get_*'. Repeatable.

    --deny-tool PATTERN
        Hide the tools whose name matches PATTERN, even one an --allow-tool
        pattern matches. Repeatable.

    --read-only
        Let through only the tools the server annotates readOnlyHint: true.
        A tool the proxy has not seen in a tools/list answer is refused: its
        annotations are not known.

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
    line.
";

#[cfg(test)]
mod tests {
    use super::{HELP, USAGE};

    /// The options a text names, in order of first mention.
    fn options(text: &str) -> Vec<&str> {
        let mut seen = Vec::new();
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if word.starts_with("--") && word.len() > 2 && !seen.contains(&word) {
                seen.push(word);
            }
        }
        seen
    }

    #[test]
    fn the_manuals_synopsis_names_every_option_of_the_short_usage() {
        let synopsis = &HELP[HELP.find("SYNOPSIS").unwrap()..HELP.find("DESCRIPTION").unwrap()];
        assert_eq!(options(synopsis), options(USAGE));
        assert!(options(USAGE).contains(&"--header"));
    }
}
