//! How an answer maps to rmcp: a JSON-RPC message, an SSE stream, "accepted", or the error
//! rmcp's own clients would report — with a bounded diagnostic of a body that is none of them.

use std::borrow::Cow;

use ::rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use ::rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use bytes::Bytes;
use futures_util::stream::StreamExt;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;

use super::error::{HttpError, TowerClientError, client_error};
use super::sse::sse_events;
use crate::contract::AWS_ERROR_TYPE;
use crate::contract::MCP_SESSION_ID;
use crate::error::BoxError;

pub(super) const JSON: &str = "application/json";
pub(super) const EVENT_STREAM: &str = "text/event-stream";
/// How many bytes of an unusable body an error message quotes.
const PREVIEW_BYTES: usize = 256;

/// Maps the answer to a POST: a challenge, "accepted" or an expired session from its head
/// alone; otherwise as a failure ([`failed`]) or a success ([`succeeded`]) says.
pub(super) async fn post_answer<B>(
    response: Response<B>,
    message: &ClientJsonRpcMessage,
    session_attached: bool,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError>
where
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    let (parts, body) = response.into_parts();
    let (status, headers) = (parts.status, &parts.headers);
    if let Some(error) = auth_challenge(status, headers) {
        return Err(error);
    }
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && session_attached && !headers.contains_key(AWS_ERROR_TYPE)
    {
        return Err(StreamableHttpError::SessionExpired);
    }
    let head = Head::of(status, headers);
    if !status.is_success() {
        return failed(head, body, message, session_attached, limits).await;
    }
    succeeded(head, body, message, limits).await
}

/// What an answer's head says, read once.
struct Head<'a> {
    /// Its status.
    status: StatusCode,
    /// Its headers.
    headers: &'a HeaderMap,
    /// Its `content-type` is `application/json`.
    is_json: bool,
    /// Its `content-type` is `text/event-stream`.
    is_sse: bool,
    /// Its `content-length`, when valid.
    length: Option<u64>,
    /// Its `Mcp-Session-Id`, when it is text.
    session_id: Option<String>,
}

impl<'a> Head<'a> {
    /// Reads `status` and `headers`.
    fn of(status: StatusCode, headers: &'a HeaderMap) -> Self {
        Self {
            status,
            headers,
            is_json: content_type(headers).is_some_and(|ct| media_type_is(ct, JSON)),
            is_sse: content_type(headers).is_some_and(|ct| media_type_is(ct, EVENT_STREAM)),
            length: content_length(headers),
            session_id: headers
                .get(MCP_SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        }
    }
}

/// Maps an answer whose status is not a success: a refused `server/discover` probe as an
/// earlier protocol's server, the server's JSON-RPC error when its body is one, otherwise the
/// error rmcp's own clients would report.
async fn failed<B>(
    head: Head<'_>,
    body: B,
    message: &ClientJsonRpcMessage,
    session_attached: bool,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError>
where
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    let (status, headers, is_json, length) = (head.status, head.headers, head.is_json, head.length);
    let session_id = head.session_id;
    if let Some(id) = refused_probe(message, session_attached, status, headers) {
        return Ok(legacy_server(id, status, body, length, &limits, session_id).await);
    }
    let throttled_or_failed = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
    // Throttled, or a server failure that cannot be a JSON-RPC error: the status and
    // Retry-After only, the body unread.
    if throttled_or_failed && (status == StatusCode::TOO_MANY_REQUESTS || !is_json) {
        return Err(http_status(status, headers).into());
    }
    // A 401/403 without a challenge keeps its status (rmcp's clients do the same): its body
    // is a diagnostic, never taken as the server's JSON-RPC error.
    let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    if !is_json || auth_failure {
        let detail = diagnostic(body, limits.max_error_response_size).await;
        return Err(unexpected(status, headers, &detail));
    }
    // A JSON error body may be a JSON-RPC error, which the caller should see as such.
    match read_limited(body, length, limits.max_json_response_size).await {
        Ok(bytes) => match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
            Ok(error @ JsonRpcMessage::Error(_)) => {
                Ok(StreamableHttpPostResponse::Json(error, session_id))
            }
            _ if throttled_or_failed => Err(http_status(status, headers).into()),
            _ => Err(unexpected(
                status,
                headers,
                &preview(&bytes, limits.max_error_response_size),
            )),
        },
        Err(_) if throttled_or_failed => Err(http_status(status, headers).into()),
        Err(error) => Err(unexpected(status, headers, &format!("<{error}>"))),
    }
}

/// Maps a successful answer: a JSON-RPC message, an SSE stream, or "accepted" for a message
/// that awaits no answer.
async fn succeeded<B>(
    head: Head<'_>,
    body: B,
    message: &ClientJsonRpcMessage,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError>
where
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    let Head {
        status,
        headers,
        is_json,
        is_sse,
        length,
        session_id,
    } = head;
    // A notification or a response to the server awaits no answer: whatever comes back
    // (202 was handled above; some servers send an empty 200) only says "received".
    let awaits_nothing = matches!(
        message,
        ClientJsonRpcMessage::Notification(_)
            | ClientJsonRpcMessage::Response(_)
            | ClientJsonRpcMessage::Error(_)
    );
    if awaits_nothing && length == Some(0) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if is_sse {
        return Ok(StreamableHttpPostResponse::Sse(
            sse_events(body, limits.max_sse_event_size),
            session_id,
        ));
    }
    if is_json {
        let bytes = read_limited(body, length, limits.max_json_response_size).await?;
        return match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
            Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session_id)),
            Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
            Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "HTTP {}: the JSON body is not a JSON-RPC message ({e}): {}",
                    status.as_u16(),
                    preview(&bytes, PREVIEW_BYTES)
                ),
            ))),
        };
    }
    if awaits_nothing {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    Err(StreamableHttpError::UnexpectedContentType(
        content_type(headers).map(|ct| String::from_utf8_lossy(ct).into_owned()),
    ))
}

/// The id of a sessionless `server/discover` probe that the server refused with a 4xx of its
/// own (not 401/403, not a 429, not an AWS error such as an unknown runtime): how a server of
/// an earlier protocol answers MCP 2026-07-28's probe, often from middleware that cannot echo
/// the id (the Python SDK sends `"server-error"`), sometimes in plain text.
fn refused_probe(
    message: &ClientJsonRpcMessage,
    session_attached: bool,
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<RequestId> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let refused = status.is_client_error()
        && !matches!(
            status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
        )
        && !session_attached
        && !headers.contains_key(AWS_ERROR_TYPE);
    (refused && matches!(request.request, ClientRequest::DiscoverRequest(_)))
        .then(|| request.id.clone())
}

/// The refused probe as rmcp's own clients hand it to the lifecycle
/// (`legacy_discover_response`, private to rmcp): a JSON-RPC error correlated to the probe's
/// `id` — the server's own error when the body is one, else an invalid-request error quoting
/// the answer — so `ClientLifecycleMode::Auto` falls back to `initialize`.
async fn legacy_server<B>(
    id: RequestId,
    status: StatusCode,
    body: B,
    length: Option<u64>,
    limits: &StreamableHttpResponseLimits,
    session_id: Option<String>,
) -> StreamableHttpPostResponse
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let read = read_limited(body, length, limits.max_error_response_size).await;
    let error = match &read {
        Ok(bytes) => match serde_json::from_slice::<ServerJsonRpcMessage>(bytes) {
            Ok(JsonRpcMessage::Error(error)) => Some(error.error),
            _ => None,
        },
        Err(_) => None,
    };
    let error = error.unwrap_or_else(|| {
        let shown = match &read {
            Ok(bytes) => preview(bytes, PREVIEW_BYTES),
            Err(error) => format!("<{error}>"),
        };
        ErrorData::invalid_request(
            format!(
                "server/discover rejected with HTTP {}: {shown}",
                status.as_u16()
            ),
            None,
        )
    });
    StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, Some(id)), session_id)
}

/// The error for a GET or DELETE answered with a failure other than 405.
pub(super) async fn refusal<B>(response: Response<B>) -> HttpError
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let (parts, body) = response.into_parts();
    if let Some(error) = auth_challenge(parts.status, &parts.headers) {
        return error;
    }
    if parts.status == StatusCode::TOO_MANY_REQUESTS || parts.status.is_server_error() {
        return http_status(parts.status, &parts.headers).into();
    }
    let max = StreamableHttpResponseLimits::default().max_error_response_size;
    unexpected(parts.status, &parts.headers, &diagnostic(body, max).await)
}

/// 401 / 403 with a `WWW-Authenticate` challenge, as rmcp's own clients report them.
fn auth_challenge(status: StatusCode, headers: &HeaderMap) -> Option<HttpError> {
    if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return None;
    }
    let header = headers.get(WWW_AUTHENTICATE)?;
    let Ok(challenge) = header.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(
            Cow::Borrowed("invalid www-authenticate header value"),
        ));
    };
    Some(if status == StatusCode::UNAUTHORIZED {
        StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge.to_owned()))
    } else {
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            challenge.to_owned(),
            scope_of(challenge),
        ))
    })
}

/// The `scope=` parameter of a challenge, quoted or not.
fn scope_of(challenge: &str) -> Option<String> {
    // ASCII lowercasing keeps byte offsets, so `start` indexes the original too.
    let start = challenge.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let rest = &challenge[start..];
    let scope = match rest.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => {
            &rest[..rest
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(rest.len())]
        }
    };
    (!scope.is_empty()).then(|| scope.to_owned())
}

/// Status and `Retry-After` (raw, as rmcp keeps it).
fn http_status(status: StatusCode, headers: &HeaderMap) -> HttpStatusError {
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    HttpStatusError::new(status.as_u16(), retry_after)
}

/// `HTTP 409 RetryableConflictException: <detail>`.
fn unexpected(status: StatusCode, headers: &HeaderMap, detail: &str) -> HttpError {
    let error_type = crate::record::aws_error_type(headers)
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
        "HTTP {}{error_type}: {detail}",
        status.as_u16()
    )))
}

/// Reads a whole body, refusing more than `max` bytes (early when `content-length` says so).
async fn read_limited<B>(body: B, length: Option<u64>, max: usize) -> Result<Vec<u8>, HttpError>
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let too_large = || StreamableHttpError::ResponseBodyTooLarge { max_size: max };
    if length.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut chunks = std::pin::pin!(body.into_data_stream());
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| client_error(TowerClientError::Body(e.into())))?;
        if chunk.len() > max - bytes.len() {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// At most `max` bytes of an error body, as text for a message; the rest is not read.
async fn diagnostic<B>(body: B, max: usize) -> String
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let mut chunks = std::pin::pin!(body.into_data_stream());
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match chunks.next().await {
            None => break,
            Some(Ok(chunk)) => {
                let n = chunk.len().min(max - bytes.len());
                bytes.extend_from_slice(&chunk[..n]);
            }
            Some(Err(e)) => return format!("<failed to read the body: {}>", e.into()),
        }
    }
    preview(&bytes, max)
}

/// A lossy, bounded view of bytes for an error message (invalid UTF-8 becomes U+FFFD).
fn preview(bytes: &[u8], max: usize) -> String {
    if bytes.is_empty() {
        return "<empty body>".to_owned();
    }
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(max)]);
    if bytes.len() > max {
        format!("{shown}…")
    } else {
        shown.into_owned()
    }
}

pub(super) fn content_type(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes)
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Whether a `content-type` names `expected`, ignoring case and parameters (`; charset=…`).
pub(super) fn media_type_is(value: &[u8], expected: &str) -> bool {
    value
        .split(|b| *b == b';')
        .next()
        .and_then(|essence| std::str::from_utf8(essence).ok())
        .is_some_and(|essence| {
            essence
                .trim_matches([' ', '\t'])
                .eq_ignore_ascii_case(expected)
        })
}
