//! Telling a task handle: an answer's first bytes read ahead, handed on whole when it is not
//! one.

use bytes::Bytes;
use http::Response;
use http_body::Body;
use serde_json::Value;

use super::body::TaskBody;

use crate::body::PeekedBody;

/// How much of an answer is read ahead to tell a task handle (one is a few hundred bytes).
const HANDLE_LIMIT: usize = 64 << 10;

/// An answer's body with its first bytes read ahead.
pub(super) struct Peeked<B: Body> {
    body: PeekedBody<B>,
    stream: bool,
}

impl<B> Peeked<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    /// The answer's head, and its body with its first bytes read: the whole of a small JSON
    /// answer, or an event stream's first event (or comment) — a task handle comes alone, and
    /// whatever else comes first (progress, a comment that says the server is alive) is the
    /// client's to read at once.
    pub(super) async fn of(answer: Response<B>) -> (Response<()>, Peeked<B>) {
        let (head, body) = answer.into_parts();
        let mut body = PeekedBody::new(body);
        let stream = crate::jsonrpc::media_type_is(&head.headers, "text/event-stream");
        if stream || crate::jsonrpc::is_json_content_type(&head.headers) {
            std::future::poll_fn(|cx| {
                body.poll_read_ahead(cx, HANDLE_LIMIT, |held| !stream || !has_block(held))
            })
            .await;
        }
        (Response::from_parts(head, ()), Peeked { body, stream })
    }
}

impl<B: Body<Data = Bytes>> Peeked<B> {
    /// The message answering `id` among what was read: in a JSON answer read whole, or in the
    /// complete events read of an event stream.
    pub(super) fn answer(&self, id: &Value) -> Option<Value> {
        (self.stream || self.body.is_complete())
            .then(|| crate::exchange::answer_in(&self.body.held_bytes(), id, &mut Vec::new()))
            .flatten()
    }

    /// The body, as it came.
    pub(super) fn into_body(self) -> TaskBody<B> {
        TaskBody::server(self.body)
    }
}

/// Whether an event stream's bytes hold a complete block (an event, or a comment).
fn has_block(held: &[u8]) -> bool {
    memchr::memmem::find(held, b"\n\n").is_some()
        || memchr::memmem::find(held, b"\r\n\r\n").is_some()
}
