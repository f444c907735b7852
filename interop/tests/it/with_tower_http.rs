//! tower-http where it serves the stack: a `TraceLayer` per attempt, between the signer and the
//! HTTP client (it sees every attempt on the wire, signed, and none of its output may carry a
//! secret), and `ResponseBodyTimeoutLayer` around the stack, which ends a streamed answer that
//! stalls — tower's `timeout` ends when the head arrives, so it cannot.

use crate::common;

use std::time::{Duration, Instant};

use agentcore_tower::{AttemptRecord, RecommendedLayers};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, RetryAfter};
use common::*;
use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{ServiceBuilder, ServiceExt};
use tower_http::timeout::ResponseBodyTimeoutLayer;
use tower_http::trace::TraceLayer;

#[tokio::test(flavor = "current_thread")]
async fn a_trace_layer_per_attempt_logs_every_attempt_and_no_secret() {
    let logs = Logs::capture();

    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    emulator.push_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(0)),
    });
    let signer = emulator.signer().build().unwrap();
    // The trace layer sits under the signer: one span per attempt, as it went on the wire.
    let stack = ServiceBuilder::new()
        .layer(RecommendedLayers::new(signer))
        .layer(TraceLayer::new_for_http())
        .service(http_client());
    let response = stack
        .oneshot(tool_call(1, "add", json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let _ = response.into_body().collect().await.unwrap();
    assert_eq!(record.len(), 2, "{record}");

    let logs = logs.text();
    let traced = logs.matches("started processing request").count();
    assert_eq!(traced, 2, "one trace per attempt:\n{logs}");
    assert!(
        logs.contains("status=429") && logs.contains("status=200"),
        "{logs}"
    );
    let credentials = emulator.credentials();
    for secret in [
        credentials.secret_access_key(),
        credentials.session_token().unwrap(),
        "Signature=",
    ] {
        assert!(
            !logs.contains(secret),
            "the trace shows a secret ({secret}):\n{logs}"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalled_streamed_answer_ends_at_the_body_timeout() {
    // A server that sends the head and a first chunk of an SSE answer, then nothing.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut request = vec![0; 64 * 1024];
        let _ = stream.read(&mut request).await;
        let first =
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n",
            first.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let signer = agentcore_tower::invoke::SigV4InvokeLayer::builder(
        agentcore_tower::InvokeTarget::arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123",
        )
        .endpoint(format!("http://{addr}")),
        aws_credential_types::Credentials::new("AKID", "secret", None, None, "test"),
    )
    .build()
    .unwrap();
    let stack = ServiceBuilder::new()
        .layer(ResponseBodyTimeoutLayer::new(Duration::from_millis(300)))
        .layer(RecommendedLayers::new(signer))
        .service(http_client());
    let response = stack.oneshot(tool_call(1, "add", json!({}))).await.unwrap();
    assert_eq!(response.status(), 200);
    let started = Instant::now();
    // tower-http's timeout body holds a timer: pin it to read frames one by one.
    let mut body = std::pin::pin!(response.into_body());
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(first.starts_with(b"event: message"));
    let stalled = body.frame().await.unwrap();
    assert!(stalled.is_err(), "the stall ends in an error, not a hang");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
}
