//! An rmcp session against the emulator through agentcore-tower: initialize, list tools, call one.

use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use agentcore_tower::rmcp::{RecordTapLayer, TowerClient};
use agentcore_tower::{RecommendedLayers, ReplayGuardLayer};
use hyper_util::client::legacy::Client;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};

#[tokio::test]
async fn an_rmcp_session_against_the_emulator() -> Result<(), agentcore_tower::BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let layers = RecommendedLayers::new(emulator.signer().build()?)
        .guard(ReplayGuardLayer::new().idempotent_tools(["add"]));
    let stack = tower::ServiceBuilder::new()
        .layer(RecordTapLayer::new(|exchange, record| {
            println!("{exchange}: {record}")
        }))
        .layer(layers)
        .service(Client::builder(hyper_util::rt::TokioExecutor::new()).build_http());
    // The URI is rmcp's; SigV4InvokeLayer sends every request to the emulator's runtime.
    let transport = TowerClient::new(stack).into_transport("http://agentcore.invalid/mcp");
    let client = ClientConfig::default()
        .with_protocol_version(ProtocolVersion::V_2025_06_18)
        .serve(transport)
        .await?;
    let tools = client.list_all_tools().await?;
    assert_eq!(tools.len(), 3, "add, echo, counter");
    let arguments = serde_json::from_str(r#"{"a": 2, "b": 3}"#)?;
    let sum = client
        .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
        .await?;
    assert_eq!(sum.content[0].as_text().map(|t| t.text.as_str()), Some("5"));
    assert_eq!(emulator.audit().executions_of("add"), 1);
    client.cancel().await?;
    Ok(())
}
