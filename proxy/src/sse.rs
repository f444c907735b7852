//! Server-sent events.

use std::time::Duration;

/// Whether an answer's head says its body is an event stream (`text/event-stream`).
pub fn is_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// One event of a stream, as far as a relay needs it: its type (`event:`; none is
/// `message`), its data (`None` for a block with no `data:` line, such as `retry:` alone),
/// and the `id:` and `retry:` it set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub name: Option<String>,
    pub data: Option<Vec<u8>>,
    pub id: Option<String>,
    pub retry: Option<Duration>,
}

impl Event {
    /// The data of a `message` event, the type that carries JSON-RPC (as MCP clients read
    /// it); an event of another type carries none.
    pub fn message(&self) -> Option<&[u8]> {
        match self.name.as_deref() {
            None | Some("message") => self.data.as_deref(),
            Some(_) => None,
        }
    }

    /// The event again, as a relay passes it on: its `event:`, `retry:` and `id:` lines kept,
    /// its data as `data` (a `data:` line for each of its lines), or an empty `data:` line for a
    /// priming event.
    pub fn encode(&self, data: Option<&[u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(name) = &self.name {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
        }
        if let Some(retry) = self.retry {
            out.extend_from_slice(format!("retry: {}\n", retry.as_millis()).as_bytes());
        }
        if let Some(id) = &self.id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id.as_bytes());
            out.push(b'\n');
        }
        if let Some(data) = data {
            for line in data.split(|&b| b == b'\n') {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(line);
                out.push(b'\n');
            }
        }
        if !out.is_empty() {
            out.push(b'\n');
        }
        out
    }
}

/// An incremental `text/event-stream` reader: each event's `data:` lines, joined by `\n`, with
/// its `id:` and `retry:`; and what a client needs to resume the stream: the last event id and
/// the reconnection time the server asked for.
#[derive(Default)]
pub struct SseParser {
    /// Bytes of a line not ended yet.
    pending: Vec<u8>,
    event: Event,
    last_id: Option<String>,
    retry: Option<Duration>,
}

impl SseParser {
    pub fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(Event)) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(offset) = self.pending[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = start + offset;
            let next = match self.pending[end] {
                b'\r' if end + 1 == self.pending.len() => break, // `\r\n` may be split
                b'\r' if self.pending[end + 1] == b'\n' => end + 2,
                _ => end + 1,
            };
            let line = self.pending[start..end].to_vec();
            self.line(&line, &mut on_event);
            start = next;
        }
        self.pending.drain(..start);
    }

    /// The stream ended: an unterminated last line or event still counts.
    pub fn finish(&mut self, mut on_event: impl FnMut(Event)) {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.strip_suffix(b"\r").unwrap_or(&rest);
        if !rest.is_empty() {
            self.line(rest, &mut on_event);
        }
        self.line(b"", &mut on_event);
    }

    /// The id of the last event with one (the stream's resumption point), if any.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection time the server asked for with `retry:`, if it did.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Event)) {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if event != Event::default() {
                on_event(event);
            }
            return;
        }
        if line.starts_with(b":") {
            return; // a comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => match &mut self.event.data {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                }
                None => self.event.data = Some(value.to_vec()),
            },
            b"event" => self.event.name = Some(String::from_utf8_lossy(value).into_owned()),
            // An id with NUL is ignored (the SSE standard); an empty one resets it.
            b"id" if !value.contains(&0) => {
                let id = String::from_utf8_lossy(value).into_owned();
                self.last_id = (!id.is_empty()).then(|| id.clone());
                self.event.id = Some(id);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    self.retry = Some(Duration::from_millis(ms));
                    self.event.retry = self.retry;
                }
            }
            _ => {}
        }
    }
}

/// One server message as an SSE event: one `data:` line (the message is one line of JSON).
pub fn event(message: &[u8]) -> Vec<u8> {
    let mut event = Vec::with_capacity(message.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(message);
    event.extend_from_slice(b"\n\n");
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        let mut data = |e: Event| {
            if let Some(data) = e.data {
                out.push(String::from_utf8(data).unwrap());
            }
        };
        for chunk in chunks {
            parser.feed(chunk, &mut data);
        }
        parser.finish(&mut data);
        out
    }

    #[test]
    fn events_are_read_across_chunks_and_line_endings() {
        assert_eq!(
            events(&[
                b"event: message\r",
                b"\ndata: {\"a\":",
                b"1}\r\n\r\n: ping\n\ndata: x\ndata:y\n"
            ]),
            ["{\"a\":1}", "x\ny"]
        );
        assert_eq!(events(&[b"id: 1\n\n", b"data"]), [""]);
    }

    #[test]
    fn the_last_id_and_the_retry_are_kept() {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        parser.feed(
            b"retry: 2500\nid: 7\ndata:\n\nid: 8\ndata: {\"a\":1}\n\nretry: x\n\n",
            |e| out.push(e),
        );
        let retry = Some(Duration::from_millis(2500));
        assert_eq!(
            out,
            [
                Event {
                    data: Some(Vec::new()),
                    id: Some("7".into()),
                    retry,
                    ..Event::default()
                },
                Event {
                    data: Some(b"{\"a\":1}".to_vec()),
                    id: Some("8".into()),
                    retry: None,
                    ..Event::default()
                },
            ]
        );
        assert_eq!(parser.last_id(), Some("8"));
        assert_eq!(parser.retry(), retry);
        parser.feed(b"id\n\nid: a\0b\n\n", |_| {});
        assert_eq!(parser.last_id(), None, "an empty id resets it");
        assert_eq!(parser.retry(), retry);
    }

    #[test]
    fn an_event_is_passed_on_with_its_id_and_retry() {
        let priming = Event {
            data: Some(Vec::new()),
            id: Some("s1-0".into()),
            retry: Some(Duration::from_millis(1000)),
            ..Event::default()
        };
        assert_eq!(
            priming.encode(Some(b"")),
            b"retry: 1000\nid: s1-0\ndata: \n\n"
        );
        let message = Event {
            data: Some(b"{\n}".to_vec()),
            id: Some("s1-1".into()),
            retry: None,
            ..Event::default()
        };
        assert_eq!(message.encode(Some(b"{ }")), b"id: s1-1\ndata: { }\n\n");
        assert_eq!(Event::default().encode(None), b"");
    }

    #[test]
    fn an_events_type_is_kept_and_only_a_message_carries_json_rpc() {
        let mut out = Vec::new();
        SseParser::default().feed(
            b"event: message\ndata: {}\n\nevent: ping\ndata: {}\n\ndata: []\n\n",
            |e| out.push(e),
        );
        let carried: Vec<_> = out.iter().map(Event::message).collect();
        assert_eq!(carried, [Some(&b"{}"[..]), None, Some(&b"[]"[..])]);
        assert_eq!(out[0].encode(Some(b"{}")), b"event: message\ndata: {}\n\n");
        assert_eq!(out[1].encode(Some(b"{}")), b"event: ping\ndata: {}\n\n");
        assert_eq!(
            out[1].encode(Some(b"a\nb")),
            b"event: ping\ndata: a\ndata: b\n\n"
        );
    }
}
