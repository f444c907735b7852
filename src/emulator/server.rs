//! The emulator's HTTP side: routing, the doors (SigV4, bearer tokens), runtime sessions,
//! gateway MCP sessions, faults.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::lifecycle::McpCheck;
use super::mcp;
use super::{
    BusyForm, Fault, McpSession, PlatformForm, Principal, Received, RetryAfter, SignatureError,
    SignatureVerifier, State,
};
use crate::body::ReadToBytes;
use crate::session_busy::{SESSION_BUSY_CODE, SESSION_BUSY_MESSAGE};

const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// Accepts connections until the task is aborted; aborting it ends every connection too.
pub(crate) async fn accept_loop(listener: tokio::net::TcpListener, state: Arc<State>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request| handle(request, state.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Returned by a handler to drop the connection without an answer.
#[derive(Debug)]
pub(crate) struct DropConnection;

impl fmt::Display for DropConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the emulator dropped the connection on purpose")
    }
}

impl std::error::Error for DropConnection {}

type Answer = Result<Response<AnswerBody>, DropConnection>;

fn respond(
    status: StatusCode,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response<AnswerBody> {
    let mut response = Response::new(AnswerBody::full(body.into()));
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

fn aws_error(status: StatusCode, error_type: &str, message: &str) -> Response<AnswerBody> {
    respond(
        status,
        &[
            ("content-type", "application/json"),
            (
                "x-amzn-errortype",
                &format!("{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            ),
            ("x-amzn-requestid", &uuid::Uuid::new_v4().to_string()),
        ],
        json!({"message": message}).to_string(),
    )
}

async fn handle(request: Request<Incoming>, state: Arc<State>) -> Answer {
    state.record(|a| a.requests += 1);
    let (parts, body) = request.into_parts();
    let Ok(body) = ReadToBytes::new(body, crate::invoke::MAX_PAYLOAD_BYTES).await else {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The request body could not be read.",
        ));
    };
    if state.config.gateway {
        gateway(&parts, &body, &state).await
    } else {
        runtime(&parts, &body, &state).await
    }
}

/// The runtime door: `InvokeAgentRuntime` and `StopRuntimeSession`, behind SigV4 or bearer
/// tokens.
async fn runtime(parts: &http::request::Parts, body: &Bytes, state: &State) -> Answer {
    let bearer = state.bearer_door();
    if bearer && let Some(arn) = metadata_route(parts.uri.path()) {
        state.record(|a| {
            a.received.push(received(
                parts,
                body,
                Some(METADATA_OPERATION.to_owned()),
                &Auth::Unchecked,
            ))
        });
        return Ok(runtime_metadata(parts, &arn, state));
    }
    let auth = authenticate(parts, body, state);
    let operation = route(parts.uri.path()).map(|(_, operation)| operation.to_owned());
    state.record(|a| a.received.push(received(parts, body, operation, &auth)));
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

/// The gateway door: MCP Streamable HTTP at `/mcp`, behind SigV4 or bearer tokens, with
/// gateway MCP sessions.
async fn gateway(parts: &http::request::Parts, body: &Bytes, state: &State) -> Answer {
    let path = parts.uri.path();
    if state.bearer_door() && path == GATEWAY_METADATA_PATH {
        state.record(|a| {
            a.received.push(received(
                parts,
                body,
                Some(METADATA_OPERATION.to_owned()),
                &Auth::Unchecked,
            ))
        });
        return Ok(gateway_metadata(parts, state));
    }
    let auth = authenticate(parts, body, state);
    let operation = (path == "/mcp").then(|| "mcp".to_owned());
    state.record(|a| a.received.push(received(parts, body, operation, &auth)));
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

/// A gateway `POST /mcp`: `initialize` opens an MCP session, everything else needs a live one.
async fn gateway_post(
    parts: &http::request::Parts,
    body: &Bytes,
    principal: &Principal,
    state: &State,
) -> Answer {
    let inspected = mcp::inspect(body);
    if inspected.method.as_deref() == Some("initialize") {
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
        let mut answer = serve_mcp(inspected, state, None).await;
        if let (Ok(response), Ok(value)) = (&mut answer, HeaderValue::from_str(&id)) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        return answer;
    }
    if let Err(refused) = live_session(parts, principal, &inspected.id, state) {
        return Ok(*refused);
    }
    serve_mcp(inspected, state, None).await
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

/// An MCP server's refusal of a request for its MCP session (400 or 404), nothing run: a
/// JSON-RPC error with the request's id (or `null`), without `x-amzn-errortype` (the server's
/// own answer, not the platform's).
fn mcp_session_refusal(
    state: &State,
    id: &Value,
    status: StatusCode,
    code: i64,
    message: &str,
) -> Response<AnswerBody> {
    state.record(|a| {
        a.mcp_session_refusals += 1;
        if status == StatusCode::NOT_FOUND {
            a.mcp_sessions_not_found += 1;
        }
    });
    let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    respond(
        status,
        &[("content-type", "application/json")],
        reply.to_string(),
    )
}

/// How a request presented itself, and the emulator's verdict on it.
enum Auth {
    /// A SigV4 signature that checked out, by this access key id.
    Signed(String),
    /// The SigV4 signature was refused.
    SignatureRefused(SignatureError),
    /// An accepted bearer token, by the principal it stands for.
    Bearer(Principal),
    /// The bearer door: no bearer token (no `Authorization`, or another scheme than SigV4).
    NoToken,
    /// The bearer door: a bearer token that is not accepted.
    WrongToken,
    /// The other door's credentials: SigV4 at a bearer runtime, a bearer token at a SigV4
    /// runtime.
    Mismatch,
    /// Not checked (the metadata document needs no auth).
    Unchecked,
}

/// The scheme of the `Authorization` header, for the audit.
fn scheme(parts: &http::request::Parts) -> Option<&'static str> {
    let value = parts.headers.get("authorization")?.as_bytes();
    Some(if value.starts_with(b"AWS4-HMAC-SHA256 ") {
        "sigv4"
    } else if bearer_token(value).is_some() {
        "bearer"
    } else {
        "other"
    })
}

/// The token of an `Authorization: Bearer <token>` value (the scheme is case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = token.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn authenticate(parts: &http::request::Parts, body: &[u8], state: &State) -> Auth {
    let presented = scheme(parts);
    let tokens = state.tokens.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tokens) = tokens.as_ref() else {
        // The SigV4 door. A runtime tells a bearer token for the other door; a gateway checks
        // the signature as it is (and finds none).
        if presented == Some("bearer") && !state.config.gateway {
            return Auth::Mismatch;
        }
        return match state.verifier.verify(parts, body, SystemTime::now()) {
            Ok(()) => Auth::Signed(SignatureVerifier::access_key_of(parts).unwrap_or_default()),
            Err(refused) => Auth::SignatureRefused(refused),
        };
    };
    let value = parts
        .headers
        .get("authorization")
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    match bearer_token(value) {
        Some(token) if tokens.iter().any(|t| same_bytes(t.as_bytes(), token)) => {
            Auth::Bearer(token_principal(token))
        }
        Some(_) => Auth::WrongToken,
        None if presented == Some("sigv4") => Auth::Mismatch,
        None => Auth::NoToken,
    }
}

/// Compares without an early exit on the first differing byte.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a bearer token stands for, as a gateway scopes its sessions: a JWT's `sub` claim (its
/// payload read, its signature not checked: the token was accepted by value), so that a
/// refreshed token of the same user keeps the user's sessions; any other token by a
/// fingerprint of itself.
fn token_principal(token: &[u8]) -> Principal {
    let subject = std::str::from_utf8(token).ok().and_then(|token| {
        match crate::auth::BearerToken::new(token)
            .jwt_claims()?
            .remove("sub")?
        {
            Value::String(sub) if !sub.is_empty() => Some(sub),
            _ => None,
        }
    });
    match subject {
        Some(sub) => Principal::Subject(sub),
        None => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            token.hash(&mut hasher);
            Principal::Token(hasher.finish())
        }
    }
}

/// The runtime's refusal of a request's credentials, if any.
fn refuse_runtime(
    auth: &Auth,
    parts: &http::request::Parts,
    state: &State,
) -> Option<Response<AnswerBody>> {
    match auth {
        Auth::Signed(_) | Auth::Bearer(_) | Auth::Unchecked => None,
        Auth::SignatureRefused(refused) => {
            state.record(|a| a.signature_failures += 1);
            Some(aws_error(
                StatusCode::FORBIDDEN,
                refused.error_type(),
                &refused.to_string(),
            ))
        }
        Auth::Mismatch => {
            state.record(|a| a.auth_method_mismatches += 1);
            Some(aws_error(
                StatusCode::FORBIDDEN,
                "AccessDeniedException",
                AUTH_METHOD_MISMATCH,
            ))
        }
        Auth::NoToken => Some(runtime_challenge(
            parts,
            state,
            "Missing Authentication Token",
        )),
        Auth::WrongToken => Some(runtime_challenge(
            parts,
            state,
            "OAuth authorization failed: the token is not one this runtime accepts",
        )),
    }
}

/// What AWS answers a SigV4 request to a runtime configured for OAuth (and the reverse).
const AUTH_METHOD_MISMATCH: &str = "Authorization method mismatch. The agent is configured for a \
     different authorization method than what was used in your request. Check the agent's \
     authorization configuration and ensure your request uses the matching method (OAuth or SigV4)";

const METADATA_OPERATION: &str = "oauth-protected-resource";
const GATEWAY_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
const RUNTIME_METADATA_OPERATION: &str = "invocations/.well-known/oauth-protected-resource";

/// The `qualifier` of the query, as requested (still encoded), or `DEFAULT`.
fn qualifier(parts: &http::request::Parts) -> &str {
    parts
        .uri
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("qualifier=")))
        .unwrap_or("DEFAULT")
}

/// `<endpoint>/runtimes/<escaped ARN>/invocations`.
fn runtime_invocations(state: &State) -> String {
    format!(
        "{}/runtimes/{}/invocations",
        state.endpoint,
        crate::invoke::encode_label(&state.config.runtime_arn)
    )
}

fn unauthorized(state: &State, challenge: &str, message: &str) -> Response<AnswerBody> {
    state.record(|a| a.unauthorized += 1);
    with_session(
        respond(
            StatusCode::UNAUTHORIZED,
            &[
                ("www-authenticate", challenge),
                ("content-type", "application/json"),
            ],
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": message}}).to_string(),
        ),
        None,
    )
}

/// A bearer runtime's 401: the challenge names its protected-resource metadata.
fn runtime_challenge(
    parts: &http::request::Parts,
    state: &State,
    message: &str,
) -> Response<AnswerBody> {
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource?qualifier={}\"",
        runtime_invocations(state),
        qualifier(parts)
    );
    unauthorized(state, &challenge, message)
}

/// A bearer gateway's 401.
fn gateway_challenge(state: &State) -> Response<AnswerBody> {
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{}{GATEWAY_METADATA_PATH}\"",
        state.endpoint
    );
    unauthorized(state, &challenge, "Invalid Bearer token")
}

/// The RFC 9728 document of a bearer runtime.
fn runtime_metadata(
    parts: &http::request::Parts,
    arn: &str,
    state: &State,
) -> Response<AnswerBody> {
    if arn != state.config.runtime_arn {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No runtime with this ARN.",
        );
    }
    let resource = format!(
        "{}?qualifier={}",
        runtime_invocations(state),
        qualifier(parts)
    );
    metadata(parts, &resource, state)
}

/// The RFC 9728 document of a bearer gateway.
fn gateway_metadata(parts: &http::request::Parts, state: &State) -> Response<AnswerBody> {
    metadata(parts, &format!("{}/mcp", state.endpoint), state)
}

fn metadata(parts: &http::request::Parts, resource: &str, state: &State) -> Response<AnswerBody> {
    if parts.method != http::Method::GET {
        return aws_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowedException",
            "GET only.",
        );
    }
    let document = json!({
        "resource": resource,
        "authorization_servers": [state.config.issuer],
        "bearer_methods_supported": ["header"],
    });
    with_session(
        respond(
            StatusCode::OK,
            &[("content-type", "application/json")],
            document.to_string(),
        ),
        None,
    )
}

/// What the audit keeps of a request (never a token).
fn received(
    parts: &http::request::Parts,
    body: &[u8],
    operation: Option<String>,
    auth: &Auth,
) -> Received {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let text = |pointer: &str| {
        value
            .as_ref()
            .and_then(|v| v.pointer(pointer))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Received {
        operation,
        http_method: parts.method.to_string(),
        authorization: scheme(parts),
        signed: matches!(auth, Auth::Signed(_)),
        bearer_accepted: matches!(auth, Auth::Bearer(_)),
        runtime_session_id: header(RUNTIME_SESSION_ID),
        mcp_session_id: header("mcp-session-id"),
        mcp_method: header("mcp-method"),
        mcp_name: header("mcp-name"),
        method: text("/method"),
        id: value
            .as_ref()
            .and_then(|v| v.get("id"))
            .map(Value::to_string),
        client_token: text("/clientToken"),
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

fn busy_reply(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": SESSION_BUSY_CODE, "message": SESSION_BUSY_MESSAGE}}).to_string()
}

async fn invoke(
    parts: &http::request::Parts,
    body: &Bytes,
    session: Option<String>,
    state: &State,
) -> Answer {
    let session = session.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let inspected = mcp::inspect(body);
    let initialize = inspected.method.as_deref() == Some("initialize");
    // A header that is not text names no session the server issued.
    let mcp_session = parts
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap_or_default());
    let (arrival, check) = {
        let (now, limits) = (Instant::now(), state.limits());
        let mut runtime = state.runtime();
        let arrival = runtime.arrive(&session, now, &limits);
        let check = if arrival.provisioning || initialize {
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
    state.record(|a| {
        a.sessions_started += u64::from(arrival.new_session);
        a.microvms_started += u64::from(arrival.new_microvm);
    });
    let session_header = (RUNTIME_SESSION_ID, session.as_str());
    // The platform refuses before the microVM's MCP server sees the request.
    if arrival.provisioning {
        return Ok(refuse_busy(state, &inspected.id, Some(session_header)));
    }
    let refused = match check {
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
    };
    if let Some((status, code, message)) = refused {
        let response = mcp_session_refusal(state, &inspected.id, status, code, message);
        return Ok(with_session(response, Some(session_header)));
    }
    let mut answer = serve_mcp(inspected, state, Some(session_header)).await;
    // `initialize` always opens a new MCP session, whatever it carried.
    if initialize
        && let Ok(response) = &mut answer
        && response.status() == StatusCode::OK
    {
        let mcp_session = state.runtime().issue(&session, arrival.microvm);
        state.record(|a| a.mcp_sessions_started += 1);
        if let Ok(value) = HeaderValue::from_str(&mcp_session) {
            response.headers_mut().insert("mcp-session-id", value);
        }
    }
    answer
}

/// A runtime MCP server's 404 for an MCP session it does not know: the code and message of the
/// MCP TypeScript SDK's Streamable HTTP transport.
const SESSION_NOT_FOUND_CODE: i64 = -32001;
const SESSION_NOT_FOUND_MESSAGE: &str = "Session not found";
/// A stateful runtime MCP server's 400 for a request without `Mcp-Session-Id`: the code and
/// message of the MCP Python SDK's Streamable HTTP transport (FastMCP's).
const MISSING_SESSION_CODE: i64 = -32600;
const MISSING_SESSION_MESSAGE: &str = "Bad Request: Missing session ID";

/// Answers one MCP POST: faults for `tools/call`, then the emulator's MCP server. The runtime
/// adds its session header (`session_header`); the gateway has none.
async fn serve_mcp(
    inspected: mcp::Inspected,
    state: &State,
    session_header: Option<(&str, &str)>,
) -> Answer {
    let Some(value) = inspected.value.as_ref() else {
        return Ok(with_session(
            json_answer(
                state,
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            ),
            session_header,
        ));
    };
    let is_tool_call = inspected.method.as_deref() == Some("tools/call");
    let fault = if is_tool_call {
        state.next_fault()
    } else {
        None
    };
    // Faults that answer before anything runs.
    match fault {
        Some(Fault::Busy) => return Ok(refuse_busy(state, &inspected.id, session_header)),
        Some(Fault::Throttle { retry_after }) => {
            state.record(|a| a.throttled += 1);
            let mut response = aws_error(
                StatusCode::TOO_MANY_REQUESTS,
                "ThrottlingException",
                "Rate exceeded",
            );
            if let Some(after) = retry_after {
                let value = match after {
                    RetryAfter::Seconds(s) => s.to_string(),
                    RetryAfter::DateIn(d) => httpdate::fmt_http_date(SystemTime::now() + d),
                };
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response
                        .headers_mut()
                        .insert(http::header::RETRY_AFTER, value);
                }
            }
            return Ok(with_session(response, session_header));
        }
        Some(Fault::ServerError { after_run: false }) => {
            state.record(|a| a.server_errors += 1);
            return Ok(with_session(
                aws_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerException",
                    "Internal server error",
                ),
                session_header,
            ));
        }
        Some(Fault::ConflictLookAlike) => {
            let reply = json!({"jsonrpc": "2.0", "id": inspected.id, "error": {"code": SESSION_BUSY_CODE, "message": "Resource conflict - Resource already exists"}});
            return Ok(with_session(json_answer(state, &reply), session_header));
        }
        Some(Fault::Platform { error, form })
            if error != crate::contract::PlatformError::RuntimeClientError =>
        {
            return Ok(with_session(
                platform_error(state, error, form, &inspected.id),
                session_header,
            ));
        }
        Some(Fault::ExpiredToken) => {
            state.record(|a| a.signature_failures += 1);
            return Ok(with_session(
                aws_error(
                    StatusCode::FORBIDDEN,
                    "ExpiredTokenException",
                    "The security token included in the request is expired",
                ),
                session_header,
            ));
        }
        Some(Fault::HealthCheckFailed) => {
            let reply = json!({"jsonrpc": "2.0", "id": inspected.id, "error": {"code": -32010, "message": "Runtime health check failed or timed out"}});
            return Ok(with_session(json_answer(state, &reply), session_header));
        }
        _ => {}
    }
    if is_tool_call && value.pointer("/params/name").and_then(Value::as_str) == Some("blob") {
        let size = value
            .pointer("/params/arguments/bytes")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        return Ok(with_session(
            blob(state, &inspected.id, size),
            session_header,
        ));
    }
    let answer = mcp::answer(value, state);
    // Faults after the call ran.
    match fault {
        Some(Fault::DropAfterRun) => {
            state.record(|a| a.dropped += 1);
            return Err(DropConnection);
        }
        Some(Fault::ServerError { after_run: true }) => {
            state.record(|a| a.server_errors += 1);
            return Ok(with_session(
                aws_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerException",
                    "Internal server error",
                ),
                session_header,
            ));
        }
        Some(Fault::Platform { error, form }) => {
            return Ok(with_session(
                platform_error(state, error, form, &inspected.id),
                session_header,
            ));
        }
        Some(Fault::BusyAfterRun) => {
            let mut response = respond(
                StatusCode::OK,
                &[("content-type", "application/json")],
                busy_reply(&inspected.id),
            );
            response = with_session(response, session_header);
            return Ok(response);
        }
        Some(Fault::Slow(delay)) => tokio::time::sleep(delay).await,
        _ => {}
    }
    let response = match answer {
        None => respond(StatusCode::ACCEPTED, &[], Bytes::new()),
        Some(answer) => json_answer(state, &answer),
    };
    Ok(with_session(response, session_header))
}

/// A row of the runtime's error table, in the form asked for, as the contract and the API
/// reference give it.
fn platform_error(
    state: &State,
    error: crate::contract::PlatformError,
    form: PlatformForm,
    id: &Value,
) -> Response<AnswerBody> {
    use crate::contract::PlatformError as E;
    let message = match error {
        E::Unauthorized => "Authentication error - Invalid credentials",
        E::AccessDenied => "Authorization error - Insufficient permissions",
        E::Throttling | E::ServiceQuotaExceeded => crate::contract::THROTTLED_MESSAGE,
        E::ResourceNotFound => "Resource not found - Requested resource does not exist",
        E::Conflict => crate::contract::CONFLICT_MESSAGE,
        E::RetryableConflict => crate::contract::SESSION_BUSY_MESSAGE,
        E::Validation => "Validation error - Invalid request data",
        E::RuntimeClientError => {
            "Tool execution error - Please check your CloudWatch logs for more information"
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
                E::RuntimeClientError => StatusCode::FAILED_DEPENDENCY,
                E::RequestUnacceptable => {
                    return respond(
                        StatusCode::NOT_ACCEPTABLE,
                        &[("content-type", "application/json")],
                        json!({"message": message}).to_string(),
                    );
                }
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            aws_error(status, error.exception(), message)
        }
    }
}

fn refuse_busy(
    state: &State,
    id: &Value,
    session_header: Option<(&str, &str)>,
) -> Response<AnswerBody> {
    state.record(|a| a.busy_refusals += 1);
    let response = match state.busy_form() {
        BusyForm::Conflict409 => aws_error(
            StatusCode::CONFLICT,
            "RetryableConflictException",
            "The session is being provisioned or torn down; retry.",
        ),
        _ => respond(
            StatusCode::OK,
            &[("content-type", "application/json")],
            busy_reply(id),
        ),
    };
    with_session(response, session_header)
}

fn json_answer(state: &State, answer: &Value) -> Response<AnswerBody> {
    if state.config.sse {
        let event = format!("event: message\ndata: {answer}\n\n");
        respond(
            StatusCode::OK,
            &[
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
            ],
            event,
        )
    } else {
        respond(
            StatusCode::OK,
            &[("content-type", "application/json")],
            answer.to_string(),
        )
    }
}

/// Adds the runtime session header (when there is one) and a request id.
fn with_session(
    mut response: Response<AnswerBody>,
    header: Option<(&str, &str)>,
) -> Response<AnswerBody> {
    if let Some((Ok(name), Ok(value))) = header.map(|(name, value)| {
        (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        )
    }) {
        response.headers_mut().insert(name, value);
    }
    response.headers_mut().insert(
        "x-amzn-requestid",
        HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
            .unwrap_or(HeaderValue::from_static("0")),
    );
    response
}

/// 64 KiB of `x`: every chunk of a blob answer is this one static buffer.
static X: [u8; 64 * 1024] = [b'x'; 64 * 1024];

/// The `blob` tool: a `tools/call` result whose text is `size` bytes, streamed in 64 KiB chunks
/// without ever holding the whole answer (JSON, or one SSE event).
fn blob(state: &State, id: &Value, size: u64) -> Response<AnswerBody> {
    state.record(|audit| {
        *audit.executions.entry("blob".to_owned()).or_default() += 1;
        *audit
            .executions_by_id
            .entry(("blob".to_owned(), id.to_string()))
            .or_default() += 1;
    });
    let head =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#);
    let tail = r#""}],"isError":false}}"#;
    let (content_type, head, tail) = if state.config.sse {
        (
            "text/event-stream",
            format!("event: message\ndata: {head}"),
            format!("{tail}\n\n"),
        )
    } else {
        ("application/json", head, tail.to_owned())
    };
    let mut response = Response::new(AnswerBody::Stream {
        head: Some(Bytes::from(head)),
        remaining: size,
        tail: Some(Bytes::from(tail)),
    });
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    response
}

/// The emulator's answer bodies: whole, or streamed from a static buffer.
pub(crate) enum AnswerBody {
    Full(Option<Bytes>),
    Stream {
        head: Option<Bytes>,
        remaining: u64,
        tail: Option<Bytes>,
    },
}

impl AnswerBody {
    fn full(bytes: Bytes) -> Self {
        AnswerBody::Full((!bytes.is_empty()).then_some(bytes))
    }
}

impl http_body::Body for AnswerBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let next = match self.get_mut() {
            AnswerBody::Full(bytes) => bytes.take(),
            AnswerBody::Stream {
                head,
                remaining,
                tail,
            } => head.take().or_else(|| {
                if *remaining > 0 {
                    let n = (*remaining).min(X.len() as u64);
                    *remaining -= n;
                    Some(Bytes::from_static(&X[..n as usize]))
                } else {
                    tail.take()
                }
            }),
        };
        std::task::Poll::Ready(next.map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AnswerBody::Full(bytes) => bytes.is_none(),
            AnswerBody::Stream {
                head,
                remaining,
                tail,
            } => head.is_none() && *remaining == 0 && tail.is_none(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            AnswerBody::Full(bytes) => {
                http_body::SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            // Unknown up front, as a streamed answer is: sent chunked.
            AnswerBody::Stream { .. } => http_body::SizeHint::new(),
        }
    }
}
