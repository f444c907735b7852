//! The emulator's HTTP side: routing, SigV4, runtime sessions, faults.

use std::fmt;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::mcp;
use super::{BusyForm, Fault, PlatformForm, Received, RetryAfter, State};
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
    let Ok(body) = ReadToBytes::new(body, crate::sigv4::MAX_PAYLOAD_BYTES).await else {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The request body could not be read.",
        ));
    };
    let verified = state.verifier.verify(&parts, &body, SystemTime::now());
    state.record(|a| a.received.push(received(&parts, &body, verified.is_ok())));
    if let Err(refused) = verified {
        state.record(|a| a.signature_failures += 1);
        return Ok(aws_error(
            StatusCode::FORBIDDEN,
            refused.error_type(),
            &refused.to_string(),
        ));
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
    let session = parts
        .headers
        .get(RUNTIME_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match operation {
        "stopruntimesession" => Ok(stop(session, &state)),
        _ => invoke(&parts, &body, session, &state).await,
    }
}

/// What the audit keeps of a request.
fn received(parts: &http::request::Parts, body: &[u8], signed: bool) -> Received {
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
        operation: route(parts.uri.path()).map(|(_, operation)| operation.to_owned()),
        signed,
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
    let rest = path.strip_prefix("/runtimes/")?;
    let (arn, operation) = rest.split_once('/')?;
    if !matches!(operation, "invocations" | "stopruntimesession") {
        return None;
    }
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
    let known = state
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&session)
        .is_some();
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
    let provisioning = {
        let mut sessions = state.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let started = *sessions.entry(session.clone()).or_insert_with(|| {
            state.record(|a| a.sessions_started += 1);
            Instant::now()
        });
        started.elapsed() < state.config.provisioning
    };
    let inspected = mcp::inspect(body);
    let session_header = (RUNTIME_SESSION_ID, session.as_str());
    if provisioning {
        return Ok(refuse_busy(state, &inspected.id, session_header));
    }
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
    let mut response = match answer {
        None => respond(StatusCode::ACCEPTED, &[], Bytes::new()),
        Some(answer) => json_answer(state, &answer),
    };
    if inspected.method.as_deref() == Some("initialize") {
        let mcp_session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        if let Ok(value) = HeaderValue::from_str(&mcp_session) {
            response.headers_mut().insert("mcp-session-id", value);
        }
    }
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

fn refuse_busy(state: &State, id: &Value, session_header: (&str, &str)) -> Response<AnswerBody> {
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

fn with_session(
    mut response: Response<AnswerBody>,
    (name, value): (&str, &str),
) -> Response<AnswerBody> {
    if let (Ok(name), Ok(value)) = (
        http::HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
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
