//! `TaskPollingLayer` over `McpSessionRecoveryLayer` and the recommended stack, against the
//! emulator on tokio's paused clock, for clients that never declare MCP's tasks extension
//! (`io.modelcontextprotocol/tasks`), in both eras: a 2026-07-28 request, and a 2025-11-25
//! session opened with `initialize`. The emulator's `long_job` runs only as a task: the
//! client's own `tools/call` is answered with its result after 40 minutes, the emulator ran it
//! once, and every poll reached the runtime session that holds the task. And the task's other
//! ends (failed, cut by the layer's limit, dropped by the client, expired), and a client that
//! declares the extension itself, whose answers pass untouched.

use crate::common::stack::{Answered, Stack, read_whole, resends, send_through};
use crate::common::{BoxError, HttpClient, http_client, read_all};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::invoke::SigV4InvokeLayer;
use agentcore_tower::mcp_session::McpSessionRecovery;
use agentcore_tower::tasks::TaskPollingLayer;
use agentcore_tower::{
    McpSessionRecoveryLayer, RecommendedLayers, ReplayGuardLayer, protocol, recommended_layers,
};
use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig, TaskRequest};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};

const TASKS: &str = "io.modelcontextprotocol/tasks";
/// `long_job`'s default length.
const JOB: Duration = Duration::from_secs(40 * 60);
/// The emulator's default `pollIntervalMs`.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// What the record says of the refused call sent again declaring the extension.
const MISSING: &str = "missing client capability io.modelcontextprotocol/tasks (-32021)";
/// The id of the client's `tools/call` in every test.
const CALL_ID: u64 = 7;

/// The stack below the task layer: the session layer, the recommended layers, the signer.
type Below =
    McpSessionRecovery<<RecommendedLayers<SigV4InvokeLayer> as Layer<HttpClient>>::Service>;

fn below(signer: &SigV4InvokeLayer) -> Below {
    ServiceBuilder::new()
        .layer(McpSessionRecoveryLayer::new())
        .layer(recommended_layers(ReplayGuardLayer::new(), signer.clone()))
        .service(http_client())
}

/// The protocol era of a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    /// MCP 2026-07-28: every request names its version and capabilities in `_meta`.
    Modern,
    /// A 2025-11-25 session opened with `initialize`.
    Legacy,
}

const ERAS: [Era; 2] = [Era::Modern, Era::Legacy];

/// A client of one era over the emulator: the task layer's stack and the stack without it,
/// both over one signer (one runtime session), and its MCP session in the legacy era.
struct Client {
    era: Era,
    signer: SigV4InvokeLayer,
    layer: TaskPollingLayer,
    session: Option<String>,
}

impl Client {
    /// A client of `era` through `layer`; in the legacy era its session is opened (through the
    /// layer: `initialize` and `notifications/initialized` pass as they are).
    async fn open(emulator: &Emulator, era: Era, layer: TaskPollingLayer) -> Client {
        let mut client = Client {
            era,
            signer: emulator.signer().build().unwrap(),
            layer,
            session: None,
        };
        if era == Era::Legacy {
            let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "tasks-e2e", "version": "1"}}});
            let answer = send_through(&client.with_layer(), post(&initialize, &[])).await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            assert_eq!(answer.json["result"]["protocolVersion"], "2025-11-25");
            client.session = Some(answer.session.clone().expect("an Mcp-Session-Id"));
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let answer = send_through(&client.with_layer(), client.post(&initialized, "")).await;
            assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
        }
        client
    }

    /// The task layer over the stack, answers read whole.
    fn with_layer(&self) -> Stack {
        read_whole(self.layer.layer(below(&self.signer)))
    }

    /// The stack without the task layer, answers read whole.
    fn without_layer(&self) -> Stack {
        read_whole(below(&self.signer))
    }

    /// A request as a client of the era writes it, declaring the extension or not; `meta` is
    /// added to its `_meta` (a `progressToken`).
    fn message(&self, id: u64, method: &str, params: Value, declared: bool, meta: Value) -> Value {
        let mut params = params;
        let mut all = meta;
        if self.era == Era::Modern {
            all["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
            all["io.modelcontextprotocol/clientInfo"] =
                json!({"name": "tasks-e2e", "version": "1"});
            all["io.modelcontextprotocol/clientCapabilities"] = json!({});
        }
        if declared {
            all["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {TASKS: {}}});
        }
        if all.as_object().is_some_and(|m| !m.is_empty()) {
            params["_meta"] = all;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    /// The POST of `message` with the era's headers (the version; the session, or the standard
    /// headers of 2026-07-28), accepting `accept` (both kinds when empty).
    fn post(&self, message: &Value, accept: &str) -> Request<Full<Bytes>> {
        let mut headers = vec![];
        match (self.era, &self.session) {
            (Era::Modern, _) => {
                headers.push(("mcp-protocol-version".to_owned(), "2026-07-28".to_owned()));
                for (name, value) in &protocol::request_headers(message, None) {
                    headers.push((name.to_string(), value.to_str().unwrap().to_owned()));
                }
            }
            (Era::Legacy, Some(session)) => {
                headers.push(("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()));
                headers.push(("mcp-session-id".to_owned(), session.clone()));
            }
            (Era::Legacy, None) => {}
        }
        if !accept.is_empty() {
            headers.push(("accept".to_owned(), accept.to_owned()));
        }
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        post(message, &headers)
    }

    /// The client's `tools/call` of `long_job` with `arguments`, not declaring the extension.
    fn long_job(&self, arguments: Value, meta: Value, accept: &str) -> Request<Full<Bytes>> {
        let params = json!({"name": "long_job", "arguments": arguments});
        self.post(
            &self.message(CALL_ID, "tools/call", params, false, meta),
            accept,
        )
    }

    /// `tasks/get` of `task`, as a client that declares the extension sends it.
    fn get(&self, id: u64, task: &str) -> Request<Full<Bytes>> {
        let message = self.message(id, "tasks/get", json!({"taskId": task}), true, json!({}));
        self.post(&message, "")
    }
}

/// A POST of `message` to the runtime's MCP URL, JSON or an event stream accepted, then
/// `headers` (which replace the defaults of the same name).
fn post(message: &Value, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut request =
        crate::common::mcp_post("http://agentcore.invalid/mcp", None, message.to_string());
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    request
}

/// The client's answer to a 40-minute `long_job`: a 2026-07-28 result carries its
/// `resultType`.
fn done_after_40_minutes(era: Era) -> Value {
    let mut answer = json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {
        "content": [{"type": "text", "text": "long_job done after 2400 s"}], "isError": false}});
    if era == Era::Modern {
        answer["result"]["resultType"] = json!("complete");
    }
    answer
}

/// The one task the emulator created: its id and runtime session. It is `long_job`'s, it ran
/// once, for the client's call.
fn the_task(audit: &Audit) -> (String, String) {
    assert_eq!(audit.tasks_created, 1, "{audit:?}");
    assert_eq!(audit.executions_of("long_job"), 1, "{audit:?}");
    assert_eq!(
        audit.executions_by_id,
        [(("long_job".to_owned(), CALL_ID.to_string()), 1)].into(),
        "nothing else ran"
    );
    let task = &audit.created_tasks[0];
    assert_eq!(task.tool, "long_job");
    let session = task.runtime_session_id.clone().expect("a runtime session");
    (task.task_id.clone(), session)
}

/// The emulator's `tasks/*` requests: `polls` `tasks/get` of `task`, every one on `session`,
/// the held task found by all but the last `lost` of them, then `after` (each found).
fn assert_task_requests(
    audit: &Audit,
    task: &str,
    session: &str,
    polls: usize,
    lost: bool,
    after: &[&str],
) {
    let methods: Vec<&str> = audit
        .task_requests
        .iter()
        .map(|r| r.method.as_str())
        .collect();
    let mut expected = vec!["tasks/get"; polls];
    expected.extend_from_slice(after);
    assert_eq!(methods, expected);
    for (n, request) in audit.task_requests.iter().enumerate() {
        let found = !(lost && n == polls - 1);
        let TaskRequest {
            task_id,
            runtime_session_id,
            ..
        } = request;
        assert_eq!(task_id, task, "request {n}");
        assert_eq!(runtime_session_id.as_deref(), Some(session), "request {n}");
        assert_eq!(request.found, found, "request {n}");
    }
    assert_eq!(audit.sessions_started, 1, "one runtime session");
    assert_eq!(audit.microvms_started, 1);
    assert_eq!(audit.header_mismatches, 0);
    assert_eq!(audit.signature_failures, 0);
}

/// What the emulator received: the client's `tools/call` twice (refused for want of the
/// extension, then sent again declaring it), then the task's requests, each with `Mcp-Name` the
/// task id in 2026-07-28, each in the client's MCP session in the legacy era.
fn assert_received(audit: &Audit, client: &Client, task: &str, after_call: usize) {
    let calls: Vec<_> = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .collect();
    assert_eq!(calls.len(), 2, "refused, then sent again");
    assert!(calls.iter().all(|r| r.id.as_deref() == Some("7")));
    let tail: Vec<_> = audit
        .received
        .iter()
        .skip_while(|r| r.method.as_deref() != Some("tools/call"))
        .skip(2)
        .collect();
    assert_eq!(tail.len(), after_call, "{:?}", audit.received);
    for request in &tail {
        assert!(
            request.method.as_deref().unwrap().starts_with("tasks/"),
            "{request:?}"
        );
        if client.era == Era::Modern {
            assert_eq!(request.mcp_name.as_deref(), Some(task), "{request:?}");
        }
        assert_eq!(
            request.mcp_session_id, client.session,
            "the client's MCP session"
        );
    }
}

/// The refusal and the re-send in the call's record: two attempts, the first sent again by the
/// task layer.
fn assert_refused_then_sent_again(answer: &Answered) {
    assert_eq!(answer.record.len(), 2, "{}", answer.record);
    assert_eq!(resends(&answer.record), [("tasks", MISSING)]);
    assert!(
        answer.record.to_string().contains(&format!(
            "tasks: {MISSING}, sent again after 0ms (by adapter, assumes refused-before-execution)"
        )),
        "{}",
        answer.record
    );
}

#[tokio::test(start_paused = true)]
async fn a_40_minute_job_completes_for_a_client_that_never_declared_tasks() {
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let layer = TaskPollingLayer::new();
        let client = Client::open(&emulator, era, layer.clone()).await;
        assert!(!layer.declares_tasks(), "{era:?}: not yet known");
        let started = Instant::now();
        let call = client.long_job(json!({}), json!({}), "application/json");
        let answer = send_through(&client.with_layer(), call).await;
        let took = started.elapsed();
        assert_eq!(answer.status, StatusCode::OK, "{era:?}: {answer:?}");
        assert_eq!(answer.json, done_after_40_minutes(era), "{era:?}");
        // The job ran its 40 minutes, polled every 5 s: no more, no less.
        assert_eq!(took, JOB, "{era:?}");
        assert_refused_then_sent_again(&answer);
        assert!(layer.declares_tasks(), "{era:?}: learned from the -32021");

        let audit = emulator.audit();
        let (task, session) = the_task(&audit);
        let polls = (JOB.as_secs() / POLL_INTERVAL.as_secs()) as usize;
        assert_eq!(polls, 480);
        assert_task_requests(&audit, &task, &session, polls, false, &[]);
        assert_received(&audit, &client, &task, polls);
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_reading_an_event_stream_hears_progress_for_its_token_each_poll() {
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let client = Client::open(&emulator, era, TaskPollingLayer::new()).await;
        let call = client.long_job(
            json!({}),
            json!({"progressToken": "job-1"}),
            "application/json, text/event-stream",
        );
        let answer = client.with_layer().oneshot(call).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.headers()["content-type"], "text/event-stream");
        let text = String::from_utf8(answer.into_body().to_vec()).unwrap();
        let (task, _) = the_task(&emulator.audit());
        // A progress event after every poll that found the task working (479 of 480), its
        // count rising by one, then the result.
        let mut events: Vec<Value> = text
            .strip_suffix("\n\n")
            .unwrap()
            .split("\n\n")
            .map(|event| {
                let data = event.strip_prefix("event: message\ndata: ").unwrap();
                serde_json::from_str(data).unwrap()
            })
            .collect();
        let last = events.pop().unwrap();
        assert_eq!(last, done_after_40_minutes(era));
        let progress: Vec<Value> = (1..480)
            .map(|n| {
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "job-1", "progress": n,
                    "message": format!("task {task} is working")}})
            })
            .collect();
        assert_eq!(events, progress, "{era:?}");
        // The polls carry no progress token of their own: the emulator saw 480 of them.
        assert_eq!(emulator.audit().task_requests.len(), 480, "{era:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_fails_is_the_calls_error_naming_its_task() {
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let client = Client::open(&emulator, era, TaskPollingLayer::new()).await;
        let call = client.long_job(
            json!({"seconds": 60, "fail": true}),
            json!({}),
            "application/json",
        );
        let answer = send_through(&client.with_layer(), call).await;
        let audit = emulator.audit();
        let (task, session) = the_task(&audit);
        assert_eq!(
            answer.json,
            json!({"jsonrpc": "2.0", "id": CALL_ID, "error": {"code": -32603,
                "message": format!("long_job failed (task {task})"), "data": {"taskId": task}}}),
            "{era:?}"
        );
        assert_refused_then_sent_again(&answer);
        assert_task_requests(&audit, &task, &session, 12, false, &[]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_past_the_layers_limit_is_cancelled_on_the_emulator() {
    const LIMIT: Duration = Duration::from_secs(10 * 60);
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let layer = TaskPollingLayer::new().max_job_duration(LIMIT);
        let client = Client::open(&emulator, era, layer).await;
        let started = Instant::now();
        let call = client.long_job(json!({}), json!({}), "application/json");
        let answer = send_through(&client.with_layer(), call).await;
        let took = started.elapsed();
        let audit = emulator.audit();
        let (task, session) = the_task(&audit);
        assert_eq!(
            answer.json,
            json!({"jsonrpc": "2.0", "id": CALL_ID, "error": {"code": -32000,
                "message": format!("task {task} did not end within 600 s; it was cancelled"),
                "data": {"kind": "task_limit", "taskId": task}}}),
            "{era:?}"
        );
        // Cut at its limit, not at the job's end (40 minutes).
        assert!(took >= LIMIT && took < LIMIT + POLL_INTERVAL, "{took:?}");
        // A poll every 5 s up to the limit, then the task cancelled where it lives.
        assert_task_requests(&audit, &task, &session, 120, false, &["tasks/cancel"]);
        assert_received(&audit, &client, &task, 121);
        // The emulator holds it cancelled.
        let status = send_through(&client.with_layer(), client.get(20, &task)).await;
        assert_eq!(status.json["result"]["status"], "cancelled", "{era:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_dropped_before_the_job_ended_cancels_the_task_on_the_emulator() {
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let client = Client::open(&emulator, era, TaskPollingLayer::new()).await;
        let call = client.long_job(
            json!({}),
            json!({"progressToken": 5}),
            "application/json, text/event-stream",
        );
        let answer = client
            .layer
            .layer(below(&client.signer))
            .oneshot(call)
            .await
            .unwrap();
        let mut body = answer.into_body();
        // Three polls' progress, then the client goes away (a cancellation, a timeout).
        for n in 1..=3 {
            let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
            let text = std::str::from_utf8(&frame).unwrap();
            assert!(text.contains(&format!("\"progress\":{n},")), "{text}");
        }
        drop(body);
        let cancelled = |audit: &Audit| {
            audit
                .task_requests
                .last()
                .is_some_and(|r| r.method == "tasks/cancel")
        };
        for _ in 0..100 {
            if cancelled(&emulator.audit()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let audit = emulator.audit();
        let (task, session) = the_task(&audit);
        assert_task_requests(&audit, &task, &session, 3, false, &["tasks/cancel"]);
        assert_received(&audit, &client, &task, 4);
        let status = send_through(&client.with_layer(), client.get(20, &task)).await;
        assert_eq!(status.json["result"]["status"], "cancelled", "{era:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_whose_ttl_passed_before_it_ended_is_lost() {
    const TTL: Duration = Duration::from_secs(10 * 60);
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default().task_ttl(TTL))
            .await
            .unwrap();
        // A limit past the TTL: the server's answer, not the layer's limit, ends the job.
        let layer = TaskPollingLayer::new().max_job_duration(2 * TTL);
        let client = Client::open(&emulator, era, layer).await;
        let call = client.long_job(json!({}), json!({}), "application/json");
        let answer = send_through(&client.with_layer(), call).await;
        let audit = emulator.audit();
        let (task, session) = the_task(&audit);
        let expired = "Failed to retrieve task: Task has expired";
        assert_eq!(
            answer.json,
            json!({"jsonrpc": "2.0", "id": CALL_ID, "error": {"code": -32000,
                "message": format!("task {task}: tasks/get was answered: {expired}"),
                "data": {"kind": "task_lost", "taskId": task,
                    "error": {"code": -32602, "message": expired}}}}),
            "{era:?}"
        );
        // Found until its TTL, then gone: nothing cancelled (there is nothing to cancel).
        let polls = (TTL.as_secs() / POLL_INTERVAL.as_secs()) as usize;
        assert_task_requests(&audit, &task, &session, polls, true, &[]);
    }
}

/// A tap between the task layer and the stack: every answer the stack gave, read whole.
type Tapped = Arc<Mutex<Vec<(StatusCode, Bytes)>>>;

fn tapped(signer: &SigV4InvokeLayer, taps: &Tapped) -> Stack {
    let (taps, inner) = (taps.clone(), below(signer));
    let tap = tower::service_fn(move |request: Request<Full<Bytes>>| {
        let (taps, inner) = (taps.clone(), inner.clone());
        async move {
            let answer = inner.oneshot(request).await?;
            let (parts, body) = answer.into_parts();
            let (bytes, _) = read_all(body).await;
            taps.lock().unwrap().push((parts.status, bytes.clone()));
            Ok::<_, BoxError>(Response::from_parts(parts, Full::new(bytes)))
        }
    });
    read_whole(TaskPollingLayer::new().target_offers_tasks().layer(tap))
}

/// `text` with the task id and the emulator's timestamps in it replaced by names.
fn normalized(text: &[u8]) -> String {
    let mut json: Value = serde_json::from_slice(text).unwrap();
    let result = &mut json["result"];
    for key in ["taskId", "createdAt", "lastUpdatedAt"] {
        if result.get(key).is_some() {
            result[key] = json!(key);
        }
    }
    json.to_string()
}

#[tokio::test(start_paused = true)]
async fn a_client_that_declares_tasks_itself_gets_the_emulators_answers_untouched() {
    for era in ERAS {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let client = Client::open(&emulator, era, TaskPollingLayer::new()).await;
        let taps = Tapped::default();
        let through_layer = tapped(&client.signer, &taps);
        let call = |id| {
            let params = json!({"name": "long_job", "arguments": {"seconds": 10}});
            client.post(
                &client.message(id, "tools/call", params, true, json!({})),
                "",
            )
        };
        // The task handle, through the layer: the bytes the stack below answered.
        let handle = through_layer.clone().oneshot(call(CALL_ID)).await.unwrap();
        let (status, bytes) = taps.lock().unwrap()[0].clone();
        assert_eq!(handle.status(), status);
        assert_eq!(handle.body(), &bytes, "{era:?}");
        let json: Value = serde_json::from_slice(handle.body()).unwrap();
        assert_eq!(json["result"]["resultType"], "task", "{era:?}: {json}");
        let task = json["result"]["taskId"].as_str().unwrap().to_owned();
        // The client polls it itself, through the layer: untouched too.
        tokio::time::advance(Duration::from_secs(10)).await;
        let done = through_layer
            .clone()
            .oneshot(client.get(8, &task))
            .await
            .unwrap();
        assert_eq!(done.body(), &taps.lock().unwrap()[1].1, "{era:?}");
        let json: Value = serde_json::from_slice(done.body()).unwrap();
        assert_eq!(json["result"]["status"], "completed", "{era:?}: {json}");
        assert_eq!(taps.lock().unwrap().len(), 2, "nothing else was sent");

        // The same call through the stack without the layer: the same bytes but for the new
        // task's id and times.
        let without = client.without_layer().oneshot(call(9)).await.unwrap();
        assert_eq!(without.status(), handle.status());
        let with_text = normalized(handle.body()).replace("\"id\":7", "\"id\":9");
        assert_eq!(normalized(without.body()), with_text, "{era:?}");

        let audit = emulator.audit();
        assert_eq!(audit.tasks_created, 2);
        assert_eq!(audit.executions_of("long_job"), 2);
        let methods: Vec<_> = audit
            .received
            .iter()
            .filter_map(|r| r.method.as_deref())
            .filter(|m| !m.starts_with("initialize") && !m.starts_with("notifications/"))
            .collect();
        assert_eq!(
            methods,
            ["tools/call", "tasks/get", "tools/call"],
            "{era:?}"
        );
    }
}

/// A 2026-07-28 result carries `resultType` (SEP-2322; the emulator's own answers do, and the
/// official Python SDK 2.3 refuses one without it: "CallToolResult.resultType Field
/// required"), though the task's stored result, as the extension's text shows it, has none.
#[tokio::test(start_paused = true)]
async fn a_2026_07_28_client_gets_its_result_with_its_result_type() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let client = Client::open(&emulator, Era::Modern, TaskPollingLayer::new()).await;
    let call = client.long_job(json!({"seconds": 10}), json!({}), "application/json");
    let answer = send_through(&client.with_layer(), call).await;
    assert_eq!(
        answer.json,
        json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {"resultType": "complete",
            "content": [{"type": "text", "text": "long_job done after 10 s"}], "isError": false}})
    );
}

/// `long_job`'s one request for input, half-way (the emulator's `inputRequests`).
fn approve_request() -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form",
        "message": "long_job is half done: go on?",
        "requestedSchema": {"type": "object", "properties": {"proceed": {"type": "boolean"}},
            "required": ["proceed"]}}})
}

/// The user's answer: go on.
fn go_on() -> Value {
    json!({"action": "accept", "content": {"proceed": true}})
}

/// The emulator's `tasks/*` requests: polls, one `tasks/update`, polls.
fn methods_of(audit: &Audit) -> Vec<&str> {
    audit
        .task_requests
        .iter()
        .map(|r| r.method.as_str())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_2026_client_answers_the_jobs_question_in_a_round_trip_and_the_job_completes() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let client = Client::open(&emulator, Era::Modern, TaskPollingLayer::new()).await;
    let started = Instant::now();
    let call = client.long_job(json!({"ask": true}), json!({}), "application/json");
    let first = send_through(&client.with_layer(), call).await;
    // Half-way (20 minutes, 240 polls), the question, as the revision's round trip.
    assert_eq!(started.elapsed(), JOB / 2);
    let result = &first.json["result"];
    assert_eq!(result["resultType"], "input_required", "{}", first.json);
    assert_eq!(
        result["inputRequests"],
        json!({"approve-1": approve_request()})
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    // The client calls again with its answer and the state: the answer goes with tasks/update.
    let params = json!({"name": "long_job", "arguments": {"ask": true},
        "inputResponses": {"approve-1": go_on()}, "requestState": state});
    let again = client.message(8, "tools/call", params, false, json!({}));
    let last = send_through(
        &client.with_layer(),
        client.post(&again, "application/json"),
    )
    .await;
    assert_eq!(last.json["id"], 8);
    assert_eq!(
        last.json["result"]["content"][0]["text"],
        "long_job done after 2400 s"
    );
    assert_eq!(last.json["result"]["resultType"], "complete");
    assert_eq!(
        started.elapsed(),
        JOB,
        "the clock stopped only while nobody was asked"
    );
    let audit = emulator.audit();
    let (task, session) = the_task(&audit);
    let mut expected = vec!["tasks/get"; 240];
    expected.push("tasks/update");
    expected.extend(vec!["tasks/get"; 240]);
    assert_eq!(methods_of(&audit), expected);
    assert!(
        audit
            .task_requests
            .iter()
            .all(|r| r.task_id == task && r.runtime_session_id.as_deref() == Some(&*session))
    );
    // The second call never reached the emulator: only the first was sent (twice: refused,
    // then declaring the extension).
    let calls = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"));
    assert_eq!(calls.count(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_2025_client_is_asked_on_its_answers_stream_and_the_job_completes() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let client = Client::open(&emulator, Era::Legacy, TaskPollingLayer::new()).await;
    let service = client.layer.layer(below(&client.signer));
    let call = client.long_job(
        json!({"ask": true}),
        json!({}),
        "application/json, text/event-stream",
    );
    let answer = service.clone().oneshot(call).await.unwrap();
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut body = answer.into_body();
    // Comments while the job works, then the server's request, under an id of the layer's.
    let asked = loop {
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let text = std::str::from_utf8(&frame).unwrap();
        if let Some(data) = text.strip_prefix("event: message\ndata: ") {
            break serde_json::from_str::<Value>(data.trim_end()).unwrap();
        }
        assert!(text.starts_with(": task "), "{text}");
    };
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"], approve_request()["params"]);
    let id = asked["id"].as_str().unwrap();
    assert!(id.starts_with("agentcore-tower/tasks/input/"), "{id}");
    // The client's response, POSTed in its session: taken by the layer.
    let response = json!({"jsonrpc": "2.0", "id": id, "result": go_on()});
    let taken = service
        .clone()
        .oneshot(client.post(&response, ""))
        .await
        .unwrap();
    assert_eq!(taken.status(), StatusCode::ACCEPTED);
    let (rest, _) = read_all(body).await;
    let rest = String::from_utf8(rest.to_vec()).unwrap();
    let data = rest
        .rsplit("event: message\ndata: ")
        .next()
        .unwrap()
        .trim_end();
    let last: Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        last,
        json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {
            "content": [{"type": "text", "text": "long_job done after 2400 s"}], "isError": false}})
    );
    let audit = emulator.audit();
    the_task(&audit);
    let methods = methods_of(&audit);
    assert_eq!(methods.iter().filter(|m| **m == "tasks/update").count(), 1);
    assert_eq!(methods.len(), 481, "{methods:?}");
    // The client's response never reached the emulator.
    assert!(audit.received.iter().all(|r| r.id.as_deref() != Some(id)));
}

/// A server that answers in event streams (the Python SDK's servers do by default): the task
/// handle comes as the stream's one event, the polls' answers as events too, and the client
/// that reads JSON only still gets its one JSON answer. (A 2026-07-28 client: this file's
/// client of the other era reads its `initialize` answer as JSON.)
#[tokio::test(start_paused = true)]
async fn a_server_that_answers_in_event_streams_has_its_task_polled_to_the_end() {
    let emulator = Emulator::start(EmulatorConfig::default().sse(true))
        .await
        .unwrap();
    let client = Client::open(&emulator, Era::Modern, TaskPollingLayer::new()).await;
    let call = client.long_job(json!({"seconds": 60}), json!({}), "application/json");
    let answer = send_through(&client.with_layer(), call).await;
    assert_eq!(
        answer.json,
        json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {"resultType": "complete",
            "content": [{"type": "text", "text": "long_job done after 60 s"}], "isError": false}})
    );
    let audit = emulator.audit();
    let (task, session) = the_task(&audit);
    assert_refused_then_sent_again(&answer);
    assert_task_requests(&audit, &task, &session, 12, false, &[]);
}
