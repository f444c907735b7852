//! The tasks extension (`io.modelcontextprotocol/tasks`, the extension's draft text,
//! `specification/draft/tasks.md` of `modelcontextprotocol/ext-tasks`), answered the same in
//! both eras: a 2026-07-28 request and a request of the `initialize` era that declares the
//! extension in its per-request capabilities
//! (`params._meta["io.modelcontextprotocol/clientCapabilities"].extensions["io.modelcontextprotocol/tasks"]`)
//! reach the same code, as at a dual-era server that reads per-request capabilities.
//!
//! Two tools run as tasks:
//!
//! * **`slow_job`**, as rmcp 3.11 models the extension (`src/model/task.rs`,
//!   `src/task_manager.rs`): a task only for a request that declares the extension ("A server
//!   MUST NOT return `CreateTaskResult` to a client that did not include the extension
//!   capability on its request"), otherwise run within the call. Done after
//!   [`slow_job_duration`](crate::EmulatorConfig::slow_job_duration); `ttlMs` null,
//!   `pollIntervalMs` 100.
//! * **`long_job`** (`{"seconds": N, "ask": bool, "fail": bool}`, each optional), ONLY as a
//!   task: "If a server is unable to service a request to a client that does not declare this
//!   extension capability without returning `CreateTaskResult`, the server MUST return an
//!   error with the code `-32021`", with `data: {"requiredCapabilities": {"extensions":
//!   {"io.modelcontextprotocol/tasks": {}}}}`; nothing runs. Declared, it answers a
//!   `CreateTaskResult` (`resultType: "task"`, `taskId` a v4 UUID, `status: "working"`,
//!   `createdAt`, `lastUpdatedAt`, `ttlMs` =
//!   [`task_ttl`](crate::EmulatorConfig::task_ttl), `pollIntervalMs` =
//!   [`task_poll_interval`](crate::EmulatorConfig::task_poll_interval)) and counts
//!   one execution. It works for `seconds` (default
//!   [`long_job_duration`](crate::EmulatorConfig::long_job_duration), 40 minutes),
//!   then is `completed` with the `CallToolResult` "long_job done after N s" — or, with
//!   `fail`, `failed` with `error: {"code": -32603, "message": "long_job failed"}` and a
//!   `statusMessage` ("`failed`: The request failed due to a JSON-RPC error during
//!   execution"). With `ask`, at half its length it is `input_required` with one
//!   `elicitation/create` form in `inputRequests["approve-1"]`, and its clock stops while it
//!   waits; `tasks/update` with `inputResponses["approve-1"] = {"action": "accept", "content":
//!   {"proceed": true}}` sets it working again for the other half, any other answer completes
//!   it with a `CallToolResult` `isError: true` ("This includes tool calls that returned
//!   results with `isError: true`"). A key not outstanding is ignored ("A server SHOULD ignore
//!   any `inputResponses` responses mapped to a key that is not currently outstanding").
//!
//! The methods, for a request that declares the extension (else -32021, as above: "Servers
//! MUST return this error for non-declaring clients issuing `tasks/get`, `tasks/update`, and
//! `tasks/cancel` requests"):
//!
//! * `tasks/get`: the detailed task, `resultType: "complete"` ("The `resultType` field MUST be
//!   set to `"complete"` on this object"), with `inputRequests`, `result` or `error` as its
//!   status carries.
//! * `tasks/update`, `tasks/cancel`: `{"resultType": "complete"}`, the empty acknowledgement.
//!   A task not terminal is `cancelled`.
//! * A task whose `createdAt + ttlMs` passed before it was terminal is gone: -32602 "Failed to
//!   retrieve task: Task has expired" once, then "Task not found" ("servers MAY mark a task as
//!   `failed` at any point after the TTL elapses, and subsequently delete it"). An id this
//!   server does not hold: -32602 "Failed to retrieve task: Task not found" (the extension's
//!   example messages), in an HTTP 200.
//!
//! A task lives where it was created, as in a real microVM's own store: in the microVM of the
//! runtime session that created it ([`Holder`]). A request that reaches another runtime
//! session, or the same one's next microVM, does not know it. Its time runs on the jobs clock
//! (see `store.rs`): tokio's, plus what `Emulator::advance_jobs` added.

mod store;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde_json::{Value, json};

use super::{CLIENT_CAPABILITIES, Outcome, tools};
use crate::{CreatedTask, State, TaskRequest};
pub(crate) use store::{Holder, Tasks};
use store::{Job, Missing};

/// The extension's id, in capabilities.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The poll interval a `slow_job` task suggests (rmcp's model).
const SLOW_JOB_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Whether a request's per-request capabilities declare the extension (rmcp's
/// `supports_tasks`).
pub(super) fn declared(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES))
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// -32021 "Missing required client capability", naming the extension.
fn missing_capability() -> Outcome {
    let data = json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}});
    Err((
        -32021,
        "Missing required client capability".to_owned(),
        Some(data),
    ))
}

/// A `tools/call` the task code answers, in either era: `slow_job` for a request that declares
/// the extension, and `long_job` always. `None` for any other call.
pub(super) fn call_tool(
    id: &Value,
    params: &Value,
    holder: &Holder,
    state: &State,
) -> Option<Outcome> {
    let job = match params.get("name").and_then(Value::as_str)? {
        "slow_job" if declared(params) => slow_job(state),
        "long_job" if !declared(params) => return Some(missing_capability()),
        "long_job" => match long_job(params.get("arguments"), state) {
            Ok(job) => job,
            // Invalid input is a tool execution error, and nothing ran (SEP-1303).
            Err(usage) => return Some(Ok(usage)),
        },
        _ => return None,
    };
    Some(Ok(create(id, job, holder, state)))
}

/// Creates the task of `job` for request `id`, counted as one execution of its tool: its
/// `CreateTaskResult`.
fn create(id: &Value, job: Job, holder: &Holder, state: &State) -> Value {
    let tool = job.tool;
    tools::ran(state, tool, id);
    let (task_id, handle) = state.mcp().tasks.create(holder.clone(), job);
    state.record(|a| {
        a.tasks_created += 1;
        a.created_tasks.push(CreatedTask {
            tool: tool.to_owned(),
            task_id,
            runtime_session_id: holder.runtime_session.clone(),
        });
    });
    handle
}

/// `slow_job`'s task, as rmcp models it.
fn slow_job(state: &State) -> Job {
    let mut result = tools::slow_job_result();
    result["resultType"] = json!("complete");
    Job {
        tool: "slow_job",
        length: state.config.slow_job_duration,
        ask: false,
        fail: false,
        result,
        declined: Value::Null,
        ttl: None,
        poll_interval: SLOW_JOB_POLL_INTERVAL,
    }
}

/// `long_job`'s task for its arguments, or the tool error that says what it takes.
fn long_job(arguments: Option<&Value>, state: &State) -> Result<Job, Value> {
    let usage = || {
        tools::text_result(
            "long_job takes {\"seconds\": a whole number, \"ask\": a boolean, \"fail\": a \
             boolean}, each optional",
            true,
        )
    };
    let argument = |name: &str| arguments.and_then(|a| a.get(name)).filter(|v| !v.is_null());
    let flag = |name: &str| match argument(name) {
        None => Ok(false),
        Some(value) => value.as_bool().ok_or_else(usage),
    };
    let length = match argument("seconds") {
        None => state.config.long_job_duration,
        Some(value) => Duration::from_secs(value.as_u64().ok_or_else(usage)?),
    };
    let done = format!("long_job done after {} s", length.as_secs());
    Ok(Job {
        tool: "long_job",
        length,
        ask: flag("ask")?,
        fail: flag("fail")?,
        result: tools::text_result(&done, false),
        declined: tools::text_result(
            "long_job stopped at its half: the user declined to go on",
            true,
        ),
        ttl: Some(state.config.task_ttl),
        poll_interval: state.config.task_poll_interval,
    })
}

/// `tasks/get`, `tasks/update`, `tasks/cancel` in either era, of a task `holder`'s server
/// holds. Each is recorded in the audit once the capability is checked.
pub(super) fn request(method: &str, params: &Value, holder: &Holder, state: &State) -> Outcome {
    if !declared(params) {
        return missing_capability();
    }
    let Some(task_id) = params.get("taskId").and_then(Value::as_str) else {
        return Err((-32602, "Invalid params: no taskId".to_owned(), None));
    };
    let answer = {
        let mut memory = state.mcp();
        let tasks = &mut memory.tasks;
        let acknowledged = |()| json!({"resultType": "complete"});
        match method {
            "tasks/get" => tasks.get(task_id, holder),
            "tasks/update" => {
                let responses = params.get("inputResponses").unwrap_or(&Value::Null);
                tasks.update(task_id, holder, responses).map(acknowledged)
            }
            _ => tasks.cancel(task_id, holder).map(acknowledged),
        }
    };
    state.record(|a| {
        a.task_requests.push(TaskRequest {
            method: method.to_owned(),
            task_id: task_id.to_owned(),
            runtime_session_id: holder.runtime_session.clone(),
            found: answer.is_ok(),
        })
    });
    answer.map_err(|missing| (-32602, not_there(missing), None))
}

/// The message of -32602 for a task that is not there, in the extension's words.
fn not_there(missing: Missing) -> String {
    match missing {
        Missing::Expired => "Failed to retrieve task: Task has expired".to_owned(),
        Missing::NotFound => "Failed to retrieve task: Task not found".to_owned(),
    }
}
