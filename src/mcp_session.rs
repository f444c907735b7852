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
//! the deadline of the call's [`CallBudget`]. The requests that open the new
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

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use pin_project_lite::pin_project;
use tower::{Layer, Service, ServiceExt};

use crate::body::ReadToBytes;
use crate::budget::{CallBudget, RetryBudget};
use crate::context::{CallContext, Head, OnRecord};
use crate::contract::{AWS_ERROR_TYPE, MCP_SESSION_ID};
use crate::error::{BoxError, Error};
use crate::jsonrpc::Body as JsonRpcBody;
use crate::record::{Decision, Handed, Verdict};
use crate::rule::{Failure, Refusal};

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
}

impl McpSessionRecoveryLayer {
    /// The layer, remembering at most 10,000 sessions.
    pub fn new() -> Self {
        Self {
            sessions: Arc::new(Sessions::new(MAX_SESSIONS)),
            budget: Some(RetryBudget::new()),
            on_record: None,
        }
    }

    /// Sets how many sessions the layer remembers (at least 1): past that, the one opened
    /// longest ago is forgotten. Starts an empty table.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.sessions = Arc::new(Sessions::new(sessions.max(1)));
        self
    }

    /// Draws the retry budget of the calls this layer is the first of the crate's layers to meet
    /// from `budget` (see [`RetryLayer::retry_budget`](crate::retry::RetryLayer::retry_budget)).
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// No retry budget for the calls this layer is the first of the crate's layers to meet.
    pub fn no_retry_budget(mut self) -> Self {
        self.budget = None;
        self
    }

    /// Calls `hook` once with the finished attempt record of every call that passes this layer
    /// (see [`RetryLayer::on_record`](crate::retry::RetryLayer::on_record)).
    pub fn on_record(
        mut self,
        hook: impl Fn(&crate::AttemptRecord) + Send + Sync + 'static,
    ) -> Self {
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
    inner_service_accessors!();
}

/// The sessions of one layer, keyed by the id their client holds.
struct Sessions {
    max: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// The sessions by the id their client holds; two servers behind one layer may give the
    /// same id, so each id has the sessions of every endpoint that gave it (almost always one).
    by_id: HashMap<Arc<str>, Vec<Arc<Session>>>,
    /// The sessions in the order they were opened; one forgotten since stays until it reaches
    /// the front, and the queue is swept when it grows past twice the table.
    opened: VecDeque<Arc<Session>>,
    len: usize,
}

impl Table {
    fn remove(&mut self, session: &Arc<Session>) -> bool {
        let id = &session.client_id;
        let Some(sessions) = self.by_id.get_mut(id) else {
            return false;
        };
        let before = sessions.len();
        sessions.retain(|s| !Arc::ptr_eq(s, session));
        let removed = sessions.len() < before;
        if sessions.is_empty() {
            self.by_id.remove(id);
        }
        self.len -= usize::from(removed);
        removed
    }
}

impl Sessions {
    fn new(max: usize) -> Self {
        Self {
            max,
            table: Mutex::new(Table::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `id` names at the endpoint `uri` is for.
    fn get(&self, id: &str, uri: &http::Uri) -> Option<Arc<Session>> {
        self.lock()
            .by_id
            .get(id)?
            .iter()
            .find(|s| s.is_at(uri))
            .cloned()
    }

    fn open(&self, session: Session) {
        let session = Arc::new(session);
        let mut table = self.lock();
        // A server that gives an id again replaces the session it named.
        if let Some(old) = table.get_old(&session) {
            table.remove(&old);
        }
        table
            .by_id
            .entry(session.client_id.clone())
            .or_default()
            .push(session.clone());
        table.len += 1;
        table.opened.push_back(session);
        while table.len > self.max {
            let Some(oldest) = table.opened.pop_front() else {
                break;
            };
            table.remove(&oldest);
        }
        if table.opened.len() > 2 * self.max {
            let Table { by_id, opened, .. } = &mut *table;
            opened.retain(|s| {
                by_id
                    .get(&s.client_id)
                    .is_some_and(|live| live.iter().any(|l| Arc::ptr_eq(l, s)))
            });
        }
    }

    fn forget(&self, session: &Arc<Session>) {
        self.lock().remove(session);
    }
}

impl Table {
    /// The session already kept under `session`'s id at its endpoint.
    fn get_old(&self, session: &Session) -> Option<Arc<Session>> {
        self.by_id
            .get(&session.client_id)?
            .iter()
            .find(|s| s.is_at(session.initialize.head.uri()))
            .cloned()
    }
}

/// A request kept to be sent again: its head and its body (the client's body type, erased).
#[derive(Clone)]
struct Kept {
    head: Arc<Head>,
    body: Arc<dyn Any + Send + Sync>,
}

impl Kept {
    fn of<B: Clone + Send + Sync + 'static>(request: &Request<B>, context: &CallContext) -> Self {
        Self {
            head: context.head_of(request),
            body: Arc::new(request.body().clone()),
        }
    }

    /// A copy, to the session `id`, with `authorization` when the request being served has one
    /// (a token refreshed since is used) — `None` if the body is of another type.
    fn request<B: Clone + 'static>(
        &self,
        id: Option<&Arc<str>>,
        authorization: Option<&HeaderValue>,
    ) -> Option<Request<B>> {
        let body = self.body.downcast_ref::<B>()?.clone();
        let mut request = self.head.request(body, http::Extensions::new());
        let headers = request.headers_mut();
        headers.remove(MCP_SESSION_ID);
        if let Some(value) = id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(MCP_SESSION_ID, value);
        }
        if let Some(auth) = authorization {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        Some(request)
    }
}

/// One MCP session the layer saw opened.
struct Session {
    /// The id the client holds: the first the server gave.
    client_id: Arc<str>,
    initialize: Kept,
    initialized: Mutex<Option<Kept>>,
    /// The id the server knows the session by now.
    current: Mutex<Arc<str>>,
    /// How many attempts to re-open the session failed: a request that waited for one sees
    /// it, and does not try again itself.
    failures: AtomicU64,
    renewing: tokio::sync::Mutex<()>,
}

impl Session {
    fn new(id: Arc<str>, initialize: Kept) -> Self {
        Self {
            client_id: id.clone(),
            initialize,
            initialized: Mutex::new(None),
            current: Mutex::new(id),
            failures: AtomicU64::new(0),
            renewing: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether a request for `uri` is for this session's endpoint (its scheme, authority and
    /// path: the query may differ).
    fn is_at(&self, uri: &http::Uri) -> bool {
        let own = self.initialize.head.uri();
        own.scheme() == uri.scheme()
            && own.authority() == uri.authority()
            && own.path() == uri.path()
    }

    fn current(&self) -> Arc<str> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn has_initialized(&self) -> bool {
        self.initialized
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
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
        let future = Box::pin(async move {
            let result = serve(service, sessions, request, &context).await;
            let record = context.record();
            let owns = ownership.is_some();
            if let Some(owner) = ownership {
                let succeeded = result
                    .as_ref()
                    .is_ok_and(|r| r.status().is_success() && record.latest_is_clear());
                owner.finish(succeeded);
            }
            match result {
                Ok(mut response) => {
                    if owns {
                        response.extensions_mut().insert(record.clone());
                    }
                    Ok(response)
                }
                Err(error) => Err(error.with_record(record)),
            }
        });
        ResponseFuture { future }
    }
}

/// What a request is to the layer.
enum Role {
    /// A POST without `Mcp-Session-Id`: an `initialize` when its body says so.
    MayOpen,
    /// A request of a session the layer saw opened.
    Of(Arc<Session>),
    /// Anything else: sent once, as it is.
    Other,
}

async fn serve<S, ReqB, ResB>(
    mut service: S,
    sessions: Arc<Sessions>,
    mut request: Request<ReqB>,
    context: &CallContext,
) -> Result<Response<ResB>, Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: Body<Data = Bytes> + Clone + Send + Sync + 'static,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
    ResB::Error: Into<BoxError>,
{
    let role = match crate::invoke::mcp_session_of(request.headers()) {
        Some(id) => sessions
            .get(id, request.uri())
            .map_or(Role::Other, Role::Of),
        None if request.method() == Method::POST => Role::MayOpen,
        None => Role::Other,
    };
    // Read only what may open or complete a session, and parse only a body that names it.
    let opening = match &role {
        Role::MayOpen => is_message(&request, "initialize").await,
        Role::Of(session) if !session.has_initialized() && request.method() == Method::POST => {
            is_message(&request, "notifications/initialized").await
        }
        _ => false,
    };
    let session = match role {
        Role::Of(session) => session,
        Role::MayOpen if opening => {
            // An `initialize`: sent once, remembered when it opened a session.
            let initialize = Kept::of(&request, context);
            let answer = send(&mut service, request, context).await?;
            if let Some(id) = opened_id(&answer) {
                sessions.open(Session::new(id, initialize));
            }
            return Ok(answer);
        }
        Role::MayOpen | Role::Other => return send(&mut service, request, context).await,
    };

    // The session's id now, which the request carries in place of the client's.
    let sent_with = session.current();
    if sent_with != session.client_id
        && let Ok(value) = HeaderValue::from_str(&sent_with)
    {
        request.headers_mut().insert(MCP_SESSION_ID, value);
    }
    // A copy for a re-send; its head shared with the retry layers below, which keep the same.
    let kept = Kept::of(&request, context);
    let extensions = context.keep_extensions(request.extensions());
    let budget = request.extensions().get::<CallBudget>().copied();
    let deleting = request.method() == Method::DELETE;
    let authorization = request.headers().get(AUTHORIZATION).cloned();
    let answer = send(&mut service, request, context).await?;
    if !is_expired(&answer) {
        return Ok(noted(
            answer, &sessions, &session, &sent_with, opening, deleting, &kept,
        ));
    }
    if deleting {
        // The client ends a session the server has ended already: nothing to re-open.
        sessions.forget(&session);
        return Ok(named_for_client(answer, &session, &sent_with));
    }

    // The server no longer knows the session: it ran nothing.
    let record = context.record();
    let failure = Failure::Refused(Refusal::SessionExpired);
    let unlimited = (u32::MAX, Duration::MAX);
    let permission = match context.grant(LAYER, &failure, EXPIRED, unlimited, Duration::ZERO) {
        Ok(permission) => permission,
        Err((verdict, permission)) => {
            record.decide(Decision::new(LAYER, verdict, permission));
            return Ok(named_for_client(answer, &session, &sent_with));
        }
    };
    // The requests that open the new session are calls of their own, within this call's
    // limits and budget.
    let mut carried = http::Extensions::new();
    if let Some(budget) = budget {
        carried.insert(budget);
    }
    if let Some(budget) = context.retry_budget() {
        carried.insert(budget.clone());
    }
    let opening_with = Opening {
        authorization: authorization.as_ref(),
        extensions: &carried,
    };
    let id = match renew(&session, &sent_with, service.clone(), opening_with).await {
        Ok(id) => id,
        Err(reason) => {
            context.refund(&failure);
            record.decide(Decision::new(
                LAYER,
                Verdict::NotRenewed {
                    cause: EXPIRED,
                    reason,
                },
                Some(permission),
            ));
            return Ok(named_for_client(answer, &session, &sent_with));
        }
    };
    record.decide(Decision::new(
        LAYER,
        Verdict::SentAgain {
            cause: EXPIRED,
            wait: Duration::ZERO,
            retry_after: None,
        },
        Some(permission),
    ));
    tracing::debug!(layer = LAYER, cause = EXPIRED, "sending again");
    // The refused answer is released before the request is sent again.
    drop(answer);
    let Some(mut again) = kept.request::<ReqB>(Some(&id), None) else {
        unreachable!("kept as this type")
    };
    *again.extensions_mut() = context.restore_extensions(&extensions);
    service.ready().await.map_err(Error::from_service)?;
    let answer = send(&mut service, again, context).await?;
    Ok(noted(
        answer, &sessions, &session, &id, opening, deleting, &kept,
    ))
}

/// Notes what an answer of a session means for it — its `notifications/initialized` taken, a
/// DELETE that ended it — and names the client's id in it.
fn noted<B>(
    answer: Response<B>,
    sessions: &Sessions,
    session: &Arc<Session>,
    sent_with: &str,
    initialized: bool,
    deleting: bool,
    kept: &Kept,
) -> Response<B> {
    if answer.status().is_success() {
        if initialized {
            *session
                .initialized
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(kept.clone());
        } else if deleting {
            sessions.forget(session);
        }
    }
    named_for_client(answer, session, sent_with)
}

/// Sends one attempt of the call: recorded as it is handed down, completed when it is answered.
async fn send<S, ReqB, ResB>(
    service: &mut S,
    mut request: Request<ReqB>,
    context: &CallContext,
) -> Result<Response<ResB>, Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    let record = context.record();
    let mut handed = Handed::of(record, &request);
    handed.sent();
    let index = record.dispatch(&mut request);
    let result = service.call(request).await.map_err(Error::from_service);
    context.complete(index, &result);
    result
}

/// Whether a request body is one JSON-RPC message whose method is `method`. A body in which
/// the method's name does not occur is not parsed (a clone of the body is read: for the
/// bodies MCP clients send, a count, not a copy).
async fn is_message<B>(request: &Request<B>, method: &str) -> bool
where
    B: Body<Data = Bytes> + Clone,
{
    let Ok(bytes) = ReadToBytes::new(request.body().clone(), READ_LIMIT).await else {
        return false;
    };
    if memchr::memmem::find(&bytes, method.as_bytes()).is_none() {
        return false;
    }
    matches!(
        JsonRpcBody::parse(&bytes, false),
        JsonRpcBody::Single(message) if message.method.as_deref() == Some(method)
    )
}

/// The `Mcp-Session-Id` a successful answer opened a session with.
fn opened_id<B>(answer: &Response<B>) -> Option<Arc<str>> {
    answer
        .status()
        .is_success()
        .then(|| crate::invoke::mcp_session_of(answer.headers()))
        .flatten()
        .map(Arc::from)
}

/// Whether an answer is the MCP server's 404 for a session it does not know: a platform's 404
/// names an AWS error type.
fn is_expired<B>(answer: &Response<B>) -> bool {
    answer.status() == StatusCode::NOT_FOUND && !answer.headers().contains_key(AWS_ERROR_TYPE)
}

/// The answer, its `Mcp-Session-Id` naming the id the client holds where it named `current`.
fn named_for_client<B>(mut answer: Response<B>, session: &Session, current: &str) -> Response<B> {
    if *session.client_id != *current
        && answer
            .headers()
            .get(MCP_SESSION_ID)
            .is_some_and(|v| v.as_bytes() == current.as_bytes())
        && let Ok(value) = HeaderValue::from_str(&session.client_id)
    {
        answer.headers_mut().insert(MCP_SESSION_ID, value);
    }
    answer
}

/// What the requests that open a new session carry of the request that met the expiry.
#[derive(Clone, Copy)]
struct Opening<'a> {
    /// Its `Authorization`, when it has one: a token refreshed since the session was opened.
    authorization: Option<&'a HeaderValue>,
    /// The call's limits and retry budget, for the opening calls to keep within.
    extensions: &'a http::Extensions,
}

/// Opens a new session in place of `dead`, unless a request that met the same expiry did (or
/// failed to) while this one waited: the id to send with, or why there is none.
async fn renew<S, ReqB, ResB>(
    session: &Session,
    dead: &Arc<str>,
    mut service: S,
    opening: Opening<'_>,
) -> Result<Arc<str>, String>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Clone + 'static,
    ResB: Body<Data = Bytes>,
    ResB::Error: Into<BoxError>,
{
    let failures = session.failures.load(Ordering::Acquire);
    let _renewing = session.renewing.lock().await;
    let current = session.current();
    if current != *dead {
        return Ok(current);
    }
    if session.failures.load(Ordering::Acquire) != failures {
        return Err("opening a new session failed for a request that met the same expiry".into());
    }
    // The session's `initialize` and `notifications/initialized` sent again: the new id.
    let opened: Result<Arc<str>, String> = async {
        let Some(mut initialize) = session
            .initialize
            .request::<ReqB>(None, opening.authorization)
        else {
            return Err("the initialize request was of another body type".into());
        };
        *initialize.extensions_mut() = opening.extensions.clone();
        // A runtime signer binding runtime sessions per MCP session keeps the new one on the
        // microVM the old one's last request brought up.
        initialize
            .extensions_mut()
            .insert(crate::invoke::RenewedFrom(dead.clone()));
        let answer = call(&mut service, initialize).await?;
        let Some(id) = opened_id(&answer) else {
            return Err(format!(
                "the new initialize was answered HTTP {} without an Mcp-Session-Id",
                answer.status().as_u16()
            ));
        };
        if !read_to_result(answer.into_body()).await? {
            return Err("the new initialize was answered without a JSON-RPC result".into());
        }
        let initialized = session
            .initialized
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|kept| kept.request::<ReqB>(Some(&id), opening.authorization));
        if let Some(mut initialized) = initialized {
            *initialized.extensions_mut() = opening.extensions.clone();
            let answer = call(&mut service, initialized).await?;
            let status = answer.status();
            read_to_result(answer.into_body()).await?;
            if !status.is_success() {
                return Err(format!(
                    "notifications/initialized was answered HTTP {}",
                    status.as_u16()
                ));
            }
        }
        Ok(id)
    }
    .await;
    match opened {
        Ok(id) => {
            *session.current.lock().unwrap_or_else(|p| p.into_inner()) = id.clone();
            tracing::debug!(layer = LAYER, "MCP session expired; a new one was opened");
            Ok(id)
        }
        Err(why) => {
            session.failures.fetch_add(1, Ordering::AcqRel);
            tracing::debug!(layer = LAYER, reason = %why, "MCP session expired; no new one");
            Err(why)
        }
    }
}

/// One request of the re-opening, through the layers below: its own call.
async fn call<S, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
) -> Result<Response<ResB>, String>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    let failed = |e: S::Error| {
        let error = Error::from_service(e);
        format!("the new session could not be opened: {error}")
    };
    service.ready().await.map_err(failed)?;
    service.call(request).await.map_err(failed)
}

/// Reads an answer of the re-opening until it holds a JSON-RPC result, or to its end (at most
/// [`READ_LIMIT`] bytes): whether it held one. A server may keep an event stream open after
/// the result; the rest is dropped unread.
async fn read_to_result<B>(body: B) -> Result<bool, String>
where
    B: Body<Data = Bytes>,
{
    use http_body_util::BodyExt;
    let mut body = std::pin::pin!(body);
    let mut read = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| "an answer of the new session could not be read")?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if read.len() + data.len() > READ_LIMIT {
            return Err("an answer of the new session was larger than 1 MiB".into());
        }
        read.extend_from_slice(&data);
        if has_result(&read) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether an `initialize` answer — JSON, or an event stream of JSON `data:` lines — holds a
/// JSON-RPC result.
fn has_result(body: &[u8]) -> bool {
    let result = |json: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(json)
            .is_ok_and(|v| v.get("result").is_some() && v.get("error").is_none())
    };
    if result(body) {
        return true;
    }
    body.split(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .any(|data| result(data.trim_ascii()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initialize_answer_has_a_result_in_either_form() {
        assert!(has_result(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#));
        assert!(has_result(
            b"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\r\n\r\n"
        ));
        assert!(!has_result(
            br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"no"}}"#
        ));
        assert!(!has_result(
            b"data: {\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{}}\n\n"
        ));
        assert!(!has_result(b""));
        assert!(!has_result(b"\xff"));
    }

    #[tokio::test]
    async fn an_event_stream_left_open_after_the_result_is_not_waited_for() {
        use futures_util::StreamExt;
        let result = Bytes::from_static(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,");
        let rest = Bytes::from_static(b"\"result\":{}}\n\n");
        let frames = futures_util::stream::iter([result, rest])
            .map(|b| Ok::<_, std::convert::Infallible>(http_body::Frame::data(b)))
            .chain(futures_util::stream::pending());
        let body = http_body_util::StreamBody::new(frames);
        assert_eq!(read_to_result(body).await, Ok(true));
        // An error answer read to its end.
        let body = http_body_util::Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"no"}}"#,
        ));
        assert_eq!(read_to_result(body).await, Ok(false));
    }

    fn kept(uri: &str) -> Kept {
        Kept {
            head: Arc::new(Head::of(&Request::post(uri).body(()).unwrap())),
            body: Arc::new(String::new()),
        }
    }

    #[test]
    fn the_table_forgets_the_oldest_past_its_size() {
        let sessions = Sessions::new(2);
        let uri: http::Uri = "https://a.example/mcp".parse().unwrap();
        for id in ["a", "b", "c"] {
            sessions.open(Session::new(id.into(), kept("https://a.example/mcp")));
        }
        assert!(sessions.get("a", &uri).is_none());
        let b = sessions.get("b", &uri).unwrap();
        assert!(sessions.get("c", &uri).is_some());
        sessions.forget(&b);
        assert!(sessions.get("b", &uri).is_none());
        assert_eq!(sessions.lock().len, 1);
    }

    #[test]
    fn an_id_given_again_replaces_its_session_and_the_queue_stays_bounded() {
        let sessions = Sessions::new(3);
        let uri: http::Uri = "https://a.example/mcp".parse().unwrap();
        for _ in 0..100 {
            sessions.open(Session::new("same".into(), kept("https://a.example/mcp")));
        }
        assert_eq!(sessions.lock().len, 1);
        assert!(sessions.lock().opened.len() <= 6);
        assert!(sessions.get("same", &uri).is_some());
    }

    #[test]
    fn two_endpoints_that_give_one_id_keep_two_sessions() {
        let sessions = Sessions::new(10);
        sessions.open(Session::new("s".into(), kept("https://a.example/mcp")));
        sessions.open(Session::new("s".into(), kept("https://b.example/mcp")));
        assert_eq!(sessions.lock().len, 2);
        let a = sessions
            .get("s", &"https://a.example/mcp?x=1".parse().unwrap())
            .unwrap();
        assert_eq!(a.initialize.head.uri().host(), Some("a.example"));
        let b = sessions
            .get("s", &"https://b.example/mcp".parse().unwrap())
            .unwrap();
        assert_eq!(b.initialize.head.uri().host(), Some("b.example"));
        assert!(
            sessions
                .get("s", &"https://c.example/mcp".parse().unwrap())
                .is_none()
        );
        assert!(
            sessions
                .get("s", &"https://a.example/other".parse().unwrap())
                .is_none()
        );
    }
}
