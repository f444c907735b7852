//! [`Retry<S, P>`], the service a [`RetryLayer`] builds: it enters each call, takes the service
//! that was polled ready (leaving a clone in its place, tower's rule), and hands the call to a
//! [`ResponseFuture`], which runs the loop.

use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tower::{Layer, Service};

use super::config::RetryConfig;
use super::{ResponseFuture, RetryLayer, RetryPolicy};
use crate::body::{OwnReadAhead, ReadAhead};
use crate::error::{BoxError, Error};

/// The service a [`RetryLayer`] builds.
#[derive(Clone, Debug)]
pub struct Retry<S, P, R = OwnReadAhead> {
    /// The service below.
    inner: S,
    /// What it re-sends.
    policy: P,
    /// Its layer's settings. Shared by the service's clones and the calls' futures: a clone
    /// is a count.
    config: Arc<RetryConfig>,
    /// Where it holds the answer it reads ahead.
    read_ahead: PhantomData<fn() -> R>,
}

impl<S, P> Retry<S, P>
where
    RetryLayer<P>: Default,
    P: Clone,
{
    /// Wraps `inner` with the layer's default settings.
    pub fn new(inner: S) -> Self {
        RetryLayer::<P>::default().layer(inner)
    }

    /// The layer, to change settings: `ThrottleRetry::<S>::layer().max_attempts(5)`.
    pub fn layer() -> RetryLayer<P> {
        RetryLayer::default()
    }
}

impl<S, P, R> Retry<S, P, R> {
    /// The service over `inner` with `policy` and its layer's settings, `config`.
    pub(super) fn with_config(inner: S, policy: P, config: Arc<RetryConfig>) -> Self {
        Self {
            inner,
            policy,
            config,
            read_ahead: PhantomData,
        }
    }

    /// The service below.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The service below, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service below.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, P, R, ReqB, ResB> Service<Request<ReqB>> for Retry<S, P, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: Clone,
    R: ReadAhead<ResB>,
    R::Inner: Body<Data = Bytes> + Unpin,
    P: RetryPolicy<ReqB, R::Inner>,
{
    type Response = Response<P::Body>;
    type Error = Error;
    type Future = ResponseFuture<S, ReqB, ResB, P, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::from_service)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let (context, ownership) = self.config.enter(&mut request);
        let clone = self.inner.clone();
        let service = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::new(
            service,
            &self.policy,
            self.config.clone(),
            context,
            ownership,
            request,
        )
    }
}
