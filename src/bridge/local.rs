//! The answers the bridge gives itself.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body::Body;
use serde_json::Value;

use super::BridgeBody;

/// An answer of the bridge's own: `status`, and one JSON message when there is one.
pub(super) fn local<B: Body>(
    status: StatusCode,
    message: Option<&Value>,
) -> Response<BridgeBody<B>> {
    let body = message
        .map(|m| Bytes::from(m.to_string()))
        .unwrap_or_default();
    let mut answer = Response::new(BridgeBody::local(body));
    *answer.status_mut() = status;
    if message.is_some() {
        answer
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    answer
        .extensions_mut()
        .insert(crate::record::AttemptRecord::new());
    answer
}
