//! Test doubles shared by the integration tests.
#![allow(dead_code)]

pub mod hostile;
pub mod loopback;
pub mod stack;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type TestBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// What a scripted service does for one call.
pub enum Step {
    /// Answer with this response.
    Respond(Response<TestBody>),
    /// Fail with this error.
    Fail(BoxError),
}

/// A builder of responses with a `Full` body.
pub fn response(status: u16, headers: &[(&str, &str)], body: &'static [u8]) -> Response<TestBody> {
    let mut builder = Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder
        .body(boxed(Full::new(Bytes::from_static(body))))
        .unwrap()
}

pub fn boxed<B>(body: B) -> TestBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

/// A service that answers from a script, records what it was sent, and asserts that it was
/// polled ready before every call (per instance: a clone is not ready, as tower requires).
pub struct Scripted {
    shared: Arc<Shared>,
    ready: bool,
}

pub struct Shared {
    script: Mutex<VecDeque<Step>>,
    pub calls: AtomicUsize,
    pub requests: Mutex<Vec<(http::request::Parts, Bytes)>>,
    pub unready_calls: AtomicUsize,
    /// Called when the script runs out.
    fallback: Box<dyn Fn() -> Step + Send + Sync>,
}

impl Scripted {
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self::with_fallback(steps, || panic!("the script ran out"))
    }

    pub fn with_fallback(
        steps: impl IntoIterator<Item = Step>,
        fallback: impl Fn() -> Step + Send + Sync + 'static,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                script: Mutex::new(steps.into_iter().collect()),
                calls: AtomicUsize::new(0),
                requests: Mutex::new(Vec::new()),
                unready_calls: AtomicUsize::new(0),
                fallback: Box::new(fallback),
            }),
            ready: false,
        }
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl Shared {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Clone for Scripted {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            ready: false,
        }
    }
}

impl<B> tower::Service<Request<B>> for Scripted
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Debug,
{
    type Response = Response<TestBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<TestBody>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if !std::mem::replace(&mut self.ready, false) {
            self.shared.unready_calls.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.calls.fetch_add(1, Ordering::SeqCst);
        let step = self
            .shared
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| (self.shared.fallback)());
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.expect("request body").to_bytes();
            shared.requests.lock().unwrap().push((parts, bytes));
            match step {
                Step::Respond(response) => Ok(response),
                Step::Fail(error) => Err(error),
            }
        })
    }
}

/// `request` with the MCP headers of a `tools/call` of `add` (`mcp-method`, `mcp-name`).
pub fn with_mcp_headers<B>(mut request: Request<B>) -> Request<B> {
    let headers = request.headers_mut();
    headers.insert("mcp-method", http::HeaderValue::from_static("tools/call"));
    headers.insert("mcp-name", http::HeaderValue::from_static("add"));
    request
}

/// A `Full` JSON request body.
pub fn json_request(body: &'static str) -> Request<Full<Bytes>> {
    Request::post("https://runtime.example/mcp?secret=query")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

pub const TOOLS_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"charge","arguments":{"cents":100}}}"#;

/// Reads a body to its bytes and trailers.
pub async fn read_all<B>(body: B) -> (Bytes, Option<http::HeaderMap>)
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let collected = body.collect().await.expect("body");
    let trailers = collected.trailers().cloned();
    (collected.to_bytes(), trailers)
}

/// An always-ready service that never errs, for `Infallible` doubles.
pub fn infallible<F, Fut>(f: F) -> tower::util::ServiceFn<F>
where
    F: FnMut(Request<Full<Bytes>>) -> Fut,
    Fut: std::future::Future<Output = Result<Response<TestBody>, Infallible>>,
{
    tower::service_fn(f)
}

/// A body from a list of frames (and errors), which counts how often it was polled and says
/// when it was dropped. With `hang`, it stays pending after its frames instead of ending.
pub struct ScriptedBody {
    frames: VecDeque<Result<http_body::Frame<Bytes>, BoxError>>,
    hang: bool,
    pub probe: BodyProbe,
}

#[derive(Clone, Default)]
pub struct BodyProbe {
    pub polls: Arc<AtomicUsize>,
    pub dropped: Arc<std::sync::atomic::AtomicBool>,
}

impl BodyProbe {
    pub fn polls(&self) -> usize {
        self.polls.load(Ordering::SeqCst)
    }
    pub fn dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }
}

impl ScriptedBody {
    pub fn new(frames: Vec<Result<http_body::Frame<Bytes>, BoxError>>) -> Self {
        Self {
            frames: frames.into(),
            hang: false,
            probe: BodyProbe::default(),
        }
    }
    pub fn data(chunks: &[&[u8]]) -> Self {
        Self::new(
            chunks
                .iter()
                .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
                .collect(),
        )
    }
    pub fn hanging(mut self) -> Self {
        self.hang = true;
        self
    }
    pub fn probe(&self) -> BodyProbe {
        self.probe.clone()
    }
}

impl Drop for ScriptedBody {
    fn drop(&mut self) {
        self.probe.dropped.store(true, Ordering::SeqCst);
    }
}

impl http_body::Body for ScriptedBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        self.probe.polls.fetch_add(1, Ordering::SeqCst);
        match self.frames.pop_front() {
            Some(frame) => Poll::Ready(Some(frame)),
            None if self.hang => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

/// A response with a scripted body.
pub fn scripted_response(
    status: u16,
    headers: &[(&str, &str)],
    body: ScriptedBody,
) -> Response<TestBody> {
    let mut builder = Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(boxed(body)).unwrap()
}

/// A real HTTP/1 server on 127.0.0.1 (an ephemeral port) answering with `handler`, which sees
/// each request's head and whole body. Stops when the returned guard is dropped.
pub struct LocalServer {
    pub addr: std::net::SocketAddr,
    _serving: loopback::Serving,
}

pub type Handler = Arc<dyn Fn(http::request::Parts, Bytes) -> Response<Full<Bytes>> + Send + Sync>;

pub async fn serve(
    handler: impl Fn(http::request::Parts, Bytes) -> Response<Full<Bytes>> + Send + Sync + 'static,
) -> LocalServer {
    let handler: Handler = Arc::new(handler);
    let (addr, serving) =
        loopback::serve_loopback(move |request: Request<hyper::body::Incoming>| {
            let handler = handler.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = body
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                handler(parts, bytes)
            }
        })
        .await;
    LocalServer {
        addr,
        _serving: serving,
    }
}

/// A POST of `body` to `url` as an MCP client sends it (JSON, either kind of answer
/// accepted), in the MCP session `session` when there is one.
pub fn mcp_post(url: &str, session: Option<&str>, body: impl Into<Bytes>) -> Request<Full<Bytes>> {
    let mut request = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(Full::new(body.into())).unwrap()
}

/// A JSON-RPC request for `method` with `params`, as an MCP client posts it.
pub fn rpc_request(id: u64, method: &str, params: serde_json::Value) -> Request<Full<Bytes>> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    mcp_post("http://agentcore.invalid/mcp", None, body.to_string())
}

/// A `tools/call` of `name` with `arguments`.
pub fn tool_call(id: u64, name: &str, arguments: serde_json::Value) -> Request<Full<Bytes>> {
    rpc_request(
        id,
        "tools/call",
        serde_json::json!({"name": name, "arguments": arguments}),
    )
}

/// An answer read whole, as it came: its status, its headers and its body as text.
#[derive(Debug)]
pub struct Raw {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub text: String,
}

impl Raw {
    /// Reads `response` whole.
    pub async fn read<B>(response: Response<B>) -> Self
    where
        B: http_body::Body,
        B::Error: std::fmt::Debug,
    {
        let (parts, body) = response.into_parts();
        let (bytes, _) = read_all(body).await;
        Self {
            status: parts.status,
            headers: parts.headers,
            text: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    /// Header `name`'s value, when the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or(serde_json::Value::Null)
    }
}

/// hyper-util's legacy client over plain HTTP, as [`http_client`] builds it.
pub type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// hyper-util's legacy client, as users stack it under the layers.
pub fn http_client() -> HttpClient {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// What a server in front of the network answers itself ([`answer_or_forward`]): the answer to
/// a request it takes, `None` for a request it lets through.
pub trait Answerer:
    Fn(&Request<Full<Bytes>>) -> Option<Response<Full<Bytes>>> + Clone + Send + Sync + 'static
{
}

impl<F> Answerer for F where
    F: Fn(&Request<Full<Bytes>>) -> Option<Response<Full<Bytes>>> + Clone + Send + Sync + 'static
{
}

/// An HTTP client standing for a server that answers some requests itself: what `answer`
/// gives a request is its answer, and a request it gives nothing for goes on to the network
/// through [`http_client`].
pub fn answer_or_forward(
    answer: impl Answerer,
) -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = Response<http_body_util::Either<hyper::body::Incoming, Full<Bytes>>>,
    Error = hyper_util::client::legacy::Error,
    Future = impl Send,
> + Clone
+ Send
+ Sync
+ 'static {
    use tower::ServiceExt as _;
    let http = http_client();
    tower::service_fn(move |request: Request<Full<Bytes>>| {
        let answered = answer(&request);
        let http = http.clone();
        async move {
            match answered {
                Some(response) => Ok(response.map(http_body_util::Either::Right)),
                None => Ok(http
                    .oneshot(request)
                    .await?
                    .map(http_body_util::Either::Left)),
            }
        }
    })
}

/// Sets, once per test binary, a global subscriber that wants every callsite (a bare
/// registry). A binary's tests run on several threads, some with a scoped subscriber of their
/// own, and tracing caches each callsite's interest over every dispatcher alive: a callsite first
/// reached on a thread with none, while another thread is setting its scoped subscriber, can be
/// cached as wanted by nobody, and that test then misses its spans (tracing's interest cache is
/// not exact under concurrent registration). With one dispatcher that wants everything always
/// alive, no callsite is ever cached as unwanted. Call it before setting a scoped subscriber.
pub fn every_callsite_stays_interesting() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    });
}

/// What the code under test logs while this is alive: a `fmt` subscriber at TRACE, the
/// default of the test's thread, writing into memory.
pub struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _default: tracing::subscriber::DefaultGuard,
}

impl Logs {
    pub fn capture() -> Self {
        every_callsite_stays_interesting();
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt;
        let buffer = Arc::new(Mutex::new(Vec::<u8>::new()));
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer({
                    let buffer = buffer.clone();
                    move || LogWriter(buffer.clone())
                })
                .with_ansi(false)
                .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
        );
        let default = tracing::subscriber::set_default(subscriber);
        // Callsites met before under another subscriber are asked again.
        tracing::callsite::rebuild_interest_cache();
        Self {
            buffer,
            _default: default,
        }
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.buffer.lock().unwrap().clone()).unwrap()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`TOOLS_CALL`] sent once through `layer` over `inner`: the answer, and what `inner` saw.
pub async fn call_through<L>(
    layer: L,
    inner: Scripted,
) -> (
    <L::Service as tower::Service<Request<Full<Bytes>>>>::Response,
    Arc<Shared>,
)
where
    L: tower::Layer<Scripted>,
    L::Service: tower::Service<Request<Full<Bytes>>>,
    <L::Service as tower::Service<Request<Full<Bytes>>>>::Error: std::fmt::Debug,
{
    use tower::ServiceExt as _;
    let shared = inner.shared();
    let response = layer
        .layer(inner)
        .oneshot(json_request(TOOLS_CALL))
        .await
        .unwrap();
    (response, shared)
}

/// The verdict of the first decision on attempt `attempt` (from 0) of the record `response`
/// carries.
pub fn verdict_on<B>(response: &Response<B>, attempt: usize) -> agentcore_tower::record::Verdict {
    let record = agentcore_tower::AttemptRecord::of_response(response).expect("a record");
    record.attempts()[attempt].decisions()[0].verdict().clone()
}

/// An `on_record` hook that counts the records it is handed in `fired`.
pub fn counting_hook(
    fired: &Arc<std::sync::atomic::AtomicU32>,
) -> impl Fn(&agentcore_tower::AttemptRecord) + Send + Sync + 'static {
    let fired = fired.clone();
    move |_| {
        fired.fetch_add(1, Ordering::SeqCst);
    }
}

/// `orders` are the 24 distinct orders of four layers.
pub fn assert_every_order(orders: &[Vec<&'static str>]) {
    assert_eq!(orders.len(), 24);
    let distinct: std::collections::BTreeSet<_> = orders.iter().collect();
    assert_eq!(distinct.len(), 24, "{orders:?}");
    assert!(orders.iter().all(|o| o.len() == 4
        && o.iter().collect::<std::collections::BTreeSet<_>>().len() == 4));
}
