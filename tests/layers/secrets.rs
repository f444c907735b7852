//! No secret reaches the app: a hostile endpoint over real HTTP/1.1 (hand-written, so it can send
//! chunked trailers without being asked) echoes the attempt's session token, signature and
//! anything else it received into every place of its answer — trailers, the error type, the
//! runtime session id, a body with an exact `Content-Length`, JSON-escaped forms. With a TRACE
//! subscriber capturing everything, none of the secret key, the session token, a signature nor the
//! URL's password appears in logs, errors, records, `Debug` output, headers, trailers or body
//! bytes the app reads.

use crate::common;

use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{
    AttemptRecord, ReplayGuardLayer, recommended_layers,
    record::{ErrorType, Outcome},
};
use aws_credential_types::Credentials;
use bytes::Bytes;
use common::hostile::*;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

fn call(mode: &str) -> Request<Full<Bytes>> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": mode, "arguments": {}}});
    Request::post(format!("http://user:{PASSWORD}@mcp.invalid/mcp?key=value"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// What the app can read of one call, as text.
struct Read {
    everything: String,
    body: Bytes,
    content_length: Option<usize>,
    trailers: Option<http::HeaderMap>,
    record: AttemptRecord,
}

async fn read(
    stack: impl tower::Service<
        Request<Full<Bytes>>,
        Response = http::Response<
            impl http_body::Body<Data = Bytes, Error = impl std::fmt::Debug> + Send + std::fmt::Debug,
        >,
        Error = agentcore_tower::Error,
    >,
    mode: &str,
) -> Read {
    read_response(stack.oneshot(call(mode)).await.unwrap()).await
}

async fn read_response(
    response: http::Response<
        impl http_body::Body<Data = Bytes, Error = impl std::fmt::Debug> + Send + std::fmt::Debug,
    >,
) -> Read {
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let content_length = response
        .headers()
        .get("content-length")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let head = format!("{response:?} {:?}", response.headers());
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    let body = collected.to_bytes();
    // What a JSON parser makes of the body, too: escapes decoded.
    let parsed = serde_json::from_slice::<Value>(&body)
        .map(|v| v.to_string().replace("\\/", "/"))
        .unwrap_or_default();
    let sse_parsed: String = String::from_utf8_lossy(&body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .map(|v| v.to_string())
        .collect();
    let everything = format!(
        "{head} {} {parsed} {sse_parsed} {trailers:?} {record} {record:?}",
        String::from_utf8_lossy(&body)
    );
    Read {
        everything,
        body,
        content_length,
        trailers,
        record,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_hostile_echo_gets_no_secret_to_the_app_by_any_path() {
    let logs = Logs::capture();

    let token = token();
    assert!((690..=710).contains(&token.len()));
    let (addr, seen) = hostile_server().await;
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn(ARN).endpoint(format!("http://{addr}")),
        Credentials::new("AKIDHOSTILE", SECRET_KEY, Some(token.clone()), None, "test"),
    )
    .build()
    .unwrap();
    let layer_id = signer.runtime_session_id();
    let stack = ServiceBuilder::new()
        .layer(recommended_layers(ReplayGuardLayer::new(), signer.clone()))
        .service(http_client());

    let mut everything = String::new();
    // 1. Trailers: none reaches the app (the operation models none).
    let trailers = read(stack.clone(), "trailers").await;
    assert_eq!(trailers.trailers, None);
    assert_eq!(
        &trailers.body[..],
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#
    );
    everything.push_str(&trailers.everything);

    // 2. The error type, in a 200 and in a 400: recorded as unrecognised, never verbatim.
    for mode in ["errortype", "errortype-400"] {
        let read = read(stack.clone(), mode).await;
        let attempts = read.record.attempts();
        assert!(
            matches!(
                attempts[0].outcome(),
                Outcome::Response {
                    error_type: ErrorType::Unrecognised,
                    ..
                }
            ),
            "{mode}: {}",
            read.record
        );
        everything.push_str(&read.everything);
    }

    // 3. The runtime session id: never adopted from a redacted (secret-bearing) answer.
    let session = read(stack.clone(), "session").await;
    everything.push_str(&session.everything);
    assert_eq!(signer.runtime_session_id(), layer_id);
    let after = read(stack.clone(), "echo").await;
    everything.push_str(&after.everything);
    let sent: Vec<Seen> = seen.lock().unwrap().clone();
    assert_eq!(
        sent.last().unwrap().runtime_session.as_deref(),
        Some(layer_id.as_str()),
        "later requests carry the layer's own id"
    );

    // 4. An exact Content-Length stays exact after masking.
    let length = read(stack.clone(), "length").await;
    assert_eq!(length.content_length, Some(length.body.len()));
    everything.push_str(&length.everything);

    // 5. Escaped echoes, and an SSE stream cut into chunks mid-token.
    for mode in ["escaped", "sse"] {
        let read = read(stack.clone(), mode).await;
        if let Some(n) = read.content_length {
            assert_eq!(n, read.body.len());
        }
        assert!(
            read.everything.contains("[redacted]"),
            "{mode}: the echo is there"
        );
        everything.push_str(&read.everything);
    }

    // 6. The URL's password, and everything else echoed at once.
    let echo = read(stack.clone(), "echo").await;
    assert!(echo.everything.contains("x-amz-date"), "the echo is there");
    everything.push_str(&echo.everything);
    everything.push_str(&format!("{signer:?} {stack:?}"));

    let logs = logs.text();
    assert!(logs.contains("url.full="), "TRACE logging was on");
    let signatures = signatures(&seen);
    assert_eq!(signatures.len(), 9);
    for (what, text) in [("what the app read", &everything), ("logs", &logs)] {
        assert!(!text.contains(SECRET_KEY), "{what} has the secret key");
        assert!(!text.contains(&token), "{what} has the session token");
        assert!(
            !text.contains(&escaped(&token)),
            "{what} has the escaped token"
        );
        assert!(!text.contains(PASSWORD), "{what} has the URL's password");
        for signature in &signatures {
            assert_eq!(signature.len(), 64);
            assert!(!text.contains(signature.as_str()), "{what} has a signature");
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_hostile_echo_gets_no_bearer_token_to_the_app_by_any_path() {
    let logs = Logs::capture();

    let jwt = jwt();
    let (addr, seen) = hostile_server().await;
    let (runtime, endpoint) = bearer_doors(addr, &jwt);
    let mut everything = format!("{runtime:?} {endpoint:?}");
    let runtime_stack = ServiceBuilder::new()
        .layer(recommended_layers(ReplayGuardLayer::new(), runtime.clone()))
        .service(http_client());
    let endpoint_stack = ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            endpoint.clone(),
        ))
        .service(http_client());
    for mode in MODES {
        let runtime = read(runtime_stack.clone(), mode).await;
        let mut request = call(mode);
        *request.uri_mut() = format!("http://{addr}/mcp").parse().unwrap();
        let endpoint = endpoint_stack.clone().oneshot(request).await.unwrap();
        let endpoint = read_response(endpoint).await;
        for (door, read) in [("runtime", &runtime), ("endpoint", &endpoint)] {
            assert_eq!(read.trailers, None, "{door} {mode}");
            if let Some(n) = read.content_length {
                assert_eq!(
                    n,
                    read.body.len(),
                    "{door} {mode}: Content-Length stays exact"
                );
            }
            if matches!(mode, "length" | "escaped" | "sse" | "echo") {
                assert!(
                    read.everything.contains("[redacted]"),
                    "{door} {mode}: the echo is there"
                );
            }
            everything.push_str(&read.everything);
        }
    }
    assert_eq!(seen.lock().unwrap().len(), 2 * MODES.len());
    assert!(
        seen.lock().unwrap().iter().all(|s| s.signature == jwt),
        "the server got the token"
    );
    let logs = logs.text();
    assert!(logs.contains("url.full="), "TRACE logging was on");
    for (what, text) in [("what the app read", &everything), ("logs", &logs)] {
        assert!(!text.contains(&jwt), "{what} has the token");
        assert!(
            !text.contains(&all_escaped(&jwt)),
            "{what} has the escaped token"
        );
        // No stretch of it long enough to tell either.
        assert!(
            !text.contains(&jwt[200..240]),
            "{what} has part of the token"
        );
    }
}
