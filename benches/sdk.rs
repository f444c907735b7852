//! The official SDK's `invoke_agent_runtime()` against our full stack, both over an in-memory
//! HTTP client answering the same 300-byte JSON-RPC answer.
//!
//! One criterion group, `sdk`:
//! * `sdk` — `aws-sdk-bedrockagentcore`'s `invoke_agent_runtime()` (client built once: static
//!   credentials with a session token, a fixed time source, retries off, the SDK's other
//!   defaults), its HTTP client an in-memory one ([`InMemoryHttpClient`]); the answer's
//!   `ByteStream` collected to bytes.
//! * `ours` — guard → throttle → session busy → SigV4, over an in-memory service answering the
//!   same; an MCP POST with the same inputs (1 KiB `tools/call` body, content type, accept, MCP
//!   session id, protocol version, runtime session id); the answer body read to bytes.
//!
//! The SDK is given `mcp-method`/`mcp-name` explicitly (it never reads the payload); our layer
//! derives them from the body, so both put the same headers on the wire.
//!
//! Goal (from the issue): `ours` at most 0.33 × `sdk`. Nothing is asserted about time.
//!
//! After the group, under `cargo bench`, an interleaved A/B check prints the median ratio of
//! `ours` to `sdk` over 21 rounds of 2,000 calls each, alternating: a ratio robust to the
//! machine's speed drifting between criterion's two measurements. `NO_AB=1` skips it.
//!
//! `benches/allocations.rs` includes this file (`#[path]`) for the very same two setups.
//!
//! Run: `cargo bench --bench sdk`.

#![allow(dead_code)]

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentcore_tower::sigv4::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use aws_credential_types::Credentials;
use aws_sdk_bedrockagentcore::config::retry::RetryConfig;
use aws_sdk_bedrockagentcore::config::{BehaviorVersion, Region};
use aws_smithy_async::time::StaticTimeSource;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::Blob;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

pub const ACCESS_KEY: &str = "AKIDEXAMPLE";
pub const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
pub const SESSION_TOKEN: &str =
    "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+test/token=";
pub const REGION: &str = "us-east-1";
pub const ARN: &str =
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/bench_agent-AbCdEf1234";
pub const RUNTIME_SESSION: &str = "bench-runtime-session-000000000000000001";
pub const MCP_SESSION: &str = "mcp-session-3f1c2a9e-5b7d-4e21-9c0f-1a2b3c4d5e6f";
pub const PROTOCOL_VERSION: &str = "2025-06-18";
pub const ACCEPT: &str = "application/json, text/event-stream";

pub fn fixed_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

pub fn credentials() -> Credentials {
    Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        Some(SESSION_TOKEN.to_owned()),
        None,
        "bench",
    )
}

/// A JSON value of exactly `size` bytes: `prefix`, padding inside a string, `suffix`.
pub fn padded_json(prefix: &str, suffix: &str, size: usize) -> Bytes {
    let mut text = String::with_capacity(size);
    text.push_str(prefix);
    text.extend(std::iter::repeat_n('x', size - prefix.len() - suffix.len()));
    text.push_str(suffix);
    assert_eq!(text.len(), size);
    serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
    Bytes::from(text)
}

/// The 1 KiB `tools/call` of `echo`.
pub fn tools_call() -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#,
        r#""}}}"#,
        1024,
    )
}

/// The 300-byte answer.
pub fn answer() -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#,
        r#""}],"isError":false}}"#,
        300,
    )
}

/// The SDK's HTTP client: answers every request with the JSON answer, in memory.
#[derive(Clone, Debug)]
pub struct InMemoryHttpClient {
    answer: Bytes,
}

impl HttpConnector for InMemoryHttpClient {
    fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
        let response: HttpResponse = http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("content-length", self.answer.len())
            .body(SdkBody::from(self.answer.clone()))
            .expect("a valid response")
            .try_into()
            .expect("an http 1.x response converts");
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for InMemoryHttpClient {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// The SDK client, built once.
pub fn sdk_client(answer: Bytes) -> aws_sdk_bedrockagentcore::Client {
    let config = aws_sdk_bedrockagentcore::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(credentials())
        .http_client(InMemoryHttpClient { answer })
        .time_source(StaticTimeSource::new(fixed_time()))
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_bedrockagentcore::Client::from_conf(config)
}

/// One SDK call: the answer's bytes.
pub async fn sdk_call(client: &aws_sdk_bedrockagentcore::Client, body: &Bytes) -> Bytes {
    let output = client
        .invoke_agent_runtime()
        .agent_runtime_arn(ARN)
        .runtime_session_id(RUNTIME_SESSION)
        .content_type("application/json")
        .accept(ACCEPT)
        .mcp_session_id(MCP_SESSION)
        .mcp_protocol_version(PROTOCOL_VERSION)
        .mcp_method("tools/call")
        .mcp_name("echo")
        .payload(Blob::new(body.to_vec()))
        .send()
        .await
        .expect("the SDK call succeeds");
    output
        .response
        .collect()
        .await
        .expect("the answer body")
        .into_bytes()
}

/// The in-memory service under our stack: answers the JSON answer.
pub fn inner(
    answer: Bytes,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send {
    service_fn(move |_request: Request<Full<Bytes>>| {
        let answer = answer.clone();
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .header("content-length", answer.len())
                    .body(Full::new(answer))
                    .unwrap(),
            )
        }
    })
}

/// The signer: static credentials, the fixed clock, the runtime session.
pub fn signer() -> SigV4InvokeLayer {
    let time = fixed_time();
    SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), credentials())
        .runtime_session_id(RUNTIME_SESSION)
        .clock(move || time)
        .build()
        .unwrap()
}

/// Our full stack over the in-memory service.
pub fn our_stack(
    answer: Bytes,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<impl http_body::Body<Data = Bytes, Error = Infallible>>,
    Error = agentcore_tower::Error,
> + Clone {
    ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .layer(signer())
        .service(inner(answer))
}

/// The MCP request the app sends through our stack.
pub fn mcp_request(body: &Bytes) -> Request<Full<Bytes>> {
    Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-session-id", MCP_SESSION)
        .header("mcp-protocol-version", PROTOCOL_VERSION)
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .body(Full::new(body.clone()))
        .unwrap()
}

/// One call through our stack: the answer's bytes.
pub async fn our_call<S, B>(stack: &S, body: &Bytes) -> Bytes
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = stack.clone().oneshot(mcp_request(body)).await.unwrap();
    debug_assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap().to_bytes()
}

fn sdk(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = tools_call();
    let answer = answer();
    let client = sdk_client(answer.clone());
    let stack = our_stack(answer.clone());
    runtime.block_on(async {
        assert_eq!(sdk_call(&client, &body).await, answer);
        assert_eq!(our_call(&stack, &body).await, answer);
    });

    let mut group = c.benchmark_group("sdk");
    group.bench_function("sdk", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(sdk_call(&client, &body).await) })
    });
    group.bench_function("ours", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(our_call(&stack, &body).await) })
    });
    group.finish();

    if interleaving_wanted() {
        let block = |calls: u32, sdk: bool| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..calls {
                    if sdk {
                        black_box(sdk_call(&client, &body).await);
                    } else {
                        black_box(our_call(&stack, &body).await);
                    }
                }
                start.elapsed()
            })
        };
        let ratios = interleaved(21, || block(2000, false), || block(2000, true));
        print_ratios("sdk: interleaved A/B, time per call ours / sdk", &ratios);
    }
}

/// Whether to run the interleaved A/B check: under `cargo bench` only (not `cargo test`,
/// not `--profile-time`, not `--list`).
pub fn interleaving_wanted() -> bool {
    if std::env::var_os("NO_AB").is_some() {
        return false;
    }
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench")
        && !args
            .iter()
            .any(|a| a == "--profile-time" || a == "--test" || a == "--list")
}

/// Runs `a` then `b`, `rounds` times (after one round of warm-up) and returns the ratios of
/// their times, sorted: drift in the machine's speed hits both sides of a round alike.
pub fn interleaved(
    rounds: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> Vec<f64> {
    a();
    b();
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|_| a().as_secs_f64() / b().as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// Prints the median and the range of sorted ratios.
pub fn print_ratios(label: &str, ratios: &[f64]) {
    println!(
        "{label}: median {:.3} (min {:.3}, max {:.3}, {} rounds)",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        ratios.len()
    );
}

criterion_group!(benches, sdk);
criterion_main!(benches);
