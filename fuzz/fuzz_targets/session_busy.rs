//! The session-busy matcher over arbitrary status, headers and body frames: never a panic,
//! a match exactly when the oracle says so, and the app reads exactly what the server sent.
#![no_main]

mod common;

use agentcore_tower::session_busy::is_session_busy_json;
use agentcore_tower::{AttemptRecord, SessionBusyRetryLayer, record::Verdict};
use arbitrary::Arbitrary;
use common::*;
use libfuzzer_sys::fuzz_target;
use tower::{Layer, ServiceExt};

#[derive(Debug, Arbitrary)]
struct Input {
    status: u16,
    content_type: Option<String>,
    error_type: Option<String>,
    content_length: Option<u32>,
    body: FuzzBody,
}

fuzz_target!(|input: Input| {
    let Ok(status) = http::StatusCode::from_u16(input.status) else { return };
    let mut builder = http::Response::builder().status(status);
    if let Some(ct) = &input.content_type {
        builder = builder.header("content-type", ct.as_str());
    }
    if let Some(et) = &input.error_type {
        builder = builder.header("x-amzn-errortype", et.as_str());
    }
    if let Some(cl) = input.content_length {
        builder = builder.header("content-length", cl.to_string());
    }
    let Ok(response) = builder.body(()) else { return };
    let (parts, ()) = response.into_parts();
    let sent = input.body.bytes();
    let is_json = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().unwrap().trim().eq_ignore_ascii_case("application/json")
    });
    let error_type = agentcore_tower::record::aws_error_type(&parts.headers).map(str::to_owned);
    let oracle = (status == 409 && error_type.as_deref() == Some("RetryableConflictException"))
        || (status == 200
            && is_json
            && input.content_length.is_none_or(|n| n <= 4096)
            && !input.body.error_after
            && sent.len() <= 4096
            && is_session_busy_json(&sent));
    let body = input.body.clone();
    let inner = tower::service_fn(move |_req: http::Request<http_body_util::Full<bytes::Bytes>>| {
        let response = http::Response::from_parts(parts.clone(), body.clone().into_body());
        async move { Ok::<_, Never>(response) }
    });
    let svc = SessionBusyRetryLayer::new().max_attempts(1).layer(inner);
    runtime().block_on(async move {
        let response = svc.oneshot(request(b"{}".to_vec())).await.unwrap();
        let record = AttemptRecord::of_response(&response).unwrap().attempts();
        let matched = record[0]
            .decisions()
            .iter()
            .any(|d| matches!(d.verdict(), Verdict::AttemptsExhausted { .. }));
        assert_eq!(matched, oracle, "{record:?}");
        let (read, error_at, _) = read(response.into_body()).await;
        assert_eq!(read, sent);
        assert_eq!(error_at.is_some(), input.body.error_after);
    });
});
