//! The Tasks extension's messages as the layer reads and writes them
//! (`io.modelcontextprotocol/tasks`, modelcontextprotocol/ext-tasks
//! `specification/draft/tasks.md`).

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The extension's identifier.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` key of a request's client capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// MISSING_REQUIRED_CLIENT_CAPABILITY: what a server answers a request it can serve only with a
/// task when the client did not declare the extension.
const MISSING_CAPABILITY: i64 = -32021;

/// The code of the errors the layer writes itself (a task that failed to reach an end the
/// client can read): JSON-RPC's implementation-defined server error, with `data.kind` saying
/// which.
pub(super) const TASK_ERROR: i64 = -32000;

/// Whether a request declares the extension in its per-request capabilities.
pub(super) fn declares(message: &Value) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES))
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// Declares the extension in a request's `params._meta`, keeping every other capability;
/// `false` (and the message unchanged) when a member on the way is not an object.
pub(super) fn declare(message: &mut Value) -> bool {
    let mut at = message;
    for key in ["params", "_meta", CLIENT_CAPABILITIES, "extensions"] {
        let Some(object) = at.as_object_mut() else {
            return false;
        };
        let next = object.entry(key).or_insert_with(|| json!({}));
        if !next.is_object() {
            return false;
        }
        at = next;
    }
    at.as_object_mut()
        .map(|extensions| extensions.insert(EXTENSION.to_owned(), json!({})));
    true
}

/// Whether an answer is the error a server gives a client that did not declare the extension
/// for a request it runs only as a task: -32021 naming the extension among the capabilities it
/// requires.
pub(super) fn requires_tasks(answer: &Value) -> bool {
    let Some(error) = answer.get("error") else {
        return false;
    };
    error.get("code").and_then(Value::as_i64) == Some(MISSING_CAPABILITY)
        && error
            .pointer("/data/requiredCapabilities/extensions")
            .and_then(|extensions| extensions.get(EXTENSION))
            .is_some()
}

/// Whether a `server/discover` answer offers the extension (`capabilities.extensions`).
pub(super) fn offers_tasks(answer: &Value) -> bool {
    answer
        .pointer("/result/capabilities/extensions")
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// A task's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
    /// A status the extension does not define: polled on, as `working` is.
    Other(String),
}

/// A task as a `CreateTaskResult` or a `tasks/get` result says it is.
#[derive(Clone, Debug)]
pub(super) struct Task {
    pub(super) id: String,
    pub(super) status: Status,
    pub(super) status_message: Option<String>,
    pub(super) poll_interval: Option<Duration>,
    pub(super) ttl: Option<Duration>,
    /// `completed`: the request's own result.
    pub(super) result: Option<Value>,
    /// `failed`: the JSON-RPC error the request met.
    pub(super) error: Option<Value>,
    /// `input_required`: the server's outstanding requests, by key.
    pub(super) input_requests: Map<String, Value>,
}

impl Task {
    /// The task a result describes: `None` when it names no task id or no status.
    pub(super) fn of(result: &Value) -> Option<Task> {
        let id = result.get("taskId")?.as_str()?.to_owned();
        let status = match result.get("status")?.as_str()? {
            "working" => Status::Working,
            "input_required" => Status::InputRequired,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "cancelled" => Status::Cancelled,
            other => Status::Other(other.to_owned()),
        };
        let millis = |key: &str| {
            result
                .get(key)
                .and_then(Value::as_u64)
                .map(Duration::from_millis)
        };
        Some(Task {
            id,
            status,
            status_message: result
                .get("statusMessage")
                .and_then(Value::as_str)
                .map(str::to_owned),
            poll_interval: millis("pollIntervalMs"),
            ttl: millis("ttlMs"),
            result: result.get("result").cloned(),
            error: result.get("error").cloned(),
            input_requests: result
                .get("inputRequests")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    }

    /// Whether the task has ended.
    pub(super) fn is_terminal(&self) -> bool {
        matches!(
            self.status,
            Status::Completed | Status::Failed | Status::Cancelled
        )
    }
}

/// The task handle of an answer to a request the layer declared the extension on: its
/// `result`, when `resultType` is `"task"`.
pub(super) fn task_handle(answer: &Value) -> Option<Task> {
    let result = answer.get("result")?;
    (result.get("resultType").and_then(Value::as_str) == Some("task"))
        .then(|| Task::of(result))
        .flatten()
}

/// A request of the extension (`tasks/get`, `tasks/update`, `tasks/cancel`) for `task`, with
/// the `_meta` of the client's request (its protocol version, client information and
/// capabilities; the extension declared) and `extra` members of `params`.
pub(super) fn task_request(
    method: &str,
    id: &str,
    task: &str,
    meta: &Map<String, Value>,
    extra: Option<(&str, Value)>,
) -> Value {
    let mut params = Map::new();
    params.insert("taskId".to_owned(), json!(task));
    if let Some((key, value)) = extra {
        params.insert(key.to_owned(), value);
    }
    params.insert("_meta".to_owned(), Value::Object(meta.clone()));
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    declare(&mut request);
    request
}

/// The `_meta` a task's requests carry: the client's, without its progress token (a poll
/// reports no progress of its own).
pub(super) fn poll_meta(message: &Value) -> Map<String, Value> {
    let mut meta = message
        .pointer("/params/_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.remove("progressToken");
    meta
}

/// The answer to the client's request: `result`.
pub(super) fn result_message(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The answer to the client's request: an error.
pub(super) fn error_message(id: &Value, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// An error of the layer's own about task `task`: `kind` says what happened.
pub(super) fn task_error(task: &str, kind: &str, message: String, server: Option<Value>) -> Value {
    let mut data = json!({"kind": kind, "taskId": task});
    if let Some(server) = server {
        data["error"] = server;
    }
    json!({"code": TASK_ERROR, "message": message, "data": data})
}

/// The error of a `failed` task: the request's own JSON-RPC error, its message naming the
/// task, and the task id in its `data` (added to an object, or in one that keeps the server's
/// `data` under `data`).
pub(super) fn failed_error(task: &Task) -> Value {
    let mut error = task
        .error
        .clone()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"code": -32603, "message": "the task failed"}));
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the task failed");
    error["message"] = json!(format!("{message} (task {})", task.id));
    let data = match error.get_mut("data") {
        Some(Value::Object(data)) => {
            data.entry("taskId").or_insert_with(|| json!(task.id));
            return error;
        }
        Some(other) => json!({"taskId": task.id, "data": other.take()}),
        None => json!({"taskId": task.id}),
    };
    error["data"] = data;
    error
}

/// `notifications/progress` for the client's `token`.
pub(super) fn progress(token: &Value, progress: u64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": progress, "message": message},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_keeps_the_other_capabilities_and_refuses_odd_shapes() {
        let mut call = json!({"method": "tools/call", "params": {"name": "x", "_meta": {
            CLIENT_CAPABILITIES: {"sampling": {}, "extensions": {"other": {"a": 1}}}}}});
        assert!(!declares(&call));
        assert!(declare(&mut call));
        assert!(declares(&call));
        let capabilities = &call["params"]["_meta"][CLIENT_CAPABILITIES];
        assert_eq!(capabilities["sampling"], json!({}));
        assert_eq!(capabilities["extensions"]["other"], json!({"a": 1}));
        let mut bare = json!({"method": "tools/call"});
        assert!(declare(&mut bare));
        assert_eq!(
            bare["params"]["_meta"][CLIENT_CAPABILITIES]["extensions"][EXTENSION],
            json!({})
        );
        for odd in [
            json!({"params": []}),
            json!({"params": {"_meta": 1}}),
            json!([]),
        ] {
            let mut message = odd.clone();
            assert!(!declare(&mut message));
            assert_eq!(message, odd);
        }
    }

    #[test]
    fn only_minus_32021_naming_the_extension_requires_tasks() {
        let data = json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}});
        let error = |code: i64, data: Value| json!({"id": 1, "error": {"code": code, "message": "m", "data": data}});
        assert!(requires_tasks(&error(-32021, data.clone())));
        assert!(!requires_tasks(&error(-32020, data)));
        assert!(!requires_tasks(&error(-32021, json!(null))));
        assert!(!requires_tasks(&error(
            -32021,
            json!({"requiredCapabilities": {"extensions": {"other": {}}}})
        )));
        assert!(!requires_tasks(&json!({"id": 1, "result": {}})));
    }

    #[test]
    fn a_handle_is_a_task_result_only() {
        let handle = json!({"id": 1, "result": {"resultType": "task", "taskId": "t", "status": "working",
            "ttlMs": 60000, "pollIntervalMs": 5000}});
        let task = task_handle(&handle).unwrap();
        assert_eq!(task.id, "t");
        assert_eq!(task.status, Status::Working);
        assert_eq!(task.poll_interval, Some(Duration::from_secs(5)));
        assert_eq!(task.ttl, Some(Duration::from_secs(60)));
        let complete = json!({"id": 1, "result": {"resultType": "complete", "taskId": "t", "status": "working"}});
        assert!(task_handle(&complete).is_none());
        assert!(task_handle(&json!({"id": 1, "result": {"resultType": "task"}})).is_none());
    }

    #[test]
    fn a_failed_task_keeps_the_servers_error_and_names_the_task() {
        let task = |error: Value| Task {
            error: Some(error),
            ..Task::of(&json!({"taskId": "t-1", "status": "failed"})).unwrap()
        };
        let plain = failed_error(&task(json!({"code": -32603, "message": "boom"})));
        assert_eq!(
            plain,
            json!({"code": -32603, "message": "boom (task t-1)", "data": {"taskId": "t-1"}})
        );
        let object = failed_error(&task(json!({"code": 1, "message": "m", "data": {"x": 2}})));
        assert_eq!(object["data"], json!({"x": 2, "taskId": "t-1"}));
        let scalar = failed_error(&task(json!({"code": 1, "message": "m", "data": 7})));
        assert_eq!(scalar["data"], json!({"taskId": "t-1", "data": 7}));
    }
}
