//! A 2025 server's answer as a client of MCP 2026-07-28 reads it: every result carries
//! `resultType` (SEP-2322), and a cacheable one (a listing, a read, a discovery) its caching
//! hints, `ttlMs` and `cacheScope`, which a server of the `initialize` era never writes: given
//! as the SDKs' servers give them when none are set (`0`, `"private"`: stale at once, this
//! client's only). A JSON answer is read whole; an event stream, event by event, as each is
//! complete.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use serde_json::Value;

use crate::error::BoxError;

/// The most a JSON answer, or one event, may hold: past it, the rest is passed as it came.
const LIMIT: usize = 64 << 20;

pin_project! {
    /// An answer whose results are given `resultType: "complete"` where they lack one.
    pub struct ResultTyped<B> {
        #[pin]
        inner: B,
        stream: bool,
        cacheable: bool,
        held: BytesMut,
        ended: bool,
    }
}

impl<B> ResultTyped<B> {
    /// `inner`, an event stream (`stream`) or a JSON answer, to a request whose result is
    /// `cacheable`.
    pub(super) fn new(inner: B, stream: bool, cacheable: bool) -> Self {
        Self {
            inner,
            stream,
            cacheable,
            held: BytesMut::new(),
            ended: false,
        }
    }
}

impl<B> Body for ResultTyped<B>
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        loop {
            if *this.stream
                && let Some(event) = next_event(this.held)
            {
                let event = typed_event(&event, *this.cacheable);
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            if *this.ended {
                if this.held.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = this.held.split().freeze();
                let rest = if *this.stream {
                    rest
                } else {
                    typed_json(rest, *this.cacheable)
                };
                return Poll::Ready(Some(Ok(Frame::data(rest))));
            }
            match std::task::ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if this.held.len() + data.len() <= LIMIT => {
                        this.held.extend_from_slice(&data);
                    }
                    // Too large to read whole: what is held, then the rest, as they came.
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        *this.stream = true;
                        let all = this.held.split().freeze();
                        return Poll::Ready(Some(Ok(Frame::data(all))));
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => *this.ended = true,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// The next complete event held (up to and with its blank line), taken out of `held`.
pub(super) fn next_event(held: &mut BytesMut) -> Option<Bytes> {
    let end = event_end(held)?;
    Some(held.split_to(end).freeze())
}

/// Where the first event of `bytes` ends: past the first empty line, its lines ended by `\n`,
/// `\r\n` or `\r` as the event stream format allows, mixed as they come. `None` until one is
/// complete (a `\r` last may yet be followed by its `\n`).
fn event_end(bytes: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    let mut at = 0;
    while let Some(found) = memchr::memchr2(b'\n', b'\r', &bytes[at..]) {
        let terminator = at + found;
        let mut end = terminator + 1;
        if bytes[terminator] == b'\r' {
            match bytes.get(end) {
                Some(b'\n') => end += 1,
                Some(_) => {}
                None => return None,
            }
        }
        if terminator == line_start {
            return Some(end);
        }
        line_start = end;
        at = end;
    }
    None
}

/// An event whose JSON-RPC result lacks `resultType`, given it: its `data:` lines become one
/// (its other lines kept); any other event as it came.
fn typed_event(event: &Bytes, cacheable: bool) -> Bytes {
    let Ok(text) = std::str::from_utf8(event) else {
        return event.clone();
    };
    let lines: Vec<&str> = text.lines().collect();
    let data: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    let Some(message) = typed(&data.join("\n"), cacheable) else {
        return event.clone();
    };
    let mut out = String::new();
    for line in lines
        .iter()
        .filter(|l| !l.starts_with("data:") && !l.is_empty())
    {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&message);
    out.push_str("\n\n");
    Bytes::from(out)
}

/// A JSON answer whose result lacks `resultType`, given it; else as it came.
fn typed_json(answer: Bytes, cacheable: bool) -> Bytes {
    std::str::from_utf8(&answer)
        .ok()
        .and_then(|json| typed(json, cacheable))
        .map_or(answer, Bytes::from)
}

/// `json`, a JSON-RPC response whose result is an object, given what [`type_result`] gives
/// it; `None` when nothing was lacking, or for anything else.
fn typed(json: &str, cacheable: bool) -> Option<String> {
    let mut message: Value = serde_json::from_str(json).ok()?;
    type_result(&mut message, cacheable).then(|| message.to_string())
}

/// Gives a JSON-RPC response whose result is an object `resultType: "complete"` and, when
/// `cacheable`, `ttlMs: 0` and `cacheScope: "private"`, where it lacks them: whether it lacked
/// any.
pub(super) fn type_result(message: &mut Value, cacheable: bool) -> bool {
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut given = [("resultType", Value::from("complete"))].to_vec();
    if cacheable {
        given.extend([
            ("ttlMs", Value::from(0)),
            ("cacheScope", Value::from("private")),
        ]);
    }
    let mut changed = false;
    for (key, value) in given {
        if !result.contains_key(key) {
            result.insert(key.into(), value);
            changed = true;
        }
    }
    changed
}

/// Whether a method's result is one 2026-07-28 gives caching hints.
pub(super) fn is_cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    async fn through(chunks: &[&'static [u8]], stream: bool) -> String {
        let frames = chunks
            .iter()
            .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(c))))
            .collect::<Vec<_>>();
        let inner = StreamBody::new(futures_util::stream::iter(frames));
        let body = ResultTyped::new(inner, stream, false);
        let bytes = body.collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_json_result_is_given_its_type_and_nothing_else_changes() {
        let json = through(
            &[br#"{"jsonrpc":"2.0","id":1,"res"#, br#"ult":{"tools":[]}}"#],
            false,
        )
        .await;
        let value: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["result"]["resultType"], "complete");
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}"#;
        assert_eq!(through(&[error.as_bytes()], false).await, error);
        let typed = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task"}}"#;
        assert_eq!(through(&[typed.as_bytes()], false).await, typed);
        assert_eq!(through(&[b"not json"], false).await, "not json");
    }

    #[test]
    fn a_cacheable_result_is_given_the_sdks_default_hints_and_keeps_its_own() {
        let list = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
        let typed_list: Value = serde_json::from_str(&typed(list, true).unwrap()).unwrap();
        assert_eq!(
            typed_list["result"],
            serde_json::json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let own = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","ttlMs":5,"cacheScope":"public"}}"#;
        assert_eq!(typed(own, true), None);
        assert!(is_cacheable("tools/list") && !is_cacheable("tools/call"));
    }

    #[tokio::test]
    async fn an_event_stream_is_typed_event_by_event_across_frames() {
        let stream = through(
            &[
                b"event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n: ping\n\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",",
                b"\"id\":3,\"result\":{\"content\":[]}}\r\n\r\ntail",
            ],
            true,
        )
        .await;
        assert_eq!(
            stream,
            "event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n: ping\n\n\
             event: message\ndata: {\"id\":3,\"jsonrpc\":\"2.0\",\"result\":{\"content\":[],\"resultType\":\"complete\"}}\n\ntail"
        );
    }
}
