//! Server-sent events.

/// An incremental `text/event-stream` reader: each event's `data:` lines, joined by `\n`; and
/// what a client needs to resume the stream: the last event id and the reconnection time the
/// server asked for.
#[derive(Default)]
pub struct SseParser {
    /// Bytes of a line not ended yet.
    pending: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<std::time::Duration>,
}

impl SseParser {
    pub fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(Vec<u8>)) {
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
    pub fn finish(&mut self, mut on_event: impl FnMut(Vec<u8>)) {
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
    pub fn retry(&self) -> Option<std::time::Duration> {
        self.retry
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Vec<u8>)) {
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                on_event(std::mem::take(&mut self.data));
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
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            // An id with NUL is ignored (the SSE standard); an empty one resets it.
            b"id" if !value.contains(&0) => {
                self.last_id = std::str::from_utf8(value)
                    .ok()
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    self.retry = Some(std::time::Duration::from_millis(ms));
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
        for chunk in chunks {
            parser.feed(chunk, |e| out.push(String::from_utf8(e).unwrap()));
        }
        parser.finish(|e| out.push(String::from_utf8(e).unwrap()));
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
            b"retry: 2500\nid: 7\ndata: {}\n\nid: 8\ndata: {\"a\":1}\n\nretry: x\n",
            |e| out.push(e),
        );
        assert_eq!(out.len(), 2);
        assert_eq!(parser.last_id(), Some("8"));
        assert_eq!(parser.retry(), Some(std::time::Duration::from_millis(2500)));
        parser.feed(b"id\n\nid: a\0b\n", |_| {});
        assert_eq!(parser.last_id(), None, "an empty id resets it");
        assert_eq!(parser.retry(), Some(std::time::Duration::from_millis(2500)));
    }
}
