//! A 2025 server's own requests on a call's event stream (an `elicitation/create`, a
//! `sampling/createMessage`, …), to a client of MCP 2026-07-28, which takes no request of a
//! server's: as the revision asks, a multi round-trip request. The call's answer to the client
//! is an `InputRequiredResult` — the server's request in `inputRequests`, a `requestState` of
//! the bridge's — while the server's stream is kept open, waiting; the client's call sent again
//! with that state and its `inputResponses` is not sent to the server: its response is posted
//! in the session, as MCP 2025 says, and the server's stream read on, to the call's answer (or
//! the next question).
//!
//! The server's `ping` is answered by the bridge; its notifications reach the client on the
//! call's stream as they came.

use bytes::Bytes;
use http::request::Parts;
use http::{Response, StatusCode};
use http_body::Body;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::events::{EventReader, event};
use super::legacy::{LegacySession, respond};
use super::local::event_stream;
use super::local::local;
use super::paused::{Paused, STATE_PREFIX};
use super::typed::type_result;
use super::{BridgeBody, ProtocolBridgeLayer};
use crate::sends::Sends;

/// A client's call as the bridge carries it in its session.
#[derive(Debug)]
pub(super) struct Call {
    /// The id the client's request has (the last one it sent).
    pub(super) client_id: Value,
    /// The id the server has the call by.
    pub(super) server_id: Value,
    /// Whether its result is one 2026-07-28 gives caching hints.
    pub(super) cacheable: bool,
    pub(super) session: LegacySession,
}

/// Whether a 2026-07-28 request is a call the bridge paused, sent again with the client's
/// responses (its `requestState` is the bridge's).
pub(super) fn resumes(message: &Value) -> bool {
    message
        .pointer("/params/requestState")
        .and_then(Value::as_str)
        .is_some_and(|state| state.starts_with(STATE_PREFIX))
}

/// The client's answer: an event stream of the server's, read on until it answers `call` or
/// asks the client something.
pub(super) fn relay<S, ReqB, ResB>(
    inner: S,
    parts: Parts,
    stream: EventReader,
    call: Call,
    layer: ProtocolBridgeLayer,
) -> Response<BridgeBody<ResB>>
where
    S: Sends<ReqB, ResB, Future: Send> + Send + 'static,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    event_stream(|sink| drive(inner, parts, stream, call, layer, sink))
}

async fn drive<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    mut inner: S,
    parts: Parts,
    mut stream: EventReader,
    call: Call,
    layer: ProtocolBridgeLayer,
    sink: mpsc::UnboundedSender<Bytes>,
) {
    let write = |message: &Value| {
        let _ = sink.send(event(message));
    };
    while let Some(mut message) = stream.next().await {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (method.as_deref(), message.get("id").cloned()) {
            (None, Some(id)) if id == call.server_id => {
                message["id"] = call.client_id.clone();
                type_result(&mut message, call.cacheable);
                return write(&message);
            }
            (Some("ping"), Some(id)) => {
                let pong = json!({"jsonrpc": "2.0", "id": id, "result": {}});
                let _ = respond(&mut inner, &parts, &pong, &call.session, &layer).await;
            }
            (Some(method), Some(id)) => {
                let asked = input_required(&message, method, id, stream, call, &layer);
                return write(&asked);
            }
            _ => write(&message),
        }
    }
    write(&failed(
        &call.client_id,
        "the server's stream ended without an answer to the call",
    ));
}

/// The answer that puts the server's request (`message`, of `method`, under `id`) to the
/// client, the call paused meanwhile.
fn input_required(
    message: &Value,
    method: &str,
    id: Value,
    stream: EventReader,
    call: Call,
    layer: &ProtocolBridgeLayer,
) -> Value {
    let key = match &id {
        Value::String(id) => id.clone(),
        other => other.to_string(),
    };
    let mut request = json!({"method": method});
    if let Some(params) = message.get("params") {
        request["params"] = params.clone();
    }
    let client_id = call.client_id.clone();
    let asked = (key.clone(), id, method.to_owned());
    let paused = Paused::new(stream, call.session, call.server_id, call.cacheable, asked);
    let state = layer.paused.park(paused);
    json!({"jsonrpc": "2.0", "id": client_id, "result": {
        "resultType": "input_required",
        "inputRequests": {key: request},
        "requestState": state,
    }})
}

/// A paused call sent again (`message`) with the client's responses: the response posted in
/// the call's session, and the server's stream read on.
pub(super) async fn resume<S, ReqB, ResB>(
    mut inner: S,
    parts: Parts,
    message: Value,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Send + 'static,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    let client_id = message.get("id").cloned().unwrap_or(Value::Null);
    let state = message["params"]["requestState"]
        .as_str()
        .unwrap_or_default();
    let Some(paused) = layer.paused.take(state) else {
        let expired = json!({"jsonrpc": "2.0", "id": client_id, "error": {"code": -32602,
            "message": "Invalid or expired requestState"}});
        return Ok(local(StatusCode::OK, Some(&expired)));
    };
    let response = response_to(&paused.asked, &message);
    if let Err(why) = respond(&mut inner, &parts, &response, &paused.session, layer).await {
        let message = format!("the server did not take the client's response: {why}");
        return Ok(local(StatusCode::OK, Some(&failed(&client_id, &message))));
    }
    let call = Call {
        client_id,
        server_id: paused.id,
        cacheable: paused.cacheable,
        session: paused.session,
    };
    Ok(relay(inner, parts, paused.stream, call, layer.clone()))
}

/// The client's response to the server's request `asked` (its key, id and method), from the
/// `inputResponses` of the call it sent again: an elicitation it did not answer is declined
/// as cancelled; any other request, refused.
fn response_to((key, id, method): &(String, Value, String), message: &Value) -> Value {
    let given = message
        .pointer("/params/inputResponses")
        .and_then(|responses| responses.get(key));
    match given {
        Some(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        None if method == "elicitation/create" => {
            json!({"jsonrpc": "2.0", "id": id, "result": {"action": "cancel"}})
        }
        None => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
            "message": format!("the client gave no response to {method}")}}),
    }
}

/// The bridge's error answer to the client's request `id`.
fn failed(id: &Value, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_response_goes_to_the_servers_request_by_its_id() {
        let asked = ("7".to_owned(), json!(7), "elicitation/create".to_owned());
        let again = json!({"id": 2, "params": {"requestState": "s",
            "inputResponses": {"7": {"action": "accept", "content": {"ok": true}}}}});
        assert_eq!(
            response_to(&asked, &again),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"ok": true}}})
        );
        let none = json!({"id": 2, "params": {"requestState": "s"}});
        assert_eq!(
            response_to(&asked, &none)["result"],
            json!({"action": "cancel"})
        );
        let sampling = (
            "s-1".to_owned(),
            json!("s-1"),
            "sampling/createMessage".to_owned(),
        );
        assert_eq!(response_to(&sampling, &none)["error"]["code"], -32603);
        assert!(resumes(
            &json!({"params": {"requestState": format!("{STATE_PREFIX}x")}})
        ));
        assert!(!resumes(&json!({"params": {"requestState": "theirs"}})));
    }
}
