//! The emulator's own MCP server: a few tools, one of them not idempotent, in every protocol
//! version from 2024-11-05 to 2026-07-28 — each request read in its own era ([`Era`]).

mod listen;
mod modern;
mod tasks;
mod tools;

use std::collections::HashMap;

use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::State;
use agentcore_tower::protocol;

pub(crate) use tasks::Holder;

/// The `_meta` key of the client's per-request capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A method's outcome: its result, or an error's code, message and data.
type Outcome = Result<Value, (i64, String, Option<Value>)>;

/// What the emulator's MCP servers keep between requests of MCP 2026-07-28.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The tasks, each held by the microVM that created it.
    pub(crate) tasks: tasks::Tasks,
    /// The open `subscriptions/listen` streams.
    pub(crate) listeners: listen::Listeners,
    /// The `requestState`s `confirm` issued, with the arguments of the call each is for.
    pub(crate) request_states: HashMap<String, Value>,
}

/// What a POST's JSON-RPC body asks for, as far as faults and routing care.
pub(crate) struct Inspected {
    /// The parsed body (a message or a batch), `None` when it is not JSON.
    pub(crate) value: Option<Value>,
    /// The one message's method.
    pub(crate) method: Option<String>,
    /// The one message's id.
    pub(crate) id: Value,
}

pub(crate) fn inspect(body: &[u8]) -> Inspected {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let (method, id) = match &value {
        Some(Value::Object(m)) => (
            m.get("method").and_then(Value::as_str).map(str::to_owned),
            m.get("id").cloned().unwrap_or(Value::Null),
        ),
        _ => (None, Value::Null),
    };
    Inspected { value, method, id }
}

/// The era a request is of, as the emulator's MCP server reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// The `initialize` era (2024-11-05 … 2025-11-25): MCP sessions, no standard headers.
    Legacy,
    /// MCP 2026-07-28 or later: its `MCP-Protocol-Version` header or its `_meta` names a
    /// stateless version. No MCP session, the standard headers checked against the body.
    Modern,
    /// A server that speaks the `initialize` era met a header naming a version it does not
    /// speak: the 400 a 2025 SDK server answers.
    Unspoken(String),
    /// A modern-only server met a request of the `initialize` era: refused before anything
    /// runs, in no MCP session ([`modern::refuse`]).
    Refused(Refusal),
}

/// Why a modern-only server refuses a request of the `initialize` era.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `initialize`, whatever version it asks for.
    Initialize,
    /// An `MCP-Protocol-Version` header, but no version in `_meta`.
    NoMetaVersion,
    /// Neither a header nor a version in `_meta`.
    NoHeader,
}

impl Era {
    /// Whether the request is in no MCP session: none is issued, none required.
    pub(crate) fn sessionless(&self) -> bool {
        matches!(self, Era::Modern | Era::Refused(_))
    }
}

/// Reads the era of a request. `initialize` is always of the `initialize` era, whatever it
/// names (as rmcp 3.11's server routes it: "An `initialize` request selects legacy semantics
/// whatever version it names"); it negotiates down. At a server that speaks no version with
/// `initialize`, a request is of 2026-07-28 or refused ([`modern_only_era`]).
pub(crate) fn era(state: &State, headers: &HeaderMap, inspected: &Inspected) -> Era {
    let header = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    let meta = inspected.value.as_ref().and_then(protocol::version_in_meta);
    let supported = supported_versions(state);
    if supported.iter().all(|v| protocol::is_stateless(v)) {
        return modern_only_era(header, meta, inspected);
    }
    if inspected.method.as_deref() == Some("initialize") {
        return Era::Legacy;
    }
    let stateless = |v: Option<&str>| v.is_some_and(protocol::is_stateless);
    let speaks_modern = supported.iter().any(|v| protocol::is_stateless(v));
    if speaks_modern && (stateless(header) || stateless(meta)) {
        return Era::Modern;
    }
    match header {
        Some(version)
            if !supported.contains(&version)
                && (protocol::KNOWN_VERSIONS.contains(&version)
                    || protocol::is_stateless(version)) =>
        {
            Era::Unspoken(version.to_owned())
        }
        _ => Era::Legacy,
    }
}

/// The era of a request at a modern-only server, as rmcp 3.11's modern-only configuration
/// reads it: a request (one message with an id) that names no version in `_meta` nor a
/// stateless one in its header is refused, `initialize` always; anything else (a
/// notification, a batch, a response, a body that is not JSON) is answered as 2026-07-28.
fn modern_only_era(header: Option<&str>, meta: Option<&str>, inspected: &Inspected) -> Era {
    let request = inspected.method.is_some()
        && inspected
            .value
            .as_ref()
            .is_some_and(|v| v.get("id").is_some());
    let refusal = match (inspected.method.as_deref(), header) {
        _ if !request => return Era::Modern,
        (Some("initialize"), _) => Refusal::Initialize,
        _ if meta.is_some() || header.is_some_and(protocol::is_stateless) => return Era::Modern,
        (_, Some(_)) => Refusal::NoMetaVersion,
        (_, None) => Refusal::NoHeader,
    };
    Era::Refused(refusal)
}

/// The versions the emulator speaks, oldest first: every known one from the configured oldest
/// to the configured newest.
pub(crate) fn supported_versions(state: &State) -> Vec<&'static str> {
    let (oldest, newest) = (
        state.config.oldest_protocol_version.as_str(),
        state.config.newest_protocol_version.as_str(),
    );
    protocol::KNOWN_VERSIONS
        .iter()
        .copied()
        .filter(|v| (oldest..=newest).contains(v))
        .collect()
}

/// One request as the MCP server meets it: its headers (checked against the body in MCP
/// 2026-07-28), its era, and where it arrived (the microVM that holds the tasks it creates).
pub(crate) struct Call<'a> {
    pub(crate) headers: &'a HeaderMap,
    pub(crate) era: &'a Era,
    pub(crate) holder: Holder,
}

/// What the MCP server answers a POST.
pub(crate) enum Reply {
    /// Nothing to answer (notifications and responses): 202.
    Accepted,
    /// A JSON-RPC answer (a message or a batch) with its HTTP status.
    Answer(StatusCode, Value),
    /// A `subscriptions/listen` stream: its events, the acknowledgement already in it.
    Listen(tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>),
}

/// Answers a JSON-RPC message or batch.
pub(crate) async fn answer(value: &Value, call: &Call<'_>, state: &State) -> Reply {
    match call.era {
        Era::Modern => modern::answer(value, call, state).await,
        Era::Refused(refusal) => modern::refuse(*refusal, value, state),
        Era::Unspoken(version) => {
            // The MCP TypeScript SDK's 2025 transport (`validateProtocolVersion`): HTTP 400,
            // -32000, a null id, the versions it speaks newest first.
            let mut supported = supported_versions(state);
            supported.reverse();
            let message = format!(
                "Bad Request: Unsupported protocol version: {version} (supported versions: {})",
                supported.join(", ")
            );
            Reply::Answer(
                StatusCode::BAD_REQUEST,
                error(Value::Null, -32000, &message),
            )
        }
        Era::Legacy => {
            let answer = match value {
                Value::Array(batch) if !batch.is_empty() => {
                    let mut answers = Vec::new();
                    for message in batch {
                        answers.extend(answer_one(message, call, state).await);
                    }
                    (!answers.is_empty()).then_some(Value::Array(answers))
                }
                Value::Array(_) => Some(error(Value::Null, -32600, "Invalid Request: empty batch")),
                message => answer_one(message, call, state).await,
            };
            match answer {
                Some(answer) => Reply::Answer(StatusCode::OK, answer),
                None => Reply::Accepted,
            }
        }
    }
}

/// One message of the `initialize` era: `None` when nothing is to be answered. The tasks
/// extension is answered to a request that declares it, as in MCP 2026-07-28.
async fn answer_one(message: &Value, call: &Call<'_>, state: &State) -> Option<Value> {
    let Some(object) = message.as_object() else {
        return Some(error(Value::Null, -32600, "Invalid Request"));
    };
    let id = object.get("id").cloned();
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A response from the client (to a server request): nothing to answer.
        return None;
    };
    let id = id?; // A notification: nothing to answer.
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    let plain = |result: Result<Value, (i64, String)>| result.map_err(|(c, m)| (c, m, None));
    let outcome = match method {
        "initialize" => Ok(initialize(&params, state)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools::listed(false)})),
        "tools/call" => match tasks::call_tool(&id, &params, &call.holder, state) {
            Some(outcome) => outcome,
            None => plain(tools::call(&id, &params, false, state).await),
        },
        // The extension's methods: -32021 to a request that does not declare it, as the
        // extension's text requires.
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            tasks::request(method, &params, &call.holder, state)
        }
        // `server/discover` included: a server of this era does not know it, and a client of
        // 2026-07-28 in auto mode falls back to `initialize` on this answer.
        other => Err((-32601, format!("Method not found: {other}"), None)),
    };
    Some(response(id, outcome))
}

/// `initialize`: the version asked for when spoken here and one with `initialize`, else the
/// newest spoken here that has it (rmcp 3.11's `negotiate_protocol_version`: a 2026-07-28
/// client is answered 2025-11-25, its `LATEST_WITH_INITIALIZE`; the client decides whether it
/// can go on with that one). A server that speaks none refuses `initialize` before it gets
/// here ([`Refusal::Initialize`]).
fn initialize(params: &Value, state: &State) -> Value {
    let supported = supported_versions(state);
    let with_initialize = |v: &&str| !protocol::is_stateless(v);
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| supported.contains(v) && with_initialize(v))
        .or_else(|| supported.iter().copied().rfind(with_initialize))
        .unwrap_or(protocol::LATEST_WITH_INITIALIZE);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": server_info(),
    })
}

/// One SSE event carrying a JSON-RPC message.
pub(crate) fn sse_event(message: &Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// Who the server is.
fn server_info() -> Value {
    json!({"name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")})
}

/// A JSON-RPC response of a result or an error (with its data, when it has some).
fn response(id: Value, outcome: Outcome) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message, data)) => {
            let mut answer = error(id, code, &message);
            if let Some(data) = data {
                answer["error"]["data"] = data;
            }
            answer
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests;
