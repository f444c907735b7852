//! The exchanges a layer makes or reads itself: the client's request read (a clone of its body),
//! a request of the layer's own sent through the layers below and its answer read, and the
//! JSON-RPC message that answers an id found in a JSON body or an event stream.

use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http::{HeaderName, HeaderValue, Method, Request, Response};
use http_body::Body;
use serde_json::Value;
use tower::ServiceExt;

use crate::body::{PeekedBody, ReadError, ReadToBytes};
use crate::error::BoxError;
use crate::protocol::{self, ParamHeaders};
use crate::sends::Sends;

/// How much of an answer to a layer's own request is read: a completed task carries a tool's
/// whole result.
const ANSWER_LIMIT: usize = 64 << 20;

/// Sends one request and reads the JSON-RPC message that answers it (JSON, or an event of an
/// event stream).
pub(crate) async fn ask<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
    id: &str,
    timeout: Duration,
) -> Result<Value, String>
where
    S: Sends<ReqB, ResB>,
    ResB: Body<Data = Bytes>,
{
    let (head, body) = exchange(service, request, timeout).await?;
    answer_in(&body, &Value::from(id), &mut Vec::new())
        .ok_or_else(|| format!("HTTP {} without an answer to {id}", head.status.as_u16()))
}

/// Sends one request and reads its answer whole (at most 64 MiB), within `timeout`: its head
/// and body.
pub(crate) async fn exchange<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
    timeout: Duration,
) -> Result<(http::response::Parts, Bytes), String>
where
    S: Sends<ReqB, ResB>,
    ResB: Body<Data = Bytes>,
{
    tokio::time::timeout(timeout, exchange_unbounded(service, request))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
}

async fn exchange_unbounded<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
) -> Result<(http::response::Parts, Bytes), String>
where
    S: Sends<ReqB, ResB>,
    ResB: Body<Data = Bytes>,
{
    let failed = |e: S::Error| crate::error::Error::from_service(e).to_string();
    service.ready().await.map_err(failed)?;
    let (head, body) = service.call(request).await.map_err(failed)?.into_parts();
    let body = ReadToBytes::new(body, ANSWER_LIMIT)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge => "an answer larger than 64 MiB".to_owned(),
            ReadError::Body(_) => "an answer that could not be read".to_owned(),
        })?;
    Ok((head, body))
}

/// A JSON-RPC message of an answer whose `id` is `id`: the answer itself when it is JSON, or
/// the `data` of one of its events when it is an event stream; the stream's other messages
/// (notifications, the server's requests) in `others`, in order.
pub(crate) fn answer_in(body: &[u8], id: &Value, others: &mut Vec<Value>) -> Option<Value> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return (value.get("id") == Some(id)).then_some(value);
    }
    let text = std::str::from_utf8(body).ok()?;
    let mut found = None;
    for event in events(text) {
        let Ok(message) = serde_json::from_str::<Value>(&event) else {
            continue;
        };
        if found.is_none() && message.get("id") == Some(id) && message.get("method").is_none() {
            found = Some(message);
        } else if found.is_none() {
            others.push(message);
        }
    }
    found
}

/// The `data` of each event of an event stream (its `data:` lines joined with `\n`).
pub(crate) fn events(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            events.extend(data.take());
        } else if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    events.extend(data);
    events
}

/// The request's one JSON-RPC message, when its body holds something the layer acts on (a
/// clone of the body is read; other bodies are not parsed).
pub(crate) async fn read_message<ReqB>(
    request: &Request<ReqB>,
    limit: usize,
    needles: &[&[u8]],
) -> Option<Value>
where
    ReqB: Body<Data = Bytes> + Clone,
{
    let bytes = ReadToBytes::new(request.body().clone(), limit).await.ok()?;
    needles
        .iter()
        .any(|needle| memchr::memmem::find(&bytes, needle).is_some())
        .then(|| serde_json::from_slice::<Value>(&bytes).ok())
        .flatten()
        .filter(Value::is_object)
}

/// How much of an answer is read ahead to tell what it is (a task handle, an error to
/// `initialize`: a few hundred bytes).
const AHEAD_LIMIT: usize = 64 << 10;

/// An answer's body with its first bytes read ahead.
pub(crate) struct Peeked<B: Body> {
    body: PeekedBody<B>,
    stream: bool,
}

impl<B> Peeked<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    /// The answer's head, and its body with its first bytes read: the whole of a small JSON
    /// answer, or an event stream's first event (or comment) — a task handle comes alone, and
    /// whatever else comes first (progress, a comment that says the server is alive) is the
    /// client's to read at once.
    pub(crate) async fn of(answer: Response<B>) -> (Response<()>, Peeked<B>) {
        let (head, body) = answer.into_parts();
        let mut body = PeekedBody::new(body);
        let stream = crate::jsonrpc::media_type_is(&head.headers, "text/event-stream");
        if stream || crate::jsonrpc::is_json_content_type(&head.headers) {
            std::future::poll_fn(|cx| {
                body.poll_read_ahead(cx, AHEAD_LIMIT, |held| !stream || !has_block(held))
            })
            .await;
        }
        (Response::from_parts(head, ()), Peeked { body, stream })
    }
}

impl<B: Body<Data = Bytes>> Peeked<B> {
    /// The message answering `id` among what was read: in a JSON answer read whole, or in the
    /// complete events read of an event stream.
    pub(crate) fn answer(&self, id: &Value) -> Option<Value> {
        (self.stream || self.body.is_complete())
            .then(|| answer_in(&self.body.held_bytes(), id, &mut Vec::new()))
            .flatten()
    }

    /// The JSON-RPC error of a JSON answer read whole, whatever id it names: a server may refuse
    /// a request it did not read under an id of its own (the Python SDK's `"server-error"`).
    pub(crate) fn error(&self) -> Option<Value> {
        if self.stream || !self.body.is_complete() {
            return None;
        }
        serde_json::from_slice::<Value>(&self.body.held_bytes())
            .ok()
            .filter(|answer| answer.get("error").is_some())
    }

    /// The body, as it came.
    pub(crate) fn into_body(self) -> PeekedBody<B> {
        self.body
    }
}

/// Whether an event stream's bytes hold a complete block (an event, or a comment).
fn has_block(held: &[u8]) -> bool {
    memchr::memmem::find(held, b"\n\n").is_some()
        || memchr::memmem::find(held, b"\r\n\r\n").is_some()
}

/// The `_meta` a layer's own 2026-07-28 request carries: the revision, the layer as the client,
/// and `capabilities`.
pub(crate) fn own_meta(capabilities: Value) -> Value {
    serde_json::json!({
        protocol::PROTOCOL_VERSION_META: protocol::LATEST,
        "io.modelcontextprotocol/clientInfo":
            {"name": "agentcore-tower", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// A 2026-07-28 POST of `message` with the head of a client's request of any era (its URI, its
/// credentials and headers of its own): no MCP session, the revision's version and standard
/// headers (`Mcp-Param-*` as `params` learned them).
pub(crate) fn modern_post<ReqB: From<Bytes>>(
    client: &Parts,
    message: &Value,
    params: Option<&ParamHeaders>,
) -> Request<ReqB> {
    let mut request = plain_post(client, message);
    let headers = request.headers_mut();
    headers.insert(
        crate::contract::MCP_PROTOCOL_VERSION,
        HeaderValue::from_static(protocol::LATEST),
    );
    headers.extend(protocol::request_headers(message, params));
    request
}

/// A POST of `message` with the head of a client's request, less what names an era, a session,
/// a method or a body: its `MCP-Protocol-Version`, `Mcp-Session-Id`, the standard headers of
/// 2026-07-28 (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) and `Content-Length`.
pub(crate) fn plain_post<ReqB: From<Bytes>>(client: &Parts, message: &Value) -> Request<ReqB> {
    let bytes = Bytes::from(serde_json::to_vec(message).unwrap_or_default());
    let mut request = Request::new(ReqB::from(bytes));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = client.uri.clone();
    let headers = request.headers_mut();
    headers.clone_from(&client.headers);
    let named: Vec<HeaderName> = headers
        .keys()
        .filter(|n| n.as_str().starts_with("mcp-param-"))
        .cloned()
        .chain([
            HeaderName::from_static("mcp-name"),
            HeaderName::from_static("mcp-method"),
            CONTENT_LENGTH,
            crate::contract::MCP_SESSION_ID,
            crate::contract::MCP_PROTOCOL_VERSION,
        ])
        .collect();
    for name in named {
        headers.remove(name);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_bytes_a_server_sends_make_the_reading_panic() {
        let pieces: [&[u8]; 12] = [
            b"data: ",
            b"data:",
            b"\n",
            b"\r\n",
            b"\n\n",
            b": c\n",
            b"{\"id\":\"p\"",
            b",\"result\":{\"taskId\":7,\"status\":[]}}",
            b"\xff",
            b"\"",
            b"event: x\n",
            b"}",
        ];
        let mut rng = fastrand::Rng::with_seed(39);
        let id = json!("p");
        for _ in 0..20_000 {
            let mut body = Vec::new();
            for _ in 0..rng.usize(0..24) {
                if rng.bool() {
                    body.extend_from_slice(pieces[rng.usize(..pieces.len())]);
                } else {
                    body.push(rng.u8(..));
                }
            }
            let mut others = Vec::new();
            if let Some(answer) = answer_in(&body, &id, &mut others) {
                assert_eq!(answer["id"], id);
            }
        }
    }

    #[test]
    fn the_answer_is_found_in_json_or_in_an_event_stream() {
        let id = json!("p-1");
        let mut others = Vec::new();
        let json_body = br#"{"jsonrpc":"2.0","id":"p-1","result":{}}"#;
        assert!(answer_in(json_body, &id, &mut others).is_some());
        let stream = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n: comment\r\nid: 3\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":\"p-1\",\"result\":{\"ok\":1}}\r\n\r\n";
        let found = answer_in(stream.as_bytes(), &id, &mut others).unwrap();
        assert_eq!(found["result"]["ok"], 1);
        assert_eq!(others.len(), 1);
        assert!(answer_in(b"\xff\xfe", &id, &mut others).is_none());
        assert!(answer_in(br#"{"id":"p-2","result":{}}"#, &id, &mut others).is_none());
    }
}

/// A future that writes what a body yields, and runs as the body is read.
pub(crate) type Driver = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A body a layer writes itself while it works: its driver runs as the body is read, and what
/// it writes is yielded in order. Nothing is spawned: reading the body drives it, and dropping
/// the body stops it.
pub(crate) struct Driven {
    driver: Option<Driver>,
    events: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
}

impl Driven {
    /// The body `driver` writes into `events` (the receiver of the sender it writes with).
    pub(crate) fn new(driver: Driver, events: tokio::sync::mpsc::UnboundedReceiver<Bytes>) -> Self {
        Self {
            driver: Some(driver),
            events,
        }
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        use std::task::Poll;
        loop {
            if let Poll::Ready(Some(bytes)) = self.events.poll_recv(cx) {
                return Poll::Ready(Some(Ok(http_body::Frame::data(bytes))));
            }
            let Some(driver) = self.driver.as_mut() else {
                return Poll::Ready(None);
            };
            match driver.as_mut().poll(cx) {
                // What it wrote last is still to be yielded.
                Poll::Ready(()) => self.driver = None,
                Poll::Pending => {
                    // It may have written before it waited.
                    return match self.events.poll_recv(cx) {
                        Poll::Ready(Some(bytes)) => {
                            Poll::Ready(Some(Ok(http_body::Frame::data(bytes))))
                        }
                        _ => Poll::Pending,
                    };
                }
            }
        }
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.driver.is_none() && self.events.is_empty()
    }
}

/// The responses a layer waits for from a client, by the id of the request it put to it.
#[derive(Default)]
pub(crate) struct Awaited(
    std::sync::Mutex<std::collections::HashMap<String, tokio::sync::oneshot::Sender<Value>>>,
);

impl Awaited {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, tokio::sync::oneshot::Sender<Value>>,
    > {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the client's response to the request the layer wrote with `id`.
    pub(crate) fn response_to(&self, id: &str) -> tokio::sync::oneshot::Receiver<Value> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.lock().insert(id.to_owned(), sender);
        receiver
    }

    /// Hands the client's response to whoever waits for it: whether someone did.
    pub(crate) fn deliver(&self, id: &str, response: Value) -> bool {
        self.lock()
            .remove(id)
            .is_some_and(|sender| sender.send(response).is_ok())
    }

    /// Forgets a request the layer no longer waits for.
    pub(crate) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    /// How many responses are awaited.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A layer's own answer: `status`, `body` (one JSON message, when `json`), and a record of no
/// attempt (nothing was sent for it).
pub(crate) fn own_answer<B>(status: http::StatusCode, body: B, json: bool) -> Response<B> {
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    if json {
        answer.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    answer
        .extensions_mut()
        .insert(crate::record::AttemptRecord::new());
    answer
}

/// Whether a client reads an event stream (`Accept` names `text/event-stream`).
pub(crate) fn accepts_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}
