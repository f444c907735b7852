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
//! After the group, under `cargo bench`, interleaved A/B checks print the median ratio ours /
//! raw at each size over 21 rounds, alternating: robust to the machine's speed drifting between
//! criterion's measurements; then the same with `mcp-method` and `mcp-name` sent by the client,
//! as MCP 2026-07-28 clients send them (the layer then has nothing to read in the body).
//! `NO_AB=1` skips them.
//!
//! Run: `cargo bench --bench signing`.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Layer, ServiceExt, service_fn};

#[path = "support/mod.rs"]
mod support;

use support::{
    REGION, call, credentials, current_thread_runtime, fixed_time, interleaved,
    interleaving_wanted, mcp_request, print_median, raw_signed, signer, time_ratio, timed,
    tools_call,
};

/// The authority of [`URI`].
const HOST: &str = "bedrock-agentcore.us-east-1.amazonaws.com";
/// Where our layer sends [`support::ARN`]'s invocations.
const URI: &str = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fbench_agent-AbCdEf1234/invocations";

/// The raw way at the fixed time, to [`URI`].
fn raw(uri: &http::Uri, body: &Bytes, identity: &Identity) -> Request<Full<Bytes>> {
    raw_signed(uri, HOST, REGION, fixed_time(), body, identity)
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
    let raw = raw(&URI.parse().unwrap(), body, identity);
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
    let runtime = current_thread_runtime();
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
            b.to_async(&runtime)
                .iter(|| async { black_box(call(&ours, body).await) })
        });
        group.bench_with_input(BenchmarkId::new("raw", label), &body, |b, body| {
            b.iter(|| black_box(raw(&uri, body, &identity)))
        });
        bodies.push((label, body));
    }
    group.finish();

    if interleaving_wanted() {
        // Then a client that names the method and the tool itself (as MCP 2026-07-28 requires
        // of every client): the layer has nothing to read in the body.
        for named in [false, true] {
            for (label, body) in &bodies {
                let calls = if body.len() > 4096 { 1_000 } else { 10_000 };
                let ratios = interleaved(
                    21,
                    || match named {
                        false => timed(&runtime, calls, || call(&ours, body)),
                        true => timed(&runtime, calls, || call_named(&ours, body)),
                    },
                    || {
                        let start = Instant::now();
                        for _ in 0..calls {
                            black_box(raw(&uri, body, &identity));
                        }
                        start.elapsed()
                    },
                    time_ratio,
                );
                let client = if named {
                    ", mcp-method and mcp-name sent by the client"
                } else {
                    ""
                };
                print_median(
                    &format!("signing {label}{client}: interleaved A/B, time per call ours / raw"),
                    &ratios,
                );
            }
        }
    }
}

/// One call through `service` of the benches' MCP request with `mcp-method` and `mcp-name` set
/// as the layer would set them: the same request on the wire.
async fn call_named<S: support::Callable>(service: &S, body: &Bytes) -> Bytes {
    let mut request = mcp_request(body);
    let headers = request.headers_mut();
    headers.insert("mcp-method", http::HeaderValue::from_static("tools/call"));
    headers.insert("mcp-name", http::HeaderValue::from_static("echo"));
    let response = service.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap().to_bytes()
}

criterion_group!(benches, signing);
criterion_main!(benches);
