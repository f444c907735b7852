//! Load: 10,000 MCP calls, 64 in flight, through the full stack over hyper-util against the
//! emulator on loopback, with random faults. Bounded in count and time; stops by itself.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentcore_tower::{AttemptRecord, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, FaultRates};
use bytes::Bytes;
use common::*;
use futures_util::StreamExt;
use http::Request;
use http_body_util::Full;
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

const CALLS: u64 = 10_000;
const IN_FLIGHT: usize = 64;
const DEADLINE: Duration = Duration::from_secs(240);

/// How one call ended.
struct Ended {
    declared: bool,
    delivered: bool,
    answered: bool,
    attempts: u64,
}

#[derive(Default, Debug)]
struct Tally {
    answered: u64,
    errors: u64,
    attempts: u64,
    declared_failed: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_under_faults() {
    let emulator = Emulator::start(EmulatorConfig::default().fault_rates(FaultRates {
        busy: 0.20,
        throttle: 0.10,
        drop_after_run: 0.02,
        server_error: 0.01,
        seed: 7,
    }))
    .await
    .unwrap();
    let signer = emulator.signer().build().unwrap();
    // Short waits keep the run brief; larger caps make "every declared call is delivered" hold
    // with overwhelming probability at these fault rates (about a third of the attempts fail):
    // the caps are the call's, over every layer, so each layer gets the same 16.
    let stack = ServiceBuilder::new()
        .layer(
            // The layers' correctness under sustained faults, not the retry budget: a third of the
            // attempts failing for the whole run is the storm a budget exists to damp
            // (tests/layers/budget.rs measures that), so the calls here get none.
            ReplayGuardLayer::new()
                .idempotent_tools(["add"])
                .no_retry_budget()
                .max_attempts(16)
                .base_delay(Duration::from_millis(2)),
        )
        .layer(
            ThrottleRetryLayer::new()
                .max_attempts(16)
                .base_delay(Duration::from_millis(2)),
        )
        .layer(
            SessionBusyRetryLayer::new()
                .max_attempts(16)
                .base_delay(Duration::from_millis(2)),
        )
        .layer(signer)
        .service(http_client());

    let counters_started = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let run = futures_util::stream::iter(0..CALLS)
        .map(|id| {
            let stack = stack.clone();
            let counters_started = counters_started.clone();
            async move {
                // Every third call is the undeclared, non-idempotent counter; the rest `add`.
                let declared = id % 3 != 0;
                let (name, arguments) = if declared {
                    ("add", json!({"a": id, "b": 1}))
                } else {
                    counters_started.fetch_add(1, Ordering::Relaxed);
                    ("counter", json!({}))
                };
                let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
                let request = Request::post("http://agentcore.invalid/mcp")
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap();
                match stack.oneshot(request).await {
                    Ok(response) => {
                        let attempts = AttemptRecord::of_response(&response).unwrap().len() as u64;
                        let ok = response.status() == 200;
                        let (bytes, _) = read_all(response.into_body()).await;
                        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let delivered = ok && answer.get("result").is_some();
                        Ended { declared, delivered, answered: true, attempts }
                    }
                    Err(error) => Ended {
                        declared,
                        delivered: false,
                        answered: false,
                        attempts: error.record().map_or(0, |r| r.len() as u64),
                    },
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>();
    let results = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the load run ended within its deadline");
    let elapsed = started.elapsed();

    let mut t = Tally::default();
    for ended in &results {
        t.attempts += ended.attempts;
        if ended.answered {
            t.answered += 1;
        } else {
            t.errors += 1;
        }
        if ended.declared && !ended.delivered {
            t.declared_failed += 1;
        }
    }
    let audit = emulator.audit();
    let twice: Vec<_> = audit
        .executions_by_id
        .iter()
        .filter(|((tool, _), n)| tool == "counter" && **n > 1)
        .collect();
    println!(
        "load: {CALLS} calls, {IN_FLIGHT} in flight, {elapsed:?}: {} answered, {} errors delivered, {} attempts recorded; \
         emulator saw {} requests ({} session-busy, {} throttled, {} dropped after running, {} 500s); \
         counter ran {} times for {} calls; declared calls not delivered: {}",
        t.answered,
        t.errors,
        t.attempts,
        audit.requests,
        audit.busy_refusals,
        audit.throttled,
        audit.dropped,
        audit.server_errors,
        audit.executions_of("counter"),
        counters_started.load(Ordering::Relaxed),
        t.declared_failed,
    );
    assert_eq!(results.len() as u64, CALLS, "every call ended");
    assert!(
        twice.is_empty(),
        "undeclared tools/call executed twice: {twice:?}"
    );
    assert_eq!(t.declared_failed, 0, "every declared call was delivered");
    assert_eq!(
        t.attempts, audit.requests,
        "the attempt records add up to what the emulator saw"
    );
    assert_eq!(audit.signature_failures, 0);
    assert!(audit.executions_of("counter") <= counters_started.load(Ordering::Relaxed));
}
