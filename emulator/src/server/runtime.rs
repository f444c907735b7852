//! The runtime door: `InvokeAgentRuntime` and `StopRuntimeSession` at
//! `/runtimes/{arn}/…`, with runtime sessions, their microVMs and the MCP sessions they issue.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use tokio::time::Instant;

use super::answer::{
    AnswerBody, SESSION_NOT_FOUND_CODE, SESSION_NOT_FOUND_MESSAGE, aws_error, mcp_session_refusal,
    plain_json, respond, with_session,
};
use super::auth::{RUNTIME_METADATA_OPERATION, authenticate, refuse_runtime, runtime_metadata};
use super::faults::{refuse_busy, serve_mcp};
use super::{Answer, RUNTIME_SESSION_ID, record_metadata_request, record_received};
use crate::lifecycle::McpCheck;
use crate::mcp;
use crate::{PlatformForm, Routed, State};

/// The runtime door: `InvokeAgentRuntime` and `StopRuntimeSession`, behind SigV4 or bearer
/// tokens.
pub(super) async fn runtime(parts: &http::request::Parts, body: &Bytes, state: &State) -> Answer {
    let bearer = state.bearer_door();
    if bearer && let Some(arn) = metadata_route(parts.uri.path()) {
        record_metadata_request(state, parts, body);
        return Ok(runtime_metadata(parts, &arn, state));
    }
    let auth = authenticate(parts, body, state);
    let operation = route(parts.uri.path()).map(|(_, operation)| operation);
    record_received(state, parts, body, operation, &auth);
    // A SigV4 runtime checks the signature before anything else (as it always has here); a
    // bearer runtime must know the runtime first, since the runtime decides the door.
    if !bearer && let Some(refused) = refuse_runtime(&auth, parts, state) {
        return Ok(refused);
    }
    let Some((arn, operation)) = route(parts.uri.path()) else {
        return Ok(aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No such operation.",
        ));
    };
    if parts.method != http::Method::POST {
        return Ok(aws_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowedException",
            "POST only.",
        ));
    }
    if arn != state.config.runtime_arn {
        return Ok(aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No runtime with this ARN.",
        ));
    }
    if bearer && let Some(refused) = refuse_runtime(&auth, parts, state) {
        return Ok(refused);
    }
    let session = parts
        .headers
        .get(RUNTIME_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match operation {
        "stopruntimesession" => Ok(stop(session, state)),
        _ => invoke(parts, body, session, state).await,
    }
}

/// `/runtimes/{arn}/{operation}`, the ARN percent-decoded.
fn route(path: &str) -> Option<(String, &str)> {
    let (arn, operation) = runtime_path(path)?;
    matches!(operation, "invocations" | "stopruntimesession").then_some((arn, operation))
}

/// `/runtimes/{arn}/invocations/.well-known/oauth-protected-resource`: the ARN.
fn metadata_route(path: &str) -> Option<String> {
    let (arn, operation) = runtime_path(path)?;
    (operation == RUNTIME_METADATA_OPERATION).then_some(arn)
}

fn runtime_path(path: &str) -> Option<(String, &str)> {
    let rest = path.strip_prefix("/runtimes/")?;
    let (arn, operation) = rest.split_once('/')?;
    let arn = percent_encoding::percent_decode_str(arn)
        .decode_utf8()
        .ok()?
        .into_owned();
    Some((arn, operation))
}

fn stop(session: Option<String>, state: &State) -> Response<AnswerBody> {
    let Some(session) = session else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The runtime session id is required.",
        );
    };
    let known = state.runtime().stop(&session);
    if !known {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No such runtime session.",
        );
    }
    state.record(|a| a.sessions_stopped += 1);
    respond(
        StatusCode::OK,
        &[
            (RUNTIME_SESSION_ID, &session),
            ("content-type", "application/json"),
        ],
        "{}",
    )
}

async fn invoke(
    parts: &http::request::Parts,
    body: &Bytes,
    session: Option<String>,
    state: &State,
) -> Answer {
    let inspected = mcp::inspect(body);
    let initialize = inspected.method.as_deref() == Some("initialize");
    let era = mcp::era(state, &parts.headers, &inspected);
    // A header that is not text names no session the server issued.
    let mcp_session = parts
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap_or_default());
    let (session, made_up) = match session {
        Some(session) => (session, false),
        None => route_by_mcp_session(mcp_session, state),
    };
    let arrive = || {
        let (now, limits) = (Instant::now(), state.limits());
        let mut runtime = state.runtime();
        let arrival = runtime.arrive(&session, now, &limits);
        // A request of MCP 2026-07-28 is in no MCP session: the server neither requires nor
        // checks one (rmcp 3.11 serves it statelessly whatever `Mcp-Session-Id` it carries).
        let check =
            if arrival.provisioning || arrival.terminating || initialize || era.sessionless() {
                McpCheck::Accepted
            } else {
                runtime.check(
                    &session,
                    arrival.microvm,
                    mcp_session,
                    state.config.stateful,
                    now,
                    &limits,
                )
            };
        (arrival, check)
    };
    let (mut arrival, mut check) = arrive();
    state.record(|a| {
        a.sessions_started += u64::from(arrival.new_session);
        a.microvms_started += u64::from(arrival.new_microvm);
    });
    // A request that started a runtime session the platform made up for it could never come
    // back to it (its client names none): it is held while the microVM provisions, as the
    // first operation on a session is, and served (the refusal is for "a second operation" on
    // a session being provisioned: the MCP contract's error table).
    if made_up && arrival.provisioning {
        let left = state.config.provisioning.saturating_sub(arrival.age);
        tokio::time::sleep(left).await;
        (arrival, check) = arrive();
    }
    let session_header = (RUNTIME_SESSION_ID, session.as_str());
    // The platform refuses before the microVM's MCP server sees the request while the microVM
    // terminates after its idle timeout or lifetime, and while a new one provisions.
    if arrival.terminating {
        state.record(|a| a.busy_terminating += 1);
        return Ok(with_session(
            refuse_busy(state, &inspected.id),
            Some(session_header),
        ));
    }
    // A microVM that does not become ready in time: the platform gives up on it when it has
    // been starting for the limit, and answers before anything reaches the container.
    let tool_call = inspected.method.as_deref() == Some("tools/call");
    if let Some(form) = state.take_initialization_fault(tool_call) {
        let limit = state.config.initialization_limit;
        tokio::time::sleep(limit.saturating_sub(arrival.age)).await;
        state.runtime().fail(&session, arrival.microvm);
        state.record(|a| a.initializations_timed_out += 1);
        let answer = initialization_timed_out(state, form, &inspected.id);
        return Ok(with_session(answer, Some(session_header)));
    }
    if arrival.provisioning {
        return Ok(with_session(
            refuse_busy(state, &inspected.id),
            Some(session_header),
        ));
    }
    if let Some((status, code, message)) = session_refusal(check) {
        let response = mcp_session_refusal(state, &inspected.id, status, code, message);
        return Ok(with_session(response, Some(session_header)));
    }
    let call = mcp::Call {
        headers: &parts.headers,
        era: &era,
        holder: mcp::Holder {
            runtime_session: Some(session.clone()),
            microvm: arrival.microvm,
        },
    };
    let mut answer = serve_mcp(inspected, call, state, Some(session_header)).await;
    // `initialize` always opens a new MCP session, whatever it carried.
    if initialize && let Ok(response) = &mut answer {
        issue_mcp_session(response, &session, arrival.microvm, state);
    }
    answer
}

/// The MCP server's refusal of a request outside a session it knows: its status, code and
/// message.
fn session_refusal(check: McpCheck) -> Option<(StatusCode, i64, &'static str)> {
    match check {
        McpCheck::Accepted => None,
        McpCheck::Missing => Some((
            StatusCode::BAD_REQUEST,
            MISSING_SESSION_CODE,
            MISSING_SESSION_MESSAGE,
        )),
        McpCheck::NotFound => Some((
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND_CODE,
            SESSION_NOT_FOUND_MESSAGE,
        )),
    }
}

/// A new MCP session on the microVM, named on an `initialize`'s successful answer.
fn issue_mcp_session<B>(response: &mut Response<B>, session: &str, microvm: u64, state: &State) {
    if response.status() != StatusCode::OK {
        return;
    }
    let mcp_session = state.runtime().issue(session, microvm);
    state.record(|a| a.mcp_sessions_started += 1);
    if let Ok(value) = HeaderValue::from_str(&mcp_session) {
        response.headers_mut().insert("mcp-session-id", value);
    }
}

/// Where the runtime routes an invocation that names no runtime session: by its
/// `Mcp-Session-Id` to the runtime session whose microVM issued it, else to a new one — as
/// AgentCore routes (developer guide, MCP protocol contract: the platform uses `Mcp-Session-Id`
/// for stickiness). Recorded in [`Audit::routed`](crate::Audit::routed).
/// The runtime session, and whether it is a new one made up for the request.
fn route_by_mcp_session(mcp_session: Option<&str>, state: &State) -> (String, bool) {
    let issuer = mcp_session.and_then(|id| state.runtime().issuer_of(id));
    let by_mcp_session = issuer.is_some();
    let session = issuer.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    state.record(|a| {
        a.routed.push(Routed {
            mcp_session_id: mcp_session.map(str::to_owned),
            runtime_session_id: session.clone(),
            by_mcp_session,
        })
    });
    (session, !by_mcp_session)
}

/// The platform's answer to a request whose microVM did not become ready within the limit:
/// -32010 in an HTTP 200, or HTTP 424 `RuntimeClientError`, with AgentCore's message naming
/// the limit in whole seconds (rounded up).
fn initialization_timed_out(
    state: &State,
    form: PlatformForm,
    id: &serde_json::Value,
) -> Response<AnswerBody> {
    let limit = state.config.initialization_limit;
    let seconds = limit.as_secs() + u64::from(limit.subsec_nanos() > 0);
    let message = agentcore_tower::contract::initialization_time_exceeded_message(seconds);
    match form {
        PlatformForm::Http => aws_error(
            StatusCode::FAILED_DEPENDENCY,
            "RuntimeClientError",
            &message,
        ),
        _ => {
            let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32010, "message": message}});
            plain_json(StatusCode::OK, reply.to_string())
        }
    }
}

/// A stateful runtime MCP server's 400 for a request without `Mcp-Session-Id`: the code and
/// message of the MCP Python SDK's Streamable HTTP transport (FastMCP's).
const MISSING_SESSION_CODE: i64 = -32600;

const MISSING_SESSION_MESSAGE: &str = "Bad Request: Missing session ID";
