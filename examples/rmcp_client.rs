//! The official Rust MCP SDK's client (rmcp) talking to AgentCore Runtime through this crate's
//! tower stack — here against the local emulator.
//!
//! What it shows:
//! * rmcp's `StreamableHttpClientTransport` over `agentcore_tower::rmcp::TowerClient` (rmcp's
//!   `StreamableHttpClient` over any tower service), over the recommended stack: `ReplayGuardLayer` →
//!   `ThrottleRetryLayer` → `SessionBusyRetryLayer` → `SigV4InvokeLayer` → hyper-util's client;
//! * the runtime session provisioning (300 ms here): its "session operation in progress"
//!   refusals are re-sent by the stack and rmcp never sees them;
//! * `tools/list`, then `tools/call` of `add` (declared idempotent) and of `counter` (not
//!   idempotent) — the latter throttled once with HTTP 429, which the stack waits out: a 429
//!   is refused before anything ran, so even a non-idempotent call may be sent again;
//! * every call's attempt record. rmcp does not hand HTTP responses to the app, so
//!   `agentcore_tower::rmcp::RecordTap`, between rmcp's transport and the stack, prints them;
//! * what the emulator saw (its audit), and that `counter` ran exactly once.
//!
//! Run: `cargo run --example rmcp_client --features rmcp`

use std::time::Duration;

use agentcore_tower::ReplayGuardLayer;
use agentcore_tower::recommended_layers;
use agentcore_tower::rmcp::{RecordTap, TowerClient};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, RetryAfter};
use bytes::Bytes;
use http_body_util::Full;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(300))).await?;
    println!(
        "emulator: runtime {} at {} (sessions provision for 300 ms)",
        emulator.runtime_arn(),
        emulator.endpoint()
    );

    let signer = emulator.signer().build()?;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let stack = tower::ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer,
        ))
        .service(http);
    // Print the attempt record of every HTTP exchange rmcp makes.
    // (The GET and DELETE, which SigV4InvokeLayer answers itself with 405, show "not sent".)
    let stack = RecordTap::new(stack, |exchange, record| {
        println!("  [{exchange}] attempts:\n    {}", indent(record));
    });

    // Pinned to a version that has `initialize` (rmcp's default is 2026-07-28, which has none,
    // and the emulator echoes whatever version the client asks for).
    let client_config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentcore-tower-rmcp-example", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2025_06_18);
    println!("\nconnecting (initialize):");
    // The URI is for rmcp only: SigV4InvokeLayer sends every request to its InvokeTarget.
    let transport = TowerClient::new(stack).into_transport("http://agentcore.invalid/mcp");
    let client = client_config.serve(transport).await?;
    if let Some(server) = client.peer_info() {
        let name = server.server_info.as_ref().map_or_else(
            || "(unnamed)".to_owned(),
            |i| format!("{} {}", i.name, i.version),
        );
        println!("connected to {name} (protocol {})", server.protocol_version);
    }

    println!("\ntools/list:");
    let tools = client.list_all_tools().await?;
    for tool in &tools {
        let idempotent = tool.annotations.as_ref().and_then(|a| a.idempotent_hint);
        println!(
            "  {} — {} (idempotentHint: {idempotent:?})",
            tool.name,
            tool.description.as_deref().unwrap_or_default()
        );
    }

    println!("\ntools/call add(a: 2, b: 3):");
    let added = client
        .call_tool(
            CallToolRequestParams::new("add").with_arguments(
                serde_json::json!({"a": 2, "b": 3})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await?;
    println!("  = {}", text_of(&added));

    println!("\ntools/call counter, throttled once (HTTP 429, Retry-After: 0):");
    emulator.push_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(0)),
    });
    let counted = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    println!("  = {}", text_of(&counted));

    // Closing sends DELETE for the MCP session: SigV4InvokeLayer answers 405 (AgentCore has no
    // such operation) and rmcp closes anyway.
    println!("\nclosing:");
    client.cancel().await?;

    let audit = emulator.audit();
    println!(
        "\nthe emulator saw {} requests: {} session-busy refusal(s), {} throttled, \
         add ran {} time(s), counter ran {} time(s) (counter = {})",
        audit.requests,
        audit.busy_refusals,
        audit.throttled,
        audit.executions_of("add"),
        audit.executions_of("counter"),
        emulator.counter()
    );
    if audit.executions_of("counter") != 1 {
        return Err("counter should have run exactly once".into());
    }
    Ok(())
}

/// The text of a tool result's content, joined.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn indent(record: &agentcore_tower::AttemptRecord) -> String {
    record.to_string().replace('\n', "\n    ")
}
