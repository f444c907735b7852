//! A task that needs the client's input (`input_required`): the server's requests put to the
//! client in its own revision's way, and its answers sent back with `tasks/update`.
//!
//! * A client of MCP 2026-07-28 (stateless) gets them as the revision's multi round-trip
//!   answer to its `tools/call`: `resultType: "input_required"`, the server's `inputRequests`,
//!   and a `requestState` of the layer's. Its next `tools/call` with that state and its
//!   `inputResponses` is not sent to the server: the layer sends the answers with
//!   `tasks/update` and polls on, answering that call.
//! * A client of a 2025 revision gets each request on the answer's event stream, as a server's
//!   request (`elicitation/create`, …) with an id of the layer's; its response, POSTed as MCP
//!   says, is taken by the layer (HTTP 202), and once every request is answered the answers go
//!   with `tasks/update`. An elicitation the client answers with an error is sent as
//!   `{"action": "cancel"}`; any other request it refuses ends the job (the task is cancelled,
//!   `data.kind: task_input_refused`). A client that reads no event stream cannot be asked: the
//!   task is cancelled and the client told (`data.kind: task_input_required`).

use bytes::Bytes;
use http_body::Body;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use std::time::Duration;

use super::client::Client;
use super::job::{Job, Next};
use super::table::{PREFIX, Paused};
use super::wait::{Either, first, wait_until};
use super::wire;
use crate::sends::Sends;

/// Puts the server's `outstanding` requests to the client, in its revision's way.
pub(super) async fn relay<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    job: &mut Job<S, ReqB, ResB>,
    outstanding: Map<String, Value>,
    cancelled: &Notify,
) -> Next {
    let task = job.state.task.id.clone();
    if job.client.stateless {
        return pause(job, outstanding);
    }
    if !job.client.event_stream {
        let message = format!(
            "task {task} needs input from the client (input_required), and the client reads no \
             event stream to be asked on; the task was cancelled"
        );
        return job.fail("task_input_required", message, None, true).await;
    }
    let asked: Vec<Asked> = outstanding
        .iter()
        .map(|(key, request)| ask(job, &task, key, request))
        .collect();
    let ids: Vec<String> = asked.iter().map(|a| a.id.clone()).collect();
    let waiting = Waiting {
        client: &job.client,
        task: &task,
        deadline: job.state.deadline(),
        interval: job
            .state
            .task
            .poll_interval
            .unwrap_or(job.limits.poll_interval),
    };
    let answered = collect(waiting, asked, cancelled).await;
    for id in &ids {
        job.table.forget(id);
    }
    match answered {
        Ok(responses) => match job.send_update(responses).await {
            Ok(()) => Next::Poll,
            Err(why) => {
                let message = format!("task {task}: {why}");
                job.fail("task_unreachable", message, None, false).await
            }
        },
        Err(next) => next.end(job).await,
    }
}

/// A 2026-07-28 client: the job waits in the layer's table for the client's next request.
fn pause<S, ReqB, ResB>(job: &mut Job<S, ReqB, ResB>, outstanding: Map<String, Value>) -> Next {
    // The task lives on; dropping this answer must not cancel it.
    job.watch.finished();
    let expires = job.state.deadline();
    let state = job.table.pause(Paused {
        job: job.state.clone(),
        expires,
    });
    let result = json!({
        "resultType": "input_required",
        "inputRequests": outstanding,
        "requestState": state,
    });
    job.client
        .write(&wire::result_message(&job.client.id, result));
    Next::End
}

/// One of the server's requests, put to the client.
struct Asked {
    key: String,
    id: String,
    method: String,
    response: oneshot::Receiver<Value>,
}

/// Writes the server's request `key` to the client, under an id of the layer's.
fn ask<S, ReqB, ResB>(job: &Job<S, ReqB, ResB>, task: &str, key: &str, request: &Value) -> Asked {
    let id = format!("{PREFIX}input/{task}/{key}");
    let response = job.table.await_response(&id);
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = request.get("params") {
        message["params"] = params.clone();
    }
    job.client.write(&message);
    Asked {
        key: key.to_owned(),
        id,
        method,
        response,
    }
}

/// Why the client's answers did not all come.
enum Stopped {
    Cancelled,
    Limit,
    Refused {
        method: String,
        key: String,
        error: Option<Value>,
    },
}

impl Stopped {
    async fn end<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
        self,
        job: &mut Job<S, ReqB, ResB>,
    ) -> Next {
        let task = job.state.task.id.clone();
        match self {
            Stopped::Cancelled => job.cancelled().await,
            Stopped::Limit => {
                let message = format!(
                    "task {task} waited for the client's input past the job's limit; it was \
                     cancelled"
                );
                job.fail("task_limit", message, None, true).await
            }
            Stopped::Refused { method, key, error } => {
                let message =
                    format!("task {task}: the client refused the server's {method} ({key})");
                job.fail("task_input_refused", message, error, true).await
            }
        }
    }
}

/// Waits for the client's response to each request: the answers, by key. While it waits, the
/// client hears a comment at each poll interval.
async fn collect(
    waiting: Waiting<'_>,
    asked: Vec<Asked>,
    cancelled: &Notify,
) -> Result<Map<String, Value>, Stopped> {
    let mut responses = Map::new();
    for mut one in asked {
        let response = loop {
            let wake = (Instant::now() + waiting.interval).min(waiting.deadline);
            match first(&mut one.response, wait_until(wake, cancelled)).await {
                Either::Left(response) => break response.ok(),
                Either::Right(true) => return Err(Stopped::Cancelled),
                Either::Right(false) if Instant::now() >= waiting.deadline => {
                    return Err(Stopped::Limit);
                }
                Either::Right(false) => {
                    let (task, method) = (waiting.task, &one.method);
                    waiting
                        .client
                        .comment(&format!("task {task} waits for the client's {method}"));
                }
            }
        };
        let answer = match response.as_ref().and_then(|r| r.get("result")) {
            Some(result) => result.clone(),
            None if one.method == "elicitation/create" => json!({"action": "cancel"}),
            None => {
                return Err(Stopped::Refused {
                    method: one.method,
                    key: one.key,
                    error: response.and_then(|r| r.get("error").cloned()),
                });
            }
        };
        responses.insert(one.key, answer);
    }
    Ok(responses)
}

/// What waiting for the client's answers needs of the job.
struct Waiting<'a> {
    client: &'a Client,
    task: &'a str,
    deadline: Instant,
    interval: Duration,
}
