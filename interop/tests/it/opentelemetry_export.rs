//! What the crate exports, as OpenTelemetry's SDK receives it: the call and attempt spans through
//! `tracing-opentelemetry` into an `InMemorySpanExporter` (simple processor), the histograms of
//! [`Metrics`] into an `InMemoryMetricExporter`, over the emulator on loopback (or, where the
//! emulator cannot answer as needed, a server of the test's own): names, kinds, parents,
//! attributes, statuses, events, the trace headers each attempt carried, the histograms' data
//! points — and no secret anywhere in what is exported.

use crate::common;

use std::collections::BTreeMap;
use std::task::{Context, Poll};
use std::time::Duration;

use agentcore_tower::telemetry::{Metrics, TraceContext};
use agentcore_tower::{
    RecommendedLayers, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer,
};
use agentcore_tower_emulator::{BusyForm, Emulator, EmulatorConfig, Fault, Received, RetryAfter};
use bytes::Bytes;
use common::*;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tracing_subscriber::layer::SubscriberExt;

/// The tests one at a time: `tracing` caches each callsite's interest over every thread's
/// subscriber (see `tests/layers/telemetry.rs`).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The OpenTelemetry SDK's pipelines, in memory, for one test: spans through
/// `tracing-opentelemetry` (the default subscriber of the test's thread while this lives), and a
/// meter provider whose reader exports only when flushed.
struct Exported {
    spans: InMemorySpanExporter,
    tracer_provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
    _default: tracing::subscriber::DefaultGuard,
}

impl Exported {
    fn install() -> Self {
        let spans = InMemorySpanExporter::default();
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let subscriber = tracing_subscriber::registry().with(
            tracing_opentelemetry::layer()
                .with_tracer(tracer_provider.tracer("agentcore-tower-tests")),
        );
        common::every_callsite_stays_interesting();
        let default = tracing::subscriber::set_default(subscriber);
        // Callsites met before under another subscriber are asked again.
        tracing::callsite::rebuild_interest_cache();
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(
                PeriodicReader::builder(metrics.clone())
                    .with_interval(Duration::from_secs(3600))
                    .build(),
            )
            .build();
        Self {
            spans,
            tracer_provider,
            metrics,
            meter_provider,
            _default: default,
        }
    }

    /// The crate's histograms, on this test's meter provider.
    fn metrics(&self) -> Metrics {
        Metrics::new(&self.meter_provider.meter("agentcore-tower-tests"))
    }

    /// Every span exported so far.
    /// The spans exported so far; each has every attribute once (the SDK keeps every value
    /// recorded for a key, so a field recorded twice would be exported twice).
    fn spans(&self) -> Vec<SpanData> {
        self.tracer_provider.force_flush().unwrap();
        let spans = self.spans.get_finished_spans().unwrap();
        for span in &spans {
            let mut keys: Vec<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
            keys.sort_unstable();
            let count = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), count, "an attribute recorded twice: {span:#?}");
        }
        spans
    }

    /// Every export of the meter provider so far, the last one just flushed (cumulative: it
    /// holds every data point).
    fn resource_metrics(&self) -> Vec<ResourceMetrics> {
        self.meter_provider.force_flush().unwrap();
        self.metrics.get_finished_metrics().unwrap()
    }

    /// The histogram `name` of the last export: its unit and data points.
    fn histogram(&self, name: &str) -> (String, Vec<Point>) {
        let exports = self.resource_metrics();
        let last = exports.last().expect("an export");
        let metrics: Vec<_> = last
            .scope_metrics()
            .flat_map(|scope| scope.metrics())
            .filter(|metric| metric.name() == name)
            .collect();
        assert_eq!(metrics.len(), 1, "one {name}: {last:#?}");
        let metric = metrics[0];
        let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else {
            panic!("{name} is no f64 histogram: {metric:#?}");
        };
        let points = histogram
            .data_points()
            .map(|point| Point {
                attributes: attributes(point.attributes()),
                bounds: point.bounds().collect(),
                count: point.count(),
                sum: point.sum(),
            })
            .collect();
        (metric.unit().to_owned(), points)
    }
}

/// A histogram data point.
#[derive(Debug)]
struct Point {
    attributes: BTreeMap<String, Value>,
    bounds: Vec<f64>,
    count: u64,
    sum: f64,
}

const OPERATION_BOUNDS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
const REQUEST_BOUNDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

fn attributes<'a>(kvs: impl IntoIterator<Item = &'a KeyValue>) -> BTreeMap<String, Value> {
    kvs.into_iter()
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect()
}

fn s(text: &str) -> Value {
    Value::String(text.to_owned().into())
}

fn map(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The spans named `name`.
fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|span| span.name == name).collect()
}

/// The children of `parent`, in the order of their `http.request.resend_count` (none first).
fn children<'a>(spans: &'a [SpanData], parent: &SpanData) -> Vec<&'a SpanData> {
    let mut children: Vec<&SpanData> = spans
        .iter()
        .filter(|span| span.parent_span_id == parent.span_context.span_id())
        .collect();
    children.sort_by_key(|span| {
        match attributes(&span.attributes).get("http.request.resend_count") {
            Some(Value::I64(n)) => *n,
            _ => 0,
        }
    });
    children
}

/// The layers' decisions on a span, in order: `layer`, `verdict`, and the event's attributes.
fn decisions(span: &SpanData) -> Vec<(Value, Value, BTreeMap<String, Value>)> {
    span.events
        .iter()
        .map(|event| attributes(&event.attributes))
        .filter(|a| a.contains_key("verdict"))
        .map(|a| (a["layer"].clone(), a["verdict"].clone(), a))
        .collect()
}

/// A `tools/call` of `add` with its MCP session and protocol version, as an MCP client posts
/// it after `initialize`.
fn add_request(id: u64) -> Request<Full<Bytes>> {
    let mut request = tool_call(id, "add", json!({"a": 1, "b": 2}));
    let headers = request.headers_mut();
    headers.insert("mcp-session-id", "session-otel-1".parse().unwrap());
    headers.insert("mcp-protocol-version", "2025-06-18".parse().unwrap());
    request
}

/// The answer's status and body, the response and the stack dropped (so every span ended).
async fn answer<S, B>(stack: S, request: Request<Full<Bytes>>) -> (u16, String)
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = stack.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The recommended layers over the emulator's signer, traced as an app traces them: the trace
/// context of OpenTelemetry's current context, the histograms into `exported`; session busy
/// re-sent after 5 ms.
fn traced_layers(emulator: &Emulator, exported: &Exported) -> RecommendedLayers {
    RecommendedLayers::new(emulator.signer().build().unwrap())
        .session_busy(SessionBusyRetryLayer::new().base_delay(Duration::from_millis(5)))
        .trace_context(TraceContext::opentelemetry())
        .metrics(exported.metrics())
}

/// The recommended layers over `door` (a signer, or the URL door), traced and measured as in
/// [`traced_layers`], throttling re-sent after 5 ms: for the hostile server, which throttles.
fn traced_door<Door>(door: Door, exported: &Exported) -> RecommendedLayers<Door> {
    RecommendedLayers::new(door)
        .throttle(ThrottleRetryLayer::new().base_delay(Duration::from_millis(5)))
        .trace_context(TraceContext::opentelemetry())
        .metrics(exported.metrics())
}

/// The `tools/call` requests the emulator received, in order.
fn tool_calls(emulator: &Emulator) -> Vec<Received> {
    emulator
        .audit()
        .received
        .into_iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .collect()
}

/// Checks that every attempt the emulator received carried the trace of the call span and, as
/// its parent, the span of its own attempt; and that it was signed.
fn assert_trace_headers(received: &[Received], call: &SpanData, attempts: &[&SpanData]) {
    assert_trace_headers_from(received, call, attempts, &[0, 1, 2, 3][..attempts.len()]);
}

/// As [`assert_trace_headers`], each attempt carrying the span id of the attempt `parents`
/// names (its own, or — re-sent below the signer that signed an earlier attempt's trace
/// headers — that one's).
fn assert_trace_headers_from(
    received: &[Received],
    call: &SpanData,
    attempts: &[&SpanData],
    parents: &[usize],
) {
    assert_eq!(received.len(), attempts.len(), "{received:#?}");
    assert_eq!(parents.len(), attempts.len());
    let trace = call.span_context.trace_id().to_string();
    for (i, (&parent, received)) in parents.iter().zip(received).enumerate() {
        assert!(received.signed, "{received:#?}");
        let signed = attempts[parent].span_context.span_id();
        assert_eq!(
            received.traceparent.as_deref(),
            Some(format!("00-{trace}-{signed}-01").as_str()),
            "the trace context is read inside the attempt's own span (or the signed one's)"
        );
        // SigV4 leaves `X-Amzn-Trace-Id` unsigned (as the AWS SDKs do): always the attempt's own.
        let own = attempts[i].span_context.span_id();
        assert_eq!(
            received.amzn_trace_id.as_deref(),
            Some(
                format!(
                    "Root=1-{}-{};Parent={own};Sampled=1",
                    &trace[..8],
                    &trace[8..]
                )
                .as_str()
            )
        );
    }
}

/// A `tools/call` of `add` meets session busy twice (in `form`), then runs: one call span, three
/// attempt spans under it with the trace headers each carried, the decisions on them, and the
/// histograms.
async fn busy_twice_then_answered(form: BusyForm, statuses: [i64; 3]) {
    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let emulator = Emulator::start(EmulatorConfig::default().busy_form(form))
        .await
        .unwrap();
    emulator.push_fault(Fault::Busy);
    emulator.push_fault(Fault::Busy);
    let stack = traced_layers(&emulator, &exported).layer(http_client());
    let (status, body) = answer(stack, add_request(7)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""text":"3""#), "{body}");
    let audit = emulator.audit();
    assert_eq!(audit.busy_refusals, 2);
    assert_eq!(audit.signature_failures, 0, "every signature verified");
    assert_eq!(audit.executions_of("add"), 1);

    let spans = exported.spans();
    let calls = named(&spans, "tools/call add");
    assert_eq!(calls.len(), 1, "one call span: {spans:#?}");
    let call = calls[0];
    assert_eq!(call.span_kind, SpanKind::Client);
    assert_eq!(call.parent_span_id, SpanId::INVALID, "a root span");
    assert_eq!(call.status, Status::Unset, "{call:#?}");
    let f = attributes(&call.attributes);
    assert_eq!(f.get("mcp.method.name"), Some(&s("tools/call")));
    assert_eq!(f.get("gen_ai.tool.name"), Some(&s("add")));
    assert_eq!(f.get("gen_ai.operation.name"), Some(&s("execute_tool")));
    assert_eq!(f.get("jsonrpc.request.id"), Some(&s("7")));
    assert_eq!(f.get("mcp.session.id"), Some(&s("session-otel-1")));
    assert_eq!(f.get("mcp.protocol.version"), Some(&s("2025-06-18")));
    // The server the signer sends to (its target), not the URI the app passes
    // (`http://agentcore.invalid/mcp`).
    assert_eq!(f.get("server.address"), Some(&s("127.0.0.1")));
    assert_eq!(
        f.get("server.port"),
        Some(&Value::I64(i64::from(emulator.addr().port())))
    );
    for absent in [
        "error.type",
        "rpc.response.status_code",
        "gen_ai.prompt.name",
        "mcp.resource.uri",
    ] {
        assert!(!f.contains_key(absent), "{absent}: {f:#?}");
    }

    let attempts = children(&spans, call);
    assert_eq!(attempts.len(), 3, "{spans:#?}");
    assert_eq!(spans.len(), 4, "no other span: {spans:#?}");
    for (i, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt.name, "POST");
        assert_eq!(attempt.span_kind, SpanKind::Client);
        assert_eq!(
            attempt.span_context.trace_id(),
            call.span_context.trace_id()
        );
        let a = attributes(&attempt.attributes);
        assert_eq!(a.get("http.request.method"), Some(&s("POST")));
        let invocations = format!(
            "http://127.0.0.1:{}/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Femulated_mcp-AbC123/invocations",
            emulator.addr().port()
        );
        assert_eq!(a.get("url.full"), Some(&s(&invocations)));
        assert_eq!(a.get("server.address"), Some(&s("127.0.0.1")));
        assert_eq!(
            a.get("server.port"),
            Some(&Value::I64(i64::from(emulator.addr().port())))
        );
        assert_eq!(
            a.get("http.request.resend_count"),
            (i > 0).then_some(&Value::I64(i as i64)),
            "attempt {i}: {a:#?}"
        );
        assert_eq!(
            a.get("http.response.status_code"),
            Some(&Value::I64(statuses[i])),
            "attempt {i}"
        );
        match a.get("aws.request_id") {
            Some(Value::String(id)) => assert_eq!(id.as_str().len(), 36, "a UUID: {id}"),
            other => panic!("attempt {i}: aws.request_id {other:?}"),
        }
        if statuses[i] >= 400 {
            assert_eq!(a.get("error.type"), Some(&s(&statuses[i].to_string())));
            assert!(
                matches!(attempt.status, Status::Error { .. }),
                "{attempt:#?}"
            );
        } else {
            assert!(!a.contains_key("error.type"), "attempt {i}: {a:#?}");
            assert_eq!(attempt.status, Status::Unset, "attempt {i}");
        }
        let decided = decisions(attempt);
        if i < 2 {
            assert_eq!(decided.len(), 1, "attempt {i}: {:#?}", attempt.events);
            let (layer, verdict, event) = &decided[0];
            assert_eq!((layer, verdict), (&s("session_busy"), &s("sent_again")));
            assert!(
                matches!(event.get("wait_ms"), Some(Value::I64(ms)) if *ms >= 0),
                "{event:#?}"
            );
            assert!(event.contains_key("by") && event.contains_key("assumes"));
        } else {
            assert!(
                decided.is_empty(),
                "the last attempt: {:#?}",
                attempt.events
            );
        }
    }
    assert_trace_headers(&tool_calls(&emulator), call, &attempts);

    // The histograms: one call, three attempts.
    let (unit, operation) = exported.histogram("mcp.client.operation.duration");
    assert_eq!(unit, "s");
    assert_eq!(operation.len(), 1, "{operation:#?}");
    assert_eq!(operation[0].bounds, OPERATION_BOUNDS);
    assert_eq!(operation[0].count, 1);
    assert!(operation[0].sum > 0.0);
    assert_eq!(
        operation[0].attributes,
        map(&[
            ("mcp.method.name", s("tools/call")),
            ("gen_ai.tool.name", s("add")),
            ("gen_ai.operation.name", s("execute_tool")),
            ("mcp.protocol.version", s("2025-06-18")),
            ("server.address", s("127.0.0.1")),
            ("server.port", Value::I64(i64::from(emulator.addr().port()))),
        ])
    );
    let (unit, mut requests) = exported.histogram("http.client.request.duration");
    assert_eq!(unit, "s");
    requests.sort_by_key(|p| match p.attributes.get("http.response.status_code") {
        Some(Value::I64(status)) => *status,
        _ => 0,
    });
    let mut expected: BTreeMap<i64, u64> = BTreeMap::new();
    for status in statuses {
        *expected.entry(status).or_default() += 1;
    }
    assert_eq!(requests.len(), expected.len(), "{requests:#?}");
    assert_eq!(requests.iter().map(|p| p.count).sum::<u64>(), 3);
    for (point, (status, count)) in requests.iter().zip(&expected) {
        assert_eq!(point.bounds, REQUEST_BOUNDS);
        assert_eq!(point.count, *count, "{point:#?}");
        let mut attributes = vec![
            ("http.request.method", s("POST")),
            ("server.address", s("127.0.0.1")),
            ("server.port", Value::I64(i64::from(emulator.addr().port()))),
            ("http.response.status_code", Value::I64(*status)),
        ];
        if *status >= 400 {
            attributes.push(("error.type", s(&status.to_string())));
        }
        assert_eq!(point.attributes, map(&attributes));
    }
}

#[tokio::test]
async fn a_call_busy_twice_in_a_200_exports_one_call_span_three_attempts_and_the_histograms() {
    busy_twice_then_answered(BusyForm::JsonRpc200, [200, 200, 200]).await;
}

#[tokio::test]
async fn a_call_busy_twice_in_a_409_exports_one_call_span_three_attempts_and_the_histograms() {
    busy_twice_then_answered(BusyForm::Conflict409, [409, 409, 200]).await;
}

#[tokio::test]
async fn a_call_in_the_apps_span_joins_the_apps_trace() {
    use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing::Instrument;

    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    emulator.push_fault(Fault::Busy);
    let stack = traced_layers(&emulator, &exported).layer(http_client());
    // The app serves a request that came with a trace (a remote parent), in a span of its own.
    let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let remote = SpanId::from_hex("00f067aa0ba902b7").unwrap();
    let _attached = opentelemetry::Context::current()
        .with_remote_span_context(SpanContext::new(
            trace,
            remote,
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        ))
        .attach();
    let app = tracing::info_span!("handle");
    let (status, body) = answer(stack, add_request(7)).instrument(app).await;
    assert_eq!(status, 200, "{body}");

    let spans = exported.spans();
    let apps = named(&spans, "handle");
    assert_eq!(apps.len(), 1, "{spans:#?}");
    let app = apps[0];
    assert_eq!(app.span_context.trace_id(), trace);
    assert_eq!(app.parent_span_id, remote);
    let calls = named(&spans, "tools/call add");
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call = calls[0];
    assert_eq!(call.span_context.trace_id(), trace, "the app's trace");
    assert_eq!(
        call.parent_span_id,
        app.span_context.span_id(),
        "a child of the app's span"
    );
    let attempts = children(&spans, call);
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    assert_eq!(spans.len(), 4, "no other span: {spans:#?}");
    assert_trace_headers(&tool_calls(&emulator), call, &attempts);
}

#[tokio::test]
async fn a_tool_error_result_is_the_call_spans_error_and_the_operations() {
    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    // The emulator answers invalid input as a tool execution error (SEP-1303).
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let stack = traced_layers(&emulator, &exported).layer(http_client());
    let mut request = tool_call(7, "add", json!({"a": "one", "b": 2}));
    request
        .headers_mut()
        .insert("mcp-protocol-version", "2025-11-25".parse().unwrap());
    let (status, body) = answer(stack, request).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""isError":true"#), "{body}");
    assert_eq!(
        emulator.audit().executions_of("add"),
        0,
        "the tool did not run"
    );

    let spans = exported.spans();
    let calls = named(&spans, "tools/call add");
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call = calls[0];
    let f = attributes(&call.attributes);
    assert_eq!(f.get("error.type"), Some(&s("tool_error")));
    assert!(!f.contains_key("rpc.response.status_code"), "{f:#?}");
    assert!(
        matches!(call.status, Status::Error { .. }),
        "{:?}",
        call.status
    );
    let attempts = children(&spans, call);
    assert_eq!(attempts.len(), 1, "{spans:#?}");
    let a = attributes(&attempts[0].attributes);
    assert_eq!(a.get("http.response.status_code"), Some(&Value::I64(200)));
    assert!(a.contains_key("aws.request_id"), "{a:#?}");
    assert!(!a.contains_key("error.type"), "an HTTP success: {a:#?}");
    assert_eq!(attempts[0].status, Status::Unset);

    let (_, operation) = exported.histogram("mcp.client.operation.duration");
    assert_eq!(operation.len(), 1, "{operation:#?}");
    assert_eq!(operation[0].count, 1);
    assert_eq!(
        operation[0].attributes.get("error.type"),
        Some(&s("tool_error"))
    );
    assert!(
        !operation[0]
            .attributes
            .contains_key("rpc.response.status_code")
    );
    let (_, requests) = exported.histogram("http.client.request.duration");
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert!(!requests[0].attributes.contains_key("error.type"));
}

#[tokio::test]
async fn a_json_rpc_error_is_the_call_spans_error_type_and_status_code() {
    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let stack = traced_layers(&emulator, &exported).layer(http_client());
    // An unknown tool (-32602), an unknown method (-32601), as the emulator answers them.
    let (status, body) = answer(stack.clone(), tool_call(8, "nope", json!({}))).await;
    assert_eq!(status, 200);
    assert!(body.contains("-32602"), "{body}");
    let (status, body) = answer(stack, rpc_request(9, "resources/list", json!({}))).await;
    assert_eq!(status, 200);
    assert!(body.contains("-32601"), "{body}");

    let spans = exported.spans();
    assert_eq!(spans.len(), 4, "two calls of one attempt each: {spans:#?}");
    for (name, code, id) in [
        ("tools/call nope", "-32602", "8"),
        ("resources/list", "-32601", "9"),
    ] {
        let calls = named(&spans, name);
        assert_eq!(calls.len(), 1, "{name}: {spans:#?}");
        let call = calls[0];
        assert_eq!(call.span_kind, SpanKind::Client);
        let f = attributes(&call.attributes);
        assert_eq!(f.get("error.type"), Some(&s(code)), "{name}");
        assert_eq!(f.get("rpc.response.status_code"), Some(&s(code)), "{name}");
        assert_eq!(f.get("jsonrpc.request.id"), Some(&s(id)), "{name}");
        assert!(
            matches!(call.status, Status::Error { .. }),
            "{name}: {:?}",
            call.status
        );
        let attempts = children(&spans, call);
        assert_eq!(attempts.len(), 1, "{name}");
        let a = attributes(&attempts[0].attributes);
        assert_eq!(a.get("http.response.status_code"), Some(&Value::I64(200)));
        assert!(!a.contains_key("error.type"), "{name}: an HTTP success");
    }
    let tool = attributes(&named(&spans, "tools/call nope")[0].attributes);
    assert_eq!(tool.get("gen_ai.tool.name"), Some(&s("nope")));
    let method = attributes(&named(&spans, "resources/list")[0].attributes);
    assert_eq!(method.get("mcp.method.name"), Some(&s("resources/list")));
    assert!(!method.contains_key("gen_ai.tool.name"));
    assert!(!method.contains_key("gen_ai.operation.name"));

    let (_, mut operation) = exported.histogram("mcp.client.operation.duration");
    operation.sort_by_key(|p| format!("{:?}", p.attributes.get("mcp.method.name")));
    assert_eq!(operation.len(), 2, "{operation:#?}");
    assert_eq!(
        operation[0].attributes,
        map(&[
            ("mcp.method.name", s("resources/list")),
            ("server.address", s("127.0.0.1")),
            ("server.port", Value::I64(i64::from(emulator.addr().port()))),
            ("rpc.response.status_code", s("-32601")),
            ("error.type", s("-32601")),
        ])
    );
    assert_eq!(
        operation[1].attributes,
        map(&[
            ("mcp.method.name", s("tools/call")),
            ("gen_ai.tool.name", s("nope")),
            ("gen_ai.operation.name", s("execute_tool")),
            ("server.address", s("127.0.0.1")),
            ("server.port", Value::I64(i64::from(emulator.addr().port()))),
            ("rpc.response.status_code", s("-32602")),
            ("error.type", s("-32602")),
        ])
    );
    assert!(operation.iter().all(|p| p.count == 1));
}

/// hyper-util's loopback client under any of the crate's layers, whatever body they hand down:
/// the body collected, then sent.
#[derive(Clone)]
struct Loopback(
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
);

impl<B> tower::Service<Request<B>> for Loopback
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Debug,
{
    type Response = Response<hyper::body::Incoming>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = body
                .collect()
                .await
                .map_err(|e| format!("request body: {e:?}"))?
                .to_bytes();
            Ok(client
                .request(Request::from_parts(parts, Full::new(bytes)))
                .await?)
        })
    }
}

/// Checks that a `tools/call` of `add` throttled once, then answered, exported exactly one call
/// span — a root, named from the MCP headers — with both attempt spans its children, in its
/// trace. `order` names the stack.
fn assert_one_call_span<'a>(
    spans: &'a [SpanData],
    order: &[&str],
) -> (&'a SpanData, Vec<&'a SpanData>) {
    let calls = named(spans, "tools/call add");
    assert_eq!(calls.len(), 1, "{order:?}: one call span: {spans:#?}");
    let call = calls[0];
    assert_eq!(call.span_kind, SpanKind::Client, "{order:?}");
    assert_eq!(
        call.parent_span_id,
        SpanId::INVALID,
        "{order:?}: {spans:#?}"
    );
    assert_eq!(call.status, Status::Unset, "{order:?}: {call:#?}");
    let attempts = children(spans, call);
    assert_eq!(attempts.len(), 2, "{order:?}: {spans:#?}");
    assert_eq!(spans.len(), 3, "{order:?}: no other span: {spans:#?}");
    for (i, (attempt, status)) in attempts.iter().zip([429, 200]).enumerate() {
        assert_eq!(attempt.name, "POST", "{order:?}");
        assert_eq!(attempt.span_kind, SpanKind::Client, "{order:?}");
        assert_eq!(
            attempt.span_context.trace_id(),
            call.span_context.trace_id(),
            "{order:?}"
        );
        let a = attributes(&attempt.attributes);
        assert_eq!(
            a.get("http.response.status_code"),
            Some(&Value::I64(status)),
            "{order:?}: attempt {i}"
        );
        assert_eq!(
            a.get("http.request.resend_count"),
            (i > 0).then_some(&Value::I64(1)),
            "{order:?}: attempt {i}"
        );
    }
    (call, attempts)
}

/// Builds the layers numbered in each order (outer to inner) over the loopback client — the
/// retry layers with the OpenTelemetry trace context when `$trace` — sends one `tools/call` of
/// `add` that the emulator throttles once, then answers, and checks its exported spans (and,
/// with `$trace`, the trace headers each attempt carried); evaluates to the orders run, by name.
/// Each order is its own stack type.
macro_rules! one_call_span_in_every_order {
    ($exported:ident, $emulator:ident, $trace:ident, $( [$($layer:tt)+] ),+ $(,)?) => {{
        let mut orders: Vec<Vec<&'static str>> = Vec::new();
        $(
            $exported.spans.reset();
            let order = vec![$(one_call_span_in_every_order!(@name $layer)),+];
            let builder = ServiceBuilder::new();
            $(let builder = builder.layer(one_call_span_in_every_order!(@layer $emulator $trace $layer));)+
            let stack = builder.service(Loopback(http_client()));
            let before = tool_calls(&$emulator).len();
            $emulator.push_fault(Fault::Throttle { retry_after: Some(RetryAfter::Seconds(0)) });
            let request = with_mcp_headers(add_request(7));
            let (status, body) = answer(stack, request).await;
            assert_eq!(status, 200, "{order:?}: {body}");
            assert!(body.contains(r#""text":"3""#), "{order:?}: {body}");
            let received = tool_calls(&$emulator).split_off(before);
            let spans = $exported.spans();
            let (call, attempts) = assert_one_call_span(&spans, &order);
            if $trace {
                // Below a signer that signed the first attempt's trace headers (a traced layer
                // above it wrote them), the throttle layer's re-send is the signed request: it
                // carries them, unchanged, or its signature would break.
                let at = |name| order.iter().position(|n| *n == name).unwrap();
                let signed_first = at("signer") > 0 && at("signer") < at("throttle");
                let parents: &[usize] = if signed_first { &[0, 0] } else { &[0, 1] };
                assert_trace_headers_from(&received, call, &attempts, parents);
            } else {
                assert_eq!(received.len(), 2, "{order:?}");
            }
            orders.push(order);
        )+
        orders
    }};
    (@layer $emulator:ident $trace:ident 0) => {
        traced(ReplayGuardLayer::new(), $trace, ReplayGuardLayer::trace_context)
    };
    (@layer $emulator:ident $trace:ident 1) => {
        traced(ThrottleRetryLayer::new(), $trace, ThrottleRetryLayer::trace_context)
    };
    (@layer $emulator:ident $trace:ident 2) => {
        traced(SessionBusyRetryLayer::new(), $trace, SessionBusyRetryLayer::trace_context)
    };
    (@layer $emulator:ident $trace:ident 3) => { $emulator.signer().build().unwrap() };
    (@name 0) => { "guard" };
    (@name 1) => { "throttle" };
    (@name 2) => { "session_busy" };
    (@name 3) => { "signer" };
}

/// `layer`, with the OpenTelemetry trace context when `trace`.
fn traced<L>(layer: L, trace: bool, set: impl FnOnce(L, TraceContext) -> L) -> L {
    if trace {
        set(layer, TraceContext::opentelemetry())
    } else {
        layer
    }
}

/// The 24 orders of the guard, the throttling and session-busy layers and the signer, each
/// sending one call over an emulator, with the retry layers' trace context or without.
async fn every_order(trace: bool) {
    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let orders = one_call_span_in_every_order!(exported, emulator, trace,
        [0 1 2 3], [0 1 3 2], [0 2 1 3], [0 2 3 1], [0 3 1 2], [0 3 2 1],
        [1 0 2 3], [1 0 3 2], [1 2 0 3], [1 2 3 0], [1 3 0 2], [1 3 2 0],
        [2 0 1 3], [2 0 3 1], [2 1 0 3], [2 1 3 0], [2 3 0 1], [2 3 1 0],
        [3 0 1 2], [3 0 2 1], [3 1 0 2], [3 1 2 0], [3 2 0 1], [3 2 1 0],
    );
    assert_every_order(&orders);
    let audit = emulator.audit();
    assert_eq!(audit.throttled, 24);
    assert_eq!(audit.signature_failures, 0);
    assert_eq!(audit.executions_of("add"), 24);
}

#[tokio::test]
async fn one_exported_call_span_in_every_order_of_the_guard_the_retries_and_the_signer() {
    every_order(false).await;
}

#[tokio::test]
async fn every_order_sends_each_attempt_with_its_own_span_as_parent_signed() {
    every_order(true).await;
}

/// Every string of what the exporters hold: span names, attributes, events, links, statuses,
/// scopes and resources, metric attributes — raw, and `Debug`-formatted.
fn everything_exported(exported: &Exported) -> String {
    let spans = exported.spans();
    let mut text = format!("{spans:?} {:?}", exported.spans);
    for span in &spans {
        text.push_str(&span.name);
        let mut kvs: Vec<&KeyValue> = span.attributes.iter().collect();
        for event in span.events.iter() {
            text.push_str(&event.name);
            kvs.extend(&event.attributes);
        }
        for link in span.links.iter() {
            kvs.extend(&link.attributes);
        }
        if let Status::Error { description } = &span.status {
            text.push_str(description);
        }
        for kv in kvs {
            text.push_str(&format!(" {}={} ", kv.key, kv.value));
        }
    }
    let metrics = exported.resource_metrics();
    text.push_str(&format!("{metrics:?}"));
    for export in &metrics {
        for (key, value) in export.resource().iter() {
            text.push_str(&format!(" {key}={value} "));
        }
        for metric in export.scope_metrics().flat_map(|scope| scope.metrics()) {
            if let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() {
                for point in histogram.data_points() {
                    for kv in point.attributes() {
                        text.push_str(&format!(" {}={} ", kv.key, kv.value));
                    }
                }
            }
        }
    }
    text
}

/// Checks that the answers that echoed a secret into `x-amzn-requestid` reached the attempt
/// spans as `aws.request_id` (so the search below covers that way out): `calls` calls of
/// `requestid`, and of `requestid-429` with three attempts each (throttled to the end).
fn assert_request_ids_recorded(spans: &[SpanData], calls: usize) {
    for (name, attempts) in [("tools/call requestid", 1), ("tools/call requestid-429", 3)] {
        let named = named(spans, name);
        assert_eq!(named.len(), calls, "{name}: {spans:#?}");
        for call in named {
            let children = children(spans, call);
            assert_eq!(children.len(), attempts, "{name}: {spans:#?}");
            for attempt in children {
                assert!(
                    attributes(&attempt.attributes).contains_key("aws.request_id"),
                    "{name}: {attempt:#?}"
                );
            }
        }
    }
}

/// `text` percent-encoded as a URL would carry it.
fn percent_encoded(text: &str) -> String {
    text.replace('%', "%25")
        .replace('/', "%2F")
        .replace('+', "%2B")
        .replace('=', "%3D")
}

/// The query value of the requests to the hostile server, which no export may show.
const QUERY_VALUE: &str = "q-value-5e1f9a";

/// The origin the requests of the runtime door name (the signer sends to its target): with a
/// password.
fn with_password() -> String {
    format!("http://user:{}@mcp.invalid", hostile::PASSWORD)
}

/// Every mode of the hostile server (see `common::hostile`), each a way to hand back a secret:
/// those that answer once, then the request id's (the 429 is re-sent twice).
fn every_mode() -> impl Iterator<Item = &'static str> {
    hostile::MODES.into_iter().chain(hostile::REQUEST_ID_MODES)
}

/// A `tools/call` whose tool names the hostile server's `mode`, to `origin`'s `/mcp` with the
/// query value.
fn hostile_call(mode: &str, origin: &str) -> Request<Full<Bytes>> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": mode, "arguments": {}}});
    Request::post(format!("{origin}/mcp?key={QUERY_VALUE}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

#[tokio::test]
async fn a_hostile_echo_gets_no_sigv4_secret_into_any_export() {
    use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};

    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let token = hostile::token();
    let (addr, seen) = hostile::hostile_server().await;
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn(hostile::ARN).endpoint(format!("http://{addr}")),
        aws_credential_types::Credentials::new(
            "AKIDHOSTILE",
            hostile::SECRET_KEY,
            Some(token.clone()),
            None,
            "test",
        ),
    )
    .build()
    .unwrap();
    let stack = traced_door(signer, &exported).layer(http_client());
    for mode in every_mode() {
        answer(stack.clone(), hostile_call(mode, &with_password())).await;
    }
    drop(stack);

    assert_request_ids_recorded(&exported.spans(), 1);
    let text = everything_exported(&exported);
    assert!(text.contains("url.full"), "the spans were exported");
    assert!(text.contains("tools/call requestid"), "{text}");
    assert!(text.contains("http.client.request.duration"), "{text}");
    let signatures = hostile::signatures(&seen);
    // One attempt per mode, but the throttled one: three.
    assert_eq!(signatures.len(), every_mode().count() + 2);
    let mut secrets = vec![
        ("the secret key", hostile::SECRET_KEY.to_owned()),
        ("the session token", token.clone()),
        ("the escaped token", hostile::escaped(&token)),
        ("the \\u-escaped token", hostile::all_escaped(&token)),
        ("the percent-encoded token", percent_encoded(&token)),
        ("part of the token", token[300..340].to_owned()),
        ("the URL's password", hostile::PASSWORD.to_owned()),
        ("the query value", QUERY_VALUE.to_owned()),
    ];
    for signature in signatures {
        assert_eq!(signature.len(), 64);
        secrets.push(("a signature", signature.clone()));
        secrets.push(("an escaped signature", hostile::all_escaped(&signature)));
    }
    for (what, secret) in &secrets {
        assert!(!text.contains(secret.as_str()), "the export has {what}");
    }
}

#[tokio::test]
async fn a_hostile_echo_gets_no_bearer_token_into_any_export() {
    let _serial = SERIAL.lock().await;
    let exported = Exported::install();
    let jwt = hostile::jwt();
    let (addr, seen) = hostile::hostile_server().await;
    let (runtime, endpoint) = hostile::bearer_doors(addr, &jwt);
    let runtime_stack = traced_door(runtime, &exported).layer(http_client());
    let endpoint_stack = traced_door(endpoint, &exported).layer(http_client());
    for mode in every_mode() {
        answer(runtime_stack.clone(), hostile_call(mode, &with_password())).await;
        // The endpoint door sends where the request says: the hostile server itself.
        answer(
            endpoint_stack.clone(),
            hostile_call(mode, &format!("http://{addr}")),
        )
        .await;
    }
    // A password in the URL the endpoint door would send to: refused before it is sent, but
    // the call and its attempt have their spans.
    let origin = format!("http://user:{}@{addr}", hostile::PASSWORD);
    let refused = endpoint_stack
        .clone()
        .oneshot(hostile_call("echo", &origin))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), agentcore_tower::ErrorKind::InvalidRequest);
    drop((runtime_stack, endpoint_stack));

    assert_request_ids_recorded(&exported.spans(), 2);
    let text = everything_exported(&exported);
    assert!(
        text.contains(&format!("http://REDACTED:REDACTED@{addr}/mcp?key=REDACTED")),
        "the endpoint door's url.full: {text}"
    );
    assert_eq!(seen.lock().unwrap().len(), 2 * (every_mode().count() + 2));
    assert!(
        seen.lock().unwrap().iter().all(|s| s.signature == jwt),
        "the server got the token"
    );
    for (what, secret) in [
        ("the token", jwt.clone()),
        ("the escaped token", hostile::all_escaped(&jwt)),
        ("part of the token", jwt[200..240].to_owned()),
        ("the URL's password", hostile::PASSWORD.to_owned()),
        ("the query value", QUERY_VALUE.to_owned()),
    ] {
        assert!(!text.contains(secret.as_str()), "the export has {what}");
    }
}

#[tokio::test]
async fn the_trace_in_params_meta_names_the_call_span_on_every_attempt() {
    let _serial = SERIAL.lock().await;
    // SEP-414: the MCP server's span is a child of the MCP client's span (the call's), whichever
    // attempt reaches it; the HTTP headers name each attempt's own span.
    let exported = Exported::install();
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    emulator.push_fault(Fault::Busy);
    emulator.push_fault(Fault::Busy);
    let stack = traced_layers(&emulator, &exported)
        .trace_context(TraceContext::opentelemetry().params_meta(true))
        .layer(http_client());
    let (status, body) = answer(stack, add_request(7)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(emulator.audit().signature_failures, 0);
    let spans = exported.spans();
    let calls = named(&spans, "tools/call add");
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let call = calls[0];
    let attempts = children(&spans, call);
    assert_eq!(attempts.len(), 3, "{spans:#?}");
    let received = tool_calls(&emulator);
    assert_eq!(received.len(), 3, "{received:#?}");
    let trace = call.span_context.trace_id();
    let meta = format!("00-{trace}-{}-01", call.span_context.span_id());
    for (attempt, received) in attempts.iter().zip(&received) {
        assert_eq!(received.meta_traceparent.as_deref(), Some(meta.as_str()));
        let own = format!("00-{trace}-{}-01", attempt.span_context.span_id());
        assert_eq!(received.traceparent.as_deref(), Some(own.as_str()));
    }
}
