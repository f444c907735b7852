//! A request of a session the bridge opened: sent to the server as MCP 2026-07-28 writes it —
//! the client's version, information and capabilities in `_meta`, the revision's headers, no
//! MCP session — or answered by the bridge where the revision has nothing to send it to
//! (`ping`, a notification, a response).

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use serde_json::{Map, Value, json};

use super::local::local;
use super::sessions::Client;
use super::{BridgeBody, ProtocolBridgeLayer, ask};
use crate::exchange::{Peeked, modern_post};
use crate::protocol;
use crate::sends::Sends;

/// A POST of a bridged session, its one JSON-RPC `message`.
pub(super) async fn post<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    mut message: Value,
    client: &Client,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Clone + Send + 'static,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
{
    let method = match (
        message.get("method").and_then(Value::as_str),
        message.get("id"),
    ) {
        // The revision has no `ping`: the bridge is the server the client pings.
        (Some("ping"), Some(id)) => {
            let pong = json!({"jsonrpc": "2.0", "id": id, "result": {}});
            return Ok(local(StatusCode::OK, Some(&pong)));
        }
        (Some(method), Some(_)) => method.to_owned(),
        // The client's response to a request of the server's the bridge put to it.
        (None, Some(Value::String(id))) if id.starts_with(ask::INPUT_PREFIX) => {
            layer.awaited.deliver(id, message.clone());
            return Ok(local(StatusCode::ACCEPTED, None));
        }
        // A notification (`initialized`, `cancelled`, …) or another response: the revision
        // posts none over HTTP.
        _ => return Ok(local(StatusCode::ACCEPTED, None)),
    };
    with_client_meta(&mut message, client);
    let (parts, _) = request.into_parts();
    let params = layer.param_headers();
    let mut upstream = modern_post(&parts, &message, Some(&params));
    *upstream.extensions_mut() = parts.extensions.clone();
    client.name_runtime_session(upstream.headers_mut());
    let asked_ahead = crate::exchange::accepts_event_stream(&parts.headers);
    // The service polled ready sends the request; a clone, readied when it is used, sends it
    // again with the client's answers when the server asks for them.
    let again = inner.clone();
    let answer = inner.call(upstream).await?;
    if method != "tools/list" && !asked_ahead {
        return Ok(answer.map(|body| BridgeBody::server(crate::body::PeekedBody::new(body))));
    }
    let (head, peeked) = Peeked::of(answer).await;
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let answered = peeked.answer(&id);
    if let Some(answered) = answered.filter(|a| asks_2xx(&head, a)) {
        // The server asks the user: put to the client on the answer's stream.
        let (client, layer) = (client.clone(), layer.clone());
        return Ok(ask::relay(again, parts, message, answered, client, layer));
    }
    if method == "tools/list"
        && let Some(result) = peeked.answer(&id).and_then(|a| a.get("result").cloned())
    {
        // A listing: the tools' `x-mcp-header` annotations say which `Mcp-Param-*` headers
        // their calls carry.
        layer.learn_param_headers(&result);
    }
    Ok(head.map(|()| BridgeBody::server(peeked.into_body())))
}

/// Whether a successful answer asks the user (an `InputRequiredResult`).
fn asks_2xx(head: &Response<()>, answer: &Value) -> bool {
    head.status().is_success() && ask::asks(answer)
}

/// Puts the 2026-07-28 `_meta` keys in `message`: the revision, the client's information and
/// capabilities as its `initialize` gave them — what the request says of its own capabilities
/// (an extension a layer above declared) wins.
pub(super) fn with_client_meta(message: &mut Value, client: &Client) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    let params = object.entry("params").or_insert_with(|| json!({}));
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    meta.insert(
        protocol::PROTOCOL_VERSION_META.to_owned(),
        json!(protocol::LATEST),
    );
    meta.entry("io.modelcontextprotocol/clientInfo")
        .or_insert_with(|| client.info.clone());
    let capabilities = meta
        .entry("io.modelcontextprotocol/clientCapabilities")
        .or_insert_with(|| json!({}));
    if let (Some(own), Some(given)) = (
        capabilities.as_object_mut(),
        client.capabilities.as_object(),
    ) {
        merge_under(own, given);
    }
}

/// Adds to `own` what `given` has that it lacks, object by object.
fn merge_under(own: &mut Map<String, Value>, given: &Map<String, Value>) {
    for (key, value) in given {
        match (own.get_mut(key), value) {
            (Some(Value::Object(own)), Value::Object(given)) => merge_under(own, given),
            (Some(_), _) => {}
            (None, value) => {
                own.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_the_clients_meta_and_keeps_what_it_declared() {
        let client = Client {
            version: "2025-11-25".into(),
            info: json!({"name": "c", "version": "1"}),
            capabilities: json!({"sampling": {}, "extensions": {"x": {"a": 1}}}),
            runtime_session: None,
        };
        let mut call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "t", "_meta": {"progressToken": 9, "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}});
        with_client_meta(&mut call, &client);
        assert_eq!(
            call["params"]["_meta"],
            json!({"progressToken": 9,
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"sampling": {},
                    "extensions": {"io.modelcontextprotocol/tasks": {}, "x": {"a": 1}}}})
        );
        let mut bare = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
        with_client_meta(&mut bare, &client);
        assert_eq!(
            bare["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        let mut odd = json!({"jsonrpc": "2.0", "id": 5, "method": "x", "params": [1]});
        with_client_meta(&mut odd, &client);
        assert_eq!(odd["params"], json!([1]));
    }
}
