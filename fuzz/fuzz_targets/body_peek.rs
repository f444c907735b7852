//! The read-ahead of an HTTP 200 JSON answer: bytes in = bytes out, the error at the same
//! point, trailers kept — for arbitrary bodies split arbitrarily into frames.
#![no_main]

mod common;

use agentcore_tower::SessionBusyRetryLayer;
use arbitrary::Arbitrary;
use common::*;
use libfuzzer_sys::fuzz_target;
use tower::{Layer, ServiceExt};

#[derive(Debug, Arbitrary)]
struct Input {
    peek_limit: u16,
    body: FuzzBody,
}

fuzz_target!(|input: Input| {
    let sent = input.body.bytes();
    let body = input.body.clone();
    let inner = tower::service_fn(move |_req: http::Request<http_body_util::Full<bytes::Bytes>>| {
        let response = http::Response::builder()
            .header("content-type", "application/json; charset=utf-8")
            .body(body.clone().into_body())
            .unwrap();
        async move { Ok::<_, Never>(response) }
    });
    let svc = SessionBusyRetryLayer::new().max_attempts(1).peek_limit(input.peek_limit as usize).layer(inner);
    runtime().block_on(async move {
        let response = svc.oneshot(request(b"{}".to_vec())).await.unwrap();
        let (read, error_at, trailers) = read(response.into_body()).await;
        assert_eq!(read, sent);
        if input.body.error_after {
            assert_eq!(error_at, Some(sent.len()));
        } else {
            assert_eq!(error_at, None);
            assert_eq!(trailers, input.body.trailers);
        }
    });
});
