//! What the benches share: the fixed inputs (credentials, clock, the `tools/call` body, the
//! JSON-RPC answer, the MCP request), the in-memory services and SDK client, the wire request
//! signed by hand with aws-sigv4, and the interleaved A/B checks.
//!
//! Each bench includes this file with `#[path = "support/mod.rs"] mod support;` (cargo builds
//! no bench target from `benches/support/`: it has no `main.rs`). No bench uses every helper.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer};
use aws_credential_types::Credentials;
use aws_sdk_bedrockagentcore::config::retry::RetryConfig;
use aws_sdk_bedrockagentcore::config::{BehaviorVersion, Region};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_async::time::StaticTimeSource;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::Blob;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use criterion::BenchmarkGroup;
use criterion::measurement::WallTime;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::layer::util::{Identity as NoLayer, Stack};
use tower::util::ServiceFn;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

pub const ACCESS_KEY: &str = "AKIDEXAMPLE";
pub const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// A realistic STS session token, 700 characters: real ones are that long, and a short test
/// string would hide the per-byte costs of signing with it and of keeping it out of answers.
pub const SESSION_TOKEN: &str = concat!(
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+1mulWjODfx1gozRHRZTaqPIn0K8S0rC3vG",
    "tG9vAzeObfuHiIjYQgnsoVqMiqBGsC7i8GZnhJ+CRz+yXZgTObGnooGU1Lngz9JKechUlG+y+c04J6bd9oYuD2GqVd",
    "ovWbm3t5LNBYW575R85BlhXB7rqbGiMBDO8maMD6cDzP2HHYhits1zArKEkppPqQf/k4PgfJ1nZ9uQbTlK34xTSVo/",
    "k0IeVTe2p4Qkf/gYvAPq/J3LwfVJlJkr7pTTinxpS3Ngebbv3wiKnzaoBEHt+z2hm5U1bYauZdwJ6ZtQ94LQe3ydzw",
    "+qepxbW/B8M09MX/Dh8QZUgSEPl4GLlhnwhEDkJHjls9bNFvv95q/ucBOsTwOKFyO7SZ4GiCNMR8cnmmqC3LxA7Npp",
    "6H+L7mPTJpETZl1KNwH+00hezQcqdo8obMa7a43u3GZPfAhGhu2xFBDppWtoei45OQDR6T4AAWwwzMjYZSC7pT8c2u",
    "h58LWNf/fnNhgp5hyB5iUbbNEtOFYtpdaWUB+E601q7HDLIVkwETkXqUro+d6l1bV2n7nHqRpEAmMKuObLvU/8oR48",
    "bc1DeYJ0f8jlWr5SphjI8h5xBU0rBbH9kPuhumdEfD/J2EyschikHAguBcQ5EoLvEZZg==",
);
pub const REGION: &str = "us-east-1";
pub const ARN: &str =
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/bench_agent-AbCdEf1234";
pub const RUNTIME_SESSION: &str = "bench-runtime-session-000000000000000001";
pub const MCP_SESSION: &str = "mcp-session-3f1c2a9e-5b7d-4e21-9c0f-1a2b3c4d5e6f";
pub const PROTOCOL_VERSION: &str = "2025-06-18";
pub const ACCEPT: &str = "application/json, text/event-stream";

/// The fixed signing time.
pub fn fixed_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// Static credentials with a session token.
pub fn credentials() -> Credentials {
    Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        Some(SESSION_TOKEN.to_owned()),
        None,
        "bench",
    )
}

/// A current-thread tokio runtime, all drivers enabled.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A JSON-RPC message of exactly `size` bytes: `prefix`, padding inside a string, `suffix`.
pub fn padded_json(prefix: &str, suffix: &str, size: usize) -> Bytes {
    let mut text = String::with_capacity(size);
    text.push_str(prefix);
    text.extend(std::iter::repeat_n('x', size - prefix.len() - suffix.len()));
    text.push_str(suffix);
    assert_eq!(text.len(), size);
    serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
    Bytes::from(text)
}

/// A `tools/call` of `echo` of exactly `size` bytes.
pub fn tools_call(size: usize) -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#,
        r#""}}}"#,
        size,
    )
}

/// An answer to it of exactly `size` bytes.
pub fn answer(size: usize) -> Bytes {
    padded_json(
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#,
        r#""}],"isError":false}}"#,
        size,
    )
}

/// The MCP request the app hands our layers (the MCP headers and a runtime session id, no
/// `mcp-method`/`mcp-name`).
pub fn mcp_request(body: &Bytes) -> Request<Full<Bytes>> {
    mcp_request_owned(body.clone())
}

/// [`mcp_request`], taking the body.
pub fn mcp_request_owned(body: Bytes) -> Request<Full<Bytes>> {
    Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-session-id", MCP_SESSION)
        .header("mcp-protocol-version", PROTOCOL_VERSION)
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .body(Full::new(body))
        .unwrap()
}

/// The raw way: the wire request our layer sends to `uri` (`host` its authority), built by
/// hand with `mcp-method`/`mcp-name` given as values, signed with
/// `aws_sigv4::http_request::sign` (`SigningSettings::default()`, name `bedrock-agentcore`) at
/// `time`, the instructions applied to the request.
pub fn raw_signed(
    uri: &http::Uri,
    host: &str,
    region: &str,
    time: SystemTime,
    body: &Bytes,
    identity: &Identity,
) -> Request<Full<Bytes>> {
    let mut request = Request::post(uri.clone())
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-session-id", MCP_SESSION)
        .header("mcp-protocol-version", PROTOCOL_VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .header(
            "x-amzn-bedrock-agentcore-runtime-session-id",
            RUNTIME_SESSION,
        )
        .header("content-length", body.len())
        .header("host", host)
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
        .region(region)
        .name("bedrock-agentcore")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let (instructions, _signature) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(&mut request);
    request
}

/// The signer: [`ARN`], static credentials, the fixed clock, the runtime session.
pub fn signer() -> SigV4InvokeLayer {
    let time = fixed_time();
    SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), credentials())
        .runtime_session_id(RUNTIME_SESSION)
        .clock(move || time)
        .build()
        .unwrap()
}

/// The layers without signing, in the recommended order: guard → throttle → session busy.
pub type RetryLayers =
    Stack<SessionBusyRetryLayer, Stack<ThrottleRetryLayer, Stack<ReplayGuardLayer, NoLayer>>>;

/// [`RetryLayers`], to add an inner layer or a service to.
pub fn retry_layers() -> ServiceBuilder<RetryLayers> {
    ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
}

/// What the in-memory services are: cloneable, `Send`, never failing, answering a
/// `Full<Bytes>` request with a `Full<Bytes>` response through a `Send` future.
pub trait InMemory:
    Service<
        Request<Full<Bytes>>,
        Response = Response<Full<Bytes>>,
        Error = Infallible,
        Future: Send,
    > + Clone
    + Send
{
}

/// Every in-memory service here is a `service_fn` over a cloneable `Send` closure.
impl<F, Fut> InMemory for ServiceFn<F>
where
    F: FnMut(Request<Full<Bytes>>) -> Fut + Clone + Send,
    Fut: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send,
{
}

/// A response with `body` (HTTP 200, `content-type: application/json`, `content-length`), as
/// the in-memory services answer.
pub fn json_response(body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Full::new(body))
        .unwrap()
}

/// An in-memory service answering each request with [`json_response`] of the body
/// `answer_for` picks for it (it may also look at the request, or count).
pub fn answering(
    answer_for: impl Fn(&Request<Full<Bytes>>) -> Bytes + Clone + Send + 'static,
) -> impl InMemory {
    service_fn(move |request: Request<Full<Bytes>>| {
        let body = answer_for(&request);
        async move { Ok::<_, Infallible>(json_response(body)) }
    })
}

/// The in-memory service: answers every request with `answer` (HTTP 200,
/// `content-type: application/json`, `content-length`, body `Full<Bytes>`).
pub fn inner(answer: Bytes) -> impl InMemory {
    answering(move |_request| answer.clone())
}

/// Our full stack over the in-memory service: guard → throttle → session busy → SigV4.
pub fn our_stack(
    answer: Bytes,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<impl http_body::Body<Data = Bytes, Error = Infallible>>,
    Error = agentcore_tower::Error,
> + Clone {
    retry_layers().layer(signer()).service(inner(answer))
}

/// A service [`call`] can call: a stack of layers over an in-memory service (or the
/// in-memory service alone), whose answer's body it reads.
pub trait Callable:
    Service<Request<Full<Bytes>>, Response = Response<Self::Answer>, Error: std::fmt::Debug> + Clone
{
    /// The answer's body.
    type Answer: http_body::Body<Error: std::fmt::Debug>;
}

impl<S, B> Callable for S
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error: std::fmt::Debug> + Clone,
    B: http_body::Body<Error: std::fmt::Debug>,
{
    type Answer = B;
}

/// One call: the MCP request `oneshot` through a clone of `service`, the answer's body read to
/// bytes.
pub async fn call<S: Callable>(service: &S, body: &Bytes) -> Bytes {
    let response = service.clone().oneshot(mcp_request(body)).await.unwrap();
    debug_assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap().to_bytes()
}

/// Benches `one` as `name` in `group`: each iteration awaits one call on `runtime`, its output
/// kept from the optimiser.
pub fn bench_calls<F, Fut>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    one: F,
) where
    F: Fn() -> Fut,
    Fut: Future,
{
    group.bench_function(name, |b| {
        b.to_async(runtime)
            .iter(|| async { black_box(one().await) })
    });
}

/// The time of `calls` calls of `one`, one after the other, on `runtime`.
pub fn timed<F, Fut>(runtime: &tokio::runtime::Runtime, calls: u32, mut one: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    runtime.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            black_box(one().await);
        }
        start.elapsed()
    })
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

/// The SDK client, built once: static credentials with a session token, the fixed time
/// source, retries off, the SDK's other defaults, [`InMemoryHttpClient`] answering `answer`.
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

/// One SDK call (`mcp-method`/`mcp-name` given explicitly): the answer's bytes.
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

/// Whether to run the interleaved A/B checks: under `cargo bench` only (not `cargo test`,
/// not `--profile-time`, not `--list`), unless `NO_AB` is set.
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

/// Runs `a` then `b`, `rounds` times (after one round of warm-up); returns `f(a's time, b's
/// time)` per round, sorted: drift in the machine's speed hits both sides of a round alike.
pub fn interleaved(
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

/// `a`'s time over `b`'s: the ratio of their times per call (swapped: of their throughputs).
pub fn time_ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// Prints the median and the range of sorted values.
pub fn print_median(label: &str, values: &[f64]) {
    println!(
        "{label}: median {:.3} (min {:.3}, max {:.3}, {} rounds)",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
        values.len()
    );
}

/// A global allocator that counts allocations and their bytes while [`count_allocations`] is
/// on (a `realloc` counts as one allocation of its new size). A bench that wants it declares
/// `#[global_allocator] static ALLOCATOR: support::Counting = support::Counting;`; while
/// counting is off it costs one relaxed load per allocation.
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Allocations counted so far.
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated so far, while counting.
pub static BYTES: AtomicU64 = AtomicU64::new(0);

/// Turns counting on or off.
pub fn count_allocations(on: bool) {
    COUNTING.store(on, Ordering::SeqCst);
}

fn counted(size: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        counted(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        counted(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        counted(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Mean (allocations, bytes) per call over `calls` calls of `call` on `runtime`, process-wide
/// (whatever else runs on the runtime meanwhile — a server, a connection task — is counted).
pub fn allocations_per_call<F, Fut>(
    runtime: &tokio::runtime::Runtime,
    calls: u64,
    mut call: F,
) -> (f64, f64)
where
    F: FnMut() -> Fut,
    Fut: Future,
{
    runtime.block_on(async {
        let (count, bytes) = (
            ALLOCATIONS.load(Ordering::SeqCst),
            BYTES.load(Ordering::SeqCst),
        );
        count_allocations(true);
        for _ in 0..calls {
            black_box(call().await);
        }
        count_allocations(false);
        (
            (ALLOCATIONS.load(Ordering::SeqCst) - count) as f64 / calls as f64,
            (BYTES.load(Ordering::SeqCst) - bytes) as f64 / calls as f64,
        )
    })
}
