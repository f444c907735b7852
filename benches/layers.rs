//! The layers without signing, on the happy path: what each costs per call over an in-memory
//! service, and what the three cost stacked.
//!
//! One criterion group, `layers`, so every ratio comes from one run:
//! * `bare` — the in-memory service alone: a 1 KiB JSON-RPC answer (HTTP 200,
//!   `content-type: application/json`, `content-length`, body `Full<Bytes>`);
//! * `throttle`, `session_busy`, `guard` — each layer alone over it;
//! * `session_busy_no_peek` — the session-busy layer with a peek limit below the answer's
//!   `content-length`, so it does not read ahead: `session_busy` minus this is the peek of a
//!   1 KiB JSON answer;
//! * `stack` — guard → throttle → session busy, the recommended order.
//!
//! Every call is: build the request (a 1 KiB `tools/call` with the MCP headers and a runtime
//! session id), `oneshot` it through a clone of the service, read the answer's body to bytes.
//! A current-thread tokio runtime drives it (criterion's `to_async`).
//!
//! Goals (from the issue): `stack - bare` < 1.5 µs; `session_busy - session_busy_no_peek`
//! < 300 ns. Printed as ratios/differences by criterion's report; nothing is asserted here.
//!
//! After the group, under `cargo bench`, interleaved A/B checks print the median of the same two
//! differences over 21 (the peek: 41) rounds of 20,000 calls per side, alternating: robust to the machine's
//! speed drifting between criterion's measurements. `NO_AB=1` skips them.
//!
//! Run: `cargo bench --bench layers` (add `-- --warm-up-time 1 --measurement-time 3` for a
//! short run).

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

const RUNTIME_SESSION: &str = "bench-runtime-session-000000000000000001";

/// A JSON-RPC message of exactly `size` bytes: `prefix`, padding inside a string, `suffix`.
fn padded_json(prefix: &str, suffix: &str, size: usize) -> Bytes {
    let pad = size - prefix.len() - suffix.len();
    let mut text = String::with_capacity(size);
    text.push_str(prefix);
    text.extend(std::iter::repeat_n('x', pad));
    text.push_str(suffix);
    assert_eq!(text.len(), size);
    serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
    Bytes::from(text)
}

/// A 1 KiB `tools/call`.
fn tools_call() -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#,
        r#""}}}"#,
        1024,
    )
}

/// A 1 KiB answer to it.
fn answer() -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#,
        r#""}],"isError":false}}"#,
        1024,
    )
}

fn request(body: &Bytes) -> Request<Full<Bytes>> {
    Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(
            "mcp-session-id",
            "mcp-session-3f1c2a9e-5b7d-4e21-9c0f-1a2b3c4d5e6f",
        )
        .header("mcp-protocol-version", "2025-06-18")
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .body(Full::new(body.clone()))
        .unwrap()
}

/// The in-memory service: answers every request with the 1 KiB JSON answer.
fn inner(
    answer: Bytes,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send {
    service_fn(move |_request: Request<Full<Bytes>>| {
        let answer = answer.clone();
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .header("content-length", answer.len())
                    .body(Full::new(answer))
                    .unwrap(),
            )
        }
    })
}

/// One call: oneshot through a clone, the body read to bytes.
async fn call<S, B>(service: &S, body: &Bytes) -> Bytes
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = service.clone().oneshot(request(body)).await.unwrap();
    debug_assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap().to_bytes()
}

fn layers(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = tools_call();
    let answer = answer();

    let bare = inner(answer.clone());
    let throttle = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .service(inner(answer.clone()));
    let session_busy = ServiceBuilder::new()
        .layer(SessionBusyRetryLayer::new())
        .service(inner(answer.clone()));
    let session_busy_no_peek = ServiceBuilder::new()
        .layer(SessionBusyRetryLayer::new().peek_limit(answer.len() - 1))
        .service(inner(answer.clone()));
    let guard = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .service(inner(answer.clone()));
    let stack = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .service(inner(answer.clone()));

    // Every variant answers the same bytes.
    runtime.block_on(async {
        let want = answer.clone();
        assert_eq!(call(&bare, &body).await, want);
        assert_eq!(call(&throttle, &body).await, want);
        assert_eq!(call(&session_busy, &body).await, want);
        assert_eq!(call(&session_busy_no_peek, &body).await, want);
        assert_eq!(call(&guard, &body).await, want);
        assert_eq!(call(&stack, &body).await, want);
    });

    let mut group = c.benchmark_group("layers");
    group.bench_function("bare", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&bare, &body).await) })
    });
    group.bench_function("throttle", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&throttle, &body).await) })
    });
    group.bench_function("session_busy", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&session_busy, &body).await) })
    });
    group.bench_function("session_busy_no_peek", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&session_busy_no_peek, &body).await) })
    });
    group.bench_function("guard", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&guard, &body).await) })
    });
    group.bench_function("stack", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(call(&stack, &body).await) })
    });
    group.finish();

    if interleaving_wanted() {
        const CALLS: u32 = 20_000;
        let ns_per_call_more =
            |a: Duration, b: Duration| (a.as_nanos() as f64 - b.as_nanos() as f64) / CALLS as f64;
        let added = interleaved(
            21,
            || timed(&runtime, &stack, &body, CALLS),
            || timed(&runtime, &bare, &body, CALLS),
            ns_per_call_more,
        );
        print_median("layers: interleaved A/B, ns per call stack - bare", &added);
        let peek = interleaved(
            41,
            || timed(&runtime, &session_busy, &body, CALLS),
            || timed(&runtime, &session_busy_no_peek, &body, CALLS),
            ns_per_call_more,
        );
        print_median(
            "layers: interleaved A/B, ns per call session_busy - session_busy_no_peek (the peek)",
            &peek,
        );
    }
}

/// The time of `calls` calls, one after the other.
fn timed<S, B>(runtime: &tokio::runtime::Runtime, service: &S, body: &Bytes, calls: u32) -> Duration
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    runtime.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            black_box(call(service, body).await);
        }
        start.elapsed()
    })
}

/// Whether to run the interleaved A/B checks: under `cargo bench` only (not `cargo test`,
/// not `--profile-time`, not `--list`), unless `NO_AB` is set.
fn interleaving_wanted() -> bool {
    if std::env::var_os("NO_AB").is_some() {
        return false;
    }
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench")
        && !args
            .iter()
            .any(|a| a == "--profile-time" || a == "--test" || a == "--list")
}

/// Runs `a` then `b`, `rounds` times (after one round of warm-up); returns `f(a's time, b's
/// time)` per round, sorted: drift in the machine's speed hits both sides of a round alike.
fn interleaved(
    rounds: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
    f: impl Fn(Duration, Duration) -> f64,
) -> Vec<f64> {
    a();
    b();
    let mut values: Vec<f64> = (0..rounds)
        .map(|_| {
            let a = a();
            f(a, b())
        })
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Prints the median and the range of sorted values.
fn print_median(label: &str, values: &[f64]) {
    println!(
        "{label}: median {:.3} (min {:.3}, max {:.3}, {} rounds)",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
        values.len()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = layers
}
criterion_main!(benches);
