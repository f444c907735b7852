//! The local MCP Streamable HTTP endpoint (`--listen`): POST, GET and DELETE at `/mcp`, each
//! through the same stack as stdio, guarded because it acts with the user's AWS identity.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use agentcore_tower::BoxError;
use bytes::Bytes;
use http::header::{
    ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST,
    HeaderMap, HeaderName, HeaderValue, ORIGIN, TRANSFER_ENCODING, WWW_AUTHENTICATE,
};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tracing::{debug, error, info, warn};

use crate::answers::{
    OpenRequests, PROXY_ERROR, broke, describe_failure, describe_status, error_response,
    is_jsonrpc, next_frame, one_line, parse_server_message, preview, stalled, unanswered, upstream,
};
use crate::sse::{self, SseParser};
use crate::stack::{CALL_TIMEOUT, Kind, ResBody, Stack};
use crate::{STOP_TIMEOUT, shutdown_signal};

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
    stack: Stack,
    uri: Uri,
    kind: Kind,
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
        stack,
        uri,
        kind,
        token,
        sessions: stop_session_on_exit.then(Mutex::default),
        shared: HeaderValue::try_from(uuid::Uuid::new_v4().to_string())
            .expect("a UUID is a header value"),
        shared_used: AtomicBool::new(false),
        opening: Mutex::default(),
        expected: Mutex::default(),
    });
    let (shutdown, shutting_down) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            name = &mut signal => {
                info!("{name}: shutting down");
                break;
            }
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
    drop(listener);
    let _ = shutdown.send(true);
    crate::drain(&mut connections, "connections").await;
    endpoint.stop_sessions().await;
    ExitCode::SUCCESS
}

impl Endpoint {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<HttpBody> {
        let started = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let response = match self.refusal(&request) {
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

    /// The checks every request passes before anything is sent: Host, Origin, token, path;
    /// the answer to one that fails.
    fn refusal(&self, request: &Request<Incoming>) -> Option<Response<HttpBody>> {
        let headers = request.headers();
        let host = headers.get(HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(is_loopback_authority) {
            warn!(host = ?host, "refused a request whose Host is not a loopback name");
            return Some(refusal(
                StatusCode::MISDIRECTED_REQUEST,
                "the Host header must name a loopback address (localhost, 127.0.0.1, [::1])",
                &[],
            ));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let text = origin.to_str().unwrap_or("(not text)");
            if !is_loopback_origin(text) {
                warn!(
                    origin = text,
                    "refused a request from a non-loopback Origin"
                );
                return Some(refusal(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "the origin {text} may not use this endpoint: only loopback origins \
                         (http://localhost, http://127.0.0.1, http://[::1]) may"
                    ),
                    &[],
                ));
            }
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(AUTHORIZATION)
                .map(|v| bearer_token(v.as_bytes()));
            let (why, challenge) = match given {
                None => ("the request has no Authorization header", "Bearer"),
                Some(Some(given)) if same(given, token.as_bytes()) => ("", ""),
                Some(_) => (
                    "the bearer token is wrong",
                    "Bearer error=\"invalid_token\"",
                ),
            };
            if !why.is_empty() {
                warn!("refused a request: {why}");
                return Some(refusal(
                    StatusCode::UNAUTHORIZED,
                    &format!(
                        "{why}: this endpoint takes \"Authorization: Bearer TOKEN\", TOKEN from \
                         the proxy's --listen-token-file"
                    ),
                    &[(WWW_AUTHENTICATE.as_str(), challenge)],
                ));
            }
        }
        if request.uri().path() != PATH {
            return Some(refusal(
                StatusCode::NOT_FOUND,
                &format!("the MCP endpoint is {PATH}"),
                &[],
            ));
        }
        None
    }

    /// A JSON-RPC message or batch from the client, through the stack.
    async fn post(&self, request: Request<Incoming>) -> Response<HttpBody> {
        let json = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a POST carries a JSON-RPC message: Content-Type: application/json",
                &[],
            );
        }
        let (parts, body) = request.into_parts();
        let body = match Limited::new(body, MAX_BODY).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => {
                return refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the body is longer than {MAX_BODY} bytes, InvokeAgentRuntime's limit"
                    ),
                    &[],
                );
            }
            Err(e) => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    &format!("cannot read the body: {e}"),
                    &[],
                );
            }
        };
        let message: Value = match serde_json::from_slice(&body) {
            Ok(message @ (Value::Object(_) | Value::Array(_))) => message,
            Ok(_) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &error_response(
                        &Value::Null,
                        -32600,
                        "Invalid Request: not a JSON-RPC message",
                        None,
                    ),
                );
            }
            Err(e) => {
                warn!("a POST body that is not JSON: {e}");
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &error_response(&Value::Null, -32700, &format!("Parse error: {e}"), None),
                );
            }
        };
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
        let open = OpenRequests::of(&message);
        let batch = message.is_array();
        let initialize = match &message {
            Value::Array(batch) => batch.iter().any(is_initialize),
            one => is_initialize(one),
        };
        let initialized = match &message {
            Value::Array(batch) => batch.iter().any(is_initialized),
            one => is_initialized(one),
        };
        let mut upstream = self.upstream(Method::POST, &parts.headers, body);
        if self.kind == Kind::Runtime
            && !initialize
            && !parts.headers.contains_key("mcp-session-id")
        {
            // Outside any MCP session: the listener's runtime session.
            upstream
                .headers_mut()
                .insert(RUNTIME_SESSION, self.shared.clone());
            self.shared_used.store(true, Ordering::SeqCst);
        }
        match self.stack.clone().oneshot(upstream).await {
            Ok(response) => {
                if let (Some(session), true, Kind::Endpoint) = (session, initialized, self.kind)
                    && response.status().is_success()
                {
                    self.expect_stream(session);
                }
                self.relay(response, open, batch).await
            }
            Err(error) => {
                let (message, data) = describe_failure(error.as_ref());
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
    ) -> Response<HttpBody> {
        let (parts, mut body) = response.into_parts();
        let status = parts.status;
        let sse = parts
            .headers
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if status.is_success() {
            self.track(&parts.headers);
        }
        if status.is_success() && sse {
            let mut headers = answer_headers(&parts.headers);
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            let relay = SseRelay {
                inner: Box::pin(body),
                parser: SseParser::default(),
                open,
                status,
                idle: Box::pin(tokio::time::sleep(CALL_TIMEOUT)),
                queued: Vec::new(),
                ended: false,
                resumable: false,
            };
            return respond(status, headers, relay.boxed_unsync());
        }
        let whole = match read_whole(&mut body).await {
            Ok(whole) => whole,
            Err(message) => {
                warn!("{message}");
                return failed(open, batch, &message, None);
            }
        };
        let text = whole.trim_ascii();
        if status.is_success() {
            if text.is_empty() && !open.is_empty() {
                return failed(open, batch, &unanswered(status), None);
            }
            if !text.is_empty() && serde_json::from_slice::<Value>(text).is_err() {
                return failed(
                    open,
                    batch,
                    &format!(
                        "{} answered HTTP {} with a body that is not JSON",
                        upstream(),
                        status.as_u16()
                    ),
                    Some(&json!({"httpStatus": status.as_u16(), "body": preview(text)})),
                );
            }
        } else if !is_jsonrpc(text) {
            let (message, data) = describe_status(status, &parts.headers, text);
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
        let upstream = self.upstream(method.clone(), request.headers(), Bytes::new());
        let session = request.headers().get("mcp-session-id").cloned();
        // A stream on its way: the session's next requests wait for it (until it is answered,
        // or this is dropped).
        let _opening = (method == Method::GET)
            .then(|| session.clone())
            .flatten()
            .map(|session| self.stream_opening(session));
        let response = match self.stack.clone().oneshot(upstream).await {
            Ok(response) => response,
            Err(error) => {
                let (message, data) = describe_failure(error.as_ref());
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
        let whole = match read_whole(&mut body).await {
            Ok(whole) => whole,
            Err(message) => {
                warn!("{method}: {message}");
                return json_response(
                    StatusCode::BAD_GATEWAY,
                    &error_response(&Value::Null, PROXY_ERROR, &message, None),
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

    /// Marks the session's stream as on its way upstream, until the mark is dropped.
    fn stream_opening(&self, session: HeaderValue) -> StreamOpening<'_> {
        let (sent, receiver) = tokio::sync::watch::channel(false);
        lock(&self.opening).insert(session.clone(), receiver);
        // Only now that the mark is there: the requests that waited for the GET to come wait
        // on for it to reach the server.
        if let Some((_, arrived)) = lock(&self.expected).remove(&session) {
            let _ = arrived.send(true);
        }
        StreamOpening {
            endpoint: self,
            session,
            sent,
        }
    }

    /// The session is initialized: for [`STREAM_EXPECTED_WAIT`] its requests wait for the
    /// client's GET to come.
    fn expect_stream(&self, session: HeaderValue) {
        let now = Instant::now();
        let mut expected = lock(&self.expected);
        // Those of clients that never opened one, once their wait is over.
        expected.retain(|_, (until, _)| *until > now);
        expected.insert(
            session,
            (
                now + STREAM_EXPECTED_WAIT,
                tokio::sync::watch::channel(false).0,
            ),
        );
    }

    /// Waits until the session's stream is open upstream: for the client's GET to come, when
    /// the session was initialized moments ago (at most [`STREAM_EXPECTED_WAIT`]), then for
    /// the GET on its way upstream to be answered (at most [`STREAM_OPENING_WAIT`]).
    async fn after_stream_opened(&self, session: &HeaderValue) {
        let expected = lock(&self.expected)
            .get(session)
            .map(|(until, arrived)| (*until, arrived.subscribe()));
        if let Some((until, mut arrived)) = expected {
            let came = tokio::time::timeout_at(until.into(), arrived.wait_for(|came| *came));
            if came.await.is_err() {
                debug!("no stream from the client within {STREAM_EXPECTED_WAIT:?} of initialized");
                lock(&self.expected).remove(session);
            }
        }
        let Some(mut opened) = lock(&self.opening).get(session).cloned() else {
            return;
        };
        let waited = tokio::time::timeout(STREAM_OPENING_WAIT, opened.wait_for(|done| *done));
        if waited.await.is_err() {
            debug!("a request went on before its session's stream was open");
        }
    }

    /// The request the stack gets: the client's MCP headers, none of its others (its token
    /// among them).
    fn upstream(&self, method: Method, from: &HeaderMap, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        for name in FORWARDED {
            for value in from.get_all(name) {
                headers.append(HeaderName::from_static(name), value.clone());
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
            let mut request = self.upstream(Method::DELETE, &HeaderMap::new(), Bytes::new());
            request
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
            let stack = self.stack.clone();
            stops.spawn(async move {
                let ending = crate::answers::Ending {
                    done: "runtime session stopped",
                    doing: "stopping a runtime session",
                    expires_anyway: false,
                };
                crate::answers::log_ending(stack.oneshot(request).await, &ending).await;
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

/// Reads a whole answer, each frame within the idle limit.
async fn read_whole(body: &mut ResBody) -> Result<Bytes, String> {
    let mut whole = Vec::new();
    while let Some(frame) = next_frame(body).await? {
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

/// Whether a `Host` value (or an origin's authority) names a loopback address: `localhost`,
/// `127.x.x.x`, `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let Ok(authority) = authority.parse::<http::uri::Authority>() else {
        return false;
    };
    if authority.as_str().contains('@') {
        return false;
    }
    let host = authority.host();
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether an `Origin` is a loopback one: `http://` and a loopback authority, nothing else
/// (`null`, another scheme, a path are refused).
fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &origin[7..])
    else {
        return false;
    };
    !rest.contains(['/', '?', '#']) && is_loopback_authority(rest)
}

/// The token of an `Authorization: Bearer TOKEN` value.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

/// Compares in time that depends on the length only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How long a session's request waits for its stream on the way upstream.
const STREAM_OPENING_WAIT: Duration = Duration::from_secs(60);

/// How long after `initialized` a session's request waits for the client's GET to come: long
/// enough for a GET sent before the request, short enough that a client that never opens one
/// barely notices (its first requests, once).
const STREAM_EXPECTED_WAIT: Duration = Duration::from_millis(250);

/// A session's stream on its way upstream: dropped, it lets the session's requests go on.
struct StreamOpening<'a> {
    endpoint: &'a Endpoint,
    session: HeaderValue,
    sent: tokio::sync::watch::Sender<bool>,
}

impl Drop for StreamOpening<'_> {
    fn drop(&mut self) {
        let _ = self.sent.send(true);
        let mut opening = lock(&self.endpoint.opening);
        // Only this stream's mark: a later GET of the session may have put its own.
        if opening
            .get(&self.session)
            .is_some_and(|mark| mark.same_channel(&self.sent.subscribe()))
        {
            opening.remove(&self.session);
        }
    }
}

/// An SSE answer relayed event by event, as each is complete; when it breaks off, stalls or
/// ends with requests unanswered, an error event answers each of them: the client is never
/// left waiting.
struct SseRelay {
    inner: Pin<Box<ResBody>>,
    parser: SseParser,
    open: OpenRequests,
    status: StatusCode,
    /// Fires when the answer sends nothing for [`CALL_TIMEOUT`].
    idle: Pin<Box<tokio::time::Sleep>>,
    /// What goes to the client next.
    queued: Vec<u8>,
    ended: bool,
    /// Whether an event named an id: the server can resume the stream.
    resumable: bool,
}

impl SseRelay {
    /// The answer is over: every request still open gets an error event.
    fn end(&mut self, message: Option<String>) {
        let message = message.unwrap_or_else(|| unanswered(self.status));
        for error in self.open.fail_all(&message, None) {
            self.queued
                .extend_from_slice(&sse::event(error.to_string().as_bytes()));
        }
        self.ended = true;
    }
}

/// Queues one event of the answer as it came — its `id:` and `retry:` kept, a priming event
/// (empty data) too — with its data on one line when it is a JSON message, and without it when
/// it is not. Whether it named an id (the server can resume the stream).
fn relay_event(open: &mut OpenRequests, queued: &mut Vec<u8>, event: &sse::Event) -> bool {
    let data = match event.data.as_deref() {
        // Not JSON-RPC: passed on as it came.
        Some(data) if event.message().is_none() => Some(data.to_vec()),
        Some(data) if data.trim_ascii().is_empty() => Some(Vec::new()),
        Some(data) => parse_server_message(data).map(|message| {
            open.answered_by(&message);
            one_line(data)
        }),
        None => None,
    };
    queued.extend_from_slice(&event.encode(data.as_deref()));
    event.id.as_deref().is_some_and(|id| !id.is_empty())
}

impl Body for SseRelay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if !this.queued.is_empty() {
                let data = Bytes::from(std::mem::take(&mut this.queued));
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.inner.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
                    this.idle.as_mut().reset(deadline);
                    if let Some(data) = frame.data_ref() {
                        let (open, queued, resumable) =
                            (&mut this.open, &mut this.queued, &mut this.resumable);
                        this.parser.feed(data, |event| {
                            *resumable |= relay_event(open, queued, &event);
                        });
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let message = broke(&e);
                    warn!("{message}");
                    this.end(Some(message));
                }
                Poll::Ready(None) => {
                    let (open, queued, resumable) =
                        (&mut this.open, &mut this.queued, &mut this.resumable);
                    this.parser.finish(|event| {
                        *resumable |= relay_event(open, queued, &event);
                    });
                    if this.resumable {
                        // The server ended the stream on purpose, its events named: the client
                        // resumes it (GET with Last-Event-ID), and its answers come there.
                        this.ended = true;
                    } else {
                        this.end(None);
                    }
                }
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let message = stalled();
                    warn!("{message}");
                    this.end(Some(message));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for ok in [
            "http://localhost",
            "http://localhost:8765",
            "http://LOCALHOST:1",
            "HTTP://127.0.0.1:8765",
            "http://127.9.9.9",
            "http://[::1]:8765",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://evil.example:8765",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:8765",
            "https://localhost:8765",
            "file://",
            "http://localhost:8765/path",
            "http://user@localhost:8765",
            "http://[::ffff:127.0.0.1]",
            "http://0.0.0.0:8765",
            "http://192.168.1.10",
            "http://",
            "",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for ok in [
            "localhost:8765",
            "127.0.0.1:8765",
            "127.0.0.1",
            "[::1]:8765",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "0.0.0.0:8765",
            "10.0.0.1",
            "",
            "a@localhost",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_and_compared_whole() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
