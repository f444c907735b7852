//! SessionBusyRetryLayer alone, against an in-memory scripted service, on tokio's paused clock.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::{
    AttemptRecord, SessionBusyRetryLayer,
    record::Verdict,
    retry::RetryInfo,
    rule::{Assumption, By},
};
use bytes::Bytes;
use common::*;
use http_body::{Body, Frame};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

const BUSY: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;
const CONFLICT: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Resource conflict - Resource already exists"}}"#;
const HEALTH: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32010,"message":"Runtime health check failed or timed out"}}"#;
const OK: &[u8] =
    br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"charged"}]}}"#;
const JSON: (&str, &str) = ("content-type", "application/json");

fn busy_200() -> Step {
    Step::Respond(response(200, &[JSON], BUSY))
}

fn busy_409() -> Step {
    Step::Respond(response(
        409,
        &[
            (
                "x-amzn-errortype",
                "RetryableConflictException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
            JSON,
        ],
        b"{\"message\":\"Session is busy\"}",
    ))
}

fn ok() -> Step {
    Step::Respond(response(200, &[JSON], OK))
}

/// Sends one request through the layer over `first` then an OK; returns the number of calls
/// the service saw, the delivered status and body bytes.
async fn through(first: Step) -> (usize, u16, Bytes) {
    let inner = Scripted::new([first, ok()]);
    let (response, shared) = call_through(SessionBusyRetryLayer::new(), inner).await;
    let status = response.status().as_u16();
    let (body, _) = read_all(response.into_body()).await;
    (shared.calls(), status, body)
}

#[tokio::test(start_paused = true)]
async fn matches_exactly_the_two_forms() {
    let busy_batch = [b"[".as_slice(), BUSY, b",", BUSY, b"]"].concat();
    let busy_batch: &'static [u8] = Box::leak(busy_batch.into_boxed_slice());
    let busy_spaced: &'static [u8] = Box::leak(
        [b"\n  ".as_slice(), BUSY, b"\n"]
            .concat()
            .into_boxed_slice(),
    );
    type Case<'a> = (&'a str, u16, Vec<(&'a str, &'a str)>, &'static [u8], bool);
    let cases: Vec<Case> = vec![
        ("200 busy", 200, vec![JSON], BUSY, true),
        ("200 busy, charset", 200, vec![("content-type", "application/json; charset=utf-8")], BUSY, true),
        ("200 busy, whitespace around", 200, vec![JSON], busy_spaced, true),
        ("409 RetryableConflictException:ns", 409, vec![("x-amzn-errortype", "RetryableConflictException:http://internal.amazon.com/coral/")], b"", true),
        ("409 RetryableConflictException, any body", 409, vec![("x-amzn-errortype", "RetryableConflictException")], b"<html>", true),
        ("ConflictException look-alike", 200, vec![JSON], CONFLICT, false),
        ("-32010 health check", 200, vec![JSON], HEALTH, false),
        ("batch of busy replies", 200, vec![JSON], busy_batch, false),
        ("SSE carrying a busy reply", 200, vec![("content-type", "text/event-stream")], b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32005,\"message\":\"Session operation in progress, please retry\"}}\n\n", false),
        ("busy body without content type", 200, vec![], BUSY, false),
        ("busy body as text/plain", 200, vec![("content-type", "text/plain")], BUSY, false),
        ("not JSON", 200, vec![JSON], b"Session operation in progress, please retry -32005", false),
        ("invalid JSON", 200, vec![JSON], b"{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32005,", false),
        ("not JSON-RPC", 200, vec![JSON], b"{\"error\":{\"code\":-32005,\"message\":\"Session operation in progress, please retry\"}}", false),
        ("409 without the header", 409, vec![JSON], BUSY, false),
        ("409 ConflictException", 409, vec![("x-amzn-errortype", "ConflictException:ns")], BUSY, false),
        ("429 busy body", 429, vec![JSON], BUSY, false),
        ("500 busy body", 500, vec![JSON], BUSY, false),
        ("201 busy body", 201, vec![JSON], BUSY, false),
        ("200 RetryableConflictException header", 200, vec![("x-amzn-errortype", "RetryableConflictException")], b"{}", false),
        ("ordinary answer", 200, vec![JSON], OK, false),
    ];
    for (name, status, headers, body, matches) in cases {
        let (calls, got_status, got_body) =
            through(Step::Respond(response(status, &headers, body))).await;
        if matches {
            assert_eq!(calls, 2, "{name}: re-sent");
            assert_eq!((got_status, &got_body[..]), (200, OK), "{name}");
        } else {
            assert_eq!(calls, 1, "{name}: not re-sent");
            assert_eq!(got_status, status, "{name}");
            assert_eq!(&got_body[..], body, "{name}: delivered byte for byte");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn busy_busy_ok_delivers_the_ok_with_three_recorded_attempts() {
    let inner = Scripted::new([busy_200(), busy_409(), ok()]);
    let (response, shared) = call_through(SessionBusyRetryLayer::new(), inner).await;
    assert_eq!(response.status(), 200);
    assert_eq!(shared.calls(), 3);
    assert_eq!(shared.unready_calls.load(Ordering::SeqCst), 0);
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    assert_eq!(attempts.len(), 3);
    let causes: Vec<_> = attempts[..2]
        .iter()
        .map(|a| match a.decisions()[0].verdict() {
            Verdict::SentAgain {
                cause,
                retry_after: None,
                ..
            } => *cause,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        causes,
        [
            "session busy (JSON-RPC -32005)",
            "session busy (HTTP 409 RetryableConflictException)"
        ]
    );
    for a in &attempts[..2] {
        let p = a.decisions()[0].permission().unwrap();
        assert_eq!(
            (p.by, p.assumes),
            (By::Adapter, Assumption::RefusedBeforeExecution)
        );
        assert_eq!(a.decisions()[0].layer(), "session_busy");
    }
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], OK);
    assert!(
        shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .all(|(_, b)| b == TOOLS_CALL.as_bytes())
    );
}

#[tokio::test(start_paused = true)]
async fn busy_forever_delivers_the_last_refusal_intact_after_the_cap() {
    let inner = Scripted::with_fallback([], busy_200);
    let (response, shared) =
        call_through(SessionBusyRetryLayer::new().max_attempts(6), inner).await;
    assert_eq!(shared.calls(), 6);
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    assert_eq!(attempts.len(), 6);
    assert_eq!(
        attempts[5].decisions()[0].verdict(),
        &Verdict::AttemptsExhausted {
            cause: "session busy (JSON-RPC -32005)",
            max_attempts: 6
        }
    );
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], BUSY);
}

#[tokio::test(start_paused = true)]
async fn by_default_busy_forever_is_waited_out_by_time_not_by_count() {
    // The defaults: the 45 s ceiling ends the call, never the cap of 50 attempts.
    for _ in 0..20 {
        let start = Instant::now();
        let inner = Scripted::with_fallback([], busy_200);
        let (response, shared) = call_through(SessionBusyRetryLayer::new(), inner).await;
        let record = AttemptRecord::of_response(&response).unwrap().clone();
        let attempts = record.attempts();
        let calls = shared.calls();
        // Waits of at least 50, 100, 200, 400, 800 ms, then 1 s: at most 49 attempts in 45 s;
        // of at most 100, 200, 400, 800, 1600 ms, then 2 s: at least 26.
        assert!((26..=49).contains(&calls), "{calls} attempts: {record}");
        assert_eq!(attempts.len(), calls);
        let Verdict::WaitCeiling {
            wait, remaining, ..
        } = attempts[calls - 1].decisions()[0].verdict().clone()
        else {
            panic!("not the wait ceiling: {record}")
        };
        assert!(
            wait > remaining && wait <= Duration::from_secs(2),
            "{record}"
        );
        // What was waited, and nothing after the ceiling was met.
        let waited = start.elapsed();
        assert!(waited <= Duration::from_secs(45), "{waited:?}");
        assert!(waited > Duration::from_secs(43), "{waited:?}: {record}");
        assert_eq!(waited + remaining, Duration::from_secs(45));
    }
}

#[tokio::test(start_paused = true)]
async fn waits_follow_the_documented_defaults() {
    for _ in 0..20 {
        let inner = Scripted::with_fallback([], busy_409);
        let seen = Arc::new(Mutex::new(Vec::<RetryInfo>::new()));
        let svc = SessionBusyRetryLayer::new()
            .on_retry({
                let seen = seen.clone();
                move |i| seen.lock().unwrap().push(i.clone())
            })
            .layer(inner);
        let start = Instant::now();
        let response = svc.oneshot(json_request(TOOLS_CALL)).await.unwrap();
        assert_eq!(response.status(), 409);
        let seen = seen.lock().unwrap();
        assert!((25..=48).contains(&seen.len()), "{}", seen.len());
        let mut total = Duration::ZERO;
        for (i, info) in seen.iter().enumerate() {
            assert_eq!((info.attempt, info.max_attempts), (i as u32 + 2, 50));
            let ceiling = (100u128 << i.min(20)).min(2000);
            let ms = info.wait.as_millis();
            assert!(
                ms >= ceiling / 2 && ms <= ceiling,
                "retry {}: {ms} ms",
                i + 1
            );
            total += info.wait;
        }
        assert!(total <= Duration::from_secs(45));
        assert_eq!(start.elapsed(), total);
    }
}

#[tokio::test(start_paused = true)]
async fn the_total_wait_ceiling_stops_re_sending() {
    let inner = Scripted::with_fallback([], busy_200);
    let layer = SessionBusyRetryLayer::new()
        .max_attempts(100)
        .base_delay(Duration::from_secs(1))
        .max_delay(Duration::from_secs(1))
        .max_total_wait(Duration::from_millis(2500));
    let (response, shared) = call_through(layer, inner).await;
    // Waits are in [0.5 s, 1 s]: at least 2 re-sends fit under 2.5 s, at most 5.
    let calls = shared.calls();
    assert!((3..=6).contains(&calls), "{calls}");
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    assert!(matches!(
        attempts.last().unwrap().decisions()[0].verdict(),
        Verdict::WaitCeiling { .. }
    ));
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], BUSY);
}

fn frames(chunks: Vec<Bytes>) -> Vec<Result<Frame<Bytes>, BoxError>> {
    chunks.into_iter().map(|c| Ok(Frame::data(c))).collect()
}

/// Sends a 200 response with the given body through the layer, and returns what the app reads:
/// data bytes, trailers, the error if any, and the body probe.
async fn deliver(
    headers: &[(&str, &str)],
    body: ScriptedBody,
) -> (Bytes, Option<http::HeaderMap>, Option<String>, usize) {
    let inner = Scripted::with_fallback([Step::Respond(scripted_response(200, headers, body))], ok);
    let (response, shared) = call_through(SessionBusyRetryLayer::new(), inner).await;
    let mut body = response.into_body();
    let mut data = Vec::new();
    let mut trailers = None;
    let mut error = None;
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        match frame {
            Ok(f) if f.is_data() => data.extend_from_slice(&f.into_data().unwrap()),
            Ok(f) => trailers = f.into_trailers().ok(),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    assert!(body.is_end_stream() || error.is_some());
    (Bytes::from(data), trailers, error, shared.calls())
}

#[tokio::test(start_paused = true)]
async fn an_8_mib_chunked_json_answer_arrives_whole() {
    let chunk = |i: usize| Bytes::from(vec![b'a' + (i % 26) as u8; 64 * 1024]);
    let mut chunks = vec![Bytes::from_static(
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"",
    )];
    chunks.extend((0..128).map(chunk));
    chunks.push(Bytes::from_static(b"\"}"));
    let expected: Vec<u8> = chunks.concat();
    let body = ScriptedBody::new(frames(chunks));
    let (data, _, error, calls) = deliver(&[JSON], body).await;
    assert_eq!(error, None);
    assert_eq!(calls, 1);
    assert_eq!(data.len(), expected.len());
    assert!(data == expected);
}

#[tokio::test(start_paused = true)]
async fn a_body_crossing_the_bound_arrives_whole() {
    // First frame under the bound, the rest over it.
    let chunks = vec![
        Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\""),
        Bytes::from(vec![b'x'; 5000]),
        Bytes::from(vec![b'y'; 5000]),
        Bytes::from_static(b"\"}"),
    ];
    let expected = chunks.concat();
    let (data, _, error, calls) = deliver(&[JSON], ScriptedBody::new(frames(chunks))).await;
    assert_eq!((error, calls), (None, 1));
    assert!(data == expected);
}

#[tokio::test(start_paused = true)]
async fn an_error_after_two_frames_reaches_the_app_at_the_same_point() {
    let body = ScriptedBody::new(vec![
        Ok(Frame::data(Bytes::from_static(b"{\"jsonrpc\":\"2.0\","))),
        Ok(Frame::data(Bytes::from_static(b"\"id\":7,"))),
        Err("connection reset mid-body".into()),
    ]);
    let (data, _, error, calls) = deliver(&[JSON], body).await;
    assert_eq!(calls, 1, "a body error is not turned into a retry");
    assert_eq!(&data[..], b"{\"jsonrpc\":\"2.0\",\"id\":7,");
    assert_eq!(error.as_deref(), Some("connection reset mid-body"));
}

#[tokio::test(start_paused = true)]
async fn an_error_inside_a_busy_looking_body_is_delivered_not_retried() {
    let body = ScriptedBody::new(vec![
        Ok(Frame::data(Bytes::copy_from_slice(BUSY))),
        Err("reset".into()),
    ]);
    let (data, _, error, calls) = deliver(&[JSON], body).await;
    assert_eq!(calls, 1);
    assert_eq!(&data[..], BUSY);
    assert_eq!(error.as_deref(), Some("reset"));
}

/// A body of `data` then the trailer `x-checksum: 42`, and those trailers.
fn with_checksum_trailer(data: &[u8]) -> (ScriptedBody, http::HeaderMap) {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-checksum", "42".parse().unwrap());
    let body = ScriptedBody::new(vec![
        Ok(Frame::data(Bytes::copy_from_slice(data))),
        Ok(Frame::trailers(trailers.clone())),
    ]);
    (body, trailers)
}

#[tokio::test(start_paused = true)]
async fn trailers_pass_through() {
    let (body, trailers) = with_checksum_trailer(OK);
    let (data, got, error, _) = deliver(&[JSON], body).await;
    assert_eq!(error, None);
    assert_eq!(&data[..], OK);
    assert_eq!(got, Some(trailers));
}

#[tokio::test(start_paused = true)]
async fn a_busy_reply_with_trailers_is_still_the_refusal() {
    let (body, _) = with_checksum_trailer(BUSY);
    let (data, _, _, calls) = deliver(&[JSON], body).await;
    assert_eq!(calls, 2);
    assert_eq!(&data[..], OK);
}

#[tokio::test(start_paused = true)]
async fn an_sse_stream_is_never_read_by_the_layer() {
    let body = ScriptedBody::data(&[b"event: message\n", b"data: {}\n\n"]).hanging();
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(
        200,
        &[("content-type", "text/event-stream")],
        body,
    ))]);
    let (response, _) = call_through(SessionBusyRetryLayer::new(), inner).await;
    assert_eq!(probe.polls(), 0, "the layer did not touch the stream");
    let mut body = response.into_body();
    let mut got = Vec::new();
    for _ in 0..2 {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        got.extend_from_slice(&frame.unwrap().unwrap().into_data().unwrap());
    }
    assert_eq!(&got[..], b"event: message\ndata: {}\n\n");
}

#[tokio::test(start_paused = true)]
async fn a_content_length_over_the_bound_is_not_read() {
    let body = ScriptedBody::data(&[BUSY]);
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(
        200,
        &[JSON, ("content-length", "5000")],
        body,
    ))]);
    let (response, _) = call_through(SessionBusyRetryLayer::new(), inner).await;
    assert_eq!(probe.polls(), 0);
    let (data, _) = read_all(response.into_body()).await;
    assert_eq!(&data[..], BUSY);
}

#[tokio::test(start_paused = true)]
async fn a_content_length_within_a_custom_bound_is_read() {
    let inner = Scripted::new([
        Step::Respond(scripted_response(
            200,
            &[JSON, ("content-length", "108")],
            ScriptedBody::data(&[BUSY]),
        )),
        ok(),
    ]);
    let (_, shared) = call_through(SessionBusyRetryLayer::new().peek_limit(200), inner).await;
    assert_eq!(shared.calls(), 2);
    let inner = Scripted::new([Step::Respond(response(200, &[JSON], BUSY))]);
    let (response, shared) = call_through(SessionBusyRetryLayer::new().peek_limit(50), inner).await;
    assert_eq!(
        shared.calls(),
        1,
        "a reply larger than the bound is not matched"
    );
    assert_eq!(&read_all(response.into_body()).await.0[..], BUSY);
}

#[tokio::test(start_paused = true)]
async fn a_batch_is_recognised_from_its_first_byte() {
    // The layer stops reading at '[': the rest of a (hanging) stream is not waited for.
    let body = ScriptedBody::data(&[b"  [", BUSY]).hanging();
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(200, &[JSON], body))]);
    let (response, _) = call_through(SessionBusyRetryLayer::new(), inner).await;
    assert_eq!(probe.polls(), 1);
    let mut body = response.into_body();
    let first = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
    assert_eq!(&first.unwrap().unwrap().into_data().unwrap()[..], b"  [");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_mid_read_releases_the_body() {
    let body = ScriptedBody::data(&[b"{\"jsonrpc\":"]).hanging();
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(200, &[JSON], body))]);
    let svc = SessionBusyRetryLayer::new().layer(inner);
    let result = tokio::time::timeout(
        Duration::from_secs(1),
        svc.oneshot(json_request(TOOLS_CALL)),
    )
    .await;
    assert!(result.is_err(), "still reading ahead");
    assert!(probe.polls() >= 2);
    assert!(probe.dropped(), "released when the future was dropped");
}

#[tokio::test(start_paused = true)]
async fn the_matched_reply_is_released_before_the_wait() {
    let body = ScriptedBody::data(&[BUSY]);
    let probe = body.probe();
    let inner = Scripted::new([Step::Respond(scripted_response(200, &[JSON], body)), ok()]);
    let svc = SessionBusyRetryLayer::new()
        .base_delay(Duration::from_secs(10))
        .max_delay(Duration::from_secs(10))
        .layer(inner);
    let call = svc.oneshot(json_request(TOOLS_CALL));
    tokio::pin!(call);
    tokio::select! {
        _ = &mut call => panic!("must be waiting"),
        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
    }
    assert!(probe.dropped());
    assert_eq!(call.await.unwrap().status(), 200);
}

#[tokio::test(start_paused = true)]
async fn size_hint_and_end_of_stream_stay_honest() {
    let inner = Scripted::new([ok()]);
    let (response, _) = call_through(SessionBusyRetryLayer::new(), inner).await;
    let mut body = response.into_body();
    assert_eq!(body.size_hint().exact(), Some(OK.len() as u64));
    assert!(!body.is_end_stream());
    let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
    assert_eq!(&frame.unwrap().unwrap().into_data().unwrap()[..], OK);
    assert!(body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(0));
}

/// For random bodies split at random places into frames (seeded), what the app reads is what
/// the server sent (a matched busy reply is the one exception: it is re-sent, never delivered).
#[test]
fn what_the_app_reads_is_what_the_server_sent() {
    let mut rng = fastrand::Rng::with_seed(0xb05e);
    let prefixes: [&[u8]; 6] = [b"", b"{", b" {\"jsonrpc\":\"2.0\",", b"[", BUSY, OK];
    for _ in 0..256 {
        let prefix = prefixes[rng.usize(0..prefixes.len())];
        let tail: Vec<u8> = (0..rng.usize(0..6000)).map(|_| rng.u8(..)).collect();
        let sent: Vec<u8> = [prefix, &tail[..]].concat();
        let mut cuts: Vec<usize> = (0..rng.usize(0..8))
            .map(|_| rng.usize(0..6100))
            .filter(|c| *c < sent.len())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut chunks = Vec::new();
        let mut start = 0;
        for c in cuts.into_iter().chain(std::iter::once(sent.len())) {
            chunks.push(Bytes::copy_from_slice(&sent[start..c]));
            start = c;
        }
        let (json, error_at_end) = (rng.bool(), rng.bool());
        let mut frames = frames(chunks);
        if error_at_end {
            frames.push(Err("cut".into()));
        }
        let headers: &[(&str, &str)] = if json {
            &[JSON]
        } else {
            &[("content-type", "application/octet-stream")]
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (data, _, error, calls) = rt.block_on(deliver(headers, ScriptedBody::new(frames)));
        let is_busy =
            json && !error_at_end && agentcore_tower::session_busy::is_session_busy_json(&sent);
        if is_busy {
            assert_eq!(calls, 2);
            assert_eq!(&data[..], OK);
        } else {
            assert_eq!(calls, 1);
            assert!(data[..] == sent[..]);
            assert_eq!(error.is_some(), error_at_end);
        }
    }
}

/// The matcher over every combination of status, headers and body from the table below: a
/// re-send exactly when the oracle says the answer is the refusal (the fuzz target
/// `session_busy` runs this over arbitrary inputs for longer).
#[test]
fn matches_exactly_when_the_oracle_says() {
    let statuses = [200u16, 201, 204, 400, 404, 409, 429, 500, 503];
    let content_types = [
        None,
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("text/event-stream"),
        Some("text/plain"),
        Some("application/json-rpc"),
    ];
    let error_types = [
        None,
        Some("RetryableConflictException"),
        Some("RetryableConflictException:ns"),
        Some("ConflictException"),
        Some("ns#RetryableConflictException"),
        Some("retryableconflictexception"),
    ];
    let bodies: [&'static [u8]; 8] = [BUSY, CONFLICT, HEALTH, OK, b"", b"[]", b"{", b"-32005"];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    for status in statuses {
        for content_type in content_types {
            for error_type in error_types {
                for body in bodies {
                    let mut headers = Vec::new();
                    if let Some(ct) = content_type {
                        headers.push(("content-type", ct));
                    }
                    if let Some(et) = error_type {
                        headers.push(("x-amzn-errortype", et));
                    }
                    let is_json = content_type.is_some_and(|c| {
                        c.starts_with("application/json") && !c.starts_with("application/json-")
                    });
                    let oracle = (status == 409
                        && error_type.is_some_and(|e| {
                            e.starts_with("RetryableConflictException")
                                || e == "ns#RetryableConflictException"
                        }))
                        || (status == 200 && is_json && body == BUSY);
                    let (calls, status_out, bytes) =
                        rt.block_on(through(Step::Respond(response(status, &headers, body))));
                    let case = format!("{status} {content_type:?} {error_type:?} {body:?}");
                    if oracle {
                        assert_eq!(calls, 2, "{case}");
                        assert_eq!(&bytes[..], OK, "{case}");
                    } else {
                        assert_eq!(calls, 1, "{case}");
                        assert_eq!(status_out, status, "{case}");
                        assert_eq!(&bytes[..], body, "{case}");
                    }
                }
            }
        }
    }
}
