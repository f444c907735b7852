//! rmcp (the official Rust MCP SDK) over this crate's stack (feature `rmcp`).
//!
//! [`TowerClient`] implements rmcp's [`StreamableHttpClient`] for any tower service that takes an
//! `http::Request<Full<Bytes>>` and answers an `http::Response<B>` with a `Bytes` body — this
//! crate's layers over hyper-util's client, a whole stack of your own, or anything else that
//! speaks HTTP. rmcp's own clients (reqwest, Unix socket) each own their HTTP client; this one
//! lets the middleware sit between rmcp and the wire:
//!
//! ```
//! # #[cfg(feature = "emulator")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), agentcore_tower::BoxError> {
//! use agentcore_tower::emulator::{Emulator, EmulatorConfig};
//! use agentcore_tower::rmcp::{RecordTapLayer, TowerClient};
//! use agentcore_tower::{ReplayGuardLayer, recommended_layers};
//! use rmcp::ServiceExt as _;
//! use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
//!
//! // A local AgentCore Runtime; for a real one, build the signer from
//! // `SigV4InvokeLayer::builder(InvokeTarget::arn(..), credentials)`.
//! let emulator = Emulator::start(EmulatorConfig::default()).await?;
//! let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//!     .build_http();
//! let stack = tower::ServiceBuilder::new()
//!     // Every call's attempt record, with what the call was for.
//!     .layer(RecordTapLayer::new(|exchange, record| println!("{exchange}:\n{record}")))
//!     .layer(recommended_layers(
//!         ReplayGuardLayer::new().idempotent_tools(["add"]),
//!         emulator.signer().build()?,
//!     ))
//!     .service(http);
//!
//! // rmcp needs a URI; SigV4InvokeLayer sends every request to its InvokeTarget instead.
//! let transport = TowerClient::new(stack).into_transport("http://agentcore.invalid/mcp");
//! // A protocol version that has `initialize` (rmcp's default, 2026-07-28, has none).
//! let client = ClientConfig::default()
//!     .with_protocol_version(ProtocolVersion::V_2025_06_18)
//!     .serve(transport)
//!     .await?;
//! let tools = client.list_all_tools().await?;
//! assert_eq!(tools.len(), 3);
//! let arguments = serde_json::json!({"a": 2, "b": 3}).as_object().cloned().unwrap_or_default();
//! let sum = client
//!     .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
//!     .await?;
//! assert_eq!(sum.content[0].as_text().map(|t| t.text.as_str()), Some("5"));
//! client.cancel().await?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "emulator"))]
//! # fn main() {}
//! ```
//!
//! ```text
//! rmcp client ── StreamableHttpClientTransport ── TowerClient ── RecordTap ── tower stack ── HTTP client
//! ```
//!
//! rmcp is a public dependency of this module: its types appear in the API, so the feature
//! follows rmcp 3.x, and a new major version of rmcp is a new major version of this crate.
//! Inside the examples `rmcp::` is the SDK itself, a dependency of your own
//! (`default-features = false, features = ["client"]` is enough).
//!
//! # Seeing the attempt records
//! rmcp never hands the app an HTTP response, so the [`AttemptRecord`] this crate's layers put
//! in the response's extensions (or in the [`Error`](crate::Error)) is out of reach above rmcp.
//! Two ways to see it:
//! * [`RecordTap`] (or [`RecordTapLayer`]), outermost, between [`TowerClient`] and the stack:
//!   it hands every call's record to a callback with the [`Exchange`] it was for (`POST
//!   tools/call add`, the JSON-RPC id) — when the answer's head arrives, when the call fails,
//!   and when it is dropped unfinished (a deadline, rmcp cancelling): then the attempt in
//!   flight shows "sent, no answer yet". Over a `tower::timeout` too: it passes the service's
//!   error type through.
//! * `on_record` of any of the crate's layers
//!   ([`RetryLayer::on_record`](crate::retry::RetryLayer::on_record)): the record alone, once per call
//!   that passed the layer.
//!
//! # An expired MCP session: rmcp re-initialises, and the guard sees a new call
//! A Streamable HTTP server that does not know the `Mcp-Session-Id` a request carries (it
//! restarted, or ended the session) answers HTTP 404. [`TowerClient`] reports that 404 as
//! rmcp's [`StreamableHttpError::SessionExpired`] — unless the 404 carries `x-amzn-errortype`:
//! then it is AgentCore's own (`ResourceNotFoundException`: a wrong runtime ARN or qualifier),
//! which a new MCP session could not cure, and rmcp gets it as an unexpected answer. On
//! `SessionExpired` rmcp (with `reinit_on_expired_session`, its default) sends its saved
//! `initialize` again without a session, then `notifications/initialized`, then re-sends every
//! message that got the 404 — once each; not its control messages (cancellations, answers to
//! the server).
//!
//! How that meets the stack, [`ReplayGuardLayer`](crate::ReplayGuardLayer) among it:
//! * **The 404 is delivered as it came.** It is no refusal of AgentCore's error table, so no
//!   layer re-sends it: the call ends with one attempt, `HTTP 404 -> … delivered`.
//! * **rmcp's re-send is a new call**, as are the re-initialisation's two requests: a new
//!   request with a record of its own, a budget of its own (`max_attempts` and the wait
//!   ceiling count again from zero; a [`CallBudget`](crate::CallBudget) of the first call is not
//!   carried over), judged afresh by every replay rule. A [`RecordTap`] sees both calls, each
//!   with its record, and the same JSON-RPC id ([`Exchange::request_id`]).
//! * **It is safe, even for a tool that is not idempotent**, because the 404 ran nothing: the
//!   transport's rule is that a server which ended a session answers 404 to every request
//!   carrying its id — it does not process them. The re-send is rmcp's decision on the server's answer,
//!   not a retry of a failure that may have run, so no replay rule is asked for it. That
//!   assumption is the server's to keep: one that ran the request and then answered 404 would
//!   have it run twice. For such a server, turn rmcp's recovery off
//!   (`StreamableHttpClientTransportConfig::reinit_on_expired_session(false)`).
//! * **What the guard still rules**: every request of the recovery is an ordinary call. A
//!   dropped connection or a 5xx while re-sending is judged as for any call (an undeclared
//!   `tools/call` is not sent again); a throttle or a session-busy refusal is waited out.
//! * **The runtime session**: with [`RuntimeSessions::PerLayer`](crate::invoke::RuntimeSessions)
//!   (the default) the new MCP session goes to the same runtime session (the same microVM);
//!   with `PerMcpSession` the new `initialize`, carrying no `Mcp-Session-Id`, gets a runtime
//!   session of its own, and the new `Mcp-Session-Id` is bound to it.
//!
//! Or let the stack recover instead: with
//! [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) in the stack (above the signer),
//! the 404 never reaches rmcp — the layer opens the new session itself, re-sends the request
//! within the same call (one record, asked of the replay rule, `assumes
//! refused-before-execution`), and with `PerMcpSession` keeps the new session on the old one's
//! runtime session. rmcp's own recovery then never runs: one of the two recovers, never both. It
//! runs only when the layer could not (opening the new session failed, or the layer never saw
//! the session opened), and the 404 reaches rmcp as above.
//!
//! `tests/rmcp_client.rs` (`an_expired_mcp_session_is_opened_again_and_the_call_runs_once`)
//! shows it with the non-idempotent `counter`: two calls, one 404, one run.
//!
//! # What goes out
//! * **POST**: the JSON-RPC message serialized as the body, `content-type: application/json`,
//!   `accept: application/json, text/event-stream`.
//! * **GET** (the standalone server stream): `accept: text/event-stream`, plus `last-event-id`
//!   when rmcp resumes a stream.
//! * **DELETE** (the end of a session): no body.
//! * On all three: `mcp-session-id` when rmcp has a session, `authorization: Bearer …` (marked
//!   sensitive) only when rmcp was given a token, and every header of rmcp's `custom_headers`
//!   (among them `MCP-Protocol-Version`, which rmcp adds once the version is negotiated). The
//!   reserved `accept`, `mcp-session-id` and `last-event-id` are refused as custom headers with
//!   [`StreamableHttpError::ReservedHeaderConflict`], as rmcp's own clients do.
//!
//! Behind [`SigV4InvokeLayer`](crate::SigV4InvokeLayer) the request URI is not where requests
//! go (the layer sends them to its `InvokeTarget`), and the layer answers the GET and the
//! DELETE itself with 405, sending nothing: rmcp goes on without the server stream, and closes
//! all the same. (With
//! [`stop_session_on_delete`](crate::invoke::SigV4InvokeLayerBuilder::stop_session_on_delete)
//! the DELETE ends the runtime session instead.)
//!
//! # How answers map to rmcp
//! | answer | rmcp sees |
//! |---|---|
//! | POST 202 / 204 | `Accepted` |
//! | POST 2xx `application/json` | the body collected (within `max_json_response_size`) and parsed as a `ServerJsonRpcMessage`: `Json(message, mcp-session-id)` |
//! | POST 2xx `text/event-stream` | an SSE stream over the body (each event within `max_sse_event_size`): `Sse(stream, mcp-session-id)` |
//! | POST 2xx to a notification or a response, empty or of another type | `Accepted` |
//! | POST 404 to a request that carried `mcp-session-id`, without `x-amzn-errortype` | `SessionExpired` (above) |
//! | POST 429; 5xx unless its JSON body is a JSON-RPC error | `HttpStatus(HttpStatusError { status, retry_after })` (the raw `Retry-After`); the body of a 429 or of a non-JSON 5xx is not read |
//! | POST 4xx/5xx whose JSON body is a JSON-RPC error (not 401/403) | `Json(error)`, so the caller sees the server's error |
//! | 401 / 403 with `WWW-Authenticate` | `AuthRequired` / `InsufficientScope` |
//! | any other non-2xx | `UnexpectedServerResponse("HTTP 409 RetryableConflictException: <body prefix>")`: the status, AWS's `x-amzn-errortype` if any, and at most `max_error_response_size` bytes of the body |
//! | a body that is not what its `content-type` says | `UnexpectedServerResponse` with a lossy preview of the bytes (a notification's answer is `Accepted` anyway) — never a panic |
//! | GET 405 | `ServerDoesNotSupportSse` (rmcp goes on without the stream) |
//! | GET 2xx `text/event-stream` | the event stream; another content type is `UnexpectedContentType` |
//! | DELETE 405 | `ServerDoesNotSupportDeleteSession` (rmcp logs it and closes) |
//! | DELETE 2xx or 404 (the session is gone either way) | `Ok(())` |
//! | GET / DELETE 429 or 5xx; other failures | `HttpStatus`; `UnexpectedServerResponse` as above |
//! | the tower service fails | `Client(TowerClientError::Service(error))`: for this crate's layers an [`Error`](crate::Error) carrying the record |
//!
//! rmcp retries none of these itself (except the re-initialisation after `SessionExpired`):
//! retrying throttles and refusals is the stack's job.
//!
//! # Limits
//! rmcp's size limiters are private to rmcp, so this module applies rmcp's
//! [`StreamableHttpResponseLimits`] itself: a JSON body past `max_json_response_size` is
//! refused ([`StreamableHttpError::ResponseBodyTooLarge`]); an SSE event past
//! `max_sse_event_size` ends its stream with [`TowerClientError::SseEventTooLarge`]; an error
//! body is read only up to `max_error_response_size`, for the diagnostic.
//!
//! # Not covered
//! rmcp's `legacy_discover_response` is private: a sessionless `server/discover` refused with a
//! 4xx is not turned into a correlated JSON-RPC error, so `ClientLifecycleMode::Auto` cannot
//! fall back to `initialize` against a legacy server through this client. Use the default
//! (`initialize`) lifecycle, with a protocol version that has it (2025-11-25 or older).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use ::rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::stream::{BoxStream, StreamExt, TryStreamExt};
use http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use serde::Deserialize as _;
use sse_stream::{Sse, SseStream};
use tower::{Layer, Service, ServiceExt};

use crate::contract::AWS_ERROR_TYPE;
use crate::contract::MCP_SESSION_ID;
use crate::{AttemptRecord, BoxError};

/// `Last-Event-Id`.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// What a POST accepts: both, as the MCP spec requires.
const ACCEPT_POST: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
/// What a GET accepts.
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
/// How many bytes of an unusable body an error message quotes.
const PREVIEW_BYTES: usize = 256;
/// Headers rmcp's own clients refuse in `custom_headers` (`MCP-Protocol-Version` is allowed:
/// rmcp's worker adds it after initialisation).
const RESERVED: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// What went wrong inside a [`TowerClient`] (rmcp wraps it in [`StreamableHttpError::Client`]).
///
/// Its `Display` and `Debug` carry no header value: the bearer token rmcp may hand the client
/// never appears in them.
#[derive(Debug)]
#[non_exhaustive]
pub enum TowerClientError {
    /// The message could not be serialized as JSON.
    Encode(serde_json::Error),
    /// The request could not be built: the URI or a header value is invalid.
    Request(http::Error),
    /// The tower service failed. For this crate's layers it is an [`Error`](crate::Error)
    /// (downcast it), which carries the call's attempt record.
    Service(BoxError),
    /// Reading the response body failed.
    Body(BoxError),
    /// An SSE event grew past the transport's `max_sse_event_size`; the stream ends here.
    SseEventTooLarge {
        /// The limit, in bytes.
        max_size: usize,
    },
}

impl fmt::Display for TowerClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Encode(e) => write!(f, "cannot serialize the JSON-RPC message: {e}"),
            Self::Request(e) => write!(f, "cannot build the HTTP request: {e}"),
            Self::Service(e) => write!(f, "the HTTP service failed: {e}"),
            Self::Body(e) => write!(f, "reading the response body failed: {e}"),
            Self::SseEventTooLarge { max_size } => {
                write!(
                    f,
                    "an SSE event exceeded the maximum size of {max_size} bytes"
                )
            }
        }
    }
}

impl std::error::Error for TowerClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Encode(e) => Some(e),
            Self::Request(e) => Some(e),
            Self::Service(e) | Self::Body(e) => Some(&**e),
            Self::SseEventTooLarge { .. } => None,
        }
    }
}

type HttpError = StreamableHttpError<TowerClientError>;
type SseEvents = BoxStream<'static, Result<Sse, SseError>>;

fn client_error(error: TowerClientError) -> HttpError {
    StreamableHttpError::Client(error)
}

/// rmcp's [`StreamableHttpClient`] over the tower service `S`: see the [module docs](self).
///
/// `S` takes `http::Request<Full<Bytes>>` and answers `http::Response<B>`, `B` a body of
/// `Bytes`; its error and its body's error convert into [`BoxError`]. Cloning is cheap when
/// `S`'s is (rmcp clones the client for every request it sends); each request clones `S` and
/// drives the clone with `oneshot` (`poll_ready`, then `call`).
#[derive(Clone, Debug)]
pub struct TowerClient<S> {
    service: S,
}

impl<S> TowerClient<S> {
    /// A client sending every request through `service`.
    pub fn new(service: S) -> Self {
        Self { service }
    }

    /// The rmcp transport over this client, posting to `uri`, rmcp's other settings at their
    /// defaults. For other settings, build the transport yourself:
    /// `StreamableHttpClientTransport::with_client(client, config)`.
    ///
    /// Behind [`SigV4InvokeLayer`](crate::SigV4InvokeLayer) the URI is not where requests go —
    /// the layer sends them to its `InvokeTarget` — but rmcp needs one: any valid URI does.
    ///
    /// rmcp spawns the transport's worker here: call it inside a Tokio runtime (it panics
    /// outside one).
    pub fn into_transport(self, uri: impl Into<Arc<str>>) -> StreamableHttpClientTransport<Self>
    where
        Self: StreamableHttpClient,
    {
        StreamableHttpClientTransport::with_client(
            self,
            StreamableHttpClientTransportConfig::with_uri(uri),
        )
    }

    /// The service requests go through.
    pub fn get_ref(&self) -> &S {
        &self.service
    }

    /// The service requests go through, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// The service requests go through, taken out of the client.
    pub fn into_inner(self) -> S {
        self.service
    }
}

impl<S, B> StreamableHttpClient for TowerClient<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Error = TowerClientError;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, HttpError>> + Send + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, HttpError>> + Send + '_ {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, HttpError>> + Send + '_ {
        // Clone the service before the future: it then owns what it uses, and stays `Send`
        // without `S: Sync`.
        let service = self.service.clone();
        async move {
            let body = serde_json::to_vec(&message)
                .map_err(|e| client_error(TowerClientError::Encode(e)))?;
            let session_attached = session_id.is_some();
            let request = build_request(
                Method::POST,
                &uri,
                Some(Bytes::from(body)),
                &Extra {
                    accept: Some(ACCEPT_POST),
                    session_id: session_id.as_deref(),
                    last_event_id: None,
                },
                auth_header,
                custom_headers,
            )?;
            let response = send(service, request).await?;
            post_answer(response, &message, session_attached, limits).await
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), HttpError>> + Send + '_ {
        let service = self.service.clone();
        async move {
            let request = build_request(
                Method::DELETE,
                &uri,
                None,
                &Extra {
                    accept: None,
                    session_id: Some(&session_id),
                    last_event_id: None,
                },
                auth_header,
                custom_headers,
            )?;
            let response = send(service, request).await?;
            let status = response.status();
            if status == StatusCode::METHOD_NOT_ALLOWED {
                return Err(StreamableHttpError::ServerDoesNotSupportDeleteSession);
            }
            // 404: the session is already gone, which is what a DELETE wants.
            if status.is_success() || status == StatusCode::NOT_FOUND {
                return Ok(());
            }
            Err(refusal(response).await)
        }
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<SseEvents, HttpError>> + Send + '_ {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<SseEvents, HttpError>> + Send + '_ {
        let service = self.service.clone();
        async move {
            let request = build_request(
                Method::GET,
                &uri,
                None,
                &Extra {
                    accept: Some(ACCEPT_SSE),
                    session_id: session_id.as_deref(),
                    last_event_id: last_event_id.as_deref(),
                },
                auth_header,
                custom_headers,
            )?;
            let response = send(service, request).await?;
            let status = response.status();
            if status == StatusCode::METHOD_NOT_ALLOWED {
                return Err(StreamableHttpError::ServerDoesNotSupportSse);
            }
            if !status.is_success() {
                return Err(refusal(response).await);
            }
            match content_type(response.headers()) {
                Some(ct) if media_type_is(ct, EVENT_STREAM) => {
                    Ok(sse_events(response.into_body(), max_sse_event_size))
                }
                other => Err(StreamableHttpError::UnexpectedContentType(
                    other.map(|ct| String::from_utf8_lossy(ct).into_owned()),
                )),
            }
        }
    }
}

/// The per-method headers of a request.
struct Extra<'a> {
    accept: Option<HeaderValue>,
    session_id: Option<&'a str>,
    last_event_id: Option<&'a str>,
}

fn build_request(
    method: Method,
    uri: &str,
    body: Option<Bytes>,
    extra: &Extra<'_>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> Result<Request<Full<Bytes>>, HttpError> {
    let has_body = body.is_some();
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in custom_headers {
        if RESERVED
            .iter()
            .any(|r| name.as_str().eq_ignore_ascii_case(r))
        {
            return Err(StreamableHttpError::ReservedHeaderConflict(
                name.to_string(),
            ));
        }
        builder = builder.header(name, value);
    }
    // Set after the custom headers, so that none of them can replace these.
    if let Some(accept) = &extra.accept {
        builder = builder.header(ACCEPT, accept.clone());
    }
    if has_body {
        builder = builder.header(CONTENT_TYPE, HeaderValue::from_static(JSON));
    }
    if let Some(token) = auth_header {
        let mut value = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|e| client_error(TowerClientError::Request(e.into())))?;
        value.set_sensitive(true);
        builder = builder.header(AUTHORIZATION, value);
    }
    if let Some(id) = extra.session_id {
        builder = builder.header(MCP_SESSION_ID, id);
    }
    if let Some(id) = extra.last_event_id {
        builder = builder.header(LAST_EVENT_ID, id);
    }
    builder
        .body(Full::new(body.unwrap_or_default()))
        .map_err(|e| client_error(TowerClientError::Request(e)))
}

async fn send<S, B>(service: S, request: Request<Full<Bytes>>) -> Result<Response<B>, HttpError>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    service
        .oneshot(request)
        .await
        .map_err(|e| client_error(TowerClientError::Service(e.into())))
}

/// Maps the answer to a POST.
async fn post_answer<B>(
    response: Response<B>,
    message: &ClientJsonRpcMessage,
    session_attached: bool,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    let (status, headers) = (parts.status, &parts.headers);
    if let Some(error) = auth_challenge(status, headers) {
        return Err(error);
    }
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && session_attached && !headers.contains_key(AWS_ERROR_TYPE)
    {
        return Err(StreamableHttpError::SessionExpired);
    }
    let is_json = content_type(headers).is_some_and(|ct| media_type_is(ct, JSON));
    let is_sse = content_type(headers).is_some_and(|ct| media_type_is(ct, EVENT_STREAM));
    let length = content_length(headers);
    let session_id = headers
        .get(MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);

    if !status.is_success() {
        let throttled_or_failed =
            status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
        // Throttled, or a server failure that cannot be a JSON-RPC error: the status and
        // Retry-After only, the body unread.
        if throttled_or_failed && (status == StatusCode::TOO_MANY_REQUESTS || !is_json) {
            return Err(http_status(status, headers).into());
        }
        // A 401/403 without a challenge keeps its status (rmcp's clients do the same): its body
        // is a diagnostic, never taken as the server's JSON-RPC error.
        let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
        if !is_json || auth_failure {
            let detail = diagnostic(body, limits.max_error_response_size).await;
            return Err(unexpected(status, headers, &detail));
        }
        // A JSON error body may be a JSON-RPC error, which the caller should see as such.
        return match read_limited(body, length, limits.max_json_response_size).await {
            Ok(bytes) => match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                Ok(error @ JsonRpcMessage::Error(_)) => {
                    Ok(StreamableHttpPostResponse::Json(error, session_id))
                }
                _ if throttled_or_failed => Err(http_status(status, headers).into()),
                _ => Err(unexpected(
                    status,
                    headers,
                    &preview(&bytes, limits.max_error_response_size),
                )),
            },
            Err(_) if throttled_or_failed => Err(http_status(status, headers).into()),
            Err(error) => Err(unexpected(status, headers, &format!("<{error}>"))),
        };
    }

    // A notification or a response to the server awaits no answer: whatever comes back
    // (202 was handled above; some servers send an empty 200) only says "received".
    let awaits_nothing = matches!(
        message,
        ClientJsonRpcMessage::Notification(_)
            | ClientJsonRpcMessage::Response(_)
            | ClientJsonRpcMessage::Error(_)
    );
    if awaits_nothing && length == Some(0) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if is_sse {
        return Ok(StreamableHttpPostResponse::Sse(
            sse_events(body, limits.max_sse_event_size),
            session_id,
        ));
    }
    if is_json {
        let bytes = read_limited(body, length, limits.max_json_response_size).await?;
        return match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
            Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session_id)),
            Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
            Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "HTTP {}: the JSON body is not a JSON-RPC message ({e}): {}",
                    status.as_u16(),
                    preview(&bytes, PREVIEW_BYTES)
                ),
            ))),
        };
    }
    if awaits_nothing {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    Err(StreamableHttpError::UnexpectedContentType(
        content_type(headers).map(|ct| String::from_utf8_lossy(ct).into_owned()),
    ))
}

/// The error for a GET or DELETE answered with a failure other than 405.
async fn refusal<B>(response: Response<B>) -> HttpError
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    if let Some(error) = auth_challenge(parts.status, &parts.headers) {
        return error;
    }
    if parts.status == StatusCode::TOO_MANY_REQUESTS || parts.status.is_server_error() {
        return http_status(parts.status, &parts.headers).into();
    }
    let max = StreamableHttpResponseLimits::default().max_error_response_size;
    unexpected(parts.status, &parts.headers, &diagnostic(body, max).await)
}

/// 401 / 403 with a `WWW-Authenticate` challenge, as rmcp's own clients report them.
fn auth_challenge(status: StatusCode, headers: &HeaderMap) -> Option<HttpError> {
    if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return None;
    }
    let header = headers.get(WWW_AUTHENTICATE)?;
    let Ok(challenge) = header.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(
            Cow::Borrowed("invalid www-authenticate header value"),
        ));
    };
    Some(if status == StatusCode::UNAUTHORIZED {
        StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge.to_owned()))
    } else {
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            challenge.to_owned(),
            scope_of(challenge),
        ))
    })
}

/// The `scope=` parameter of a challenge, quoted or not.
fn scope_of(challenge: &str) -> Option<String> {
    // ASCII lowercasing keeps byte offsets, so `start` indexes the original too.
    let start = challenge.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let rest = &challenge[start..];
    let scope = match rest.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => {
            &rest[..rest
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(rest.len())]
        }
    };
    (!scope.is_empty()).then(|| scope.to_owned())
}

/// Status and `Retry-After` (raw, as rmcp keeps it).
fn http_status(status: StatusCode, headers: &HeaderMap) -> HttpStatusError {
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    HttpStatusError::new(status.as_u16(), retry_after)
}

/// `HTTP 409 RetryableConflictException: <detail>`.
fn unexpected(status: StatusCode, headers: &HeaderMap, detail: &str) -> HttpError {
    let error_type = crate::record::aws_error_type(headers)
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
        "HTTP {}{error_type}: {detail}",
        status.as_u16()
    )))
}

/// Reads a whole body, refusing more than `max` bytes (early when `content-length` says so).
async fn read_limited<B>(body: B, length: Option<u64>, max: usize) -> Result<Vec<u8>, HttpError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let too_large = || StreamableHttpError::ResponseBodyTooLarge { max_size: max };
    if length.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut chunks = std::pin::pin!(body.into_data_stream());
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| client_error(TowerClientError::Body(e.into())))?;
        if chunk.len() > max - bytes.len() {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// At most `max` bytes of an error body, as text for a message; the rest is not read.
async fn diagnostic<B>(body: B, max: usize) -> String
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut chunks = std::pin::pin!(body.into_data_stream());
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match chunks.next().await {
            None => break,
            Some(Ok(chunk)) => {
                let n = chunk.len().min(max - bytes.len());
                bytes.extend_from_slice(&chunk[..n]);
            }
            Some(Err(e)) => return format!("<failed to read the body: {}>", e.into()),
        }
    }
    preview(&bytes, max)
}

/// A lossy, bounded view of bytes for an error message (invalid UTF-8 becomes U+FFFD).
fn preview(bytes: &[u8], max: usize) -> String {
    if bytes.is_empty() {
        return "<empty body>".to_owned();
    }
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(max)]);
    if bytes.len() > max {
        format!("{shown}…")
    } else {
        shown.into_owned()
    }
}

fn content_type(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes)
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Whether a `content-type` names `expected`, ignoring case and parameters (`; charset=…`).
fn media_type_is(value: &[u8], expected: &str) -> bool {
    value
        .split(|b| *b == b';')
        .next()
        .and_then(|essence| std::str::from_utf8(essence).ok())
        .is_some_and(|essence| {
            essence
                .trim_matches([' ', '\t'])
                .eq_ignore_ascii_case(expected)
        })
}

/// The SSE events of a body, each held to `max_event` bytes.
fn sse_events<B>(body: B, max_event: usize) -> SseEvents
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let bytes = body
        .into_data_stream()
        .map_err(|e| TowerClientError::Body(e.into()))
        .scan(
            (EventSize::new(max_event), false),
            |(size, ended), chunk| {
                if *ended {
                    return futures_util::future::ready(None);
                }
                let item = match chunk {
                    Ok(bytes) if !size.feed(&bytes) => {
                        Err(TowerClientError::SseEventTooLarge { max_size: size.max })
                    }
                    other => other,
                };
                // After an error the stream ends: nothing after it could be trusted.
                *ended = item.is_err();
                futures_util::future::ready(Some(item))
            },
        );
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Counts the bytes of the SSE event being received, as the parser will keep them (field
/// lines joined by newlines; comment lines dropped; a blank line ends the event).
struct EventSize {
    max: usize,
    event: usize,
    line: usize,
    comment: bool,
    after_cr: bool,
}

impl EventSize {
    fn new(max: usize) -> Self {
        Self {
            max,
            event: 0,
            line: 0,
            comment: false,
            after_cr: false,
        }
    }

    /// Feeds a chunk; `false` once the event (or a line) in progress passes the limit.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue; // the LF of a CRLF
            }
            match byte {
                b'\r' | b'\n' => {
                    if self.line == 0 {
                        self.event = 0;
                    } else if !self.comment {
                        self.event = self.event.saturating_add(self.line + 1);
                    }
                    self.line = 0;
                    self.comment = false;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    if self.line == 0 {
                        self.comment = byte == b':';
                    }
                    self.line += 1;
                }
            }
            if self.event.saturating_add(self.line) > self.max {
                return false;
            }
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Seeing the attempt records through rmcp
// ---------------------------------------------------------------------------------------------

/// What one HTTP exchange rmcp made was for, read off its request: `POST tools/call add`.
///
/// Its `Display` is the HTTP method, the JSON-RPC method and the tool, as far as there are;
/// neither it nor `Debug` shows headers or arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exchange {
    /// `POST`, `GET` or `DELETE`.
    pub http_method: Method,
    /// The JSON-RPC method a POST carried (`None` for a response to the server, or a body
    /// that is not one JSON-RPC message).
    pub rpc_method: Option<String>,
    /// The JSON-RPC id of a request (`None` for a notification): the same on rmcp's re-send of
    /// a request after an expired session, a new call with a record of its own.
    pub request_id: Option<RequestId>,
    /// The tool a `tools/call` named.
    pub tool: Option<String>,
}

impl Exchange {
    /// What `request` is for. Its body is read from a clone: a `Full` body is one frame, ready
    /// at once, so this never waits.
    pub fn of(request: &Request<Full<Bytes>>) -> Self {
        let message = request
            .body()
            .clone()
            .collect()
            .now_or_never()
            .and_then(Result::ok)
            .and_then(|body| serde_json::from_slice::<serde_json::Value>(&body.to_bytes()).ok());
        let get = |key: &str| message.as_ref().and_then(|m| m.get(key));
        let rpc_method = get("method").and_then(|m| m.as_str()).map(str::to_owned);
        let request_id = rpc_method
            .as_ref()
            .and(get("id"))
            .and_then(|id| RequestId::deserialize(id).ok());
        let tool = if rpc_method.as_deref() == Some("tools/call") {
            get("params")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        } else {
            None
        };
        Self {
            http_method: request.method().clone(),
            rpc_method,
            request_id,
            tool,
        }
    }
}

impl fmt::Display for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.http_method)?;
        if let Some(method) = &self.rpc_method {
            write!(f, " {method}")?;
        }
        if let Some(tool) = &self.tool {
            write!(f, " {tool}")?;
        }
        Ok(())
    }
}

/// The callback of a [`RecordTap`].
type Sink = Arc<dyn Fn(&Exchange, &AttemptRecord) + Send + Sync>;

/// A tower service that hands every call's [`AttemptRecord`] to a callback, with the
/// [`Exchange`] it was for: to see the records above rmcp, which never hands the app an HTTP
/// response. Put it outermost, between [`TowerClient`] and the stack ([`RecordTapLayer`] in a
/// `ServiceBuilder`).
///
/// Each call gets a record in its request's extensions (the one the request carries, else a
/// new one), which this crate's layers below fill; the callback receives it once:
/// * when the answer's head arrives (a streamed body may still be on its way);
/// * when the call fails;
/// * when the call is dropped before either — a deadline, rmcp cancelling — after the stack
///   below was dropped, so the attempt in flight shows "sent, no answer yet" and the guard's
///   "call dropped".
///
/// The GET and DELETE [`SigV4InvokeLayer`](crate::SigV4InvokeLayer) answers itself show one
/// attempt, "not sent"; below a stack without this crate's layers the record stays empty.
/// The callback runs inside the call (or the drop): keep it short, and do not panic in it.
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::{Arc, Mutex};
/// use agentcore_tower::rmcp::{Exchange, RecordTapLayer};
/// use agentcore_tower::{AttemptRecord, ThrottleRetryLayer};
/// use bytes::Bytes;
/// use http::{Request, Response};
/// use http_body_util::Full;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let seen: Arc<Mutex<Vec<(Exchange, AttemptRecord)>>> = Arc::default();
/// let sink = seen.clone();
/// let stack = ServiceBuilder::new()
///     .layer(RecordTapLayer::new(move |exchange, record| {
///         sink.lock().unwrap().push((exchange.clone(), record.clone()));
///     }))
///     .layer(ThrottleRetryLayer::new())
///     .service(service_fn(|_: Request<Full<Bytes>>| async {
///         Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
///     }));
///
/// // What rmcp sends through `TowerClient::new(stack)`:
/// let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}"#;
/// let request = Request::post("http://agentcore.invalid/mcp").body(Full::new(Bytes::from(call)));
/// stack.oneshot(request.unwrap()).await.unwrap();
///
/// let seen = seen.lock().unwrap();
/// let (exchange, record) = &seen[0];
/// assert_eq!(exchange.to_string(), "POST tools/call add");
/// assert_eq!(record.to_string(), "#1 HTTP 200 -> throttle: delivered; effect unknown");
/// # }
/// ```
#[derive(Clone)]
pub struct RecordTap<S> {
    inner: S,
    sink: Sink,
}

impl<S> RecordTap<S> {
    /// Wraps `inner`, handing `sink` every call's record when the call ends or is dropped.
    pub fn new(inner: S, sink: impl Fn(&Exchange, &AttemptRecord) + Send + Sync + 'static) -> Self {
        Self {
            inner,
            sink: Arc::new(sink),
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, taken out.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for RecordTap<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordTap")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<Request<Full<Bytes>>> for RecordTap<S>
where
    S: Service<Request<Full<Bytes>>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RecordTapFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Full<Bytes>>) -> Self::Future {
        let exchange = Exchange::of(&request);
        let record = match AttemptRecord::of_extensions(request.extensions()) {
            Some(record) => record.clone(),
            None => {
                let record = AttemptRecord::new();
                request.extensions_mut().insert(record.clone());
                record
            }
        };
        RecordTapFuture {
            inner: self.inner.call(request),
            report: Some(Report {
                sink: self.sink.clone(),
                exchange,
                record,
            }),
        }
    }
}

/// The [`Layer`] of [`RecordTap`], for a `ServiceBuilder`.
#[derive(Clone)]
pub struct RecordTapLayer {
    sink: Sink,
}

impl RecordTapLayer {
    /// The layer that wraps a service in a [`RecordTap`] handing every call's record to `sink`.
    pub fn new(sink: impl Fn(&Exchange, &AttemptRecord) + Send + Sync + 'static) -> Self {
        Self {
            sink: Arc::new(sink),
        }
    }
}

impl<S> Layer<S> for RecordTapLayer {
    type Service = RecordTap<S>;

    fn layer(&self, inner: S) -> RecordTap<S> {
        RecordTap {
            inner,
            sink: self.sink.clone(),
        }
    }
}

impl fmt::Debug for RecordTapLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordTapLayer").finish_non_exhaustive()
    }
}

/// The record to hand over, once: when the call ends, or when it is dropped.
struct Report {
    sink: Sink,
    exchange: Exchange,
    record: AttemptRecord,
}

impl Drop for Report {
    fn drop(&mut self) {
        (self.sink)(&self.exchange, &self.record);
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`RecordTap`] call: the inner service's, handing the record over when it
    /// ends or is dropped.
    pub struct RecordTapFuture<F> {
        // Declared first, so it is dropped first: a dropped call's layers record that before
        // the report is handed over.
        #[pin]
        inner: F,
        report: Option<Report>,
    }
}

impl<F, T, E> Future for RecordTapFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = std::task::ready!(this.inner.poll(cx));
        drop(this.report.take());
        Poll::Ready(output)
    }
}

impl<F> fmt::Debug for RecordTapFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordTapFuture")
            .field("exchange", &self.report.as_ref().map(|r| &r.exchange))
            .finish_non_exhaustive()
    }
}
