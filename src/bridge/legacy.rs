//! The MCP sessions the bridge opens itself with a server of the `initialize` era, for clients
//! of MCP 2026-07-28: one per client, as the client says what it is in every request (its
//! information and capabilities in `_meta`), since a session is what its `initialize` said —
//! a server asks a client only what it declared it can answer. At most so many, the one opened
//! longest ago forgotten first; one the server no longer knows (HTTP 404) is forgotten and
//! opened again.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request};
use http_body::Body;
use serde_json::{Value, json};

use super::ProtocolBridgeLayer;
use crate::contract::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::exchange::exchange;
use crate::protocol;
use crate::replay::ReplayOverride;
use crate::sends::Sends;

/// The id of the bridge's own `initialize`.
const INITIALIZE_ID: &str = "agentcore-tower/bridge/initialize";

/// The MCP session the bridge opened with a target of the `initialize` era.
#[derive(Clone, Debug)]
pub(super) struct LegacySession {
    /// Its `Mcp-Session-Id` (none from a server that keeps no sessions).
    pub(super) id: Option<HeaderValue>,
    /// The version its `initialize` agreed.
    version: HeaderValue,
    /// What its `initialize` answered.
    pub(super) result: Value,
    /// The client it is for (what [`client_key`] says of it).
    client: String,
}

/// The bridge's sessions, by the client each is for.
pub(super) struct LegacySessions {
    max: usize,
    held: tokio::sync::Mutex<Held>,
}

#[derive(Default)]
struct Held {
    by_client: HashMap<String, LegacySession>,
    /// The clients, oldest session first.
    order: VecDeque<String>,
}

impl LegacySessions {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            held: tokio::sync::Mutex::default(),
        }
    }

    /// Forgets `session` (the server no longer knows it), unless another took its place.
    pub(super) async fn forget(&self, session: &LegacySession) {
        let mut held = self.held.lock().await;
        if held
            .by_client
            .get(&session.client)
            .is_some_and(|kept| kept.id == session.id)
        {
            held.by_client.remove(&session.client);
            held.order.retain(|client| client != &session.client);
        }
    }
}

/// The client a 2026-07-28 request is from, as its `_meta` says: its information and
/// capabilities, less the extensions a request declares for itself (a layer above may declare
/// one on some requests only, as the task layer does on calls).
fn client_key(message: &Value) -> String {
    let meta = message.pointer("/params/_meta");
    let part = |key: &str| meta.and_then(|m| m.get(key)).cloned();
    let mut capabilities = part("io.modelcontextprotocol/clientCapabilities");
    if let Some(Value::Object(capabilities)) = &mut capabilities {
        capabilities.remove("extensions");
    }
    json!([part("io.modelcontextprotocol/clientInfo"), capabilities]).to_string()
}

/// The session the bridge holds with the target for the client of `message`, opened now if
/// it has none: `None` when the server does not take an `initialize` either.
pub(super) async fn open<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    inner: &mut S,
    client: &Parts,
    message: &Value,
    layer: &ProtocolBridgeLayer,
) -> Option<LegacySession> {
    let key = client_key(message);
    let mut held = layer.legacy.held.lock().await;
    if let Some(session) = held.by_client.get(&key) {
        return Some(session.clone());
    }
    let session = initialize(inner, client, message, key.clone(), layer).await?;
    layer.learn_legacy_only(session.version.to_str().unwrap_or_default());
    while held.by_client.len() >= layer.legacy.max {
        let Some(oldest) = held.order.pop_front() else {
            break;
        };
        held.by_client.remove(&oldest);
    }
    held.by_client.insert(key.clone(), session.clone());
    held.order.push_back(key);
    Some(session)
}

/// Opens a session for the client of `message`: `initialize` (its information and
/// capabilities, the newest version of the era), then `notifications/initialized`.
async fn initialize<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    inner: &mut S,
    client: &Parts,
    message: &Value,
    key: String,
    layer: &ProtocolBridgeLayer,
) -> Option<LegacySession> {
    let meta = message
        .pointer("/params/_meta")
        .cloned()
        .unwrap_or(json!({}));
    let initialize = json!({"jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize",
    "params": {
        "protocolVersion": protocol::LATEST_WITH_INITIALIZE,
        "capabilities": meta.get("io.modelcontextprotocol/clientCapabilities").cloned().unwrap_or(json!({})),
        "clientInfo": meta.get("io.modelcontextprotocol/clientInfo").cloned()
            .unwrap_or(json!({"name": "agentcore-tower", "version": env!("CARGO_PKG_VERSION")})),
    }});
    let request = legacy_post(client, &initialize, None);
    let (head, body) = exchange(inner, request, layer.discover_timeout)
        .await
        .ok()?;
    let answer = crate::exchange::answer_in(&body, &json!(INITIALIZE_ID), &mut Vec::new())?;
    let result = answer.get("result")?.clone();
    let version = result.get("protocolVersion").and_then(Value::as_str)?;
    let session = LegacySession {
        id: head.headers.get(MCP_SESSION_ID).cloned(),
        version: HeaderValue::from_str(version).ok()?,
        result,
        client: key,
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let request = legacy_post(client, &initialized, Some(&session));
    let (head, _) = exchange(inner, request, layer.discover_timeout)
        .await
        .ok()?;
    head.status.is_success().then_some(session)
}

/// A POST of `message` in the bridge's `session` (none: the `initialize` that opens it), with
/// the client's head less what names the revision's headers and a body.
pub(super) fn legacy_post<ReqB: From<Bytes>>(
    client: &Parts,
    message: &Value,
    session: Option<&LegacySession>,
) -> Request<ReqB> {
    let mut request = crate::exchange::plain_post(client, message);
    let headers = request.headers_mut();
    if let Some(session) = session {
        headers.insert(MCP_PROTOCOL_VERSION, session.version.clone());
        if let Some(id) = &session.id {
            headers.insert(MCP_SESSION_ID, id.clone());
        }
    }
    if message.get("id").is_some() && message["method"] == "initialize" {
        request.extensions_mut().insert(ReplayOverride::Replayable);
    }
    request
}

/// Posts one message of the client's (a response to a request of the server's) in `session`:
/// whether the server took it.
pub(super) async fn respond<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    inner: &mut S,
    client: &Parts,
    response: &Value,
    session: &LegacySession,
    layer: &ProtocolBridgeLayer,
) -> Result<(), String> {
    let request = legacy_post(client, response, Some(session));
    let (head, _) = exchange(inner, request, layer.discover_timeout).await?;
    if head.status.is_success() {
        Ok(())
    } else {
        Err(format!("HTTP {}", head.status.as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_what_it_says_of_itself_and_nothing_else() {
        let request = |name: &str, capabilities: Value, id: u64| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": capabilities}}})
        };
        let asks = client_key(&request("a", json!({"elicitation": {}}), 1));
        assert_eq!(
            asks,
            client_key(&request("a", json!({"elicitation": {}}), 2))
        );
        assert_ne!(asks, client_key(&request("a", json!({}), 1)));
        assert_ne!(
            asks,
            client_key(&request("b", json!({"elicitation": {}}), 1))
        );
        let declares =
            json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
        assert_eq!(asks, client_key(&request("a", declares, 3)));
        assert_eq!(client_key(&json!({"id": 1})), "[null,null]");
    }
}
