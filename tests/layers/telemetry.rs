//! The call's spans as a subscriber sees them: one call span per MCP request, whoever owns the
//! call, named and described as OpenTelemetry's MCP conventions say; one child span per attempt,
//! named as the HTTP conventions say; the layers' decisions as events on the attempts.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agentcore_tower::telemetry::{TraceContext, TraceHeaders};
use agentcore_tower::{
    McpSessionRecoveryLayer, RecommendedLayers, ReplayGuardLayer, SessionBusyRetryLayer,
    ThrottleRetryLayer,
};
use common::*;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The tests one at a time: `tracing` caches each callsite's interest over every thread's
/// subscriber, and a test without one (or ending) racing another's first use of a callsite can
/// leave it off for a moment there.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A field's value, with its type.
#[derive(Clone, Debug, PartialEq)]
enum V {
    S(String),
    I(i64),
    Other(String),
}

fn s(text: &str) -> V {
    V::S(text.to_owned())
}

#[derive(Clone, Debug, Default)]
struct SpanRec {
    name: &'static str,
    fields: BTreeMap<String, V>,
    parent: Option<usize>,
    events: Vec<BTreeMap<String, V>>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<SpanRec>>>);

struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, V>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), V::S(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), V::I(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), V::Other(format!("{value:?}")));
    }
}

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).expect("a new span");
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut spans = self.0.lock().unwrap();
        spans.push(SpanRec {
            name: attrs.metadata().name(),
            fields,
            parent,
            events: Vec::new(),
        });
        span.extensions_mut().insert(Index(spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(index) = ctx
            .span(id)
            .and_then(|s| s.extensions().get::<Index>().map(|i| i.0))
        else {
            return;
        };
        values.record(&mut Fields(&mut self.0.lock().unwrap()[index].fields));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(index) = ctx
            .event_span(event)
            .and_then(|s| s.extensions().get::<Index>().map(|i| i.0))
        else {
            return;
        };
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap()[index].events.push(fields);
    }
}

impl Capture {
    fn spans(&self) -> Vec<SpanRec> {
        self.0.lock().unwrap().clone()
    }

    /// The call spans, and the attempt spans of each, in the order they were opened.
    fn calls(&self) -> Vec<(SpanRec, Vec<SpanRec>)> {
        let spans = self.spans();
        spans
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name == "mcp")
            .map(|(i, call)| {
                let attempts = spans
                    .iter()
                    .filter(|s| s.parent == Some(i) && s.name == "attempt")
                    .cloned()
                    .collect();
                (call.clone(), attempts)
            })
            .collect()
    }
}

const ADD: &str = r#"{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#;
const ANSWER: &[u8] =
    br#"{"jsonrpc":"2.0","id":"call-1","result":{"content":[{"type":"text","text":"3"}]}}"#;

fn throttled() -> Step {
    Step::Respond(response(
        429,
        &[("retry-after", "0"), ("x-amzn-requestid", "req-1")],
        b"{}",
    ))
}

fn answered(body: &'static [u8]) -> Step {
    Step::Respond(response(
        200,
        &[
            ("content-type", "application/json"),
            ("x-amzn-requestid", "req-2"),
        ],
        body,
    ))
}

/// Checks the call span and attempt spans of a `tools/call` of `add` throttled once, then
/// answered.
fn assert_throttled_then_answered(capture: &Capture) {
    let calls = capture.calls();
    assert_eq!(calls.len(), 1, "one call span: {:#?}", capture.spans());
    let (call, attempts) = &calls[0];
    let f = &call.fields;
    // Written as text (`format_args!`, no copy), which exporters take as a string.
    assert_eq!(f["otel.name"], V::Other("tools/call add".into()));
    assert_eq!(f["otel.kind"], s("client"));
    assert_eq!(f["mcp.method.name"], s("tools/call"));
    assert_eq!(f["gen_ai.tool.name"], s("add"));
    assert_eq!(f["gen_ai.operation.name"], s("execute_tool"));
    assert_eq!(f["jsonrpc.request.id"], s("call-1"));
    assert_eq!(f["server.address"], s("runtime.example"));
    assert_eq!(f["server.port"], V::I(443));
    assert!(!f.contains_key("error.type"), "{f:?}");

    assert_eq!(attempts.len(), 2, "{:#?}", capture.spans());
    let (first, second) = (&attempts[0].fields, &attempts[1].fields);
    assert_eq!(first["otel.name"], s("POST"));
    assert_eq!(first["otel.kind"], s("client"));
    assert_eq!(first["http.request.method"], s("POST"));
    assert_eq!(
        first["url.full"],
        V::Other("https://runtime.example/mcp?secret=REDACTED".into())
    );
    assert_eq!(first["http.response.status_code"], V::I(429));
    assert_eq!(first["error.type"], s("429"));
    assert_eq!(first["otel.status_code"], s("error"));
    assert_eq!(first["aws.request_id"], s("req-1"));
    assert!(!first.contains_key("http.request.resend_count"));
    assert_eq!(second["http.request.resend_count"], V::I(1));
    assert_eq!(second["http.response.status_code"], V::I(200));
    assert_eq!(second["aws.request_id"], s("req-2"));
    assert!(!second.contains_key("error.type"));

    // The decision to send again is an event on the first attempt, and only there.
    let decisions = |span: &SpanRec| {
        span.events
            .iter()
            .filter(|e| e.contains_key("verdict"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let first_decisions = decisions(&attempts[0]);
    assert_eq!(first_decisions.len(), 1, "{:#?}", attempts[0].events);
    let event = &first_decisions[0];
    assert_eq!(event["layer"], s("throttle"));
    assert_eq!(event["verdict"], s("sent_again"));
    assert_eq!(event["wait_ms"], V::I(0));
    assert!(event.contains_key("by") && event.contains_key("assumes"));
    assert!(
        decisions(&attempts[1]).is_empty(),
        "{:#?}",
        attempts[1].events
    );
}

async fn run<S>(
    capture: &Capture,
    stack: S,
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
) where
    S: tower::Service<http::Request<http_body_util::Full<bytes::Bytes>>>,
    S::Error: std::fmt::Debug,
{
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    common::every_callsite_stays_interesting();
    let _default = tracing::subscriber::set_default(subscriber);
    stack.oneshot(request).await.unwrap();
}

/// Sends `request` through `layer` over a service playing `steps`, capturing the spans: what
/// was captured.
async fn traced<L>(
    layer: L,
    steps: impl IntoIterator<Item = Step>,
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> Capture
where
    L: Layer<Scripted>,
    L::Service: tower::Service<http::Request<http_body_util::Full<bytes::Bytes>>>,
    <L::Service as tower::Service<http::Request<http_body_util::Full<bytes::Bytes>>>>::Error:
        std::fmt::Debug,
{
    let capture = Capture::default();
    run(&capture, layer.layer(Scripted::new(steps)), request).await;
    capture
}

/// Sends `request` through `layer` over a service playing `steps`: what the service saw.
async fn sent_through<L>(
    layer: L,
    steps: impl IntoIterator<Item = Step>,
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> Arc<Shared>
where
    L: Layer<Scripted>,
    L::Service: tower::Service<http::Request<http_body_util::Full<bytes::Bytes>>>,
    <L::Service as tower::Service<http::Request<http_body_util::Full<bytes::Bytes>>>>::Error:
        std::fmt::Debug,
{
    let inner = Scripted::new(steps);
    let shared = inner.shared();
    layer.layer(inner).oneshot(request).await.unwrap();
    shared
}

/// The recommended layers, with no signer.
fn recommended() -> RecommendedLayers<tower::layer::util::Identity> {
    RecommendedLayers::new(tower::layer::util::Identity::new())
}

#[tokio::test(start_paused = true)]
async fn a_throttled_tool_call_through_the_recommended_stack() {
    let _serial = SERIAL.lock().await;
    let steps = [throttled(), answered(ANSWER)];
    let capture = traced(recommended(), steps, json_request(ADD)).await;
    assert_throttled_then_answered(&capture);
}

#[tokio::test(start_paused = true)]
async fn another_order_still_one_call_span() {
    let _serial = SERIAL.lock().await;
    // Session busy, then throttling, then the guard: the outermost layer owns the call and
    // opens its span, named from the MCP headers (and the in-memory body: its request id).
    let layers = ServiceBuilder::new()
        .layer(SessionBusyRetryLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(ReplayGuardLayer::new());
    let steps = [throttled(), answered(ANSWER)];
    let capture = traced(layers, steps, with_mcp_headers(json_request(ADD))).await;
    assert_throttled_then_answered(&capture);
}

#[tokio::test(start_paused = true)]
async fn a_retry_layer_outermost_names_the_call_from_the_body_at_once() {
    let _serial = SERIAL.lock().await;
    // No MCP headers, no guard: the throttle layer owns the call and reads the in-memory body
    // without waiting, before the span starts.
    let layers = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new());
    let steps = [throttled(), answered(ANSWER)];
    let capture = traced(layers, steps, json_request(ADD)).await;
    assert_throttled_then_answered(&capture);
}

#[tokio::test(start_paused = true)]
async fn the_protocol_version_of_a_2026_request_is_read_from_its_meta() {
    let _serial = SERIAL.lock().await;
    // MCP 2026-07-28 names the version in `_meta` on every request; without the header, the
    // call span takes it from there, and a header, when given, is what counts.
    let body = r#"{"jsonrpc":"2.0","id":"d-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    for (header, expected) in [(None, "2026-07-28"), (Some("2025-11-25"), "2025-11-25")] {
        let mut request = json_request(body);
        if let Some(header) = header {
            request
                .headers_mut()
                .insert("mcp-protocol-version", header.parse().unwrap());
        }
        let capture = traced(ThrottleRetryLayer::new(), [answered(ANSWER)], request).await;
        let calls = capture.calls();
        assert_eq!(calls.len(), 1);
        let f = &calls[0].0.fields;
        assert_eq!(f["mcp.protocol.version"], s(expected), "{f:?}");
        assert_eq!(f["mcp.method.name"], s("server/discover"));
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_known_names_the_call_mcp() {
    let _serial = SERIAL.lock().await;
    // A body that is no JSON-RPC message, and no MCP headers: the span keeps its name.
    let request = json_request("not json");
    let capture = traced(ThrottleRetryLayer::new(), [answered(ANSWER)], request).await;
    let calls = capture.calls();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].0.fields.contains_key("otel.name"));
    assert!(!calls[0].0.fields.contains_key("mcp.method.name"));
    assert_eq!(calls[0].1.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_json_rpc_error_and_a_tool_error() {
    let _serial = SERIAL.lock().await;
    let steps = [answered(
        br#"{"jsonrpc":"2.0","id":"call-1","error":{"code":-32602,"message":"Unknown tool: add"}}"#,
    )];
    let capture = traced(recommended(), steps, json_request(ADD)).await;
    let calls = capture.calls();
    assert_eq!(calls.len(), 1);
    let f = &calls[0].0.fields;
    assert_eq!(f["error.type"], s("-32602"));
    assert_eq!(f["rpc.response.status_code"], s("-32602"));
    assert_eq!(f["otel.status_code"], s("error"));

    let steps = [answered(
        br#"{"jsonrpc":"2.0","id":"call-1","result":{"content":[{"type":"text","text":"no"}],"isError":true}}"#,
    )];
    let capture = traced(recommended(), steps, json_request(ADD)).await;
    let calls = capture.calls();
    let f = &calls[0].0.fields;
    assert_eq!(f["error.type"], s("tool_error"));
    assert!(!f.contains_key("rpc.response.status_code"));
    assert_eq!(f["otel.status_code"], s("error"));
}

#[tokio::test(start_paused = true)]
async fn url_full_shows_no_secret() {
    let _serial = SERIAL.lock().await;
    let mut request = json_request(ADD);
    *request.uri_mut() =
        "https://user:password@runtime.example:8443/mcp?X-Amz-Signature=abcdef&X-Amz-Credential=AKID%2Fx&sig=s3cr3t&x=1"
            .parse()
            .unwrap();
    let capture = traced(recommended(), [answered(ANSWER)], request).await;
    let calls = capture.calls();
    let url = &calls[0].1[0].fields["url.full"];
    assert_eq!(
        url,
        &V::Other(
            "https://REDACTED:REDACTED@runtime.example:8443/mcp?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&sig=REDACTED&x=REDACTED"
                .into()
        )
    );
    let text = format!("{:?}", capture.spans());
    for secret in ["password", "abcdef", "AKID", "s3cr3t"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert_eq!(calls[0].0.fields["server.port"], V::I(8443));
}

const TRACE: [u8; 16] = [
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
];
const SPAN: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const X_RAY: &str = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1";

/// The named header of every request the service below received.
fn seen(shared: &Shared, name: &str) -> Vec<Option<String>> {
    shared
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(parts, _)| {
            parts
                .headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_attempt_carries_the_trace_headers() {
    let _serial = SERIAL.lock().await;
    let trace = TraceContext::new(|| {
        Some(
            TraceHeaders::new(TRACE, SPAN, true)
                .trace_state("vendor=1")
                .baggage("user=alice"),
        )
    });
    let steps = [throttled(), answered(ANSWER)];
    let shared = sent_through(recommended().trace_context(trace), steps, json_request(ADD)).await;
    let two = |v: &str| vec![Some(v.to_owned()), Some(v.to_owned())];
    assert_eq!(seen(&shared, "traceparent"), two(TRACEPARENT));
    assert_eq!(seen(&shared, "x-amzn-trace-id"), two(X_RAY));
    assert_eq!(seen(&shared, "tracestate"), two("vendor=1"));
    assert_eq!(seen(&shared, "baggage"), two("user=alice"));
}

#[tokio::test(start_paused = true)]
async fn a_trace_header_the_app_set_is_kept() {
    let _serial = SERIAL.lock().await;
    let trace = TraceContext::new(|| Some(TraceHeaders::new(TRACE, SPAN, true)));
    let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let mut request = json_request(ADD);
    request
        .headers_mut()
        .insert("traceparent", own.parse().unwrap());
    let steps = [throttled(), answered(ANSWER)];
    let shared = sent_through(recommended().trace_context(trace), steps, request).await;
    let two = |v: &str| vec![Some(v.to_owned()), Some(v.to_owned())];
    assert_eq!(seen(&shared, "traceparent"), two(own));
    // The app set no X-Ray header: that one is the hook's.
    assert_eq!(seen(&shared, "x-amzn-trace-id"), two(X_RAY));

    // No trace context (or an invalid one): no header.
    let invalid = TraceContext::new(|| Some(TraceHeaders::new([0; 16], SPAN, true)));
    let layers = recommended().trace_context(invalid);
    let shared = sent_through(layers, [answered(ANSWER)], json_request(ADD)).await;
    assert_eq!(seen(&shared, "traceparent"), vec![None]);
}

/// What the app set is read off the call's request, as the first of the crate's layers meets
/// it: a `traceparent` a layer of the app's adds further down, under a layer of ours that has
/// no trace context, is not the app's own, and the layer below, which writes the trace
/// headers, writes its own over it on each of its attempts — the `traceparent` and the X-Ray
/// header name one trace.
#[tokio::test(start_paused = true)]
async fn a_trace_header_added_between_the_layers_is_not_taken_for_the_apps() {
    let _serial = SERIAL.lock().await;
    let trace = TraceContext::new(|| Some(TraceHeaders::new(TRACE, SPAN, true)));
    let between = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let layers = tower::ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .map_request(
            move |mut request: http::Request<http_body_util::Full<bytes::Bytes>>| {
                let headers = request.headers_mut();
                headers.insert("traceparent", between.parse().unwrap());
                request
            },
        )
        .layer(
            SessionBusyRetryLayer::new()
                .trace_context(trace)
                .base_delay(std::time::Duration::ZERO),
        );
    let busy = || {
        let body = br#"{"jsonrpc":"2.0","id":"call-1","error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;
        Step::Respond(response(200, &[("content-type", "application/json")], body))
    };
    let steps = [busy(), busy(), answered(ANSWER)];
    let shared = sent_through(layers, steps, json_request(ADD)).await;
    let three = |v: &str| vec![Some(v.to_owned()); 3];
    assert_eq!(seen(&shared, "traceparent"), three(TRACEPARENT));
    assert_eq!(seen(&shared, "x-amzn-trace-id"), three(X_RAY));
}

#[tokio::test(start_paused = true)]
async fn a_trace_context_in_the_request_extensions() {
    let _serial = SERIAL.lock().await;
    let mut request = json_request(ADD);
    request.extensions_mut().insert(TraceContext::new(|| {
        Some(TraceHeaders::new(TRACE, SPAN, true))
    }));
    let shared = sent_through(ThrottleRetryLayer::new(), [answered(ANSWER)], request).await;
    assert_eq!(
        seen(&shared, "traceparent"),
        vec![Some(TRACEPARENT.to_owned())]
    );
}

#[cfg(feature = "opentelemetry")]
#[tokio::test(start_paused = true)]
async fn the_opentelemetry_context_gives_the_trace_headers() {
    let _serial = SERIAL.lock().await;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };

    let inner = Scripted::new([throttled(), answered(ANSWER)]);
    let shared = inner.shared();
    let stack = recommended()
        .trace_context(TraceContext::opentelemetry())
        .layer(inner);
    let span_context = SpanContext::new(
        TraceId::from_bytes(TRACE),
        SpanId::from_bytes(SPAN),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let _attached = opentelemetry::Context::current()
        .with_remote_span_context(span_context)
        .attach();
    stack.oneshot(json_request(ADD)).await.unwrap();
    let two = |v: &str| vec![Some(v.to_owned()), Some(v.to_owned())];
    assert_eq!(seen(&shared, "traceparent"), two(TRACEPARENT));
    assert_eq!(seen(&shared, "x-amzn-trace-id"), two(X_RAY));
}

/// The histograms' measurements, as an SDK would receive them: name, unit, buckets, value,
/// attributes.
#[cfg(feature = "opentelemetry")]
mod metrics {
    use std::sync::{Arc, Mutex};

    use opentelemetry::KeyValue;
    use opentelemetry::metrics::{
        Histogram, HistogramBuilder, InstrumentProvider, Meter, SyncInstrument,
    };

    pub type Measurement = (String, f64, Vec<(String, String)>);
    /// An instrument's name, unit and buckets.
    pub type Described = (String, Option<String>, Option<Vec<f64>>);

    #[derive(Clone, Default)]
    pub struct Provider {
        pub measurements: Arc<Mutex<Vec<Measurement>>>,
        pub instruments: Arc<Mutex<Vec<Described>>>,
    }

    struct Instrument {
        name: String,
        measurements: Arc<Mutex<Vec<Measurement>>>,
    }

    impl SyncInstrument<f64> for Instrument {
        fn measure(&self, value: f64, attributes: &[KeyValue]) {
            let attributes = attributes
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect();
            self.measurements
                .lock()
                .unwrap()
                .push((self.name.clone(), value, attributes));
        }
    }

    impl InstrumentProvider for Provider {
        fn f64_histogram(&self, builder: HistogramBuilder<'_, Histogram<f64>>) -> Histogram<f64> {
            self.instruments.lock().unwrap().push((
                builder.name.to_string(),
                builder.unit.as_ref().map(|u| u.to_string()),
                builder.boundaries.clone(),
            ));
            Histogram::new(Arc::new(Instrument {
                name: builder.name.to_string(),
                measurements: self.measurements.clone(),
            }))
        }
    }

    pub fn meter(provider: &Provider) -> Meter {
        Meter::new(Arc::new(provider.clone()))
    }
}

#[cfg(feature = "opentelemetry")]
#[tokio::test(start_paused = true)]
async fn the_histograms_of_a_throttled_tool_call() {
    let _serial = SERIAL.lock().await;
    use agentcore_tower::telemetry::Metrics;

    let provider = metrics::Provider::default();
    let inner = Scripted::new([throttled(), answered(ANSWER)]);
    let stack = recommended()
        .metrics(Metrics::new(&metrics::meter(&provider)))
        .layer(inner);
    stack.oneshot(json_request(ADD)).await.unwrap();

    let instruments = provider.instruments.lock().unwrap().clone();
    assert_eq!(
        instruments,
        vec![
            (
                "mcp.client.operation.duration".to_owned(),
                Some("s".to_owned()),
                Some(vec![
                    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0
                ])
            ),
            (
                "mcp.client.session.duration".to_owned(),
                Some("s".to_owned()),
                Some(vec![
                    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0
                ])
            ),
            (
                "http.client.request.duration".to_owned(),
                Some("s".to_owned()),
                Some(vec![
                    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0
                ])
            ),
        ]
    );
    let measured = provider.measurements.lock().unwrap().clone();
    let attrs = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let names: Vec<_> = measured.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "http.client.request.duration",
            "http.client.request.duration",
            "mcp.client.operation.duration"
        ]
    );
    assert_eq!(
        measured[0].2,
        attrs(&[
            ("http.request.method", "POST"),
            ("server.address", "runtime.example"),
            ("server.port", "443"),
            ("http.response.status_code", "429"),
            ("error.type", "429"),
        ])
    );
    assert_eq!(
        measured[1].2,
        attrs(&[
            ("http.request.method", "POST"),
            ("server.address", "runtime.example"),
            ("server.port", "443"),
            ("http.response.status_code", "200"),
        ])
    );
    assert_eq!(
        measured[2].2,
        attrs(&[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "add"),
            ("gen_ai.operation.name", "execute_tool"),
            ("server.address", "runtime.example"),
            ("server.port", "443"),
        ])
    );
    assert!(measured.iter().all(|(_, v, _)| *v >= 0.0));
}

#[tokio::test(start_paused = true)]
async fn the_session_layer_outermost_names_the_call_from_the_body_at_once() {
    let _serial = SERIAL.lock().await;
    // The session recovery layer owns the call and reads the in-memory body without waiting:
    // the call span is named before any layer enters it.
    let layers = ServiceBuilder::new()
        .layer(agentcore_tower::McpSessionRecoveryLayer::new())
        .layer(ThrottleRetryLayer::new());
    let steps = [throttled(), answered(ANSWER)];
    let capture = traced(layers, steps, json_request(ADD)).await;
    assert_throttled_then_answered(&capture);
}

/// A signer for in-memory stacks: a made-up runtime, static credentials.
fn test_signer() -> agentcore_tower::SigV4InvokeLayer {
    agentcore_tower::SigV4InvokeLayer::builder(
        agentcore_tower::InvokeTarget::arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123",
        ),
        aws_credential_types::Credentials::new("AKID", "secret", None, None, "test"),
    )
    .build()
    .unwrap()
}

/// Checks that a `tools/call` throttled once, then answered, gave exactly one call span (no
/// second one nested in it or beside it), named from the MCP headers, with both attempt spans
/// its children. `order` names the stack in the messages.
fn assert_one_call_span(capture: &Capture, order: &[&str]) {
    let spans = capture.spans();
    let calls: Vec<usize> = spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name == "mcp")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(calls.len(), 1, "{order:?}: one call span: {spans:#?}");
    let call = calls[0];
    assert_eq!(spans[call].parent, None, "{order:?}: {spans:#?}");
    assert_eq!(
        spans[call].fields.get("otel.name"),
        Some(&V::Other("tools/call add".into())),
        "{order:?}: {spans:#?}"
    );
    let attempts: Vec<&SpanRec> = spans.iter().filter(|s| s.name == "attempt").collect();
    assert_eq!(attempts.len(), 2, "{order:?}: {spans:#?}");
    assert_eq!(spans.len(), 3, "{order:?}: no other span: {spans:#?}");
    for attempt in &attempts {
        assert_eq!(
            attempt.parent,
            Some(call),
            "{order:?}: an attempt outside the call span: {spans:#?}"
        );
    }
    assert_eq!(
        attempts[1].fields.get("http.request.resend_count"),
        Some(&V::I(1)),
        "{order:?}: {spans:#?}"
    );
}

/// Builds the layers numbered in each order (outer to inner) over a service answering
/// throttled once, then the tool's answer, sends one `tools/call` of `add` and checks its
/// spans; evaluates to the orders run, by name. Each order is its own stack type.
macro_rules! one_call_span_in_every_order {
    ($bottom:expr, $( [$($layer:tt)+] ),+ $(,)?) => {{
        let mut orders: Vec<Vec<&'static str>> = Vec::new();
        $(
            let capture = Capture::default();
            let order = vec![$(one_call_span_in_every_order!(@name $layer)),+];
            let builder = ServiceBuilder::new();
            $(let builder = builder.layer(one_call_span_in_every_order!(@layer $layer));)+
            let inner = Scripted::new([throttled(), answered(ANSWER)]);
            let stack = builder.service($bottom(inner));
            let request = with_mcp_headers(json_request(ADD));
            run(&capture, stack, request).await;
            assert_one_call_span(&capture, &order);
            orders.push(order);
        )+
        orders
    }};
    (@layer 0) => { ReplayGuardLayer::new() };
    (@layer 1) => { ThrottleRetryLayer::new() };
    (@layer 2) => { SessionBusyRetryLayer::new() };
    (@layer 3) => { test_signer() };
    (@layer 4) => { McpSessionRecoveryLayer::new() };
    (@name 0) => { "guard" };
    (@name 1) => { "throttle" };
    (@name 2) => { "session_busy" };
    (@name 3) => { "signer" };
    (@name 4) => { "session_recovery" };
}

#[tokio::test(start_paused = true)]
async fn one_call_span_in_every_order_of_the_guard_the_retries_and_the_signer() {
    let _serial = SERIAL.lock().await;
    let orders = one_call_span_in_every_order!(std::convert::identity,
        [0 1 2 3], [0 1 3 2], [0 2 1 3], [0 2 3 1], [0 3 1 2], [0 3 2 1],
        [1 0 2 3], [1 0 3 2], [1 2 0 3], [1 2 3 0], [1 3 0 2], [1 3 2 0],
        [2 0 1 3], [2 0 3 1], [2 1 0 3], [2 1 3 0], [2 3 0 1], [2 3 1 0],
        [3 0 1 2], [3 0 2 1], [3 1 0 2], [3 1 2 0], [3 2 0 1], [3 2 1 0],
    );
    assert_every_order(&orders);
}

#[tokio::test(start_paused = true)]
async fn one_call_span_in_every_order_of_the_guard_the_retries_and_session_recovery() {
    let _serial = SERIAL.lock().await;
    // The signer at the bottom, where the recommended stack has it.
    let signed = |inner| test_signer().layer(inner);
    let orders = one_call_span_in_every_order!(signed,
        [0 1 2 4], [0 1 4 2], [0 2 1 4], [0 2 4 1], [0 4 1 2], [0 4 2 1],
        [1 0 2 4], [1 0 4 2], [1 2 0 4], [1 2 4 0], [1 4 0 2], [1 4 2 0],
        [2 0 1 4], [2 0 4 1], [2 1 0 4], [2 1 4 0], [2 4 0 1], [2 4 1 0],
        [4 0 1 2], [4 0 2 1], [4 1 0 2], [4 1 2 0], [4 2 0 1], [4 2 1 0],
    );
    assert_every_order(&orders);
}

#[tokio::test(start_paused = true)]
async fn the_signer_alone_opens_the_attempt_span_and_signs_the_trace_headers() {
    let _serial = SERIAL.lock().await;
    // No retry layer: the signer owns the call. Its one attempt is a child span of the call's,
    // shows the endpoint it goes to, and carries the trace headers (from the request's
    // extensions), signed.
    let capture = Capture::default();
    let inner = Scripted::new([answered(ANSWER)]);
    let shared = inner.shared();
    let stack = test_signer().layer(inner);
    let mut request = json_request(ADD);
    request.extensions_mut().insert(TraceContext::new(|| {
        Some(TraceHeaders::new(TRACE, SPAN, true))
    }));
    run(&capture, stack, request).await;
    let calls = capture.calls();
    assert_eq!(calls.len(), 1, "{:#?}", capture.spans());
    let (call, attempts) = &calls[0];
    assert_eq!(call.fields["otel.name"], V::Other("tools/call add".into()));
    assert_eq!(
        call.fields["server.address"],
        s("bedrock-agentcore.us-east-1.amazonaws.com")
    );
    assert_eq!(attempts.len(), 1, "{:#?}", capture.spans());
    let attempt = &attempts[0].fields;
    assert_eq!(
        attempt["url.full"],
        V::Other(
            "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations"
                .into()
        )
    );
    assert_eq!(attempt["http.response.status_code"], V::I(200));
    assert_eq!(
        seen(&shared, "traceparent"),
        vec![Some(TRACEPARENT.to_owned())]
    );
    let authorization = seen(&shared, "authorization").remove(0).unwrap();
    let signed = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    assert!(signed.split(';').any(|h| h == "traceparent"), "{signed}");
}

/// The signer alone, authenticating with the bearer tokens `tokens` gives.
fn bearer_signer(
    tokens: impl agentcore_tower::auth::ProvideToken,
) -> agentcore_tower::SigV4InvokeLayer {
    agentcore_tower::SigV4InvokeLayer::bearer(
        agentcore_tower::InvokeTarget::arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123",
        ),
        tokens,
    )
    .build()
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_attempt_the_signer_could_not_authenticate_is_not_sent_in_its_span() {
    let _serial = SERIAL.lock().await;
    use agentcore_tower::auth::{BearerToken, TokenFn};
    let capture = Capture::default();
    let inner = Scripted::new([]);
    let shared = inner.shared();
    let tokens = TokenFn::new(|_refused: Option<BearerToken>| async {
        Err::<BearerToken, _>(std::io::Error::other("the authorization server is down"))
    });
    let stack = bearer_signer(tokens).layer(inner);
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    common::every_callsite_stays_interesting();
    let _default = tracing::subscriber::set_default(subscriber);
    let error = stack.oneshot(json_request(ADD)).await.unwrap_err();
    assert_eq!(error.record().map(|r| r.len()), Some(1), "{error}");
    assert_eq!(shared.calls(), 0);
    let calls = capture.calls();
    assert_eq!(calls.len(), 1, "{:#?}", capture.spans());
    let (call, attempts) = &calls[0];
    assert_eq!(call.fields["otel.name"], V::Other("tools/call add".into()));
    assert_eq!(call.fields["error.type"], s("token"));
    assert_eq!(call.fields["otel.status_code"], s("error"));
    assert_eq!(attempts.len(), 1, "{:#?}", capture.spans());
    assert_eq!(attempts[0].fields["error.type"], s("not_sent"));
    assert!(!attempts[0].fields.contains_key("http.response.status_code"));
}

#[tokio::test(start_paused = true)]
async fn a_token_refused_then_refreshed_is_two_attempt_spans_of_one_call() {
    let _serial = SERIAL.lock().await;
    use agentcore_tower::auth::{BearerToken, TokenFn};
    let steps = [
        Step::Respond(response(
            401,
            &[("www-authenticate", "Bearer error=\"invalid_token\"")],
            b"",
        )),
        answered(ANSWER),
    ];
    let tokens = TokenFn::new(|refused: Option<BearerToken>| async move {
        Ok::<_, std::io::Error>(BearerToken::new(if refused.is_some() {
            "fresh-token"
        } else {
            "stale-token"
        }))
    });
    let capture = traced(bearer_signer(tokens), steps, json_request(ADD)).await;
    let calls = capture.calls();
    assert_eq!(calls.len(), 1, "{:#?}", capture.spans());
    let (call, attempts) = &calls[0];
    assert!(!call.fields.contains_key("error.type"), "{call:#?}");
    assert_eq!(attempts.len(), 2, "{:#?}", capture.spans());
    assert_eq!(attempts[0].fields["http.response.status_code"], V::I(401));
    assert_eq!(attempts[0].fields["error.type"], s("401"));
    assert_eq!(attempts[1].fields["http.response.status_code"], V::I(200));
    assert_eq!(attempts[1].fields["http.request.resend_count"], V::I(1));
    // The decision to send again is an event on the refused attempt.
    assert_eq!(attempts[0].events.len(), 1, "{:#?}", attempts[0]);
    assert!(attempts[1].events.is_empty(), "{:#?}", attempts[1]);
}
