//! Learning whether the target offers the Tasks extension before a client's first
//! `tools/call`: one `server/discover` of MCP 2026-07-28, the layer's own, for clients that never
//! send one (a 2025 client opens a session with `initialize` instead).

use bytes::Bytes;
use http::Request;
use http::request::Parts;
use http_body::Body;
use serde_json::json;

use super::table::PREFIX;
use super::wire;
use crate::replay::ReplayOverride;
use crate::sends::Sends;

/// What the probe learned.
pub(super) enum Learned {
    Offered,
    NotOffered,
    /// No answer (a transport failure, a timeout): the next call asks again.
    Unknown,
}

/// Sends the layer's `server/discover` with the head of the client's request (its URI and
/// credentials; not its MCP session, which a 2026-07-28 request has none of) and reads whether
/// the answer offers the extension. Any JSON-RPC answer teaches: an error (a server of the
/// 2025 era knows no `server/discover`) is "not offered".
pub(super) async fn probe<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    service: &mut S,
    client: &Parts,
    timeout: std::time::Duration,
) -> Learned {
    let id = format!("{PREFIX}discover");
    match crate::exchange::ask(service, discover_request(client, &id), &id, timeout).await {
        Ok(answer) if wire::offers_tasks(&answer) => Learned::Offered,
        Ok(_) => Learned::NotOffered,
        Err(why) => {
            tracing::debug!(layer = super::LAYER, reason = %why, "server/discover failed");
            Learned::Unknown
        }
    }
}

/// The layer's `server/discover`: MCP 2026-07-28, declaring the extension, with the client's
/// head but for what names a session, a version, a method or a body.
fn discover_request<ReqB: From<Bytes>>(client: &Parts, id: &str) -> Request<ReqB> {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": "server/discover",
        "params": {"_meta": crate::exchange::own_meta(json!({}))}});
    wire::declare(&mut message);
    let mut request = crate::exchange::modern_post(client, &message, None);
    request.extensions_mut().insert(ReplayOverride::Replayable);
    request
}
