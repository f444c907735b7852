//! The call's spans, named as OpenTelemetry's conventions name them — for MCP clients (one span
//! per MCP request) and for HTTP clients (one span per attempt on the wire) — with no
//! OpenTelemetry dependency: they are `tracing` spans whose field names are the conventions'
//! attribute names, which `tracing-opentelemetry` exports as they are.
//!
//! * The **call span** (`mcp` in `tracing`; `otel.name = "{mcp.method.name} {target}"`,
//!   `otel.kind = "client"`) is opened by the owner of the call — the first of this crate's
//!   layers the call meets, in whatever order they are stacked — and entered by every layer of
//!   the crate that the call passes through. Its fields: `mcp.method.name`, `gen_ai.tool.name`,
//!   `gen_ai.prompt.name`, `mcp.resource.uri`, `jsonrpc.request.id`, `mcp.session.id`,
//!   `mcp.protocol.version`, `gen_ai.operation.name` (`execute_tool` for `tools/call`),
//!   `server.address`, `server.port` (the server the signer sends to), and when the call fails
//!   `error.type`,
//!   `rpc.response.status_code` and `otel.status_code = "error"`.
//! * One **attempt span** per attempt (`otel.name` = the HTTP method, `otel.kind = "client"`), a
//!   child of the call span: `http.request.method`, `url.full` (the URL the signer sends to —
//!   an `InvokeAgentRuntime` URL for a runtime — else the request's; no user info; every query
//!   value `REDACTED`, signatures and credentials among them), `server.address`, `server.port`,
//!   `http.response.status_code`, `http.request.resend_count` (on re-sends only: 1, 2, …),
//!   `aws.request_id` (from `x-amzn-requestid`), `error.type`. Each layer's decision on the
//!   attempt is an event on it (`layer`, `verdict`, `wait_ms`, `by`, `assumes`).
//!
//! **How the method is found**: OpenTelemetry takes a span's name and kind when the span
//! starts (its first entry), so the call span is named before any layer enters it: from the
//! `mcp-method` / `mcp-name` headers when the request has them; else from the body as the layers
//! read it before the first attempt is sent (the replay guard parses it; the session recovery
//! layer looks at an in-memory body at once, without waiting); else it stays `mcp`.
//!
//! **Metrics** (feature `opentelemetry`): [`Metrics`] records `mcp.client.operation.duration`
//! per call and `http.client.request.duration` per attempt.
//!
//! **Level**: the spans are `info`: they are the call's record, one per call and one per
//! attempt, which operators export; when no subscriber wants them they cost a callsite check
//! and no allocation.
//!
//! **Trace headers**: each attempt carries the W3C `traceparent` (and `tracestate`, `baggage`)
//! and X-Ray's `X-Amzn-Trace-Id` of the current trace, so that AgentCore's spans join the
//! app's trace. The crate cannot read the current OpenTelemetry context without depending on
//! OpenTelemetry: a [`TraceContext`] says what it is — set on the layers
//! ([`RetryLayer::trace_context`](crate::retry::RetryLayer::trace_context),
//! [`RecommendedLayers::trace_context`](crate::RecommendedLayers::trace_context),
//! [`McpSessionRecoveryLayer::trace_context`](crate::McpSessionRecoveryLayer::trace_context)),
//! or in a request's extensions for that call; with the `opentelemetry` feature,
//! [`TraceContext::opentelemetry`] reads `opentelemetry::Context::current()`. The headers are
//! written when an attempt is handed down, inside the attempt's span (so the span id is the
//! attempt's when `tracing-opentelemetry` activates contexts), before the signer below signs
//! the request. A header the app set itself is kept, never overwritten; so is one the request
//! was signed with — below the signer, a layer that re-sends the signed request leaves its
//! signed `traceparent` (that of the attempt it was signed for) as it is, rather than break the
//! signature (`X-Amzn-Trace-Id`, which SigV4 leaves unsigned as the AWS SDKs do, is each
//! attempt's own). [`TraceContext::params_meta`] also writes the call's context into the body's
//! `params._meta` (MCP's SEP-414), on request.
//!
//! ```
//! use agentcore_tower::telemetry::{TraceContext, TraceHeaders};
//! use agentcore_tower::ThrottleRetryLayer;
//!
//! // A fixed trace context (a real one reads the app's current trace).
//! let context = TraceContext::new(|| {
//!     Some(TraceHeaders::new([0x4b; 16], [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7], true))
//! });
//! let headers = TraceHeaders::new([0x4b; 16], [0xb7; 8], true);
//! assert_eq!(
//!     headers.traceparent(),
//!     "00-4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b-b7b7b7b7b7b7b7b7-01"
//! );
//! assert_eq!(
//!     headers.x_amzn_trace_id(),
//!     "Root=1-4b4b4b4b-4b4b4b4b4b4b4b4b4b4b4b4b;Parent=b7b7b7b7b7b7b7b7;Sampled=1"
//! );
//! let layer = ThrottleRetryLayer::new().trace_context(context);
//! # let _ = layer;
//! ```

use std::fmt;

use http::{HeaderMap, HeaderName, Uri};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tracing::Span;
use tracing::field::Empty;

use crate::jsonrpc::{Body as JsonRpcBody, Message};
use crate::record::{Decision, Verdict};

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const AWS_REQUEST_ID: HeaderName = HeaderName::from_static("x-amzn-requestid");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
const BAGGAGE: HeaderName = HeaderName::from_static("baggage");
const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");

/// The trace context an attempt carries to AgentCore: a trace id, the id of the span the
/// attempt's server span is a child of, whether it is sampled, and the W3C `tracestate` and
/// `baggage` headers when there are any.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceHeaders {
    /// The 16-byte trace id (not all zeros).
    pub trace_id: [u8; 16],
    /// The 8-byte parent span id (not all zeros).
    pub span_id: [u8; 8],
    /// Whether the trace is sampled.
    pub sampled: bool,
    /// The W3C `tracestate` header's value.
    pub trace_state: Option<String>,
    /// The W3C `baggage` header's value.
    pub baggage: Option<String>,
}

impl TraceHeaders {
    /// A trace context without `tracestate` or `baggage`.
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], sampled: bool) -> Self {
        Self {
            trace_id,
            span_id,
            sampled,
            trace_state: None,
            baggage: None,
        }
    }

    /// With this `tracestate`.
    pub fn trace_state(mut self, trace_state: impl Into<String>) -> Self {
        self.trace_state = Some(trace_state.into());
        self
    }

    /// With this `baggage`.
    pub fn baggage(mut self, baggage: impl Into<String>) -> Self {
        self.baggage = Some(baggage.into());
        self
    }

    /// Whether the ids are valid (W3C: neither is all zeros).
    pub fn is_valid(&self) -> bool {
        self.trace_id != [0; 16] && self.span_id != [0; 8]
    }

    /// The W3C `traceparent` header's value: `00-{trace id}-{span id}-{01|00}`.
    pub fn traceparent(&self) -> String {
        let mut text = String::with_capacity(55);
        text.push_str("00-");
        hex(&mut text, &self.trace_id);
        text.push('-');
        hex(&mut text, &self.span_id);
        text.push_str(if self.sampled { "-01" } else { "-00" });
        text
    }

    /// X-Ray's `X-Amzn-Trace-Id` header's value:
    /// `Root=1-{first 8 hex digits}-{last 24};Parent={span id};Sampled={1|0}`.
    pub fn x_amzn_trace_id(&self) -> String {
        let mut text = String::with_capacity(81);
        text.push_str("Root=1-");
        hex(&mut text, &self.trace_id[..4]);
        text.push('-');
        hex(&mut text, &self.trace_id[4..]);
        text.push_str(";Parent=");
        hex(&mut text, &self.span_id);
        text.push_str(if self.sampled {
            ";Sampled=1"
        } else {
            ";Sampled=0"
        });
        text
    }
}

fn hex(into: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        into.push(DIGITS[usize::from(b >> 4)] as char);
        into.push(DIGITS[usize::from(b & 0xf)] as char);
    }
}

/// Where the trace headers of a call's attempts come from: the app's current trace context, read
/// when each attempt is handed down. Cheap to clone.
#[derive(Clone)]
pub struct TraceContext {
    current: std::sync::Arc<dyn Fn() -> Option<TraceHeaders> + Send + Sync>,
    params_meta: bool,
}

impl TraceContext {
    /// The trace context `current` gives (`None`: no trace, no headers).
    pub fn new(current: impl Fn() -> Option<TraceHeaders> + Send + Sync + 'static) -> Self {
        Self {
            current: std::sync::Arc::new(current),
            params_meta: false,
        }
    }

    /// Whether the signer also writes the trace context into the request's `params._meta`
    /// (`traceparent`, `tracestate`, `baggage`: MCP's SEP-414, which OpenTelemetry's MCP
    /// conventions follow), so that an MCP server's span is a child of the call's span whatever
    /// carries the request. Off by default: it changes the body the app sent.
    ///
    /// Done by the signing layers ([`SigV4InvokeLayer`](crate::SigV4InvokeLayer),
    /// [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer)), which read the whole body
    /// anyway, before they sign: into every JSON-RPC request and notification (not into an
    /// answer to the server's requests), the context read once per call inside the call's
    /// span — the same on every attempt. The app's bytes are kept as they are, the keys added
    /// into `params._meta` (created when absent); a `_meta` that has a `traceparent`,
    /// `tracestate` or `baggage` already is left alone (the app's own context, and no key
    /// twice), and so is a body that is not one JSON-RPC message with object `params`.
    ///
    /// ```
    /// use agentcore_tower::telemetry::{TraceContext, TraceHeaders};
    /// let context = TraceContext::new(|| Some(TraceHeaders::new([0x4b; 16], [0xb7; 8], true)))
    ///     .params_meta(true);
    /// # let _ = context;
    /// ```
    pub fn params_meta(mut self, on: bool) -> Self {
        self.params_meta = on;
        self
    }

    /// Whether the trace context goes into `params._meta` too ([`params_meta`](Self::params_meta)).
    pub fn is_params_meta(&self) -> bool {
        self.params_meta
    }

    /// The span context of `opentelemetry::Context::current()`, its `tracestate`, and its
    /// baggage.
    #[cfg(feature = "opentelemetry")]
    pub fn opentelemetry() -> Self {
        Self::new(|| {
            use opentelemetry::baggage::BaggageExt;
            use opentelemetry::trace::TraceContextExt;
            let context = opentelemetry::Context::current();
            let span = context.span();
            let span_context = span.span_context();
            if !span_context.is_valid() {
                return None;
            }
            let mut headers = TraceHeaders::new(
                span_context.trace_id().to_bytes(),
                span_context.span_id().to_bytes(),
                span_context.is_sampled(),
            );
            let state = span_context.trace_state().header();
            if !state.is_empty() {
                headers.trace_state = Some(state);
            }
            let baggage: Vec<String> = context
                .baggage()
                .iter()
                .map(|(key, (value, _))| {
                    let value = value.as_str();
                    format!(
                        "{}={}",
                        key.as_str(),
                        percent_encoding::utf8_percent_encode(
                            value,
                            percent_encoding::NON_ALPHANUMERIC
                        )
                    )
                })
                .collect();
            if !baggage.is_empty() {
                headers.baggage = Some(baggage.join(","));
            }
            Some(headers)
        })
    }

    /// The current trace context, if any (and valid).
    pub fn current(&self) -> Option<TraceHeaders> {
        (self.current)().filter(TraceHeaders::is_valid)
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceContext")
            .field("params_meta", &self.params_meta)
            .finish_non_exhaustive()
    }
}

/// `body` (one JSON-RPC request or notification) with `trace` written into `params._meta`
/// (SEP-414): the keys `traceparent`, `tracestate` and `baggage` inserted, every other byte as
/// it was. `None` — the body stays as it is — when it is not one JSON-RPC message with a method,
/// its `params` is not an object, or its `_meta` is not an object or has any of the three keys.
pub(crate) fn with_params_meta(body: &[u8], trace: &TraceHeaders) -> Option<bytes::Bytes> {
    // The members of an object, each value as it is written (a `null` member is there too).
    type Members<'a> = std::collections::HashMap<std::borrow::Cow<'a, str>, &'a RawValue>;
    // Where a value borrowed from `body` starts in it.
    let offset = |raw: &RawValue| raw.get().as_ptr() as usize - body.as_ptr() as usize;
    let message: Members<'_> = serde_json::from_slice(body).ok()?;
    message.get("method")?;
    let mut entries = String::with_capacity(160);
    let mut entry = |key: &str, value: &str| {
        if !entries.is_empty() {
            entries.push(',');
        }
        entries.push('"');
        entries.push_str(key);
        entries.push_str("\":");
        entries.push_str(&serde_json::Value::from(value).to_string());
    };
    entry("traceparent", &trace.traceparent());
    if let Some(state) = &trace.trace_state {
        entry("tracestate", state);
    }
    if let Some(baggage) = &trace.baggage {
        entry("baggage", baggage);
    }
    // (where to insert, what, whether a comma follows it)
    let (at, insert, comma) = match message.get("params") {
        None => {
            // A top-level object: `params` goes before its closing brace.
            let end = body.iter().rposition(|&b| b == b'}')?;
            let empty = body[..end]
                .iter()
                .rev()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b == b'{');
            let lead = if empty { "" } else { "," };
            (
                end,
                format!("{lead}\"params\":{{\"_meta\":{{{entries}}}}}"),
                false,
            )
        }
        Some(params) => {
            if !params.get().starts_with('{') {
                return None;
            }
            let fields: Members<'_> = serde_json::from_str(params.get()).ok()?;
            let (object, insert) = match fields.get("_meta") {
                None => (*params, format!("\"_meta\":{{{entries}}}")),
                Some(meta) => {
                    if !meta.get().starts_with('{') {
                        return None;
                    }
                    let meta_fields: Members<'_> = serde_json::from_str(meta.get()).ok()?;
                    // The app's own trace context (or part of it): kept, and no key twice.
                    if ["traceparent", "tracestate", "baggage"]
                        .iter()
                        .any(|key| meta_fields.contains_key(*key))
                    {
                        return None;
                    }
                    (*meta, entries)
                }
            };
            let start = offset(object) + 1;
            let empty = object.get()[1..].trim_start().starts_with('}');
            (start, insert, !empty)
        }
    };
    let mut out = Vec::with_capacity(body.len() + insert.len() + 1);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(insert.as_bytes());
    if comma {
        out.push(b',');
    }
    out.extend_from_slice(&body[at..]);
    Some(out.into())
}

/// Which trace headers the app set itself on a call's request (kept on every attempt).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AppTraceHeaders {
    traceparent: bool,
    x_ray: bool,
}

impl AppTraceHeaders {
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        Self {
            traceparent: headers.contains_key(TRACEPARENT),
            x_ray: headers.contains_key(X_AMZN_TRACE_ID),
        }
    }
}

/// Writes the current trace context's headers on an attempt's `headers`, but those the app set
/// itself (`app`): `traceparent` with its `tracestate` and `baggage`, and `X-Amzn-Trace-Id`.
///
/// Never a header the request was signed with: below a signer, a layer re-sends the request
/// the signer signed, and a signed trace header changed would break its signature (the
/// re-send then carries the trace headers it was signed with, those of an earlier attempt).
pub(crate) fn inject(context: &TraceContext, app: AppTraceHeaders, headers: &mut HeaderMap) {
    let signed = signed_headers(headers);
    let is_signed = |name: &HeaderName| {
        signed.is_some_and(|list| list.split(';').any(|signed| signed == name.as_str()))
    };
    let traceparent = app.traceparent || is_signed(&TRACEPARENT);
    let x_ray = app.x_ray || is_signed(&X_AMZN_TRACE_ID);
    if traceparent && x_ray {
        return;
    }
    let Some(trace) = context.current() else {
        return;
    };
    let value = |text: &str| http::HeaderValue::from_str(text).ok();
    if !traceparent {
        if let Some(v) = value(&trace.traceparent()) {
            headers.insert(TRACEPARENT, v);
        }
        for (name, text) in [(TRACESTATE, &trace.trace_state), (BAGGAGE, &trace.baggage)] {
            if let Some(v) = text.as_deref().and_then(value) {
                headers.insert(name, v);
            }
        }
    }
    if !x_ray && let Some(v) = value(&trace.x_amzn_trace_id()) {
        headers.insert(X_AMZN_TRACE_ID, v);
    }
}

/// The `SignedHeaders` of a SigV4 `Authorization` header (`a;b;c`, lower case), if it has one.
fn signed_headers(headers: &HeaderMap) -> Option<&str> {
    let authorization = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let rest = authorization.strip_prefix("AWS4-HMAC-SHA256 ")?;
    let at = rest.find("SignedHeaders=")? + "SignedHeaders=".len();
    let list = &rest[at..];
    Some(list.split(',').next().unwrap_or(list).trim())
}

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

/// The OpenTelemetry histograms of the calls, sessions and attempts (feature `opentelemetry`):
/// `mcp.client.operation.duration` (one per call, recorded when the call's owner finishes it),
/// `mcp.client.session.duration` (one per MCP session
/// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) saw opened and ended) and
/// `http.client.request.duration` (one per attempt sent, when it is answered), in seconds, with
/// the buckets and attributes of OpenTelemetry's conventions; `server.address` and
/// `server.port` are those of the endpoint the signer sends to. Set on the layers with
/// [`RetryLayer::metrics`](crate::retry::RetryLayer::metrics),
/// [`RecommendedLayers::metrics`](crate::RecommendedLayers::metrics),
/// [`McpSessionRecoveryLayer::metrics`](crate::McpSessionRecoveryLayer::metrics). A
/// [`RetryBudget`](crate::RetryBudget)'s counters: [`Metrics::observe_budget`].
///
/// ```
/// use agentcore_tower::telemetry::Metrics;
/// let metrics = Metrics::new(&opentelemetry::global::meter("my-app"));
/// let layers = agentcore_tower::ThrottleRetryLayer::new().metrics(metrics);
/// # let _ = layers;
/// ```
#[cfg(feature = "opentelemetry")]
#[derive(Clone)]
pub struct Metrics {
    meter: opentelemetry::metrics::Meter,
    operation: opentelemetry::metrics::Histogram<f64>,
    session: opentelemetry::metrics::Histogram<f64>,
    request: opentelemetry::metrics::Histogram<f64>,
}

/// The bucket boundaries of the MCP conventions' histograms, in seconds.
#[cfg(feature = "opentelemetry")]
const MCP_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[cfg(feature = "opentelemetry")]
impl Metrics {
    /// The histograms, from `meter`.
    pub fn new(meter: &opentelemetry::metrics::Meter) -> Self {
        Self {
            meter: meter.clone(),
            operation: meter
                .f64_histogram("mcp.client.operation.duration")
                .with_unit("s")
                .with_description("The duration of the MCP request as observed by the client")
                .with_boundaries(MCP_BUCKETS.to_vec())
                .build(),
            session: meter
                .f64_histogram("mcp.client.session.duration")
                .with_unit("s")
                .with_description("The duration of the MCP session as observed by the client")
                .with_boundaries(MCP_BUCKETS.to_vec())
                .build(),
            request: meter
                .f64_histogram("http.client.request.duration")
                .with_unit("s")
                .with_description("Duration of HTTP client requests")
                .with_boundaries(vec![
                    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                ])
                .build(),
        }
    }

    /// An MCP session with `server` (its `server.address` and `server.port`) ended after
    /// `duration`, with `error` (an `error.type`) or not.
    pub(crate) fn session_ended(
        &self,
        duration: std::time::Duration,
        server: Option<(&str, i64)>,
        protocol_version: Option<&str>,
        error: Option<&'static str>,
    ) {
        use opentelemetry::KeyValue;
        let mut attributes = Vec::with_capacity(4);
        if let Some((address, port)) = server {
            attributes.push(KeyValue::new("server.address", address.to_owned()));
            attributes.push(KeyValue::new("server.port", port));
        }
        if let Some(version) = protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.to_owned()));
        }
        if let Some(error) = error {
            attributes.push(KeyValue::new("error.type", error));
        }
        self.session.record(duration.as_secs_f64(), &attributes);
    }

    /// The histograms of the global meter provider's meter `agentcore-tower`.
    pub fn global() -> Self {
        Self::new(&opentelemetry::global::meter("agentcore-tower"))
    }

    /// Reports what `budget` counts ([`RetryBudget::counters`](crate::RetryBudget::counters))
    /// as asynchronous instruments of this meter, read at each collection, with `attributes`
    /// (to tell several budgets apart; none for one):
    ///
    /// | Instrument | Kind | Unit | What |
    /// |---|---|---|---|
    /// | `agentcore_tower.retry_budget.calls` | counter | `{call}` | calls ended |
    /// | `agentcore_tower.retry_budget.attempts` | counter | `{attempt}` | their attempts |
    /// | `agentcore_tower.retry_budget.resends` | counter | `{attempt}` | re-sends, by `agentcore_tower.resend.cause`: `throttled`, `session_busy`, `session_expired`, `failure` |
    /// | `agentcore_tower.retry_budget.refusals` | counter | `{attempt}` | re-sends the budget refused |
    /// | `agentcore_tower.retry_budget.wait` | counter | `s` | time waited before re-sends |
    /// | `agentcore_tower.retry_budget.tokens` | gauge | `{token}` | tokens in the bucket |
    ///
    /// The meter provider keeps the budget (a clone: the same bucket) for as long as it lives.
    /// Call it once per budget: each call registers callbacks of its own, so a budget observed
    /// twice with the same attributes is reported twice.
    ///
    /// ```
    /// use agentcore_tower::RecommendedLayers;
    /// use agentcore_tower::telemetry::Metrics;
    /// # let signer = tower::layer::util::Identity::new();
    /// let metrics = Metrics::global();
    /// let layers = RecommendedLayers::new(signer).metrics(metrics.clone());
    /// // The one budget the recommended layers share.
    /// metrics.observe_budget(&layers.budget().unwrap(), &[]);
    /// ```
    pub fn observe_budget(
        &self,
        budget: &crate::RetryBudget,
        attributes: &[opentelemetry::KeyValue],
    ) {
        use opentelemetry::KeyValue;
        let attributes: std::sync::Arc<[KeyValue]> = attributes.into();
        let counter = |name: &'static str,
                       unit: &'static str,
                       description: &'static str,
                       read: fn(&crate::budget::BudgetCounters) -> u64| {
            let budget = budget.clone();
            let attributes = attributes.clone();
            self.meter
                .u64_observable_counter(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |observer| {
                    observer.observe(read(&budget.counters()), &attributes);
                })
                .build();
        };
        counter(
            "agentcore_tower.retry_budget.calls",
            "{call}",
            "Calls ended",
            |c| c.calls,
        );
        counter(
            "agentcore_tower.retry_budget.attempts",
            "{attempt}",
            "Attempts of the calls ended",
            |c| c.attempts,
        );
        counter(
            "agentcore_tower.retry_budget.refusals",
            "{attempt}",
            "Re-sends the retry budget refused",
            |c| c.budget_refusals,
        );
        {
            let budget = budget.clone();
            let by_cause: std::sync::Arc<[Vec<KeyValue>; 4]> = std::sync::Arc::new(
                ["throttled", "session_busy", "session_expired", "failure"].map(|cause| {
                    let mut set = attributes.to_vec();
                    set.push(KeyValue::new("agentcore_tower.resend.cause", cause));
                    set
                }),
            );
            self.meter
                .u64_observable_counter("agentcore_tower.retry_budget.resends")
                .with_unit("{attempt}")
                .with_description("Re-sends, by cause")
                .with_callback(move |observer| {
                    let c = budget.counters();
                    let counts = [
                        c.resent_throttled,
                        c.resent_session_busy,
                        c.resent_session_expired,
                        c.resent_failures,
                    ];
                    for (count, attributes) in counts.into_iter().zip(by_cause.iter()) {
                        observer.observe(count, attributes);
                    }
                })
                .build();
        }
        {
            let budget = budget.clone();
            let attributes = attributes.clone();
            self.meter
                .f64_observable_counter("agentcore_tower.retry_budget.wait")
                .with_unit("s")
                .with_description("Time waited before re-sends")
                .with_callback(move |observer| {
                    observer.observe(budget.counters().waited.as_secs_f64(), &attributes);
                })
                .build();
        }
        let budget = budget.clone();
        self.meter
            .u64_observable_gauge("agentcore_tower.retry_budget.tokens")
            .with_unit("{token}")
            .with_description("Tokens in the retry budget's bucket")
            .with_callback(move |observer| {
                observer.observe(u64::from(budget.counters().tokens), &attributes);
            })
            .build();
    }
}

#[cfg(feature = "opentelemetry")]
impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Metrics(..)")
    }
}

/// What a call's metrics need, kept in its context: nothing unless metrics are on.
#[derive(Default)]
pub(crate) struct CallMetrics {
    #[cfg(feature = "opentelemetry")]
    on: Option<Box<MetricsOn>>,
}

#[cfg(feature = "opentelemetry")]
struct MetricsOn {
    metrics: Metrics,
    started: std::time::Instant,
    /// The server of the first attempt: `server.address`, `server.port`.
    server: Option<(String, i64)>,
    /// The `mcp-method`, `mcp-name` and `mcp-protocol-version` headers of the first attempt.
    headers: [Option<String>; 3],
    /// The attempts in flight: index, start, HTTP method.
    attempts: Vec<(usize, std::time::Instant, http::Method)>,
}

impl CallMetrics {
    /// Whether metrics are on for the call.
    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "opentelemetry")]
        return self.on.is_some();
        #[cfg(not(feature = "opentelemetry"))]
        false
    }

    /// Turns metrics on for the call, from now.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn enable(&mut self, metrics: &Metrics) {
        if self.on.is_none() {
            self.on = Some(Box::new(MetricsOn {
                metrics: metrics.clone(),
                started: std::time::Instant::now(),
                server: None,
                headers: Default::default(),
                attempts: Vec::new(),
            }));
        }
    }

    /// An attempt at `index` is handed down as `request`.
    pub(crate) fn attempt_sent<B>(&mut self, index: usize, request: &http::Request<B>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on {
            if on.attempts.iter().any(|(i, ..)| *i == index) {
                return;
            }
            if on.server.is_none()
                && let Some((host, port)) = server_of(request.uri())
            {
                on.server = Some((host.to_owned(), i64::from(port)));
                let text = |name| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                on.headers = [text(MCP_METHOD), text(MCP_NAME), text(MCP_PROTOCOL_VERSION)];
            }
            on.attempts
                .push((index, std::time::Instant::now(), request.method().clone()));
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (index, request);
    }

    /// The call's requests go to `uri` (a signer's endpoint): the server of its metrics.
    pub(crate) fn sent_to(&mut self, uri: &Uri) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on
            && let Some((host, port)) = server_of(uri)
        {
            on.server = Some((host.to_owned(), i64::from(port)));
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = uri;
    }

    /// The server the call's requests went to (`server.address`, `server.port`), when metrics
    /// are on.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn server(&self) -> Option<(String, i64)> {
        self.on.as_ref()?.server.clone()
    }

    /// The attempt at `index` was never sent: no request duration for it.
    pub(crate) fn attempt_dropped(&mut self, index: usize) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on {
            on.attempts.retain(|(i, ..)| *i != index);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = index;
    }

    /// The attempt at `index` is answered (status) or failed (a short error kind).
    pub(crate) fn attempt_answered(&mut self, index: usize, answer: Result<u16, &'static str>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on
            && let Some(at) = on.attempts.iter().position(|(i, ..)| *i == index)
        {
            use opentelemetry::KeyValue;
            let (_, started, method) = on.attempts.swap_remove(at);
            let mut attributes = vec![KeyValue::new(
                "http.request.method",
                method.as_str().to_owned(),
            )];
            if let Some((address, port)) = &on.server {
                attributes.push(KeyValue::new("server.address", address.clone()));
                attributes.push(KeyValue::new("server.port", *port));
            }
            match answer {
                Ok(status) => {
                    attributes.push(KeyValue::new(
                        "http.response.status_code",
                        i64::from(status),
                    ));
                    if status >= 400 {
                        attributes.push(KeyValue::new("error.type", status.to_string()));
                    }
                }
                Err(kind) => attributes.push(KeyValue::new("error.type", kind)),
            }
            on.metrics
                .request
                .record(started.elapsed().as_secs_f64(), &attributes);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (index, answer);
    }

    /// The call ended: its body as the layers read it, how it failed.
    pub(crate) fn call_ended(&mut self, body: Option<&JsonRpcBody>, error: Option<CallError>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = self.on.take() {
            use opentelemetry::KeyValue;
            let message = match body {
                Some(JsonRpcBody::Single(message)) => Some(message),
                _ => None,
            };
            let method = message
                .and_then(|m| m.method.as_deref())
                .or(on.headers[0].as_deref());
            let name = message
                .and_then(|m| m.name.as_deref())
                .or(on.headers[1].as_deref());
            let mut attributes = vec![KeyValue::new(
                "mcp.method.name",
                method.unwrap_or("_OTHER").to_owned(),
            )];
            match (method, name) {
                (Some("tools/call"), Some(tool)) => {
                    attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
                }
                (Some("prompts/get"), Some(prompt)) => {
                    attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.to_owned()));
                }
                _ => {}
            }
            if method == Some("tools/call") {
                attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            }
            if let Some(version) = &on.headers[2] {
                attributes.push(KeyValue::new("mcp.protocol.version", version.clone()));
            }
            if let Some((address, port)) = &on.server {
                attributes.push(KeyValue::new("server.address", address.clone()));
                attributes.push(KeyValue::new("server.port", *port));
            }
            if let Some(error) = error {
                let kind = match error {
                    CallError::JsonRpc(code) => {
                        attributes
                            .push(KeyValue::new("rpc.response.status_code", code.to_string()));
                        code.to_string()
                    }
                    CallError::Tool => "tool_error".to_owned(),
                    CallError::Http(status) => status.to_string(),
                    CallError::Transport(kind) => kind.to_owned(),
                };
                attributes.push(KeyValue::new("error.type", kind));
            }
            on.metrics
                .operation
                .record(on.started.elapsed().as_secs_f64(), &attributes);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (body, error);
    }
}

/// A URI as `url.full`: user info `REDACTED:REDACTED`, and the value of every query key
/// `REDACTED` — OpenTelemetry's list (`X-Amz-Signature`, `X-Amz-Credential`, `sig`…) and the
/// rest: this crate never shows a query's values (they may carry anything, a token among them;
/// see [`Shown`](crate::uri::Shown)). Keys and path as they are.
pub(crate) struct FullUrl<'a>(pub(crate) &'a Uri);

impl fmt::Display for FullUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uri = self.0;
        if let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) {
            write!(f, "{scheme}://")?;
            if authority.as_str().contains('@') {
                f.write_str("REDACTED:REDACTED@")?;
            }
            f.write_str(authority.host())?;
            if let Some(port) = authority.port() {
                write!(f, ":{port}")?;
            }
        }
        f.write_str(uri.path())?;
        if let Some(query) = uri.query() {
            f.write_str("?")?;
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    f.write_str("&")?;
                }
                match pair.split_once('=') {
                    Some((key, _)) => write!(f, "{key}=REDACTED")?,
                    None => f.write_str(pair)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_full_hides_secrets() {
        let uri: Uri = "https://user:pw@example.com:8443/a/b?color=blue&X-Amz-Signature=abc&sig=x&X-Amz-Credential=AKID%2F1"
            .parse()
            .unwrap();
        assert_eq!(
            FullUrl(&uri).to_string(),
            "https://REDACTED:REDACTED@example.com:8443/a/b?color=REDACTED&X-Amz-Signature=REDACTED&sig=REDACTED&X-Amz-Credential=REDACTED"
        );
        let plain: Uri = "http://localhost/mcp".parse().unwrap();
        assert_eq!(FullUrl(&plain).to_string(), "http://localhost/mcp");
    }

    #[test]
    fn the_trace_goes_into_params_meta_and_nothing_else_changes() {
        let trace = TraceHeaders::new([0x4b; 16], [0xb7; 8], true);
        let tp = r#""traceparent":"00-4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b-b7b7b7b7b7b7b7b7-01""#;
        let meta = |body: &str| {
            with_params_meta(body.as_bytes(), &trace)
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
        };
        // params with fields, key order and spacing kept.
        assert_eq!(
            meta(r#"{"jsonrpc":"2.0", "id":7,"method":"tools/call","params": {"name":"add","arguments":{}}}"#)
                .unwrap(),
            format!(r#"{{"jsonrpc":"2.0", "id":7,"method":"tools/call","params": {{"_meta":{{{tp}}},"name":"add","arguments":{{}}}}}}"#)
        );
        // Empty params; no params (a notification); a _meta of the app's own.
        assert_eq!(
            meta(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{ }}"#).unwrap(),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{{{tp}}} }}}}"#
            )
        );
        assert_eq!(
            meta(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized","params":{{"_meta":{{{tp}}}}}}}"#
            )
        );
        assert_eq!(
            meta(r#"{"method":"ping","params":{"_meta":{"progressToken":3}}}"#).unwrap(),
            format!(r#"{{"method":"ping","params":{{"_meta":{{{tp},"progressToken":3}}}}}}"#)
        );
        // With tracestate and baggage, escaped as JSON strings.
        let full = trace.clone().trace_state("k=v").baggage("user=a\"b");
        let out = with_params_meta(br#"{"method":"ping"}"#, &full).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["params"]["_meta"]["tracestate"], "k=v");
        assert_eq!(value["params"]["_meta"]["baggage"], "user=a\"b");
        // Left alone: the app's traceparent, an answer, a batch, params that are no object,
        // a _meta that is no object, not JSON.
        for body in [
            r#"{"method":"ping","params":{"_meta":{"traceparent":"00-app"}}}"#,
            r#"{"method":"ping","params":{"_meta":{"baggage":"app=1"}}}"#,
            r#"{"method":"ping","params":{"_meta":{"tr\u0061cestate":"a=1"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"method":"ping","params":[1,2]}"#,
            r#"{"method":"ping","params":null}"#,
            r#"{"method":"ping","params":{"_meta":null}}"#,
            "not json",
        ] {
            assert_eq!(meta(body), None, "{body}");
        }
        // Every body it writes is JSON, and parses to the same message but for _meta.
        let out = meta(r#"{"id":"x","method":"tools/call","params":{"name":"a\"}"}}"#).unwrap();
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["params"]["name"], "a\"}");
        assert_eq!(
            value["params"]["_meta"]["traceparent"],
            "00-4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b-b7b7b7b7b7b7b7b7-01"
        );
    }

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

#[cfg(all(test, feature = "opentelemetry"))]
mod metrics_tests {
    use std::collections::BTreeMap;
    use std::convert::Infallible;

    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::Full;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    use tower::{Layer, Service, ServiceExt};

    use super::Metrics;
    use crate::McpSessionRecoveryLayer;
    use crate::rule::{Failure, Refusal};

    /// A meter provider whose metrics are read with [`exported`].
    fn provider() -> (SdkMeterProvider, InMemoryMetricExporter) {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        (provider, exporter)
    }

    /// Each data point exported last: (instrument, unit, its attributes as `key=value`) → its
    /// value (a sum or gauge) or its count and bounds (a histogram), as text.
    fn exported(
        provider: &SdkMeterProvider,
        exporter: &InMemoryMetricExporter,
    ) -> BTreeMap<(String, String, Vec<String>), String> {
        provider.force_flush().unwrap();
        let mut points = BTreeMap::new();
        let finished = exporter.get_finished_metrics().unwrap();
        for metric in finished
            .last()
            .into_iter()
            .flat_map(|r| r.scope_metrics())
            .flat_map(|s| s.metrics())
        {
            let key = |attributes: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                let mut list: Vec<String> = attributes
                    .map(|kv| format!("{}={}", kv.key, kv.value))
                    .collect();
                list.sort();
                (metric.name().to_owned(), metric.unit().to_owned(), list)
            };
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    for p in sum.data_points() {
                        points.insert(key(&mut p.attributes()), p.value().to_string());
                    }
                }
                AggregatedMetrics::U64(MetricData::Gauge(gauge)) => {
                    for p in gauge.data_points() {
                        points.insert(key(&mut p.attributes()), p.value().to_string());
                    }
                }
                AggregatedMetrics::F64(MetricData::Sum(sum)) => {
                    for p in sum.data_points() {
                        points.insert(key(&mut p.attributes()), p.value().to_string());
                    }
                }
                AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                    for p in histogram.data_points() {
                        let bounds: Vec<f64> = p.bounds().collect();
                        points.insert(
                            key(&mut p.attributes()),
                            format!("count {} bounds {bounds:?}", p.count()),
                        );
                    }
                }
                other => panic!("{}: {other:?}", metric.name()),
            }
        }
        points
    }

    fn point(name: &str, unit: &str, attributes: &[&str]) -> (String, String, Vec<String>) {
        let mut list: Vec<String> = attributes.iter().map(|a| (*a).to_owned()).collect();
        list.sort();
        (name.to_owned(), unit.to_owned(), list)
    }

    #[test]
    fn the_retry_budgets_counters_are_instruments() {
        let (provider, exporter) = provider();
        let metrics = Metrics::new(&provider.meter("test"));
        let budget = crate::RetryBudget::new();
        metrics.observe_budget(&budget, &[opentelemetry::KeyValue::new("runtime", "calc")]);
        budget
            .withdraw(&Failure::Refused(Refusal::Throttled))
            .unwrap();
        budget
            .withdraw(&Failure::Refused(Refusal::SessionBusy))
            .unwrap();
        budget
            .withdraw(&Failure::Refused(Refusal::SessionBusy))
            .unwrap();
        budget.waited(std::time::Duration::from_millis(1500));
        budget.ended(4, true);
        let points = exported(&provider, &exporter);
        let runtime = "runtime=calc";
        let expected: BTreeMap<_, _> = [
            (
                point("agentcore_tower.retry_budget.calls", "{call}", &[runtime]),
                "1",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.attempts",
                    "{attempt}",
                    &[runtime],
                ),
                "4",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.refusals",
                    "{attempt}",
                    &[runtime],
                ),
                "0",
            ),
            (
                point("agentcore_tower.retry_budget.wait", "s", &[runtime]),
                "1.5",
            ),
            // 500 - 5 (throttled) + 1 (a success): session busy costs nothing.
            (
                point("agentcore_tower.retry_budget.tokens", "{token}", &[runtime]),
                "496",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=throttled"],
                ),
                "1",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=session_busy"],
                ),
                "2",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=session_expired"],
                ),
                "0",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=failure"],
                ),
                "0",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
        assert_eq!(points, expected);
    }

    /// A stateful MCP server: `initialize` opens `session-N`; a request of a session it does
    /// not know is answered 404; DELETE ends a session; once it knows `closed`, `initialize` is
    /// answered 503.
    fn server(
        known: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) -> impl Service<
        Request<Full<Bytes>>,
        Response = Response<Full<Bytes>>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
    + Send
    + 'static {
        tower::service_fn(move |request: Request<Full<Bytes>>| {
            let known = known.clone();
            async move {
                let session = request
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_owned());
                let body = http_body_util::BodyExt::collect(request.into_body())
                    .await
                    .unwrap()
                    .to_bytes();
                let mut known = known.lock().unwrap();
                let answer = Response::builder().header("content-type", "application/json");
                let initialize = body.windows(12).any(|w| w == b"\"initialize\"");
                let answer = if initialize && known.iter().any(|id| id == "closed") {
                    // Opens no session any more.
                    answer.status(StatusCode::SERVICE_UNAVAILABLE).body("")
                } else if initialize {
                    let id = format!("session-{}", known.len() + 1);
                    known.push(id.clone());
                    answer
                        .header("mcp-session-id", id)
                        .body(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#)
                } else if !session.is_some_and(|id| known.contains(&id)) {
                    answer.status(StatusCode::NOT_FOUND).body("")
                } else if body.is_empty() {
                    // A DELETE.
                    answer.status(StatusCode::OK).body("")
                } else {
                    answer.status(StatusCode::ACCEPTED).body("")
                };
                Ok::<_, Infallible>(
                    answer
                        .unwrap()
                        .map(|b| Full::new(Bytes::from_static(b.as_bytes()))),
                )
            }
        })
    }

    fn post(
        method: http::Method,
        session: Option<&str>,
        body: &'static str,
    ) -> Request<Full<Bytes>> {
        let mut request = Request::builder()
            .method(method)
            .uri("https://mcp.example:8443/mcp")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    #[tokio::test]
    async fn a_sessions_duration_from_initialize_to_delete_or_loss() {
        let (provider, exporter) = provider();
        let metrics = Metrics::new(&provider.meter("test"));
        let known = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let layer = McpSessionRecoveryLayer::new().metrics(metrics);
        let client = layer.layer(server(known.clone()));
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let call = |request| client.clone().oneshot(request);
        for session in ["session-1", "session-2"] {
            let opened = call(post(http::Method::POST, None, initialize))
                .await
                .unwrap();
            assert_eq!(opened.headers()["mcp-session-id"], session);
            call(post(http::Method::POST, Some(session), initialized))
                .await
                .unwrap();
        }
        // The first ends with the client's DELETE.
        let deleted = call(post(http::Method::DELETE, Some("session-1"), ""))
            .await
            .unwrap();
        assert_eq!(deleted.status(), StatusCode::OK);
        // The server forgets the second, and cannot open it again: `initialize` fails too.
        *known.lock().unwrap() = vec!["closed".to_owned()];
        let lost = call(post(http::Method::POST, Some("session-2"), initialized))
            .await
            .unwrap();
        assert_eq!(lost.status(), StatusCode::NOT_FOUND);
        let points: Vec<_> = exported(&provider, &exporter)
            .into_iter()
            .filter(|((name, ..), _)| name == "mcp.client.session.duration")
            .collect();
        let bounds =
            "[0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]";
        let common = [
            "server.address=mcp.example",
            "server.port=8443",
            "mcp.protocol.version=2025-06-18",
        ];
        let mut lost_point = common.to_vec();
        lost_point.push("error.type=session_lost");
        assert_eq!(
            points,
            vec![
                // (Sorted by attributes: `error.type` first.)
                (
                    point("mcp.client.session.duration", "s", &lost_point),
                    format!("count 1 bounds {bounds}")
                ),
                (
                    point("mcp.client.session.duration", "s", &common),
                    format!("count 1 bounds {bounds}")
                ),
            ]
        );
    }
}
