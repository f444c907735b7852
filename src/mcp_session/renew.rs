//! Opening a new session in place of an expired one: its `initialize` and
//! `notifications/initialized` sent again, once for every request that met the same expiry.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body::Body;
use tower::ServiceExt;

use super::table::{Session, opened_id};
use super::{LAYER, READ_LIMIT};
use crate::error::{BoxError, Error};
use crate::sends::Sends;

/// What the requests that open a new session carry of the request that met the expiry.
#[derive(Clone, Copy)]
pub(super) struct Opening<'a> {
    /// Its `Authorization`, when it has one: a token refreshed since the session was opened.
    pub(super) authorization: Option<&'a HeaderValue>,
    /// The call's limits and retry budget, for the opening calls to keep within.
    pub(super) extensions: &'a http::Extensions,
}

/// Opens a new session in place of `dead`, unless a request that met the same expiry did (or
/// failed to) while this one waited: the id to send with, or why there is none.
pub(super) async fn renew<S, ReqB, ResB>(
    session: &Session,
    dead: &Arc<str>,
    mut service: S,
    opening: Opening<'_>,
) -> Result<Arc<str>, String>
where
    S: Sends<ReqB, ResB>,
    ReqB: Clone + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>>,
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
        let mut initialize = (session.initialize)
            .request::<ReqB>(None, opening.authorization)
            .map_err(String::from)?;
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
            .map(|kept| kept.request::<ReqB>(Some(&id), opening.authorization))
            .transpose()?;
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
async fn call<S: Sends<ReqB, ResB>, ReqB, ResB>(
    service: &mut S,
    request: Request<ReqB>,
) -> Result<Response<ResB>, String> {
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
async fn read_to_result<B: Body<Data = Bytes>>(body: B) -> Result<bool, String> {
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
}
