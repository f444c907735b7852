//! One task polled to its end on the client's behalf: `tasks/get` at the server's interval,
//! progress for the client while it works, and the client's answer once it has ended.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri};
use http_body::Body;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use super::body::Watch;
use super::wire::{self, Status, Task};
use crate::body::{ReadError, ReadToBytes};
use crate::error::BoxError;
use crate::replay::ReplayOverride;

/// How much of a poll's answer is read: a completed task carries the tool's whole result.
const ANSWER_LIMIT: usize = 64 << 20;

/// What every request about one task is made from: the client's request, its head and `_meta`.
#[derive(Clone)]
pub(super) struct Template {
    pub(super) uri: Uri,
    pub(super) headers: HeaderMap,
    pub(super) meta: Map<String, Value>,
}

impl Template {
    /// A request of the extension about `task`, with the client's headers (its session, its
    /// version, its credentials), the standard headers of the method (`Mcp-Method`, and
    /// `Mcp-Name` the task id, so that it is routed where the task is held), and the runtime
    /// session the task was created in.
    pub(super) fn request<ReqB: From<Bytes>>(
        &self,
        method: &str,
        id: &str,
        task: &str,
        extra: Option<(&str, Value)>,
    ) -> Request<ReqB> {
        let message = wire::task_request(method, id, task, &self.meta, extra);
        let bytes = Bytes::from(serde_json::to_vec(&message).unwrap_or_default());
        let mut request = Request::new(ReqB::from(bytes));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        let mut names = crate::protocol::request_headers(&message, None);
        for name in ["mcp-method", "mcp-name"] {
            if let Some(value) = names.remove(name) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        if method == "tasks/get" {
            // A read: sent again after any failure, whatever the app declared of the tool.
            request.extensions_mut().insert(ReplayOverride::Replayable);
        }
        request
    }
}

/// The client's side of one call: who gets the answer, and how.
pub(super) struct Client {
    /// The id of the client's `tools/call`.
    pub(super) id: Value,
    /// `params._meta.progressToken` of its call.
    pub(super) progress_token: Option<Value>,
    /// Whether it reads an event stream (else it gets one JSON answer at the end).
    pub(super) event_stream: bool,
    pub(super) sink: mpsc::UnboundedSender<Bytes>,
}

impl Client {
    /// Writes one message for the client: an event, or the whole JSON answer.
    fn write(&self, message: &Value) {
        let json = message.to_string();
        let bytes = if self.event_stream {
            format!("event: message\ndata: {json}\n\n")
        } else {
            json
        };
        let _ = self.sink.send(Bytes::from(bytes));
    }

    /// Writes what tells the client the call is alive: progress for its token, else an event
    /// stream comment; nothing to a JSON reader.
    fn alive(&self, polls: u64, task: &Task) {
        let message = task
            .status_message
            .clone()
            .unwrap_or_else(|| format!("task {} is working", task.id));
        match &self.progress_token {
            Some(token) if self.event_stream => {
                self.write(&wire::progress(token, polls, &message));
            }
            _ if self.event_stream => {
                let _ = self
                    .sink
                    .send(Bytes::from(format!(": task {} working\n\n", task.id)));
            }
            _ => {}
        }
    }
}

/// How the job is bounded.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// The longest the job may run, from the task's creation; `None`: the task's TTL, or
    /// [`DEFAULT_JOB_LIMIT`](super::DEFAULT_JOB_LIMIT).
    pub(super) job: Option<Duration>,
    /// The poll interval when the server suggests none.
    pub(super) poll_interval: Duration,
    /// How many polls in a row may fail before the client is told.
    pub(super) poll_failures: u32,
    /// How long one request about the task may take.
    pub(super) poll_timeout: Duration,
}

/// Polls `task` through `service` until it ends, the job's limit passes, or the polls keep
/// failing; writes the client's answer.
pub(super) async fn run<S, ReqB, ResB>(
    mut service: S,
    template: Template,
    mut task: Task,
    client: Client,
    limits: Limits,
    watch: Watch,
) where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: From<Bytes>,
    ResB: Body<Data = Bytes>,
{
    let started = Instant::now();
    let limit = limits.job.or(task.ttl).unwrap_or(super::DEFAULT_JOB_LIMIT);
    let (mut polls, mut failures) = (0u64, 0u32);
    watch.polling(&task.id);
    loop {
        if task.is_terminal() {
            watch.finished();
            return client.write(&final_answer(&client.id, &task));
        }
        if task.status == Status::InputRequired {
            watch.finished();
            cancel(&mut service, &template, &task.id, limits.poll_timeout).await;
            let message = format!(
                "task {} needs input from the client (input_required), which this layer does \
                 not relay yet; the task was cancelled",
                task.id
            );
            let error = wire::task_error(&task.id, "task_input_required", message, None);
            return client.write(&wire::error_message(&client.id, error));
        }
        let interval = task.poll_interval.unwrap_or(limits.poll_interval);
        let deadline = started + limit;
        if Instant::now() + interval > deadline {
            tokio::time::sleep_until(deadline).await;
            watch.finished();
            cancel(&mut service, &template, &task.id, limits.poll_timeout).await;
            let message = format!(
                "task {} did not end within {} s; it was cancelled",
                task.id,
                limit.as_secs()
            );
            let error = wire::task_error(&task.id, "task_limit", message, None);
            return client.write(&wire::error_message(&client.id, error));
        }
        tokio::time::sleep(interval.max(Duration::from_millis(1))).await;
        polls += 1;
        let id = format!("agentcore-tower/tasks/get/{polls}");
        let poll = template.request("tasks/get", &id, &task.id, None);
        match ask(&mut service, poll, &id, limits.poll_timeout).await {
            Ok(answer) => match answer.get("result").and_then(Task::of) {
                Some(next) if next.id == task.id => {
                    failures = 0;
                    task = Task {
                        poll_interval: next.poll_interval.or(task.poll_interval),
                        ttl: next.ttl.or(task.ttl),
                        ..next
                    };
                    if !task.is_terminal() && task.status != Status::InputRequired {
                        client.alive(polls, &task);
                    }
                }
                _ => {
                    // The server no longer knows the task (expired, or held elsewhere), or
                    // answered something else: the job is lost.
                    watch.finished();
                    let server = answer.get("error").cloned();
                    let why = server
                        .as_ref()
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("an answer that is no task");
                    let message = format!("task {}: tasks/get was answered: {why}", task.id);
                    let error = wire::task_error(&task.id, "task_lost", message, server);
                    return client.write(&wire::error_message(&client.id, error));
                }
            },
            Err(why) => {
                failures += 1;
                if failures >= limits.poll_failures {
                    watch.finished();
                    let message = format!(
                        "task {}: {failures} polls in a row failed, the last with: {why}",
                        task.id
                    );
                    let error = wire::task_error(&task.id, "task_unreachable", message, None);
                    return client.write(&wire::error_message(&client.id, error));
                }
            }
        }
    }
}

/// The client's answer to a task that has ended.
fn final_answer(id: &Value, task: &Task) -> Value {
    match task.status {
        Status::Completed => {
            let result = task
                .result
                .clone()
                .unwrap_or_else(|| Value::Object(Map::new()));
            wire::result_message(id, result)
        }
        Status::Failed => wire::error_message(id, wire::failed_error(task)),
        _ => {
            let message = match &task.status_message {
                Some(why) => format!("task {} was cancelled: {why}", task.id),
                None => format!("task {} was cancelled", task.id),
            };
            wire::error_message(
                id,
                wire::task_error(&task.id, "task_cancelled", message, None),
            )
        }
    }
}

/// Sends `tasks/cancel` for `task` and reads its answer (whatever it says: cancelling is
/// cooperative, and the layer gives the client its own answer).
pub(super) async fn cancel<S, ReqB, ResB>(
    service: &mut S,
    template: &Template,
    task: &str,
    timeout: Duration,
) where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: From<Bytes>,
    ResB: Body<Data = Bytes>,
{
    let id = "agentcore-tower/tasks/cancel";
    let request = template.request("tasks/cancel", id, task, None);
    if let Err(why) = ask(service, request, id, timeout).await {
        tracing::debug!(task, reason = %why, "tasks/cancel failed");
    }
}

/// Sends one request and reads the JSON-RPC message that answers it (JSON, or an event of an
/// event stream).
pub(super) async fn ask<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
    id: &str,
    timeout: Duration,
) -> Result<Value, String>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    tokio::time::timeout(timeout, ask_unbounded(service, request, id))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
}

async fn ask_unbounded<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
    id: &str,
) -> Result<Value, String>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    let failed = |e: S::Error| crate::Error::from_service(e).to_string();
    service.ready().await.map_err(failed)?;
    let answer = service.call(request).await.map_err(failed)?;
    let status = answer.status();
    let body = ReadToBytes::new(answer.into_body(), ANSWER_LIMIT)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge => "an answer larger than 64 MiB".to_owned(),
            ReadError::Body(_) => "an answer that could not be read".to_owned(),
        })?;
    wire::answer_in(&body, &Value::from(id), &mut Vec::new())
        .ok_or_else(|| format!("HTTP {} without an answer to {id}", status.as_u16()))
}

/// The header of the runtime session an answer came from, kept for the task's requests.
pub(super) fn pin_runtime_session(headers: &mut HeaderMap, answer: &HeaderMap) {
    let name = HeaderName::from_static(crate::invoke::RUNTIME_SESSION_ID);
    if let Some(session) = answer.get(&name).filter(|v| !v.is_empty()) {
        headers.insert(name, HeaderValue::clone(session));
    }
}
