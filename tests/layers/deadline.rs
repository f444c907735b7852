//! A call deadline outside the stack (tower's `TimeoutLayer`) that fires mid-wait, mid-peek and
//! mid-attempt: the call ends at the deadline, no attempt is sent after it, nothing is left
//! behind — but the evidence: the app's record keeps the attempt in flight.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::{
    AttemptRecord, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer, record::Outcome,
};
use common::*;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// The three retry layers under a 1 s deadline for the whole call.
fn stack_with_a_1s_deadline(
    inner: Scripted,
) -> impl tower::Service<
    http::Request<http_body_util::Full<bytes::Bytes>>,
    Response: std::fmt::Debug,
    Error = BoxError,
> {
    ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(1)))
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .service(inner)
}

#[tokio::test(start_paused = true)]
async fn a_deadline_mid_wait_ends_the_call_and_no_attempt_follows() {
    let inner = Scripted::with_fallback(
        [Step::Respond(response(429, &[("retry-after", "5")], b"{}"))],
        || Step::Respond(response(200, &[], b"{}")),
    );
    let shared = inner.shared();
    let stack = stack_with_a_1s_deadline(inner);
    let start = Instant::now();
    let error = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>());
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "ended at the deadline"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(shared.calls(), 1, "no attempt after the deadline");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_mid_peek_ends_the_call_and_releases_the_body() {
    let body = ScriptedBody::data(&[b"{\"jsonrpc\":\"2.0\","]).hanging();
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(
        200,
        &[("content-type", "application/json")],
        body,
    ))]);
    let shared = inner.shared();
    let stack = stack_with_a_1s_deadline(inner);
    let start = Instant::now();
    let error = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>());
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert!(
        probe.dropped(),
        "the half-read body was released at the deadline"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(shared.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_on_an_attempt_in_flight_keeps_it_in_the_apps_record_and_fires_on_record() {
    let received = Arc::new(AtomicUsize::new(0));
    let never_answers = tower::service_fn({
        let received = received.clone();
        move |_request: http::Request<http_body_util::Full<bytes::Bytes>>| {
            received.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<http::Response<TestBody>, BoxError>>()
        }
    });
    let records = Arc::new(Mutex::new(Vec::new()));
    // The hook is on the innermost layer: it fires wherever it sits, once per call.
    let stack = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(1)))
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new().on_record({
            let records = records.clone();
            move |record: &AttemptRecord| records.lock().unwrap().push(record.attempts())
        }))
        .service(never_answers);
    let record = AttemptRecord::new();
    let mut request = json_request(TOOLS_CALL);
    request.extensions_mut().insert(record.clone());
    let error = stack.oneshot(request).await.unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>());
    assert_eq!(received.load(Ordering::SeqCst), 1, "the server received it");
    assert_eq!(
        record.to_string(),
        "#1 sent, no answer yet -> replay_guard: call dropped before it ended (a deadline or cancellation outside); effect unknown"
    );
    assert_eq!(*records.lock().unwrap(), [record.attempts()]);
    assert_eq!(record.attempts()[0].outcome(), &Outcome::Pending);
}
