//! One MCP POST answered: the fault a `tools/call` meets first (scripted or drawn at the
//! configured rates), then the emulator's MCP server.

use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

use super::answer::{
    AnswerBody, SESSION_NOT_FOUND_CODE, SESSION_NOT_FOUND_MESSAGE, aws_error, blob, json_answer,
    listen_stream, mcp_session_refusal, plain_json, respond, with_session,
};
use super::{Answer, DropConnection};
use crate::mcp;
use crate::{BusyForm, Fault, PlatformForm, RetryAfter, State};
use agentcore_tower::session_busy::{SESSION_BUSY_CODE, SESSION_BUSY_MESSAGE};

fn busy_reply(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": SESSION_BUSY_CODE, "message": SESSION_BUSY_MESSAGE}}).to_string()
}

/// Answers one MCP POST: faults for `tools/call`, then the emulator's MCP server, which reads
/// the request in its era (`call`). The runtime adds its session header (`session_header`);
/// the gateway has none.
pub(super) async fn serve_mcp(
    inspected: mcp::Inspected,
    call: mcp::Call<'_>,
    state: &State,
    session_header: Option<(&str, &str)>,
) -> Answer {
    let Some(value) = inspected.value.as_ref() else {
        let reply = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
        let response = if *call.era == mcp::Era::Modern {
            // MCP 2026-07-28: a parse error is a 400 (the Python SDK's modern entry).
            plain_json(StatusCode::BAD_REQUEST, reply.to_string())
        } else {
            json_answer(state, &reply)
        };
        return Ok(with_session(response, session_header));
    };
    let is_tool_call = inspected.method.as_deref() == Some("tools/call");
    let fault = match state.next_request_fault() {
        Some(fault) => Some(fault),
        None if is_tool_call => state.next_fault(),
        None => None,
    };
    // Faults that answer before anything runs.
    if let Some(refused) =
        fault.and_then(|fault| answer_before_run(fault, &inspected.id, &call, state))
    {
        return Ok(with_session(refused, session_header));
    }
    // `blob` answers of the `initialize` era only: its streamed answer has no 2026-07-28 form.
    if is_tool_call
        && *call.era == mcp::Era::Legacy
        && value.pointer("/params/name").and_then(Value::as_str) == Some("blob")
    {
        let size = value
            .pointer("/params/arguments/bytes")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        return Ok(with_session(
            blob(state, &inspected.id, size),
            session_header,
        ));
    }
    let answer = mcp::answer(value, &call, state).await;
    // Faults after the call ran.
    let response = match fault {
        Some(Fault::DropAfterRun) => {
            state.record(|a| a.dropped += 1);
            return Err(DropConnection);
        }
        Some(Fault::ServerError { after_run: true }) => internal_error(state),
        Some(Fault::Platform { error, form }) => platform_error(state, error, form, &inspected.id),
        Some(Fault::BusyAfterRun) => plain_json(StatusCode::OK, busy_reply(&inspected.id)),
        Some(Fault::Slow(delay)) => {
            tokio::time::sleep(delay).await;
            served(answer, state)
        }
        _ => served(answer, state),
    };
    Ok(with_session(response, session_header))
}

/// The MCP server's answer as it goes out.
fn served(answer: mcp::Reply, state: &State) -> Response<AnswerBody> {
    match answer {
        mcp::Reply::Accepted => respond(StatusCode::ACCEPTED, &[], Bytes::new()),
        mcp::Reply::Answer(StatusCode::OK, answer) => json_answer(state, &answer),
        // An error with a status of its own is plain JSON, as rmcp's and the Python SDK's
        // 2026-07-28 servers send it.
        mcp::Reply::Answer(status, answer) => plain_json(status, answer.to_string()),
        mcp::Reply::Listen(events) => listen_stream(events),
    }
}

/// The answer of a fault met before the request runs, or `None` when the fault waits for the
/// run (or is met elsewhere).
fn answer_before_run(
    fault: Fault,
    id: &Value,
    call: &mcp::Call<'_>,
    state: &State,
) -> Option<Response<AnswerBody>> {
    let response = match fault {
        Fault::Busy => refuse_busy(state, id),
        Fault::SessionExpired => {
            let session = call
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok());
            if let Some(session) = session {
                state.expire_mcp_session(session);
            }
            mcp_session_refusal(
                state,
                id,
                StatusCode::NOT_FOUND,
                SESSION_NOT_FOUND_CODE,
                SESSION_NOT_FOUND_MESSAGE,
            )
        }
        Fault::Throttle { retry_after } => throttled(state, retry_after),
        Fault::ServerError { after_run: false } => internal_error(state),
        Fault::ConflictLookAlike => {
            let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": SESSION_BUSY_CODE, "message": "Resource conflict - Resource already exists"}});
            json_answer(state, &reply)
        }
        Fault::Platform { error, form }
            if error != agentcore_tower::contract::PlatformError::RuntimeClientError =>
        {
            platform_error(state, error, form, id)
        }
        Fault::ExpiredToken => {
            state.record(|a| a.signature_failures += 1);
            aws_error(
                StatusCode::FORBIDDEN,
                "ExpiredTokenException",
                "The security token included in the request is expired",
            )
        }
        // At a gateway (the runtime takes it before): no microVM to wait for.
        Fault::InitializationTimedOut { form } => platform_error(
            state,
            agentcore_tower::contract::PlatformError::InitializationTimedOut,
            form,
            id,
        ),
        Fault::HealthCheckFailed => {
            let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32010, "message": "Runtime health check failed or timed out"}});
            json_answer(state, &reply)
        }
        _ => return None,
    };
    Some(response)
}

/// `ThrottlingException`, with the `Retry-After` (or `x-amz-retry-after`) asked for.
fn throttled(state: &State, retry_after: Option<RetryAfter>) -> Response<AnswerBody> {
    state.record(|a| a.throttled += 1);
    let mut response = aws_error(
        StatusCode::TOO_MANY_REQUESTS,
        "ThrottlingException",
        "Rate exceeded",
    );
    if let Some(after) = retry_after {
        let (name, value) = match after {
            RetryAfter::Seconds(s) => (http::header::RETRY_AFTER, s.to_string()),
            RetryAfter::DateIn(d) => (
                http::header::RETRY_AFTER,
                httpdate::fmt_http_date(SystemTime::now() + d),
            ),
            RetryAfter::Milliseconds(ms) => (
                http::HeaderName::from_static("x-amz-retry-after"),
                ms.to_string(),
            ),
        };
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// `InternalServerException`, before or after the request ran.
fn internal_error(state: &State) -> Response<AnswerBody> {
    state.record(|a| a.server_errors += 1);
    aws_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerException",
        "Internal server error",
    )
}

/// A row of the runtime's error table, in the form asked for, as the contract and the API
/// reference give it.
fn platform_error(
    state: &State,
    error: agentcore_tower::contract::PlatformError,
    form: PlatformForm,
    id: &Value,
) -> Response<AnswerBody> {
    use agentcore_tower::contract::PlatformError as E;
    let message = match error {
        E::Unauthorized => "Authentication error - Invalid credentials",
        E::AccessDenied => "Authorization error - Insufficient permissions",
        E::Throttling | E::ServiceQuotaExceeded => agentcore_tower::contract::THROTTLED_MESSAGE,
        E::ResourceNotFound => "Resource not found - Requested resource does not exist",
        E::Conflict => agentcore_tower::contract::CONFLICT_MESSAGE,
        E::RetryableConflict => agentcore_tower::contract::SESSION_BUSY_MESSAGE,
        E::Validation => "Validation error - Invalid request data",
        E::RuntimeClientError => {
            "Tool execution error - Please check your CloudWatch logs for more information"
        }
        E::InitializationTimedOut => {
            "Runtime initialization time exceeded. Please make sure that initialization completes in 30s."
        }
        E::RequestUnacceptable => {
            "Accept Header Error - MCP protocol requires Accept header: application/json, text/event-stream"
        }
        _ => "Internal error - Server error",
    };
    match error {
        E::Throttling | E::ServiceQuotaExceeded => state.record(|a| a.throttled += 1),
        E::RetryableConflict => state.record(|a| a.busy_refusals += 1),
        E::Internal => state.record(|a| a.server_errors += 1),
        _ => {}
    }
    match form {
        PlatformForm::JsonRpc => {
            let status = match error {
                E::Unauthorized => StatusCode::UNAUTHORIZED,
                E::AccessDenied => StatusCode::FORBIDDEN,
                E::RequestUnacceptable => StatusCode::NOT_ACCEPTABLE,
                _ => StatusCode::OK,
            };
            let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.json_rpc_code(), "message": message}});
            let mut response = json_answer(state, &reply);
            *response.status_mut() = status;
            response
        }
        _ => {
            let status = match error {
                E::Unauthorized => StatusCode::UNAUTHORIZED,
                E::AccessDenied => StatusCode::FORBIDDEN,
                E::Throttling => StatusCode::TOO_MANY_REQUESTS,
                E::ServiceQuotaExceeded => StatusCode::PAYMENT_REQUIRED,
                E::ResourceNotFound => StatusCode::NOT_FOUND,
                E::Conflict | E::RetryableConflict => StatusCode::CONFLICT,
                E::Validation => StatusCode::BAD_REQUEST,
                E::RuntimeClientError | E::InitializationTimedOut => StatusCode::FAILED_DEPENDENCY,
                E::RequestUnacceptable => {
                    return plain_json(
                        StatusCode::NOT_ACCEPTABLE,
                        json!({"message": message}).to_string(),
                    );
                }
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            aws_error(status, error.exception(), message)
        }
    }
}

/// The platform's refusal of a request while its runtime session is busy, in the configured
/// form.
pub(super) fn refuse_busy(state: &State, id: &Value) -> Response<AnswerBody> {
    state.record(|a| a.busy_refusals += 1);
    match state.busy_form() {
        BusyForm::Conflict409 => aws_error(
            StatusCode::CONFLICT,
            "RetryableConflictException",
            "The session is being provisioned or torn down; retry.",
        ),
        _ => plain_json(StatusCode::OK, busy_reply(id)),
    }
}
