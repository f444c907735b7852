//! The answers the bridge gives itself.

use std::future::Future;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use http_body::Body;
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::BridgeBody;
use crate::exchange::{Driven, own_answer};

/// An answer of the bridge's own: `status`, and one JSON message when there is one.
pub(super) fn local<B: Body>(
    status: StatusCode,
    message: Option<&Value>,
) -> Response<BridgeBody<B>> {
    let body = message
        .map(|m| Bytes::from(m.to_string()))
        .unwrap_or_default();
    own_answer(status, BridgeBody::local(body), message.is_some())
}

/// An event stream of the bridge's own: what the future `write` makes of the stream's sink
/// writes, as the body is read (nothing is spawned; dropping the body stops it).
pub(super) fn event_stream<B, F, W>(write: W) -> Response<BridgeBody<B>>
where
    B: Body,
    W: FnOnce(UnboundedSender<Bytes>) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let (sink, events) = unbounded_channel();
    let driver = Box::pin(write(sink));
    let mut answer = Response::new(BridgeBody::driven(Driven::new(driver, events)));
    let headers = answer.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    answer
}
