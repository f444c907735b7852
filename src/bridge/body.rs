//! The body of a [`ProtocolBridge`](super::ProtocolBridge) answer.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

use super::typed::ResultTyped;
use crate::body::PeekedBody;
use crate::error::BoxError;
use crate::exchange::Driven;

pin_project! {
    /// The body of a [`ProtocolBridge`](super::ProtocolBridge) answer: the server's, as it came
    /// (its first bytes, when the bridge read them, yielded first); a 2025 server's answer to a
    /// client of 2026-07-28, its results given the `resultType` that revision reads; or the
    /// bridge's own.
    pub struct BridgeBody<B: Body> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = Projected]
    enum Inner<B: Body> {
        Server {
            #[pin]
            body: PeekedBody<B>,
        },
        Typed {
            #[pin]
            body: ResultTyped<PeekedBody<B>>,
        },
        Local {
            #[pin]
            body: Full<Bytes>,
        },
        Driven {
            body: Driven,
        },
    }
}

impl<B: Body> BridgeBody<B> {
    /// The server's body, as it came.
    pub(super) fn server(body: PeekedBody<B>) -> Self {
        Self {
            inner: Inner::Server { body },
        }
    }

    /// A 2025 server's body, its results typed for a client of 2026-07-28 (and given caching
    /// hints, when `cacheable`).
    pub(super) fn typed(body: PeekedBody<B>, stream: bool, cacheable: bool) -> Self {
        Self {
            inner: Inner::Typed {
                body: ResultTyped::new(body, stream, cacheable),
            },
        }
    }

    /// The bridge's own, written while it works.
    pub(super) fn driven(body: Driven) -> Self {
        Self {
            inner: Inner::Driven { body },
        }
    }

    /// The bridge's own.
    pub(super) fn local(bytes: Bytes) -> Self {
        Self {
            inner: Inner::Local {
                body: Full::new(bytes),
            },
        }
    }
}

impl<B> Body for BridgeBody<B>
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().inner.project() {
            Projected::Server { body } => body.poll_frame(cx).map_err(Into::into),
            Projected::Typed { body } => body.poll_frame(cx),
            Projected::Local { body } => body.poll_frame(cx).map_err(|never| match never {}),
            Projected::Driven { body } => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Server { body } => body.is_end_stream(),
            Inner::Typed { body } => body.is_end_stream(),
            Inner::Local { body } => body.is_end_stream(),
            Inner::Driven { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Server { body } => body.size_hint(),
            Inner::Typed { .. } => SizeHint::default(),
            Inner::Local { body } => body.size_hint(),
            Inner::Driven { .. } => SizeHint::default(),
        }
    }
}

impl<B: Body> fmt::Debug for BridgeBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.inner {
            Inner::Server { .. } => "server",
            Inner::Typed { .. } => "typed",
            Inner::Local { .. } => "local",
            Inner::Driven { .. } => "driven",
        };
        f.debug_tuple("BridgeBody").field(&kind).finish()
    }
}
