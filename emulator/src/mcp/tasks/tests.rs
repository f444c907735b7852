//! The tasks extension on the paused clock: every status transition, the TTL, the holder rule
//! and the jobs clock, through the code both eras call.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::time::advance;

use super::store::timestamp;
use super::*;
use crate::{Emulator, EmulatorConfig};

const MINUTE: Duration = Duration::from_secs(60);

async fn emulator(config: EmulatorConfig) -> Emulator {
    Emulator::start(config)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn holder(session: &str, microvm: u64) -> Holder {
    Holder {
        runtime_session: Some(session.to_owned()),
        microvm,
    }
}

fn here() -> Holder {
    holder("session-a", 1)
}

/// `_meta` that declares the extension, or not.
fn meta(declared: bool) -> Value {
    let extensions = if declared {
        json!({EXTENSION: {}})
    } else {
        json!({})
    };
    json!({CLIENT_CAPABILITIES: {"extensions": extensions}})
}

fn call_params(name: &str, arguments: Value, declared: bool) -> Value {
    json!({"name": name, "arguments": arguments, "_meta": meta(declared)})
}

/// Calls `long_job` (declared) with `arguments`: its `CreateTaskResult` and task id.
fn long_job(emulator: &Emulator, arguments: Value) -> (Value, String) {
    let params = call_params("long_job", arguments, true);
    let handle = call_tool(&json!(1), &params, &here(), &emulator.state)
        .unwrap_or_else(|| panic!("long_job is the task code's"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let id = handle["taskId"].as_str().unwrap_or_default().to_owned();
    (handle, id)
}

/// `method` for task `id`, from `at`, declared.
fn ask(emulator: &Emulator, method: &str, id: &str, at: &Holder, more: Value) -> Outcome {
    let mut params = json!({"taskId": id, "_meta": meta(true)});
    if let (Some(params), Value::Object(more)) = (params.as_object_mut(), more) {
        params.extend(more);
    }
    request(method, &params, at, &emulator.state)
}

fn get(emulator: &Emulator, id: &str) -> Value {
    ask(emulator, "tasks/get", id, &here(), json!({}))
        .unwrap_or_else(|e| panic!("tasks/get {id}: {e:?}"))
}

fn status(emulator: &Emulator, id: &str) -> String {
    get(emulator, id)["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `createdAt` moved by `by`, as the task's timestamps read.
fn after(created: &Value, by: Duration) -> String {
    timestamp(parse(created.as_str().unwrap_or_default()) + by)
}

/// An ISO 8601 timestamp as the store writes it, read back (to the millisecond).
fn parse(text: &str) -> SystemTime {
    // Find the instant by search from the epoch: whole days, then the rest.
    let day = Duration::from_secs(86_400);
    let mut at = UNIX_EPOCH;
    while timestamp(at + day).as_str() <= text {
        at += day;
    }
    for step in [3_600_000, 60_000, 1_000, 1] {
        let step = Duration::from_millis(step);
        while timestamp(at + step).as_str() <= text {
            at += step;
        }
    }
    at
}

fn acknowledged() -> Outcome {
    Ok(json!({"resultType": "complete"}))
}

fn not_found() -> Outcome {
    Err((
        -32602,
        "Failed to retrieve task: Task not found".to_owned(),
        None,
    ))
}

#[test]
fn timestamps_are_iso_8601_utc() {
    let at = |secs: u64, millis: u64| {
        timestamp(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
    };
    assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
    assert_eq!(at(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
    assert_eq!(at(1_785_196_800, 0), "2026-07-28T00:00:00.000Z");
    assert_eq!(
        parse("2026-07-28T00:40:00.005Z"),
        UNIX_EPOCH + Duration::from_millis(1_785_199_200_005)
    );
}

#[tokio::test(start_paused = true)]
async fn long_job_without_the_extension_is_refused_and_nothing_runs() {
    let emulator = emulator(EmulatorConfig::default()).await;
    let required = Err((
        -32021,
        "Missing required client capability".to_owned(),
        Some(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})),
    ));
    let params = call_params("long_job", json!({}), false);
    let refused = call_tool(&json!(1), &params, &here(), &emulator.state);
    assert_eq!(refused, Some(required.clone()));
    let (_, id) = long_job(&emulator, json!({}));
    let undeclared = json!({"taskId": id, "_meta": meta(false)});
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        assert_eq!(
            request(method, &undeclared, &here(), &emulator.state),
            required
        );
    }
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("long_job"), 1, "the declared call only");
    assert_eq!(audit.tasks_created, 1);
    assert!(audit.task_requests.is_empty(), "{:?}", audit.task_requests);
    // Other tools are not the task code's; `slow_job` only when declared.
    let plain = call_params("slow_job", json!({}), false);
    assert_eq!(call_tool(&json!(2), &plain, &here(), &emulator.state), None);
    let add = call_params("add", json!({"a": 1, "b": 2}), true);
    assert_eq!(call_tool(&json!(3), &add, &here(), &emulator.state), None);
}

#[tokio::test(start_paused = true)]
async fn long_job_works_for_40_minutes_then_completes() {
    let emulator = emulator(EmulatorConfig::default()).await;
    let (handle, id) = long_job(&emulator, json!({}));
    let created = handle["createdAt"].clone();
    assert_eq!(
        handle,
        json!({"resultType": "task", "taskId": id, "status": "working", "createdAt": created,
            "lastUpdatedAt": created, "ttlMs": 3_600_000, "pollIntervalMs": 5_000})
    );
    let uuid = uuid::Uuid::parse_str(&id).unwrap_or_else(|e| panic!("{e}: {id}"));
    assert_eq!(uuid.get_version_num(), 4);
    advance(40 * MINUTE - Duration::from_millis(1)).await;
    assert_eq!(
        get(&emulator, &id),
        json!({"resultType": "complete", "taskId": id, "status": "working",
            "createdAt": created, "lastUpdatedAt": created, "ttlMs": 3_600_000, "pollIntervalMs": 5_000})
    );
    advance(Duration::from_millis(1)).await;
    assert_eq!(
        get(&emulator, &id),
        json!({"resultType": "complete", "taskId": id, "status": "completed",
            "createdAt": created, "lastUpdatedAt": after(&created, 40 * MINUTE),
            "ttlMs": 3_600_000, "pollIntervalMs": 5_000,
            "result": {"content": [{"type": "text", "text": "long_job done after 2400 s"}], "isError": false}})
    );
    // Past its TTL, a task that completed before it is still there.
    advance(2 * 60 * MINUTE).await;
    assert_eq!(status(&emulator, &id), "completed");
    // Done: a cancel is acknowledged and changes nothing.
    assert_eq!(
        ask(&emulator, "tasks/cancel", &id, &here(), json!({})),
        acknowledged()
    );
    assert_eq!(status(&emulator, &id), "completed");
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("long_job"), 1);
    assert_eq!(audit.created_tasks.len(), 1);
    assert_eq!(audit.created_tasks[0].task_id, id);
    assert_eq!(audit.created_tasks[0].tool, "long_job");
    assert_eq!(
        audit.created_tasks[0].runtime_session_id.as_deref(),
        Some("session-a")
    );
    let methods: Vec<(&str, bool)> = audit
        .task_requests
        .iter()
        .map(|r| (r.method.as_str(), r.found))
        .collect();
    let get = ("tasks/get", true);
    assert_eq!(methods, [get, get, get, ("tasks/cancel", true), get]);
}

#[tokio::test(start_paused = true)]
async fn a_job_asked_to_fail_fails_at_its_end_with_a_json_rpc_error() {
    let emulator =
        emulator(EmulatorConfig::default().task_poll_interval(Duration::from_secs(1))).await;
    let (handle, id) = long_job(&emulator, json!({"seconds": 90, "fail": true}));
    assert_eq!(handle["pollIntervalMs"], 1_000);
    advance(Duration::from_secs(89)).await;
    assert_eq!(status(&emulator, &id), "working");
    advance(Duration::from_secs(1)).await;
    let failed = get(&emulator, &id);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["error"],
        json!({"code": -32603, "message": "long_job failed"})
    );
    assert_eq!(failed["statusMessage"], "long_job failed at its end");
    assert_eq!(failed.get("result"), None);
    assert_eq!(
        failed["lastUpdatedAt"],
        after(&failed["createdAt"], Duration::from_secs(90))
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_that_asks_waits_with_its_clock_stopped_then_runs_its_other_half() {
    // 70 minutes in all: longer than the default TTL.
    let emulator = emulator(EmulatorConfig::default().task_ttl(2 * 60 * MINUTE)).await;
    let (handle, id) = long_job(&emulator, json!({"ask": true}));
    let created = handle["createdAt"].clone();
    advance(20 * MINUTE - Duration::from_millis(1)).await;
    assert_eq!(status(&emulator, &id), "working");
    advance(Duration::from_millis(1)).await;
    let waiting = get(&emulator, &id);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert_eq!(waiting["lastUpdatedAt"], after(&created, 20 * MINUTE));
    assert_eq!(
        waiting["inputRequests"],
        json!({"approve-1": {"method": "elicitation/create", "params": {
            "mode": "form", "message": "long_job is half done: go on?",
            "requestedSchema": {"type": "object", "properties": {"proceed": {"type": "boolean"}},
                "required": ["proceed"]}}}})
    );
    // Its clock stops: 30 minutes later it still waits, nothing more done.
    advance(30 * MINUTE).await;
    assert_eq!(get(&emulator, &id), waiting);
    // A key not outstanding is ignored.
    let stray = json!({"inputResponses": {"approve-2": {"action": "accept", "content": {"proceed": true}}}});
    assert_eq!(
        ask(&emulator, "tasks/update", &id, &here(), stray),
        acknowledged()
    );
    assert_eq!(status(&emulator, &id), "input_required");
    let accept = json!({"inputResponses": {"approve-1": {"action": "accept", "content": {"proceed": true}}}});
    assert_eq!(
        ask(&emulator, "tasks/update", &id, &here(), accept.clone()),
        acknowledged()
    );
    let working = get(&emulator, &id);
    assert_eq!(working["status"], "working");
    assert_eq!(working["lastUpdatedAt"], after(&created, 50 * MINUTE));
    assert_eq!(working.get("inputRequests"), None);
    // The answer delivered, the key is no longer outstanding: sent again, it changes nothing.
    assert_eq!(
        ask(&emulator, "tasks/update", &id, &here(), accept),
        acknowledged()
    );
    advance(20 * MINUTE - Duration::from_millis(1)).await;
    assert_eq!(status(&emulator, &id), "working");
    advance(Duration::from_millis(1)).await;
    let done = get(&emulator, &id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["lastUpdatedAt"], after(&created, 70 * MINUTE));
    assert_eq!(
        done["result"]["content"][0]["text"],
        "long_job done after 2400 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_user_who_declines_completes_the_job_with_a_tool_error() {
    let emulator = emulator(EmulatorConfig::default()).await;
    for (n, answer) in [
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        json!({"action": "accept", "content": {"proceed": false}}),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, id) = long_job(&emulator, json!({"seconds": 60, "ask": true}));
        advance(Duration::from_secs(30)).await;
        assert_eq!(status(&emulator, &id), "input_required", "{n}");
        let update = json!({"inputResponses": {"approve-1": answer}});
        assert_eq!(
            ask(&emulator, "tasks/update", &id, &here(), update),
            acknowledged()
        );
        advance(Duration::from_secs(60)).await;
        let done = get(&emulator, &id);
        assert_eq!(done["status"], "completed", "{n}: {done}");
        assert_eq!(
            done["result"],
            json!({"content": [{"type": "text",
                "text": "long_job stopped at its half: the user declined to go on"}], "isError": true})
        );
    }
    assert_eq!(emulator.audit().executions_of("long_job"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_task_stays_cancelled() {
    let emulator = emulator(EmulatorConfig::default()).await;
    for ask_first in [false, true] {
        let (_, id) = long_job(&emulator, json!({"seconds": 60, "ask": ask_first}));
        advance(Duration::from_secs(40)).await;
        let expected = if ask_first {
            "input_required"
        } else {
            "working"
        };
        assert_eq!(status(&emulator, &id), expected);
        assert_eq!(
            ask(&emulator, "tasks/cancel", &id, &here(), json!({})),
            acknowledged()
        );
        advance(Duration::from_secs(60)).await;
        let cancelled = get(&emulator, &id);
        assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
        assert_eq!(cancelled.get("result"), None);
        assert_eq!(cancelled.get("inputRequests"), None);
        assert_eq!(
            cancelled["lastUpdatedAt"],
            after(&cancelled["createdAt"], Duration::from_secs(40))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_not_done_by_its_ttl_expires_then_is_gone() {
    let emulator = emulator(EmulatorConfig::default().task_ttl(10 * MINUTE)).await;
    let (handle, longer) = long_job(&emulator, json!({"seconds": 1_200}));
    assert_eq!(handle["ttlMs"], 600_000);
    let (_, waiting) = long_job(&emulator, json!({"seconds": 60, "ask": true}));
    let (_, quick) = long_job(&emulator, json!({"seconds": 599}));
    advance(10 * MINUTE - Duration::from_millis(1)).await;
    assert_eq!(status(&emulator, &longer), "working");
    assert_eq!(status(&emulator, &waiting), "input_required");
    advance(Duration::from_millis(1)).await;
    let expired = Err((
        -32602,
        "Failed to retrieve task: Task has expired".to_owned(),
        None,
    ));
    assert_eq!(
        ask(&emulator, "tasks/get", &longer, &here(), json!({})),
        expired
    );
    assert_eq!(
        ask(&emulator, "tasks/get", &longer, &here(), json!({})),
        not_found()
    );
    assert_eq!(
        ask(&emulator, "tasks/cancel", &waiting, &here(), json!({})),
        expired
    );
    assert_eq!(
        ask(&emulator, "tasks/update", &waiting, &here(), json!({})),
        not_found()
    );
    // Done before its TTL: still there.
    assert_eq!(status(&emulator, &quick), "completed");
    let found: Vec<bool> = emulator
        .audit()
        .task_requests
        .iter()
        .map(|r| r.found)
        .collect();
    assert_eq!(found, [true, true, false, false, false, false, true]);
}

#[tokio::test(start_paused = true)]
async fn a_task_is_known_only_to_the_microvm_that_created_it() {
    let emulator = emulator(EmulatorConfig::default()).await;
    let (_, id) = long_job(&emulator, json!({}));
    for elsewhere in [
        holder("session-b", 1),
        holder("session-a", 2),
        Holder::default(),
    ] {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            assert_eq!(
                ask(&emulator, method, &id, &elsewhere, json!({})),
                not_found()
            );
        }
    }
    assert_eq!(
        ask(&emulator, "tasks/get", "made-up", &here(), json!({})),
        not_found()
    );
    assert_eq!(
        status(&emulator, &id),
        "working",
        "untouched where it lives"
    );
    let requests = emulator.audit().task_requests;
    assert_eq!(requests.len(), 11);
    assert_eq!(requests[0].runtime_session_id.as_deref(), Some("session-b"));
    assert_eq!(requests[6].runtime_session_id, None);
    assert!(requests[..10].iter().all(|r| !r.found) && requests[10].found);
    // Nor a slow_job task.
    let slow = call_params("slow_job", json!({}), true);
    let handle = call_tool(&json!(9), &slow, &here(), &emulator.state)
        .unwrap_or_else(|| panic!("declared"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let slow_id = handle["taskId"].as_str().unwrap_or_default();
    let answer = ask(
        &emulator,
        "tasks/get",
        slow_id,
        &holder("session-b", 1),
        json!({}),
    );
    assert_eq!(
        answer,
        Err((
            -32602,
            "Failed to retrieve task: Task not found".to_owned(),
            None
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn advance_jobs_moves_every_task_and_nothing_else() {
    let emulator = emulator(EmulatorConfig::default()).await;
    let (_, long) = long_job(&emulator, json!({}));
    let slow = call_params("slow_job", json!({}), true);
    let handle = call_tool(&json!(2), &slow, &here(), &emulator.state)
        .unwrap_or_else(|| panic!("declared"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        (handle["ttlMs"].clone(), handle["pollIntervalMs"].clone()),
        (Value::Null, json!(100)),
        "slow_job keeps rmcp's model"
    );
    let slow = handle["taskId"].as_str().unwrap_or_default().to_owned();
    emulator.advance_jobs(40 * MINUTE - Duration::from_secs(1));
    assert_eq!(status(&emulator, &slow), "completed");
    assert_eq!(status(&emulator, &long), "working");
    // Tokio's clock and the advance add up.
    advance(Duration::from_secs(1)).await;
    let done = get(&emulator, &long);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["lastUpdatedAt"],
        after(&done["createdAt"], 40 * MINUTE)
    );
    // A task created after an advance starts from its own creation.
    let (_, later) = long_job(&emulator, json!({"seconds": 60}));
    emulator.advance_jobs(Duration::from_secs(59));
    assert_eq!(status(&emulator, &later), "working");
    emulator.advance_jobs(Duration::from_secs(1));
    assert_eq!(status(&emulator, &later), "completed");
    // The TTL runs on the jobs clock too.
    let (_, expiring) = long_job(&emulator, json!({"seconds": 7_200}));
    emulator.advance_jobs(60 * MINUTE);
    assert_eq!(
        ask(&emulator, "tasks/get", &expiring, &here(), json!({})).map_err(|e| e.1),
        Err("Failed to retrieve task: Task has expired".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn bad_arguments_are_a_tool_error_and_nothing_runs() {
    let emulator = emulator(EmulatorConfig::default().long_job_duration(MINUTE)).await;
    for arguments in [
        json!({"seconds": -1}),
        json!({"seconds": 1.5}),
        json!({"seconds": "60"}),
        json!({"ask": "yes"}),
        json!({"fail": 1}),
    ] {
        let params = call_params("long_job", arguments.clone(), true);
        let answer = call_tool(&json!(1), &params, &here(), &emulator.state);
        let result = answer.and_then(Result::ok).unwrap_or_default();
        assert_eq!(result["isError"], true, "{arguments}: {result}");
        assert_eq!(result.get("taskId"), None);
    }
    assert_eq!(emulator.audit().executions_of("long_job"), 0);
    // The configured length, when the call names none.
    let (_, id) = long_job(&emulator, json!({"seconds": null}));
    advance(MINUTE).await;
    let done = get(&emulator, &id);
    assert_eq!(
        done["result"]["content"][0]["text"],
        "long_job done after 60 s"
    );
}
