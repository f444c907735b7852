//! ThrottleRetryLayer alone, against an in-memory scripted service, on tokio's paused clock.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use agentcore_tower::{
    AttemptRecord, ThrottleRetryLayer,
    record::{Outcome, Verdict},
    retry::RetryInfo,
    rule::{Assumption, By, Failure, Permission, ReplayRule, SharedReplayRule},
};
use bytes::Bytes;
use common::*;
use http::StatusCode;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

fn throttled(retry_after: Option<&str>) -> Step {
    let headers: Vec<(&str, &str)> = match retry_after {
        Some(v) => vec![
            ("x-amzn-errortype", "ThrottlingException"),
            ("retry-after", v),
        ],
        None => vec![("x-amzn-errortype", "ThrottlingException")],
    };
    Step::Respond(response(429, &headers, b"{\"message\":\"Rate exceeded\"}"))
}

fn ok(body: &'static [u8]) -> Step {
    Step::Respond(response(200, &[("content-type", "application/json")], body))
}

fn recording_hook() -> (
    Arc<Mutex<Vec<RetryInfo>>>,
    impl Fn(&RetryInfo) + Send + Sync,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = {
        let seen = seen.clone();
        move |info: &RetryInfo| seen.lock().unwrap().push(info.clone())
    };
    (seen, hook)
}

#[tokio::test(start_paused = true)]
async fn throttled_twice_then_ok_delivers_the_ok_with_three_attempts() {
    let inner = Scripted::new([throttled(None), throttled(None), ok(b"{\"result\":1}")]);
    let shared = inner.shared();
    let svc = ThrottleRetryLayer::new().layer(inner);

    let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(shared.calls(), 3);
    assert_eq!(shared.unready_calls.load(Ordering::SeqCst), 0);
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 3);
    for a in &attempts[..2] {
        assert_eq!(
            a.outcome(),
            &Outcome::Response {
                status: StatusCode::TOO_MANY_REQUESTS,
                error_type: agentcore_tower::record::ErrorType::Named("ThrottlingException".into())
            }
        );
        let d = &a.decisions()[0];
        assert_eq!(d.layer(), "throttle");
        assert!(matches!(
            d.verdict(),
            Verdict::SentAgain {
                cause: "HTTP 429",
                ..
            }
        ));
        let p = d.permission().unwrap();
        assert_eq!(
            (p.by, p.assumes),
            (By::Adapter, Assumption::RejectedBeforeExecution)
        );
    }
    assert_eq!(attempts[2].decisions()[0].verdict(), &Verdict::Delivered);
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], b"{\"result\":1}");
    // Every attempt carried the same request.
    let requests = shared.requests.lock().unwrap();
    assert!(requests.iter().all(|(_, b)| b == TOOLS_CALL.as_bytes()));
    assert!(
        requests
            .iter()
            .all(|(p, _)| p.headers["content-type"] == "application/json")
    );
}

#[tokio::test(start_paused = true)]
async fn waits_exactly_the_retry_after_seconds() {
    let inner = Scripted::new([throttled(Some("2")), throttled(Some("3")), ok(b"{}")]);
    let (seen, hook) = recording_hook();
    let svc = ThrottleRetryLayer::new().on_retry(hook).layer(inner);
    let start = Instant::now();
    let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].attempt, seen[0].max_attempts), (2, 3));
    assert_eq!(seen[0].wait, Duration::from_secs(2));
    assert_eq!(seen[0].retry_after, Some(Duration::from_secs(2)));
    assert_eq!((seen[1].attempt, seen[1].wait), (3, Duration::from_secs(3)));
}

#[tokio::test(start_paused = true)]
async fn waits_until_an_http_date() {
    // Dates have a resolution of one second, so the wait is within a second below the date.
    for format in [0, 1, 2] {
        let when = SystemTime::now() + Duration::from_secs(4);
        let date = httpdate::fmt_http_date(when); // IMF-fixdate
        let date = match format {
            0 => date,
            // RFC 850 and asctime forms of the same instant.
            1 => {
                let t = httpdate::HttpDate::from(when);
                let s = t.to_string();
                // "Sun, 06 Nov 1994 08:49:37 GMT" -> "Sunday, 06-Nov-94 08:49:37 GMT"
                let day = match &s[..3] {
                    "Mon" => "Monday",
                    "Tue" => "Tuesday",
                    "Wed" => "Wednesday",
                    "Thu" => "Thursday",
                    "Fri" => "Friday",
                    "Sat" => "Saturday",
                    _ => "Sunday",
                };
                format!(
                    "{day}, {}-{}-{} {} GMT",
                    &s[5..7],
                    &s[8..11],
                    &s[14..16],
                    &s[17..25]
                )
            }
            _ => {
                let s = httpdate::HttpDate::from(when).to_string();
                // -> "Sun Nov  6 08:49:37 1994"
                let day: u32 = s[5..7].parse().unwrap();
                format!(
                    "{} {} {:>2} {} {}",
                    &s[..3],
                    &s[8..11],
                    day,
                    &s[17..25],
                    &s[12..16]
                )
            }
        };
        let leaked: &'static str = Box::leak(date.into_boxed_str());
        let inner = Scripted::new([throttled(Some(leaked)), ok(b"{}")]);
        let (seen, hook) = recording_hook();
        let svc = ThrottleRetryLayer::new().on_retry(hook).layer(inner);
        let start = Instant::now();
        let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
        assert_eq!(response.status(), 200, "{leaked}");
        let waited = start.elapsed();
        assert!(
            waited > Duration::from_secs(3) && waited <= Duration::from_secs(4),
            "{leaked}: waited {waited:?}"
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].wait, waited);
        let asked = seen[0].retry_after.unwrap();
        assert!(asked <= waited && waited - asked < Duration::from_millis(1));
    }
}

#[tokio::test(start_paused = true)]
async fn a_past_date_means_now() {
    let start = Instant::now();
    let inner = Scripted::new([throttled(Some("Sun, 06 Nov 1994 08:49:37 GMT")), ok(b"{}")]);
    let (response, _) = call_through(ThrottleRetryLayer::new(), inner).await;
    assert_eq!(response.status(), 200);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn malformed_retry_after_falls_back_to_jittered_backoff() {
    for bad in ["-1", "1.5", "soon", "1, 2", "99999999999999999999999"] {
        let inner = Scripted::new([throttled(Some(bad)), throttled(None), ok(b"{}")]);
        let (seen, hook) = recording_hook();
        let svc = ThrottleRetryLayer::new().on_retry(hook).layer(inner);
        let start = Instant::now();
        let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
        assert_eq!(response.status(), 200);
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].retry_after, None, "{bad}");
        // base 200 ms: retry 1 in [100, 200] ms, retry 2 in [200, 400] ms.
        assert!(
            (100..=200).contains(&seen[0].wait.as_millis()),
            "{bad}: {:?}",
            seen[0].wait
        );
        assert!(
            (200..=400).contains(&seen[1].wait.as_millis()),
            "{bad}: {:?}",
            seen[1].wait
        );
        assert_eq!(start.elapsed(), seen[0].wait + seen[1].wait);
    }
}

#[tokio::test(start_paused = true)]
async fn jitter_stays_within_its_bounds() {
    for _ in 0..50 {
        let inner = Scripted::with_fallback([], || throttled(None));
        let (seen, hook) = recording_hook();
        let svc = ThrottleRetryLayer::new()
            .max_attempts(7)
            .base_delay(Duration::from_millis(100))
            .max_delay(Duration::from_millis(1000))
            .max_total_wait(Duration::from_secs(60))
            .on_retry(hook)
            .layer(inner);
        let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
        assert_eq!(response.status(), 429);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 6);
        for (i, info) in seen.iter().enumerate() {
            let ceiling = (100u128 << i).min(1000);
            let ms = info.wait.as_millis();
            assert!(
                ms >= ceiling / 2 && ms <= ceiling,
                "retry {}: {ms} ms outside [{}, {ceiling}]",
                i + 1,
                ceiling / 2
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_ceiling_cuts_a_long_retry_after_at_once() {
    let start = Instant::now();
    let inner = Scripted::new([throttled(Some("86400"))]);
    let (response, shared) = call_through(ThrottleRetryLayer::new(), inner).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "86400");
    assert_eq!(shared.calls(), 1);
    assert_eq!(
        verdict_on(&response, 0),
        Verdict::WaitCeiling {
            cause: "HTTP 429",
            wait: Duration::from_secs(86400),
            remaining: Duration::from_secs(10),
        }
    );
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], b"{\"message\":\"Rate exceeded\"}");
}

#[tokio::test(start_paused = true)]
async fn the_ceiling_counts_all_waits_of_the_call() {
    let start = Instant::now();
    let inner = Scripted::with_fallback([], || throttled(Some("1")));
    let layer = ThrottleRetryLayer::new()
        .max_attempts(10)
        .max_total_wait(Duration::from_millis(2500));
    let (response, shared) = call_through(layer, inner).await;
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn the_attempt_cap_is_exact() {
    for cap in [1u32, 2, 5] {
        let inner = Scripted::with_fallback([], || throttled(Some("0")));
        let (response, shared) =
            call_through(ThrottleRetryLayer::new().max_attempts(cap), inner).await;
        assert_eq!(response.status(), 429);
        assert_eq!(shared.calls(), cap as usize);
        let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
        assert_eq!(attempts.len(), cap as usize);
        assert_eq!(
            attempts.last().unwrap().decisions()[0].verdict(),
            &Verdict::AttemptsExhausted {
                cause: "HTTP 429",
                max_attempts: cap
            }
        );
        assert_eq!(shared.unready_calls.load(Ordering::SeqCst), 0);
    }
}

/// A service that is not ready at first after every call: readiness must be polled (and
/// waited for) before every attempt.
#[derive(Clone)]
struct SlowToReady {
    inner: Scripted,
    pending_polls: Arc<Mutex<u32>>,
    polls: Arc<Mutex<Vec<&'static str>>>,
}

impl<B> tower::Service<http::Request<B>> for SlowToReady
where
    Scripted: tower::Service<http::Request<B>>,
{
    type Response = <Scripted as tower::Service<http::Request<B>>>::Response;
    type Error = <Scripted as tower::Service<http::Request<B>>>::Error;
    type Future = <Scripted as tower::Service<http::Request<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let mut pending = self.pending_polls.lock().unwrap();
        if *pending > 0 {
            *pending -= 1;
            self.polls.lock().unwrap().push("pending");
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.polls.lock().unwrap().push("ready");
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.polls.lock().unwrap().push("call");
        *self.pending_polls.lock().unwrap() = 2;
        self.inner.call(request)
    }
}

#[tokio::test(start_paused = true)]
async fn readiness_is_polled_before_every_attempt() {
    let inner = Scripted::new([
        throttled(Some("1")),
        throttled(Some("1")),
        throttled(Some("1")),
        ok(b"{}"),
    ]);
    let shared = inner.shared();
    let polls = Arc::new(Mutex::new(Vec::new()));
    let svc = SlowToReady {
        inner,
        pending_polls: Arc::new(Mutex::new(0)),
        polls: polls.clone(),
    };
    let svc = ThrottleRetryLayer::new().max_attempts(4).layer(svc);
    let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(shared.calls(), 4);
    assert_eq!(shared.unready_calls.load(Ordering::SeqCst), 0);
    let polls = polls.lock().unwrap();
    let expected: Vec<&str> = std::iter::once(["ready", "call"].as_slice())
        .chain(std::iter::repeat_n(
            ["pending", "pending", "ready", "call"].as_slice(),
            3,
        ))
        .flatten()
        .copied()
        .collect();
    assert_eq!(*polls, expected);
}

#[tokio::test(start_paused = true)]
async fn an_inner_error_is_one_attempt_delivered_as_is() {
    let inner = Scripted::new([Step::Fail(Box::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "reset by peer",
    )))]);
    let shared = inner.shared();
    let svc = ThrottleRetryLayer::new().layer(inner);
    let error = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap_err();
    assert_eq!(shared.calls(), 1);
    let source = std::error::Error::source(&error).unwrap();
    assert_eq!(source.to_string(), "reset by peer");
    let record = error.record().unwrap().attempts();
    assert_eq!(record.len(), 1);
    assert_eq!(
        record[0].outcome(),
        &Outcome::Failure(agentcore_tower::rule::FailureKind::ConnectionDropped)
    );
    assert_eq!(
        error.to_string(),
        "the service below failed: connection dropped (after 1 attempt)"
    );
}

fn one_status(status: u16) -> (usize, u16, Bytes, Option<http::HeaderMap>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", "abc".parse().unwrap());
        let frames = vec![
            Ok::<_, BoxError>(http_body::Frame::data(Bytes::from_static(b"first "))),
            Ok(http_body::Frame::data(Bytes::from_static(b"second"))),
            Ok(http_body::Frame::trailers(trailers)),
        ];
        let body = boxed(http_body_util::StreamBody::new(futures_util::stream::iter(
            frames,
        )));
        let resp = http::Response::builder()
            .status(status)
            .header("retry-after", "1")
            .body(body)
            .unwrap();
        let inner = Scripted::with_fallback([Step::Respond(resp)], || ok(b"second answer"));
        let (response, shared) = call_through(ThrottleRetryLayer::new(), inner).await;
        let status = response.status().as_u16();
        let (body, trailers) = read_all(response.into_body()).await;
        (shared.calls(), status, body, trailers)
    })
}

#[test]
fn every_status_but_429_is_one_attempt_delivered_byte_for_byte() {
    for status in 100..=999u16 {
        if status == 429 {
            continue;
        }
        let (calls, got, body, trailers) = one_status(status);
        assert_eq!(calls, 1, "status {status}");
        assert_eq!(got, status);
        assert_eq!(&body[..], b"first second", "status {status}");
        assert_eq!(trailers.unwrap()["x-checksum"], "abc");
    }
    let (calls, got, body, _) = one_status(429);
    assert_eq!((calls, got, &body[..]), (2, 200, &b"second answer"[..]));
}

#[tokio::test(start_paused = true)]
async fn the_refused_body_is_released_before_the_wait() {
    struct DropFlag(Arc<AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    // A body that never ends: only dropping it releases it.
    let body = boxed(http_body_util::StreamBody::new(
        futures_util::stream::poll_fn(move |_| {
            let _keep = &flag;
            Poll::<Option<Result<http_body::Frame<Bytes>, BoxError>>>::Pending
        }),
    ));
    let refused = http::Response::builder()
        .status(429)
        .header("retry-after", "5")
        .body(body)
        .unwrap();
    let inner = Scripted::new([Step::Respond(refused), ok(b"{}")]);
    let svc = ThrottleRetryLayer::new().layer(inner);
    let call = svc.oneshot(json_request(TOOLS_CALL));
    tokio::pin!(call);
    tokio::select! {
        _ = &mut call => panic!("must still be waiting"),
        _ = tokio::time::sleep(Duration::from_millis(10)) => {}
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "dropped before the wait ended"
    );
    assert_eq!(call.await.unwrap().status(), 200);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_cancels_the_wait() {
    let inner = Scripted::with_fallback([throttled(Some("5"))], || ok(b"{}"));
    let shared = inner.shared();
    let svc = ThrottleRetryLayer::new().layer(inner);
    let call = svc.oneshot(json_request(TOOLS_CALL));
    let timed_out = tokio::time::timeout(Duration::from_secs(1), call).await;
    assert!(timed_out.is_err());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(shared.calls(), 1, "no attempt after the future was dropped");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_cancels_the_attempt_in_flight() {
    let dropped = Arc::new(AtomicBool::new(false));
    #[derive(Clone)]
    struct Hanging(Arc<AtomicBool>);
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    impl tower::Service<http::Request<http_body_util::Full<Bytes>>> for Hanging {
        type Response = http::Response<TestBody>;
        type Error = BoxError;
        type Future = futures_util::future::BoxFuture<'static, Result<Self::Response, BoxError>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<http_body_util::Full<Bytes>>) -> Self::Future {
            let guard = Guard(self.0.clone());
            Box::pin(async move {
                let _guard = guard;
                std::future::pending().await
            })
        }
    }
    let svc = ThrottleRetryLayer::new().layer(Hanging(dropped.clone()));
    let result = tokio::time::timeout(
        Duration::from_secs(1),
        svc.oneshot(json_request(TOOLS_CALL)),
    )
    .await;
    assert!(result.is_err());
    assert!(dropped.load(Ordering::SeqCst));
}

#[derive(Debug)]
struct ForbidAll;
impl ReplayRule for ForbidAll {
    fn permission(&self, failure: &Failure) -> Result<Permission, String> {
        assert_eq!(
            failure,
            &Failure::Refused(agentcore_tower::rule::Refusal::Throttled)
        );
        Err("strict tool".into())
    }
}

#[tokio::test(start_paused = true)]
async fn a_replay_rule_on_the_request_can_forbid() {
    let inner = Scripted::new([throttled(Some("1"))]);
    let shared = inner.shared();
    let svc = ThrottleRetryLayer::new().layer(inner);
    let mut request = json_request(TOOLS_CALL);
    request
        .extensions_mut()
        .insert(SharedReplayRule::new(ForbidAll));
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 1);
    assert_eq!(
        verdict_on(&response, 0),
        Verdict::Forbidden {
            cause: "HTTP 429",
            reason: "strict tool".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_app_record_gets_the_same_decisions_as_a_crate_record() {
    let inner = Scripted::new([throttled(Some("0")), ok(b"{}")]);
    let hooked = Arc::new(AtomicU32::new(0));
    let svc = ThrottleRetryLayer::new()
        .on_record(common::counting_hook(&hooked))
        .layer(inner);
    let record = AttemptRecord::new();
    let mut request = json_request(TOOLS_CALL);
    request.extensions_mut().insert(record.clone());
    let response = svc.oneshot(request).await.unwrap();
    // The app's record is the call's: appended to, handed back, decided and hooked as ours is.
    assert_eq!(
        AttemptRecord::of_response(&response).unwrap().to_string(),
        record.to_string()
    );
    assert_eq!(
        record.to_string(),
        "#1 HTTP 429 ThrottlingException -> throttle: HTTP 429, sent again after 0ms (Retry-After 0ms) (by adapter, assumes rejected-before-execution); effect unknown\n\
         #2 HTTP 200 -> throttle: delivered; effect unknown"
    );
    assert_eq!(hooked.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn stacked_layers_share_one_record_and_one_cap() {
    let inner = Scripted::new([throttled(Some("0")), throttled(Some("0")), ok(b"{}")]);
    let layer = tower::ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new().max_attempts(2))
        .layer(ThrottleRetryLayer::new().max_attempts(2));
    let (response, shared) = call_through(layer, inner).await;
    // The cap is the call's: the outer layer does not start the inner one's count again.
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 2);
    let record = AttemptRecord::of_response(&response).unwrap().to_string();
    assert_eq!(
        record,
        "#1 HTTP 429 ThrottlingException -> throttle: HTTP 429, sent again after 0ms (Retry-After 0ms) (by adapter, assumes rejected-before-execution); effect unknown\n\
         #2 HTTP 429 ThrottlingException -> throttle: delivered (HTTP 429, but the cap of 2 attempts was reached); throttle: delivered (HTTP 429, but the cap of 2 attempts was reached); effect unknown"
    );
}

#[tokio::test(start_paused = true)]
async fn tracing_tells_each_resend_without_the_query() {
    let logs = common::Logs::capture();
    let inner = Scripted::new([throttled(Some("1")), ok(b"{}")]);
    let svc = ThrottleRetryLayer::new().layer(inner);
    let mut request = json_request(TOOLS_CALL);
    request
        .headers_mut()
        .insert("authorization", "Bearer hunter2".parse().unwrap());
    svc.oneshot(request).await.unwrap();
    let logs = logs.text();
    assert!(logs.contains("sending again"), "{logs}");
    assert!(logs.contains("attempt=2"), "{logs}");
    assert!(logs.contains("max_attempts=3"), "{logs}");
    assert!(logs.contains("retry_after_s=1"), "{logs}");
    assert!(logs.contains("https://runtime.example/mcp"), "{logs}");
    assert!(!logs.contains("secret=query"), "{logs}");
    assert!(!logs.contains("hunter2"), "{logs}");
}
