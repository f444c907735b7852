//! The retry budget: exhaustion recorded, refilled by successes, cold starts still waited out,
//! one budget shared by two stacks — and a fleet of 1,000 clients meeting a runtime that
//! throttles half its requests for 30 s, with and without the budget (deterministic: a paused
//! clock, in-process, seeded).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::body::{ObservedBody, PeekedBody};
use agentcore_tower::{
    AttemptRecord, RecommendedLayers, ReplayGuardLayer, RetryBudget, SessionBusyRetryLayer,
    ThrottleRetryLayer, record::Verdict,
};
use bytes::Bytes;
use common::*;
use http::{Request, Response};
use http_body_util::Full;
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};

const BUSY: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;

fn throttled() -> Step {
    Step::Respond(response(429, &[("retry-after", "0")], b"{}"))
}

fn ok() -> Step {
    Step::Respond(response(200, &[], b"{}"))
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_budget_delivers_the_refusal_and_says_so() {
    // 12 tokens, 5 a throttled re-send: two re-sends, then the budget is out.
    let budget = RetryBudget::new().capacity(12);
    let inner = Scripted::with_fallback([], throttled);
    let shared = inner.shared();
    let stack = ThrottleRetryLayer::new()
        .max_attempts(5)
        .retry_budget(budget.clone())
        .layer(inner);
    let response = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 3);
    let record = AttemptRecord::of_response(&response).unwrap();
    assert_eq!(
        record.attempts()[2].decisions()[0].verdict(),
        &Verdict::BudgetExhausted {
            cause: "HTTP 429",
            cost: 5,
            left: 2
        }
    );
    assert!(
        record.to_string().contains(
            "delivered (HTTP 429, but the retry budget is exhausted: 2 tokens left, 5 needed)"
        ),
        "{record}"
    );
    let counters = budget.counters();
    assert_eq!(
        (
            counters.tokens,
            counters.resent_throttled,
            counters.budget_refusals
        ),
        (2, 2, 1)
    );
    assert_eq!((counters.calls, counters.attempts), (1, 3));
}

#[tokio::test(start_paused = true)]
async fn successes_refill_the_budget() {
    let budget = RetryBudget::new().capacity(10).success_refill(2);
    let inner = Scripted::with_fallback([throttled(), throttled()], ok);
    let stack = ThrottleRetryLayer::new()
        .retry_budget(budget.clone())
        .layer(inner);
    stack
        .clone()
        .oneshot(json_request(TOOLS_CALL))
        .await
        .unwrap();
    // Two re-sends (10 tokens), then a success (+2).
    assert_eq!(budget.counters().tokens, 2);
    for _ in 0..10 {
        stack
            .clone()
            .oneshot(json_request(TOOLS_CALL))
            .await
            .unwrap();
    }
    assert_eq!(budget.counters().tokens, 10, "refilled, up to the capacity");
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_is_waited_out_with_an_empty_budget() {
    // The bucket is empty, yet session busy (the provisioning of a new session) costs nothing.
    let budget = RetryBudget::new().capacity(0);
    let busy = || Step::Respond(response(200, &[("content-type", "application/json")], BUSY));
    let inner = Scripted::with_fallback([busy(), busy(), busy()], ok);
    let shared = inner.shared();
    let stack = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new().retry_budget(budget.clone()))
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .service(inner);
    let response = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(shared.calls(), 4);
    assert_eq!(budget.counters().resent_session_busy, 3);
}

#[tokio::test(start_paused = true)]
async fn one_budget_shared_by_two_stacks() {
    let budget = RetryBudget::new().capacity(5);
    let stack = |inner| {
        ServiceBuilder::new()
            .layer(ReplayGuardLayer::new().retry_budget(budget.clone()))
            .layer(ThrottleRetryLayer::new())
            .service(inner)
    };
    let a = Scripted::with_fallback([throttled()], ok);
    let b = Scripted::with_fallback([throttled()], ok);
    let b_calls = b.shared();
    stack(a).oneshot(json_request(TOOLS_CALL)).await.unwrap();
    // Stack A's re-send took the 5 tokens (its success put 1 back): B's throttled call is not
    // sent again.
    let response = stack(b).oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(b_calls.calls(), 1);
    assert_eq!(budget.counters().budget_refusals, 1);
}

#[tokio::test(start_paused = true)]
async fn the_recommended_layers_share_one_budget_and_nest_one_read_ahead() {
    let busy = || Step::Respond(response(200, &[("content-type", "application/json")], BUSY));
    let shared = RetryBudget::new();
    let inner = Scripted::with_fallback([throttled(), busy()], ok);
    let stack = RecommendedLayers::new(tower::layer::util::Identity::new())
        .retry_budget(shared.clone())
        .layer(inner);
    // The session-busy layer's wrapper, kept by the two above it; the guard's observer.
    let response: Response<ObservedBody<PeekedBody<TestBody>>> =
        stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    let counters = shared.counters();
    assert_eq!(
        (
            counters.calls,
            counters.resent_throttled,
            counters.resent_session_busy
        ),
        (1, 1, 1),
        "both layers' re-sends drawn from the one budget"
    );

    // A guard handed in with a budget of its own keeps it; the shared one is not touched.
    let own = RetryBudget::new();
    let shared = RetryBudget::new();
    let inner = Scripted::with_fallback([throttled()], ok);
    let stack = RecommendedLayers::new(tower::layer::util::Identity::new())
        .guard(ReplayGuardLayer::new().retry_budget(own.clone()))
        .retry_budget(shared.clone())
        .layer(inner);
    stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(own.counters().resent_throttled, 1);
    assert_eq!(shared.counters().calls, 0);
}

/// What one run of the fleet showed.
#[derive(Debug)]
struct Figures {
    amplification_in_outage: f64,
    peak_requests_per_second: usize,
    recovered_after: Duration,
    succeeded: f64,
    failed_after_recovery: usize,
}

const CLIENTS: u64 = 1000;
const OUTAGE: Duration = Duration::from_secs(30);
const RUN: Duration = Duration::from_secs(60);
const EVERY: Duration = Duration::from_secs(2);

/// Whether the runtime throttles this attempt: half of them during the outage, decided by a
/// hash of who asks and when (so every run decides the same, whatever the scheduling).
fn throttles(client: u64, call: u64, attempt: u32, at: Duration) -> bool {
    if at >= OUTAGE {
        return false;
    }
    let mut x = client
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(call.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add(u64::from(attempt).wrapping_mul(0x94d0_49bb_1331_11eb));
    x ^= x >> 31;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x & 1 == 0
}

async fn fleet(with_budget: bool) -> Figures {
    let start = Instant::now();
    let requests = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let attempts = Arc::new(Mutex::new(
        std::collections::HashMap::<(u64, u64), u32>::new(),
    ));
    let runtime = tower::service_fn({
        let (requests, attempts) = (requests.clone(), attempts.clone());
        move |request: Request<Full<Bytes>>| {
            let at = start.elapsed();
            requests.lock().unwrap().push(at);
            let id =
                |name: &str| -> u64 { request.headers()[name].to_str().unwrap().parse().unwrap() };
            let (client, call) = (id("x-client"), id("x-call"));
            let attempt = {
                let mut attempts = attempts.lock().unwrap();
                let n = attempts.entry((client, call)).or_insert(0);
                *n += 1;
                *n
            };
            let answer = if throttles(client, call, attempt, at) {
                response(429, &[], b"{}")
            } else {
                response(200, &[], b"{}")
            };
            async move { Ok::<Response<TestBody>, BoxError>(answer) }
        }
    });
    let guard = if with_budget {
        ReplayGuardLayer::new().retry_budget(RetryBudget::new())
    } else {
        ReplayGuardLayer::new().no_retry_budget()
    };
    let stack = ServiceBuilder::new()
        .layer(guard)
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .service(runtime);
    let calls = Arc::new(Mutex::new(Vec::<(Duration, bool)>::new()));
    let clients = (0..CLIENTS).map(|client| {
        let (stack, calls) = (stack.clone(), calls.clone());
        async move {
            // Spread over the first period, then one call every period.
            let offset = EVERY.mul_f64(client as f64 / CLIENTS as f64);
            let mut call = 0u64;
            while offset + EVERY * (call as u32) < RUN {
                tokio::time::sleep_until(start + offset + EVERY * (call as u32)).await;
                let at = start.elapsed();
                let mut request = json_request(TOOLS_CALL);
                let headers = request.headers_mut();
                headers.insert("x-client", client.to_string().parse().unwrap());
                headers.insert("x-call", call.to_string().parse().unwrap());
                let ok = stack
                    .clone()
                    .oneshot(request)
                    .await
                    .is_ok_and(|r| r.status() == 200);
                calls.lock().unwrap().push((at, ok));
                call += 1;
            }
        }
    });
    // One task, every client a future in it: deterministic on the paused clock.
    futures_util::future::join_all(clients).await;

    let requests = requests.lock().unwrap().clone();
    let calls = calls.lock().unwrap().clone();
    let in_outage = |t: &Duration| *t < OUTAGE;
    let calls_in_outage = calls.iter().filter(|(t, _)| in_outage(t)).count();
    let requests_in_outage = requests.iter().filter(|t| in_outage(t)).count();
    let mut per_second = vec![0usize; RUN.as_secs() as usize + 30];
    for t in &requests {
        per_second[t.as_secs() as usize] += 1;
    }
    // Recovered: from the first second after the outage in which every call started succeeded.
    let recovered_after = (OUTAGE.as_secs()..RUN.as_secs())
        .find(|s| {
            calls
                .iter()
                .filter(|(t, _)| t.as_secs() == *s)
                .all(|(_, ok)| *ok)
        })
        .map_or(RUN, |s| Duration::from_secs(s) - OUTAGE);
    Figures {
        amplification_in_outage: requests_in_outage as f64 / calls_in_outage as f64,
        peak_requests_per_second: per_second.into_iter().max().unwrap_or(0),
        recovered_after,
        succeeded: calls.iter().filter(|(_, ok)| *ok).count() as f64 / calls.len() as f64,
        failed_after_recovery: calls
            .iter()
            .filter(|(t, ok)| *t >= OUTAGE + Duration::from_secs(1) && !ok)
            .count(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_clients_meet_a_throttled_runtime() {
    let without = fleet(false).await;
    let with = fleet(true).await;
    println!(
        "{CLIENTS} clients, a call every {EVERY:?} each, the runtime throttling half of its requests for {OUTAGE:?}:\n  without a budget: {without:?}\n  with the budget:  {with:?}"
    );
    assert!(
        with.amplification_in_outage <= 1.2,
        "the budget damps the storm: {with:?}"
    );
    assert!(
        without.amplification_in_outage >= 1.7,
        "without it, the fleet re-sends in step: {without:?}"
    );
    assert!(with.peak_requests_per_second < without.peak_requests_per_second);
    assert!(with.failed_after_recovery <= without.failed_after_recovery);
    assert_eq!(with.recovered_after, Duration::ZERO);
    // The price, said plainly: during the outage the budget delivers refusals the caps alone
    // would have re-sent, so fewer calls succeed overall — bounded, and none after recovery.
    assert!(
        with.succeeded >= 0.75 && with.succeeded < without.succeeded,
        "{with:?} {without:?}"
    );
}
