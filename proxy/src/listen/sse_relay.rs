//! The body of an SSE answer to a POST, relayed to the client event by event.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use agentcore_tower::BoxError;
use bytes::Bytes;
use http::StatusCode;
use hyper::body::{Body, Frame};
use serde_json::Value;
use tracing::warn;

use crate::answers::{Call, OpenRequests, one_line};
use crate::call::ResBody;
use crate::sse::{self, SseParser};
use crate::tools::Tools;

/// An SSE answer relayed event by event, as each is complete; when it breaks off, stalls or
/// ends with requests unanswered, an error event answers each of them: the client is never
/// left waiting.
pub(super) struct SseRelay {
    inner: Pin<Box<ResBody>>,
    parser: SseParser,
    open: OpenRequests,
    status: StatusCode,
    /// The call: its deadline and record.
    call: Call,
    /// The ids of the `tools/list` requests, whose answers are filtered.
    lists: Vec<Value>,
    tools: Arc<Tools>,
    /// Fires when the answer sends nothing for `--idle-timeout`, or the call's `--timeout` runs
    /// out ([`Call::next_wait`]).
    idle: Pin<Box<tokio::time::Sleep>>,
    /// Whether `idle` is the call's deadline.
    idle_is_deadline: bool,
    /// What goes to the client next.
    queued: Vec<u8>,
    ended: bool,
    /// Whether an event named an id: the server can resume the stream.
    resumable: bool,
}

impl SseRelay {
    /// Relays `body`, the answer (`status`) to the requests in `open`.
    pub(super) fn new(
        body: ResBody,
        open: OpenRequests,
        status: StatusCode,
        call: Call,
        lists: Vec<Value>,
        tools: Arc<Tools>,
    ) -> SseRelay {
        let (wait, idle_is_deadline) = call.next_wait();
        SseRelay {
            inner: Box::pin(body),
            parser: SseParser::default(),
            open,
            status,
            call,
            lists,
            tools,
            idle: Box::pin(tokio::time::sleep(wait)),
            idle_is_deadline,
            queued: Vec::new(),
            ended: false,
            resumable: false,
        }
    }

    /// The answer is over: every request still open gets an error event (with `error.data`).
    fn end(&mut self, broke: Option<(String, Value)>) {
        let (message, data) = match broke {
            Some((message, data)) => (message, Some(data)),
            None => (self.call.upstream().unanswered(self.status), None),
        };
        for error in self.open.fail_all(&message, data.as_ref()) {
            self.queued
                .extend_from_slice(&sse::event(error.to_string().as_bytes()));
        }
        self.ended = true;
    }
}

/// Queues one event of the answer as it came — its `id:` and `retry:` kept, a priming event
/// (empty data) too — with its data on one line when it is a JSON message (a `tools/list`
/// answer filtered), and without it when it is not. Whether it named an id (the server can
/// resume the stream).
fn relay_event(
    call: &Call,
    open: &mut OpenRequests,
    filter: (&Tools, &[Value]),
    queued: &mut Vec<u8>,
    event: &sse::Event,
) -> bool {
    let (tools, lists) = filter;
    let data = match event.data.as_deref() {
        // Not JSON-RPC: passed on as it came.
        Some(data) if event.message().is_none() => Some(data.to_vec()),
        Some(data) if data.trim_ascii().is_empty() => Some(Vec::new()),
        Some(data) => call
            .upstream()
            .parse_server_message(data)
            .map(|mut message| {
                open.answered_by(&message);
                if tools.filter(lists, &mut message) {
                    message.to_string().into_bytes()
                } else {
                    one_line(data)
                }
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
                    let (wait, is_deadline) = this.call.next_wait();
                    this.idle.as_mut().reset(tokio::time::Instant::now() + wait);
                    this.idle_is_deadline = is_deadline;
                    if let Some(data) = frame.data_ref() {
                        let (open, queued, resumable) =
                            (&mut this.open, &mut this.queued, &mut this.resumable);
                        let filter = (&*this.tools, this.lists.as_slice());
                        let call = &this.call;
                        this.parser.feed(data, |event| {
                            *resumable |= relay_event(call, open, filter, queued, &event);
                        });
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let broke = this.call.broke(&*e);
                    warn!("{}", broke.message);
                    this.end(Some((broke.message, broke.data)));
                }
                Poll::Ready(None) => {
                    let (open, queued, resumable) =
                        (&mut this.open, &mut this.queued, &mut this.resumable);
                    let filter = (&*this.tools, this.lists.as_slice());
                    let call = &this.call;
                    this.parser.finish(|event| {
                        *resumable |= relay_event(call, open, filter, queued, &event);
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
                    let cut = this.call.cut(this.idle_is_deadline);
                    warn!("{}", cut.message);
                    this.end(Some((cut.message, cut.data)));
                }
            }
        }
    }
}
