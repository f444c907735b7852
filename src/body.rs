//! [`PeekedBody`]: a response body whose first bytes were read ahead, handed on whole.
//!
//! A layer that must look at the start of a body before deciding (the session-busy refusal
//! comes as an HTTP 200 whose JSON body says so) reads a bounded prefix, then hands the app a
//! body that yields that prefix first — the same frames, in the same order — and then the rest
//! of the stream, untouched. An error met while reading ahead is yielded at the same point,
//! after the frames before it; trailers pass through; `size_hint` and `is_end_stream` count the
//! frames held back.
//!
//! Written here rather than taken from a crate: http-body-util has no bounded, frame-preserving
//! read-ahead that keeps a mid-body error in place (its `Collected` reads everything, and
//! `BodyExt::frame` gives up the body's ownership of what was read).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// A response body with a read-ahead prefix, yielded before the rest of the stream.
    pub struct PeekedBody<B: Body> {
        held: VecDeque<Frame<B::Data>>,
        held_len: usize,
        error: Option<B::Error>,
        // The inner body returned its last frame (or its error) during the read-ahead.
        exhausted: bool,
        #[pin]
        rest: B,
    }
}

impl<B: Body> PeekedBody<B> {
    /// A body with nothing read ahead: every frame comes straight from `body`.
    pub fn new(body: B) -> Self {
        Self {
            held: VecDeque::new(),
            held_len: 0,
            error: None,
            exhausted: false,
            rest: body,
        }
    }

    /// The number of data bytes read ahead and not yet yielded.
    pub fn held_len(&self) -> usize {
        self.held_len
    }

    /// Whether the read-ahead reached the end of the body (with or without trailers) without
    /// an error: then the held frames are the whole body.
    pub fn is_complete(&self) -> bool {
        self.exhausted && self.error.is_none()
    }

    /// Whether the read-ahead met an error (held, to be yielded after the frames before it).
    pub fn has_error(&self) -> bool {
        self.error.is_some()
    }

    /// The data read ahead, as one run of bytes (borrowed when it is one frame).
    pub fn held_bytes(&self) -> std::borrow::Cow<'_, [u8]>
    where
        B::Data: AsRef<[u8]>,
    {
        let mut data = self.held.iter().filter_map(Frame::data_ref);
        match (data.next(), data.next()) {
            (None, _) => std::borrow::Cow::Borrowed(&[]),
            (Some(one), None) => std::borrow::Cow::Borrowed(one.as_ref()),
            (Some(first), Some(second)) => {
                let mut all = Vec::with_capacity(self.held_len);
                all.extend_from_slice(first.as_ref());
                all.extend_from_slice(second.as_ref());
                for more in data {
                    all.extend_from_slice(more.as_ref());
                }
                std::borrow::Cow::Owned(all)
            }
        }
    }
}

impl<B> PeekedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    /// Reads ahead until the body ends, an error or trailers arrive, more than `limit` data
    /// bytes are held, or `keep_going` says the bytes held so far are not worth more reading.
    /// What was read is held, to be yielded first.
    pub(crate) fn poll_read_ahead(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
        keep_going: impl Fn(&[u8]) -> bool,
    ) -> Poll<()> {
        loop {
            if self.exhausted || self.error.is_some() || self.held_len > limit {
                return Poll::Ready(());
            }
            if self.rest.is_end_stream() {
                self.exhausted = true;
                return Poll::Ready(());
            }
            match Pin::new(&mut self.rest).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.exhausted = true;
                    return Poll::Ready(());
                }
                Poll::Ready(Some(Err(error))) => {
                    self.error = Some(error);
                    return Poll::Ready(());
                }
                Poll::Ready(Some(Ok(frame))) => {
                    let is_data = frame.is_data();
                    if let Some(data) = frame.data_ref() {
                        self.held_len = self.held_len.saturating_add(data.len());
                    }
                    self.held.push_back(frame);
                    if !is_data {
                        // Trailers end a body: nothing to read after them.
                        self.exhausted = true;
                        return Poll::Ready(());
                    }
                    if !keep_going(&self.held_bytes()) {
                        return Poll::Ready(());
                    }
                }
            }
        }
    }
}

impl<B: Body> Body for PeekedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if let Some(frame) = this.held.pop_front() {
            if let Some(data) = frame.data_ref() {
                *this.held_len -= bytes::Buf::remaining(data).min(*this.held_len);
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(error) = this.error.take() {
            *this.exhausted = true;
            return Poll::Ready(Some(Err(error)));
        }
        if *this.exhausted {
            return Poll::Ready(None);
        }
        let next = std::task::ready!(this.rest.poll_frame(cx));
        if next.is_none() {
            // Remember the end, so `is_end_stream` says so even for a body that does not.
            *this.exhausted = true;
        }
        Poll::Ready(next)
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty()
            && self.error.is_none()
            && (self.exhausted || self.rest.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let held = self.held_len as u64;
        if self.exhausted || self.error.is_some() {
            // Nothing more will be read from the inner body. (After an error the body ends
            // early, so the hint is what is held.)
            return SizeHint::with_exact(held);
        }
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(held));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint
    }
}

/// Where a retry layer holds the answer it reads ahead: in a [`PeekedBody`] of its own
/// ([`OwnReadAhead`], the default), or in the one the retry layer right under it already put
/// the answer in ([`InnerReadAhead`]), so a stack of the crate's retry layers nests one
/// [`PeekedBody`] in its body type, not one per layer. Sealed: these two are the choices.
pub trait ReadAhead<B>: sealed::Sealed {
    /// The body under the read-ahead.
    type Inner: Body;
    /// The answer's body, ready to be read ahead.
    fn peeked(body: B) -> PeekedBody<Self::Inner>;
}

/// A retry layer's answer goes into a [`PeekedBody`] of its own: for a layer over any
/// service. The default.
#[derive(Clone, Copy, Debug, Default)]
pub struct OwnReadAhead;

/// A retry layer's answer stays in the [`PeekedBody`] of the retry layer of this crate right
/// under it, which read it ahead already: see
/// [`RetryLayer::over_retry_layer`](crate::retry::RetryLayer::over_retry_layer).
#[derive(Clone, Copy, Debug, Default)]
pub struct InnerReadAhead;

impl<B: Body> ReadAhead<B> for OwnReadAhead {
    type Inner = B;

    fn peeked(body: B) -> PeekedBody<B> {
        PeekedBody::new(body)
    }
}

impl<B: Body> ReadAhead<PeekedBody<B>> for InnerReadAhead {
    type Inner = B;

    fn peeked(body: PeekedBody<B>) -> PeekedBody<B> {
        body
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::OwnReadAhead {}
    impl Sealed for super::InnerReadAhead {}
}

impl<B: Body> fmt::Debug for PeekedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeekedBody")
            .field("held_frames", &self.held.len())
            .field("held_len", &self.held_len)
            .field("error_held", &self.error.is_some())
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// A response body passed through as it is, while a copy of its data (up to a limit) is
    /// kept and handed to a callback when the body ends. Used to learn from answers without
    /// delaying them: the app reads at the body's own pace.
    pub struct ObservedBody<B> {
        #[pin]
        inner: B,
        tap: Option<Tap>,
    }
}

/// Called with the whole body's data when it ends.
type OnEnd = Box<dyn FnOnce(&[u8]) + Send>;

struct Tap {
    copy: Vec<u8>,
    limit: usize,
    on_end: OnEnd,
}

impl<B> ObservedBody<B> {
    /// A body observed by nobody: a plain pass-through.
    pub fn new(inner: B) -> Self {
        Self { inner, tap: None }
    }

    /// A body whose data (up to `limit` bytes) is handed to `on_end` when it ends without an
    /// error. Past the limit, or on an error, the observer is dropped uncalled.
    pub(crate) fn observed(
        inner: B,
        limit: usize,
        on_end: impl FnOnce(&[u8]) + Send + 'static,
    ) -> Self {
        Self {
            inner,
            tap: Some(Tap {
                copy: Vec::new(),
                limit,
                on_end: Box::new(on_end),
            }),
        }
    }
}

impl<B: Body> Body for ObservedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        use bytes::Buf;
        let this = self.project();
        let next = std::task::ready!(this.inner.poll_frame(cx));
        match &next {
            Some(Ok(frame)) => {
                if let (Some(tap), Some(data)) = (this.tap.as_mut(), frame.data_ref()) {
                    let chunk = data.chunk();
                    let whole = chunk.len() == data.remaining();
                    if whole && tap.copy.len().saturating_add(chunk.len()) <= tap.limit {
                        tap.copy.extend_from_slice(chunk);
                    } else {
                        *this.tap = None;
                    }
                }
            }
            Some(Err(_)) => *this.tap = None,
            None => {
                if let Some(tap) = this.tap.take() {
                    (tap.on_end)(&tap.copy);
                }
            }
        }
        Poll::Ready(next)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> fmt::Debug for ObservedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedBody")
            .field("observed", &self.tap.is_some())
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// Reads a whole body into one `Bytes`, refusing more than a limit as soon as it is passed.
    /// (http-body-util's `Limited` needs `B::Error: Into<BoxError>` in every type that names it;
    /// this keeps the body's own error.)
    pub(crate) struct ReadToBytes<B> {
        #[pin]
        body: B,
        // The first chunk alone (most bodies are one: no list, no copy), then all of them.
        first: Option<Bytes>,
        chunks: Vec<Bytes>,
        len: usize,
        limit: usize,
    }
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum ReadError<E> {
    /// It is longer than the limit.
    TooLarge,
    /// The body failed.
    Body(E),
}

impl<B> ReadToBytes<B> {
    pub(crate) fn new(body: B, limit: usize) -> Self {
        Self {
            body,
            first: None,
            chunks: Vec::new(),
            len: 0,
            limit,
        }
    }
}

impl<B> std::future::Future for ReadToBytes<B>
where
    B: Body,
{
    type Output = Result<Bytes, ReadError<B::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        use bytes::Buf;
        let mut this = self.project();
        if this.body.size_hint().lower() > *this.limit as u64 {
            return Poll::Ready(Err(ReadError::TooLarge));
        }
        loop {
            match std::task::ready!(this.body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(mut data) = frame.into_data() {
                        *this.len = this.len.saturating_add(data.remaining());
                        if *this.len > *this.limit {
                            return Poll::Ready(Err(ReadError::TooLarge));
                        }
                        let remaining = data.remaining();
                        let chunk = data.copy_to_bytes(remaining);
                        match this.first.take() {
                            None if this.chunks.is_empty() => *this.first = Some(chunk),
                            first => this.chunks.extend(first.into_iter().chain([chunk])),
                        }
                    }
                }
                Some(Err(error)) => return Poll::Ready(Err(ReadError::Body(error))),
                None => {
                    let bytes = match this.first.take() {
                        Some(only) => only,
                        None if this.chunks.is_empty() => Bytes::new(),
                        None => Bytes::from(std::mem::take(this.chunks).concat()),
                    };
                    return Poll::Ready(Ok(bytes));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};

    type E = std::io::Error;

    type Frames = futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, E>>>;

    fn stream(frames: Vec<Result<Frame<Bytes>, E>>) -> StreamBody<Frames> {
        StreamBody::new(futures_util::stream::iter(frames))
    }

    async fn read_ahead<B: Body<Data = Bytes> + Unpin>(body: &mut PeekedBody<B>, limit: usize) {
        std::future::poll_fn(|cx| body.poll_read_ahead(cx, limit, |_| true)).await
    }

    #[tokio::test]
    async fn whole_small_body_is_held_and_yielded_again() {
        let mut body = PeekedBody::new(Full::new(Bytes::from_static(b"{\"a\":1}")));
        read_ahead(&mut body, 4096).await;
        assert!(body.is_complete());
        assert_eq!(&body.held_bytes()[..], b"{\"a\":1}");
        assert_eq!(body.size_hint().exact(), Some(7));
        assert!(!body.is_end_stream());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"{\"a\":1}");
    }

    #[tokio::test]
    async fn an_error_is_yielded_at_the_same_point() {
        let mut body = PeekedBody::new(stream(vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Err(E::other("boom")),
            Ok(Frame::data(Bytes::from_static(b"never"))),
        ]));
        read_ahead(&mut body, 4096).await;
        assert!(body.has_error());
        assert!(!body.is_complete());
        let mut got = Vec::new();
        loop {
            match body.frame().await {
                Some(Ok(f)) => got.push(f.into_data().unwrap()),
                Some(Err(e)) => {
                    assert_eq!(e.to_string(), "boom");
                    break;
                }
                None => panic!("the error was swallowed"),
            }
        }
        assert_eq!(
            got,
            vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]
        );
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn stops_past_the_limit_and_keeps_the_rest_streaming() {
        let frames: Vec<_> = (0..10)
            .map(|i| Ok(Frame::data(Bytes::from(vec![i as u8; 3000]))))
            .collect();
        let mut body = PeekedBody::new(stream(frames));
        read_ahead(&mut body, 4096).await;
        assert_eq!(body.held_len(), 6000, "read until just past the limit");
        assert!(!body.is_complete());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 30_000);
        for (i, chunk) in bytes.chunks(3000).enumerate() {
            assert!(chunk.iter().all(|b| *b == i as u8));
        }
    }

    #[tokio::test]
    async fn trailers_pass_through() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let mut body = PeekedBody::new(stream(vec![
            Ok(Frame::data(Bytes::from_static(b"x"))),
            Ok(Frame::trailers(trailers.clone())),
        ]));
        read_ahead(&mut body, 4096).await;
        assert!(body.is_complete());
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(&collected.to_bytes()[..], b"x");
    }

    #[tokio::test]
    async fn an_observed_body_is_handed_over_at_its_end() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<Vec<u8>>));
        let body = ObservedBody::observed(
            stream(vec![
                Ok(Frame::data(Bytes::from_static(b"ab"))),
                Ok(Frame::data(Bytes::from_static(b"cd"))),
            ]),
            10,
            {
                let seen = seen.clone();
                move |bytes| *seen.lock().unwrap() = Some(bytes.to_vec())
            },
        );
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abcd");
        assert_eq!(seen.lock().unwrap().as_deref(), Some(&b"abcd"[..]));

        // Past the limit, the observer is never called; the body is unchanged.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(false));
        let body = ObservedBody::observed(
            stream(vec![Ok(Frame::data(Bytes::from_static(b"abcdef")))]),
            3,
            {
                let seen = seen.clone();
                move |_| *seen.lock().unwrap() = true
            },
        );
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"abcdef");
        assert!(!*seen.lock().unwrap());
    }

    #[tokio::test]
    async fn read_to_bytes_stops_past_the_limit() {
        let body = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Ok(Frame::data(Bytes::from_static(b"def"))),
        ]);
        assert_eq!(&ReadToBytes::new(body, 6).await.unwrap()[..], b"abcdef");
        // One chunk (kept as it is), none, three with a trailers frame among them.
        let one = Bytes::from_static(b"abcdef");
        let read = ReadToBytes::new(Full::new(one.clone()), 6).await.unwrap();
        assert_eq!(read.as_ptr(), one.as_ptr(), "the chunk itself, not a copy");
        let none = ReadToBytes::new(stream(vec![]), 6).await.unwrap();
        assert!(none.is_empty());
        let body = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Ok(Frame::trailers(http::HeaderMap::new())),
            Ok(Frame::data(Bytes::from_static(b"ef"))),
        ]);
        assert_eq!(&ReadToBytes::new(body, 6).await.unwrap()[..], b"abcdef");
        let body = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Ok(Frame::data(Bytes::from_static(b"def"))),
        ]);
        assert!(matches!(
            ReadToBytes::new(body, 5).await,
            Err(ReadError::TooLarge)
        ));
        let body = Full::new(Bytes::from_static(b"0123456789"));
        assert!(
            matches!(ReadToBytes::new(body, 5).await, Err(ReadError::TooLarge)),
            "by size hint"
        );
        let body = stream(vec![Err(E::other("x"))]);
        assert!(matches!(
            ReadToBytes::new(body, 5).await,
            Err(ReadError::Body(_))
        ));
    }

    #[tokio::test]
    async fn size_hint_counts_held_and_rest() {
        let mut body = PeekedBody::new(stream(vec![
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Ok(Frame::data(Bytes::from_static(b"def"))),
        ]));
        std::future::poll_fn(|cx| body.poll_read_ahead(cx, 4096, |held| held.len() < 3)).await;
        assert_eq!(body.held_len(), 3);
        // StreamBody hints nothing: lower bound is what is held.
        assert_eq!(body.size_hint().lower(), 3);
        assert_eq!(body.size_hint().upper(), None);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abcdef");
    }
}
