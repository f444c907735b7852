//! Reading an answer's platform error, once: the head form at once, the JSON-RPC form of an
//! HTTP 200 `application/json` answer after a bounded read-ahead — shared by every layer that
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
use crate::contract::{Classified, classify_head, classify_json};
use crate::error::Error;
use crate::jsonrpc::{content_length, first_significant_byte, is_json_content_type};

/// How many bytes of an answer are read ahead by default: a platform error is ~100 bytes.
pub(crate) const DEFAULT_PEEK_LIMIT: usize = 4096;

/// What a read-ahead found, in the response's extensions.
#[derive(Clone, Copy, Debug)]
struct Peeked(Option<Classified>);

/// The platform error of one attempt's result, and the result, whole: an error is handed on at
/// once; an answer is read ahead when it is worth it.
pub(crate) fn peek_result<B>(result: Result<Response<B>, Error>, limit: usize) -> PeekResult<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    let response = match result {
        Ok(response) => response,
        Err(error) => return PeekResult::Ready(Some((Err(error), None))),
    };
    let status = response.status();
    let known = response.extensions().get::<Peeked>().map(|p| p.0);
    let found = known
        .or_else(|| (status != StatusCode::OK).then(|| classify_head(status, response.headers())));
    if let Some(found) = found {
        return PeekResult::done(response.map(PeekedBody::new), found);
    }
    let headers = response.headers();
    let worth_reading =
        is_json_content_type(headers) && content_length(headers).is_none_or(|n| n <= limit as u64);
    if !worth_reading {
        return PeekResult::done(response.map(PeekedBody::new), None);
    }
    let (parts, body) = response.into_parts();
    PeekResult::Reading(Some((parts, PeekedBody::new(body))), limit)
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
        let found = (body.is_complete() && body.held_len() <= limit)
            .then(|| classify_json(&body.held_bytes()))
            .flatten();
        parts.extensions.insert(Peeked(found));
        Poll::Ready((Ok(Response::from_parts(parts, body)), found))
    }
}
