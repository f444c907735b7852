//! Heap allocations per call: our full stack over an in-memory service against the official
//! SDK's `invoke_agent_runtime()` over an in-memory HTTP client — the very setups of
//! `benches/sdk.rs` (both from `benches/support/mod.rs`), same inputs, the answer read to bytes
//! on both sides.
//!
//! A plain `main` (`harness = false`) with a counting global allocator. Each path is warmed up
//! (lazy statics, the SDK's identity cache, the tokio runtime), then run `CALLS` times; the table
//! gives the mean allocations and bytes per call. A `realloc` counts as one allocation of its new
//! size. A few reference rows show where our allocations come from: the in-memory service alone,
//! each layer alone, and a raw `aws-sigv4` signature of the same wire request.
//!
//! Goal (from the issue): ours fewer than half the SDK's allocations. Nothing is asserted.
//!
//! Run: `cargo bench --bench allocations` (criterion's arguments are ignored).

use std::future::Future;
use std::hint::black_box;

use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use tower::Layer;

#[path = "support/mod.rs"]
mod support;

use support::{
    REGION, allocations_per_call, answer, call, credentials, current_thread_runtime, fixed_time,
    inner, our_stack, raw_signed, retry_layers, sdk_call, sdk_client, signer, tools_call,
};

#[global_allocator]
static ALLOCATOR: support::Counting = support::Counting;

const WARM_UP: u64 = 200;
const CALLS: u64 = 1000;

/// Mean (allocations, bytes) per call of `call`, after a warm-up.
fn measure<F, Fut>(runtime: &tokio::runtime::Runtime, mut call: F) -> (f64, f64)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Bytes>,
{
    runtime.block_on(async {
        for _ in 0..WARM_UP {
            black_box(call().await);
        }
    });
    allocations_per_call(runtime, CALLS, call)
}

fn main() {
    let runtime = current_thread_runtime();
    let body = tools_call(1024);
    let answer = answer(300);
    let client = sdk_client(answer.clone());
    let stack = our_stack(answer.clone());
    let bare = inner(answer.clone());
    let guard = ReplayGuardLayer::new().layer(inner(answer.clone()));
    let throttle = ThrottleRetryLayer::new().layer(inner(answer.clone()));
    let session_busy = SessionBusyRetryLayer::new().layer(inner(answer.clone()));
    let sigv4 = signer().layer(inner(answer.clone()));
    let unsigned_stack = retry_layers().service(inner(answer.clone()));
    let identity: Identity = credentials().into();
    let uri = signer().target().invocation_uri();

    let sdk_row = measure(&runtime, || sdk_call(&client, &body));
    let ours_row = measure(&runtime, || call(&stack, &body));
    let rows = [
        ("SDK invoke_agent_runtime()", sdk_row),
        ("ours: guard > throttle > busy > sigv4", ours_row),
        (
            "  in-memory service alone",
            measure(&runtime, || call(&bare, &body)),
        ),
        ("  guard alone", measure(&runtime, || call(&guard, &body))),
        (
            "  throttle alone",
            measure(&runtime, || call(&throttle, &body)),
        ),
        (
            "  session busy alone",
            measure(&runtime, || call(&session_busy, &body)),
        ),
        ("  sigv4 alone", measure(&runtime, || call(&sigv4, &body))),
        (
            "  guard > throttle > busy (unsigned)",
            measure(&runtime, || call(&unsigned_stack, &body)),
        ),
        (
            "  raw aws-sigv4 sign of the wire request",
            measure(&runtime, || {
                let host = uri.authority().unwrap().as_str();
                let request = raw_signed(&uri, host, REGION, fixed_time(), &body, &identity);
                async move {
                    black_box(request);
                    Bytes::new()
                }
            }),
        ),
    ];

    println!(
        "allocations per call (mean of {CALLS} calls after {WARM_UP} warm-up; 1 KiB tools/call, 300-byte JSON answer)"
    );
    println!("{:<42} {:>12} {:>12}", "path", "allocations", "bytes");
    for (name, (count, bytes)) in rows {
        println!("{name:<42} {count:>12.1} {bytes:>12.0}");
    }
    println!(
        "ratio ours / SDK: allocations {:.3}, bytes {:.3}",
        ours_row.0 / sdk_row.0,
        ours_row.1 / sdk_row.1
    );
}
