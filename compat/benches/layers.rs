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

use std::time::Duration;

use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use criterion::{Criterion, criterion_group, criterion_main};
use tower::ServiceBuilder;

#[path = "support/mod.rs"]
mod support;

use support::{
    answer, bench_calls, call, current_thread_runtime, inner, interleaved, interleaving_wanted,
    print_median, retry_layers, timed, tools_call,
};

fn layers(c: &mut Criterion) {
    let runtime = current_thread_runtime();
    let body = tools_call(1024);
    let answer = answer(1024);

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
    let stack = retry_layers().service(inner(answer.clone()));

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
    bench_calls(&mut group, "bare", &runtime, || call(&bare, &body));
    bench_calls(&mut group, "throttle", &runtime, || call(&throttle, &body));
    bench_calls(&mut group, "session_busy", &runtime, || {
        call(&session_busy, &body)
    });
    bench_calls(&mut group, "session_busy_no_peek", &runtime, || {
        call(&session_busy_no_peek, &body)
    });
    bench_calls(&mut group, "guard", &runtime, || call(&guard, &body));
    bench_calls(&mut group, "stack", &runtime, || call(&stack, &body));
    group.finish();

    if interleaving_wanted() {
        const CALLS: u32 = 20_000;
        let ns_per_call_more =
            |a: Duration, b: Duration| (a.as_nanos() as f64 - b.as_nanos() as f64) / CALLS as f64;
        let added = interleaved(
            21,
            || timed(&runtime, CALLS, || call(&stack, &body)),
            || timed(&runtime, CALLS, || call(&bare, &body)),
            ns_per_call_more,
        );
        print_median("layers: interleaved A/B, ns per call stack - bare", &added);
        let peek = interleaved(
            41,
            || timed(&runtime, CALLS, || call(&session_busy, &body)),
            || timed(&runtime, CALLS, || call(&session_busy_no_peek, &body)),
            ns_per_call_more,
        );
        print_median(
            "layers: interleaved A/B, ns per call session_busy - session_busy_no_peek (the peek)",
            &peek,
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = layers
}
criterion_main!(benches);
