//! The gateway door: MCP Streamable HTTP at `/mcp`, with gateway MCP sessions scoped to the
//! principal that opened them.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::answer::{AnswerBody, aws_error, mcp_session_refusal, respond, with_session};
use super::auth::{Auth, GATEWAY_METADATA_PATH, authenticate, gateway_challenge, gateway_metadata};
use super::faults::serve_mcp;
use super::{Answer, record_metadata_request, record_received};
use crate::mcp;
use crate::{McpSession, Principal, State};

/// The gateway door: MCP Streamable HTTP at `/mcp`, behind SigV4 or bearer tokens, with
/// gateway MCP sessions.
pub(super) async fn gateway(parts: &http::request::Parts, body: &Bytes, state: &State) -> Answer {
    let path = parts.uri.path();
    if state.bearer_door() && path == GATEWAY_METADATA_PATH {
        record_metadata_request(state, parts, body);
        return Ok(gateway_metadata(parts, state));
    }
    let auth = authenticate(parts, body, state);
    let operation = (path == "/mcp").then_some("mcp");
    record_received(state, parts, body, operation, &auth);
    let principal = match auth {
        Auth::Signed(key) => Principal::AccessKey(key),
        Auth::Bearer(principal) => principal,
        Auth::SignatureRefused(refused) => {
            state.record(|a| a.signature_failures += 1);
            return Ok(aws_error(
                StatusCode::FORBIDDEN,
                refused.error_type(),
                &refused.to_string(),
            ));
        }
        // A gateway that takes bearer tokens answers a SigV4-signed request as one without a
        // token.
        Auth::NoToken | Auth::WrongToken | Auth::Mismatch | Auth::Unchecked => {
            return Ok(gateway_challenge(state));
        }
    };
    if path != "/mcp" {
        return Ok(aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No such path: the gateway serves MCP at /mcp.",
        ));
    }
    match parts.method {
        http::Method::POST => gateway_post(parts, body, &principal, state).await,
        http::Method::DELETE => Ok(gateway_delete(parts, &principal, state)),
        // No server-initiated stream: GET is not offered (the MCP transport's 405).
        _ => Ok(respond(
            StatusCode::METHOD_NOT_ALLOWED,
            &[
                ("allow", "POST, DELETE"),
                ("content-type", "application/json"),
            ],
            json!({"message": "Method not allowed: POST or DELETE."}).to_string(),
        )),
    }
}

/// A gateway `POST /mcp`: `initialize` opens an MCP session; a request of MCP 2026-07-28 needs
/// none (and gets none), nor does a modern-only server's refusal; everything else needs a live
/// one.
async fn gateway_post(
    parts: &http::request::Parts,
    body: &Bytes,
    principal: &Principal,
    state: &State,
) -> Answer {
    let inspected = mcp::inspect(body);
    let era = mcp::era(state, &parts.headers, &inspected);
    let call = mcp::Call {
        headers: &parts.headers,
        era: &era,
        holder: mcp::Holder::default(),
    };
    // A modern-only server refuses `initialize` (its era is not `Legacy`): no session.
    if era == mcp::Era::Legacy && inspected.method.as_deref() == Some("initialize") {
        let id = uuid::Uuid::new_v4().to_string();
        state
            .mcp_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id.clone(),
                McpSession {
                    principal: principal.clone(),
                    started: Instant::now(),
                },
            );
        state.record(|a| a.mcp_sessions_started += 1);
        let mut answer = serve_mcp(inspected, call, state, None).await;
        if let (Ok(response), Ok(value)) = (&mut answer, HeaderValue::from_str(&id)) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        return answer;
    }
    if !era.sessionless()
        && let Err(refused) = live_session(parts, principal, &inspected.id, state)
    {
        return Ok(*refused);
    }
    serve_mcp(inspected, call, state, None).await
}

/// A gateway `DELETE /mcp`: ends the live session it names.
fn gateway_delete(
    parts: &http::request::Parts,
    principal: &Principal,
    state: &State,
) -> Response<AnswerBody> {
    let id = match live_session(parts, principal, &Value::Null, state) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    state
        .mcp_sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    state.record(|a| a.mcp_sessions_ended += 1);
    with_session(respond(StatusCode::OK, &[], Bytes::new()), None)
}

/// The request's `Mcp-Session-Id` when it names a live session of this principal; else the
/// refusal: 400 without the header, 404 for an unknown, expired or another principal's
/// session (the gateway does not tell those apart).
fn live_session(
    parts: &http::request::Parts,
    principal: &Principal,
    id: &Value,
    state: &State,
) -> Result<String, Box<Response<AnswerBody>>> {
    let refuse = |status: StatusCode, code: i64, message: &str| {
        with_session(mcp_session_refusal(state, id, status, code, message), None)
    };
    let Some(session) = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    else {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            -32000,
            "Missing required Mcp-Session-Id header",
        )));
    };
    let mut sessions = state.mcp_sessions.lock().unwrap_or_else(|p| p.into_inner());
    let live = match sessions.get(session) {
        Some(s) if s.started.elapsed() >= state.config.gateway_session_timeout => {
            sessions.remove(session);
            false
        }
        Some(s) => s.principal == *principal,
        None => false,
    };
    drop(sessions);
    if live {
        Ok(session.to_owned())
    } else {
        Err(Box::new(refuse(
            StatusCode::NOT_FOUND,
            -32001,
            "Session not found or expired",
        )))
    }
}
