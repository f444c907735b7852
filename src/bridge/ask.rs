//! A 2026-07-28 server's `InputRequiredResult` (MCP's multi round-trip requests) to a bridged
//! client of the `initialize` era, which knows only the server's requests on an answer's event
//! stream: each of the server's `inputRequests` is put to the client so (`elicitation/create`,
//! …, under an id of the bridge's), its response — POSTed in its session, as MCP says, and taken
//! by the bridge — gathered, and the request sent again with the `inputResponses` and the
//! server's `requestState`, until the server answers it; that answer ends the stream.
//!
//! An elicitation the client answers with an error is sent as `{"action": "cancel"}`; any other
//! request it refuses ends the call with an error. While the client is asked, the stream says it
//! is alive (a comment every 15 s).

use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use http_body::Body;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::local::event_stream;
use super::sessions::Client;
use super::{BridgeBody, ProtocolBridgeLayer};
use crate::exchange::{answer_in, exchange, modern_post};
use crate::sends::Sends;

/// What every id of a request the bridge puts to a client starts with.
pub(super) const INPUT_PREFIX: &str = "agentcore-tower/bridge/input/";

/// How long the stream may say nothing while the client is asked.
const ALIVE: Duration = Duration::from_secs(15);

/// How long the request sent again with the client's answers may take (the call's own deadline,
/// outside the bridge, bounds it first).
const RESEND_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Whether a server's answer asks the client for input.
pub(super) fn asks(answer: &Value) -> bool {
    answer.pointer("/result/resultType").and_then(Value::as_str) == Some("input_required")
}

/// The client's answer: an event stream the bridge writes while it asks the client and sends
/// the request (`message`, as the server reads it) again.
pub(super) fn relay<S, ReqB, ResB>(
    inner: S,
    parts: Parts,
    message: Value,
    first: Value,
    client: Client,
    layer: ProtocolBridgeLayer,
) -> Response<BridgeBody<ResB>>
where
    S: Sends<ReqB, ResB, Future: Send> + Send + 'static,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    event_stream(|sink| drive(inner, parts, message, first, client, layer, sink))
}

/// Writes one message on the client's stream.
fn write(sink: &mpsc::UnboundedSender<Bytes>, message: &Value) {
    let _ = sink.send(super::events::event(message));
}

async fn drive<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    mut inner: S,
    parts: Parts,
    mut message: Value,
    mut answer: Value,
    client: Client,
    layer: ProtocolBridgeLayer,
    sink: mpsc::UnboundedSender<Bytes>,
) {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    while asks(&answer) {
        let result = &answer["result"];
        let responses = match gather(result, &layer, &sink).await {
            Ok(responses) => responses,
            Err(error) => {
                return write(&sink, &json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
        };
        message["params"]["inputResponses"] = Value::Object(responses);
        if let Some(state) = result.get("requestState").filter(|s| !s.is_null()) {
            message["params"]["requestState"] = state.clone();
        }
        let mut again = modern_post(&parts, &message, Some(&layer.param_headers()));
        client.name_runtime_session(again.headers_mut());
        answer = match exchange(&mut inner, again, RESEND_LIMIT).await {
            Ok((_, body)) => answer_in(&body, &id, &mut Vec::new()).unwrap_or_else(|| {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
                    "message": "the server's answer to the request sent again held no answer to it"}})
            }),
            Err(why) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
                "message": format!("the request sent again with the client's answers failed: {why}")}}),
        };
    }
    write(&sink, &answer);
}

/// Puts each of the server's `inputRequests` to the client and gathers its responses, by key;
/// an error for the call when it refuses one that is no elicitation.
async fn gather(
    result: &Value,
    layer: &ProtocolBridgeLayer,
    sink: &mpsc::UnboundedSender<Bytes>,
) -> Result<Map<String, Value>, Value> {
    let requests = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let round = uuid::Uuid::new_v4().simple().to_string();
    let mut asked = Vec::new();
    for (key, request) in &requests {
        let id = format!("{INPUT_PREFIX}{round}/{key}");
        let response = layer.awaited.response_to(&id);
        let method = request.get("method").cloned().unwrap_or(Value::Null);
        let mut put = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = request.get("params") {
            put["params"] = params.clone();
        }
        write(sink, &put);
        asked.push((key.clone(), id, method, response));
    }
    let mut responses = Map::new();
    for (key, id, method, mut response) in asked {
        let answered = loop {
            match tokio::time::timeout(ALIVE, &mut response).await {
                Ok(answered) => break answered.ok(),
                Err(_) => {
                    let _ = sink.send(Bytes::from_static(b": waiting for the client's answer\n\n"));
                }
            }
        };
        layer.awaited.forget(&id);
        match answered.as_ref().and_then(|r| r.get("result")) {
            Some(result) => {
                responses.insert(key, result.clone());
            }
            None if method == "elicitation/create" => {
                responses.insert(key, json!({"action": "cancel"}));
            }
            None => {
                let error = answered.and_then(|r| r.get("error").cloned());
                return Err(json!({"code": -32603,
                    "message": format!("the client refused the server's {method} ({key})"),
                    "data": {"error": error}}));
            }
        }
    }
    Ok(responses)
}
