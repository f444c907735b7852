//! [`McpSessionRecoveryLayer`]: an MCP session that outlives the server's.
//!
//! An MCP server may end a session at any time, and then answers every request that carries
//! the session's `Mcp-Session-Id` with HTTP 404; the client MUST then open a new session with a
//! new `initialize` (MCP Streamable HTTP, session management). On AgentCore this is an ordinary
//! day: a runtime's microVM is replaced after its idle timeout (15 minutes by default) or at its
//! 8-hour lifetime, and the MCP server in the new one knows no session; a Gateway ends a session
//! a fixed time after its `initialize` (1 hour by default). A client that does not re-open the
//! session — or that cannot, like a desktop client behind a stdio proxy, to which the proxy *is*
//! the server — fails every call from then on.
//!
//! This layer re-opens it, for any MCP client stacked over it:
//!
//! * it remembers each session it sees opened: the `initialize` request whose answer carried a
//!   new `Mcp-Session-Id`, and the session's `notifications/initialized`;
//! * when a request carrying the session's current id is answered **404 without an AWS error
//!   type** (the MCP server's own "session not found"), it opens a new session through the
//!   layers below it — the remembered `initialize` (no `Mcp-Session-Id`), then the remembered
//!   `notifications/initialized` with the new id, each signed, re-sent after busy and throttling
//!   refusals and recorded by those layers as calls of their own — and re-sends the request that
//!   met the 404, once, with the new id. A 404 for an unknown session ran nothing; the record
//!   says so as an assumption, like every refusal: `by adapter, assumes
//!   refused-before-execution`, and the replay rule is asked first (an app's rule may forbid
//!   it);
//! * from then on, every request of the session carries the new id, whatever id the client
//!   holds: the client keeps the id it was given, and answers that name the new id name the
//!   client's;
//! * many requests meeting the same expiry share one re-initialize: the first opens the new
//!   session, the others wait for it and are re-sent with its id.
//!
//! Delivered as it came, never a reason to re-initialize: a 404 that carries an AWS error type
//! (`ResourceNotFoundException`: an unknown runtime, endpoint or qualifier — re-initializing
//! cannot help); a 404 to a request without `Mcp-Session-Id`, or with an id this layer did not
//! see opened; a 404 to the re-sent request (no loop); a 404 when opening the new session
//! failed (the record says why). A client that then re-initializes on its own gets a new
//! session, which this layer remembers in turn.
//!
//! ```
//! use std::collections::HashSet;
//! use std::convert::Infallible;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::{Arc, Mutex};
//!
//! use agentcore_tower::{AttemptRecord, McpSessionRecoveryLayer};
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), agentcore_tower::Error> {
//! // A stateful MCP server: it issues session ids and answers an id it does not know with 404.
//! let known = Arc::new(Mutex::new(HashSet::new()));
//! let server = service_fn({
//!     let known = known.clone();
//!     move |request: Request<Full<Bytes>>| {
//!         let known = known.clone();
//!         async move {
//!             let session = request.headers().get("mcp-session-id").cloned();
//!             let body = request.into_body().collect().await.unwrap().to_bytes();
//!             let mut known = known.lock().unwrap();
//!             let answer = Response::builder().header("content-type", "application/json");
//!             let answer = if body.windows(12).any(|w| w == b"\"initialize\"") {
//!                 static OPENED: AtomicU32 = AtomicU32::new(0);
//!                 let id = format!("session-{}", OPENED.fetch_add(1, Ordering::Relaxed) + 1);
//!                 known.insert(id.clone());
//!                 answer.header("mcp-session-id", id).body(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#)
//!             } else if !session.is_some_and(|id| known.contains(id.to_str().unwrap())) {
//!                 answer.status(StatusCode::NOT_FOUND).body(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#)
//!             } else if body.windows(13).any(|w| w == b"notifications") {
//!                 answer.status(StatusCode::ACCEPTED).body("")
//!             } else {
//!                 answer.body(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#)
//!             };
//!             Ok::<_, Infallible>(answer.unwrap().map(|b| Full::new(Bytes::from_static(b.as_bytes()))))
//!         }
//!     }
//! });
//!
//! let post = |session: Option<&str>, body: &'static str| {
//!     let mut request = Request::post("https://mcp.example/mcp")
//!         .header("content-type", "application/json")
//!         .header("accept", "application/json, text/event-stream");
//!     if let Some(session) = session {
//!         request = request.header("mcp-session-id", session);
//!     }
//!     request.body(Full::new(Bytes::from_static(body.as_bytes()))).unwrap()
//! };
//!
//! let mut client = ServiceBuilder::new().layer(McpSessionRecoveryLayer::new()).service(server);
//! let opened = client
//!     .ready().await?
//!     .call(post(None, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#))
//!     .await?;
//! assert_eq!(opened.headers()["mcp-session-id"], "session-1");
//! client
//!     .ready().await?
//!     .call(post(Some("session-1"), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#))
//!     .await?;
//!
//! // The server forgets every session, as a replaced microVM does.
//! known.lock().unwrap().clear();
//!
//! // The layer opens a new session and sends the call again; the client keeps its id.
//! let answer = client
//!     .ready().await?
//!     .call(post(Some("session-1"), r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
//!     .await?;
//! assert_eq!(answer.status(), StatusCode::OK);
//! let record = AttemptRecord::of_response(&answer).unwrap().clone();
//! println!("{record}");
//! // #1 HTTP 404 -> mcp_session: MCP session expired (HTTP 404), sent again after 0ms (by adapter, assumes refused-before-execution); effect unknown
//! // #2 HTTP 200 -> mcp_session: delivered; effect unknown
//! assert_eq!(record.len(), 2);
//! assert!(known.lock().unwrap().contains("session-2"));
//! # Ok(())
//! # }
//! ```
//!
//! # Where it goes in the stack
//! Above the signer and the retry layers (outermost, or just inside a deadline): the new session
//! is opened *through* them, so it is signed and its cold start waited out. Below the signer it
//! would send unsigned requests; the order of the others does not matter. With an AgentCore
//! Runtime and [`RuntimeSessions::PerMcpSession`](crate::invoke::RuntimeSessions), the new MCP
//! session stays on the runtime session of the old one, whose microVM the request that met the
//! 404 already brought up: one cold start, not two.
//!
//! # With rmcp
//! rmcp's Streamable HTTP client re-initializes on its own when a request meets a 404
//! (`reinit_on_expired_session`, on by default). With this layer below it, rmcp never sees that
//! 404 — the layer has already re-opened the session and answered the request — so one of the
//! two recovers, never both. Only when this layer could not (opening the new session failed, or
//! it never saw the session opened) does the 404 reach rmcp, which then re-initializes itself.
//!
//! # MCP 2026-07-28 and later
//! Those protocol versions have no `initialize` and no `Mcp-Session-Id`: there is no session
//! to lose, and this layer passes every request through. On AgentCore the runtime session id
//! still carries the stickiness to one microVM (see
//! [`RuntimeSessions`](crate::invoke::RuntimeSessions)).
//!
//! # Many sessions over one layer
//! The layer, its clones and the services it builds share one table of sessions, keyed by the
//! id each client holds and the endpoint (scheme, authority, path) its `initialize` went to:
//! two servers that give the same id keep two sessions, and a session is never re-opened
//! with another server's `initialize`. It keeps at most
//! [`max_sessions`](McpSessionRecoveryLayer::max_sessions) (default 10,000): past that, the
//! session opened longest ago is forgotten (a later 404 of its own is then delivered as it
//! came). A DELETE that ends a session (answered 2xx, or 404: the server had ended it) forgets
//! it at once. A session holds its two remembered requests (a few hundred bytes of JSON each,
//! and their headers).
//!
//! # Limits and budget
//! The re-send is one of the call's attempts: it is asked of the replay rule, counted in the
//! call's record and budget (priced as session busy is: nothing by default), and not made past
//! the deadline of the call's [`CallBudget`](crate::CallBudget). The requests that open the new
//! session are calls of their own through the layers below, carrying the call's `CallBudget`
//! and retry budget, so a cold start they meet is waited out within the call's limits; their
//! records reach the `on_record` hooks of those layers. A token the request carries in
//! `Authorization` replaces the one the session was opened with (it may have been refreshed).
//!
//! A call dropped while it opens the new session (a deadline outside the stack) leaves the
//! session as it was: the next request that meets the 404 opens one itself. With
//! `PerMcpSession`, a new session whose `initialize` was answered before the drop may have
//! taken the runtime session over, and the next one then starts on a runtime session of its
//! own (one more cold start).
//!
//! # Request and response bodies
//! The remembered requests are clones of the client's, so the request body must be `Clone`
//! (as for every retry layer of the crate), and readable as bytes to tell an `initialize` from
//! other requests: a clone of a POST without `Mcp-Session-Id` is read (for `Full<Bytes>`, a
//! count, not a copy) and parsed only when the word `initialize` occurs in it, and likewise a
//! session's requests until its `notifications/initialized` is seen. The answers to the
//! re-opening requests are read until they hold their result (at most 1 MiB; an event stream
//! the server keeps open is not waited for) and dropped; every other answer is handed up as it
//! came, only its `Mcp-Session-Id` header renamed.

mod renew;
mod serve;
mod table;
#[cfg(all(test, feature = "opentelemetry"))]
mod tests;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::budget::RetryBudget;
use crate::context::{CallContext, OnRecord};
use crate::error::{BoxError, Error};
use crate::record::AttemptRecord;
use serve::serve;
use table::Sessions;

const LAYER: &str = "mcp_session";

/// What the record says of a request that met an expired session.
const EXPIRED: &str = "MCP session expired (HTTP 404)";

/// How much of a request body is read to tell what it is, and of the re-opening requests'
/// answers.
const READ_LIMIT: usize = 1 << 20;

/// The default of [`McpSessionRecoveryLayer::max_sessions`].
const MAX_SESSIONS: usize = 10_000;

/// Re-opens an MCP session the server no longer knows (HTTP 404) and re-sends the request that
/// met it. See the [module docs](self).
#[derive(Clone)]
pub struct McpSessionRecoveryLayer {
    sessions: Arc<Sessions>,
    budget: Option<RetryBudget>,
    on_record: Option<OnRecord>,
    trace_context: Option<crate::telemetry::TraceContext>,
    #[cfg(feature = "opentelemetry")]
    metrics: Option<crate::telemetry::Metrics>,
}

impl McpSessionRecoveryLayer {
    /// The layer, remembering at most 10,000 sessions.
    pub fn new() -> Self {
        Self {
            sessions: Arc::new(Sessions::new(MAX_SESSIONS)),
            budget: Some(RetryBudget::new()),
            on_record: None,
            trace_context: None,
            #[cfg(feature = "opentelemetry")]
            metrics: None,
        }
    }

    /// Sets how many sessions the layer remembers (at least 1): past that, the one opened
    /// longest ago is forgotten. Starts an empty table.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        #[allow(unused_mut)]
        let mut table = Sessions::new(sessions.max(1));
        #[cfg(feature = "opentelemetry")]
        {
            table.metrics = self.metrics.clone();
        }
        self.sessions = Arc::new(table);
        self
    }

    /// Draws the retry budget of the calls this layer is the first of the crate's layers to meet
    /// from `budget` (see [`RetryLayer::retry_budget`](crate::retry::RetryLayer::retry_budget)).
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Writes the trace headers of `trace` on every attempt of the calls this layer meets (see
    /// [`TraceContext`](crate::telemetry::TraceContext)).
    pub fn trace_context(mut self, trace: crate::telemetry::TraceContext) -> Self {
        self.trace_context = Some(trace);
        self
    }

    /// Records the durations of the calls this layer meets and of their attempts in `metrics`
    /// (see [`Metrics`](crate::telemetry::Metrics)), and of the MCP sessions it sees opened
    /// (`mcp.client.session.duration`, with the `server.address` and `server.port` its
    /// `initialize` went to and its `mcp.protocol.version`): from the answer to `initialize` to
    /// the first of the answer to the client's DELETE (2xx, or 404: the server had ended it) and
    /// — `error.type = session_lost` — a 404 of a session the server no longer knows that reached
    /// the client (opening it again failed, or the replay rule or the retry budget refused it;
    /// a client then opens a new session). Recorded once per session; one the client leaves
    /// without a DELETE, or that the table forgets, is not recorded. Starts an empty table.
    #[cfg(feature = "opentelemetry")]
    pub fn metrics(mut self, metrics: crate::telemetry::Metrics) -> Self {
        let mut sessions = Sessions::new(self.sessions.max);
        sessions.metrics = Some(metrics.clone());
        self.sessions = Arc::new(sessions);
        self.metrics = Some(metrics);
        self
    }

    /// No retry budget for the calls this layer is the first of the crate's layers to meet.
    pub fn no_retry_budget(mut self) -> Self {
        self.budget = None;
        self
    }

    /// Calls `hook` once with the finished attempt record of every call that passes this layer
    /// (see [`RetryLayer::on_record`](crate::retry::RetryLayer::on_record)).
    pub fn on_record(mut self, hook: impl Fn(&AttemptRecord) + Send + Sync + 'static) -> Self {
        self.on_record = Some(OnRecord(Arc::new(hook)));
        self
    }

    /// How many sessions the layer remembers now.
    pub fn sessions(&self) -> usize {
        self.sessions.lock().len
    }
}

impl Default for McpSessionRecoveryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for McpSessionRecoveryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSessionRecoveryLayer")
            .field("sessions", &self.sessions())
            .field("max_sessions", &self.sessions.max)
            .field("retry_budget", &self.budget.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for McpSessionRecoveryLayer {
    type Service = McpSessionRecovery<S>;

    fn layer(&self, inner: S) -> Self::Service {
        McpSessionRecovery {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`McpSessionRecoveryLayer`] builds.
#[derive(Clone, Debug)]
pub struct McpSessionRecovery<S> {
    inner: S,
    layer: McpSessionRecoveryLayer,
}

impl<S> McpSessionRecovery<S> {
    /// The service below.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The service below, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service below.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The response future of [`McpSessionRecovery`].
type Boxed<B> = Pin<Box<dyn Future<Output = Result<Response<B>, Error>> + Send>>;

pin_project! {
    /// The response future of [`McpSessionRecovery`]. The steps of a call that may re-open its
    /// session (read the request, send, open a new session shared with other calls, send again)
    /// run as one boxed future: one allocation per call.
    pub struct ResponseFuture<B> {
        #[pin]
        future: Boxed<B>,
    }
}

impl<B> Future for ResponseFuture<B> {
    type Output = Result<Response<B>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(cx)
    }
}

impl<B> fmt::Debug for ResponseFuture<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for McpSessionRecovery<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    ReqB: Body<Data = Bytes> + Clone + Send + Sync + 'static,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    type Response = Response<ResB>;
    type Error = Error;
    type Future = ResponseFuture<ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::from_service)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let (context, ownership) = CallContext::enter(
            &mut request,
            LAYER,
            self.layer.on_record.as_ref(),
            self.layer.budget.as_ref(),
        );
        // tower's rule: the service polled ready is the one called; a clone takes its place.
        let clone = self.inner.clone();
        let service = std::mem::replace(&mut self.inner, clone);
        let sessions = self.layer.sessions.clone();
        if let Some(trace) = &self.layer.trace_context {
            context.use_trace_context(trace);
        }
        #[cfg(feature = "opentelemetry")]
        if let Some(metrics) = &self.layer.metrics {
            context.use_metrics(metrics);
        }
        context.describe_from(request.body());
        let span = context.span();
        let future = Box::pin(tracing::Instrument::instrument(
            async move {
                let result = serve(service, sessions, request, &context).await;
                crate::context::delivered(result, None, context.record(), ownership)
            },
            span,
        ));
        ResponseFuture { future }
    }
}
