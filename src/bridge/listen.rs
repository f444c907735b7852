//! The server's own stream, for a bridged client of the `initialize` era that opens it (an
//! HTTP GET in its session): MCP 2026-07-28 has no such stream, and carries what a server
//! tells unasked on a `subscriptions/listen` instead. The bridge opens one for the client —
//! the lists' changes, in its name — and passes each notification on the client's stream as
//! it comes, less the listen's own acknowledgement; the stream ends when the server ends the
//! listen, and the listen when the client goes. A server that takes no listen leaves the
//! client's GET answered as MCP says when there is no stream: HTTP 405.

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower::Service;

use super::carry::with_client_meta;
use super::events::{EventReader, event};
use super::local::event_stream;
use super::local::local;
use super::sessions::Client;
use super::{BridgeBody, ProtocolBridgeLayer};
use crate::error::BoxError;
use crate::exchange::{accepts_event_stream, modern_post};

/// What every id of a listen the bridge opens starts with.
const LISTEN_PREFIX: &str = "agentcore-tower/bridge/listen/";

/// The client's GET of the server's stream, in a session of the bridge's.
pub(super) async fn open<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    client: &Client,
    layer: &ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ReqB: From<Bytes>,
    ResB: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    if !accepts_event_stream(request.headers()) {
        return Ok(local(StatusCode::METHOD_NOT_ALLOWED, None));
    }
    let id = format!("{LISTEN_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let mut listen = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"notifications": {
            "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}});
    with_client_meta(&mut listen, client);
    let (parts, _) = request.into_parts();
    let mut post = modern_post(&parts, &listen, Some(&layer.param_headers()));
    post.headers_mut().insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    *post.extensions_mut() = parts.extensions;
    client.name_runtime_session(post.headers_mut());
    let answer = inner.call(post).await?;
    let stream = crate::jsonrpc::media_type_is(answer.headers(), "text/event-stream");
    if !answer.status().is_success() || !stream {
        return Ok(local(StatusCode::METHOD_NOT_ALLOWED, None));
    }
    let reader = EventReader::new(answer.into_body());
    Ok(event_stream(|sink| relay(reader, Value::from(id), sink)))
}

/// Passes the listen's notifications on, until the server answers the listen (or its stream
/// ends).
async fn relay(mut stream: EventReader, id: Value, sink: mpsc::UnboundedSender<Bytes>) {
    while let Some(message) = stream.next().await {
        if message.get("id") == Some(&id) {
            return;
        }
        let method = message.get("method").and_then(Value::as_str);
        if message.get("id").is_none()
            && method.is_some_and(|m| m != "notifications/subscriptions/acknowledged")
            && sink.send(event(&message)).is_err()
        {
            return;
        }
    }
}
