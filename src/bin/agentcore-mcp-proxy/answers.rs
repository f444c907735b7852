//! What both transports share: which requests of a message still wait for an answer, and the
//! JSON-RPC errors that answer them when the stack could not.

use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde_json::{Value, json};

use crate::stack::{CALL_TIMEOUT, ResBody};

/// The JSON-RPC error code of a failure on the way to the server.
pub const PROXY_ERROR: i64 = -32000;

/// What messages call the server: set once at start.
static UPSTREAM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Names the server in messages: `AgentCore` (the default: a runtime, a gateway) or `the MCP
/// server` (any other URL).
pub fn set_upstream(name: &'static str) {
    let _ = UPSTREAM.set(name);
}

/// The server, as messages name it.
pub fn upstream() -> &'static str {
    UPSTREAM.get().copied().unwrap_or("AgentCore")
}

/// Whether requests carry a bearer token (else a SigV4 signature): set once at start.
static BEARER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that requests carry a bearer token, so that a 401 is read as its refusal.
pub fn set_bearer() {
    BEARER.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn bearer() -> bool {
    BEARER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Its possessive: `AgentCore's`, `the MCP server's`.
fn upstream_s() -> String {
    format!("{}'s", upstream())
}

/// The requests (messages with a method and an id) of one client message or batch that have no
/// answer yet.
#[derive(Debug, Default)]
pub struct OpenRequests {
    ids: Vec<Value>,
}

impl OpenRequests {
    pub fn of(message: &Value) -> Self {
        let mut ids = Vec::new();
        let mut add = |m: &Value| {
            if let Value::Object(m) = m
                && m.get("method").is_some_and(Value::is_string)
                && let Some(id) = m.get("id")
            {
                ids.push(id.clone());
            }
        };
        match message {
            Value::Array(batch) => batch.iter().for_each(&mut add),
            one => add(one),
        }
        Self { ids }
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Marks the requests a server message (or batch) answers.
    pub fn answered_by(&mut self, message: &Value) {
        let mut answered = |m: &Value| {
            if let Value::Object(m) = m
                && !m.contains_key("method")
                && (m.contains_key("result") || m.contains_key("error"))
                && let Some(id) = m.get("id")
            {
                self.ids.retain(|open| open != id);
            }
        };
        match message {
            Value::Array(batch) => batch.iter().for_each(&mut answered),
            one => answered(one),
        }
    }

    /// An error answer for every open request, which are then answered.
    pub fn fail_all(&mut self, message: &str, data: Option<&Value>) -> Vec<Value> {
        self.ids
            .drain(..)
            .map(|id| error_response(&id, PROXY_ERROR, message, data))
            .collect()
    }
}

/// A JSON-RPC error response.
pub fn error_response(id: &Value, code: i64, message: &str, data: Option<&Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// Parses one server message; `None` (with a warning) when it is not JSON.
pub fn parse_server_message(data: &[u8]) -> Option<Value> {
    let data = data.trim_ascii();
    if data.is_empty() {
        return None;
    }
    match serde_json::from_slice(data) {
        Ok(message) => Some(message),
        Err(e) => {
            tracing::warn!(
                "{} sent a message that is not JSON ({e}): {}",
                upstream(),
                preview(data)
            );
            None
        }
    }
}

/// JSON text on one line: JSON holds no raw line break inside a string, so the ones outside
/// are whitespace.
pub fn one_line(data: &[u8]) -> Vec<u8> {
    data.trim_ascii()
        .iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect()
}

/// The next frame of an answer, which must come within [`CALL_TIMEOUT`]: a stream may run long,
/// but not stall. The error is the message for the client.
pub async fn next_frame(body: &mut ResBody) -> Result<Option<Frame<bytes::Bytes>>, String> {
    match tokio::time::timeout(CALL_TIMEOUT, body.frame()).await {
        Ok(None) => Ok(None),
        Ok(Some(Ok(frame))) => Ok(Some(frame)),
        Ok(Some(Err(e))) => Err(broke(&e)),
        Err(_) => Err(stalled()),
    }
}

/// The message for an answer that broke off.
pub fn broke(error: &(dyn std::error::Error + 'static)) -> String {
    format!(
        "the connection broke while {} was answering: {}",
        upstream(),
        chain(error)
    )
}

/// The message for an answer that stopped coming.
pub fn stalled() -> String {
    format!(
        "{} stopped sending its answer for {} s",
        upstream(),
        CALL_TIMEOUT.as_secs()
    )
}

/// The message for an answer that did not answer.
pub fn unanswered(status: StatusCode) -> String {
    format!(
        "{} answer (HTTP {}) carried no JSON-RPC response to this request",
        upstream_s(),
        status.as_u16()
    )
}

/// The message and `error.data` for a call the stack gave up on.
pub fn describe_failure(error: &(dyn std::error::Error + 'static)) -> (String, Value) {
    if error.is::<tower::timeout::error::Elapsed>() {
        return (
            format!(
                "no answer from {} within {} s; the request may have run",
                upstream(),
                CALL_TIMEOUT.as_secs()
            ),
            json!({"failure": "timed out"}),
        );
    }
    let mut data = json!({});
    if let Some(ours) = error.downcast_ref::<agentcore_tower::Error>() {
        data["failure"] = json!(ours.failure_kind().to_string());
        if let Some(record) = ours.record() {
            data["attempts"] = json!(record.to_string().lines().collect::<Vec<_>>());
        }
    }
    let what = match upstream() {
        "AgentCore" => "AgentCore request",
        _ => "the request to the MCP server",
    };
    (format!("{what} failed: {}", chain(error)), data)
}

/// What ending a session at exit is called in the log.
pub struct Ending {
    /// When it worked ("runtime session stopped").
    pub done: &'static str,
    /// What was being done, before why it did not work ("stopping the runtime session").
    pub doing: &'static str,
    /// Whether a 405 or 404 means only that the server lets the session expire by itself (an
    /// MCP DELETE), logged at debug.
    pub expires_anyway: bool,
}

/// Logs how ending a session at exit went: done, refused (with the answer's status and
/// message), or failed.
pub async fn log_ending(
    result: Result<http::Response<ResBody>, agentcore_tower::BoxError>,
    ending: &Ending,
) {
    let doing = ending.doing;
    match result {
        Ok(response) if response.status().is_success() => tracing::info!("{}", ending.done),
        Ok(response)
            if ending.expires_anyway
                && matches!(
                    response.status(),
                    StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
                ) =>
        {
            tracing::debug!(
                status = response.status().as_u16(),
                "the server did not end the MCP session (it expires by itself)"
            );
        }
        Ok(response) => {
            let status = response.status();
            let headers = response.headers().clone();
            let body = response
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            tracing::warn!("{doing}: {}", describe_status(status, &headers, &body).0);
        }
        Err(error) => tracing::warn!("{doing}: {}", describe_failure(error.as_ref()).0),
    }
}

/// The message and `error.data` for a non-2xx answer without a JSON-RPC body.
pub fn describe_status(
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
) -> (String, Value) {
    let error_type = agentcore_tower::record::aws_error_type(headers);
    let detail = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("message")
            .or_else(|| v.get("Message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let mut message = format!("{} answered HTTP {status}", upstream());
    if let Some(error_type) = error_type {
        message.push_str(&format!(" ({error_type})"));
    }
    if let Some(detail) = &detail {
        message.push_str(&format!(": {detail}"));
    }
    let mut data = json!({"httpStatus": status.as_u16()});
    if let Some(error_type) = error_type {
        data["errorType"] = json!(error_type);
    }
    // A refused bearer token (or a server that wants one): where the OAuth flow that gets one
    // starts.
    if status == StatusCode::UNAUTHORIZED {
        if bearer() {
            message.push_str(if detail.is_some() { " (" } else { ": " });
            message.push_str("the bearer token was refused");
            if detail.is_some() {
                message.push(')');
            }
        }
        if let Some(url) = agentcore_tower::auth::BearerChallenge::of(headers)
            .as_ref()
            .and_then(|c| c.resource_metadata())
        {
            data["resourceMetadata"] = json!(url);
        }
    }
    if detail.is_none() && !body.is_empty() {
        data["body"] = json!(preview(body));
    }
    (message, data)
}

/// Whether a body is a JSON-RPC message or batch.
pub fn is_jsonrpc(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => m.contains_key("jsonrpc"),
        Ok(Value::Array(batch)) => {
            !batch.is_empty() && batch.iter().all(|m| m.get("jsonrpc").is_some())
        }
        _ => false,
    }
}

/// An error and its causes, on one line.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

/// The start of a body, for a message.
pub fn preview(body: &[u8]) -> String {
    const LIMIT: usize = 1024;
    let text = String::from_utf8_lossy(&body[..body.len().min(LIMIT)]);
    if body.len() > LIMIT {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_stay_open_until_answered() {
        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 9, "result": {}}
        ]);
        let mut open = OpenRequests::of(&batch);
        assert_eq!(open.ids, [json!(1), json!("b")]);
        // A server request with the same id is not an answer.
        open.answered_by(&json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
        open.answered_by(&json!([{"jsonrpc": "2.0", "id": 1, "result": {}}]));
        assert_eq!(open.ids, [json!("b")]);
        let errors = open.fail_all("gone", Some(&json!({"x": 1})));
        assert_eq!(
            errors,
            [
                json!({"jsonrpc": "2.0", "id": "b", "error": {"code": -32000, "message": "gone", "data": {"x": 1}}})
            ]
        );
        assert!(open.is_empty());
    }

    #[test]
    fn a_message_goes_on_one_line() {
        assert_eq!(one_line(b" {\"a\":\r\n 1}\n"), b"{\"a\":   1}");
    }
}
