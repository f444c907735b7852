//! [`TaskPolling`]: one request through the layer.

use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Request, Response};
use http_body::Body;
use serde_json::Value;
use tokio::sync::mpsc;
use tower::{Service, ServiceExt};

use super::body::{JobBody, OnAbandon, TaskBody, Watch};
use super::future::{Boxed, ResponseFuture};
use super::job::{self, Client, Template};
use super::wire::{self, Task};
use super::{LAYER, TaskPollingLayer};
use crate::body::{PeekedBody, ReadToBytes};
use crate::error::BoxError;
use crate::record::{AttemptRecord, Decision, Verdict};
use crate::rule::{Assumption, By, Permission};

/// How much of a request body is read to tell a `tools/call`.
const REQUEST_LIMIT: usize = 4 << 20;

/// How much of an answer is read ahead to tell a task handle (one is a few hundred bytes).
const HANDLE_LIMIT: usize = 64 << 10;

/// What the record says of a call the server refused for want of the extension.
const MISSING: &str = "missing client capability io.modelcontextprotocol/tasks (-32021)";

/// The service [`TaskPollingLayer`] builds.
#[derive(Clone, Debug)]
pub struct TaskPolling<S> {
    pub(super) inner: S,
    pub(super) layer: TaskPollingLayer,
}

impl<S> TaskPolling<S> {
    inner_service_accessors!();
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for TaskPolling<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
    ResB::Error: Send,
{
    type Response = Response<TaskBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // tower's rule: the service polled ready is the one called; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if request.method() != Method::POST
            || !crate::jsonrpc::is_json_content_type(request.headers())
        {
            return ResponseFuture::direct(inner.call(request));
        }
        let future: Boxed<ResB, S::Error> = Box::pin(serve(inner, request, self.layer.clone()));
        ResponseFuture::read(future)
    }
}

/// A JSON POST: a `tools/call` the client did not declare the extension on is sent declaring
/// it (once the target is known to offer it) or sent again declaring it (after -32021), and a
/// task handle is answered by polling; a `server/discover` answer teaches whether the target
/// offers it; the rest passes as it is.
async fn serve<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    layer: TaskPollingLayer,
) -> Result<Response<TaskBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
    ResB::Error: Send,
{
    let message = read_message(&request).await;
    let method = message
        .as_ref()
        .and_then(|m| m.get("method"))
        .and_then(Value::as_str);
    match (method, message.as_ref()) {
        (Some("tools/call"), Some(message))
            if !wire::declares(message) && message.get("id").is_some() =>
        {
            let message = message.clone();
            tool_call(inner, request, message, layer).await
        }
        (Some("server/discover"), Some(message)) => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            let (answer, peeked) = read_ahead(inner.call(request).await?).await;
            if peeked.answer(&id).is_some_and(|a| wire::offers_tasks(&a)) {
                layer.learn_offered();
            }
            Ok(answer.map(|()| TaskBody::server(peeked.body)))
        }
        _ => {
            let answer = inner.call(request).await?;
            Ok(answer.map(|body| TaskBody::server(PeekedBody::new(body))))
        }
    }
}

/// A `tools/call` the client did not declare the extension on.
async fn tool_call<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    mut message: Value,
    layer: TaskPollingLayer,
) -> Result<Response<TaskBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
    ResB::Error: Send,
{
    let (mut parts, body) = request.into_parts();
    // Both sends write one record: the app's, or one the layer puts in the request.
    let record = parts
        .extensions
        .get_or_insert_with(AttemptRecord::new)
        .clone();
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let mut declared = layer.offered() && wire::declare(&mut message);
    let first = if declared {
        rebuild(&parts, &message)
    } else {
        Request::from_parts(parts.clone(), body)
    };
    let (mut head, mut body) = read_ahead(inner.call(first).await?).await;
    let mut answer = body.answer(&id);
    if !declared && answer.as_ref().is_some_and(wire::requires_tasks) && wire::declare(&mut message)
    {
        // -32021: the server ran nothing, for want of the declaration. Sent again with it.
        layer.learn_offered();
        let permission = Permission::new(By::Adapter, Assumption::RefusedBeforeExecution);
        let verdict = Verdict::SentAgain {
            cause: MISSING,
            wait: Duration::ZERO,
            retry_after: None,
        };
        record.decide(Decision::new(LAYER, verdict, Some(permission)));
        drop(body);
        inner.ready().await?;
        (head, body) = read_ahead(inner.call(rebuild(&parts, &message)).await?).await;
        answer = body.answer(&id);
        declared = true;
    }
    match answer.as_ref().and_then(wire::task_handle) {
        Some(task) if declared => Ok(take_over(inner, &parts, &message, head, task, &layer)),
        _ => Ok(head.map(|()| TaskBody::server(body.body))),
    }
}

/// The client's answer to a call the server made a task: the head now, the body written as the
/// task is polled.
fn take_over<S, ReqB, ResB>(
    inner: S,
    parts: &Parts,
    message: &Value,
    head: Response<()>,
    task: Task,
    layer: &TaskPollingLayer,
) -> Response<TaskBody<ResB>>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    let mut template = Template {
        uri: parts.uri.clone(),
        headers: parts.headers.clone(),
        meta: wire::poll_meta(message),
    };
    template.headers.remove(CONTENT_LENGTH);
    job::pin_runtime_session(&mut template.headers, head.headers());
    let event_stream = accepts_event_stream(&parts.headers);
    let (sink, events) = mpsc::unbounded_channel();
    let client = Client {
        id: message.get("id").cloned().unwrap_or(Value::Null),
        progress_token: message.pointer("/params/_meta/progressToken").cloned(),
        event_stream,
        sink,
    };
    tracing::debug!(layer = LAYER, task = %task.id, "the call became a task; polling it");
    let watch = Watch::default();
    let driver = Box::pin(job::run(
        inner.clone(),
        template.clone(),
        task,
        client,
        layer.limits,
        watch.clone(),
    ));
    let timeout = layer.limits.poll_timeout;
    let on_abandon: OnAbandon = Box::new(move |task| abandon(inner, template, task, timeout));
    let (mut parts, ()) = head.into_parts();
    parts.status = http::StatusCode::OK;
    parts.headers.remove(CONTENT_LENGTH);
    let content_type = if event_stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    let job = JobBody::new(driver, events, watch, on_abandon);
    Response::from_parts(parts, TaskBody::task(job))
}

/// A task whose answer the client dropped before it ended: `tasks/cancel`, sent on the tokio
/// runtime the drop happened on (none: nothing is sent, and the server's TTL ends the task).
fn abandon<S, ReqB, ResB>(mut inner: S, template: Template, task: String, timeout: Duration)
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move { job::cancel(&mut inner, &template, &task, timeout).await });
        }
        Err(_) => tracing::debug!(layer = LAYER, task, "no runtime to send tasks/cancel on"),
    }
}

/// The request with `message` as its body.
fn rebuild<ReqB: From<Bytes>>(parts: &Parts, message: &Value) -> Request<ReqB> {
    let bytes = Bytes::from(serde_json::to_vec(message).unwrap_or_default());
    let mut parts = parts.clone();
    parts.headers.remove(CONTENT_LENGTH);
    Request::from_parts(parts, ReqB::from(bytes))
}

/// The request's one JSON-RPC message, when its body holds a `tools/call` or a
/// `server/discover` (a clone of the body is read; other bodies are not parsed).
async fn read_message<ReqB>(request: &Request<ReqB>) -> Option<Value>
where
    ReqB: Body<Data = Bytes> + Clone,
{
    let bytes = ReadToBytes::new(request.body().clone(), REQUEST_LIMIT)
        .await
        .ok()?;
    let interesting = [&b"tools/call"[..], b"server/discover"]
        .iter()
        .any(|method| memchr::memmem::find(&bytes, method).is_some());
    if !interesting {
        return None;
    }
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(Value::is_object)
}

/// The answer's head, and its body with its first bytes read: the whole of a small JSON
/// answer, or an event stream's first event (or comment) — a task handle comes alone, and
/// whatever else comes first (progress, a comment that says the server is alive) is the
/// client's to read at once.
async fn read_ahead<B>(answer: Response<B>) -> (Response<()>, Peeked<B>)
where
    B: Body<Data = Bytes> + Unpin,
{
    let (head, body) = answer.into_parts();
    let mut body = PeekedBody::new(body);
    let stream = crate::jsonrpc::media_type_is(&head.headers, "text/event-stream");
    if stream || crate::jsonrpc::is_json_content_type(&head.headers) {
        std::future::poll_fn(|cx| {
            body.poll_read_ahead(cx, HANDLE_LIMIT, |held| !stream || !has_block(held))
        })
        .await;
    }
    (Response::from_parts(head, ()), Peeked { body, stream })
}

/// An answer's body with its first bytes read ahead.
struct Peeked<B: Body> {
    body: PeekedBody<B>,
    stream: bool,
}

impl<B: Body<Data = Bytes>> Peeked<B> {
    /// The message answering `id` among what was read: in a JSON answer read whole, or in the
    /// complete events read of an event stream.
    fn answer(&self, id: &Value) -> Option<Value> {
        (self.stream || self.body.is_complete())
            .then(|| wire::answer_in(&self.body.held_bytes(), id, &mut Vec::new()))
            .flatten()
    }
}

/// Whether an event stream's bytes hold a complete block (an event, or a comment).
fn has_block(held: &[u8]) -> bool {
    memchr::memmem::find(held, b"\n\n").is_some()
        || memchr::memmem::find(held, b"\r\n\r\n").is_some()
}

/// Whether the client reads an event stream (`Accept` names `text/event-stream`).
fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}
