//! Memory under large answers: a 64 MiB streamed JSON answer and a long SSE answer pass through
//! the full stack while the extra memory stays within the session-busy peek bound plus a
//! constant. A counting global allocator measures it (this test binary only; the library itself
//! forbids unsafe code).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use bytes::Bytes;
use common::*;
use http::Request;
use http_body::Body;
use http_body_util::Full;
use serde_json::json;
use tower::{ServiceBuilder, ServiceExt};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PEEK_BOUND: usize = 4096;
/// What may be allocated besides the peek: hyper's read and write buffers on both ends of the
/// loopback connection (the emulator runs in this process), a request's own structures.
const CONSTANT: usize = 256 * 1024;
const SIZE: u64 = 64 * 1024 * 1024;

/// Streams a `blob` answer of SIZE bytes through the full stack, reading frame by frame
/// without keeping them, and returns (bytes read, peak extra memory).
async fn stream_blob(sse: bool) -> (u64, usize) {
    let emulator = Emulator::start(EmulatorConfig::default().sse(sse))
        .await
        .unwrap();
    let signer = emulator.signer().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new().peek_limit(PEEK_BOUND))
        .layer(signer)
        .service(http_client());
    // Warm up: connection pool, lazy statics, the tracing and TLS-free client paths.
    let warm = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "blob", "arguments": {"bytes": 1_000_000}}});
    drain(stack.clone().oneshot(post(warm)).await.unwrap().into_body()).await;

    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "blob", "arguments": {"bytes": SIZE}}});
    let request = post(call);
    let baseline = CURRENT.load(Ordering::SeqCst);
    PEAK.store(baseline, Ordering::SeqCst);
    let response = stack.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let read = drain(response.into_body()).await;
    let peak = PEAK.load(Ordering::SeqCst).saturating_sub(baseline);
    (read, peak)
}

fn post(body: serde_json::Value) -> Request<Full<Bytes>> {
    Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn drain<B>(mut body: B) -> u64
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let mut n = 0;
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Ok(data) = frame.expect("body").into_data() {
            n += data.len() as u64;
        }
    }
    n
}

#[tokio::test(flavor = "current_thread")]
async fn a_64_mib_json_answer_and_a_long_sse_answer_stream_in_bounded_memory() {
    for sse in [false, true] {
        let (read, peak) = stream_blob(sse).await;
        println!(
            "{}: read {read} bytes; peak extra memory {peak} bytes (bound {})",
            if sse { "SSE" } else { "JSON" },
            PEEK_BOUND + CONSTANT
        );
        assert!(read > SIZE, "the whole answer arrived");
        assert!(
            peak <= PEEK_BOUND + CONSTANT,
            "peak extra memory {peak} bytes"
        );
    }
}
