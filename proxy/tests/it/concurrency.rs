//! Sixteen `tools/call`s of one MCP session at once through the proxy, as a host built on rmcp
//! 3.2 or later sends them (up to 16 POSTs at once, by default), against the emulator with a
//! cold start, throttles and session-busy refusals: over stdio (the lines written at once) and
//! over `--listen` (sixteen POSTs at once). Each call is answered once and runs once, and every
//! request goes to one runtime session, which starts one microVM. In real time: the cold start
//! is a short one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig, Fault, RetryAfter};
use serde_json::{Value, json};

use crate::common;
use common::*;

const CALLS: u64 = 16;
/// The calls' ids: 100 to 115.
const FIRST_ID: u64 = 100;
/// A short cold start, for a test in real time.
const PROVISIONING: Duration = Duration::from_millis(800);
/// The faults queued for the calls, fewer than the calls: each call meets at most one of them.
const THROTTLES: u64 = 4;
const BUSY: u64 = 4;

/// A cold start of `provisioning`, [`THROTTLES`] throttles and [`BUSY`] session-busy refusals
/// queued for the calls. A throttle's `Retry-After: 3` is longer than session busy's longest
/// wait (2 s): by the time a throttled call comes back, the other calls have had attempts
/// answered since, which took the faults left.
async fn emulator(provisioning: Duration) -> Emulator {
    let emulator = start_emulator(EmulatorConfig::default().provisioning(provisioning)).await;
    for _ in 0..THROTTLES {
        emulator.push_fault(Fault::Throttle {
            retry_after: Some(RetryAfter::Seconds(3)),
        });
    }
    for _ in 0..BUSY {
        emulator.push_fault(Fault::Busy);
    }
    emulator
}

/// Call `i`: `add(i, 1000)`, id `FIRST_ID + i`, of 2025-06-18 or, when `modern`, of 2026-07-28.
fn add_call(i: u64, is_modern: bool) -> Value {
    let (id, arguments) = (FIRST_ID + i, json!({"a": i, "b": 1000}));
    if is_modern {
        modern(
            id,
            "tools/call",
            json!({"name": "add", "arguments": arguments}),
            false,
        )
    } else {
        call(id, "add", arguments)
    }
}

/// The next sixteen lines of `proxy`, each call answered once ([`each_answered_once`]); then
/// nothing more, and the proxy exits 0.
async fn every_call_answered_once(mut proxy: Proxy) {
    let mut answers = Vec::new();
    for _ in 0..CALLS {
        answers.push(proxy.next().await);
    }
    each_answered_once(&answers);
    proxy.closed_cleanly("every call was answered").await;
}

/// The sixteen answers, in any order: each id answered once, with its own sum.
fn each_answered_once(answers: &[Value]) {
    let sums: BTreeMap<u64, &str> = answers
        .iter()
        .map(|answer| (answer["id"].as_u64().expect("an id"), text_of(answer)))
        .collect();
    assert_eq!(
        sums.len(),
        answers.len(),
        "an id answered twice: {answers:?}"
    );
    let expected: BTreeMap<u64, String> = (0..CALLS)
        .map(|i| (FIRST_ID + i, (i + 1000).to_string()))
        .collect();
    let sums: BTreeMap<u64, String> = sums.into_iter().map(|(k, v)| (k, v.into())).collect();
    assert_eq!(sums, expected);
}

/// What the emulator saw: each call ran once; every queued throttle and busy refusal was met,
/// besides the cold start's; every request went to one runtime session, which started one
/// microVM; the calls carried `mcp_sessions` MCP sessions.
fn ran_once_in_one_runtime_session(audit: &Audit, mcp_sessions: usize) {
    let calls: Vec<(&str, u64)> = (0..CALLS).map(|i| ("add", FIRST_ID + i)).collect();
    ran_once_each(audit, &calls);
    assert_eq!(audit.throttled, THROTTLES);
    assert!(
        audit.busy_refusals > BUSY,
        "the cold start's refusals and the queued ones: {}",
        audit.busy_refusals
    );
    let runtime_sessions: BTreeSet<Option<&str>> = audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.as_deref())
        .collect();
    assert_eq!(runtime_sessions.len(), 1, "{runtime_sessions:?}");
    assert!(runtime_sessions.iter().all(Option::is_some));
    assert_eq!(audit.sessions_started, 1);
    assert_eq!(audit.microvms_started, 1);
    assert_eq!(audit.signature_failures, 0);
    let carried: BTreeSet<Option<&str>> = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .map(|r| r.mcp_session_id.as_deref())
        .collect();
    assert_eq!(carried.len(), 1, "{carried:?}");
    assert_eq!(
        carried.iter().filter(|s| s.is_some()).count(),
        mcp_sessions,
        "{carried:?}"
    );
}

/// Where the first `tools/call` the emulator received is, after every `method` before it.
fn calls_came_after(audit: &Audit, method: &str) {
    let at = |wanted: &str| {
        audit
            .received
            .iter()
            .position(|r| r.method.as_deref() == Some(wanted))
    };
    let last_of = audit
        .received
        .iter()
        .rposition(|r| r.method.as_deref() == Some(method))
        .unwrap_or_else(|| panic!("no {method}"));
    let first_call = at("tools/call").expect("a call");
    assert!(
        last_of < first_call,
        "{method} at {last_of}, a call at {first_call}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_sixteen_calls_written_at_once_after_initialize_run_once_each() {
    let emulator = emulator(PROVISIONING).await;
    let mut proxy = Proxy::start(&emulator, &[]);
    // Everything at once: `initialize` (which meets the cold start), `initialized`, the calls.
    proxy.send(&initialize(1));
    proxy.send(&initialized());
    for i in 0..CALLS {
        proxy.send(&add_call(i, false));
    }

    // Nothing overtakes `initialize`: its answer comes first.
    let initialized = proxy.next().await;
    assert_eq!(initialized["id"], 1, "{initialized}");
    assert_eq!(initialized["result"]["protocolVersion"], "2025-06-18");
    every_call_answered_once(proxy).await;

    let audit = emulator.audit();
    ran_once_in_one_runtime_session(&audit, 1);
    calls_came_after(&audit, "initialize");
    calls_came_after(&audit, "notifications/initialized");
    assert_eq!(audit.mcp_sessions_started, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_sixteen_calls_of_2026_07_28_meet_the_cold_start_together_and_run_once_each() {
    // Long enough for every call's first attempt to arrive while it provisions.
    let emulator = emulator(Duration::from_secs(2)).await;
    let mut proxy = Proxy::start(&emulator, &[]);
    // No handshake in this revision: the calls are the first requests, all refused while the
    // runtime session's microVM provisions.
    for i in 0..CALLS {
        proxy.send(&add_call(i, true));
    }
    every_call_answered_once(proxy).await;

    let audit = emulator.audit();
    ran_once_in_one_runtime_session(&audit, 0);
    assert_eq!(audit.mcp_sessions_started, 0);
    // Each call's first attempt was refused: sixteen at least, and the queued ones.
    assert!(
        audit.busy_refusals >= CALLS + BUSY,
        "{}",
        audit.busy_refusals
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_sixteen_posts_of_one_mcp_session_at_once_run_once_each() {
    let emulator = emulator(PROVISIONING).await;
    let listening = Listening::start(&emulator, &[]).await;
    // `initialize` meets the cold start.
    let client = listening.client().await;
    let posts = (0..CALLS).map(|i| {
        let client = client.clone();
        async move { client.post(&add_call(i, false)).await }
    });
    let answers: Vec<Value> = futures_join_all(posts)
        .await
        .into_iter()
        .map(|answer| {
            assert_eq!(answer.status, 200, "{answer:?}");
            answer.message()
        })
        .collect();
    each_answered_once(&answers);
    listening.terminated_cleanly().await;

    let audit = emulator.audit();
    ran_once_in_one_runtime_session(&audit, 1);
    calls_came_after(&audit, "initialize");
    calls_came_after(&audit, "notifications/initialized");
    assert_eq!(audit.mcp_sessions_started, 1);
}

/// Every future of `futures`, run at once on the test's runtime: their outputs, in order.
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.expect("a POST's task"));
    }
    outputs
}
