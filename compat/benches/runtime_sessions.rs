//! `RuntimeSessions::PerMcpSession` at 100,000 live MCP sessions: the memory a binding takes,
//! and the time to bind a new MCP session and to look one up — measured through the public
//! layer (the bindings are the crate's own), over an in-memory service that answers an
//! `initialize` (a request without `Mcp-Session-Id`) with a new `Mcp-Session-Id`.
//!
//! * **Memory per binding** (printed first): a global allocator here keeps the bytes live
//!   (allocated minus freed; a `realloc` counts its change). 100,000 `initialize` calls go
//!   through an empty layer; what stays live afterwards, over 100,000, is what a binding costs:
//!   its share of the maps and the list at that size (their capacities grow by doubling), its
//!   two ids (36-character UUIDs, as real servers hand out). Each call's own allocations are
//!   freed by its end, so they cancel out.
//! * **Time**, one criterion group, `runtime_sessions`, every call through a layer with bearer
//!   auth (SigV4's hashing would only add the same few µs to every row):
//!   * `bind/at_100000` — an `initialize` through a layer holding 100,000 bindings, its cap:
//!     its answer binds one more MCP session, so the least recently used is forgotten: the
//!     steady state of a full layer;
//!   * `bind/at_1000` — the same at a cap of 1,000: equal to the row above if a bind is O(1);
//!   * `bind/per_layer` — the same `initialize` through a `PerLayer` layer, which binds
//!     nothing: `bind/at_100000` minus this is the bind's own cost;
//!   * `lookup/at_100000` — a request of one of the 100,000 bound MCP sessions (cycling through
//!     all of them, so memory is as cold as in a busy app), its runtime session looked up and
//!     marked used, the answer confirming it;
//!   * `lookup/per_layer` — the same request through a `PerLayer` layer.
//!
//! The idle time is set to 8 hours so that nothing expires during the run.
//!
//! Run: `cargo bench --manifest-path compat/Cargo.toml --bench runtime_sessions` (add
//! `-- --warm-up-time 1 --measurement-time 3` for a short run, `-- --quick` for a shorter one).

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentcore_tower::auth::BearerToken;
use agentcore_tower::invoke::{InvokeTarget, RuntimeSessions, SigV4InvokeLayer};
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt, service_fn};

#[path = "support/mod.rs"]
mod support;

use support::{ACCEPT, ARN, PROTOCOL_VERSION, current_thread_runtime};

/// Bytes allocated and not yet freed, process-wide.
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Keeps [`LIVE`]: every call forwarded to the system allocator.
struct LiveBytes;

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: LiveBytes = LiveBytes;

/// The live MCP sessions of the measurements.
const LIVE_SESSIONS: usize = 100_000;
/// Nothing expires during the run.
const IDLE: Duration = Duration::from_secs(8 * 3600);

const INITIALIZE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const PING: &[u8] = br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;

/// An MCP session id as a server hands one out: a UUID, here numbered.
fn mcp_session_id(n: u64) -> HeaderValue {
    HeaderValue::try_from(format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
}

/// The in-memory MCP server: answers a request without `Mcp-Session-Id` with a new one (the
/// `n`th it hands out), any other with nothing but `{}`.
fn server(
    handed_out: Arc<AtomicU64>,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    service_fn(move |request: Request<Full<Bytes>>| {
        let mut answer = Response::builder()
            .status(200)
            .header("content-type", "application/json");
        if !request.headers().contains_key("mcp-session-id") {
            let n = handed_out.fetch_add(1, Ordering::Relaxed);
            answer = answer.header("mcp-session-id", mcp_session_id(n));
        }
        let answer = answer.body(Full::new(Bytes::from_static(b"{}"))).unwrap();
        async move { Ok::<_, Infallible>(answer) }
    })
}

/// A layer with bearer auth: `PerMcpSession` with a cap of `max`, or `PerLayer`.
fn layer(per_mcp_session: Option<usize>) -> SigV4InvokeLayer {
    let builder = SigV4InvokeLayer::bearer(
        InvokeTarget::arn(ARN),
        BearerToken::new("bench-token-0123456789"),
    );
    match per_mcp_session {
        Some(max) => builder
            .runtime_sessions(RuntimeSessions::PerMcpSession)
            .runtime_session_idle_timeout(IDLE)
            .max_bound_mcp_sessions(max),
        None => builder,
    }
    .build()
    .unwrap()
}

/// An MCP request with `body`, in the MCP session `mcp_session` if any.
fn request(body: &'static [u8], mcp_session: Option<&HeaderValue>) -> Request<Full<Bytes>> {
    let mut request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", PROTOCOL_VERSION);
    if let Some(id) = mcp_session {
        request = request.header("mcp-session-id", id.clone());
    }
    request.body(Full::new(Bytes::from_static(body))).unwrap()
}

/// One call through a clone of `service`, the answer's body read.
async fn send<S, B>(service: &S, request: Request<Full<Bytes>>)
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = service.clone().oneshot(request).await.unwrap();
    debug_assert_eq!(response.status(), 200);
    black_box(response.into_body().collect().await.unwrap());
}

/// `n` `initialize` calls through `service`: `n` MCP sessions bound.
fn open<S, B>(runtime: &tokio::runtime::Runtime, service: &S, n: usize)
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    runtime.block_on(async {
        for _ in 0..n {
            send(service, request(INITIALIZE, None)).await;
        }
    });
}

/// The bytes a binding keeps live, and the mean time of the calls that bound them.
fn memory_per_binding(runtime: &tokio::runtime::Runtime) {
    let signer = layer(Some(LIVE_SESSIONS));
    let service = signer.layer(server(Arc::default()));
    // Lazy statics, the runtime's buffers: allocated before the count starts.
    let warm_up = layer(Some(10)).layer(server(Arc::default()));
    open(runtime, &warm_up, 100);
    let before = LIVE.load(Ordering::SeqCst);
    let start = Instant::now();
    open(runtime, &service, LIVE_SESSIONS);
    let elapsed = start.elapsed();
    let after = LIVE.load(Ordering::SeqCst);
    let layer_debug = format!("{signer:?}");
    assert!(
        layer_debug.contains(&format!("bound_mcp_sessions: {LIVE_SESSIONS}")),
        "{layer_debug}"
    );
    println!(
        "memory per binding at {LIVE_SESSIONS} live MCP sessions: {:.0} bytes ({:.1} MB in all); \
         {:.2} µs per initialize while filling",
        (after - before) as f64 / LIVE_SESSIONS as f64,
        (after - before) as f64 / 1e6,
        elapsed.as_secs_f64() * 1e6 / LIVE_SESSIONS as f64,
    );
}

fn runtime_sessions(c: &mut Criterion) {
    let runtime = current_thread_runtime();
    memory_per_binding(&runtime);

    // Full layers: every bind forgets the least recently used.
    let at_100k = layer(Some(LIVE_SESSIONS)).layer(server(Arc::default()));
    open(&runtime, &at_100k, LIVE_SESSIONS);
    let at_1k = layer(Some(1_000)).layer(server(Arc::default()));
    open(&runtime, &at_1k, 1_000);
    let per_layer = layer(None).layer(server(Arc::default()));

    // A layer holding 100,000 MCP sessions, and their ids, for the lookups.
    let handed_out = Arc::new(AtomicU64::new(0));
    let looked_up = layer(Some(LIVE_SESSIONS)).layer(server(handed_out.clone()));
    open(&runtime, &looked_up, LIVE_SESSIONS);
    assert_eq!(handed_out.load(Ordering::SeqCst), LIVE_SESSIONS as u64);
    let ids: Vec<HeaderValue> = (0..LIVE_SESSIONS as u64).map(mcp_session_id).collect();

    let mut group = c.benchmark_group("runtime_sessions");
    group.bench_function("bind/at_100000", |b| {
        b.to_async(&runtime)
            .iter(|| send(&at_100k, request(INITIALIZE, None)))
    });
    group.bench_function("bind/at_1000", |b| {
        b.to_async(&runtime)
            .iter(|| send(&at_1k, request(INITIALIZE, None)))
    });
    group.bench_function("bind/per_layer", |b| {
        b.to_async(&runtime)
            .iter(|| send(&per_layer, request(INITIALIZE, None)))
    });
    let mut next = 0;
    group.bench_function("lookup/at_100000", |b| {
        b.to_async(&runtime).iter(|| {
            let id = &ids[next];
            next = (next + 1) % ids.len();
            send(&looked_up, request(PING, Some(id)))
        })
    });
    group.bench_function("lookup/per_layer", |b| {
        b.to_async(&runtime)
            .iter(|| send(&per_layer, request(PING, Some(&ids[0]))))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = runtime_sessions
}
criterion_main!(benches);
