//! The emulator speaks MCP's tasks extension (`io.modelcontextprotocol/tasks`) over HTTP, in
//! both eras: `long_job` runs only as a task, refused with -32021 to a request that does not
//! declare the extension, and polled with `tasks/get` (its `Mcp-Name` the task id) until it
//! completes after 40 minutes on the paused clock. And the long lifetimes of AgentCore
//! Instances: a 14-day idle timeout.
//!
//! Every request goes over loopback HTTP through the emulator's own signer (its default SigV4
//! runtime door), and every answer is asserted as it came.

use crate::common::{Raw, http_client, mcp_post};

use std::time::Duration;

use agentcore_tower::protocol;
use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Value, json};
use tokio::time::advance;
use tower::{ServiceBuilder, ServiceExt};

const SESSION: &str = "tasks-runtime-session-00000000000000000001";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const MINUTE: Duration = Duration::from_secs(60);

async fn start(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
}

/// The client's capabilities, declaring the extension or not.
fn capabilities(declared: bool) -> Value {
    if declared {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    }
}

/// A 2026-07-28 request: its `_meta` names the version and the client's capabilities.
fn modern(id: u64, method: &str, mut params: Value, declared: bool) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities(declared),
        "io.modelcontextprotocol/clientInfo": {"name": "tasks", "version": "1"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A request of the `initialize` era: its `_meta` carries the per-request capabilities only.
fn legacy(id: u64, method: &str, mut params: Value, declared: bool) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": capabilities(declared)});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// One POST of `body` in runtime session `SESSION` (and MCP session `mcp_session`), signed by
/// the emulator's signer. A 2026-07-28 request carries the standard headers its client writes:
/// `MCP-Protocol-Version`, `Mcp-Method`, and `Mcp-Name` (the task id of a `tasks/*` request).
async fn post(emulator: &Emulator, mcp_session: Option<&str>, body: &Value) -> Raw {
    let signer = emulator
        .signer()
        .runtime_session_id(SESSION)
        .build()
        .unwrap();
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let mut request = mcp_post(
        "http://agentcore.invalid/mcp",
        mcp_session,
        body.to_string(),
    );
    let headers = request.headers_mut();
    match protocol::version_in_meta(body) {
        Some(version) => {
            headers.insert(
                HeaderName::from_static("mcp-protocol-version"),
                HeaderValue::from_str(version).unwrap(),
            );
            headers.extend(protocol::request_headers(body, None));
        }
        None if mcp_session.is_some() => {
            headers.insert(
                HeaderName::from_static("mcp-protocol-version"),
                HeaderValue::from_static("2025-11-25"),
            );
        }
        None => {}
    }
    Raw::read(stack.oneshot(request).await.unwrap()).await
}

fn long_job_call(id: u64, declared: bool, modern_era: bool) -> Value {
    let params = json!({"name": "long_job", "arguments": {}});
    if modern_era {
        modern(id, "tools/call", params, declared)
    } else {
        legacy(id, "tools/call", params, declared)
    }
}

fn required() -> Value {
    json!({"code": -32021, "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}})
}

/// Polls task `id` every `pollIntervalMs` (5 s of the paused clock) with `poll` until it is no
/// longer working: the final answer, and how long it took.
async fn poll_until_done(
    emulator: &Emulator,
    mcp_session: Option<&str>,
    poll: impl Fn(u64) -> Value,
) -> (Value, Duration) {
    let started = tokio::time::Instant::now();
    for n in 0..1_000 {
        let answer = post(emulator, mcp_session, &poll(100 + n)).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let result = answer.json()["result"].clone();
        assert_eq!(result["resultType"], "complete", "{answer:?}");
        if result["status"] != "working" {
            return (result, started.elapsed());
        }
        let interval = result["pollIntervalMs"].as_u64().unwrap();
        advance(Duration::from_millis(interval)).await;
    }
    panic!("still working after 1,000 polls");
}

fn done_after_40_minutes() -> Value {
    json!({"content": [{"type": "text", "text": "long_job done after 2400 s"}], "isError": false})
}

#[tokio::test(start_paused = true)]
async fn long_job_in_2026_07_28_without_the_extension_is_a_400_and_nothing_runs() {
    let emulator = start(EmulatorConfig::default()).await;
    let answer = post(&emulator, None, &long_job_call(1, false, true)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 1, "error": required()})
    );
    let poll = modern(2, "tasks/get", json!({"taskId": "any"}), false);
    let answer = post(&emulator, None, &poll).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(answer.json()["error"], required());
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("long_job"), 0);
    assert_eq!(audit.tasks_created, 0);
    assert!(audit.created_tasks.is_empty());
    assert!(audit.task_requests.is_empty());
}

#[tokio::test(start_paused = true)]
async fn long_job_in_2026_07_28_is_a_task_polled_until_it_completes_after_40_minutes() {
    let emulator = start(EmulatorConfig::default()).await;
    let answer = post(&emulator, None, &long_job_call(1, true, true)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let handle = answer.json()["result"].clone();
    let task_id = handle["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        handle,
        json!({"resultType": "task", "taskId": task_id, "status": "working",
            "createdAt": handle["createdAt"], "lastUpdatedAt": handle["createdAt"],
            "ttlMs": 3_600_000, "pollIntervalMs": 5_000})
    );
    let poll = |id| modern(id, "tasks/get", json!({"taskId": task_id}), true);
    let (done, took) = poll_until_done(&emulator, None, poll).await;
    assert_eq!(took, 40 * MINUTE);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["taskId"], task_id.as_str());
    assert_eq!(done["result"], done_after_40_minutes());

    let audit = emulator.audit();
    assert_eq!(audit.executions_of("long_job"), 1);
    assert_eq!(audit.tasks_created, 1);
    assert_eq!(audit.created_tasks[0].task_id, task_id);
    assert_eq!(
        audit.created_tasks[0].runtime_session_id.as_deref(),
        Some(SESSION)
    );
    // One poll every 5 s for 40 minutes, the last one finding it done.
    assert_eq!(audit.task_requests.len(), 481);
    assert!(audit.task_requests.iter().all(|r| r.found
        && r.method == "tasks/get"
        && r.task_id == task_id
        && r.runtime_session_id.as_deref() == Some(SESSION)));
    let last = audit.received.last().unwrap();
    assert_eq!(last.mcp_method.as_deref(), Some("tasks/get"));
    assert_eq!(last.mcp_name.as_deref(), Some(task_id.as_str()));
    assert_eq!(audit.header_mismatches, 0);
}

#[tokio::test(start_paused = true)]
async fn long_job_in_a_2025_session_is_the_same_task() {
    let emulator = start(EmulatorConfig::default()).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tasks", "version": "1"}}});
    let answer = post(&emulator, None, &initialize).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let mcp_session = answer.header("mcp-session-id").unwrap().to_owned();
    let session = Some(mcp_session.as_str());

    // Not declared: HTTP 200 with the JSON-RPC error, and nothing runs.
    let answer = post(&emulator, session, &long_job_call(2, false, false)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 2, "error": required()})
    );
    assert_eq!(emulator.audit().executions_of("long_job"), 0);

    let answer = post(&emulator, session, &long_job_call(3, true, false)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let handle = answer.json()["result"].clone();
    assert_eq!(handle["resultType"], "task", "{handle}");
    assert_eq!(handle["status"], "working");
    assert_eq!(handle["ttlMs"], 3_600_000);
    assert_eq!(handle["pollIntervalMs"], 5_000);
    let task_id = handle["taskId"].as_str().unwrap().to_owned();
    let poll = |id| legacy(id, "tasks/get", json!({"taskId": task_id}), true);
    let (done, took) = poll_until_done(&emulator, session, poll).await;
    assert_eq!(took, 40 * MINUTE);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], done_after_40_minutes());
    // `tasks/update` and `tasks/cancel` are acknowledged as in 2026-07-28.
    for (id, method) in [(4, "tasks/update"), (5, "tasks/cancel")] {
        let message = legacy(
            id,
            method,
            json!({"taskId": task_id, "inputResponses": {}}),
            true,
        );
        let answer = post(&emulator, session, &message).await;
        assert_eq!(
            answer.json(),
            json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete"}})
        );
    }
    // Without the declaration, the extension's methods are refused as its text says (-32021).
    let undeclared = legacy(6, "tasks/get", json!({"taskId": task_id}), false);
    let answer = post(&emulator, session, &undeclared).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["error"]["code"], -32021);
    // An id this server never held.
    let unknown = legacy(7, "tasks/get", json!({"taskId": "made-up"}), true);
    let answer = post(&emulator, session, &unknown).await;
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602,
            "message": "Failed to retrieve task: Task not found"}})
    );

    let audit = emulator.audit();
    assert_eq!(audit.executions_of("long_job"), 1);
    assert_eq!(audit.tasks_created, 1);
    let methods: Vec<&str> = audit
        .task_requests
        .iter()
        .map(|r| r.method.as_str())
        .collect();
    assert_eq!(methods.len(), 484);
    assert_eq!(
        methods[481..],
        ["tasks/update", "tasks/cancel", "tasks/get"]
    );
    assert!(!audit.task_requests[483].found);
}

#[tokio::test(start_paused = true)]
async fn a_14_day_idle_timeout_keeps_the_microvm_for_13_days_and_ends_it_after_14() {
    const DAY: Duration = Duration::from_secs(86_400);
    // An AgentCore Instance: `idleRuntimeSessionTimeout` at its most, 1,209,600 s, under a
    // lifetime long enough not to end the microVM first.
    let emulator = start(
        EmulatorConfig::default()
            .idle_timeout(14 * DAY)
            .max_lifetime(28 * DAY),
    )
    .await;
    let counter = |id| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "counter", "arguments": {}}});
    let answer = post(&emulator, None, &counter(1)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    advance(13 * DAY).await;
    let answer = post(&emulator, None, &counter(2)).await;
    assert_eq!(answer.json()["result"]["content"][0]["text"], "2");
    assert_eq!(emulator.audit().microvms_started, 1, "the same microVM");
    // 14 days idle: terminating for the termination delay (refused), then a new microVM.
    advance(14 * DAY).await;
    let answer = post(&emulator, None, &counter(3)).await;
    assert_eq!(answer.json()["error"]["code"], -32005, "{answer:?}");
    advance(Duration::from_secs(15)).await;
    let answer = post(&emulator, None, &counter(4)).await;
    assert_eq!(answer.json()["result"]["content"][0]["text"], "3");
    let audit = emulator.audit();
    assert_eq!(audit.microvms_started, 2);
    assert_eq!(audit.sessions_started, 1);
    assert_eq!(audit.busy_terminating, 1);
}
