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

mod metrics;
mod names;
mod spans;
#[cfg(all(test, feature = "opentelemetry"))]
pub(crate) mod test_meter;
mod trace;

pub(crate) use metrics::CallMetrics;
#[cfg(feature = "opentelemetry")]
pub use metrics::Metrics;
#[cfg(feature = "opentelemetry")]
pub(crate) use spans::server_of;
pub(crate) use spans::{
    CallError, answer_error, attempt_answered, attempt_sent_to, attempt_span, body_now, call_ended,
    call_sent_to, call_span, decision_event, describe_call,
};
pub(crate) use trace::{AppTraceHeaders, inject, with_params_meta};
pub use trace::{TraceContext, TraceHeaders};
