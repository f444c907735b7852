//! The emulator's answers: AWS errors, JSON-RPC answers (JSON or SSE), the runtime session
//! and request id headers, and the bodies, whole or streamed from a static buffer.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::State;

pub(super) fn respond(
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

/// A JSON body with this status and no other header.
pub(super) fn plain_json(status: StatusCode, body: impl Into<Bytes>) -> Response<AnswerBody> {
    respond(status, &[("content-type", "application/json")], body)
}

pub(super) fn aws_error(
    status: StatusCode,
    error_type: &str,
    message: &str,
) -> Response<AnswerBody> {
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

/// A runtime MCP server's 404 for an MCP session it does not know: the code and message of the
/// MCP TypeScript SDK's Streamable HTTP transport.
pub(super) const SESSION_NOT_FOUND_CODE: i64 = -32001;

pub(super) const SESSION_NOT_FOUND_MESSAGE: &str = "Session not found";

/// An MCP server's refusal of a request for its MCP session (400 or 404), nothing run: a
/// JSON-RPC error with the request's id (or `null`), without `x-amzn-errortype` (the server's
/// own answer, not the platform's).
pub(super) fn mcp_session_refusal(
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
    plain_json(status, reply.to_string())
}

pub(super) fn json_answer(state: &State, answer: &Value) -> Response<AnswerBody> {
    if state.config.sse {
        respond(
            StatusCode::OK,
            &[
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
            ],
            crate::mcp::sse_event(answer),
        )
    } else {
        plain_json(StatusCode::OK, answer.to_string())
    }
}

/// Adds the runtime session header (when there is one) and a request id.
pub(super) fn with_session(
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
pub(super) fn blob(state: &State, id: &Value, size: u64) -> Response<AnswerBody> {
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

/// A `subscriptions/listen` answer: an SSE stream whose events come from `events`, open until
/// the emulator closes it (the body ends) or the client goes (hyper drops the body, and with
/// it the channel).
pub(super) fn listen_stream(events: UnboundedReceiver<Bytes>) -> Response<AnswerBody> {
    let mut response = Response::new(AnswerBody::Events(events));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    response
}

/// The emulator's answer bodies: whole, streamed from a static buffer, or events as they come.
pub(crate) enum AnswerBody {
    Full(Option<Bytes>),
    Stream {
        head: Option<Bytes>,
        remaining: u64,
        tail: Option<Bytes>,
    },
    Events(UnboundedReceiver<Bytes>),
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
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let next = match self.get_mut() {
            AnswerBody::Events(events) => {
                return events
                    .poll_recv(cx)
                    .map(|event| event.map(|b| Ok(http_body::Frame::data(b))));
            }
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
            AnswerBody::Events(_) => false,
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            AnswerBody::Full(bytes) => {
                http_body::SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            // Unknown up front, as a streamed answer is: sent chunked.
            AnswerBody::Stream { .. } | AnswerBody::Events(_) => http_body::SizeHint::new(),
        }
    }
}
