//! What the crate's telemetry costs per call: one `tools/call` through the recommended stack
//! (`RecommendedLayers` over the SigV4 signer, credentials with a 700-character session token)
//! over an in-memory service answering a 300-byte JSON-RPC result, under four set-ups of the
//! app's telemetry:
//!
//! * `none` — no subscriber: the baseline;
//! * `filtered` — a `tracing_subscriber::registry()` with only a `WARN` level filter, which
//!   drops the crate's `info` spans: what the callsite checks cost;
//! * `otel` — a registry with an `INFO` level filter and `tracing-opentelemetry`'s layer over an
//!   `opentelemetry_sdk` tracer provider with the in-memory span exporter behind the simple
//!   processor: every span exported as it ends (the call span, one span per attempt, the
//!   decision events on them);
//! * `otel_metrics` — `otel`, with the stack also given `telemetry::Metrics` over an SDK meter
//!   provider (the in-memory metric exporter behind a periodic reader that does not fire during
//!   the run) and `TraceContext::opentelemetry()`, so each attempt carries `traceparent` and
//!   `X-Amzn-Trace-Id`.
//!
//! And the call that meets one session-busy refusal (the JSON-RPC -32005 reply) and then
//! succeeds — two attempt spans — under `none` and `otel_metrics` (`busy_none`,
//! `busy_otel_metrics`). The backoff is the layer's default; those calls run on a tokio runtime
//! whose clock is paused, so the ~100 ms wait is skipped at once and only the work is measured.
//!
//! Each measurement installs its subscriber with `tracing::dispatcher::set_default` for its own
//! calls only, so the set-ups can be interleaved in one process. The subscriber is built anew
//! for each measurement and the previous one is gone by then: `tracing` caches each callsite's
//! interest over every live subscriber, so a set-up is measured as if it were the process's
//! only one (for `none`, a `NoSubscriber` is registered and dropped first, which resets the
//! caches to "never", as in a process that never had a subscriber). The in-memory exporters are
//! cleared every 1,000 calls, outside the timed calls, so memory does not grow.
//!
//! One criterion group, `telemetry`, with the six. After it, under `cargo bench`:
//! * interleaved A/B checks print the median ratio of each set-up's time per call to the
//!   baseline's (`none`; `busy_none` for the busy call) over 21 rounds of 4,000 calls per side,
//!   alternating — robust to the machine's speed drifting between criterion's measurements;
//! * the allocations per call of each (the counting allocator of `support`, mean of 1,000 calls
//!   after 200 of warm-up), with two more rows splitting `otel_metrics` beyond `otel`: the
//!   metrics alone, the trace headers alone. The in-memory span exporter clones each span it is
//!   handed: that clone is counted, as a real exporter's own copies would be.
//!
//! `NO_AB=1` skips both. Nothing is asserted about time; before measuring, each set-up is
//! checked to do what it says (the same answer; 2 spans exported per call, 3 for the busy call;
//! both histograms recorded; the trace headers on the wire).
//!
//! Run: `cargo bench --manifest-path compat/Cargo.toml --bench telemetry` (add
//! `-- --warm-up-time 1 --measurement-time 3` for a short run).

use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower::RecommendedLayers;
use agentcore_tower::telemetry::{Metrics, TraceContext};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::HeaderMap;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tokio::runtime::Runtime;
use tower::Layer;
use tracing::Dispatch;
use tracing::subscriber::NoSubscriber;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;

#[path = "support/mod.rs"]
mod support;

use support::{
    Callable, InMemory, allocations_per_call, answer, answering, call, current_thread_runtime,
    inner, interleaved, interleaving_wanted, print_median, signer, time_ratio, tools_call,
};

#[global_allocator]
static ALLOCATOR: support::Counting = support::Counting;

/// The exporters are cleared after this many calls (untimed).
const CHUNK: u64 = 1_000;
/// Calls per side of a round of the interleaved checks.
const CALLS: u64 = 4_000;
const ROUNDS: usize = 21;

/// The session-busy refusal, as AgentCore Runtime answers it (HTTP 200, JSON-RPC -32005).
const BUSY: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;

/// The app's telemetry set-up a call is measured under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// No subscriber.
    None,
    /// A registry whose level filter drops the crate's spans.
    Filtered,
    /// A registry exporting every span through `tracing-opentelemetry`.
    Otel,
    /// [`Setup::Otel`]; the stack records metrics and writes trace headers (the stack's part:
    /// see [`Stacks`]).
    OtelMetrics,
}

/// The OpenTelemetry SDK's providers, over in-memory exporters.
struct Otel {
    spans: InMemorySpanExporter,
    tracer_provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
}

impl Otel {
    fn new() -> Self {
        let spans = InMemorySpanExporter::default();
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let metrics = InMemoryMetricExporter::default();
        // Exported on `force_flush` only (the checks): the interval is never reached.
        let reader = PeriodicReader::builder(metrics.clone())
            .with_interval(Duration::from_secs(24 * 3600))
            .build();
        let meter_provider = SdkMeterProvider::builder().with_reader(reader).build();
        Self {
            spans,
            tracer_provider,
            metrics,
            meter_provider,
        }
    }

    /// A new subscriber for `setup` (none for [`Setup::None`]), registered as the only live one.
    fn dispatch(&self, setup: Setup) -> Option<Dispatch> {
        match setup {
            Setup::None => {
                // Resets every callsite's interest to "never" and the max level to OFF, as in
                // a process that never had a subscriber.
                drop(Dispatch::new(NoSubscriber::default()));
                None
            }
            Setup::Filtered => Some(Dispatch::new(
                tracing_subscriber::registry().with(LevelFilter::WARN),
            )),
            Setup::Otel | Setup::OtelMetrics => Some(Dispatch::new(
                tracing_subscriber::registry().with(LevelFilter::INFO).with(
                    tracing_opentelemetry::layer()
                        .with_tracer(self.tracer_provider.tracer("agentcore-tower-bench")),
                ),
            )),
        }
    }

    /// Empties the in-memory exporters.
    fn clear(&self) {
        self.spans.reset();
        self.metrics.reset();
    }
}

/// The time of `calls` calls of `one` under `setup`, the exporters cleared every [`CHUNK`]
/// calls between the timed stretches.
async fn run<F, Fut>(otel: &Otel, setup: Setup, calls: u64, mut one: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    let dispatch = otel.dispatch(setup);
    let _default = dispatch.as_ref().map(tracing::dispatcher::set_default);
    let mut elapsed = Duration::ZERO;
    let mut left = calls;
    while left > 0 {
        let n = left.min(CHUNK);
        let start = Instant::now();
        for _ in 0..n {
            black_box(one().await);
        }
        elapsed += start.elapsed();
        otel.clear();
        left -= n;
    }
    elapsed
}

/// The in-memory runtime whose session is busy once per call: it answers every other request
/// (the first, the third, …) with the session-busy refusal, and the others with `answer`.
/// Clones share the count.
fn busy_once(answer: Bytes) -> impl InMemory {
    let sent = Arc::new(AtomicU64::new(0));
    answering(move |_request| {
        let busy = sent.fetch_add(1, Ordering::Relaxed).is_multiple_of(2);
        if busy {
            Bytes::from_static(BUSY)
        } else {
            answer.clone()
        }
    })
}

/// The in-memory service answering `answer`, keeping the headers of the last request it got.
fn capturing(answer: Bytes, seen: Arc<Mutex<HeaderMap>>) -> impl InMemory {
    answering(move |request| {
        *seen.lock().unwrap() = request.headers().clone();
        answer.clone()
    })
}

/// The recommended stack as [`Setup::None`] to [`Setup::Otel`] use it, and as
/// [`Setup::OtelMetrics`] does: with `telemetry::Metrics` and `TraceContext::opentelemetry()`.
fn layers(otel: &Otel, with_metrics: bool) -> RecommendedLayers {
    let layers = RecommendedLayers::new(signer());
    if !with_metrics {
        return layers;
    }
    layers
        .metrics(Metrics::new(
            &otel.meter_provider.meter("agentcore-tower-bench"),
        ))
        .trace_context(TraceContext::opentelemetry())
}

/// What every measurement shares: the providers, and the `tools/call` each call sends.
struct Bench<'a> {
    otel: &'a Otel,
    body: &'a Bytes,
}

impl Bench<'_> {
    /// One call of `stack` under `setup` on `runtime`, the exporters emptied first: the answer
    /// and the names of the spans exported.
    fn traced_call<S: Callable>(
        &self,
        setup: Setup,
        runtime: &Runtime,
        stack: &S,
    ) -> (Bytes, Vec<String>) {
        let Self { otel, body } = *self;
        otel.clear();
        let got = runtime.block_on(async {
            let dispatch = otel.dispatch(setup);
            let _default = dispatch.as_ref().map(tracing::dispatcher::set_default);
            call(stack, body).await
        });
        let spans = otel.spans.get_finished_spans().unwrap();
        (got, spans.iter().map(|s| s.name.to_string()).collect())
    }

    /// The time of [`CALLS`] calls of `stack` under `setup` on `runtime`.
    fn timed<S: Callable>(&self, setup: Setup, runtime: &Runtime, stack: &S) -> Duration {
        let Self { otel, body } = *self;
        runtime.block_on(run(otel, setup, CALLS, || call(stack, body)))
    }

    /// Mean (allocations, bytes) per call of `stack` under `setup` on `runtime`: 1,000 calls
    /// after 200 of warm-up.
    fn allocations<S: Callable>(&self, setup: Setup, runtime: &Runtime, stack: &S) -> (f64, f64) {
        let Self { otel, body } = *self;
        let dispatch = otel.dispatch(setup);
        let _default = dispatch.as_ref().map(tracing::dispatcher::set_default);
        runtime.block_on(async {
            for _ in 0..200 {
                black_box(call(stack, body).await);
            }
        });
        otel.clear();
        let counted = allocations_per_call(runtime, 1_000, || call(stack, body));
        otel.clear();
        counted
    }
}

/// Checks, one call each, that every set-up does what it says; prints the spans exported.
fn check(bench: &Bench, runtime: &Runtime, paused: &Runtime, answer: &Bytes) {
    let otel = bench.otel;
    let seen = Arc::new(Mutex::new(HeaderMap::new()));
    let plain = layers(otel, false).layer(capturing(answer.clone(), seen.clone()));
    let full = layers(otel, true).layer(capturing(answer.clone(), seen.clone()));
    let busy_plain = layers(otel, false).layer(busy_once(answer.clone()));
    let busy_full = layers(otel, true).layer(busy_once(answer.clone()));
    let trace_headers = || {
        let seen = seen.lock().unwrap();
        (
            seen.contains_key("traceparent"),
            seen.contains_key("x-amzn-trace-id"),
        )
    };

    for setup in [Setup::None, Setup::Filtered] {
        let (got, spans) = bench.traced_call(setup, runtime, &plain);
        assert_eq!(&got, answer, "{setup:?}");
        assert!(spans.is_empty(), "{setup:?}: {spans:?}");
        assert_eq!(trace_headers(), (false, false), "{setup:?}");
    }
    let (got, spans) = bench.traced_call(Setup::Otel, runtime, &plain);
    assert_eq!(&got, answer);
    assert_eq!(spans.len(), 2, "otel: {spans:?}");
    println!("telemetry: spans exported per call: {spans:?}");
    assert_eq!(trace_headers(), (false, false), "otel, no trace context");

    let (got, spans) = bench.traced_call(Setup::OtelMetrics, runtime, &full);
    assert_eq!(&got, answer);
    assert_eq!(spans.len(), 2, "otel_metrics: {spans:?}");
    assert_eq!(trace_headers(), (true, true), "otel_metrics: trace headers");
    otel.meter_provider.force_flush().unwrap();
    let exported = otel.metrics.get_finished_metrics().unwrap();
    let mut names: Vec<&str> = (exported.iter())
        .flat_map(|r| r.scope_metrics())
        .flat_map(|s| s.metrics())
        .map(|m| m.name())
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names,
        [
            "http.client.request.duration",
            "mcp.client.operation.duration"
        ]
    );

    let (got, spans) = bench.traced_call(Setup::None, paused, &busy_plain);
    assert_eq!(&got, answer, "busy_none");
    assert!(spans.is_empty(), "busy_none: {spans:?}");
    let (got, spans) = bench.traced_call(Setup::OtelMetrics, paused, &busy_full);
    assert_eq!(&got, answer, "busy_otel_metrics");
    assert_eq!(spans.len(), 3, "busy_otel_metrics: {spans:?}");
    println!("telemetry: spans exported per busy call: {spans:?}");
    otel.clear();
}

fn telemetry(c: &mut Criterion) {
    let runtime = current_thread_runtime();
    // The busy call waits out the layer's backoff on a paused clock: skipped at once.
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let body = tools_call(1024);
    let answer = answer(300);
    let otel = Otel::new();
    let bench = Bench {
        otel: &otel,
        body: &body,
    };
    check(&bench, &runtime, &paused, &answer);

    let plain = layers(&otel, false).layer(inner(answer.clone()));
    let full = layers(&otel, true).layer(inner(answer.clone()));
    let busy_plain = layers(&otel, false).layer(busy_once(answer.clone()));
    let busy_full = layers(&otel, true).layer(busy_once(answer.clone()));

    let mut group = c.benchmark_group("telemetry");
    for (name, setup, stack) in [
        ("none", Setup::None, &plain),
        ("filtered", Setup::Filtered, &plain),
        ("otel", Setup::Otel, &plain),
        ("otel_metrics", Setup::OtelMetrics, &full),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&runtime)
                .iter_custom(|iters| run(&otel, setup, iters, || call(stack, &body)))
        });
    }
    for (name, setup, stack) in [
        ("busy_none", Setup::None, &busy_plain),
        ("busy_otel_metrics", Setup::OtelMetrics, &busy_full),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&paused)
                .iter_custom(|iters| run(&otel, setup, iters, || call(stack, &body)))
        });
    }
    group.finish();

    if !interleaving_wanted() {
        return;
    }
    let ab = |label: &str, a: &dyn Fn() -> Duration, b: &dyn Fn() -> Duration| {
        let ratios = interleaved(ROUNDS, a, b, time_ratio);
        print_median(
            &format!("telemetry: interleaved A/B, time per call {label}"),
            &ratios,
        );
    };
    // Each side: a set-up and the stack it runs, on the running clock.
    let timed = |(setup, stack)| bench.timed(setup, &runtime, stack);
    for (label, a, b) in [
        (
            "filtered / none",
            (Setup::Filtered, &plain),
            (Setup::None, &plain),
        ),
        ("otel / none", (Setup::Otel, &plain), (Setup::None, &plain)),
        (
            "otel_metrics / none",
            (Setup::OtelMetrics, &full),
            (Setup::None, &plain),
        ),
        (
            "otel_metrics / otel",
            (Setup::OtelMetrics, &full),
            (Setup::Otel, &plain),
        ),
    ] {
        ab(label, &|| timed(a), &|| timed(b));
    }
    ab(
        "busy_otel_metrics / busy_none",
        &|| bench.timed(Setup::OtelMetrics, &paused, &busy_full),
        &|| bench.timed(Setup::None, &paused, &busy_plain),
    );

    // Where `otel_metrics`' allocations beyond `otel` come from: each half alone.
    let metrics_only = RecommendedLayers::new(signer())
        .metrics(Metrics::new(
            &otel.meter_provider.meter("agentcore-tower-bench"),
        ))
        .layer(inner(answer.clone()));
    let headers_only = RecommendedLayers::new(signer())
        .trace_context(TraceContext::opentelemetry())
        .layer(inner(answer.clone()));
    let mut rows: Vec<(&str, (f64, f64))> = [
        ("none", Setup::None, &plain),
        ("filtered", Setup::Filtered, &plain),
        ("otel", Setup::Otel, &plain),
        ("otel_metrics", Setup::OtelMetrics, &full),
        ("  otel + metrics only", Setup::Otel, &metrics_only),
        ("  otel + trace headers only", Setup::Otel, &headers_only),
    ]
    .map(|(name, setup, stack)| (name, bench.allocations(setup, &runtime, stack)))
    .into();
    rows.extend(
        [
            ("busy_none", Setup::None, &busy_plain),
            ("busy_otel_metrics", Setup::OtelMetrics, &busy_full),
        ]
        .map(|(name, setup, stack)| (name, bench.allocations(setup, &paused, stack))),
    );
    println!(
        "telemetry: allocations per call (mean of 1000 calls after 200 warm-up; 1 KiB tools/call, 300-byte answer)"
    );
    println!("{:<28} {:>12} {:>12}", "set-up", "allocations", "bytes");
    for (name, (count, bytes)) in rows {
        println!("{name:<28} {count:>12.1} {bytes:>12.0}");
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = telemetry
}
criterion_main!(benches);
