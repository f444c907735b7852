//! What the app may read of an answer: decided here, once.
//!
//! * Headers: only those `InvokeAgentRuntime` models (and the ones the retry layers need) come
//!   back; every other header the service (or something pretending to be it) sent is dropped.
//! * Secrets: the signature and the session token of the attempt are redacted wherever they
//!   occur — in a kept header, or anywhere in the body, across frame boundaries. An AWS error
//!   such as `InvalidSignatureException` quotes the canonical request, which carries the session
//!   token; a hostile endpoint can echo the whole request. Neither reaches the app.
//! * The body streams through (JSON or SSE); only the few bytes that could be the start of a
//!   secret at the end of a frame are held back until the next frame tells.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

/// What replaces a secret.
pub(crate) const REDACTED: &str = "[redacted]";

/// The response headers that come back to the app.
pub(crate) const RESPONSE_HEADERS: [&str; 15] = [
    "content-type",
    "content-length",
    "mcp-session-id",
    "mcp-protocol-version",
    "x-amzn-bedrock-agentcore-runtime-session-id",
    "x-amzn-bedrock-agentcore-runtime-session-endpoint-url",
    "retry-after",
    "x-amzn-errortype",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-amzn-trace-id",
    "traceparent",
    "tracestate",
    "baggage",
    "allow",
];

/// The secrets of one attempt, to be kept out of what the app reads. The searchers are built
/// once per attempt, not per frame.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    needles: Vec<memchr::memmem::Finder<'static>>,
    shortest: usize,
}

impl Secrets {
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Self {
        let needles: Vec<_> = values
            .into_iter()
            .filter(|v| !v.is_empty())
            .map(|v| memchr::memmem::Finder::new(v.as_bytes()).into_owned())
            .collect();
        let shortest = needles.iter().map(|n| n.needle().len()).min().unwrap_or(0);
        Self { needles, shortest }
    }

    fn occurs_in(&self, bytes: &[u8]) -> bool {
        bytes.len() >= self.shortest && self.needles.iter().any(|n| n.find(bytes).is_some())
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.needles.len())
    }
}

/// Keeps the headers the app may read (in place), redacting any that carries a secret.
pub(crate) fn filter_headers(headers: &mut HeaderMap, secrets: &Secrets) {
    let unwanted: Vec<HeaderName> = headers
        .keys()
        .filter(|name| !RESPONSE_HEADERS.contains(&name.as_str()))
        .cloned()
        .collect();
    for name in unwanted {
        headers.remove(&name);
    }
    for value in headers.values_mut() {
        if secrets.occurs_in(value.as_bytes()) {
            *value = HeaderValue::from_static(REDACTED);
        }
    }
}

/// A response answered here, without calling the service (405 for what the operation cannot
/// carry).
pub(crate) fn local<B>(
    status: StatusCode,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> Response<InvokeBody<B>> {
    let mut response = Response::new(InvokeBody::local(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}

pin_project! {
    /// The body of a [`SigV4Invoke`](super::SigV4Invoke) response: the service's body with the
    /// attempt's secrets redacted, or a body answered locally.
    pub struct InvokeBody<B> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = InnerProj]
    enum Inner<B> {
        Remote {
            #[pin]
            body: B,
            redactor: Redactor,
            ended: bool,
        },
        Local {
            #[pin]
            body: Full<Bytes>,
        },
    }
}

impl<B> InvokeBody<B> {
    pub(crate) fn remote(body: B, secrets: Secrets) -> Self {
        Self {
            inner: Inner::Remote {
                body,
                redactor: Redactor::new(secrets),
                ended: false,
            },
        }
    }

    pub(crate) fn local(bytes: Bytes) -> Self {
        Self {
            inner: Inner::Local {
                body: Full::new(bytes),
            },
        }
    }
}

impl<B> Body for InvokeBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().inner.project() {
            InnerProj::Local { body } => match std::task::ready!(body.poll_frame(cx)) {
                Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
                Some(Err(never)) => match never {},
                None => Poll::Ready(None),
            },
            InnerProj::Remote {
                mut body,
                redactor,
                ended,
            } => loop {
                if *ended {
                    return Poll::Ready(None);
                }
                match std::task::ready!(body.as_mut().poll_frame(cx)) {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => {
                            let safe = redactor.feed(data);
                            if !safe.is_empty() {
                                return Poll::Ready(Some(Ok(Frame::data(safe))));
                            }
                            // Everything was held back (a possible secret's start): read on.
                        }
                        Err(trailers) => {
                            let held = redactor.finish();
                            if !held.is_empty() {
                                // The trailers come after the held bytes, on the next poll
                                // (the inner body ends after its trailers, so nothing is lost).
                                redactor.pending_trailers = Some(trailers);
                                return Poll::Ready(Some(Ok(Frame::data(held))));
                            }
                            *ended = true;
                            return Poll::Ready(Some(Ok(trailers)));
                        }
                    },
                    Some(Err(error)) => {
                        // What is held is dropped with the error: it may be a secret's start.
                        *ended = true;
                        return Poll::Ready(Some(Err(error)));
                    }
                    None => {
                        *ended = true;
                        let held = redactor.finish();
                        if let Some(trailers) = redactor.pending_trailers.take() {
                            return Poll::Ready(Some(Ok(trailers)));
                        }
                        if !held.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(held))));
                        }
                        return Poll::Ready(None);
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Local { body } => body.is_end_stream(),
            Inner::Remote {
                body,
                redactor,
                ended,
            } => *ended || (body.is_end_stream() && redactor.is_empty()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Local { body } => body.size_hint(),
            // Redaction may change the length; only a lower bound of zero is honest.
            Inner::Remote { body, .. } => {
                let mut hint = SizeHint::new();
                if let Some(upper) = body.size_hint().upper() {
                    // "[redacted]" is at most 10 bytes and every secret is longer, except a
                    // pathological one; keep the bound generous.
                    hint.set_upper(
                        upper
                            .saturating_mul(2)
                            .saturating_add(REDACTED.len() as u64),
                    );
                }
                hint
            }
        }
    }
}

impl<B> fmt::Debug for InvokeBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.inner {
            Inner::Remote { .. } => "remote",
            Inner::Local { .. } => "local",
        };
        f.debug_struct("InvokeBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

/// Replaces secrets in a byte stream, across frame boundaries.
///
/// Written here: no crate does a streaming multi-needle replace that holds back only a possible
/// partial match, which SSE needs (an event must not wait for the next one).
pub(crate) struct Redactor {
    secrets: Secrets,
    held: BytesMut,
    pending_trailers: Option<Frame<Bytes>>,
}

impl Redactor {
    pub(crate) fn new(secrets: Secrets) -> Self {
        Self {
            secrets,
            held: BytesMut::new(),
            pending_trailers: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.held.is_empty() && self.pending_trailers.is_none()
    }

    /// Takes the next bytes of the stream; returns what is safe to pass on now.
    pub(crate) fn feed(&mut self, data: Bytes) -> Bytes {
        if self.secrets.needles.is_empty() {
            return data;
        }
        let mut buf = if self.held.is_empty() {
            // Fast path: nothing held, no secret in it, no secret's start at its end.
            if !self.secrets.occurs_in(&data) && self.partial_at_end(&data) == data.len() {
                return data;
            }
            BytesMut::from(&data[..])
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(&data);
            joined
        };
        if self.secrets.occurs_in(&buf) {
            buf = self.replace_all(&buf);
        }
        let keep = self.partial_at_end(&buf);
        self.held = buf.split_off(keep);
        buf.freeze()
    }

    /// The end of the stream: what was held back is no secret.
    pub(crate) fn finish(&mut self) -> Bytes {
        std::mem::take(&mut self.held).freeze()
    }

    fn replace_all(&self, bytes: &[u8]) -> BytesMut {
        let mut out = BytesMut::with_capacity(bytes.len());
        let mut rest = bytes;
        loop {
            let first = self
                .secrets
                .needles
                .iter()
                .filter_map(|n| n.find(rest).map(|at| (at, n.needle().len())))
                .min_by_key(|(at, len)| (*at, usize::MAX - len));
            match first {
                Some((at, len)) => {
                    out.extend_from_slice(&rest[..at]);
                    out.extend_from_slice(REDACTED.as_bytes());
                    rest = &rest[at + len..];
                }
                None => {
                    out.extend_from_slice(rest);
                    return out;
                }
            }
        }
    }

    /// Where the longest suffix of `bytes` that is a proper prefix of a secret starts
    /// (`bytes.len()` when there is none).
    fn partial_at_end(&self, bytes: &[u8]) -> usize {
        let mut cut = bytes.len();
        for needle in self.secrets.needles.iter().map(|n| n.needle()) {
            let window = needle.len().saturating_sub(1).min(bytes.len());
            let start = bytes.len() - window;
            for at in memchr::memchr_iter(needle[0], &bytes[start..]).map(|i| start + i) {
                if at < cut && needle.starts_with(&bytes[at..]) {
                    cut = at;
                    break;
                }
            }
        }
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn redact_in_frames(secrets: &[&str], frames: &[&[u8]]) -> (Vec<Bytes>, Vec<u8>) {
        let mut r = Redactor::new(Secrets::new(secrets.iter().map(|s| s.to_string())));
        let mut out = Vec::new();
        for f in frames {
            out.push(r.feed(Bytes::copy_from_slice(f)));
        }
        out.push(r.finish());
        let all = out.concat();
        (out, all)
    }

    #[test]
    fn redacts_whole_and_split_secrets() {
        let (_, all) = redact_in_frames(&["SECRETTOKEN"], &[b"a SECRETTOKEN b"]);
        assert_eq!(all, b"a [redacted] b");
        let (frames, all) = redact_in_frames(&["SECRETTOKEN"], &[b"a SECR", b"ETTOK", b"EN b"]);
        assert_eq!(all, b"a [redacted] b");
        assert_eq!(
            &frames[0][..],
            b"a ",
            "only the possible start is held back"
        );
        let (_, all) = redact_in_frames(&["SECRETTOKEN", "sig123"], &[b"SECRETTOKENsig123SECRET"]);
        assert_eq!(
            all, b"[redacted][redacted]SECRET",
            "a partial secret at the very end is no secret"
        );
    }

    #[test]
    fn sse_events_are_not_held_back() {
        let (frames, _) = redact_in_frames(
            &["IQoJb3JpZ2luX2VjEJ"],
            &[b"data: {\"a\":1}\n\n", b"data: {}\n\n"],
        );
        assert_eq!(&frames[0][..], b"data: {\"a\":1}\n\n");
        assert_eq!(&frames[1][..], b"data: {}\n\n");
    }

    proptest::proptest! {
        #[test]
        fn redaction_is_exact(
            pieces in proptest::collection::vec(proptest::sample::select(vec!["x", "TOKEN99", "TOK", "EN99", "sigA", "si", "gA", " "]), 0..30),
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let text: String = pieces.concat();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c < text.len()).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut frames = Vec::new();
            let mut start = 0;
            for c in cuts.into_iter().chain(std::iter::once(text.len())) {
                frames.push(&text.as_bytes()[start..c]);
                start = c;
            }
            let (_, all) = redact_in_frames(&["TOKEN99", "sigA"], &frames);
            let expected = text.replace("TOKEN99", REDACTED).replace("sigA", REDACTED);
            proptest::prop_assert_eq!(String::from_utf8(all).unwrap(), expected);
        }
    }

    #[tokio::test]
    async fn a_body_keeps_its_trailers_after_held_bytes() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "1".parse().unwrap());
        let frames = vec![
            Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(b"abc TOK"))),
            Ok(Frame::trailers(trailers.clone())),
        ];
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let body = InvokeBody::remote(inner, Secrets::new(["TOKEN99".to_string()]));
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(&collected.to_bytes()[..], b"abc TOK");
    }

    #[test]
    fn headers_are_filtered_and_redacted() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "application/json".parse().unwrap());
        h.insert("set-cookie", "a=b".parse().unwrap());
        h.insert(
            "x-amzn-errortype",
            "InvalidSignatureException".parse().unwrap(),
        );
        h.insert("mcp-session-id", "echo TOKEN99".parse().unwrap());
        filter_headers(&mut h, &Secrets::new(["TOKEN99".to_string()]));
        assert_eq!(h.len(), 3);
        assert_eq!(h["mcp-session-id"], REDACTED);
        assert!(h.get("set-cookie").is_none());
    }
}
