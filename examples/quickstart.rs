//! The whole stack, end to end, in one command.
//!
//! With no configuration it starts the embedded AgentCore Runtime emulator (a new runtime
//! session provisions for a moment and answers the session-busy refusal meanwhile; some calls
//! are throttled or lose their connection), builds the full stack — replay guard, throttle,
//! session busy, SigV4 — over hyper-util's client, runs an MCP session (initialize,
//! tools/list, several tools/call) and prints each call's result and its attempt record. Then
//! it speaks MCP's current revision, 2026-07-28, to the same runtime: no `initialize`, the
//! version in each request's `_meta`, and a tool that asks the user to confirm before it runs
//! (a multi round-trip request: the answer asks for input, the client sends the request again
//! with it).
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Pointed at AWS, it talks over HTTPS to one of:
//!
//! * a runtime, `AGENTCORE_RUNTIME_ARN` (`InvokeAgentRuntime`);
//! * an AgentCore Gateway, `AGENTCORE_GATEWAY_URL` (`https://{id}.gateway.bedrock-agentcore.{region}.amazonaws.com/mcp`);
//! * any SigV4-gated MCP URL, `AGENTCORE_MCP_URL` with `AGENTCORE_SIGNING_NAME` (`execute-api`,
//!   `lambda`, …);
//!
//! signed with the credentials of `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
//! `AWS_SESSION_TOKEN` for the region of `AWS_REGION` (or the ARN's, or the Gateway URL's) — or,
//! with `AGENTCORE_BEARER_TOKEN` set, sending that OAuth token instead (a runtime or a Gateway
//! with a JWT authorizer). `AGENTCORE_TOOL` names a tool to call with
//! `AGENTCORE_TOOL_ARGUMENTS` (JSON, default `{}`).
//!
//! With `AGENTCORE_TRACE=1` it also prints, on stderr, the span tree of every call as the crate
//! emits it: the call's span (`mcp`, named `{method} {tool}` for OpenTelemetry), each attempt's
//! span inside it, and the record's decisions as events on the attempts.

use std::time::Duration;

use agentcore_tower::auth::BearerToken;
use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{AttemptRecord, BoxError, ReplayGuardLayer, record::Verdict};
use agentcore_tower::{RecommendedLayers, recommended_layers};
use agentcore_tower_emulator::{BusyForm, Emulator, EmulatorConfig, Fault, RetryAfter};
use aws_credential_types::Credentials;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;
type Stack = BoxCloneService<Request<Full<Bytes>>, Response<Body>, agentcore_tower::Error>;

/// The body the stack answers with over a client whose body is `B`.
type StackBody<B> = agentcore_tower::RecommendedBody<B>;

fn boxed<T>(response: Response<T>) -> Response<Body>
where
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<BoxError>,
{
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}

/// Builds the recommended stack over `client` with `signer` (the invoke layer, or an MCP
/// endpoint layer: the retry layers and the guard are the same over either).
fn stack<Signer, C, B>(signer: Signer, client: C) -> Stack
where
    RecommendedLayers<Signer>: tower::Layer<C>,
    <RecommendedLayers<Signer> as tower::Layer<C>>::Service: tower::Service<
            Request<Full<Bytes>>,
            Response = Response<StackBody<B>>,
            Error = agentcore_tower::Error,
        > + Clone
        + Send
        + 'static,
    <<RecommendedLayers<Signer> as tower::Layer<C>>::Service as tower::Service<
        Request<Full<Bytes>>,
    >>::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    StackBody<B>: http_body::Body<Data = Bytes> + Send + 'static,
    <StackBody<B> as http_body::Body>::Error: Into<BoxError>,
{
    let service = ServiceBuilder::new()
        .layer(recommended_layers(
            // `add` is idempotent: a call that may have run can be sent again.
            ReplayGuardLayer::new().idempotent_tools(["add", "echo"]),
            signer,
        ))
        .service(client);
    let service = ServiceExt::<Request<Full<Bytes>>>::map_response(service, boxed::<StackBody<B>>);
    BoxCloneService::new(service)
}

/// A minimal MCP client: JSON-RPC over POST, JSON or SSE answers.
struct Mcp {
    stack: Stack,
    /// Where requests go: ignored by the invoke layer (the target decides), the server's URL
    /// for an MCP endpoint.
    url: String,
    session: Option<String>,
    next_id: u64,
    /// Speaks MCP 2026-07-28: the version and capabilities in each request's `_meta`, no
    /// session; otherwise 2025-06-18, in the session `initialize` opens.
    modern: bool,
}

/// MCP's current revision.
const MODERN: &str = "2026-07-28";

impl Mcp {
    async fn send(
        &mut self,
        method: &str,
        params: Value,
        notification: bool,
    ) -> Result<Option<Value>, BoxError> {
        let mut params = params;
        if self.modern {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if !notification {
            self.next_id += 1;
            message["id"] = json!(self.next_id);
        }
        let mut request = Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(
                "mcp-protocol-version",
                if self.modern { MODERN } else { "2025-06-18" },
            );
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let request = request.body(Full::new(Bytes::from(message.to_string())))?;
        let label = match params.get("name").and_then(Value::as_str) {
            Some(tool) => format!("{method} {tool}"),
            None => method.to_owned(),
        };
        println!("\n> {label}");
        let mut answered = None;
        match self.stack.clone().oneshot(request).await {
            Ok(response) => {
                if let Some(session) = response
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                {
                    self.session = Some(session.to_owned());
                }
                let record = AttemptRecord::of_response(&response).cloned();
                let status = response.status();
                let sse = response
                    .headers()
                    .get("content-type")
                    .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                let body = response.into_body().collect().await?.to_bytes();
                let text = String::from_utf8_lossy(&body);
                let answer = if sse {
                    text.lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    text.into_owned()
                };
                // The last message of the answer is the request's answer.
                answered = answer
                    .lines()
                    .rev()
                    .find_map(|line| serde_json::from_str(line).ok());
                println!(
                    "  HTTP {}: {}",
                    status.as_u16(),
                    if answer.is_empty() {
                        "(no body)"
                    } else {
                        &answer
                    }
                );
                if let Some(record) = record {
                    println!("  the stack: {}", what_the_stack_did(&record));
                    println!("  attempts:\n{}", indent(&record.to_string()));
                }
            }
            Err(error) => {
                let mut why = error.to_string();
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    why.push_str(&format!(": {cause}"));
                    source = cause.source();
                }
                println!("  failed: {why}");
                if let Some(record) = error.record() {
                    println!("  the stack: {}", what_the_stack_did(record));
                    println!("  attempts:\n{}", indent(&record.to_string()));
                }
            }
        }
        Ok(answered)
    }
}

/// One line of what the stack did with a call: its re-sends, and why it stopped.
fn what_the_stack_did(record: &AttemptRecord) -> String {
    let attempts = record.attempts();
    let mut said = Vec::new();
    for attempt in &attempts {
        for decision in attempt.decisions() {
            match decision.verdict() {
                Verdict::SentAgain { cause, wait, .. } => said.push(format!(
                    "{} sent it again after {} ms ({cause})",
                    decision.layer(),
                    wait.as_millis()
                )),
                Verdict::Forbidden { reason, .. } => {
                    said.push(format!("did not send it again: {reason}"))
                }
                Verdict::AttemptsExhausted { max_attempts, .. } => {
                    said.push(format!("gave up after {max_attempts} attempts"))
                }
                Verdict::WaitCeiling { .. } => said.push("gave up: the wait ceiling".into()),
                _ => {}
            }
        }
    }
    let n = attempts.len();
    let head = format!("{n} attempt{}", if n == 1 { "" } else { "s" });
    if said.is_empty() {
        format!("{head}, delivered as it came")
    } else {
        format!("{head}; {}", said.join("; "))
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let var = |name: &str| std::env::var(name).ok();
    if var("AGENTCORE_TRACE").is_some_and(|v| v != "0" && !v.is_empty()) {
        // Each line names the spans it is in, outer to inner (`mcp{…}:attempt{…}`); a span's
        // own line comes when it closes, with every field it was given.
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing::Level::DEBUG)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .init();
    }
    match (
        var("AGENTCORE_RUNTIME_ARN"),
        var("AGENTCORE_GATEWAY_URL"),
        var("AGENTCORE_MCP_URL"),
    ) {
        (None, None, None) => emulated().await,
        (Some(arn), None, None) => real(Door::Runtime(arn)).await,
        (None, Some(url), None) => real(Door::Gateway(url)).await,
        (None, None, Some(url)) => {
            let name = var("AGENTCORE_SIGNING_NAME").ok_or(
                "AGENTCORE_MCP_URL needs AGENTCORE_SIGNING_NAME (execute-api, lambda, ...) or AGENTCORE_BEARER_TOKEN",
            );
            match (name, var("AGENTCORE_BEARER_TOKEN")) {
                (_, Some(_)) => real(Door::Url(url, String::new())).await,
                (Ok(name), None) => real(Door::Url(url, name)).await,
                (Err(why), None) => Err(why.into()),
            }
        }
        _ => {
            Err("set one of AGENTCORE_RUNTIME_ARN, AGENTCORE_GATEWAY_URL, AGENTCORE_MCP_URL".into())
        }
    }
}

async fn emulated() -> Result<(), BoxError> {
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .provisioning(Duration::from_millis(400))
            .busy_form(BusyForm::Alternate),
    )
    .await?;
    println!(
        "AgentCore Runtime emulator at {} for {}",
        emulator.endpoint(),
        emulator.runtime_arn()
    );
    let target = InvokeTarget::arn(emulator.runtime_arn()).endpoint(emulator.endpoint());
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let mut mcp = Mcp {
        url: "https://agentcore.invalid/mcp".to_owned(),
        stack: stack(
            SigV4InvokeLayer::builder(target, emulator.credentials()).build()?,
            client,
        ),
        session: None,
        next_id: 0,
        modern: false,
    };

    println!(
        "Each call prints the fault the emulator was told to apply, the answer, one line of what\n\
         the stack did, and the attempt record. Every attempt ends in \"effect unknown\": a client\n\
         cannot know whether the server ran it; the record says what each re-send assumed."
    );

    let calls: [(&str, Option<Fault>, &str, Value, bool); 8] = [
        (
            "none — but the new runtime session is still provisioning: session busy, in both forms",
            None,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quickstart", "version": "1"}}),
            false,
        ),
        ("none", None, "notifications/initialized", json!({}), true),
        ("none", None, "tools/list", json!({}), false),
        (
            "HTTP 429 with Retry-After: 1 (refused before running)",
            Some(Fault::Throttle {
                retry_after: Some(RetryAfter::Seconds(1)),
            }),
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
            false,
        ),
        (
            "the connection drops after `add` ran (declared idempotent)",
            Some(Fault::DropAfterRun),
            "tools/call",
            json!({"name": "add", "arguments": {"a": 20, "b": 22}}),
            false,
        ),
        (
            "the connection drops after `counter` ran (not declared: it may have run)",
            Some(Fault::DropAfterRun),
            "tools/call",
            json!({"name": "counter", "arguments": {}}),
            false,
        ),
        (
            "the ConflictException look-alike (-32005 with another message: not the refusal)",
            Some(Fault::ConflictLookAlike),
            "tools/call",
            json!({"name": "counter", "arguments": {}}),
            false,
        ),
        (
            "none",
            None,
            "tools/call",
            json!({"name": "counter", "arguments": {}}),
            false,
        ),
    ];
    for (scripted, fault, method, params, notification) in calls {
        if let Some(fault) = fault {
            emulator.push_fault(fault);
        }
        println!("\n[emulator fault: {scripted}]");
        mcp.send(method, params, notification).await?;
    }

    println!(
        "\nNow MCP {MODERN}, the current revision, to the same runtime: no initialize, the\n\
         version in each request's _meta; this client's requests share one runtime session."
    );
    let mut modern = Mcp {
        modern: true,
        session: None,
        ..mcp
    };
    modern.send("server/discover", json!({}), false).await?;
    modern
        .send(
            "tools/call",
            json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
            false,
        )
        .await?;
    // `confirm` asks the user first: its answer is an input request, and nothing has run.
    let confirm = json!({"name": "confirm", "arguments": {"action": "deploy"}});
    let asked = modern.send("tools/call", confirm.clone(), false).await?;
    let state = asked
        .as_ref()
        .and_then(|answer| answer.pointer("/result/requestState"))
        .cloned()
        .ok_or("confirm did not ask for input")?;
    println!("  (the user confirms: the client sends the call again, with the answer)");
    let mut answered = confirm;
    answered["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"confirmed": true}}});
    answered["requestState"] = state;
    modern.send("tools/call", answered, false).await?;

    let audit = emulator.audit();
    println!(
        "\nemulator: {} requests, {} session-busy refusals, {} throttled, {} dropped, {} signature failures; counter ran {} time(s), add {} time(s), confirm {} time(s)",
        audit.requests,
        audit.busy_refusals,
        audit.throttled,
        audit.dropped,
        audit.signature_failures,
        audit.executions_of("counter"),
        audit.executions_of("add"),
        audit.executions_of("confirm"),
    );
    Ok(())
}

/// Where a real call goes.
enum Door {
    /// A runtime, by ARN.
    Runtime(String),
    /// An AgentCore Gateway's MCP URL.
    Gateway(String),
    /// Any MCP URL, signed for this signing name (empty with a bearer token).
    Url(String, String),
}

async fn real(door: Door) -> Result<(), BoxError> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let region = std::env::var("AWS_REGION")
        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
        .ok();
    let bearer = std::env::var("AGENTCORE_BEARER_TOKEN")
        .ok()
        .map(BearerToken::new);
    let credentials = || -> Result<Credentials, BoxError> {
        Ok(Credentials::new(
            env("AWS_ACCESS_KEY_ID")?,
            env("AWS_SECRET_ACCESS_KEY")?,
            std::env::var("AWS_SESSION_TOKEN").ok(),
            None,
            "environment",
        ))
    };
    // Name the crypto provider: with both ring and aws-lc-rs in a build, rustls cannot pick one.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(https);
    let (stack, url) = match (door, bearer) {
        (Door::Runtime(arn), bearer) => {
            let mut target = InvokeTarget::arn(arn);
            if let Some(region) = region {
                target = target.region(region);
            }
            let signer = match bearer {
                Some(token) => SigV4InvokeLayer::bearer(target, token).build()?,
                None => SigV4InvokeLayer::builder(target, credentials()?).build()?,
            };
            (
                stack(signer, client),
                "https://agentcore.invalid/mcp".to_owned(),
            )
        }
        (Door::Gateway(url) | Door::Url(url, _), Some(token)) => {
            let signer = McpEndpointLayer::bearer(token).build()?;
            (stack(signer, client), url)
        }
        (Door::Gateway(url), None) => {
            // `{id}.gateway.bedrock-agentcore.{region}.amazonaws.com`: the region is in the host.
            let host = url
                .parse::<http::Uri>()?
                .host()
                .unwrap_or_default()
                .to_owned();
            let in_host = host.split('.').nth(3).map(str::to_owned);
            let region = in_host.or(region).ok_or("no region: set AWS_REGION")?;
            let signer = McpEndpointLayer::sigv4(credentials()?)
                .region(region)
                .build()?;
            (stack(signer, client), url)
        }
        (Door::Url(url, signing_name), None) => {
            let signer = McpEndpointLayer::sigv4(credentials()?)
                .region(region.ok_or("no region: set AWS_REGION")?)
                .signing_name(signing_name)
                .build()?;
            (stack(signer, client), url)
        }
    };
    let mut mcp = Mcp {
        stack,
        url,
        session: None,
        next_id: 0,
        modern: false,
    };
    mcp.send("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quickstart", "version": "1"}}), false).await?;
    mcp.send("notifications/initialized", json!({}), true)
        .await?;
    mcp.send("tools/list", json!({}), false).await?;
    if let Ok(tool) = std::env::var("AGENTCORE_TOOL") {
        let arguments: Value = serde_json::from_str(
            &std::env::var("AGENTCORE_TOOL_ARGUMENTS").unwrap_or_else(|_| "{}".into()),
        )?;
        mcp.send(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            false,
        )
        .await?;
    }
    Ok(())
}
