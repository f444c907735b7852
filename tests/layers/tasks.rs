//! `TaskPollingLayer` alone over an in-memory MCP server that runs a tool only as a task: the
//! declaration, the -32021 refusal sent again, the polls, the client's final answer, progress,
//! the task's other ends, the job's limit, a cancel on drop, and what passes untouched.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agentcore_tower::tasks::{TaskBody, TaskPolling, TaskPollingLayer};
use agentcore_tower::{AttemptRecord, ThrottleRetryLayer};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::common::{TestBody, boxed};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// What the server saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    declared: bool,
    mcp_name: Option<String>,
    runtime_session: Option<String>,
    message: Value,
}

/// A server whose tool `report` runs only as a task: -32021 to a call that does not declare the
/// extension (unless `lenient`), a task handle otherwise; each `tasks/get` answered with the
/// next status of its script (the last one repeated).
#[derive(Clone)]
struct TaskServer {
    seen: Arc<Mutex<Vec<Seen>>>,
    polls: Arc<Mutex<VecDeque<Value>>>,
    handle: Value,
    /// Whether it is of 2026-07-28 and knows `server/discover`.
    knows_discover: bool,
}

impl TaskServer {
    fn new(polls: impl IntoIterator<Item = Value>) -> Self {
        Self {
            seen: Arc::default(),
            polls: Arc::new(Mutex::new(polls.into_iter().collect())),
            handle: json!({"resultType": "task", "taskId": "t-1", "status": "working",
                "ttlMs": 3_600_000, "pollIntervalMs": 5_000}),
            knows_discover: true,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn methods(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.method).collect()
    }

    fn answer(&self, message: &Value) -> (u16, Value) {
        let id = message["id"].clone();
        let declared = declares(message);
        let result = |result: Value| (200, json!({"jsonrpc": "2.0", "id": id, "result": result}));
        match message["method"].as_str().unwrap_or_default() {
            "tools/call" if message["params"]["name"] == "plain" => {
                result(json!({"content": [{"type": "text", "text": "at once"}]}))
            }
            "tools/call" if !self.knows_discover => result(self.handle.clone()),
            "server/discover" if !self.knows_discover => (
                200,
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            ),
            "tools/call" | "tasks/get" | "tasks/cancel" if !declared => (
                200,
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32021,
                    "message": "Missing required client capability",
                    "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}}}),
            ),
            "tools/call" => result(self.handle.clone()),
            "tasks/get" => {
                let mut polls = self.polls.lock().unwrap();
                let next = if polls.len() > 1 {
                    polls.pop_front()
                } else {
                    polls.front().cloned()
                };
                let mut task = next.unwrap_or_else(|| json!({"status": "working"}));
                if task.get("error").is_some() && task.get("status").is_none() {
                    return (
                        200,
                        json!({"jsonrpc": "2.0", "id": id, "error": task["error"]}),
                    );
                }
                task["resultType"] = json!("complete");
                task.as_object_mut()
                    .unwrap()
                    .entry("taskId")
                    .or_insert(json!("t-1"));
                result(task)
            }
            "server/discover" => result(json!({"capabilities": {"extensions": {TASKS: {}}}})),
            _ => result(json!({})),
        }
    }
}

impl Service<Request<Full<Bytes>>> for TaskServer {
    type Response = Response<TestBody>;
    type Error = Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Response<TestBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let server = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let header = |name: &str| {
                parts
                    .headers
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
            };
            server.seen.lock().unwrap().push(Seen {
                method: message["method"].as_str().unwrap_or_default().to_owned(),
                declared: declares(&message),
                mcp_name: header("mcp-name"),
                runtime_session: header("x-amzn-bedrock-agentcore-runtime-session-id"),
                message: message.clone(),
            });
            let (status, answer) = server.answer(&message);
            Ok(Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .header(
                    "x-amzn-bedrock-agentcore-runtime-session-id",
                    "runtime-session-of-the-task-0001",
                )
                .body(boxed(Full::new(Bytes::from(answer.to_string()))))
                .unwrap())
        })
    }
}

fn declares(message: &Value) -> bool {
    message
        .pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions")
        .and_then(|e| e.get(TASKS))
        .is_some()
}

/// A `tools/call` of `tool` as a 2026-07-28 client sends it, accepting `accept`.
fn call(tool: &str, accept: &str, meta: Value) -> Request<Full<Bytes>> {
    let mut meta = meta;
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    meta["io.modelcontextprotocol/clientCapabilities"]
        .as_object()
        .is_none()
        .then(|| meta["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}}));
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": {"n": 1}, "_meta": meta}});
    Request::post("https://mcp.example/mcp")
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn completed(text: &str) -> Value {
    json!({"status": "completed", "result": {"content": [{"type": "text", "text": text}], "isError": false}})
}

async fn body_of<B>(answer: Response<B>) -> String
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    String::from_utf8(
        answer
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_call_refused_for_want_of_the_extension_is_sent_again_declaring_it_and_its_task_polled_to_the_end()
 {
    let working = json!({"status": "working"});
    let server = TaskServer::new([working.clone(), working, completed("forty minutes later")]);
    let started = tokio::time::Instant::now();
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone())
        .oneshot(call("report", "application/json", json!({})))
        .await
        .unwrap();
    assert_eq!(answer.headers()["content-type"], "application/json");
    let body: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(
        body,
        // A 2026-07-28 result carries its `resultType`, which the task's stored result lacks.
        json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "forty minutes later"}], "isError": false, "resultType": "complete"}})
    );
    assert_eq!(
        server.methods(),
        methods("tools/call tools/call tasks/get tasks/get tasks/get")
    );
    let seen = server.seen();
    assert!(
        !seen[0].declared,
        "the first call goes as the client wrote it"
    );
    assert!(seen[1..].iter().all(|s| s.declared));
    // The client's other capabilities, version and arguments are kept.
    assert_eq!(
        seen[1].message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["sampling"],
        json!({})
    );
    assert_eq!(seen[1].message["params"]["arguments"], json!({"n": 1}));
    for poll in &seen[2..] {
        assert_eq!(poll.mcp_name.as_deref(), Some("t-1"));
        assert_eq!(
            poll.runtime_session.as_deref(),
            Some("runtime-session-of-the-task-0001")
        );
        assert_eq!(poll.message["params"]["taskId"], "t-1");
        assert_eq!(
            poll.message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }
    // Three polls at the server's interval of 5 s.
    assert_eq!(started.elapsed(), Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn the_refusal_and_the_resend_are_in_the_calls_record() {
    let server = TaskServer::new([completed("done")]);
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .layer(ThrottleRetryLayer::new())
        .service(server)
        .oneshot(call("report", "application/json", json!({})))
        .await
        .unwrap();
    let record = AttemptRecord::of_response(&answer).unwrap().clone();
    let lines = record.to_string();
    assert_eq!(record.len(), 2, "{lines}");
    let first = &record.attempts()[0];
    assert!(first.was_sent_again(), "{lines}");
    assert!(
        lines.contains("tasks: missing client capability io.modelcontextprotocol/tasks (-32021), sent again after 0ms (by adapter, assumes refused-before-execution)"),
        "{lines}"
    );
    assert!(body_of(answer).await.contains("\"done\""));
}

#[tokio::test(start_paused = true)]
async fn a_client_reading_an_event_stream_hears_progress_for_its_token_until_the_result() {
    let working = json!({"status": "working", "statusMessage": "half way"});
    let server = TaskServer::new([working.clone(), working, completed("done")]);
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server)
        .oneshot(call(
            "report",
            "application/json, text/event-stream",
            json!({"progressToken": "p-9"}),
        ))
        .await
        .unwrap();
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let progress = |n: u64| {
        let message = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "p-9", "progress": n, "message": "half way"}});
        format!("event: message\ndata: {message}\n\n")
    };
    let result = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "done"}], "isError": false, "resultType": "complete"}});
    assert_eq!(
        body_of(answer).await,
        format!(
            "{}{}event: message\ndata: {result}\n\n",
            progress(1),
            progress(2)
        )
    );
}

#[tokio::test(start_paused = true)]
async fn once_the_target_offers_tasks_every_call_declares_them_from_the_start() {
    let server = TaskServer::new([completed("done")]);
    let mut client = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone());
    let discover = Request::post("https://mcp.example/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
        )))
        .unwrap();
    let answer = client.ready().await.unwrap().call(discover).await.unwrap();
    let discovered = body_of(answer).await;
    assert!(
        discovered.contains(TASKS),
        "the discover answer passes whole: {discovered}"
    );
    let answer = send(&mut client, call("report", "application/json", json!({}))).await;
    assert!(body_of(answer).await.contains("\"done\""));
    assert_eq!(
        server.methods(),
        ["server/discover", "tools/call", "tasks/get"]
    );
    assert!(server.seen()[1].declared);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_declares_tasks_itself_gets_the_servers_answers_untouched() {
    let server = TaskServer::new([completed("done")]);
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new().target_offers_tasks())
        .service(server.clone())
        .oneshot(call("report", "application/json", meta))
        .await
        .unwrap();
    let body: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(body["result"]["resultType"], "task");
    assert_eq!(server.methods(), ["tools/call"]);
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_is_no_task_reaches_the_client_byte_for_byte() {
    let server = TaskServer::new([]);
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new().target_offers_tasks())
        .service(server.clone())
        .oneshot(call("plain", "application/json", json!({})))
        .await
        .unwrap();
    assert_eq!(
        body_of(answer).await,
        r#"{"id":7,"jsonrpc":"2.0","result":{"content":[{"text":"at once","type":"text"}]}}"#
    );
    assert_eq!(server.methods(), ["tools/call"]);
}

/// The error the client gets for a task that ends with `last`.
async fn error_for(last: Value, layer: TaskPollingLayer) -> (Value, TaskServer) {
    let server = TaskServer::new([json!({"status": "working"}), last]);
    let answer = ServiceBuilder::new()
        .layer(layer)
        .service(server.clone())
        .oneshot(call("report", "application/json", json!({})))
        .await
        .unwrap();
    let body: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(body["id"], 7, "{body}");
    (body["error"].clone(), server)
}

#[tokio::test(start_paused = true)]
async fn a_task_that_fails_is_cancelled_or_is_lost_reaches_the_client_as_an_error_naming_it() {
    let failed = json!({"status": "failed", "error": {"code": -32603, "message": "disk full"}});
    let (error, _) = error_for(failed, TaskPollingLayer::new()).await;
    assert_eq!(
        error,
        json!({"code": -32603, "message": "disk full (task t-1)", "data": {"taskId": "t-1"}})
    );

    let cancelled = json!({"status": "cancelled", "statusMessage": "operator stopped it"});
    let (error, _) = error_for(cancelled, TaskPollingLayer::new()).await;
    assert_eq!(error["code"], -32000);
    assert_eq!(
        error["message"],
        "task t-1 was cancelled: operator stopped it"
    );
    assert_eq!(
        error["data"],
        json!({"kind": "task_cancelled", "taskId": "t-1"})
    );

    let expired =
        json!({"error": {"code": -32602, "message": "Failed to retrieve task: Task has expired"}});
    let (error, _) = error_for(expired, TaskPollingLayer::new()).await;
    assert_eq!(error["data"]["kind"], "task_lost");
    assert_eq!(error["data"]["taskId"], "t-1");
    assert_eq!(error["data"]["error"]["code"], -32602);
    assert_eq!(
        error["message"],
        "task t-1: tasks/get was answered: Failed to retrieve task: Task has expired"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_past_its_limit_is_cancelled_and_the_client_told() {
    let started = tokio::time::Instant::now();
    let layer = TaskPollingLayer::new().max_job_duration(Duration::from_secs(12));
    let (error, server) = error_for(json!({"status": "working"}), layer).await;
    assert_eq!(
        error["data"],
        json!({"kind": "task_limit", "taskId": "t-1"})
    );
    assert_eq!(
        server.methods(),
        methods("tools/call tools/call tasks/get tasks/get tasks/cancel")
    );
    assert_eq!(server.seen()[4].mcp_name.as_deref(), Some("t-1"));
    assert_eq!(started.elapsed(), Duration::from_secs(12));
}

/// What the server sees of a job that asked once: the call refused and sent again declaring
/// the extension, a poll that finds the question, the answer, a poll that still shows it (the
/// server has not taken it in yet), the poll that finds the job done.
const ASKED_ONCE: [&str; 6] = [
    "tools/call",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/get",
    "tasks/get",
];

/// `list`'s methods, in order: what `TaskServer::methods` is compared with.
fn methods(list: &str) -> Vec<&str> {
    list.split(' ').collect()
}

/// `request` sent through `client` once it is ready, its answer.
async fn send<S>(client: &mut S, request: Request<Full<Bytes>>) -> S::Response
where
    S: Service<Request<Full<Bytes>>, Error: std::fmt::Debug>,
{
    client.ready().await.unwrap().call(request).await.unwrap()
}

/// A poll that shows the task waiting for the user's approval.
fn needs_approval() -> Value {
    json!({"status": "input_required", "inputRequests": {"approve": {"method": "elicitation/create",
        "params": {"mode": "form", "message": "go on?", "requestedSchema": {"type": "object"}}}}})
}

/// A `tools/call` of `report` as a client of 2025-11-25 sends it, in MCP session `s-1`.
fn legacy_call(accept: &str) -> Request<Full<Bytes>> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "report", "arguments": {}}});
    legacy_post(accept, body)
}

fn legacy_post(accept: &str, body: Value) -> Request<Full<Bytes>> {
    Request::post("https://mcp.example/mcp")
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", "s-1")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// The JSON-RPC messages of an event stream's events.
fn events(stream: &str) -> Vec<Value> {
    stream
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_2026_client_is_asked_for_input_in_a_round_trip_and_the_job_goes_on_with_its_answer() {
    // The second poll still shows the answered request (the server has not taken it in yet).
    let server = TaskServer::new([needs_approval(), needs_approval(), completed("approved")]);
    let mut client = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone());
    let answer = send(&mut client, call("report", "application/json", json!({}))).await;
    let first: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(result["inputRequests"], needs_approval()["inputRequests"]);
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("agentcore-tower/tasks/state/"), "{state}");
    assert_eq!(server.methods(), ["tools/call", "tools/call", "tasks/get"]);

    // The client calls again with its answer and the state: that call is not sent; the answer
    // goes with tasks/update, and the polls go on.
    let meta = json!({});
    let mut again = call("report", "application/json", meta);
    let mut body: Value =
        serde_json::from_slice(&again.body().clone().collect().await.unwrap().to_bytes()).unwrap();
    body["id"] = json!(8);
    body["params"]["requestState"] = json!(state);
    body["params"]["inputResponses"] = json!({"approve": {"action": "accept", "content": {}}});
    *again.body_mut() = Full::new(Bytes::from(body.to_string()));
    let answer = client.ready().await.unwrap().call(again).await.unwrap();
    let last: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(last["id"], 8);
    assert_eq!(last["result"]["content"][0]["text"], "approved");
    assert_eq!(server.methods(), ASKED_ONCE);
    let update = &server.seen()[3];
    assert_eq!(update.message["params"]["taskId"], "t-1");
    assert_eq!(
        update.message["params"]["inputResponses"],
        json!({"approve": {"action": "accept", "content": {}}})
    );
    assert_eq!(update.mcp_name.as_deref(), Some("t-1"));

    // The state is used once.
    let mut replay = call("report", "application/json", json!({}));
    let mut body: Value =
        serde_json::from_slice(&replay.body().clone().collect().await.unwrap().to_bytes()).unwrap();
    body["params"]["requestState"] = json!(state);
    *replay.body_mut() = Full::new(Bytes::from(body.to_string()));
    let answer = client.ready().await.unwrap().call(replay).await.unwrap();
    let refused: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(
        refused["error"],
        json!({"code": -32602, "message": "Invalid or expired requestState"})
    );
    assert_eq!(
        server.seen().len(),
        6,
        "a state the layer issued never reaches the server"
    );
}

#[tokio::test(start_paused = true)]
async fn a_2025_client_is_asked_on_the_answers_stream_and_its_response_goes_with_tasks_update() {
    let server = TaskServer::new([needs_approval(), needs_approval(), completed("approved")]);
    let (mut client, body, frame) = first_frame_of_a_legacy_call(&server).await;
    let asked = &events(std::str::from_utf8(&frame).unwrap())[0];
    assert_eq!(asked["id"], "agentcore-tower/tasks/input/t-1/approve");
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(
        asked["params"],
        needs_approval()["inputRequests"]["approve"]["params"]
    );
    // The client's response, POSTed as MCP says: taken by the layer, never sent on.
    let response = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": true}}});
    let taken = send(
        &mut client,
        legacy_post("application/json, text/event-stream", response),
    )
    .await;
    assert_eq!(taken.status(), 202);
    let rest = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    let messages = events(&rest);
    assert_eq!(
        messages.last().unwrap()["result"]["content"][0]["text"],
        "approved"
    );
    assert_eq!(messages.last().unwrap()["id"], 7);
    assert_eq!(server.methods(), ASKED_ONCE);
    let update = &server.seen()[3];
    assert_eq!(
        update.message["params"]["inputResponses"],
        json!({"approve": {"action": "accept", "content": {"ok": true}}})
    );
}

#[tokio::test(start_paused = true)]
async fn a_2025_client_that_reads_no_event_stream_cannot_be_asked_and_is_told_so() {
    let server = TaskServer::new([needs_approval()]);
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone())
        .oneshot(legacy_call("application/json"))
        .await
        .unwrap();
    let body: Value = serde_json::from_str(&body_of(answer).await).unwrap();
    assert_eq!(
        body["error"]["data"],
        json!({"kind": "task_input_required", "taskId": "t-1"})
    );
    assert_eq!(
        server.methods(),
        ["tools/call", "tools/call", "tasks/get", "tasks/cancel"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_2025_clients_cancellation_cancels_its_task_and_ends_the_answer_unanswered() {
    let server = TaskServer::new([json!({"status": "working"})]);
    let (mut client, body, frame) = first_frame_of_a_legacy_call(&server).await;
    assert_eq!(&frame[..], b": task t-1 working\n\n");
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    let sent = send(
        &mut client,
        legacy_post("application/json, text/event-stream", cancel),
    )
    .await;
    assert_eq!(
        sent.status(),
        200,
        "the notification goes on to the server too"
    );
    let rest = body.collect().await.unwrap().to_bytes();
    assert!(
        rest.is_empty(),
        "a cancelled request is not answered: {rest:?}"
    );
    assert_eq!(
        server.methods(),
        methods("tools/call tools/call tasks/get notifications/cancelled tasks/cancel")
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_dropped_before_the_task_ended_cancels_the_task() {
    let server = TaskServer::new([json!({"status": "working"})]);
    let answer = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone())
        .oneshot(call(
            "report",
            "application/json, text/event-stream",
            json!({}),
        ))
        .await
        .unwrap();
    let mut body = answer.into_body();
    // One poll: the comment that says the task works.
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&frame[..], b": task t-1 working\n\n");
    drop(body);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        server.methods(),
        ["tools/call", "tools/call", "tasks/get", "tasks/cancel"]
    );
    let cancel = &server.seen()[3];
    assert_eq!(cancel.mcp_name.as_deref(), Some("t-1"));
    assert!(cancel.declared);
}

#[tokio::test(start_paused = true)]
async fn asked_first_the_target_says_it_offers_tasks_and_a_2025_clients_call_declares_them() {
    let server = TaskServer::new([completed("done")]);
    let layer = TaskPollingLayer::new().discover_target();
    for answer in two_legacy_calls(&layer, &server).await {
        assert!(answer.contains("\"done\""), "{answer}");
    }
    // Asked once, for the layer: a 2026-07-28 request of its own, in no MCP session.
    assert_eq!(
        server.methods(),
        methods("server/discover tools/call tasks/get tools/call tasks/get")
    );
    let discover = &server.seen()[0];
    assert_eq!(discover.message["id"], "agentcore-tower/tasks/discover");
    assert_eq!(
        discover.message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(discover.declared);
    assert!(server.seen()[1].declared && server.seen()[3].declared);
    assert!(layer.declares_tasks());
}

#[tokio::test(start_paused = true)]
async fn asked_first_a_target_that_knows_no_discover_is_sent_calls_as_they_are() {
    // A server of the 2025 era: server/discover is no method of its.
    let server = infallible_legacy_server();
    let layer = TaskPollingLayer::new().discover_target();
    for answer in two_legacy_calls(&layer, &server).await {
        assert!(answer.contains("at once"), "{answer}");
    }
    assert_eq!(
        server.methods(),
        ["server/discover", "tools/call", "tools/call"]
    );
    assert!(server.seen()[1..].iter().all(|s| !s.declared));
    assert!(!layer.declares_tasks());
}

/// A server that knows no `server/discover` (-32601) and answers every call at once.
fn infallible_legacy_server() -> TaskServer {
    let mut server = TaskServer::new([]);
    server.knows_discover = false;
    server.handle = json!({"content": [{"type": "text", "text": "at once"}]});
    server
}

/// Two `tools/call` of a 2025 client through one `layer` over `server`: their answers' bodies.
async fn two_legacy_calls(layer: &TaskPollingLayer, server: &TaskServer) -> Vec<String> {
    let mut client = ServiceBuilder::new()
        .layer(layer.clone())
        .service(server.clone());
    let mut answers = Vec::new();
    for _ in 0..2 {
        let call = legacy_call("application/json");
        let answer = client.ready().await.unwrap().call(call).await.unwrap();
        answers.push(body_of(answer).await);
    }
    answers
}

/// A 2025 client's call through the layer over `server`, its answer read as an event stream:
/// the layer's service (for the client's next POSTs), the answer's body, and its first frame.
async fn first_frame_of_a_legacy_call(
    server: &TaskServer,
) -> (TaskPolling<TaskServer>, TaskBody<TestBody>, Bytes) {
    let mut client = ServiceBuilder::new()
        .layer(TaskPollingLayer::new())
        .service(server.clone());
    let answer = send(
        &mut client,
        legacy_call("application/json, text/event-stream"),
    )
    .await;
    let mut body = answer.into_body();
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    (client, body, frame)
}
