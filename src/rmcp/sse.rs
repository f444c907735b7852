//! The SSE events of an answer's body, each held to the transport's `max_sse_event_size`.

use ::rmcp::transport::streamable_http_client::SseError;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt, TryStreamExt};
use http_body::Body;
use http_body_util::BodyExt;
use sse_stream::{Sse, SseStream};

use super::error::TowerClientError;
use crate::error::BoxError;

pub(super) type SseEvents = BoxStream<'static, Result<Sse, SseError>>;

/// The SSE events of a body, each held to `max_event` bytes.
pub(super) fn sse_events<B>(body: B, max_event: usize) -> SseEvents
where
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    let bytes = body
        .into_data_stream()
        .map_err(|e| TowerClientError::Body(e.into()))
        .scan(
            (EventSize::new(max_event), false),
            |(size, ended), chunk| {
                if *ended {
                    return futures_util::future::ready(None);
                }
                let item = match chunk {
                    Ok(bytes) if !size.feed(&bytes) => {
                        Err(TowerClientError::SseEventTooLarge { max_size: size.max })
                    }
                    other => other,
                };
                // After an error the stream ends: nothing after it could be trusted.
                *ended = item.is_err();
                futures_util::future::ready(Some(item))
            },
        );
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Counts the bytes of the SSE event being received, as the parser will keep them (field
/// lines joined by newlines; comment lines dropped; a blank line ends the event).
struct EventSize {
    max: usize,
    event: usize,
    line: usize,
    comment: bool,
    after_cr: bool,
}

impl EventSize {
    fn new(max: usize) -> Self {
        Self {
            max,
            event: 0,
            line: 0,
            comment: false,
            after_cr: false,
        }
    }

    /// Feeds a chunk; `false` once the event (or a line) in progress passes the limit.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue; // the LF of a CRLF
            }
            match byte {
                b'\r' | b'\n' => {
                    if self.line == 0 {
                        self.event = 0;
                    } else if !self.comment {
                        self.event = self.event.saturating_add(self.line + 1);
                    }
                    self.line = 0;
                    self.comment = false;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    if self.line == 0 {
                        self.comment = byte == b':';
                    }
                    self.line += 1;
                }
            }
            if self.event.saturating_add(self.line) > self.max {
                return false;
            }
        }
        true
    }
}
