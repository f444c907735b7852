//! The official SDK's `invoke_agent_runtime()` against our full stack, both over an in-memory
//! HTTP client answering the same 300-byte JSON-RPC answer.
//!
//! One criterion group, `sdk`:
//! * `sdk` — `aws-sdk-bedrockagentcore`'s `invoke_agent_runtime()` (client built once: static
//!   credentials with a session token, a fixed time source, retries off, the SDK's other
//!   defaults), its HTTP client an in-memory one (`support::InMemoryHttpClient`); the answer's
//!   `ByteStream` collected to bytes.
//! * `ours` — guard → throttle → session busy → SigV4, over an in-memory service answering the
//!   same; an MCP POST with the same inputs (1 KiB `tools/call` body, content type, accept, MCP
//!   session id, protocol version, runtime session id); the answer body read to bytes.
//!
//! The SDK is given `mcp-method`/`mcp-name` explicitly (it never reads the payload); our layer
//! derives them from the body, so both put the same headers on the wire.
//!
//! Goal (from the issue): `ours` at most 0.33 × `sdk`. Nothing is asserted about time.
//!
//! After the group, under `cargo bench`, an interleaved A/B check prints the median ratio of
//! `ours` to `sdk` over 21 rounds of 2,000 calls each, alternating: a ratio robust to the
//! machine's speed drifting between criterion's two measurements; then the same with a 64 KiB
//! body (200 calls a round). `NO_AB=1` skips them.
//!
//! The two setups live in `benches/support/mod.rs`, shared with `benches/allocations.rs`.
//!
//! Run: `cargo bench --bench sdk`.

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/mod.rs"]
mod support;

use support::{
    answer, bench_calls, call, current_thread_runtime, interleaved, interleaving_wanted, our_stack,
    print_median, sdk_call, sdk_client, time_ratio, timed, tools_call,
};

fn sdk(c: &mut Criterion) {
    let runtime = current_thread_runtime();
    let body = tools_call(1024);
    let answer = answer(300);
    let client = sdk_client(answer.clone());
    let stack = our_stack(answer.clone());
    runtime.block_on(async {
        assert_eq!(sdk_call(&client, &body).await, answer);
        assert_eq!(call(&stack, &body).await, answer);
    });

    let mut group = c.benchmark_group("sdk");
    bench_calls(&mut group, "sdk", &runtime, || sdk_call(&client, &body));
    bench_calls(&mut group, "ours", &runtime, || call(&stack, &body));
    group.finish();

    if interleaving_wanted() {
        let ratios = interleaved(
            21,
            || timed(&runtime, 2000, || call(&stack, &body)),
            || timed(&runtime, 2000, || sdk_call(&client, &body)),
            time_ratio,
        );
        print_median("sdk: interleaved A/B, time per call ours / sdk", &ratios);
        // The same with a 64 KiB body: what each costs per byte (hashing it, reading it
        // for the routing headers, scanning the answer) against what each costs per call.
        let large = tools_call(64 * 1024);
        runtime.block_on(async {
            assert_eq!(sdk_call(&client, &large).await, answer);
            assert_eq!(call(&stack, &large).await, answer);
        });
        let ratios = interleaved(
            21,
            || timed(&runtime, 200, || call(&stack, &large)),
            || timed(&runtime, 200, || sdk_call(&client, &large)),
            time_ratio,
        );
        print_median(
            "sdk 64KiB: interleaved A/B, time per call ours / sdk",
            &ratios,
        );
    }
}

criterion_group!(benches, sdk);
criterion_main!(benches);
