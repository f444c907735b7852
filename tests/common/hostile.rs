//! A hostile MCP endpoint over real HTTP/1.1 (hand-written, so it can send chunked trailers
//! without being asked) that echoes the attempt's session token, signature or bearer token and
//! anything else it received into every place of its answer, and the secrets it is handed: for
//! the tests that no secret gets out (`tests/layers/secrets.rs`, `interop/tests/it/opentelemetry_export.rs`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

pub const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123";
pub const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY";
pub const PASSWORD: &str = "hunter2-url-password";
pub const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

/// A realistic STS session token: about 700 characters of base64, `/` and `+` among them.
pub fn token() -> String {
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
pub struct Seen {
    pub signature: String,
    pub runtime_session: Option<String>,
}

/// The signatures of every request the hostile server received, in order.
pub fn signatures(seen: &Mutex<Vec<Seen>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|s| s.signature.clone())
        .collect()
}

/// JSON-escapes `text` as an encoder might: `/` as `\/`, `+` as `\u002B`.
pub fn escaped(text: &str) -> String {
    text.replace('/', "\\/").replace('+', "\\u002B")
}

/// Every character as `\uXXXX`, lower-case hex.
pub fn all_escaped(text: &str) -> String {
    text.chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect()
}

/// The modes of [`answer`] that answer once, each a way to hand back a secret.
pub const MODES: [&str; 8] = [
    "trailers",
    "errortype",
    "errortype-400",
    "session",
    "length",
    "escaped",
    "sse",
    "echo",
];

/// The modes that put the secret in the AWS request id (`aws.request_id` in the spans): in a
/// 200, and in a 429 that is re-sent.
pub const REQUEST_ID_MODES: [&str; 2] = ["requestid", "requestid-429"];

/// The two doors of a runtime with OAuth inbound auth, both with the bearer token `jwt`:
/// `SigV4InvokeLayer` to the hostile server at `addr`, and `McpEndpointLayer` (which sends
/// where each request says).
pub fn bearer_doors(
    addr: SocketAddr,
    jwt: &str,
) -> (
    agentcore_tower::invoke::SigV4InvokeLayer,
    agentcore_tower::endpoint::McpEndpointLayer,
) {
    use agentcore_tower::auth::BearerToken;
    let runtime = agentcore_tower::invoke::SigV4InvokeLayer::bearer(
        agentcore_tower::invoke::InvokeTarget::arn(ARN).endpoint(format!("http://{addr}")),
        BearerToken::new(jwt.to_owned()),
    )
    .build()
    .unwrap();
    let endpoint =
        agentcore_tower::endpoint::McpEndpointLayer::bearer(BearerToken::new(jwt.to_owned()))
            .build()
            .unwrap();
    (runtime, endpoint)
}

/// The answer to a request whose `tools/call` names `mode`: each one a way to hand back a secret.
pub fn answer(mode: &str, token: &str, signature: &str, echo: &str) -> String {
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
        // The AWS request id, which spans record as `aws.request_id`: in a 200 and in a 429.
        "requestid" => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-amzn-requestid: {signature}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        ),
        "requestid-429" => format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nx-amzn-requestid: {token}\r\nx-amzn-errortype: ThrottlingException\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
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

pub async fn hostile_server() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
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

/// A JWT as long as a real access token (~900 characters), with its `-`, `_` and `.`.
pub fn jwt() -> String {
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
