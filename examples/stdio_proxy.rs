//! A stdio ↔ AgentCore Runtime MCP proxy: desktop MCP clients that speak stdio can use an
//! IAM-authenticated AgentCore runtime through it.
//!
//! ```text
//! cargo run --example stdio_proxy -- --runtime-arn ARN [--region R] [--qualifier Q]
//!     [--endpoint URL] [--idempotent-tool NAME]... [--stop-session-on-exit]
//! ```
//!
//! * Credentials come from the standard AWS chain (environment, profiles, SSO, web identity,
//!   container and instance roles), cached (`CachedCredentials`) and refreshed before they
//!   expire. The region is `--region`, else the ARN's, else the configured one (`AWS_REGION`,
//!   the profile). The
//!   endpoint is `--endpoint`, else `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`, else `AWS_ENDPOINT_URL`
//!   (unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), else the region's.
//! * stdin: newline-delimited JSON-RPC messages. stdout: every answer and every server message
//!   (JSON or SSE), one per line. Logs go to stderr only (`RUST_LOG=debug|info|warn|error|off`).
//! * A request the stack gives up on is answered with a JSON-RPC error (-32000) naming the
//!   failure, the attempt record in `error.data.attempts`. A non-2xx answer with a JSON-RPC
//!   body is forwarded; without one, it becomes a -32000 error naming the HTTP status. A line
//!   that is not JSON gets a -32700 parse error (id null).
//! * Requests run concurrently: a slow tool does not hold up a ping.
//! * On stdin EOF, in-flight requests get up to 10 s to finish; with `--stop-session-on-exit`
//!   the runtime session is then stopped (`StopRuntimeSession`); the exit code is 0.
//! * The stack, outer to inner: a 120 s timeout, the replay guard (`--idempotent-tool` declares
//!   the tools a lost answer may re-send), throttle retry, session-busy retry, SigV4, then
//!   hyper-util's client over rustls (webpki roots; `http://` works for a local emulator).
//!   Until rustls' crypto provider can be chosen here, an `https://` endpoint fails at start-up
//!   with an error: see `https_connector`.
//!
//! Bad arguments: usage on stderr, exit code 2.

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use agentcore_tower::recommended_layers;
use agentcore_tower::sigv4::{CachedCredentials, InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{BoxError, ReplayGuardLayer};
use aws_config::BehaviorVersion;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower::timeout::TimeoutLayer;
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};
use tracing::{debug, error, info, warn};

const USAGE: &str = "\
usage: stdio_proxy --runtime-arn ARN [--region REGION] [--qualifier QUALIFIER]
                   [--endpoint URL] [--idempotent-tool NAME]... [--stop-session-on-exit]

Proxies newline-delimited JSON-RPC (MCP over stdio) to an AWS Bedrock AgentCore Runtime.

  --runtime-arn ARN        the runtime to invoke (required)
  --region REGION          the region to sign for (default: the ARN's, else AWS_REGION / the profile's)
  --qualifier QUALIFIER    the runtime endpoint to invoke (default: DEFAULT)
  --endpoint URL           an explicit endpoint (default: AWS_ENDPOINT_URL_BEDROCK_AGENTCORE,
                           AWS_ENDPOINT_URL, else the region's)
  --idempotent-tool NAME   a tool that may be sent again after a lost answer (repeatable)
  --stop-session-on-exit   stop the runtime session (StopRuntimeSession) when stdin closes
  -h, --help               this text

Credentials come from the standard AWS chain. Logs go to stderr (RUST_LOG=debug|info|warn|error|off).
";

/// One deadline for a whole call, retries included.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long in-flight requests may run on after stdin closed.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping the runtime session may take at exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The JSON-RPC error code of a failure on the way to the server.
const PROXY_ERROR: i64 = -32000;

type ResBody = agentcore_tower::RecommendedBody<hyper::body::Incoming>;
type Stack = BoxCloneSyncService<Request<Full<Bytes>>, Response<ResBody>, BoxError>;

// ---------------------------------------------------------------------------------------------
// Arguments.

#[derive(Debug, Default)]
struct Args {
    runtime_arn: String,
    region: Option<String>,
    qualifier: Option<String>,
    endpoint: Option<String>,
    idempotent_tools: Vec<String>,
    stop_session_on_exit: bool,
}

enum Parsed {
    Run(Args),
    Help,
}

fn parse_args(raw: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut args = Args::default();
    let mut arn = None;
    let mut raw = raw.into_iter();
    while let Some(arg) = raw.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("argument {a:?} is not valid UTF-8"))?;
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        let mut value = |flag: &str| -> Result<String, String> {
            let value = match inline.clone() {
                Some(value) => value,
                None => raw
                    .next()
                    .ok_or_else(|| format!("{flag} needs a value"))?
                    .into_string()
                    .map_err(|a| format!("the value {a:?} of {flag} is not valid UTF-8"))?,
            };
            if value.is_empty() {
                return Err(format!("{flag} needs a non-empty value"));
            }
            Ok(value)
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--runtime-arn" => arn = Some(value("--runtime-arn")?),
            "--region" => args.region = Some(value("--region")?),
            "--qualifier" => args.qualifier = Some(value("--qualifier")?),
            "--endpoint" => args.endpoint = Some(value("--endpoint")?),
            "--idempotent-tool" => args.idempotent_tools.push(value("--idempotent-tool")?),
            "--stop-session-on-exit" if inline.is_none() => args.stop_session_on_exit = true,
            "--stop-session-on-exit" => return Err("--stop-session-on-exit takes no value".into()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    args.runtime_arn = arn.ok_or("--runtime-arn is required")?;
    Ok(Parsed::Run(args))
}

/// The endpoint AWS tools would use when none is given: the service's variable, then the
/// generic one.
fn endpoint_from_env() -> Option<String> {
    let ignore = std::env::var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    if ignore {
        return None;
    }
    ["AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "AWS_ENDPOINT_URL"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The region an ARN names (`arn:PARTITION:SERVICE:REGION:…`).
fn arn_region(arn: &str) -> Option<&str> {
    let mut parts = arn.split(':');
    (parts.next() == Some("arn")).then_some(())?;
    parts.nth(2).filter(|r| !r.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Credentials.

// ---------------------------------------------------------------------------------------------
// Start-up.

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            eprint!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("stdio_proxy: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("stdio_proxy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(args));
    // The stdin reader may still be blocked in a read: do not wait for it.
    runtime.shutdown_background();
    code
}

/// tracing to stderr; the level from `RUST_LOG` when it is one (`debug`, `info`, …).
fn init_logging() {
    let level = std::env::var("RUST_LOG").ok();
    let parsed = level
        .as_deref()
        .and_then(|l| l.parse::<tracing_subscriber::filter::LevelFilter>().ok());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_max_level(parsed.unwrap_or(tracing_subscriber::filter::LevelFilter::INFO))
        .init();
    if let (Some(level), None) = (level, parsed) {
        warn!("RUST_LOG={level:?} is not a level (debug, info, warn, error, off); logging at info");
    }
}

async fn run(args: Args) -> ExitCode {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = &args.region {
        // Skips the region chain (which may ask the instance metadata service).
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    let config = loader.load().await;
    let Some(credentials) = config.credentials_provider() else {
        error!("the AWS configuration has no credentials provider");
        return ExitCode::FAILURE;
    };

    let mut target = InvokeTarget::arn(&args.runtime_arn);
    if let Some(qualifier) = &args.qualifier {
        target = target.qualifier(qualifier);
    }
    // The region: --region, else the ARN's (the runtime lives there: a profile's default region
    // must not send the call elsewhere), else the configured one (for a runtime id).
    let configured_region = config.region().map(ToString::to_string);
    if args.region.is_none()
        && let (Some(configured), Some(in_arn)) =
            (configured_region.as_deref(), arn_region(&args.runtime_arn))
        && configured != in_arn
    {
        warn!("the configured region {configured} is not the ARN's ({in_arn}); using the ARN's");
    }
    if let Some(region) = args
        .region
        .clone()
        .or_else(|| arn_region(&args.runtime_arn).map(str::to_owned))
        .or(configured_region)
    {
        target = target.region(region);
    }
    if let Some(endpoint) = args.endpoint.clone().or_else(endpoint_from_env) {
        target = target.endpoint(endpoint);
    }
    let signer = match SigV4InvokeLayer::builder(target, CachedCredentials::new(credentials))
        .stop_session_on_delete(args.stop_session_on_exit)
        .build()
    {
        Ok(signer) => signer,
        Err(e) => {
            eprintln!("stdio_proxy: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let uri = signer.target().invocation_uri();
    info!(
        runtime = %args.runtime_arn,
        region = signer.target().region(),
        endpoint = %UriWithoutQuery(&uri),
        "proxying stdio to AgentCore Runtime"
    );

    let guard = ReplayGuardLayer::new().idempotent_tools(args.idempotent_tools);
    let stack = if uri.scheme() == Some(&http::uri::Scheme::HTTP) {
        // A local emulator or test server: no TLS to set up.
        build_stack(
            guard,
            signer,
            Client::builder(TokioExecutor::new()).build_http(),
        )
    } else {
        match https_connector() {
            Ok(https) => build_stack(
                guard,
                signer,
                Client::builder(TokioExecutor::new()).build(https),
            ),
            Err(message) => {
                error!("{message}");
                return ExitCode::FAILURE;
            }
        }
    };

    let (out, lines_out) = mpsc::unbounded_channel();
    let writer = std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || write_stdout(lines_out));
    let writer = match writer {
        Ok(writer) => writer,
        Err(e) => {
            error!("cannot start the stdout writer: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (lines_in, mut stdin) = mpsc::channel(64);
    if let Err(e) = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || read_stdin(lines_in))
    {
        error!("cannot start the stdin reader: {e}");
        return ExitCode::FAILURE;
    }

    let proxy = Arc::new(Proxy {
        stack,
        uri,
        session: RwLock::new(Session::default()),
        sent: AtomicBool::new(false),
        out: out.clone(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(line) = stdin.recv().await {
        while tasks.try_join_next().is_some() {}
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                error!("cannot read stdin: {e}");
                break;
            }
        };
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(e) => {
                warn!("stdin: a line that is not JSON: {e}");
                let _ = out.send(error_line(
                    &Value::Null,
                    -32700,
                    &format!("Parse error: {e}"),
                    None,
                ));
                continue;
            }
        };
        if !(message.is_object() || message.is_array()) {
            let _ = out.send(error_line(
                &Value::Null,
                -32600,
                "Invalid Request: not a JSON-RPC message",
                None,
            ));
            continue;
        }
        tasks.spawn(proxy.clone().forward(Bytes::copy_from_slice(line), message));
    }

    debug!(in_flight = tasks.len(), "stdin closed");
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            in_flight = tasks.len(),
            "stdin closed and requests still run after {DRAIN_TIMEOUT:?}: giving up on them"
        );
        // Their answer trackers answer every open request as they are dropped.
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    if args.stop_session_on_exit && proxy.sent.load(Ordering::SeqCst) {
        proxy.stop_session().await;
    }
    drop(proxy);
    drop(out);
    // Every sender is gone: the writer writes what is queued and ends.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    ExitCode::SUCCESS
}

/// The stack, outer to inner: one deadline, the replay rule, throttle and session-busy
/// retries, SigV4 — over `client`.
fn build_stack<C>(guard: ReplayGuardLayer, signer: SigV4InvokeLayer, client: C) -> Stack
where
    C: tower::Service<Request<Full<Bytes>>, Response = Response<hyper::body::Incoming>>
        + Clone
        + Send
        + Sync
        + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            .layer(TimeoutLayer::new(CALL_TIMEOUT))
            .layer(recommended_layers(guard, signer))
            .service(client),
    )
}

/// rustls over hyper-util's connector, with the webpki roots; `https_or_http` so an `http://`
/// endpoint works too.
///
/// This crate's dev-dependencies enable both of rustls' crypto providers (hyper-rustls `ring`,
/// and `aws-lc-rs` through aws-config's default HTTPS client), and then rustls cannot pick one
/// by itself: `with_webpki_roots` panics. Choosing one needs `rustls` as a direct dependency
/// (`.with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())`); until then
/// the panic is turned into an error here.
fn https_connector() -> Result<HttpsConnector<HttpConnector>, String> {
    // Name the crypto provider: with both ring and aws-lc-rs in a build, rustls cannot pick one.
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .https_or_http()
        .enable_http1()
        .build())
}

// ---------------------------------------------------------------------------------------------
// stdin and stdout.

fn read_stdin(lines: mpsc::Sender<std::io::Result<Vec<u8>>>) {
    let stdin = std::io::stdin();
    let mut stdin = stdin.lock();
    loop {
        let mut line = Vec::new();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                if lines.blocking_send(Ok(line)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = lines.blocking_send(Err(e));
                return;
            }
        }
    }
}

/// Writes each line (already ending in `\n`) whole, flushing when nothing more is queued.
fn write_stdout(mut lines: mpsc::UnboundedReceiver<Vec<u8>>) {
    let stdout = std::io::stdout();
    let mut stdout = std::io::BufWriter::new(stdout.lock());
    while let Some(line) = lines.blocking_recv() {
        let mut result = stdout.write_all(&line);
        while let (Ok(()), Ok(more)) = (&result, lines.try_recv()) {
            result = stdout.write_all(&more);
        }
        if let Err(e) = result.and_then(|()| stdout.flush()) {
            error!("cannot write stdout: {e}");
            return;
        }
    }
}

/// A JSON-RPC error response, as one stdout line.
fn error_line(id: &Value, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
    line.push('\n');
    line.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// The proxy.

#[derive(Default)]
struct Session {
    /// `mcp-session-id` from the initialize answer.
    id: Option<HeaderValue>,
    /// The negotiated protocol version.
    protocol_version: Option<HeaderValue>,
}

struct Proxy {
    stack: Stack,
    uri: Uri,
    session: RwLock<Session>,
    sent: AtomicBool,
    out: mpsc::UnboundedSender<Vec<u8>>,
}

impl Proxy {
    fn request(&self, method: Method, body: Bytes, initialize: bool) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if !initialize {
            let session = self.session.read().unwrap_or_else(|p| p.into_inner());
            if let Some(id) = &session.id {
                headers.insert("mcp-session-id", id.clone());
            }
            if let Some(version) = &session.protocol_version {
                headers.insert("mcp-protocol-version", version.clone());
            }
        }
        request
    }

    /// Sends one stdin message and relays what comes back.
    async fn forward(self: Arc<Self>, body: Bytes, message: Value) {
        let method = match &message {
            Value::Object(m) => m.get("method").and_then(Value::as_str),
            _ => None,
        };
        let initialize = method == Some("initialize");
        let label = method.unwrap_or("(response or batch)").to_owned();
        let mut answers = Answers::new(&message, self.out.clone());
        let request = self.request(Method::POST, body, initialize);
        let started = Instant::now();
        self.sent.store(true, Ordering::SeqCst);
        let result = self.stack.clone().oneshot(request).await;
        match result {
            Ok(response) => {
                debug!(method = %label, status = response.status().as_u16(), elapsed = ?started.elapsed(), "answered");
                self.relay(response, &mut answers, initialize).await;
            }
            Err(error) => {
                let (message, data) = describe_failure(error.as_ref());
                warn!(method = %label, "{message}");
                answers.fail_all(&message, Some(data));
            }
        }
    }

    async fn relay(&self, response: Response<ResBody>, answers: &mut Answers, initialize: bool) {
        let (parts, mut body) = response.into_parts();
        let status = parts.status;
        let sse = parts
            .headers
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if initialize && status.is_success() {
            let mut session = self.session.write().unwrap_or_else(|p| p.into_inner());
            session.id = parts.headers.get("mcp-session-id").cloned();
            session.protocol_version = None;
        }
        let on_message = |answers: &mut Answers, data: &[u8]| {
            let Some(message) = answers.emit(data) else {
                return false;
            };
            if initialize
                && let Some(version) = message
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .and_then(|v| HeaderValue::from_str(v).ok())
            {
                self.session
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .protocol_version = Some(version);
            }
            true
        };

        // SSE events are relayed as they come; a JSON body is read whole. Every frame must come
        // within CALL_TIMEOUT: a stream may run long, but not stall.
        let mut events = (status.is_success() && sse).then(SseParser::default);
        let mut whole = Vec::new();
        loop {
            let frame = match tokio::time::timeout(CALL_TIMEOUT, body.frame()).await {
                Ok(None) => break,
                Ok(Some(Ok(frame))) => frame,
                Ok(Some(Err(e))) => {
                    let message = format!(
                        "the connection broke while AgentCore was answering: {}",
                        chain(&e)
                    );
                    warn!("{message}");
                    answers.fail_all(&message, None);
                    return;
                }
                Err(_) => {
                    let message = format!(
                        "AgentCore stopped sending its answer for {} s",
                        CALL_TIMEOUT.as_secs()
                    );
                    warn!("{message}");
                    answers.fail_all(&message, None);
                    return;
                }
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            match events.as_mut() {
                Some(events) => events.feed(data, |event| {
                    on_message(answers, &event);
                }),
                None => whole.extend_from_slice(data),
            }
        }
        let text = whole.trim_ascii();
        if let Some(events) = events.as_mut() {
            events.finish(|event| {
                on_message(answers, &event);
            });
        } else if status.is_success() {
            if !text.is_empty() && !on_message(answers, text) {
                answers.fail_all(
                    &format!(
                        "AgentCore answered HTTP {} with a body that is not JSON",
                        status.as_u16()
                    ),
                    Some(json!({"httpStatus": status.as_u16(), "body": preview(text)})),
                );
            }
        } else if !(is_jsonrpc(text) && on_message(answers, text)) {
            let (message, data) = describe_status(status, &parts.headers, text);
            warn!("{message}");
            answers.fail_all(&message, Some(data));
        }
        if answers.is_open() {
            answers.fail_all(
                &format!(
                    "AgentCore's answer (HTTP {}) carried no JSON-RPC response to this request",
                    status.as_u16()
                ),
                None,
            );
        }
    }

    /// Ends the MCP session with a DELETE, which the signing layer turns into
    /// `StopRuntimeSession`.
    async fn stop_session(&self) {
        let request = self.request(Method::DELETE, Bytes::new(), false);
        match tokio::time::timeout(STOP_TIMEOUT, self.stack.clone().oneshot(request)).await {
            Ok(Ok(response)) if response.status().is_success() => {
                info!("runtime session stopped");
            }
            Ok(Ok(response)) => {
                let status = response.status();
                let headers = response.headers().clone();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                warn!("{}", describe_status(status, &headers, &body).0);
            }
            Ok(Err(error)) => warn!(
                "stopping the runtime session: {}",
                describe_failure(error.as_ref()).0
            ),
            Err(_) => warn!("stopping the runtime session took longer than {STOP_TIMEOUT:?}"),
        }
    }
}

/// The requests of one stdin line still waiting for their answer. Whatever is still open when
/// it is dropped (the task was aborted at exit, or panicked) is answered with an error: a
/// client is never left waiting.
struct Answers {
    open: Vec<Value>,
    out: mpsc::UnboundedSender<Vec<u8>>,
}

impl Answers {
    fn new(message: &Value, out: mpsc::UnboundedSender<Vec<u8>>) -> Self {
        let mut open = Vec::new();
        let mut add = |m: &Value| {
            if let Value::Object(m) = m
                && m.get("method").is_some_and(Value::is_string)
                && let Some(id) = m.get("id")
            {
                open.push(id.clone());
            }
        };
        match message {
            Value::Array(batch) => batch.iter().for_each(&mut add),
            one => add(one),
        }
        Self { open, out }
    }

    fn is_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Writes one server message as one line; `None` (and nothing written) when it is not JSON.
    fn emit(&mut self, data: &[u8]) -> Option<Value> {
        let data = data.trim_ascii();
        if data.is_empty() {
            return None;
        }
        let message: Value = match serde_json::from_slice(data) {
            Ok(message) => message,
            Err(e) => {
                warn!(
                    "AgentCore sent a message that is not JSON ({e}): {}",
                    preview(data)
                );
                return None;
            }
        };
        let mut answered = |m: &Value| {
            if let Value::Object(m) = m
                && !m.contains_key("method")
                && (m.contains_key("result") || m.contains_key("error"))
                && let Some(id) = m.get("id")
            {
                self.open.retain(|open| open != id);
            }
        };
        match &message {
            Value::Array(batch) => batch.iter().for_each(&mut answered),
            one => answered(one),
        }
        // JSON text holds no raw line break inside a string: the ones outside are whitespace.
        let mut line: Vec<u8> = data
            .iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect();
        line.push(b'\n');
        let _ = self.out.send(line);
        Some(message)
    }

    fn fail_all(&mut self, message: &str, data: Option<Value>) {
        for id in self.open.drain(..) {
            let _ = self
                .out
                .send(error_line(&id, PROXY_ERROR, message, data.clone()));
        }
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        self.fail_all(
            "the proxy stopped before AgentCore answered (stdin closed, or an internal error)",
            None,
        );
    }
}

/// The message and `error.data` for a call the stack gave up on.
fn describe_failure(error: &(dyn std::error::Error + 'static)) -> (String, Value) {
    if error.is::<tower::timeout::error::Elapsed>() {
        return (
            format!(
                "no answer from AgentCore within {} s; the request may have run",
                CALL_TIMEOUT.as_secs()
            ),
            json!({"failure": "timed out"}),
        );
    }
    let mut data = json!({});
    if let Some(ours) = error.downcast_ref::<agentcore_tower::Error>() {
        data["failure"] = json!(ours.failure_kind().to_string());
        if let Some(record) = ours.record() {
            data["attempts"] = json!(record.to_string().lines().collect::<Vec<_>>());
        }
    }
    (format!("AgentCore request failed: {}", chain(error)), data)
}

/// The message and `error.data` for a non-2xx answer without a JSON-RPC body.
fn describe_status(status: StatusCode, headers: &http::HeaderMap, body: &[u8]) -> (String, Value) {
    let error_type = agentcore_tower::aws_error_type(headers);
    let detail = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("message")
            .or_else(|| v.get("Message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let mut message = format!("AgentCore answered HTTP {status}");
    if let Some(error_type) = error_type {
        message.push_str(&format!(" ({error_type})"));
    }
    if let Some(detail) = &detail {
        message.push_str(&format!(": {detail}"));
    }
    let mut data = json!({"httpStatus": status.as_u16()});
    if let Some(error_type) = error_type {
        data["errorType"] = json!(error_type);
    }
    if detail.is_none() && !body.is_empty() {
        data["body"] = json!(preview(body));
    }
    (message, data)
}

/// Whether a body is a JSON-RPC message or batch.
fn is_jsonrpc(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => m.contains_key("jsonrpc"),
        Ok(Value::Array(batch)) => {
            !batch.is_empty() && batch.iter().all(|m| m.get("jsonrpc").is_some())
        }
        _ => false,
    }
}

/// An error and its causes, on one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

/// The start of a body, for a message.
fn preview(body: &[u8]) -> String {
    const LIMIT: usize = 1024;
    let text = String::from_utf8_lossy(&body[..body.len().min(LIMIT)]);
    if body.len() > LIMIT {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

/// A URI for logs, without its query.
struct UriWithoutQuery<'a>(&'a Uri);

impl std::fmt::Display for UriWithoutQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let (Some(scheme), Some(authority)) = (self.0.scheme(), self.0.authority()) {
            write!(f, "{scheme}://{authority}")?;
        }
        f.write_str(self.0.path())
    }
}

// ---------------------------------------------------------------------------------------------
// Server-sent events.

/// An incremental `text/event-stream` reader: each event's `data:` lines, joined by `\n`.
#[derive(Default)]
struct SseParser {
    /// Bytes of a line not ended yet.
    pending: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(Vec<u8>)) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(offset) = self.pending[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = start + offset;
            let next = match self.pending[end] {
                b'\r' if end + 1 == self.pending.len() => break, // `\r\n` may be split
                b'\r' if self.pending[end + 1] == b'\n' => end + 2,
                _ => end + 1,
            };
            let line = self.pending[start..end].to_vec();
            self.line(&line, &mut on_event);
            start = next;
        }
        self.pending.drain(..start);
    }

    /// The stream ended: an unterminated last line or event still counts.
    fn finish(&mut self, mut on_event: impl FnMut(Vec<u8>)) {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.strip_suffix(b"\r").unwrap_or(&rest);
        if !rest.is_empty() {
            self.line(rest, &mut on_event);
        }
        self.line(b"", &mut on_event);
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Vec<u8>)) {
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                on_event(std::mem::take(&mut self.data));
            }
            return;
        }
        if line.starts_with(b":") {
            return; // a comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }
}
