//! Reading an answer's platform error, once: the head form at once, the JSON-RPC form of an
//! HTTP 200 `application/json` answer after a bounded read-ahead (and the message of a 424
//! `RuntimeClientError`'s JSON body, which tells a runtime that did not initialize in time
//! from one whose code failed: [`contract`](crate::contract)) — shared by every layer that
//! decides on it (throttling, session busy, the guard's "may have run"). What was read is handed
//! on in front of the rest of the stream ([`PeekedBody`]), and the verdict travels in the
//! response's extensions, so a second layer of the crate above reads it rather than the body.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body::Body;

use crate::body::PeekedBody;
use crate::contract::{
    Classified, PlatformError, classify_error_body, classify_head, classify_json,
};
use crate::error::Error;
use crate::jsonrpc::{content_length, first_significant_byte, is_json_content_type};

/// How many bytes of an answer are read ahead by default: a platform error is ~100 bytes.
pub(crate) const DEFAULT_PEEK_LIMIT: usize = 4096;

/// What a read-ahead found, in the response's extensions.
#[derive(Clone, Copy, Debug)]
struct Peeked(Option<Classified>);

/// The platform error of one attempt's result, and the result, whole: an error is handed on at
/// once; an answer is read ahead when it is worth it (into the [`PeekedBody`] it comes in,
/// which a retry layer below may have filled already).
pub(crate) fn peek_result<B>(
    result: Result<Response<PeekedBody<B>>, Error>,
    limit: usize,
) -> PeekResult<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    let response = match result {
        Ok(response) => response,
        Err(error) => return PeekResult::Ready(Some((Err(error), None))),
    };
    if let Some(Peeked(found)) = response.extensions().get::<Peeked>().copied() {
        // A layer below read it ahead already and left its verdict: marked as it is.
        return PeekResult::Ready(Some((Ok(response), found)));
    }
    let (status, headers) = (response.status(), response.headers());
    let head = (status != StatusCode::OK)
        .then(|| classify_head(status, headers))
        .flatten();
    // The contract's JSON-RPC form: an HTTP 200, or the 401, 403 and 406 of its table; and a
    // 424 `RuntimeClientError`, whose message tells which it is.
    let json_rpc_status = matches!(status.as_u16(), 200 | 401 | 403 | 406);
    let runtime_client_error = head.is_some_and(|c| c.error() == PlatformError::RuntimeClientError);
    let worth_reading = (json_rpc_status || runtime_client_error)
        && is_json_content_type(headers)
        && content_length(headers).is_none_or(|n| n <= limit as u64);
    if !worth_reading {
        return PeekResult::done(response, head);
    }
    let (parts, body) = response.into_parts();
    PeekResult::Reading(Some((parts, body)), limit)
}

type Peeking<B> = (Result<Response<PeekedBody<B>>, Error>, Option<Classified>);

/// The future of [`peek_result`].
pub(crate) enum PeekResult<B: Body> {
    Ready(Option<Peeking<B>>),
    Reading(Option<(http::response::Parts, PeekedBody<B>)>, usize),
}

impl<B: Body> PeekResult<B> {
    fn done(mut response: Response<PeekedBody<B>>, found: Option<Classified>) -> Self {
        response.extensions_mut().insert(Peeked(found));
        PeekResult::Ready(Some((Ok(response), found)))
    }
}

impl<B> Future for PeekResult<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Output = Peeking<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (reading, limit) = match self.get_mut() {
            PeekResult::Ready(done) => {
                return Poll::Ready(done.take().expect("PeekResult polled after it completed"));
            }
            PeekResult::Reading(reading, limit) => (reading, *limit),
        };
        let Some((_, body)) = reading.as_mut() else {
            panic!("PeekResult polled after it completed")
        };
        // Stop as soon as the body cannot be one JSON object.
        let could_be_an_object =
            |held: &[u8]| first_significant_byte(held).is_none_or(|b| b == b'{');
        std::task::ready!(body.poll_read_ahead(cx, limit, could_be_an_object));
        let Some((mut parts, body)) = reading.take() else {
            unreachable!("checked above")
        };
        let whole = body.is_complete() && body.held_len() <= limit;
        let head = (parts.status != StatusCode::OK)
            .then(|| classify_head(parts.status, &parts.headers))
            .flatten();
        let found = match head {
            // A 424 `RuntimeClientError`: its AWS error body's message.
            Some(head) if head.error() == PlatformError::RuntimeClientError => Some(if whole {
                classify_error_body(head, &body.held_bytes())
            } else {
                head
            }),
            _ => whole
                .then(|| classify_json(&body.held_bytes()))
                .flatten()
                .or(head),
        };
        parts.extensions.insert(Peeked(found));
        Poll::Ready((Ok(Response::from_parts(parts, body)), found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_json_rpc_form_is_read_off_a_401_too() {
        let body = http_body_util::Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Authentication error - Invalid credentials"}}"#,
        ));
        let response = Response::builder()
            .status(401)
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let (_, found) = peek_result(Ok(response.map(PeekedBody::new)), DEFAULT_PEEK_LIMIT).await;
        let found = found.unwrap();
        assert_eq!(found.error(), crate::contract::PlatformError::Unauthorized);
        assert_eq!(found.form(), crate::contract::Form::JsonRpc(-32001));
    }

    #[tokio::test]
    async fn a_424_is_told_apart_by_its_message_and_handed_on_whole() {
        let message = crate::contract::initialization_time_exceeded_message(30);
        for (body, want) in [
            (
                serde_json::json!({"message": message}).to_string(),
                crate::contract::PlatformError::InitializationTimedOut,
            ),
            (
                serde_json::json!({"message": "Tool execution error"}).to_string(),
                crate::contract::PlatformError::RuntimeClientError,
            ),
        ] {
            let response = Response::builder()
                .status(424)
                .header("content-type", "application/json")
                .header("x-amzn-errortype", "RuntimeClientError")
                .body(http_body_util::Full::new(Bytes::from(body.clone())))
                .unwrap();
            let (result, found) =
                peek_result(Ok(response.map(PeekedBody::new)), DEFAULT_PEEK_LIMIT).await;
            let found = found.unwrap();
            assert_eq!(found.error(), want);
            assert_eq!(
                found.form(),
                crate::contract::Form::Http(StatusCode::FAILED_DEPENDENCY)
            );
            use http_body_util::BodyExt;
            let bytes = result
                .unwrap()
                .into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes();
            assert_eq!(bytes, body.as_bytes(), "bytes in = bytes out");
        }
    }

    #[tokio::test]
    async fn stacked_layers_read_an_answer_ahead_once() {
        use crate::contract::tests::JSON_PARSES;
        let body = http_body_util::Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"Rate limit exceeded - Too many requests"}}"#,
        ));
        let response = Response::builder()
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let before = JSON_PARSES.with(|n| n.get());
        let (inner, first) =
            peek_result(Ok(response.map(PeekedBody::new)), DEFAULT_PEEK_LIMIT).await;
        // Above it, a layer that wraps it again, then one that keeps the wrapper it got.
        let (outer, second) =
            peek_result(inner.map(|r| r.map(PeekedBody::new)), DEFAULT_PEEK_LIMIT).await;
        let (_, third) = peek_result(outer, DEFAULT_PEEK_LIMIT).await;
        assert!(first.is_some() && first == second && second == third);
        assert_eq!(
            JSON_PARSES.with(|n| n.get()),
            before + 1,
            "read ahead and parsed once"
        );
    }
}
