//! A `tools/call` the client did not declare the extension on: sent declaring it (or sent
//! again declaring it, after -32021), and a task the server answers with taken over; and the
//! `tools/call` a 2026-07-28 client sends back with its input, which resumes a paused job.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderValue, Request, Response};
use http_body::Body;
use serde_json::Value;
use tokio::sync::mpsc;
use tower::ServiceExt;

use super::body::{JobBody, OnAbandon, TaskBody, Watch};
use super::client::Client;
use super::discover;
use super::input;
use super::job::{Job, JobState, Next};
use super::request::{self, Template};
use super::table::request_key;
use super::wire;
use super::{LAYER, TaskPollingLayer};
use crate::exchange::Peeked;
use crate::record::{AttemptRecord, Decision, Verdict};
use crate::rule::{Assumption, By, Permission};
use crate::sends::Sends;

/// What the record says of a call the server refused for want of the extension.
const MISSING: &str = "missing client capability io.modelcontextprotocol/tasks (-32021)";

/// The services the layer sends through.
pub(super) trait Below<ReqB, ResB>:
    Sends<ReqB, ResB, Error: Send + 'static, Future: Send + 'static> + Clone + Send + 'static
{
}

impl<T, ReqB, ResB> Below<ReqB, ResB> for T where
    T: Sends<ReqB, ResB, Error: Send + 'static, Future: Send + 'static> + Clone + Send + 'static
{
}

/// The request bodies the layer reads and writes.
pub(super) trait RequestBody:
    Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static
{
}

impl<T> RequestBody for T where T: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static {}

/// The answer bodies the layer reads ahead.
pub(super) trait ResponseBody:
    Body<Data = Bytes, Error: Send> + Unpin + Send + 'static
{
}

impl<T> ResponseBody for T where T: Body<Data = Bytes, Error: Send> + Unpin + Send + 'static {}

/// A `tools/call` the client did not declare the extension on.
pub(super) async fn tool_call<S: Below<ReqB, ResB>, ReqB: RequestBody, ResB: ResponseBody>(
    mut inner: S,
    request: Request<ReqB>,
    mut message: Value,
    layer: TaskPollingLayer,
) -> Result<Response<TaskBody<ResB>>, S::Error> {
    let (mut parts, body) = request.into_parts();
    // Both sends write one record: the app's, or one the layer puts in the request.
    let record = parts
        .extensions
        .get_or_insert_with(AttemptRecord::new)
        .clone();
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if layer.begin_discovery() {
        let timeout = layer.limits.poll_timeout;
        layer.learned(discover::probe(&mut inner, &parts, timeout).await);
        inner.ready().await?;
    }
    let mut declared = layer.offered() && wire::declare(&mut message);
    let first = if declared {
        rebuild(&parts, &message)
    } else {
        Request::from_parts(parts.clone(), body)
    };
    let (mut head, mut peeked) = Peeked::of(inner.call(first).await?).await;
    let mut answer = peeked.answer(&id);
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
        drop(peeked);
        inner.ready().await?;
        (head, peeked) = Peeked::of(inner.call(rebuild(&parts, &message)).await?).await;
        answer = peeked.answer(&id);
        declared = true;
    }
    match answer.as_ref().and_then(wire::task_handle) {
        Some(task) if declared => {
            tracing::debug!(layer = LAYER, task = %task.id, "the call became a task; polling it");
            let mut template = Template {
                uri: parts.uri.clone(),
                headers: parts.headers.clone(),
                meta: wire::poll_meta(&message),
            };
            template.headers.remove(CONTENT_LENGTH);
            request::pin_runtime_session(&mut template.headers, head.headers());
            let job = JobState::new(task, template, &layer.limits);
            Ok(start(inner, job, &parts, &message, head, &layer))
        }
        _ => Ok(head.map(|()| TaskBody::server(peeked.into_body()))),
    }
}

/// The `tools/call` a 2026-07-28 client sends back with its answers to the server's requests
/// and the layer's `requestState`: the answers go with `tasks/update`, and the job goes on,
/// answering this call.
pub(super) async fn resume<S: Below<ReqB, ResB>, ReqB: RequestBody, ResB: ResponseBody>(
    mut inner: S,
    request: Request<ReqB>,
    message: Value,
    state: &str,
    layer: TaskPollingLayer,
) -> Result<Response<TaskBody<ResB>>, S::Error> {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let Some(paused) = layer.table.resume(state) else {
        return Ok(TaskBody::local_error(
            &id,
            -32602,
            "Invalid or expired requestState",
        ));
    };
    let responses = message
        .pointer("/params/inputResponses")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // The answers go before this call is answered: its record is the update's.
    let (parts, _) = request.into_parts();
    let record = AttemptRecord::new();
    let mut job = paused.job;
    let timeout = layer.limits.poll_timeout;
    let sent = job
        .send_update(&mut inner, responses, Some(record.clone()), timeout)
        .await;
    if let Err(why) = sent {
        let message = format!("task {}: {why}", job.task.id);
        let error = wire::task_error(&job.task.id, "task_unreachable", message, None);
        let mut answer = TaskBody::local_json(&wire::error_message(&id, error));
        answer.extensions_mut().insert(record);
        return Ok(answer);
    }
    let mut head = Response::new(());
    head.extensions_mut().insert(record);
    Ok(start(inner, job, &parts, &message, head, &layer))
}

/// The client's answer to a call the layer polls a task for: the head now (the server's, for
/// the record it carries), the body written as the task is polled; `responses` sent first
/// with `tasks/update` when the job resumes after the client's input.
fn start<S: Below<ReqB, ResB>, ReqB: RequestBody, ResB: ResponseBody>(
    inner: S,
    job: JobState,
    parts: &Parts,
    message: &Value,
    head: Response<()>,
    layer: &TaskPollingLayer,
) -> Response<TaskBody<ResB>> {
    let event_stream = crate::exchange::accepts_event_stream(&parts.headers);
    let (sink, events) = mpsc::unbounded_channel();
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let session = parts
        .headers
        .get(crate::contract::MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok());
    let client = Client {
        progress_token: message.pointer("/params/_meta/progressToken").cloned(),
        event_stream,
        stateless: crate::protocol::version_in_meta(message)
            .is_some_and(crate::protocol::is_stateless),
        sink,
        id: id.clone(),
    };
    let (template, timeout) = (job.template.clone(), layer.limits.poll_timeout);
    let watch = Watch::default();
    let job = Job {
        service: inner.clone(),
        state: job,
        client,
        limits: layer.limits,
        watch: watch.clone(),
        table: Arc::clone(&layer.table),
        key: request_key(session, &id),
        types: std::marker::PhantomData,
    };
    let driver = Box::pin(drive(job));
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
    let body = JobBody::new(
        crate::exchange::Driven::new(driver, events),
        watch,
        on_abandon,
    );
    Response::from_parts(parts, TaskBody::task(body))
}

/// The job: the polls, and the client's input asked for whenever the task wants it, until the
/// job ends.
async fn drive<S: Below<ReqB, ResB>, ReqB: RequestBody, ResB: ResponseBody>(
    mut job: Job<S, ReqB, ResB>,
) {
    let cancelled = job.table.running(job.key.clone());
    job.watch.polling(&job.state.task.id);
    let mut next = Next::Poll;
    while let Next::Poll = next {
        next = match job.input_wanted() {
            Some(outstanding) => input::relay(&mut job, outstanding, &cancelled).await,
            None => job.step(&cancelled).await,
        };
    }
    job.table.ended(&job.key);
}

/// A task whose answer the client dropped before it ended: `tasks/cancel`, sent on the tokio
/// runtime the drop happened on (none: nothing is sent, and the server's TTL ends the task).
fn abandon<S: Below<ReqB, ResB>, ReqB: RequestBody, ResB: ResponseBody>(
    mut inner: S,
    template: Template,
    task: String,
    timeout: Duration,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime
                .spawn(async move { request::cancel(&mut inner, &template, &task, timeout).await });
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
