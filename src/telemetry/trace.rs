//! The trace context an attempt carries to AgentCore: W3C `traceparent`, `tracestate`,
//! `baggage` and X-Ray's `X-Amzn-Trace-Id`, written on each attempt (and into `params._meta` on
//! request) without overwriting what the app or a signature set.

use std::fmt;

use http::{HeaderMap, HeaderName};
use serde_json::value::RawValue;

use super::names::*;

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
    /// Read from a request's `headers`, in one walk over its names rather than a hashed
    /// lookup for each (a request has a few).
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let mut found = Self::default();
        for name in headers.keys() {
            found.traceparent |= *name == TRACEPARENT;
            found.x_ray |= *name == X_AMZN_TRACE_ID;
        }
        found
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
