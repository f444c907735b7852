//! `SigV4InvokeLayer` per call against a raw `aws_sigv4::http_request::sign` of the same
//! request, for a 1 KiB and a 64 KiB `tools/call` body.
//!
//! One criterion group, `signing`:
//! * `ours/{1KiB,64KiB}` — an MCP POST (the MCP headers and a runtime session id, no
//!   `mcp-method`/`mcp-name`) `oneshot` through `SigV4InvokeLayer` (static credentials with a
//!   session token, a fixed clock) over an in-memory service answering an empty 200; the answer
//!   body read. The layer maps the request (it derives `mcp-method`/`mcp-name` from the body),
//!   resolves the credentials, signs, and wraps the answer.
//! * `raw/{1KiB,64KiB}` — the request our layer puts on the wire, built with `http::Request`'s
//!   builder (the same URI and headers, `mcp-method`/`mcp-name` given as values), signed with
//!   `aws_sigv4::http_request::sign` (`SigningSettings::default()`, name `bedrock-agentcore`),
//!   the instructions applied to the request. The identity is built once, outside the loop.
//!
//! Before measuring, both are checked to produce the same request, `authorization` included.
//! Goal (from the issue): `ours` at most 1.15 × `raw` at each size. Nothing is asserted about
//! time here.
//!
//! After the group, under `cargo bench`, an interleaved A/B check prints the median ratio ours /
//! raw at each size over 21 rounds, alternating: robust to the machine's speed drifting between
//! criterion's measurements. `NO_AB=1` skips it.
//!
//! Run: `cargo bench --bench signing`.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentcore_tower::sigv4::{InvokeTarget, SigV4InvokeLayer};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Layer, ServiceExt, service_fn};

const ACCESS_KEY: &str = "AKIDEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SESSION_TOKEN: &str =
    "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+test/token=";
const REGION: &str = "us-east-1";
const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/bench_agent-AbCdEf1234";
const HOST: &str = "bedrock-agentcore.us-east-1.amazonaws.com";
const URI: &str = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fbench_agent-AbCdEf1234/invocations";
const RUNTIME_SESSION: &str = "bench-runtime-session-000000000000000001";
const MCP_SESSION: &str = "mcp-session-3f1c2a9e-5b7d-4e21-9c0f-1a2b3c4d5e6f";

fn fixed_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn credentials() -> Credentials {
    Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        Some(SESSION_TOKEN.to_owned()),
        None,
        "bench",
    )
}

/// A `tools/call` of `echo` of exactly `size` bytes.
fn tools_call(size: usize) -> Bytes {
    let prefix = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
    let suffix = r#""}}}"#;
    let mut text = String::with_capacity(size);
    text.push_str(prefix);
    text.extend(std::iter::repeat_n('x', size - prefix.len() - suffix.len()));
    text.push_str(suffix);
    assert_eq!(text.len(), size);
    Bytes::from(text)
}

/// The MCP request the app hands our layer.
fn mcp_request(body: &Bytes) -> Request<Full<Bytes>> {
    Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", MCP_SESSION)
        .header("mcp-protocol-version", "2025-06-18")
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .body(Full::new(body.clone()))
        .unwrap()
}

/// The raw way: the wire request built by hand, signed with aws-sigv4.
fn raw_signed(uri: &http::Uri, body: &Bytes, identity: &Identity) -> Request<Full<Bytes>> {
    let mut request = Request::post(uri.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", MCP_SESSION)
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .header("content-length", body.len())
        .header("host", HOST)
        .body(Full::new(body.clone()))
        .unwrap();
    let uri_text = request.uri().to_string();
    let signable = SignableRequest::new(
        "POST",
        &uri_text,
        request
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap())),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region(REGION)
        .name("bedrock-agentcore")
        .time(fixed_time())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let (instructions, _signature) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(&mut request);
    request
}

fn signer() -> SigV4InvokeLayer {
    let time = fixed_time();
    SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), credentials())
        .runtime_session_id(RUNTIME_SESSION)
        .clock(move || time)
        .build()
        .unwrap()
}

/// Checks that ours and raw put the same request on the wire, signature included.
fn check_same_request(runtime: &tokio::runtime::Runtime, body: &Bytes, identity: &Identity) {
    let captured = Arc::new(Mutex::new(None));
    let service = signer().layer(service_fn({
        let captured = captured.clone();
        move |request: Request<Full<Bytes>>| {
            let captured = captured.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                *captured.lock().unwrap() = Some((parts, body));
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }
        }
    }));
    let response = runtime
        .block_on(service.oneshot(mcp_request(body)))
        .unwrap();
    assert_eq!(response.status(), 200);
    let (ours, ours_body) = captured.lock().unwrap().take().unwrap();
    let raw = raw_signed(&URI.parse().unwrap(), body, identity);
    assert_eq!(ours.uri.to_string(), URI);
    assert_eq!(ours.uri, *raw.uri());
    assert_eq!(ours.method, *raw.method());
    let sorted = |h: &http::HeaderMap| {
        let mut v: Vec<_> = h
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&ours.headers), sorted(raw.headers()));
    assert_eq!(&ours_body, body);
}

fn signing(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let identity: Identity = credentials().into();
    let uri: http::Uri = URI.parse().unwrap();
    let ours = signer().layer(service_fn(|_request: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    }));

    let mut group = c.benchmark_group("signing");
    let mut bodies = Vec::new();
    for (label, size) in [("1KiB", 1024), ("64KiB", 64 * 1024)] {
        let body = tools_call(size);
        check_same_request(&runtime, &body, &identity);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("ours", label), &body, |b, body| {
            b.to_async(&runtime).iter(|| async {
                let response = ours.clone().oneshot(mcp_request(body)).await.unwrap();
                black_box(response.into_body().collect().await.unwrap().to_bytes())
            })
        });
        group.bench_with_input(BenchmarkId::new("raw", label), &body, |b, body| {
            b.iter(|| black_box(raw_signed(&uri, body, &identity)))
        });
        bodies.push((label, body));
    }
    group.finish();

    if interleaving_wanted() {
        for (label, body) in &bodies {
            let calls = if body.len() > 4096 { 1_000 } else { 10_000 };
            let ratios = interleaved(
                21,
                || {
                    runtime.block_on(async {
                        let start = Instant::now();
                        for _ in 0..calls {
                            let response = ours.clone().oneshot(mcp_request(body)).await.unwrap();
                            black_box(response.into_body().collect().await.unwrap().to_bytes());
                        }
                        start.elapsed()
                    })
                },
                || {
                    let start = Instant::now();
                    for _ in 0..calls {
                        black_box(raw_signed(&uri, body, &identity));
                    }
                    start.elapsed()
                },
                |a, b| a.as_secs_f64() / b.as_secs_f64(),
            );
            print_median(
                &format!("signing {label}: interleaved A/B, time per call ours / raw"),
                &ratios,
            );
        }
    }
}

/// Whether to run the interleaved A/B checks: under `cargo bench` only (not `cargo test`,
/// not `--profile-time`, not `--list`), unless `NO_AB` is set.
fn interleaving_wanted() -> bool {
    if std::env::var_os("NO_AB").is_some() {
        return false;
    }
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench")
        && !args
            .iter()
            .any(|a| a == "--profile-time" || a == "--test" || a == "--list")
}

/// Runs `a` then `b`, `rounds` times (after one round of warm-up); returns `f(a's time, b's
/// time)` per round, sorted: drift in the machine's speed hits both sides of a round alike.
fn interleaved(
    rounds: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
    f: impl Fn(Duration, Duration) -> f64,
) -> Vec<f64> {
    a();
    b();
    let mut values: Vec<f64> = (0..rounds)
        .map(|_| {
            let a = a();
            f(a, b())
        })
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Prints the median and the range of sorted values.
fn print_median(label: &str, values: &[f64]) {
    println!(
        "{label}: median {:.3} (min {:.3}, max {:.3}, {} rounds)",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
        values.len()
    );
}

criterion_group!(benches, signing);
criterion_main!(benches);
