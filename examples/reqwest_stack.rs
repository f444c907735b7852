//! The full `agentcore_tower` stack over reqwest, against the local AgentCore emulator.
//!
//! It starts the emulator (a new runtime session provisions for 300 ms, answering the
//! session-busy refusal meanwhile), builds the recommended stack — replay guard, throttle retry,
//! session-busy retry, SigV4 — over `reqwest::Client` (`agentcore_tower::reqwest`), and runs a short MCP session by hand: `initialize`,
//! `notifications/initialized`, `tools/list`, `tools/call add {a:2,b:3}`, and `tools/call
//! counter` after a scripted 429 with `Retry-After: 1`. For each it prints the answer and the
//! call's attempt record, one line per attempt: the session-busy refusals waited out while the
//! session provisions, the throttled attempt waited out, and what each layer decided.
//!
//! The emulator checks the SigV4 signature of every request and answers 403
//! `InvalidSignatureException` when anything signed changed on the way: every 200 below shows
//! that reqwest sent the signed request unaltered.
//!
//! Run: `cargo run --example reqwest_stack --features reqwest`

use std::time::Duration;

use agentcore_tower::reqwest::ReqwestService;
use agentcore_tower::{AttemptRecord, ReplayGuardLayer, recommended_layers};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, RetryAfter};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tower::{Service, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(300))).await?;
    println!(
        "emulator: runtime {} at {}",
        emulator.runtime_arn(),
        emulator.endpoint()
    );

    let signer = emulator.signer().build()?;
    // reqwest's own retries and redirects off (the stack decides re-sends); no proxy from the
    // environment between us and the emulator on 127.0.0.1.
    let client = ReqwestService::with_client(|builder| builder.no_proxy())?;
    // The stack's own spans and events, to stderr: the call, each attempt as it goes on the wire
    // and each layer's decision (never a header value). A tower-http `TraceLayer` fits between
    // the stack and the client too, and sees every signed attempt (as
    // `interop/tests/it/with_tower_http.rs` shows).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::DEBUG)
        .with_target(false)
        .init();
    let mut stack = tower::ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer,
        ))
        .service(client);

    let mut session: Option<String> = None;
    let messages = [
        (
            "initialize",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"reqwest-stack","version":"0.1.0"}}}"#,
        ),
        (
            "notifications/initialized",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ),
        (
            "tools/list",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ),
        (
            "tools/call add {a:2,b:3}",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}"#,
        ),
        (
            "tools/call counter (after a scripted 429, Retry-After: 1)",
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"counter","arguments":{}}}"#,
        ),
    ];
    for (label, payload) in messages {
        if label.starts_with("tools/call counter") {
            emulator.push_fault(Fault::Throttle {
                retry_after: Some(RetryAfter::Seconds(1)),
            });
        }
        let mut request = http::Request::post("http://agentcore.invalid/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(id) = &session {
            request = request.header("mcp-session-id", id.as_str());
        }
        let request = request.body(Full::new(Bytes::from_static(payload.as_bytes())))?;

        // The layers accept any request body type, so `ready` names the one this call uses.
        let response = ServiceExt::<http::Request<Full<Bytes>>>::ready(&mut stack)
            .await?
            .call(request)
            .await?;
        let status = response.status();
        if let Some(id) = response.headers().get("mcp-session-id") {
            session = Some(id.to_str()?.to_owned());
        }
        let record = AttemptRecord::of_response(&response)
            .cloned()
            .unwrap_or_default();
        let body = response.into_body().collect().await?.to_bytes();
        println!("\n{label}: HTTP {}", status.as_u16());
        if !body.is_empty() {
            println!("  answer: {}", String::from_utf8_lossy(&body));
        }
        println!("  attempts:");
        for line in record.to_string().lines() {
            println!("    {line}");
        }
        if !status.is_success() {
            return Err(format!("{label}: HTTP {status}").into());
        }
    }

    let audit = emulator.audit();
    println!(
        "\nemulator saw {} requests: {} session-busy refusals, {} throttled, {} signature failures; counter = {}",
        audit.requests,
        audit.busy_refusals,
        audit.throttled,
        audit.signature_failures,
        emulator.counter()
    );
    if audit.signature_failures != 0 {
        return Err("the emulator refused a signature".into());
    }
    Ok(())
}
