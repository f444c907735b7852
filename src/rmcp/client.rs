//! [`TowerClient`]: rmcp's Streamable HTTP client over a tower service — the requests it
//! builds and sends. The first `server/discover` of rmcp's lifecycle, which rmcp cannot
//! cancel, is not sent: rmcp is asked for it again ([`FirstProbe`](super::probe::FirstProbe)).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use ::rmcp::model::ClientJsonRpcMessage;
use ::rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Full;
use tower::{Service, ServiceExt};

use super::answer::{EVENT_STREAM, JSON, content_type, media_type_is, post_answer, refusal};
use super::error::{HttpError, TowerClientError, client_error};
use super::probe::FirstProbe;
use super::sse::{SseEvents, sse_events};
use crate::contract::MCP_SESSION_ID;
use crate::error::BoxError;

/// `Last-Event-Id`.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// What a POST accepts: both, as the MCP spec requires.
const ACCEPT_POST: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
/// What a GET accepts.
const ACCEPT_SSE: HeaderValue = HeaderValue::from_static("text/event-stream");

/// Headers rmcp's own clients refuse in `custom_headers` (`MCP-Protocol-Version` is allowed:
/// rmcp's worker adds it after initialisation).
const RESERVED: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// rmcp's [`StreamableHttpClient`] over the tower service `S`: see the [module docs](super).
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
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
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
            let session_attached = session_id.is_some();
            if let Some(probe) = FirstProbe::of(&message, session_attached) {
                return Ok(probe.send_again());
            }
            let body = serde_json::to_vec(&message)
                .map_err(|e| client_error(TowerClientError::Encode(e)))?;
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
