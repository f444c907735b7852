//! The response future of [`TaskPolling`](super::TaskPolling).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use http_body::Body;
use pin_project_lite::pin_project;

use super::body::TaskBody;
use crate::body::PeekedBody;

/// The steps of a POST the layer reads (send, maybe send again declaring the extension, take a
/// task over), as one boxed future.
pub(super) type Boxed<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<TaskBody<B>>, E>> + Send>>;

pin_project! {
    /// The response future of [`TaskPolling`](super::TaskPolling): the service's own future for
    /// what the layer does not read (anything but a JSON POST), else the layer's steps, boxed.
    pub struct ResponseFuture<F, B: Body, E> {
        #[pin]
        step: Step<F, B, E>,
    }
}

pin_project! {
    #[project = Projected]
    enum Step<F, B: Body, E> {
        Direct {
            #[pin]
            future: F,
        },
        Read {
            future: Boxed<B, E>,
        },
    }
}

impl<F, B: Body, E> ResponseFuture<F, B, E> {
    /// The service's own future, handed on as it is.
    pub(super) fn direct(future: F) -> Self {
        Self {
            step: Step::Direct { future },
        }
    }

    /// The layer's steps.
    pub(super) fn read(future: Boxed<B, E>) -> Self {
        Self {
            step: Step::Read { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Body,
{
    type Output = Result<Response<TaskBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().step.project() {
            Projected::Direct { future } => future
                .poll(cx)
                .map_ok(|answer| answer.map(|body| TaskBody::server(PeekedBody::new(body)))),
            Projected::Read { future } => future.as_mut().poll(cx),
        }
    }
}

impl<F, B: Body, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.step {
            Step::Direct { .. } => "Direct",
            Step::Read { .. } => "Read",
        };
        f.debug_struct("ResponseFuture")
            .field("step", &step)
            .finish_non_exhaustive()
    }
}
