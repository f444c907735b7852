//! The answer's redaction: for bodies built from the attempt's session token and signature —
//! plain, JSON-escaped character by character in any mix, cut short — among arbitrary bytes,
//! split arbitrarily into frames, echoed in a header and a trailer too: no secret survives in
//! what the app reads (as a JSON parser would decode it), and the body keeps its length.
#![no_main]

mod common;

use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use arbitrary::Arbitrary;
use aws_credential_types::Credentials;
use common::*;
use http::HeaderMap;
use http_body::Frame;
use libfuzzer_sys::fuzz_target;
use tower::{Layer, ServiceExt};

const TOKEN: &str = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+aB/cD+eF==";

#[derive(Clone, Debug, Arbitrary)]
enum Secret {
    Token,
    Signature,
}

#[derive(Clone, Debug, Arbitrary)]
enum Piece {
    Text(Vec<u8>),
    /// A secret, each character spelled as the seed's bits say: plain, `\uXXXX` (either case),
    /// or `\/` for a slash.
    Spelled { secret: Secret, seed: u64 },
    /// The first bytes of a secret.
    Start { secret: Secret, len: u8 },
}

#[derive(Debug, Arbitrary)]
struct Input {
    pieces: Vec<Piece>,
    cuts: Vec<u16>,
    error_after: bool,
    echo_in_header: bool,
}

fn spell(secret: &str, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for c in secret.chars() {
        let pick = seed % 4;
        seed = seed.rotate_right(2) ^ 0x9e37_79b9_7f4a_7c15;
        match pick {
            1 => out.extend(format!("\\u{:04x}", c as u32).bytes()),
            2 => out.extend(format!("\\u{:04X}", c as u32).bytes()),
            3 if c == '/' => out.extend(b"\\/"),
            _ => out.push(c as u8),
        }
    }
    out
}

/// What a JSON parser makes of a string's contents: escapes decoded.
fn decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'u' if i + 6 <= bytes.len() => {
                    if let Some(v) = std::str::from_utf8(&bytes[i + 2..i + 6])
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                    {
                        match char::from_u32(v) {
                            Some(c) => out.extend(c.to_string().bytes()),
                            None => out.push(b'?'),
                        }
                        i += 6;
                        continue;
                    }
                }
                b'/' | b'\\' | b'"' => {
                    out.push(bytes[i + 1]);
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fuzz_target!(|input: Input| {
    let Input { pieces, cuts, error_after, echo_in_header } = input;
    let inner = tower::service_fn(move |request: http::Request<http_body_util::Full<bytes::Bytes>>| {
        let signature = request.headers()["authorization"]
            .to_str()
            .unwrap()
            .rsplit("Signature=")
            .next()
            .unwrap()
            .to_owned();
        let secret = |s: &Secret| match s {
            Secret::Token => TOKEN.to_owned(),
            Secret::Signature => signature.clone(),
        };
        let mut body = Vec::new();
        for piece in &pieces {
            match piece {
                Piece::Text(t) => body.extend_from_slice(t),
                Piece::Spelled { secret: s, seed } => body.extend(spell(&secret(s), *seed)),
                Piece::Start { secret: s, len } => {
                    let s = secret(s);
                    body.extend_from_slice(&s.as_bytes()[..(*len as usize).min(s.len())]);
                }
            }
        }
        let mut at: Vec<usize> = cuts.iter().map(|c| *c as usize).filter(|c| *c < body.len()).collect();
        at.sort_unstable();
        at.dedup();
        let mut frames = Vec::new();
        let mut start = 0;
        for end in at.into_iter().chain(std::iter::once(body.len())) {
            frames.push(body[start..end].to_vec());
            start = end;
        }
        let sent = body.clone();
        let script = FuzzBody { frames, error_after, trailers: false };
        let mut body = script.into_body();
        if !error_after {
            let mut trailers = HeaderMap::new();
            trailers.insert("x-echo", TOKEN.parse().unwrap());
            body = body.then_frame(Ok(Frame::trailers(trailers)));
        }
        let mut response = http::Response::builder().header("content-length", sent.len());
        if echo_in_header {
            response = response
                .header("mcp-session-id", spell(TOKEN, 5).as_slice())
                .header("x-amzn-errortype", signature.as_str())
                .header("x-amzn-bedrock-agentcore-runtime-session-id", TOKEN);
        }
        let response = response.body(body).unwrap();
        async move { Ok::<_, Never>((response, sent, signature)) }
    });
    // The signer sees the response only; keep what was sent and the signature aside.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let inner = {
        let seen = seen.clone();
        tower::service_fn(move |request| {
            let inner = inner.clone();
            let seen = seen.clone();
            async move {
                let (response, sent, signature) = inner.oneshot(request).await?;
                *seen.lock().unwrap() = Some((sent, signature));
                Ok::<_, Never>(response)
            }
        })
    };
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/fuzz-AbC123"),
        Credentials::new("AKIDFUZZ", "fuzz-secret-key", Some(TOKEN.to_owned()), None, "fuzz"),
    )
    .build()
    .unwrap();
    let layer_id = signer.runtime_session_id();
    let svc = signer.clone().layer(inner);
    runtime().block_on(async move {
        let response = svc.oneshot(request(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec())).await.unwrap();
        let head = format!("{:?}", response.headers());
        let (read, error_at, trailers) = read(response.into_body()).await;
        let (sent, signature) = seen.lock().unwrap().take().unwrap();
        assert_eq!(read.len(), sent.len(), "the length is kept");
        if error_after {
            assert_eq!(error_at, Some(sent.len()));
        }
        assert!(!trailers, "no trailer reaches the app");
        let decoded = decode(&read);
        for secret in [TOKEN.as_bytes(), signature.as_bytes()] {
            for (what, text) in [("body", &read), ("decoded body", &decoded), ("head", &head.as_bytes().to_vec()), ("decoded head", &decode(head.as_bytes()))] {
                assert!(!contains(text, secret), "a secret survived in the {what}: {:?}", String::from_utf8_lossy(&read));
            }
        }
        assert_eq!(signer.runtime_session_id(), layer_id, "a secret is never adopted");
    });
});
