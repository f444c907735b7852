//! MCP 2026-07-28 requests: each one self-contained (its version and the client's
//! capabilities in `_meta`, no `initialize`, no MCP session), checked as rmcp 3.11's server
//! checks it before anything runs, and answered with the results the revision asks for.
//!
//! The checks, first failure wins, with the HTTP status rmcp's `jsonrpc_http_status` gives
//! each code:
//!
//! 1. `_meta` names no version (a 2026-07-28 header alone): 400, -32602 "Invalid params:
//!    request _meta is missing or has malformed required fields: …" (rmcp's
//!    `validate_request_protocol_version_meta`; the Python SDK's ladder answers the same code).
//! 2. A standard header disagrees with the body, or is missing
//!    ([`protocol::check_request_headers`], the called tool's `x-mcp-header` annotations
//!    included): 400, -32020 `HeaderMismatch`, its message naming what disagrees.
//! 3. A version the emulator does not speak: 400, -32022 "Unsupported protocol version",
//!    `data: {"requested": …, "supported": [every version spoken]}` (rmcp's
//!    `ErrorData::unsupported_protocol_version`).
//! 4. No `clientCapabilities` in `_meta`: 400, -32602 as in 1 (rmcp requires both keys of
//!    `RequestMetaObject::DRAFT_REQUIRED_KEYS`).
//!
//! Then a method the revision does not have (`ping` among them, as rmcp answers it): 404,
//! -32601. Errors of a method (an unknown tool or task, a forged `requestState`) are
//! JSON-RPC errors in an HTTP 200.
//!
//! A modern-only server ([`oldest_protocol_version`] 2026-07-28) refuses a request of the
//! `initialize` era before these checks: [`refuse`].
//!
//! [`oldest_protocol_version`]: crate::EmulatorConfig::oldest_protocol_version

use http::StatusCode;
use serde_json::{Value, json};

use super::{
    CLIENT_CAPABILITIES, Call, Outcome, Refusal, Reply, error, response, server_info,
    supported_versions, tasks, tools,
};
use crate::State;
use agentcore_tower::protocol;

/// The key of `confirm`'s one input request.
const CONFIRM_INPUT: &str = "confirm";

/// The HTTP status of a 2026-07-28 answer, as rmcp 3.11's `jsonrpc_http_status` maps a
/// JSON-RPC error code (the Python SDK's `ERROR_CODE_HTTP_STATUS` agrees on these).
fn status_of(code: i64) -> StatusCode {
    match code {
        -32022..=-32020 => StatusCode::BAD_REQUEST,
        -32601 => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The answer of an outcome: a result gets `resultType: "complete"` unless it has its own
/// (SEP-2322: a 2026-07-28 server includes it in every result).
fn reply(id: Value, mut outcome: Outcome) -> Reply {
    if let Ok(Value::Object(result)) = &mut outcome {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
    let status = match &outcome {
        Ok(_) => StatusCode::OK,
        Err((code, _, _)) => status_of(*code),
    };
    Reply::Answer(status, response(id, outcome))
}

/// The 400 of a `_meta` without the keys every 2026-07-28 request carries.
fn invalid_meta(id: Value, missing: &[&str]) -> Reply {
    let message = format!(
        "Invalid params: request _meta is missing or has malformed required fields: {}",
        missing.join(", ")
    );
    Reply::Answer(StatusCode::BAD_REQUEST, error(id, -32602, &message))
}

/// A modern-only server's answer to a request of the `initialize` era, an HTTP 400 with the
/// request's id, as rmcp 3.11's modern-only configuration answers it: `initialize` gets
/// `ErrorData::unsupported_protocol_version` (-32022 naming the versions spoken); a request with
/// a header but no `_meta` version, `validate_required_protocol_meta`'s -32602; one with neither,
/// `validate_required_protocol_header`'s -32020.
pub(super) fn refuse(refusal: Refusal, value: &Value, state: &State) -> Reply {
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let (code, message, data) = match refusal {
        Refusal::Initialize => {
            let requested = value.pointer("/params/protocolVersion").cloned();
            let data = json!({"requested": requested, "supported": supported_versions(state)});
            (-32022, "Unsupported protocol version", Some(data))
        }
        Refusal::NoMetaVersion => (
            -32602,
            "Invalid params: request requires protocolVersion in request _meta",
            None,
        ),
        Refusal::NoHeader => (
            -32020,
            "Missing MCP-Protocol-Version header for request requiring per-request protocol metadata",
            None,
        ),
    };
    let answer = response(id, Err((code, message.to_owned(), data)));
    Reply::Answer(StatusCode::BAD_REQUEST, answer)
}

/// Answers one request of MCP 2026-07-28.
pub(super) async fn answer(value: &Value, call: &Call<'_>, state: &State) -> Reply {
    let Some(object) = value.as_object() else {
        // A batch, or no message at all: the revision takes one message per POST.
        return Reply::Answer(
            StatusCode::BAD_REQUEST,
            error(
                Value::Null,
                -32600,
                "Invalid Request: the body must be one JSON-RPC request or notification",
            ),
        );
    };
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return Reply::Answer(
            StatusCode::BAD_REQUEST,
            error(
                Value::Null,
                -32600,
                "Invalid Request: a stateless server takes no JSON-RPC responses",
            ),
        );
    };
    let Some(id) = object.get("id").cloned() else {
        // A notification: acknowledged and dropped, as the SDKs' 2026-07-28 servers do (the
        // revision has no client notification over HTTP).
        return Reply::Accepted;
    };
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    let capabilities = params
        .pointer("/_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES))
        .filter(|c| c.is_object());
    let Some(version) = protocol::version_in_meta(value) else {
        let mut missing = vec![protocol::PROTOCOL_VERSION_META];
        missing.extend(capabilities.is_none().then_some(CLIENT_CAPABILITIES));
        return invalid_meta(id, &missing);
    };
    let schema = (method == "tools/call")
        .then(|| params.get("name").and_then(Value::as_str))
        .flatten()
        .and_then(tools::input_schema);
    if let Err(reason) = protocol::check_request_headers(call.headers, value, schema.as_ref()) {
        state.record(|a| a.header_mismatches += 1);
        return reply(id, Err((-32020, reason, None)));
    }
    let supported = supported_versions(state);
    if !supported.contains(&version) {
        let data = json!({"requested": version, "supported": supported});
        return reply(
            id,
            Err((
                -32022,
                "Unsupported protocol version".to_owned(),
                Some(data),
            )),
        );
    }
    if capabilities.is_none() {
        return invalid_meta(id, &[CLIENT_CAPABILITIES]);
    }
    match method {
        "server/discover" => reply(id, Ok(discover(state))),
        // The caching hints rmcp's `fill_missing_cache_hints` gives a list that sets none:
        // immediately stale, this client's only.
        "tools/list" => reply(
            id,
            Ok(json!({"tools": tools::listed(true), "ttlMs": 0, "cacheScope": "private"})),
        ),
        "tools/call" => tools_call(id, &params, call, state).await,
        "subscriptions/listen" => listen(id, &params, state),
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            reply(id, tasks::request(method, &params, &call.holder, state))
        }
        other => reply(
            id,
            Err((-32601, format!("Method not found: {other}"), None)),
        ),
    }
}

/// The server's capabilities in MCP 2026-07-28: tools whose list may change (told on a
/// `subscriptions/listen` stream), and the tasks extension.
fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "extensions": {tasks::EXTENSION: {}}})
}

/// `server/discover`: rmcp 3.11's `DiscoverResult` as `from_server_info` fills it — every
/// version spoken, the capabilities, the caching hints of `DiscoverResult::new` (0 ms,
/// private) and the server in `_meta`.
fn discover(state: &State) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(state),
        "capabilities": capabilities(),
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
    })
}

/// `tools/call`: `confirm`'s multi round-trip, a task ([`tasks::call_tool`]: `long_job`, and
/// `slow_job` for a client that declares the extension), or a plain call.
async fn tools_call(id: Value, params: &Value, call: &Call<'_>, state: &State) -> Reply {
    if params.get("name").and_then(Value::as_str) == Some("confirm") {
        return reply(id.clone(), confirm(&id, params, state));
    }
    if let Some(outcome) = tasks::call_tool(&id, params, &call.holder, state) {
        return reply(id, outcome);
    }
    let outcome = tools::call(&id, params, true, state).await;
    reply(id, outcome.map_err(|(code, message)| (code, message, None)))
}

/// `confirm`, a multi round-trip request (SEP-2322, in rmcp 3.11's `InputRequiredResult`
/// shape): without `inputResponses`, an `elicitation/create` form asking the user and an
/// opaque `requestState`, and nothing runs; re-sent with the user's answer and that state
/// (for the same arguments), it runs once if the user accepted and confirmed. A `requestState`
/// the emulator did not issue for these arguments is refused with the Python SDK's wire error
/// (-32602 "Invalid or expired requestState"). A state may be used again: the emulator plays a
/// stateless server, so a re-sent second leg runs again (NOT idempotent).
fn confirm(id: &Value, params: &Value, state: &State) -> Outcome {
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let action = arguments
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("the action")
        .to_owned();
    let Some(responses) = params.get("inputResponses") else {
        let request_state = uuid::Uuid::new_v4().to_string();
        state
            .mcp()
            .request_states
            .insert(request_state.clone(), arguments);
        state.record(|a| a.inputs_required += 1);
        return Ok(json!({
            "resultType": "input_required",
            "inputRequests": {CONFIRM_INPUT: {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": format!("Confirm {action}?"),
                "requestedSchema": {
                    "type": "object",
                    "properties": {"confirmed": {"type": "boolean", "title": "Confirm"}},
                    "required": ["confirmed"],
                },
            }}},
            "requestState": request_state,
        }));
    };
    let issued = params
        .get("requestState")
        .and_then(Value::as_str)
        .is_some_and(|s| state.mcp().request_states.get(s) == Some(&arguments));
    if !issued {
        return Err((
            -32602,
            "Invalid or expired requestState".to_owned(),
            Some(json!({"reason": "invalid_request_state"})),
        ));
    }
    let Some(answer) = responses.get(CONFIRM_INPUT) else {
        return Err((
            -32602,
            format!("Invalid params: inputResponses holds no `{CONFIRM_INPUT}`"),
            None,
        ));
    };
    let confirmed = answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.pointer("/content/confirmed") == Some(&Value::Bool(true));
    if !confirmed {
        return Ok(tools::text_result("not confirmed: nothing ran", false));
    }
    tools::ran(state, "confirm", id);
    Ok(tools::text_result(&format!("confirmed: {action}"), false))
}

/// `subscriptions/listen`: a stream that acknowledges the notifications it will carry (of the
/// emulator's, `toolsListChanged` alone), then carries what
/// [`Emulator::notify_listeners`](crate::Emulator::notify_listeners) pushes until
/// [`Emulator::end_listens`](crate::Emulator::end_listens) or the client goes.
fn listen(id: Value, params: &Value, state: &State) -> Reply {
    let asked = params.pointer("/notifications/toolsListChanged") == Some(&Value::Bool(true));
    let accepted = if asked {
        json!({"toolsListChanged": true})
    } else {
        json!({})
    };
    state.record(|a| a.listens += 1);
    Reply::Listen(state.mcp().listeners.open(id, accepted))
}
