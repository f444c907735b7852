//! Seeing the attempt records through rmcp: [`RecordTap`] hands every call's record to a
//! callback, with the [`Exchange`] it was for.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::rmcp::model::RequestId;
use bytes::Bytes;
use futures_util::FutureExt;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde::Deserialize as _;
use tower::{Layer, Service};

use crate::record::AttemptRecord;

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
/// response. Put it outermost, between [`TowerClient`](super::TowerClient) and the stack
/// ([`RecordTapLayer`] in a `ServiceBuilder`).
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
        let record = request
            .extensions_mut()
            .get_or_insert_with(AttemptRecord::new)
            .clone();
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
