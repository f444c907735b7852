//! No secret reaches the app: a hostile endpoint over real HTTP/1.1 (hand-written, so it can send
//! chunked trailers without being asked) echoes the attempt's session token, signature and
//! anything else it received into every place of its answer — trailers, the error type, the
//! runtime session id, a body with an exact `Content-Length`, JSON-escaped forms. With a TRACE
//! subscriber capturing everything, none of the secret key, the session token, a signature nor the
//! URL's password appears in logs, errors, records, `Debug` output, headers, trailers or body
//! bytes the app reads.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agentcore_tower::auth::BearerToken;
use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{
    AttemptRecord, ReplayGuardLayer, recommended_layers,
    record::{ErrorType, Outcome},
};
use aws_credential_types::Credentials;
use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower::{ServiceBuilder, ServiceExt};

const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY";
const PASSWORD: &str = "hunter2-url-password";
const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// A realistic STS session token: about 700 characters of base64, `/` and `+` among them.
fn token() -> String {
    let mut token = String::from("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+");
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u32 = 7;
    while token.len() < 696 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        token.push(alphabet[(x >> 16) as usize % 64] as char);
    }
    token.push_str("Zg==");
    token
}

/// What the hostile server received of one request.
#[derive(Clone, Debug)]
struct Seen {
    signature: String,
    runtime_session: Option<String>,
}

/// JSON-escapes `text` as an encoder might: `/` as `\/`, `+` as `\u002B`.
fn escaped(text: &str) -> String {
    text.replace('/', "\\/").replace('+', "\\u002B")
}

/// Every character as `\uXXXX`, lower-case hex.
fn all_escaped(text: &str) -> String {
    text.chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect()
}

/// The answer to a request whose `tools/call` names `mode`: each one a way to hand back a secret.
fn answer(mode: &str, token: &str, signature: &str, echo: &str) -> String {
    let json = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    match mode {
        "trailers" => {
            let body = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\ntrailer: x-echo-token, x-echo-signature, x-amzn-errortype\r\nconnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\nx-echo-token: {token}\r\nx-echo-signature: {signature}\r\nx-amzn-errortype: {signature}\r\n\r\n",
                body.len()
            )
        }
        "errortype" => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-amzn-errortype: {signature}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        ),
        "errortype-400" => format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nx-amzn-errortype: {signature}:{token}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        ),
        "session" => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{RUNTIME_SESSION_ID}: {token}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        ),
        "length" => json(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"token":"{token}","signature":"{signature}"}}}}"#
        )),
        "escaped" => json(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"token":"{}","signature":"{}","all":"{}"}}}}"#,
            escaped(token),
            all_escaped(signature),
            all_escaped(token),
        )),
        "sse" => {
            // The token split over chunks, escaped, in an SSE event: chunked, no length.
            let event = format!(
                "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"t\":\"{}\"}}}}\n\n",
                escaped(token)
            );
            let mut out = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            );
            for chunk in event.as_bytes().chunks(37) {
                out.push_str(&format!(
                    "{:x}\r\n{}\r\n",
                    chunk.len(),
                    std::str::from_utf8(chunk).unwrap()
                ));
            }
            out.push_str("0\r\n\r\n");
            out
        }
        _ => json(
            &serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "result": {"echo": echo}}))
                .unwrap(),
        ),
    }
}

async fn hostile_server() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let record = record.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut read = BufReader::new(read);
                let mut head = String::new();
                let mut headers = Vec::new();
                loop {
                    let mut line = String::new();
                    if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push_str(&line);
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
                    }
                }
                let header = |name: &str| {
                    headers
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                };
                let length: usize = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length];
                read.read_exact(&mut body).await.unwrap();
                let authorization = header("authorization").unwrap_or_default();
                let signature = authorization
                    .rsplit("Signature=")
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                // A bearer token is echoed wherever a session token or a signature would be.
                let bearer = authorization.strip_prefix("Bearer ").map(str::to_owned);
                let signature = bearer.clone().unwrap_or(signature);
                let token = header("x-amz-security-token")
                    .or(bearer)
                    .unwrap_or_default();
                record.lock().unwrap().push(Seen {
                    signature: signature.clone(),
                    runtime_session: header(RUNTIME_SESSION_ID),
                });
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mode = request
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or("echo")
                    .to_owned();
                let echo = format!("{head}{}", String::from_utf8_lossy(&body));
                let _ = write
                    .write_all(answer(&mode, &token, &signature, &echo).as_bytes())
                    .await;
                let _ = write.shutdown().await;
            });
        }
    });
    (addr, seen)
}

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
    let signatures: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.signature.clone())
        .collect();
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

/// A JWT as long as a real access token (~900 characters), with its `-`, `_` and `.`.
fn jwt() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut x: u32 = 15;
    let mut part = |n: usize| -> String {
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                alphabet[(x >> 16) as usize % 64] as char
            })
            .collect()
    };
    format!("eyJ{}.eyJ{}.{}", part(100), part(500), part(300))
}

#[tokio::test(flavor = "current_thread")]
async fn a_hostile_echo_gets_no_bearer_token_to_the_app_by_any_path() {
    let logs = Logs::capture();

    let jwt = jwt();
    let (addr, seen) = hostile_server().await;
    let runtime = SigV4InvokeLayer::bearer(
        InvokeTarget::arn(ARN).endpoint(format!("http://{addr}")),
        BearerToken::new(jwt.clone()),
    )
    .build()
    .unwrap();
    let endpoint = McpEndpointLayer::bearer(BearerToken::new(jwt.clone()))
        .build()
        .unwrap();
    let mut everything = format!("{runtime:?} {endpoint:?}");
    let modes = [
        "trailers",
        "errortype",
        "errortype-400",
        "session",
        "length",
        "escaped",
        "sse",
        "echo",
    ];
    let runtime_stack = ServiceBuilder::new()
        .layer(recommended_layers(ReplayGuardLayer::new(), runtime.clone()))
        .service(http_client());
    let endpoint_stack = ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            endpoint.clone(),
        ))
        .service(http_client());
    for mode in modes {
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
    assert_eq!(seen.lock().unwrap().len(), 2 * modes.len());
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
