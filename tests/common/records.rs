//! rmcp's exchanges and their attempt records, as the record tap hands them over: for the test
//! crates that build the crate's `rmcp` feature (each includes this file by its path).

use std::sync::{Arc, Mutex};

/// rmcp's exchanges, each with its attempt record, as a tap hands them over ([`tap_into`]).
pub type Records = Arc<
    Mutex<
        Vec<(
            agentcore_tower::rmcp::Exchange,
            agentcore_tower::AttemptRecord,
        )>,
    >,
>;

/// A record tap that keeps every exchange and its attempt record in `records`, in order.
pub fn tap_into(records: &Records) -> agentcore_tower::rmcp::RecordTapLayer {
    let sink = records.clone();
    agentcore_tower::rmcp::RecordTapLayer::new(move |exchange, record| {
        sink.lock()
            .unwrap()
            .push((exchange.clone(), record.clone()));
    })
}

/// Every exchange in `records`, as `POST tools/call add`, sorted (rmcp's GET runs beside its
/// POSTs, so the order is not theirs to keep).
pub fn exchanges(records: &Records) -> Vec<String> {
    let mut all: Vec<String> = records
        .lock()
        .unwrap()
        .iter()
        .map(|(e, _)| e.to_string())
        .collect();
    all.sort();
    all
}

/// What an rmcp MCP session of the `initialize` era exchanges: its GET and DELETE (answered 405
/// by the signer itself), its handshake and `posts`, sorted as [`exchanges`] sorts them.
#[allow(
    dead_code,
    reason = "the interop tests include this file for its tap, not for this"
)]
pub fn session_exchanges(posts: &[&str]) -> Vec<String> {
    let handshake = [
        "DELETE",
        "GET",
        "POST initialize",
        "POST notifications/initialized",
    ];
    let mut all: Vec<String> = handshake
        .iter()
        .chain(posts)
        .map(|e| e.to_string())
        .collect();
    all.sort();
    all
}

/// The arguments of a `tools/call` of the emulator's `add`.
pub fn add(a: i64, b: i64) -> rmcp::model::CallToolRequestParams {
    rmcp::model::CallToolRequestParams::new("add").with_arguments(
        serde_json::json!({"a": a, "b": b})
            .as_object()
            .expect("an object")
            .clone(),
    )
}

/// The texts of a tool's result, in order.
pub fn text_of(result: &rmcp::model::CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .map(|c| c.as_text().expect("text content").text.as_str())
        .collect()
}

/// rmcp's client `config` over `transport`: in auto mode (`server/discover` at 2026-07-28,
/// falling back to `initialize` at 2025-11-25) when `pinned` is `None`, else `initialize` at
/// that version, as rmcp's `serve` does.
pub async fn serve_client<T, E, A>(
    config: rmcp::model::ClientConfig,
    transport: T,
    pinned: Option<rmcp::model::ProtocolVersion>,
) -> Result<
    rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    rmcp::service::ClientInitializeError,
>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::model::ProtocolVersion;
    use rmcp::{ClientServiceExt as _, ServiceExt as _};
    match pinned {
        None => {
            config
                .serve_with_lifecycle(
                    transport,
                    rmcp::ClientLifecycleMode::Auto {
                        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                        legacy_version: Some(ProtocolVersion::V_2025_11_25),
                    },
                )
                .await
        }
        Some(version) => config.with_protocol_version(version).serve(transport).await,
    }
}
