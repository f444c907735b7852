//! An answer's event stream read one JSON-RPC message at a time, as each event is complete: what
//! the bridge reads of a server's stream it keeps open across a client's requests (a 2025
//! server's call that asked a question, a `subscriptions/listen`).

use bytes::{Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use serde_json::Value;

use crate::error::BoxError;

/// The most one event may hold: past it, the stream is read no further.
const EVENT_LIMIT: usize = 64 << 20;

/// A server's event stream, read message by message.
pub(super) struct EventReader {
    body: UnsyncBoxBody<Bytes, BoxError>,
    /// What was read past the last complete event.
    held: BytesMut,
    ended: bool,
}

impl EventReader {
    /// The stream of `body`.
    pub(super) fn new<B>(body: B) -> Self
    where
        B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
    {
        Self {
            body: body.map_err(Into::into).boxed_unsync(),
            held: BytesMut::new(),
            ended: false,
        }
    }

    /// The next JSON-RPC message of the stream (an event's `data`, when it is a JSON object),
    /// or `None` once the stream ended, failed, or sent an event past 64 MiB. Comments and
    /// events of anything else are passed over.
    pub(super) async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(event) = super::typed::next_event(&mut self.held) {
                if let Some(message) = message_of(&event) {
                    return Some(message);
                }
                continue;
            }
            if self.ended || self.held.len() > EVENT_LIMIT {
                return None;
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.held.extend_from_slice(&data);
                    }
                }
                // What is held of an event the stream did not end is not an event.
                Some(Err(_)) | None => self.ended = true,
            }
        }
    }
}

impl std::fmt::Debug for EventReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventReader")
            .field("held", &self.held.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// The JSON-RPC message an event carries.
fn message_of(event: &Bytes) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let data = crate::exchange::events(text).into_iter().next()?;
    serde_json::from_str::<Value>(&data)
        .ok()
        .filter(Value::is_object)
}

/// One event of an event stream carrying `message`.
pub(super) fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Frame;
    use http_body_util::StreamBody;
    use serde_json::json;

    fn reader(chunks: Vec<&'static [u8]>) -> EventReader {
        let frames = chunks
            .into_iter()
            .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(c))));
        EventReader::new(StreamBody::new(futures_util::stream::iter(frames)))
    }

    #[tokio::test]
    async fn messages_come_one_by_one_across_frames_and_the_rest_is_passed_over() {
        let mut stream = reader(vec![
            b": alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",",
            b"\"method\":\"n\"}\n\ndata: not json\n\ndata: [1]\n\r\n",
            b"id: 4\r\ndata: {\"id\":1,\r\ndata: \"result\":{}}\r\n\r\ndata: {\"id\":2}",
        ]);
        assert_eq!(
            stream.next().await,
            Some(json!({"jsonrpc": "2.0", "method": "n"}))
        );
        assert_eq!(stream.next().await, Some(json!({"id": 1, "result": {}})));
        // An event the stream never ended is none.
        assert_eq!(stream.next().await, None);
        assert_eq!(stream.next().await, None);
    }

    #[tokio::test]
    async fn no_bytes_a_server_sends_make_the_reading_panic() {
        let pieces: [&'static [u8]; 8] = [
            b"data: ",
            b"\n",
            b"\r\n",
            b"{\"id\":1}",
            b"\xff\xfe",
            b": c\n\n",
            b"data:{\"method\":\"x\"",
            b"}\n\n",
        ];
        let mut rng = fastrand::Rng::with_seed(40);
        for _ in 0..2_000 {
            let chunks = (0..rng.usize(0..12))
                .map(|_| pieces[rng.usize(..pieces.len())])
                .collect();
            let mut stream = reader(chunks);
            while let Some(message) = stream.next().await {
                assert!(message.is_object());
            }
        }
    }
}
