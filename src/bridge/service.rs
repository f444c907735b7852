//! [`ProtocolBridge`]: one request through the bridge, and what it is to the bridge.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use pin_project_lite::pin_project;
use tower::Service;

use super::down::{REQUEST_LIMIT, is_modern_request};
use super::local::local;
use super::{BridgeBody, ProtocolBridgeLayer, carry, down, open};
use crate::body::{PeekedBody, ReadToBytes};
use crate::error::BoxError;
use crate::exchange::read_message;
use crate::sends::Sends;

/// The service [`ProtocolBridgeLayer`] builds.
#[derive(Clone, Debug)]
pub struct ProtocolBridge<S> {
    pub(super) inner: S,
    pub(super) layer: ProtocolBridgeLayer,
}

impl<S> ProtocolBridge<S> {
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

/// The steps of one request, boxed: one allocation per call.
type Boxed<B, E> = Pin<Box<dyn Future<Output = Result<Response<BridgeBody<B>>, E>> + Send>>;

pin_project! {
    /// The response future of [`ProtocolBridge`].
    pub struct ResponseFuture<B: Body, E> {
        #[pin]
        future: Boxed<B, E>,
    }
}

impl<B: Body, E> Future for ResponseFuture<B, E> {
    type Output = Result<Response<BridgeBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(cx)
    }
}

impl<B: Body, E> fmt::Debug for ResponseFuture<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for ProtocolBridge<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
    ResB::Error: Into<BoxError> + Send,
{
    type Response = Response<BridgeBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // tower's rule: the service polled ready is the one called; a clone takes its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture {
            future: Box::pin(serve(inner, request, self.layer.clone())),
        }
    }
}

/// A request, by what it is to the bridge: a session of its own, an `initialize`, or neither.
async fn serve<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    layer: ProtocolBridgeLayer,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Sends<ReqB, ResB, Future: Send> + Clone + Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
{
    let session = request
        .headers()
        .get(crate::contract::MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(client) = session.as_deref().and_then(|id| layer.sessions.client(id)) {
        let session = session.unwrap_or_default();
        return match *request.method() {
            Method::POST => match read_message(&request, REQUEST_LIMIT, &[b"jsonrpc"]).await {
                Some(message) => carry::post(inner, request, message, &client, &layer).await,
                None => Ok(local(StatusCode::BAD_REQUEST, None)),
            },
            Method::DELETE => {
                layer.sessions.close(&session);
                end_runtime_session(inner, request, &client).await
            }
            // The server's own stream: a `subscriptions/listen` of 2026-07-28.
            Method::GET => super::listen::open(inner, request, &client, &layer).await,
            _ => Ok(local(StatusCode::METHOD_NOT_ALLOWED, None)),
        };
    }
    if request.method() == Method::POST && session.is_none() {
        match seen(&request, &layer).await {
            Seen::Initialize(message) => {
                return open::initialize(inner, request, message, &layer).await;
            }
            Seen::Modern(message) => {
                return down::request(inner, request, Some(message), &layer).await;
            }
            Seen::MaybeModern => return down::request(inner, request, None, &layer).await,
            Seen::Other => {}
        }
    }
    let answer = inner.call(request).await?;
    Ok(answer.map(|body| BridgeBody::server(PeekedBody::new(body))))
}

/// What a POST outside a session is to the bridge.
enum Seen {
    /// An `initialize`.
    Initialize(serde_json::Value),
    /// A request of 2026-07-28, read now: a discovery, or any request when clients of that
    /// revision are bridged.
    Modern(serde_json::Value),
    /// A body that names a version in `_meta`, not read: only a refusal has it read (the hot
    /// path of a client of 2026-07-28 whose server speaks its revision parses nothing here).
    MaybeModern,
    Other,
}

/// What a POST outside a session is, its body parsed only when the bridge acts on it at once.
async fn seen<ReqB>(request: &Request<ReqB>, layer: &ProtocolBridgeLayer) -> Seen
where
    ReqB: Body<Data = Bytes> + Clone,
{
    let Ok(bytes) = ReadToBytes::new(request.body().clone(), REQUEST_LIMIT).await else {
        return Seen::Other;
    };
    let has = |needle: &[u8]| memchr::memmem::find(&bytes, needle).is_some();
    let modern = has(b"/protocolVersion");
    if !has(b"initialize") && !(modern && (layer.bridges_down() || has(b"server/discover"))) {
        return if modern {
            Seen::MaybeModern
        } else {
            Seen::Other
        };
    }
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(message) if message["method"] == "initialize" => Seen::Initialize(message),
        Ok(message) if is_modern_request(&message) => Seen::Modern(message),
        _ => Seen::Other,
    }
}

/// The DELETE that ends a bridged session: sent on, naming the session's runtime session and
/// no MCP session, where there is one (a signer may stop it: `StopRuntimeSession`); answered
/// 200 by the bridge otherwise, or when what is below does not end it.
async fn end_runtime_session<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    client: &super::sessions::Client,
) -> Result<Response<BridgeBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Body,
{
    if client.runtime_session.is_none() {
        return Ok(local(StatusCode::OK, None));
    }
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(crate::contract::MCP_SESSION_ID);
    client.name_runtime_session(&mut parts.headers);
    let answer = inner.call(Request::from_parts(parts, body)).await?;
    if !answer.status().is_success() {
        return Ok(local(StatusCode::OK, None));
    }
    Ok(answer.map(|body| BridgeBody::server(PeekedBody::new(body))))
}
