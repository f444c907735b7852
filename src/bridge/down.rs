//! A client of MCP 2026-07-28 at a server of the `initialize` era: its `server/discover`
//! refused in a legacy server's way, the bridge opens one MCP session itself (`initialize`,
//! `notifications/initialized`) and answers the discovery from it; every later request of the
//! revision is sent in that session, its `_meta` keys of the revision taken out, and its
//! answers' results given the `resultType` the revision reads.

use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body;
use serde_json::{Value, json};
use tower::{Service, ServiceExt};

use super::events::EventReader;
use super::legacy::{LegacySession, legacy_post, open};
use super::local::local;
use super::round_trip::{self, Call};
use super::{BridgeBody, ProtocolBridgeLayer};
use crate::body::{PeekedBody, ReadToBytes};
use crate::error::BoxError;
use crate::exchange::Peeked;
use crate::protocol;
use crate::sends::Sends;

/// How much of a request body is read to tell what it is.
pub(super) const REQUEST_LIMIT: usize = 4 << 20;

/// Whether a message is a request of MCP 2026-07-28 or later (its version in `_meta`).
pub(super) fn is_modern_request(message: &Value) -> bool {
    message.get("id").is_some()
        && protocol::version_in_meta(message).is_some_and(protocol::is_stateless)
}

/// The `_meta` keys of 2026-07-28 a server of the `initialize` era does not know.
const MODERN_META: [&str; 3] = [
    protocol::PROTOCOL_VERSION_META,
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
];

/// A request of a 2026-07-28 client (no MCP session; `message`, when it was read at once): sent
/// as it is, unless the target is known to be of the `initialize` era and the bridge is on.
/// Refused as such a server refuses one (read ahead when it is no success, or is a
/// `server/discover`; the request read only then, when it was not), it ran nothing: with the
/// bridge on, the bridge opens its session and answers a discovery from it, or sends the
/// request again in it; with the bridge off, the client hears both versions.
pub(super) async fn request<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    mut message: Option<Value>,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Clone + Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
{
    let (parts, body) = request.into_parts();
    if layer.bridges_down()
        && layer.knows_legacy_only()
        && let Some(message) = message.take()
    {
        return bridged(inner, parts, message, layer).await;
    }
    let kept = message.is_none().then(|| body.clone());
    let discovery = message
        .as_ref()
        .is_some_and(|m| m["method"] == "server/discover");
    let answer = inner.call(Request::from_parts(parts.clone(), body)).await?;
    if answer.status().is_success() && !discovery {
        return Ok(answer.map(|body| BridgeBody::server(PeekedBody::new(body))));
    }
    let message = match (message, kept) {
        (Some(message), _) => Some(message),
        (None, Some(kept)) => read(kept).await,
        (None, None) => None,
    };
    let Some(message) = message else {
        return Ok(answer.map(|body| BridgeBody::server(PeekedBody::new(body))));
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let (head, peeked) = Peeked::of(answer).await;
    // A server's error may name no id, or one of its own (refused before it read the request).
    let refusal = peeked
        .answer(&id)
        .or_else(|| peeked.answer(&Value::Null))
        .or_else(|| peeked.error());
    if !legacy_refusal(&head, refusal.as_ref(), discovery) {
        return Ok(head.map(|()| BridgeBody::server(peeked.into_body())));
    }
    if !layer.bridges_down() {
        return Ok(both_versions(&id, head.status(), refusal));
    }
    if open(&mut inner, &parts, &message, layer).await.is_none() {
        return Ok(head.map(|()| BridgeBody::server(peeked.into_body())));
    }
    drop(peeked);
    inner.ready().await?;
    bridged(inner, parts, message, layer).await
}

/// A request's body read and parsed, when it is a request of 2026-07-28.
async fn read<B: Body<Data = Bytes>>(body: B) -> Option<Value> {
    let bytes = ReadToBytes::new(body, REQUEST_LIMIT).await.ok()?;
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(is_modern_request)
}

/// A request of a 2026-07-28 client at a target of the `initialize` era: a discovery answered
/// from the bridge's session, any other request sent in it.
async fn bridged<S, ReqB, ResB>(
    mut inner: S,
    parts: Parts,
    message: Value,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Clone + Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
{
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(session) = open(&mut inner, &parts, &message, layer).await else {
        let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
            "message": format!("the server speaks only MCP's initialize era (up to {}), and no \
                session with it could be opened", protocol::LATEST_WITH_INITIALIZE)}});
        return Ok(local(StatusCode::OK, Some(&error)));
    };
    if message["method"] == "server/discover" {
        return Ok(discovered(&id, &session));
    }
    if round_trip::resumes(&message) {
        return round_trip::resume(inner, parts, message, layer).await;
    }
    carry(inner, parts, message, session, layer).await
}

/// The refusal of a 2026-07-28 client's request by a server of the `initialize` era, where
/// the bridge is off: the server's error, its message saying both versions and how to
/// bridge them, the server's own error in `data.server`.
fn both_versions<B: Body>(
    id: &Value,
    status: StatusCode,
    refusal: Option<Value>,
) -> Response<BridgeBody<B>> {
    let server = refusal.and_then(|r| r.get("error").cloned());
    let said = server
        .as_ref()
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let code = server
        .as_ref()
        .and_then(|e| e.get("code"))
        .and_then(Value::as_i64)
        .unwrap_or(-32600);
    let message = format!(
        "the client speaks MCP {}, and the server only the initialize era (up to {}){said}; \
         a bridge between them is off (the proxy's --bridge-modern-clients)",
        protocol::LATEST,
        protocol::LATEST_WITH_INITIALIZE
    );
    let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message,
        "data": {"client": protocol::LATEST, "server": server}}});
    local(status, Some(&error))
}

/// Whether an answer to a 2026-07-28 request is a legacy server's refusal of its era. Never
/// an authentication error (401, 403: never "legacy") nor one of AgentCore's own. For a
/// `server/discover` (MCP 2026-07-28's rule for telling a server's era): any error that is no
/// recognised error of 2026-07-28 (-32020 for its headers, -32021 for a capability, -32602 for
/// its `_meta`, -32022 naming a version of the revision). For any other request, only what the
/// SDKs' servers of the `initialize` era answer a request of another version before reading
/// it: HTTP 400, -32000 or -32600, about the protocol version or the MCP session.
fn legacy_refusal(head: &Response<()>, answer: Option<&Value>, discovery: bool) -> bool {
    let status = head.status();
    let platform = crate::contract::classify_head(status, head.headers()).is_some()
        || answer.is_some_and(|a| crate::contract::classify_json_rpc(a).is_some());
    if platform || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return false;
    }
    let error = answer.and_then(|a| a.get("error"));
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
    if !discovery {
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        return status == StatusCode::BAD_REQUEST
            && matches!(code, Some(-32000 | -32600))
            && (message.contains("version") || message.contains("session"));
    }
    let modern = match code {
        Some(-32021 | -32020 | -32602) => true,
        Some(-32022) => error
            .and_then(|e| e.pointer("/data/supported"))
            .and_then(Value::as_array)
            .is_some_and(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .any(protocol::is_stateless)
            }),
        _ => false,
    };
    !modern && (!status.is_success() || error.is_some() || answer.is_none())
}

/// The answer to the client's `server/discover`, from the session's `initialize` result.
fn discovered<B: Body>(id: &Value, session: &LegacySession) -> Response<BridgeBody<B>> {
    let result = &session.result;
    let mut discovered = json!({
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
        "supportedVersions": [protocol::LATEST],
        "capabilities": result.get("capabilities").cloned().unwrap_or(json!({})),
        "_meta": {"io.modelcontextprotocol/serverInfo":
            result.get("serverInfo").cloned().unwrap_or(json!({}))},
    });
    if let Some(instructions) = result.get("instructions") {
        discovered["instructions"] = instructions.clone();
    }
    local(
        StatusCode::OK,
        Some(&json!({"jsonrpc": "2.0", "id": id, "result": discovered})),
    )
}

/// A 2026-07-28 request sent in the bridge's `session` (opened again, once, when the server
/// no longer knows it: HTTP 404, nothing ran), its answer's results typed; an event stream
/// read by the bridge, for the server's requests on it.
async fn carry<S, ReqB, ResB>(
    mut inner: S,
    parts: Parts,
    message: Value,
    mut session: LegacySession,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Clone + Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
{
    let mut legacy_message = message.clone();
    without_modern_meta(&mut legacy_message);
    let mut answer = send(&mut inner, &parts, &legacy_message, &session).await?;
    if answer.status() == StatusCode::NOT_FOUND && session.id.is_some() {
        layer.legacy.forget(&session).await;
        let Some(opened) = open(&mut inner, &parts, &message, layer).await else {
            return Ok(answer.map(|body| BridgeBody::server(PeekedBody::new(body))));
        };
        session = opened;
        answer = send(&mut inner, &parts, &legacy_message, &session).await?;
    }
    let cacheable = message["method"]
        .as_str()
        .is_some_and(super::typed::is_cacheable);
    let stream = crate::jsonrpc::media_type_is(answer.headers(), "text/event-stream");
    if let (true, Some(id)) = (stream, message.get("id")) {
        let call = Call {
            client_id: id.clone(),
            server_id: id.clone(),
            cacheable,
            session,
        };
        let reader = EventReader::new(answer.into_body());
        return Ok(round_trip::relay(inner, parts, reader, call, layer.clone()));
    }
    // The typed body is longer than the server's.
    answer.headers_mut().remove(CONTENT_LENGTH);
    Ok(answer.map(|body| BridgeBody::typed(PeekedBody::new(body), stream, cacheable)))
}

/// Sends `message` in `session`, with the client's head and extensions.
async fn send<S, ReqB, ResB>(
    inner: &mut S,
    parts: &Parts,
    message: &Value,
    session: &LegacySession,
) -> Result<Response<ResB>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ReqB: From<Bytes>,
{
    let mut legacy = legacy_post(parts, message, Some(session));
    *legacy.extensions_mut() = parts.extensions.clone();
    inner.ready().await?;
    inner.call(legacy).await
}

/// Takes the revision's own `_meta` keys out of a request (and `_meta` itself, when nothing
/// else is left in it).
fn without_modern_meta(message: &mut Value) {
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    for key in MODERN_META {
        meta.remove(key);
    }
    if meta.is_empty() {
        params.remove("_meta");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16) -> Response<()> {
        let mut head = Response::new(());
        *head.status_mut() = StatusCode::from_u16(status).unwrap();
        head
    }

    #[test]
    fn only_a_legacy_servers_refusal_of_discover_is_taken_for_its_era() {
        let error = |code: i64, data: Value| json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m", "data": data}});
        // Legacy: an unknown method, a version it does not speak, a session it requires.
        assert!(legacy_refusal(
            &head(200),
            Some(&error(-32601, json!(null))),
            true
        ));
        assert!(legacy_refusal(
            &head(400),
            Some(&error(-32000, json!(null))),
            true
        ));
        assert!(legacy_refusal(&head(400), None, true));
        assert!(legacy_refusal(&head(404), None, true));
        // Modern: its header check, its `_meta` check, a version of the revision it names.
        assert!(!legacy_refusal(
            &head(400),
            Some(&error(-32020, json!(null))),
            true
        ));
        assert!(!legacy_refusal(
            &head(400),
            Some(&error(-32602, json!(null))),
            true
        ));
        let supported = json!({"supported": ["2026-07-28"]});
        assert!(!legacy_refusal(
            &head(400),
            Some(&error(-32022, supported)),
            true
        ));
        assert!(legacy_refusal(
            &head(400),
            Some(&error(-32022, json!({"supported": ["2025-11-25"]}))),
            true
        ));
        // Never: authentication, AgentCore's own, a success.
        assert!(!legacy_refusal(&head(401), None, true));
        assert!(!legacy_refusal(&head(403), None, true));
        let result = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert!(!legacy_refusal(&head(200), Some(&result), true));
        // Another request: only a transport's refusal of its version or session.
        let version = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
            "message": "Bad Request: Unsupported protocol version: 2026-07-28"}});
        assert!(legacy_refusal(&head(400), Some(&version), false));
        let capability = error(-32021, json!(null));
        assert!(!legacy_refusal(&head(400), Some(&capability), false));
        assert!(!legacy_refusal(
            &head(404),
            Some(&error(-32601, json!(null))),
            false
        ));
        assert!(!legacy_refusal(&head(400), None, false));
    }

    #[test]
    fn the_revisions_meta_is_taken_out_and_the_rest_kept() {
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t", "_meta": {"progressToken": 3,
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        without_modern_meta(&mut call);
        assert_eq!(
            call["params"],
            json!({"name": "t", "_meta": {"progressToken": 3}})
        );
        let mut bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        without_modern_meta(&mut bare);
        assert_eq!(bare["params"], json!({}));
    }
}
