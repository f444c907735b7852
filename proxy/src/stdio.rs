//! The stdio transport: newline-delimited JSON-RPC on stdin, one line per message on stdout.
//!
//! The requests a client may cancel are in [`in_flight`]; the proxy's own requests
//! (the listing it makes again after a HeaderMismatch) in [`own_calls`].

mod in_flight;
mod lines;
mod own_calls;
mod relay;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use agentcore_tower::protocol;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::Full;
use serde_json::Value;
use tokio::sync::mpsc;
use tower::ServiceExt;
use tracing::{debug, error, info, warn};

use crate::answers::{Call, Ending, OpenRequests, Upstream, error_response, is_held, one_line};
use crate::call::ResBody;
use crate::shutdown::{STOP_TIMEOUT, Signals};
use crate::sse::{Event, SseParser, is_event_stream};
use crate::stack::{Built, Kind, Stack};
use crate::tools::Tools;
use in_flight::{Cancel, Cancellable, InFlight};
pub use lines::{MessagesIn, take_stdin};
use lines::{line_of, read_stdin, write_stdout};
use relay::{Asked, Relayed, read_events};

/// How long the server's stream waits before it is opened again, unless the server said
/// (`retry:`).
const STREAM_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

/// How many re-opens of the server's stream may fail in a row before the proxy gives up on it.
const STREAM_FAILURES: u32 = 5;

/// What the proxy does once stdin closed and the requests are drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtExit {
    /// Nothing: the runtime session is left to expire.
    Nothing,
    /// A DELETE, which the signing layer turns into `StopRuntimeSession` (a runtime,
    /// `--stop-session-on-exit`), when anything was sent.
    StopRuntimeSession,
    /// A plain MCP DELETE with the session id (an MCP endpoint), when the server gave one: the
    /// server ends the MCP session.
    EndMcpSession,
}

/// Runs the proxy until stdin closes (or a signal), then drains and does what `at_exit` says.
pub async fn run(input: MessagesIn, built: Built, tools: Tools, at_exit: AtExit) -> ExitCode {
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
        .spawn(move || read_stdin(input, lines_in))
    {
        error!("cannot start the stdin reader: {e}");
        return ExitCode::FAILURE;
    }
    let proxy = Arc::new(Proxy {
        stack: built.stack,
        uri: built.uri,
        kind: built.kind,
        upstream: built.upstream,
        tools,
        session: RwLock::new(Session::default()),
        in_flight: std::sync::Mutex::default(),
        sent: AtomicBool::new(false),
        out: out.clone(),
    });
    let mut dispatch = Dispatch {
        proxy,
        tasks: tokio::task::JoinSet::new(),
        stream: None,
        signals: Signals::watch(),
    };
    dispatch.read(&mut stdin).await;
    dispatch.finish(at_exit).await;
    drop(out);
    // Every sender is gone: the writer writes what is queued and ends.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    ExitCode::SUCCESS
}

/// The stdin loop: each message of the client sent on its way, in order or alongside the
/// others ([`in_order`]), until stdin closes or a signal comes; then the shutdown.
struct Dispatch {
    proxy: Arc<Proxy>,
    /// The requests that run alongside the others.
    tasks: tokio::task::JoinSet<()>,
    /// The server's own stream, once the session is initialized.
    stream: Option<tokio::task::JoinHandle<()>>,
    signals: Signals,
}

impl Dispatch {
    /// Reads stdin, each message sent on its way, until it closes or breaks, or a signal comes.
    async fn read(&mut self, stdin: &mut mpsc::Receiver<std::io::Result<Vec<u8>>>) {
        loop {
            let Some(line) = self.signals.unless(stdin.recv()).await.flatten() else {
                break;
            };
            while self.tasks.try_join_next().is_some() {}
            let line = match line {
                Ok(line) => line,
                Err(e) => {
                    error!("cannot read stdin: {e}");
                    break;
                }
            };
            let line = line.trim_ascii();
            let Some(message) = self.proxy.accept(line) else {
                continue;
            };
            if !self.send(Bytes::copy_from_slice(line), message).await {
                break;
            }
        }
    }

    /// Sends one message (`line`) on its way: whether the loop goes on (not when a signal came
    /// while a message that goes in order waited for its answer).
    async fn send(&mut self, line: Bytes, message: Value) -> bool {
        let serial = in_order(&message);
        let initialized =
            message.get("method").and_then(Value::as_str) == Some("notifications/initialized");
        let cancellable = Cancellable::of(&message);
        let cancel = Cancel::default();
        let forward = self.proxy.clone().forward(line, message, cancel.clone());
        if serial {
            return self.in_order(forward, initialized).await;
        }
        self.alongside(forward, cancellable, cancel);
        true
    }

    /// Sends a message that goes in order: nothing the client sent after it goes upstream
    /// before it is answered — nor, once the session is `initialized`, before the server's own
    /// stream is open, so nothing the server sends there at once is lost. `false` when a signal
    /// came first.
    async fn in_order(&mut self, forward: impl Future<Output = bool>, initialized: bool) -> bool {
        let proxy = self.proxy.clone();
        let open_stream = self.stream.is_none();
        let step = async move {
            let accepted = forward.await;
            if initialized && accepted && open_stream && proxy.has_session() {
                return proxy.open_stream().await;
            }
            None
        };
        let Some(opened) = self.signals.unless(step).await else {
            return false;
        };
        if opened.is_some() {
            self.stream = opened;
        }
        true
    }

    /// Sends a message alongside the others, from a task of its own; a request the client may
    /// cancel is kept in flight until it is answered.
    fn alongside(
        &mut self,
        forward: impl Future<Output = bool> + Send + 'static,
        cancellable: Option<Cancellable>,
        cancel: Cancel,
    ) {
        let done = self.proxy.clone();
        let key = cancellable.as_ref().map(|c| c.key.clone());
        let abort = self.tasks.spawn(async move {
            forward.await;
            if let Some(key) = key {
                done.in_flight().remove(&key);
            }
        });
        if let Some(Cancellable {
            key,
            held,
            stateless,
        }) = cancellable
        {
            let request = InFlight {
                abort,
                cancel,
                held,
                stateless,
            };
            self.proxy.in_flight().insert(key, request);
        }
    }

    /// Once stdin closed (or a signal came): the streams the client held open are closed, the
    /// requests still running drained, the server's stream ended, and the session ended as
    /// `at_exit` says.
    async fn finish(mut self, at_exit: AtExit) {
        if let Some(name) = self.signals.came() {
            info!("{name}: shutting down");
        }
        debug!(in_flight = self.tasks.len(), "stdin closed");
        let proxy = self.proxy;
        // The streams the client held open end with it: nothing is waited for on them.
        proxy.in_flight().retain(|_, request| {
            if request.held {
                request.cancel.set();
                request.abort.abort();
            }
            !request.held
        });
        // Requests given up on are answered by their trackers as they are dropped.
        crate::shutdown::drain(&mut self.tasks, "requests").await;
        // The server's stream ends with the session.
        if let Some(stream) = self.stream.take() {
            stream.abort();
        }
        match at_exit {
            AtExit::StopRuntimeSession if proxy.sent.load(Ordering::SeqCst) => {
                proxy.end(&STOP_RUNTIME_SESSION).await;
            }
            AtExit::EndMcpSession if proxy.has_session() => proxy.end(&END_MCP_SESSION).await,
            _ => {}
        }
    }
}

/// Whether a message must be answered upstream before anything the client sent after it is
/// forwarded: the handshake is serial (MCP: no request but pings before `initialized`), and a
/// notification is never overtaken by a later message (a `cancelled` by the request after it).
/// Requests run concurrently, and so do the client's answers to the server's requests.
fn in_order(message: &Value) -> bool {
    let serial = |message: &Value| {
        let method = message.get("method").and_then(Value::as_str);
        method == Some("initialize") || (method.is_some() && message.get("id").is_none())
    };
    match message {
        Value::Array(batch) => batch.iter().any(serial),
        message => serial(message),
    }
}

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
    /// A runtime (the signer writes the standard headers it carries) or an MCP URL (the proxy
    /// writes them, as the client's SDK would over HTTP).
    kind: Kind,
    /// The server, as the proxy's own answers speak of it, and the limits of a call.
    upstream: Upstream,
    /// The tools the client may see and call.
    tools: Tools,
    session: RwLock<Session>,
    /// The 2026-07-28 requests in flight, by id: what a `notifications/cancelled` closes.
    in_flight: std::sync::Mutex<HashMap<String, InFlight>>,
    sent: AtomicBool,
    out: mpsc::UnboundedSender<Vec<u8>>,
}

impl Proxy {
    /// The HTTP request that carries `body` (the client's `message`, for a POST) as an HTTP
    /// client of the message's era writes it: the session's id and negotiated version after
    /// `initialize`; for a message that names its version in `_meta` (2026-07-28), that
    /// version, and — to an MCP URL — `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` headers
    /// the tool's listing asks for (a runtime's signer writes the ones `InvokeAgentRuntime`
    /// carries).
    fn request(
        &self,
        method: Method,
        body: Bytes,
        message: Option<&Value>,
    ) -> Request<Full<Bytes>> {
        let initialize = message
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str)
            == Some("initialize");
        let post = method == Method::POST;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method.clone();
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        if post {
            // A DELETE has no body to type.
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(if method == Method::GET {
                "text/event-stream"
            } else {
                "application/json, text/event-stream"
            }),
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
        if let Some(message) = message
            && let Some(version) = protocol::version_in_meta(message)
            && let Ok(value) = HeaderValue::from_str(version)
        {
            headers.insert("mcp-protocol-version", value);
            if protocol::is_stateless(version) && self.kind == Kind::Endpoint {
                headers.extend(self.tools.standard_headers(message));
            }
        }
        request
    }

    /// The message a stdin line carries, when there is one to send. A line that is not JSON,
    /// or a message not of the client's era, is answered here; a 2026-07-28 cancel closes its
    /// request's stream. `None` then: nothing is sent.
    fn accept(&self, line: &[u8]) -> Option<Value> {
        if line.is_empty() {
            return None;
        }
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(e) => {
                warn!("stdin: a line that is not JSON: {e}");
                let parse_error = format!("Parse error: {e}");
                let answer = error_response(&Value::Null, -32700, &parse_error, None);
                let _ = self.out.send(line_of(&answer));
                return None;
            }
        };
        // What is not a message of the client's era is answered here, and nothing is sent.
        let version = protocol::version_in_meta(&message)
            .map(str::to_owned)
            .or_else(|| self.session_version());
        if let Err(invalid) = protocol::check_client_message(&message, version.as_deref()) {
            for invalid in invalid {
                warn!("stdin: not sent: {}", invalid.reason());
                let _ = self.out.send(line_of(&invalid.response()));
            }
            return None;
        }
        // A 2026-07-28 request is cancelled by closing its HTTP stream (the revision posts no
        // notification over HTTP): the one in flight is dropped, and nothing is sent.
        if let Some(cancelled) = self.cancelled_request(&message) {
            debug!(request = %cancelled, "cancelled by the client: its stream is closed");
            return None;
        }
        Some(message)
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, InFlight>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When `message` is a `notifications/cancelled` of a request in flight, that request
    /// waits for no answer. Of a 2026-07-28 request: its id, its stream closed (its task
    /// aborted), and the notification goes nowhere. Of a 2025 request: `None`, and the
    /// notification goes to the server as the client wrote it.
    fn cancelled_request(&self, message: &Value) -> Option<String> {
        if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
            return None;
        }
        let key = message.pointer("/params/requestId")?.to_string();
        let mut in_flight = self.in_flight();
        let request = in_flight.get(&key)?;
        request.cancel.set();
        if !request.stateless {
            return None;
        }
        let request = in_flight.remove(&key)?;
        request.abort.abort();
        Some(key)
    }

    /// The version `initialize` negotiated, if any.
    fn session_version(&self) -> Option<String> {
        let session = self.session.read().unwrap_or_else(|p| p.into_inner());
        session
            .protocol_version
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// Sends one stdin message and relays what comes back: whether it was answered with a 2xx.
    async fn forward(self: Arc<Self>, body: Bytes, message: Value, cancel: Cancel) -> bool {
        let method = match &message {
            Value::Object(m) => m.get("method").and_then(Value::as_str),
            _ => None,
        };
        let initialize = method == Some("initialize");
        let label = method.unwrap_or("(response or batch)").to_owned();
        let screen = self.tools.screen(&message);
        if let Some(errors) = screen.refused {
            // A tool the proxy does not let through: answered here, nothing sent.
            debug!(method = %label, "refused here: a tool not let through");
            for error in errors {
                let _ = self.out.send(line_of(&error));
            }
            return false;
        }
        let mut answers = Answers {
            open: OpenRequests::of(&message),
            lists: screen.lists,
            out: self.out.clone(),
            cancel,
            server: self.upstream.name,
        };
        let held = is_held(&message);
        // Re-issues in a row of a held stream that ended before it carried anything.
        let mut empty_ends = 0;
        // A 2026-07-28 call to an MCP URL whose `Mcp-Param-*` headers came from a listing the
        // server has since changed is refused with HeaderMismatch (nothing ran): listed again
        // and sent once more.
        let mut watch_mismatch = self.kind == Kind::Endpoint
            && method == Some("tools/call")
            && protocol::version_in_meta(&message).is_some_and(protocol::is_stateless);
        let result = loop {
            let request = self.request(Method::POST, body.clone(), Some(&message));
            let started = Instant::now();
            self.sent.store(true, Ordering::SeqCst);
            let response = match self.stack.clone().oneshot(request).await {
                Ok(response) => response,
                Err(error) => break Err(error),
            };
            debug!(method = %label, status = response.status().as_u16(), elapsed = ?started.elapsed(), "answered");
            let accepted = response.status().is_success();
            let asked = Asked {
                initialize,
                watch_mismatch,
                held,
            };
            match self.relay(response, &mut answers, asked).await {
                Relayed::Done => break Ok(accepted),
                Relayed::Ended { events, retry } => {
                    // The revision has no resumption; listening is safe to repeat.
                    empty_ends = if events == 0 { empty_ends + 1 } else { 0 };
                    if empty_ends > STREAM_FAILURES {
                        let message = format!(
                            "{} ended the stream of `{label}` {STREAM_FAILURES} times in a row \
                             without sending anything; it is not issued again",
                            self.upstream.name
                        );
                        warn!("{message}");
                        answers.fail_all(&message, None);
                        break Ok(false);
                    }
                    debug!(method = %label, "{} ended a held stream: issued again", self.upstream.name);
                    tokio::time::sleep(retry.unwrap_or(STREAM_RETRY)).await;
                }
                Relayed::HeaderMismatch => {
                    info!(
                        "the server refused the call's Mcp-Param-* headers (HeaderMismatch): listing the tools again, then sending it once more"
                    );
                    watch_mismatch = false;
                    self.list_again(&message).await;
                }
            }
        };
        match result {
            Ok(accepted) => accepted,
            Err(error) => {
                let (message, data) = self.upstream.describe_failure(error.as_ref());
                warn!(method = %label, "{message}");
                answers.fail_all(&message, Some(&data));
                false
            }
        }
    }

    /// Writes one server message of an answer as one line (its `tools/list` answers filtered);
    /// `None` (and nothing written) when it is not JSON.
    fn emit(&self, answers: &mut Answers, data: &[u8]) -> Option<Value> {
        let mut message = self.upstream.parse_server_message(data)?;
        answers.open.answered_by(&message);
        let mut line = if self.tools.filter(&answers.lists, &mut message) {
            message.to_string().into_bytes()
        } else {
            one_line(data)
        };
        line.push(b'\n');
        let _ = answers.out.send(line);
        Some(message)
    }

    /// Opens the server's own stream (MCP's GET) and relays it from a task of its own: `None`
    /// when the server offers none (405, as AgentCore Runtime answers) or it could not be
    /// opened.
    async fn open_stream(self: Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        match self.get_stream(None).await {
            Ok(Some(body)) => {
                info!("the server's stream is open");
                Some(tokio::spawn(self.relay_stream(body)))
            }
            Ok(None) => {
                debug!("no server stream offered");
                None
            }
            Err(why) => {
                warn!("the server's stream could not be opened: {why}");
                None
            }
        }
    }

    /// One GET of the server's stream, resumed after `last_id` when given: its body, `None`
    /// when no stream is offered, or why it failed.
    async fn get_stream(&self, last_id: Option<&str>) -> Result<Option<ResBody>, String> {
        let mut request = self.request(Method::GET, Bytes::new(), None);
        if let Some(value) = last_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            request.headers_mut().insert("last-event-id", value);
        }
        let response = self
            .stack
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| self.upstream.describe_failure(e.as_ref()).0)?;
        let status = response.status();
        if status == http::StatusCode::METHOD_NOT_ALLOWED {
            return Ok(None);
        }
        let sse = is_event_stream(response.headers());
        if !status.is_success() || !sse {
            return Err(format!(
                "{} answered HTTP {}",
                self.upstream.name,
                status.as_u16()
            ));
        }
        Ok(Some(response.into_body()))
    }

    /// Relays the server's stream to stdout, message by message, for as long as the session
    /// lives: when the stream ends or breaks, it is opened again after the wait the server
    /// asked for (`retry:`, else [`STREAM_RETRY`]) with the last event's id, so the server can
    /// send what was missed. Gives up after [`STREAM_FAILURES`] failed re-opens in a row.
    async fn relay_stream(self: Arc<Self>, mut body: ResBody) {
        let mut events = SseParser::default();
        let mut failures = 0;
        loop {
            let emit = |event: Event| {
                if let Some(data) = event.message() {
                    self.emit_server_message(data);
                }
                true
            };
            if let Err(why) =
                read_events(&mut body, &Call::stream(&self.upstream), &mut events, emit).await
            {
                debug!("the server's stream ended: {}", why.message);
            }
            loop {
                tokio::time::sleep(events.retry().unwrap_or(STREAM_RETRY)).await;
                match self.get_stream(events.last_id()).await {
                    Ok(Some(next)) => {
                        debug!("the server's stream is open again");
                        body = next;
                        failures = 0;
                        break;
                    }
                    Ok(None) => return,
                    Err(why) => {
                        failures += 1;
                        if failures >= STREAM_FAILURES {
                            warn!("the server's stream could not be opened again: {why}");
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Writes a message of the server's stream as one stdout line.
    fn emit_server_message(&self, data: &[u8]) {
        if self.upstream.parse_server_message(data).is_some() {
            let mut line = one_line(data);
            line.push(b'\n');
            let _ = self.out.send(line);
        }
    }

    fn has_session(&self) -> bool {
        let session = self.session.read().unwrap_or_else(|p| p.into_inner());
        session.id.is_some()
    }

    /// Ends the session with a DELETE, for up to [`STOP_TIMEOUT`], and logs how it went.
    async fn end(&self, ending: &Ending) {
        let request = self.request(Method::DELETE, Bytes::new(), None);
        match tokio::time::timeout(STOP_TIMEOUT, self.stack.clone().oneshot(request)).await {
            Ok(result) => self.upstream.log_ending(result, ending).await,
            Err(_) => warn!("{} took longer than {STOP_TIMEOUT:?}", ending.doing),
        }
    }
}

/// Ends the MCP session with a plain MCP DELETE (an MCP endpoint). A server may refuse to let
/// clients end sessions (405), or have ended it already (404): nothing to warn about.
const END_MCP_SESSION: Ending = Ending {
    done: "MCP session ended",
    doing: "ending the MCP session",
    expires_anyway: true,
};

/// Ends the MCP session with a DELETE, which the signing layer turns into
/// `StopRuntimeSession`.
const STOP_RUNTIME_SESSION: Ending = Ending {
    done: "runtime session stopped",
    doing: "stopping the runtime session",
    expires_anyway: false,
};

/// The requests of one stdin line still waiting for their answer. Whatever is still open when
/// it is dropped (the task was aborted at exit, or panicked) is answered with an error: a
/// client is never left waiting.
struct Answers {
    open: OpenRequests,
    /// The ids of the message's `tools/list` requests, whose answers are filtered.
    lists: Vec<Value>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// Set when the client cancelled the request: it waits for no answer.
    cancel: Cancel,
    /// The server, as messages name it.
    server: &'static str,
}

impl Answers {
    /// Answers every open request with an error, unless the client cancelled the request: then
    /// it waits for none (MCP: a cancelled request is not answered).
    fn fail_all(&mut self, message: &str, data: Option<&Value>) {
        if self.cancel.is_set() {
            return;
        }
        for error in self.open.fail_all(message, data) {
            let _ = self.out.send(line_of(&error));
        }
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        self.fail_all(
            &format!(
                "the proxy stopped before {} answered (stdin closed, or an internal error)",
                self.server
            ),
            None,
        );
    }
}
