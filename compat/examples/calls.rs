//! Runs N calls of one of the benches' cases, one after the other, and nothing else: for
//! counting what a call costs under a deterministic tool, where the benches' timings are noisy
//! (shared 2-core machines drift by tens of percent between runs).
//!
//! The cases are the benches' own, built by `benches/support`:
//! * `bare` — the in-memory service alone (a 1 KiB JSON-RPC answer);
//! * `empty` — the in-memory service alone, answering an empty 200 (the `signer` case's);
//! * `layers` — guard → throttle → session busy over it (`layers/stack`);
//! * `recommended` — the same three as `RecommendedLayers` stacks them (the upper two keep the
//!   answer the lowest read ahead), with no signer;
//! * `signer` — `SigV4InvokeLayer` over a service answering an empty 200 (`signing/ours`);
//! * `raw` — the same wire request built and signed with `aws_sigv4` (`signing/raw`);
//! * `stack` — the full stack over the in-memory service (`sdk/ours`).
//!
//! The request body is a 1 KiB `tools/call`, or `BODY_KIB` KiB when a third argument is given.
//!
//! Instructions per call, as the difference of two runs so that start-up cancels out:
//!
//! ```text
//! cargo build --release --manifest-path compat/Cargo.toml --example calls
//! for n in 200 1200; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/calls.$n \
//!     compat/target/release/examples/calls layers $n
//! done
//! # (Ir of 1200 - Ir of 200) / 1000; callgrind_annotate /tmp/calls.1200 for where it goes
//! ```
//!
//! Under valgrind, SHA-256 runs without the CPU's SHA instructions, so the signing cases'
//! absolute counts are not their native ones; differences between ours and raw are.

use std::hint::black_box;

use bytes::Bytes;
use tower::Layer;

#[path = "../benches/support/mod.rs"]
mod support;

use support::{
    REGION, answer, call, credentials, current_thread_runtime, fixed_time, inner, our_stack,
    raw_signed, retry_layers, signer, tools_call,
};

/// Where the signer sends the benches' runtime's invocations.
const URI: &str = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fbench_agent-AbCdEf1234/invocations";

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let calls: u32 = match args.next().map(|n| n.parse()) {
        Some(Ok(n)) => n,
        None => 1_000,
        Some(Err(_)) => usage(),
    };
    let kib: usize = match args.next().map(|n| n.parse()) {
        Some(Ok(n)) if n > 0 => n,
        None => 1,
        Some(_) => usage(),
    };
    let runtime = current_thread_runtime();
    let body = tools_call(kib * 1024);
    let answer = answer(1024);
    macro_rules! run {
        ($service:expr) => {{
            let service = $service;
            runtime.block_on(async {
                for _ in 0..calls {
                    black_box(call(&service, &body).await);
                }
            })
        }};
    }
    match case.as_str() {
        "bare" => run!(inner(answer)),
        "empty" => run!(inner(Bytes::new())),
        "layers" => run!(retry_layers().service(inner(answer))),
        "recommended" => run!(
            agentcore_tower::RecommendedLayers::new(tower::layer::util::Identity::new())
                .layer(inner(answer))
        ),
        "signer" => run!(signer().layer(inner(Bytes::new()))),
        "stack" => run!(our_stack(answer)),
        "raw" => {
            let identity = credentials().into();
            let uri = URI.parse().expect("a valid URI");
            let host = "bedrock-agentcore.us-east-1.amazonaws.com";
            for _ in 0..calls {
                black_box(raw_signed(
                    &uri,
                    host,
                    REGION,
                    fixed_time(),
                    &body,
                    &identity,
                ));
            }
        }
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: calls bare|empty|layers|recommended|signer|raw|stack [CALLS [BODY_KIB]]");
    std::process::exit(2)
}
