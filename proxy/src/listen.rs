//! The local MCP Streamable HTTP endpoint (`--listen`): POST, GET and DELETE at `/mcp`, each
//! through the same stack as stdio, guarded because it acts with the user's AWS identity.
//!
//! The guards are in [`guards`], the order of a session's requests behind its stream in
//! [`stream_order`], the relay of an SSE answer in [`sse_relay`].

mod guards;
mod sse_relay;
mod stream_order;

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower::BoxError;
use agentcore_tower::protocol;
use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName,
    HeaderValue, TRANSFER_ENCODING,
};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tracing::{debug, error, info, warn};

use crate::answers::{
    Broke, Call, CancelledRequests, OpenRequests, PROXY_ERROR, Upstream, error_response, is_held,
    is_jsonrpc, next_frame, preview,
};
use crate::call::ResBody;
use crate::shutdown::{STOP_TIMEOUT, Signals};
use crate::sse::is_event_stream;
use crate::stack::{Built, Kind, Stack};
use crate::tools::Tools;
use sse_relay::SseRelay;

/// The endpoint's path.
pub const PATH: &str = "/mcp";
/// The largest POST body: `InvokeAgentRuntime`'s payload limit.
const MAX_BODY: usize = 100_000_000;
/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How many MCP sessions are remembered for `--stop-session-on-exit`.
const MAX_TRACKED: usize = 10_000;
/// The header that names a request's runtime session.
const RUNTIME_SESSION: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
/// The prefix of MCP 2026-07-28's headers mirrored from a tool's arguments.
const MCP_PARAM_PREFIX: &str = "mcp-param-";
/// The request headers a client's request carries on to the server.
const FORWARDED: [&str; 10] = [
    "content-type",
    "accept",
    "last-event-id",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "traceparent",
    "tracestate",
    "baggage",
];

type HttpBody = UnsyncBoxBody<Bytes, BoxError>;

/// What every connection shares.
struct Endpoint {
    stack: Stack,
    uri: Uri,
    kind: Kind,
    /// `--header`: what the stack sets on every request.
    headers: HeaderMap,
    /// The server, as the proxy's own answers speak of it, and the limits of a call.
    upstream: Upstream,
    /// The tools a client may see and call.
    tools: Arc<Tools>,
    /// `--listen-token-file`'s token.
    token: Option<String>,
    /// The MCP sessions to stop at exit (`--stop-session-on-exit`), as their answers named them.
    sessions: Option<Mutex<HashSet<HeaderValue>>>,
    /// The runtime session of requests outside any MCP session: those of a client on MCP's
    /// stateless protocol versions, which never initializes (else each would get a new
    /// microVM).
    shared: HeaderValue,
    /// Whether a request went to `shared`.
    shared_used: AtomicBool,
    /// The requests clients of the 2025 revisions cancelled: not answered when their stream
    /// ends.
    cancelled: CancelledRequests,
    /// The server streams (GETs) on their way upstream, by MCP session: the session's requests
    /// that come after one wait until it has reached the server, so a server that answers a
    /// tool call with a request on that stream (sampling, elicitation) finds it open.
    opening: Mutex<HashMap<HeaderValue, tokio::sync::watch::Receiver<bool>>>,
    /// The sessions initialized moments ago whose client has not opened its stream yet, with
    /// how long their requests wait for it: a client opens it right after `initialized`, and
    /// sends its next request at once, on another connection, so the two race to the proxy.
    expected: Mutex<HashMap<HeaderValue, (Instant, tokio::sync::watch::Sender<bool>)>>,
}

/// Serves until SIGINT or SIGTERM; then lets requests finish and, when asked, stops the runtime
/// sessions of the MCP sessions not ended yet.
pub async fn run(
    built: Built,
    tools: Tools,
    address: SocketAddr,
    token: Option<String>,
    stop_session_on_exit: bool,
) -> ExitCode {
    let listener = match TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(e) => {
            error!("cannot listen on {address}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = listener.local_addr().unwrap_or(address);
    info!(
        token = token.is_some(),
        "listening on http://{local}{PATH} (MCP Streamable HTTP)"
    );
    let endpoint = Arc::new(Endpoint {
        stack: built.stack,
        uri: built.uri,
        kind: built.kind,
        headers: built.headers,
        upstream: built.upstream,
        tools: Arc::new(tools),
        token,
        sessions: stop_session_on_exit.then(Mutex::default),
        shared: HeaderValue::try_from(uuid::Uuid::new_v4().to_string())
            .expect("a UUID is a header value"),
        shared_used: AtomicBool::new(false),
        cancelled: CancelledRequests::default(),
        opening: Mutex::default(),
        expected: Mutex::default(),
    });
    let (shutdown, shutting_down) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut signals = Signals::watch();
    loop {
        let Some(accepted) = signals.unless(listener.accept()).await else {
            break;
        };
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, or a connection reset before it was accepted.
                warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        debug!(%peer, "connection");
        let endpoint = endpoint.clone();
        let mut shutting_down = shutting_down.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let endpoint = endpoint.clone();
                async move { Ok::<_, Infallible>(endpoint.handle(request).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        debug!(%peer, "connection ended: {e}");
                    }
                }
                _ = shutting_down.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    if let Some(name) = signals.came() {
        info!("{name}: shutting down");
    }
    drop(listener);
    let _ = shutdown.send(true);
    crate::shutdown::drain(&mut connections, "connections").await;
    endpoint.stop_sessions().await;
    ExitCode::SUCCESS
}

impl Endpoint {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<HttpBody> {
        let started = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let response = match self
            .refusal(&request)
            .or_else(|| self.header_conflict(request.headers()))
        {
            Some(refusal) => refusal,
            None => match method {
                Method::POST => self.post(request).await,
                Method::GET | Method::DELETE => self.pass_on(request).await,
                _ => refusal(
                    StatusCode::METHOD_NOT_ALLOWED,
                    &format!("{method} is not served here: POST, GET or DELETE"),
                    &[("allow", "POST, GET, DELETE")],
                ),
            },
        };
        debug!(%method, path, status = response.status().as_u16(), elapsed = ?started.elapsed(), "served");
        response
    }

    /// A JSON-RPC message or batch from the client, through the stack.
    async fn post(&self, request: Request<Incoming>) -> Response<HttpBody> {
        let (parts, body) = match read_post(request).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        let message = match client_message(&body, &parts.headers) {
            Ok(message) => message,
            Err(refused) => return *refused,
        };
        let held = is_held(&message);
        let session = parts.headers.get("mcp-session-id").cloned();
        // An answer to the server's request goes at once; anything else waits for the
        // session's stream, so the server finds it open.
        let answers_only = match &message {
            Value::Array(batch) => batch.iter().all(is_answer),
            one => is_answer(one),
        };
        if let (Some(session), false) = (&session, answers_only) {
            self.after_stream_opened(session).await;
        }
        let batch = message.is_array();
        let screen = self.tools.screen(&message);
        if let Some(mut errors) = screen.refused {
            // A tool the proxy does not let through: answered here, nothing sent.
            debug!("refused here: a tool not let through");
            return match (batch, errors.len()) {
                (_, 0) => respond(StatusCode::ACCEPTED, HeaderMap::new(), full(Bytes::new())),
                (false, _) => json_response(StatusCode::OK, &errors.swap_remove(0)),
                (true, _) => json_response(StatusCode::OK, &Value::Array(errors)),
            };
        }
        let mut open = OpenRequests::of(&message);
        if let Some(session) = session.as_ref().and_then(|s| s.to_str().ok()) {
            // A 2025 client's cancel goes on to the server; the request it names is answered
            // no more (MCP: a cancelled request is not answered).
            if message["method"] == "notifications/cancelled"
                && let Some(id) = message.pointer("/params/requestId")
            {
                self.cancelled.cancel(session, id);
            }
            open = open.in_session(session, &self.cancelled);
        }
        let initialize = match &message {
            Value::Array(batch) => batch.iter().any(is_initialize),
            one => is_initialize(one),
        };
        let initialized = match &message {
            Value::Array(batch) => batch.iter().any(is_initialized),
            one => is_initialized(one),
        };
        let mut outgoing = self.outgoing(Method::POST, &parts.headers, body);
        if self.kind == Kind::Runtime
            && !initialize
            && !parts.headers.contains_key("mcp-session-id")
        {
            // Outside any MCP session: the listener's runtime session.
            outgoing
                .headers_mut()
                .insert(RUNTIME_SESSION, self.shared.clone());
            self.shared_used.store(true, Ordering::SeqCst);
        }
        match self.stack.clone().oneshot(outgoing).await {
            Ok(response) => {
                if let (Some(session), true, Kind::Endpoint) = (session, initialized, self.kind)
                    && response.status().is_success()
                {
                    self.expect_stream(session);
                }
                self.relay(response, open, batch, screen.lists, held).await
            }
            Err(error) => {
                let (message, data) = self.upstream.describe_failure(error.as_ref());
                warn!("{message}");
                failed(open, batch, &message, Some(&data))
            }
        }
    }

    /// The stack's answer to a POST, as the client gets it.
    async fn relay(
        &self,
        response: Response<ResBody>,
        open: OpenRequests,
        batch: bool,
        lists: Vec<Value>,
        held: bool,
    ) -> Response<HttpBody> {
        let (parts, mut body) = response.into_parts();
        let status = parts.status;
        let call = Call::of_held(&parts.extensions, held, &self.upstream);
        let sse = is_event_stream(&parts.headers);
        if status.is_success() {
            self.track(&parts.headers);
        }
        if status.is_success() && sse {
            let mut headers = answer_headers(&parts.headers);
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            let relay = SseRelay::new(body, open, status, call, lists, self.tools.clone());
            return respond(status, headers, relay.boxed_unsync());
        }
        let mut whole = match read_whole(&mut body, &call).await {
            Ok(whole) => whole,
            Err(why) => {
                warn!("{}", why.message);
                return failed(open, batch, &why.message, Some(&why.data));
            }
        };
        if status.is_success()
            && !lists.is_empty()
            && let Ok(mut message) = serde_json::from_slice::<Value>(&whole)
            && self.tools.filter(&lists, &mut message)
        {
            whole = message.to_string().into();
        }
        // A refusal in the JSON-RPC form says what it is, as the HTTP form's error does.
        if let Some(said) = call.refusal_in_json_rpc(status, whole.trim_ascii()) {
            whole = said.into();
        }
        let text = whole.trim_ascii();
        if status.is_success() {
            if text.is_empty() && !open.is_empty() {
                return failed(open, batch, &self.upstream.unanswered(status), None);
            }
            if !text.is_empty() && serde_json::from_slice::<Value>(text).is_err() {
                return failed(
                    open,
                    batch,
                    &format!(
                        "{} answered HTTP {} with a body that is not JSON",
                        self.upstream.name,
                        status.as_u16()
                    ),
                    Some(&json!({"httpStatus": status.as_u16(), "body": preview(text)})),
                );
            }
        } else if !is_jsonrpc(text) {
            let (message, mut data) = self.upstream.describe_status(status, &parts.headers, text);
            call.add_attempts(&mut data);
            warn!("{message}");
            return failed(open, batch, &message, Some(&data));
        }
        respond(status, answer_headers(&parts.headers), full(whole))
    }

    /// A GET or DELETE, through the stack. For a runtime, the stack answers GET 405 and turns
    /// DELETE into `StopRuntimeSession`; an MCP endpoint gets them as they are, and the stream
    /// a GET opens is relayed as it comes.
    async fn pass_on(&self, request: Request<Incoming>) -> Response<HttpBody> {
        let method = request.method().clone();
        let outgoing = self.outgoing(method.clone(), request.headers(), Bytes::new());
        let session = request.headers().get("mcp-session-id").cloned();
        // A stream on its way: the session's next requests wait for it (until it is answered,
        // or this is dropped).
        let _opening = (method == Method::GET)
            .then(|| session.clone())
            .flatten()
            .map(|session| self.stream_opening(session));
        let response = match self.stack.clone().oneshot(outgoing).await {
            Ok(response) => response,
            Err(error) => {
                let (message, data) = self.upstream.describe_failure(error.as_ref());
                warn!("{method}: {message}");
                return json_response(
                    StatusCode::BAD_GATEWAY,
                    &error_response(&Value::Null, PROXY_ERROR, &message, Some(&data)),
                );
            }
        };
        let (parts, mut body) = response.into_parts();
        if method == Method::GET && parts.status.is_success() {
            // The server's stream: open as long as the server and the client keep it.
            let mut headers = answer_headers(&parts.headers);
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return respond(
                parts.status,
                headers,
                body.map_err(Into::into).boxed_unsync(),
            );
        }
        let whole = match read_whole(&mut body, &Call::of(&parts.extensions, &self.upstream)).await
        {
            Ok(whole) => whole,
            Err(why) => {
                warn!("{method}: {}", why.message);
                return json_response(
                    StatusCode::BAD_GATEWAY,
                    &error_response(&Value::Null, PROXY_ERROR, &why.message, Some(&why.data)),
                );
            }
        };
        if method == Method::DELETE && parts.status.is_success() {
            match self.kind {
                Kind::Runtime => info!("an MCP session ended: its runtime session stopped"),
                Kind::Endpoint => info!("an MCP session ended"),
            }
            if let (Some(sessions), Some(session)) = (&self.sessions, session) {
                lock(sessions).remove(&session);
            }
        }
        respond(parts.status, answer_headers(&parts.headers), full(whole))
    }

    /// A request that carries, with another value, a header the proxy passes on from its
    /// client ([`carried`]) and `--header` also sets: refused (400, naming the header, never a
    /// value), nothing sent. The proxy sends one value of a header; it does not pick one for
    /// the client: `--header` was promised on every request (a listener serves whichever local
    /// client connects), and overriding the client's without a word would send what the client
    /// did not ask for. The same value is no conflict.
    fn header_conflict(&self, from: &HeaderMap) -> Option<Response<HttpBody>> {
        let name = self.headers.iter().find_map(|(name, value)| {
            (carried(name) && from.get_all(name).iter().any(|theirs| theirs != value))
                .then_some(name)
        })?;
        warn!(header = %name, "refused: the client's {name} is not --header's");
        Some(refusal(
            StatusCode::BAD_REQUEST,
            &format!(
                "the request's {name} header is not the one the proxy sets on every request \
                 (--header {name}): the proxy sends one, and does not choose between them; drop \
                 it from the client or from --header"
            ),
            &[],
        ))
    }

    /// The request the stack gets: the client's MCP headers, none of its others (its token
    /// among them).
    fn outgoing(&self, method: Method, from: &HeaderMap, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        for name in FORWARDED {
            for value in from.get_all(name) {
                headers.append(HeaderName::from_static(name), value.clone());
            }
        }
        // MCP 2026-07-28's `Mcp-Param-*`, mirrored from a tool's arguments: an MCP URL checks
        // them (a runtime's signer does not carry them).
        for (name, value) in from {
            if name.as_str().starts_with(MCP_PARAM_PREFIX) {
                headers.append(name.clone(), value.clone());
            }
        }
        if !headers.contains_key(ACCEPT) {
            headers.insert(
                ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
        }
        request
    }

    /// Remembers the MCP session an answer names, to stop it at exit.
    fn track(&self, answer: &HeaderMap) {
        if let (Some(sessions), Some(session)) = (&self.sessions, answer.get("mcp-session-id")) {
            let mut sessions = lock(sessions);
            if sessions.len() < MAX_TRACKED {
                sessions.insert(session.clone());
            }
        }
    }

    /// Stops the runtime session of every MCP session not ended (`--stop-session-on-exit`).
    async fn stop_sessions(&self) {
        let Some(sessions) = &self.sessions else {
            return;
        };
        let mut stop: Vec<(&str, HeaderValue)> = lock(sessions)
            .drain()
            .map(|session| ("mcp-session-id", session))
            .collect();
        if self.shared_used.load(Ordering::SeqCst) {
            stop.push((RUNTIME_SESSION, self.shared.clone()));
        }
        let mut stops = tokio::task::JoinSet::new();
        for (name, value) in stop {
            let mut request = self.outgoing(Method::DELETE, &HeaderMap::new(), Bytes::new());
            request
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
            let stack = self.stack.clone();
            let upstream = self.upstream.clone();
            stops.spawn(async move {
                let ending = crate::answers::Ending {
                    done: "runtime session stopped",
                    doing: "stopping a runtime session",
                    expires_anyway: false,
                };
                upstream
                    .log_ending(stack.oneshot(request).await, &ending)
                    .await;
            });
        }
        let stopped = tokio::time::timeout(STOP_TIMEOUT, async {
            while stops.join_next().await.is_some() {}
        })
        .await;
        if stopped.is_err() {
            warn!("stopping the runtime sessions took longer than {STOP_TIMEOUT:?}");
        }
    }
}

/// Whether a client's header of this name goes on to the server ([`FORWARDED`], `Mcp-Param-*`).
fn carried(name: &HeaderName) -> bool {
    FORWARDED.contains(&name.as_str()) || name.as_str().starts_with(MCP_PARAM_PREFIX)
}

/// Whether a message is an `initialize` request, which opens an MCP session.
fn is_initialize(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("initialize")
}

/// Whether a message is the `notifications/initialized` that ends the handshake.
fn is_initialized(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("notifications/initialized")
}

/// Whether a message answers a request (a result or an error, no method).
fn is_answer(message: &Value) -> bool {
    message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A POST's head and body: JSON (`Content-Type: application/json`), at most [`MAX_BODY`]
/// bytes; else the answer that refuses it.
async fn read_post(
    request: Request<Incoming>,
) -> Result<(http::request::Parts, Bytes), Response<HttpBody>> {
    let json = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST carries a JSON-RPC message: Content-Type: application/json",
            &[],
        ));
    }
    let (parts, body) = request.into_parts();
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => Ok((parts, body.to_bytes())),
        Err(e) if e.is::<LengthLimitError>() => Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is longer than {MAX_BODY} bytes, InvokeAgentRuntime's limit"),
            &[],
        )),
        Err(e) => Err(refusal(
            StatusCode::BAD_REQUEST,
            &format!("cannot read the body: {e}"),
            &[],
        )),
    }
}

/// The JSON-RPC message or batch a POST's body carries, a message of the client's era (the
/// version its `_meta` or `headers` name); else the answer that refuses it (boxed: it is large
/// beside a message), and nothing is sent.
fn client_message(body: &[u8], headers: &HeaderMap) -> Result<Value, Box<Response<HttpBody>>> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(message @ (Value::Object(_) | Value::Array(_))) => message,
        Ok(_) => {
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &error_response(
                    &Value::Null,
                    -32600,
                    "Invalid Request: not a JSON-RPC message",
                    None,
                ),
            )));
        }
        Err(e) => {
            warn!("a POST body that is not JSON: {e}");
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &error_response(&Value::Null, -32700, &format!("Parse error: {e}"), None),
            )));
        }
    };
    let version = protocol::version_in_meta(&message).or_else(|| {
        headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
    });
    if let Err(mut invalid) = protocol::check_client_message(&message, version) {
        warn!("not sent: {}", invalid[0].reason());
        let answer = match (message.is_array(), invalid.len()) {
            (false, _) | (true, 1) => invalid.swap_remove(0).response(),
            (true, _) => Value::Array(invalid.iter().map(|i| i.response()).collect()),
        };
        return Err(Box::new(json_response(StatusCode::BAD_REQUEST, &answer)));
    }
    Ok(message)
}

/// Reads a whole answer, each frame within the idle limit, the whole before the call's
/// deadline.
async fn read_whole(body: &mut ResBody, call: &Call) -> Result<Bytes, Broke> {
    let mut whole = Vec::new();
    while let Some(frame) = next_frame(body, call).await? {
        if let Some(data) = frame.data_ref() {
            whole.extend_from_slice(data);
        }
    }
    Ok(whole.into())
}

/// The answer to a POST the stack could not carry: a JSON-RPC error for each of its requests
/// (HTTP 200, as any JSON-RPC answer), or, for notifications and responses only, HTTP 502.
fn failed(
    mut open: OpenRequests,
    batch: bool,
    message: &str,
    data: Option<&Value>,
) -> Response<HttpBody> {
    if open.is_empty() {
        return json_response(
            StatusCode::BAD_GATEWAY,
            &error_response(&Value::Null, PROXY_ERROR, message, data),
        );
    }
    let mut errors = open.fail_all(message, data);
    let body = if batch {
        Value::Array(errors)
    } else {
        errors.swap_remove(0)
    };
    json_response(StatusCode::OK, &body)
}

/// The answer's headers the client gets: all the stack passed on but the framing ones.
fn answer_headers(from: &HeaderMap) -> HeaderMap {
    let mut headers = from.clone();
    for name in [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION] {
        headers.remove(name);
    }
    headers
}

fn respond(status: StatusCode, headers: HeaderMap, body: HttpBody) -> Response<HttpBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

fn full(bytes: Bytes) -> HttpBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(status: StatusCode, body: &Value) -> Response<HttpBody> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    respond(status, headers, full(body.to_string().into()))
}

/// A request refused here, nothing sent: the status, and a JSON-RPC error (id null) saying why.
fn refusal(status: StatusCode, message: &str, extra: &[(&str, &str)]) -> Response<HttpBody> {
    let mut response = json_response(
        status,
        &error_response(&Value::Null, PROXY_ERROR, message, None),
    );
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(*name), HeaderValue::try_from(*value))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
