//! The call's span and its attempts' spans, their names and attributes, and each layer's
//! decision as an event on the attempt it was made on.

use http::{HeaderMap, HeaderName, Uri};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tracing::Span;
use tracing::field::Empty;

use crate::jsonrpc::{Body as JsonRpcBody, Message};
use crate::record::{Decision, Verdict};

use super::names::*;

/// Opens a call span for a request with `headers`, named from the `mcp-method` and `mcp-name`
/// headers when it has them (its server is recorded once it is known where the call goes).
/// Whether it was named.
pub(crate) fn call_span(headers: &HeaderMap) -> (Span, bool) {
    let span = tracing::info_span!(
        target: "agentcore_tower",
        "mcp",
        otel.name = Empty,
        otel.kind = "client",
        otel.status_code = Empty,
        "mcp.method.name" = Empty,
        "gen_ai.tool.name" = Empty,
        "gen_ai.prompt.name" = Empty,
        "mcp.resource.uri" = Empty,
        "gen_ai.operation.name" = Empty,
        "jsonrpc.request.id" = Empty,
        "mcp.session.id" = Empty,
        "mcp.protocol.version" = Empty,
        "server.address" = Empty,
        "server.port" = Empty,
        "error.type" = Empty,
        "rpc.response.status_code" = Empty,
    );
    if span.is_disabled() {
        return (span, false);
    }
    let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(session) = text(&MCP_SESSION_ID) {
        span.record("mcp.session.id", session);
    }
    if let Some(version) = text(&MCP_PROTOCOL_VERSION) {
        span.record("mcp.protocol.version", version);
    }
    let named = match text(&MCP_METHOD) {
        Some(method) => {
            name_call(&span, method, text(&MCP_NAME));
            true
        }
        None => false,
    };
    (span, named)
}

/// Names the call span for `method` on `target` (a tool, a prompt, a resource).
fn name_call(span: &Span, method: &str, target: Option<&str>) {
    span.record("mcp.method.name", method);
    let named = match (method, target) {
        ("tools/call", Some(tool)) => {
            span.record("gen_ai.tool.name", tool);
            Some(tool)
        }
        ("prompts/get", Some(prompt)) => {
            span.record("gen_ai.prompt.name", prompt);
            Some(prompt)
        }
        ("resources/read" | "resources/subscribe" | "resources/unsubscribe", Some(uri)) => {
            // A resource URI is no low-cardinality target: an attribute, not in the name.
            span.record("mcp.resource.uri", uri);
            None
        }
        _ => None,
    };
    if method == "tools/call" {
        span.record("gen_ai.operation.name", "execute_tool");
    }
    match named {
        Some(target) => span.record("otel.name", format_args!("{method} {target}")),
        None => span.record("otel.name", method),
    };
}

/// Describes the call span from the request body (`bytes`, parsed as `body`): its method and
/// target unless the headers named them, its protocol version from `_meta` (MCP 2026-07-28)
/// unless the headers named it (`(named, versioned)`), and its JSON-RPC request id.
pub(crate) fn describe_call(
    span: &Span,
    (named, versioned): (bool, bool),
    body: &JsonRpcBody,
    bytes: Option<&[u8]>,
) {
    if span.is_disabled() {
        return;
    }
    let JsonRpcBody::Single(Message {
        method: Some(method),
        name,
        protocol_version,
        ..
    }) = body
    else {
        return;
    };
    if !named {
        name_call(span, method, name.as_deref());
    }
    if let (false, Some(version)) = (versioned, protocol_version) {
        span.record("mcp.protocol.version", version.as_str());
    }
    #[derive(Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    if let Some(id) = bytes
        .and_then(|b| serde_json::from_slice::<Id<'_>>(b).ok())
        .and_then(|m| m.id)
    {
        let raw = id.get();
        match serde_json::from_str::<&str>(raw) {
            Ok(text) => span.record("jsonrpc.request.id", text),
            Err(_) if raw != "null" => span.record("jsonrpc.request.id", raw),
            Err(_) => span,
        };
    }
}

/// A URI's `server.address` and `server.port` (the scheme's default port when it names none).
pub(crate) fn server_of(uri: &Uri) -> Option<(&str, u16)> {
    let host = uri.host()?;
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("http") => Some(80),
        _ => Some(443),
    })?;
    Some((host, port))
}

fn record_server(span: &Span, uri: &Uri) {
    if let Some((host, port)) = server_of(uri) {
        span.record("server.address", host);
        span.record("server.port", i64::from(port));
    }
}

/// Opens the span of an attempt of `request`, a child of the call span: `resends` is how many
/// attempts of the call came before it.
pub(crate) fn attempt_span<B>(call: &Span, request: &http::Request<B>, resends: u32) -> Span {
    let span = tracing::info_span!(
        target: "agentcore_tower",
        parent: call,
        "attempt",
        otel.name = request.method().as_str(),
        otel.kind = "client",
        otel.status_code = Empty,
        "http.request.method" = request.method().as_str(),
        "url.full" = Empty,
        "server.address" = Empty,
        "server.port" = Empty,
        "http.response.status_code" = Empty,
        "http.request.resend_count" = Empty,
        "aws.request_id" = Empty,
        "error.type" = Empty,
    );
    if !span.is_disabled() {
        // `url.full` and the server: recorded once, when known where the attempt goes.
        if resends > 0 {
            span.record("http.request.resend_count", i64::from(resends));
        }
    }
    span
}

/// The attempt's request goes to `uri` (a signer's endpoint): its `url.full` and server.
pub(crate) fn attempt_sent_to(span: &Span, uri: &Uri) {
    if span.is_disabled() {
        return;
    }
    span.record("url.full", tracing::field::display(FullUrl(uri)));
    record_server(span, uri);
}

/// The call's requests go to `uri`: its server.
pub(crate) fn call_sent_to(span: &Span, uri: &Uri) {
    if !span.is_disabled() {
        record_server(span, uri);
    }
}

/// Records what came back for an attempt: the answer's status (an HTTP error sets `error.type`)
/// and AWS request id, or how the service below failed.
pub(crate) fn attempt_answered(span: &Span, answer: Result<(u16, &HeaderMap), &'static str>) {
    if span.is_disabled() {
        return;
    }
    match answer {
        Ok((status, headers)) => {
            span.record("http.response.status_code", i64::from(status));
            if let Some(id) = headers.get(AWS_REQUEST_ID).and_then(|v| v.to_str().ok()) {
                span.record("aws.request_id", id);
            }
            if status >= 400 {
                span.record("error.type", itoa::Buffer::new().format(status));
                span.record("otel.status_code", "error");
            }
        }
        Err(kind) => {
            span.record("error.type", kind);
            span.record("otel.status_code", "error");
        }
    }
}

/// A layer's decision on an attempt, as an event on the attempt's span.
pub(crate) fn decision_event(span: &Span, decision: &Decision) {
    if span.is_disabled() {
        return;
    }
    let (verdict, wait_ms) = match decision.verdict() {
        Verdict::SentAgain { wait, .. } => (
            "sent_again",
            Some(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)),
        ),
        Verdict::Delivered => ("delivered", None),
        Verdict::AttemptsExhausted { .. } => ("attempts_exhausted", None),
        Verdict::WaitCeiling { .. } => ("wait_ceiling", None),
        Verdict::BudgetExhausted { .. } => ("budget_exhausted", None),
        Verdict::Forbidden { .. } => ("forbidden", None),
        Verdict::CallDropped => ("call_dropped", None),
        Verdict::NotRenewed { .. } => ("not_renewed", None),
    };
    let permission = decision.permission();
    tracing::info!(
        target: "agentcore_tower",
        parent: span,
        layer = decision.layer(),
        verdict,
        wait_ms,
        by = permission.map(|p| tracing::field::debug(p.by)),
        assumes = permission.map(|p| tracing::field::debug(p.assumes)),
        "{}",
        decision.verdict(),
    );
}

/// How a call failed, for its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The answer carried this JSON-RPC error code.
    JsonRpc(i64),
    /// A `tools/call` result with `isError: true`.
    Tool,
    /// An HTTP error status.
    Http(u16),
    /// The service below failed (a short kind).
    Transport(&'static str),
}

/// Records how the call ended on its span.
pub(crate) fn call_ended(span: &Span, error: Option<CallError>) {
    let Some(error) = error else { return };
    if span.is_disabled() {
        return;
    }
    let mut buffer = itoa::Buffer::new();
    let kind = match error {
        CallError::JsonRpc(code) => {
            let code = buffer.format(code);
            span.record("rpc.response.status_code", code);
            code
        }
        CallError::Tool => "tool_error",
        CallError::Http(status) => buffer.format(status),
        CallError::Transport(kind) => kind,
    };
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

/// The error an answer's body carries, read off `bytes` (the whole body, as it was read ahead):
/// a JSON-RPC error's code, or a tool result's `isError: true`.
pub(crate) fn answer_error(bytes: &[u8]) -> Option<CallError> {
    #[derive(Deserialize)]
    struct Answer {
        error: Option<ErrorObject>,
        result: Option<ResultObject>,
    }
    #[derive(Deserialize)]
    struct ErrorObject {
        code: i64,
        #[serde(default)]
        #[allow(dead_code)]
        message: IgnoredAny,
    }
    #[derive(Deserialize)]
    struct ResultObject {
        #[serde(default, rename = "isError")]
        is_error: bool,
    }
    let answer: Answer = serde_json::from_slice(bytes).ok()?;
    if let Some(error) = answer.error {
        return Some(CallError::JsonRpc(error.code));
    }
    answer
        .result
        .is_some_and(|r| r.is_error)
        .then_some(CallError::Tool)
}

/// The whole of an in-memory `body`, read at once from a clone of it — polled once, without
/// waiting: `None` when it would have to wait, fails, or has more than one frame of data.
pub(crate) fn body_now<B>(body: &B) -> Option<bytes::Bytes>
where
    B: http_body::Body<Data = bytes::Bytes> + Clone,
{
    let mut clone = std::pin::pin!(body.clone());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let data = match clone.as_mut().poll_frame(&mut cx) {
        std::task::Poll::Ready(Some(Ok(frame))) => frame.into_data().ok()?,
        std::task::Poll::Ready(None) => bytes::Bytes::new(),
        _ => return None,
    };
    clone.is_end_stream().then_some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_errors() {
        assert_eq!(
            answer_error(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#),
            Some(CallError::JsonRpc(-32602))
        );
        assert_eq!(
            answer_error(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#),
            Some(CallError::Tool)
        );
        assert_eq!(
            answer_error(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            None
        );
        assert_eq!(answer_error(b"event: message"), None);
    }
}
