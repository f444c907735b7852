//! [`TaskPolling`]: one request through the layer, and what it is to the layer.

use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use serde_json::Value;
use tower::Service;

use super::TaskPollingLayer;
use super::body::TaskBody;
use super::call;
use super::future::{Boxed, ResponseFuture};
use super::table::{PREFIX, request_key};
use super::wire;
use crate::body::PeekedBody;
use crate::error::BoxError;
use crate::exchange::Peeked;
use crate::exchange::read_message;

/// How much of a request body is read to tell what it is.
const REQUEST_LIMIT: usize = 4 << 20;

/// What a request body must hold for the layer to parse it.
const READ_FOR: [&[u8]; 4] = [
    b"tools/call",
    b"server/discover",
    b"notifications/cancelled",
    PREFIX.as_bytes(),
];

/// The service [`TaskPollingLayer`] builds.
#[derive(Clone, Debug)]
pub struct TaskPolling<S> {
    pub(super) inner: S,
    pub(super) layer: TaskPollingLayer,
}

impl<S> TaskPolling<S> {
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

impl<S, ReqB, ResB> Service<Request<ReqB>> for TaskPolling<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Body<Data = Bytes> + From<Bytes> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes> + Unpin + Send + 'static,
    ResB::Error: Send,
{
    type Response = Response<TaskBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // tower's rule: the service polled ready is the one called; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if request.method() != Method::POST
            || !crate::jsonrpc::is_json_content_type(request.headers())
        {
            return ResponseFuture::direct(inner.call(request));
        }
        let future: Boxed<ResB, S::Error> = Box::pin(serve(inner, request, self.layer.clone()));
        ResponseFuture::read(future)
    }
}

/// A JSON POST, by what it holds.
async fn serve<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
    layer: TaskPollingLayer,
) -> Result<Response<TaskBody<ResB>>, S::Error>
where
    S: call::Below<ReqB, ResB>,
    ReqB: call::RequestBody,
    ResB: call::ResponseBody,
{
    let Some(message) = read_message(&request, REQUEST_LIMIT, &READ_FOR).await else {
        return pass(inner, request).await;
    };
    let method = message.get("method").and_then(Value::as_str);
    let our_id = message
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| id.starts_with(PREFIX));
    match (method, our_id) {
        // The client's response to a request of the server's the layer put to it.
        (None, Some(id)) => {
            layer.table.deliver(id, message.clone());
            Ok(accepted())
        }
        (Some("tools/call"), _) => match request_state(&message) {
            Some(state) => {
                let state = state.to_owned();
                call::resume(inner, request, message, &state, layer).await
            }
            None if !wire::declares(&message) && message.get("id").is_some() => {
                call::tool_call(inner, request, message, layer).await
            }
            None => pass(inner, request).await,
        },
        (Some("server/discover"), _) => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            let (answer, peeked) = Peeked::of(inner.call(request).await?).await;
            if peeked.answer(&id).is_some_and(|a| wire::offers_tasks(&a)) {
                layer.learn_offered();
            }
            Ok(answer.map(|()| TaskBody::server(peeked.into_body())))
        }
        (Some("notifications/cancelled"), _) => {
            if let Some(id) = message.pointer("/params/requestId") {
                let session = request
                    .headers()
                    .get(crate::contract::MCP_SESSION_ID)
                    .and_then(|v| v.to_str().ok());
                layer.table.cancel(&request_key(session, id));
            }
            pass(inner, request).await
        }
        _ => pass(inner, request).await,
    }
}

/// The request handed on as it is.
async fn pass<S, ReqB, ResB>(
    mut inner: S,
    request: Request<ReqB>,
) -> Result<Response<TaskBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Body,
{
    let answer = inner.call(request).await?;
    Ok(answer.map(|body| TaskBody::server(PeekedBody::new(body))))
}

/// `params.requestState` of a `tools/call`, when the layer issued it.
fn request_state(message: &Value) -> Option<&str> {
    message
        .pointer("/params/requestState")
        .and_then(Value::as_str)
        .filter(|state| state.starts_with(PREFIX))
}

/// HTTP 202: a response the layer took (MCP: a server accepts a client's response so).
fn accepted<B: Body>() -> Response<TaskBody<B>> {
    let mut answer = Response::new(TaskBody::local(Bytes::new()));
    *answer.status_mut() = StatusCode::ACCEPTED;
    answer
        .extensions_mut()
        .insert(crate::record::AttemptRecord::new());
    answer
}
