//! A client's `initialize`: sent as it is, unless the target is known to speak only MCP
//! 2026-07-28; refused for its era, it is answered from the server's `server/discover`, in a
//! session the bridge opens itself.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use serde_json::{Value, json};

use super::local::local;
use super::sessions::Client;
use super::{BridgeBody, ProtocolBridgeLayer};
use crate::exchange::{Peeked, ask, modern_post, own_meta};
use crate::protocol;
use crate::record::AttemptRecord;
use crate::replay::ReplayOverride;
use crate::sends::Sends;

/// The header that names a request's runtime session (the one its answer came from).
const RUNTIME_SESSION: http::HeaderName =
    http::HeaderName::from_static(crate::invoke::RUNTIME_SESSION_ID);

/// The id of the bridge's own `server/discover`.
const DISCOVER_ID: &str = "agentcore-tower/bridge/discover";

/// A client's `initialize` (`message`, no MCP session).
pub(super) async fn initialize<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    message: Value,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB>,
    ReqB: Body<Data = Bytes> + From<Bytes>,
    ResB: Body<Data = Bytes> + Unpin,
{
    // Sent even at a target known to speak only 2026-07-28: the runtime session its answer
    // names (a new one per MCP session with `RuntimeSessions::PerMcpSession`) is the bridged
    // session's from then on.
    let (parts, body) = request.into_parts();
    let answer = inner.call(Request::from_parts(parts.clone(), body)).await?;
    let (head, peeked) = Peeked::of(answer).await;
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let refusal = peeked.answer(&id);
    if refused(&head, refusal.as_ref()) {
        // The direct path failed: a server that speaks only 2026-07-28 says so in its
        // `server/discover`, and then the client is answered from it; else the refusal is
        // delivered as it came.
        let runtime_session = head.headers().get(RUNTIME_SESSION).cloned();
        let mut parts = parts;
        if let Some(session) = &runtime_session {
            parts.headers.insert(RUNTIME_SESSION, session.clone());
        }
        if let Some(answer) = bridged(&mut inner, &parts, &message, layer, runtime_session).await {
            return Ok(answer);
        }
        if let Some(error) = both_versions(&message, refusal.as_ref()) {
            return Ok(local(head.status(), Some(&error)));
        }
    }
    Ok(head.map(|()| BridgeBody::server(peeked.into_body())))
}

/// The refusal of an `initialize` by a server that names only versions of 2026-07-28 or later
/// (-32022, `data.supported`), where the bridge could not reach its `server/discover`: the
/// server's error, its message saying both versions, the server's own error in `data.server`.
/// `None` for any other refusal, delivered as it came.
fn both_versions(message: &Value, refusal: Option<&Value>) -> Option<Value> {
    let error = refusal?.get("error")?;
    let supported: Vec<&str> = error
        .pointer("/data/supported")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if error.get("code")? != -32022
        || supported.is_empty()
        || !supported.iter().copied().all(protocol::is_stateless)
    {
        return None;
    }
    let client = message["params"]["protocolVersion"]
        .as_str()
        .unwrap_or("of the initialize era");
    let text = format!(
        "the client speaks MCP {client}, and the server only {}; the bridge between them could \
         not reach the server's server/discover",
        supported.join(", ")
    );
    Some(
        json!({"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32022,
        "message": text, "data": {"client": client, "supported": supported, "server": error}}}),
    )
}

/// Whether an answer to `initialize` refused it, in a way a server of another era refuses:
/// not a success, not an authentication or authorization error (401, 403: never "another
/// era"), and not one of AgentCore's own in either form (its error table, `contract`).
fn refused(head: &Response<()>, answer: Option<&Value>) -> bool {
    let status = head.status();
    let platform = crate::contract::classify_head(status, head.headers()).is_some()
        || answer.is_some_and(|a| crate::contract::classify_json_rpc(a).is_some());
    if platform || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return false;
    }
    !status.is_success() || answer.is_some_and(|a| a.get("error").is_some())
}

/// The answer to the client's `initialize` from the server's `server/discover`, in a session
/// of the bridge's own: `None` when the server does not speak 2026-07-28 either.
async fn bridged<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    inner: &mut S,
    parts: &http::request::Parts,
    message: &Value,
    layer: &ProtocolBridgeLayer,
    runtime_session: Option<HeaderValue>,
) -> Option<Response<BridgeBody<ResB>>> {
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let client = Client {
        version: client_version(&params),
        info: params.get("clientInfo").cloned().unwrap_or(json!({})),
        capabilities: params.get("capabilities").cloned().unwrap_or(json!({})),
        runtime_session,
    };
    let mut meta = own_meta(client.capabilities.clone());
    meta["io.modelcontextprotocol/clientInfo"] = client.info.clone();
    let discover = json!({"jsonrpc": "2.0", "id": DISCOVER_ID, "method": "server/discover",
        "params": {"_meta": meta}});
    let mut request = modern_post(parts, &discover, None);
    let record = AttemptRecord::new();
    request.extensions_mut().insert(record.clone());
    request.extensions_mut().insert(ReplayOverride::Replayable);
    let answer = ask(inner, request, DISCOVER_ID, layer.discover_timeout).await;
    let result = answer.ok()?.get("result").cloned().filter(speaks_2026)?;
    layer.learn_modern_only(&client.version);
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let initialized =
        json!({"jsonrpc": "2.0", "id": id, "result": initialize_result(&result, &client)});
    let session = layer.sessions.open(client);
    let mut answer = local(StatusCode::OK, Some(&initialized));
    if let Ok(value) = HeaderValue::from_str(&session) {
        answer
            .headers_mut()
            .insert(crate::contract::MCP_SESSION_ID, value);
    }
    answer.extensions_mut().insert(record);
    Some(answer)
}

/// The version the client asked for, when the bridge speaks it (a version of the `initialize`
/// era); else the newest of that era.
fn client_version(params: &Value) -> String {
    params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .filter(|v| protocol::KNOWN_VERSIONS.contains(v) && !protocol::is_stateless(v))
        .unwrap_or(protocol::LATEST_WITH_INITIALIZE)
        .to_owned()
}

/// Whether a `server/discover` result names a version of 2026-07-28 or later among those the
/// server speaks.
fn speaks_2026(result: &Value) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| {
            v.iter()
                .filter_map(Value::as_str)
                .any(protocol::is_stateless)
        })
}

/// An `InitializeResult` from a `DiscoverResult`: the client's own version agreed, the
/// server's capabilities, information and instructions.
fn initialize_result(discovered: &Value, client: &Client) -> Value {
    let info = discovered
        .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
        .cloned()
        .unwrap_or_else(|| json!({"name": "unknown", "version": "0"}));
    let mut result = json!({
        "protocolVersion": client.version,
        "capabilities": discovered.get("capabilities").cloned().unwrap_or(json!({})),
        "serverInfo": info,
    });
    if let Some(instructions) = discovered.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_answered_with_its_own_version_and_the_servers_description() {
        let discovered = json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "instructions": "be brief",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "2"}}});
        assert!(speaks_2026(&discovered));
        assert!(!speaks_2026(&json!({"supportedVersions": ["2025-11-25"]})));
        assert!(!speaks_2026(&json!({})));
        let client = Client {
            version: client_version(&json!({"protocolVersion": "2025-06-18"})),
            info: json!({}),
            capabilities: json!({}),
            runtime_session: None,
        };
        assert_eq!(
            initialize_result(&discovered, &client),
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "s", "version": "2"}, "instructions": "be brief"})
        );
        for odd in [
            json!({"protocolVersion": "2026-07-28"}),
            json!({"protocolVersion": 7}),
            json!({}),
        ] {
            assert_eq!(client_version(&odd), "2025-11-25", "{odd}");
        }
    }

    #[test]
    fn an_unbridgeable_refusal_names_both_versions_and_keeps_the_servers() {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18"}});
        let refusal = |supported: Value| {
            json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32022,
            "message": "Unsupported protocol version", "data": {"supported": supported}}})
        };
        let modern = refusal(json!(["2026-07-28"]));
        let error = both_versions(&initialize, Some(&modern)).unwrap();
        assert_eq!(error["id"], 0);
        assert_eq!(error["error"]["code"], -32022);
        assert_eq!(
            error["error"]["message"],
            "the client speaks MCP 2025-06-18, and the server only 2026-07-28; the bridge \
             between them could not reach the server's server/discover"
        );
        assert_eq!(error["error"]["data"]["server"], modern["error"]);
        // Any other refusal is the server's, as it came.
        assert_eq!(
            both_versions(
                &initialize,
                Some(&refusal(json!(["2025-11-25", "2026-07-28"])))
            ),
            None
        );
        assert_eq!(both_versions(&initialize, Some(&refusal(json!([])))), None);
        let other = json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32600, "message": "m"}});
        assert_eq!(both_versions(&initialize, Some(&other)), None);
        assert_eq!(both_versions(&initialize, None), None);
    }
}
