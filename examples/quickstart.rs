//! A throttled MCP server and a client that waits it out.
//!
//! An in-memory server answers the first two `tools/call` requests with HTTP 429 (the first with
//! `Retry-After: 1`, the second without), then answers. The client is a tower stack with a
//! `ThrottleRetryLayer`; the example prints each re-send as it happens, the answer, and the
//! call's attempt record.
//!
//! Run: `cargo run --example quickstart`

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentcore_tower::{AttemptRecord, ThrottleRetryLayer};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::{ServiceBuilder, ServiceExt, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let executions = Arc::new(AtomicU32::new(0));
    let server = service_fn({
        let executions = executions.clone();
        move |request: Request<Full<Bytes>>| {
            let executions = executions.clone();
            async move {
                let body = request.into_body().collect().await?.to_bytes();
                let n = executions.fetch_add(1, Ordering::SeqCst);
                let response = match n {
                    0 => Response::builder()
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .header("x-amzn-errortype", "ThrottlingException")
                        .header("retry-after", "1")
                        .body(Full::new(Bytes::from_static(b"{\"message\":\"Rate exceeded\"}")))?,
                    1 => Response::builder()
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .header("x-amzn-errortype", "ThrottlingException")
                        .body(Full::new(Bytes::from_static(b"{\"message\":\"Rate exceeded\"}")))?,
                    _ => Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(format!(
                            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"echo {} bytes\"}}]}}}}",
                            body.len()
                        ))))?,
                };
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        }
    });

    let client = ServiceBuilder::new()
        .layer(
            ThrottleRetryLayer::new()
                .max_attempts(4)
                .max_total_wait(Duration::from_secs(5))
                .on_retry(|info| {
                    println!(
                        "  {}: attempt {} of {} in {:?} ({}{})",
                        info.layer,
                        info.attempt,
                        info.max_attempts,
                        info.wait,
                        info.cause,
                        info.retry_after
                            .map(|d| format!(", server asked for {d:?}"))
                            .unwrap_or_default()
                    )
                }),
        )
        .service(server);

    let payload = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
    println!("tools/call echo:");
    let request = Request::post("http://127.0.0.1/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(payload.as_bytes())))?;
    let response = client.oneshot(request).await?;
    let record = AttemptRecord::of_response(&response)
        .cloned()
        .unwrap_or_default();
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!(
        "answer: HTTP {} {}",
        status.as_u16(),
        String::from_utf8_lossy(&body)
    );
    println!("attempt record:\n{record}");
    println!(
        "requests the server saw: {}",
        executions.load(Ordering::SeqCst)
    );
    Ok(())
}
