//! [`SigV4Invoke`], the service [`SigV4InvokeLayer`] builds: every request a call of the
//! signer's state machine ([`call`]), as the layer's mapping says.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Full;
use tower::{Layer, Service};

use super::{ResponseFuture, Shared, SigV4InvokeLayer, call};
use crate::error::{BoxError, Error};
use crate::redact::InvokeBody;

/// The service [`SigV4InvokeLayer`] builds: each MCP request sent as `InvokeAgentRuntime` (a
/// DELETE as `StopRuntimeSession`), signed afresh on every attempt.
#[derive(Clone)]
pub struct SigV4Invoke<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> SigV4Invoke<S> {
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

    /// The layer's own runtime session id: the one requests that name none carry now with
    /// [`RuntimeSessions::PerLayer`](super::RuntimeSessions::PerLayer). With
    /// [`RuntimeSessions::PerMcpSession`](super::RuntimeSessions::PerMcpSession) no request
    /// uses it: each MCP session has its own.
    pub fn runtime_session_id(&self) -> String {
        self.shared.invoke().sessions.default_id().to_string()
    }
}

impl<S> Layer<S> for SigV4InvokeLayer {
    type Service = SigV4Invoke<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SigV4Invoke {
            inner,
            shared: self.shared.clone(),
        }
    }
}

impl fmt::Debug for SigV4InvokeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shared, f)
    }
}

impl<S: fmt::Debug> fmt::Debug for SigV4Invoke<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4Invoke")
            .field("inner", &self.inner)
            .field("shared", &self.shared)
            .finish()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for SigV4Invoke<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    type Response = Response<InvokeBody<ResB>>;
    type Error = Error;
    type Future = ResponseFuture<S, ReqB, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::from_service)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        call(&mut self.inner, &self.shared, request)
    }
}
