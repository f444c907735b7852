//! The body of an SSE answer to a POST, relayed to the client event by event.

use std::pin::Pin;
use std::task::{Context, Poll};

use agentcore_tower::BoxError;
use bytes::Bytes;
use http::StatusCode;
use hyper::body::{Body, Frame};
use tracing::warn;

use crate::answers::{OpenRequests, broke, one_line, parse_server_message, stalled, unanswered};
use crate::sse::{self, SseParser};
use crate::stack::{CALL_TIMEOUT, ResBody};

/// An SSE answer relayed event by event, as each is complete; when it breaks off, stalls or
/// ends with requests unanswered, an error event answers each of them: the client is never
/// left waiting.
pub(super) struct SseRelay {
    inner: Pin<Box<ResBody>>,
    parser: SseParser,
    open: OpenRequests,
    status: StatusCode,
    /// Fires when the answer sends nothing for [`CALL_TIMEOUT`].
    idle: Pin<Box<tokio::time::Sleep>>,
    /// What goes to the client next.
    queued: Vec<u8>,
    ended: bool,
    /// Whether an event named an id: the server can resume the stream.
    resumable: bool,
}

impl SseRelay {
    /// Relays `body`, the answer (`status`) to the requests in `open`.
    pub(super) fn new(body: ResBody, open: OpenRequests, status: StatusCode) -> SseRelay {
        SseRelay {
            inner: Box::pin(body),
            parser: SseParser::default(),
            open,
            status,
            idle: Box::pin(tokio::time::sleep(CALL_TIMEOUT)),
            queued: Vec::new(),
            ended: false,
            resumable: false,
        }
    }

    /// The answer is over: every request still open gets an error event.
    fn end(&mut self, message: Option<String>) {
        let message = message.unwrap_or_else(|| unanswered(self.status));
        for error in self.open.fail_all(&message, None) {
            self.queued
                .extend_from_slice(&sse::event(error.to_string().as_bytes()));
        }
        self.ended = true;
    }
}

/// Queues one event of the answer as it came — its `id:` and `retry:` kept, a priming event
/// (empty data) too — with its data on one line when it is a JSON message, and without it when
/// it is not. Whether it named an id (the server can resume the stream).
fn relay_event(open: &mut OpenRequests, queued: &mut Vec<u8>, event: &sse::Event) -> bool {
    let data = match event.data.as_deref() {
        // Not JSON-RPC: passed on as it came.
        Some(data) if event.message().is_none() => Some(data.to_vec()),
        Some(data) if data.trim_ascii().is_empty() => Some(Vec::new()),
        Some(data) => parse_server_message(data).map(|message| {
            open.answered_by(&message);
            one_line(data)
        }),
        None => None,
    };
    queued.extend_from_slice(&event.encode(data.as_deref()));
    event.id.as_deref().is_some_and(|id| !id.is_empty())
}

impl Body for SseRelay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if !this.queued.is_empty() {
                let data = Bytes::from(std::mem::take(&mut this.queued));
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.inner.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
                    this.idle.as_mut().reset(deadline);
                    if let Some(data) = frame.data_ref() {
                        let (open, queued, resumable) =
                            (&mut this.open, &mut this.queued, &mut this.resumable);
                        this.parser.feed(data, |event| {
                            *resumable |= relay_event(open, queued, &event);
                        });
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let message = broke(&e);
                    warn!("{message}");
                    this.end(Some(message));
                }
                Poll::Ready(None) => {
                    let (open, queued, resumable) =
                        (&mut this.open, &mut this.queued, &mut this.resumable);
                    this.parser.finish(|event| {
                        *resumable |= relay_event(open, queued, &event);
                    });
                    if this.resumable {
                        // The server ended the stream on purpose, its events named: the client
                        // resumes it (GET with Last-Event-ID), and its answers come there.
                        this.ended = true;
                    } else {
                        this.end(None);
                    }
                }
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let message = stalled();
                    warn!("{message}");
                    this.end(Some(message));
                }
            }
        }
    }
}
