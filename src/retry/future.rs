//! [`ResponseFuture`], the loop of one call through a retry layer, as a state machine: prepare
//! (the policy looks at the call), send, read the answer's platform error ahead, judge, then
//! deliver — or wait, poll the service ready and send a copy again. Each step is a helper of its
//! own; `poll` only moves between them.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use tower::Service;

use super::RetryPolicy;
use super::config::RetryConfig;
use super::decide::{Next, decide};
use super::sealed::Judge;
use super::template::Template;
use crate::body::{OwnReadAhead, PeekedBody, ReadAhead};
use crate::context::{CallContext, Ownership, delivered};
use crate::contract::Classified;
use crate::error::{BoxError, Error, ErrorKind};
use crate::peek::{PeekResult, peek_result};
use crate::record::Handed;
use crate::telemetry::{self, CallError};

pin_project! {
    /// The response future of a [`Retry`](super::Retry) service: the retry state machine.
    #[project = Projection]
    pub struct ResponseFuture<S, ReqB, ResB, P, R = OwnReadAhead>
    where
        S: Service<Request<ReqB>, Response = Response<ResB>>,
        R: ReadAhead<ResB>,
        P: RetryPolicy<ReqB, R::Inner>,
    {
        // Dropped in this order: what is in flight (or the request not yet sent) and what this
        // layer was handed first, so the record is final when the owner calls the hooks.
        #[pin]
        state: State<S::Future, P::Prepare, PeekResult<R::Inner>, Request<ReqB>>,
        handed: Handed,
        service: S,
        template: Option<Template<ReqB>>,
        judge: Option<P::Judge>,
        config: Arc<RetryConfig>,
        context: CallContext,
        // The record's index of the attempt in flight.
        index: usize,
        // The call's span, and the span of the attempt in flight.
        span: tracing::Span,
        attempt: tracing::Span,
        ownership: Option<Ownership>,
        read_ahead: PhantomData<fn() -> R>,
    }
}

pin_project! {
    /// Where the loop of one call is.
    #[project = StateProj]
    enum State<F, PF, CF, R> {
        // The first request waits here, not beside the state: it is gone once sent, and the
        // future is one request smaller (it is moved into place at every layer).
        Preparing { #[pin] future: PF, first: Option<R> },
        Calling { #[pin] future: F },
        Classifying { #[pin] future: CF },
        Waiting { #[pin] sleep: tokio::time::Sleep },
        Readying,
        Done,
    }
}

/// One attempt's result once read ahead: the answer (or the error) and its platform error.
type Peeked<B> = Result<Response<PeekedBody<B>>, Error>;

/// What the future resolves to.
type Output<B> = Result<Response<B>, Error>;

impl<S, ReqB, ResB, P, R> ResponseFuture<S, ReqB, ResB, P, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ReqB: Clone,
    R: ReadAhead<ResB>,
    P: RetryPolicy<ReqB, R::Inner>,
{
    /// The loop of the call `context` for `request`, over `service` (polled ready), with a
    /// copy of the request kept when the layer may send it again; `ownership` when this layer
    /// is the call's first.
    pub(super) fn new(
        service: S,
        policy: &P,
        config: Arc<RetryConfig>,
        context: CallContext,
        ownership: Option<Ownership>,
        request: Request<ReqB>,
    ) -> Self {
        // The call's span, opened by the call's owner ([`CallContext::enter`]): entered from
        // the first attempt on, once the method is known (OpenTelemetry names a span when it
        // starts).
        let span = context.span();
        let template = (context.max_attempts(config.backoff.max_attempts()) > 1)
            .then(|| Template::of(&request, &context));
        let prepare = policy.prepare(&request, &context);
        Self {
            handed: Handed::of(context.record(), &request),
            state: State::Preparing {
                future: prepare,
                first: Some(request),
            },
            service,
            template,
            judge: None,
            config,
            context,
            index: 0,
            span,
            attempt: tracing::Span::none(),
            ownership,
            read_ahead: PhantomData,
        }
    }
}

impl<S, ReqB, ResB, P, R> Future for ResponseFuture<S, ReqB, ResB, P, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Clone,
    R: ReadAhead<ResB>,
    R::Inner: Body<Data = Bytes> + Unpin,
    P: RetryPolicy<ReqB, R::Inner>,
{
    type Output = Output<P::Body>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // The spans are entered from the first attempt on, not while preparing: the call's span
        // is not named yet.
        loop {
            match this.state.as_mut().project() {
                StateProj::Preparing { future, first } => {
                    let judge = ready!(future.poll(cx));
                    let Some(request) = first.take() else {
                        unreachable!("the first request is sent once")
                    };
                    this.send_first(judge, request);
                }
                StateProj::Calling { future } => {
                    let entered = (this.span.enter(), this.attempt.enter());
                    let result = ready!(future.poll(cx)).map_err(Error::from_service);
                    drop(entered);
                    if let Some(output) = this.answered(result) {
                        return Poll::Ready(output);
                    }
                }
                StateProj::Classifying { future } => {
                    let entered = (this.span.enter(), this.attempt.enter());
                    let (result, platform) = ready!(future.poll(cx));
                    drop(entered);
                    if let Some(output) = this.judged(result, platform) {
                        return Poll::Ready(output);
                    }
                }
                StateProj::Waiting { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Readying);
                }
                StateProj::Readying => {
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        let why = "the service below failed before it was ready";
                        return Poll::Ready(this.not_sent(Error::from_service(error), why));
                    }
                    if let Some(output) = this.resend() {
                        return Poll::Ready(output);
                    }
                }
                StateProj::Done => panic!("ResponseFuture polled after it completed"),
            }
        }
    }
}

impl<S, ReqB, ResB, P, R> Projection<'_, S, ReqB, ResB, P, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Clone,
    R: ReadAhead<ResB>,
    R::Inner: Body<Data = Bytes> + Unpin,
    P: RetryPolicy<ReqB, R::Inner>,
{
    /// The policy is ready to judge the call: its first attempt goes down. It is the one a
    /// layer above handed down, when there is one on its way.
    fn send_first(&mut self, judge: P::Judge, request: Request<ReqB>) {
        *self.judge = Some(judge);
        self.handed.sent();
        self.send(request);
    }

    /// A copy of the request this layer received goes down again, the service polled ready —
    /// or, when a header cannot be copied, the call ends with nothing more sent.
    fn resend(&mut self) -> Option<Output<P::Body>> {
        let Some(template) = self.template.as_ref() else {
            unreachable!("a re-send is only scheduled when a copy of the request was kept")
        };
        let Some(request) = template.request(self.context) else {
            let why = "a header of the request cannot be copied for a re-send";
            let error = Error::new(ErrorKind::InvalidRequest, why.to_owned(), None);
            return Some(self.not_sent(error, why));
        };
        self.send(request);
        None
    }

    /// Hands `request` down as the call's next attempt, recorded as sent with no answer yet,
    /// in the call's span and the attempt's.
    fn send(&mut self, mut request: Request<ReqB>) {
        (*self.index, *self.attempt) = self.context.dispatch(&mut request);
        let _call = self.span.enter();
        let _attempt = self.attempt.enter();
        let future = self.service.call(request);
        self.state.set(State::Calling { future });
    }

    /// The attempt's result came: its record is completed, and the platform error it carries
    /// is read (from the head, or a bounded read-ahead of the body) — judged at once when
    /// nothing is left to read, as [`judged`](Self::judged) returns.
    fn answered(&mut self, result: Result<Response<ResB>, Error>) -> Option<Output<P::Body>> {
        self.context.complete(*self.index, &result);
        let result = result.map(|response| response.map(R::peeked));
        match peek_result(result, self.config.peek_limit) {
            PeekResult::Ready(Some((result, platform))) => self.judged(result, platform),
            future => {
                self.state.set(State::Classifying { future });
                None
            }
        }
    }

    /// What the policy, then the loop, make of the attempt's result read ahead: a wait before
    /// the next attempt (`None`), or the call's output. In the call's span.
    fn judged(
        &mut self,
        result: Peeked<R::Inner>,
        platform: Option<Classified>,
    ) -> Option<Output<P::Body>> {
        let _call = self.span.enter();
        self.context.record().note_platform(*self.index, platform);
        let Some(judge) = self.judge.as_ref() else {
            unreachable!("prepared before the first attempt")
        };
        let action = judge.judge(result.as_ref(), platform);
        // For the call's span: only its owner's, when traced.
        let traced = self.ownership.is_some() && !self.span.is_disabled();
        let answer_error = traced.then(|| answer_error(&result)).flatten();
        let result = result.map(|response| judge.wrap(response));
        match decide(action, self.template.as_ref(), self.config, self.context) {
            Next::Wait(wait) => {
                self.context.end_attempts();
                *self.attempt = tracing::Span::none();
                // Release the refused answer now: its body is not read further, and a pooled
                // connection is not held while we wait.
                drop(result);
                self.state.set(State::Waiting {
                    sleep: tokio::time::sleep(wait),
                });
                None
            }
            Next::Deliver => {
                self.state.set(State::Done);
                let owner = self.ownership.take();
                Some(delivered(
                    result,
                    answer_error,
                    self.context.record(),
                    owner,
                ))
            }
        }
    }

    /// A re-send could not go down (`why`): the call ends with `error`, nothing more sent.
    fn not_sent(&mut self, error: Error, why: &str) -> Output<P::Body> {
        self.state.set(State::Done);
        let record = self.context.record();
        record.not_sent(why.into());
        if let Some(owner) = self.ownership.take() {
            owner.finish(false);
        }
        Err(error.with_record(self.context.record()))
    }
}

/// The error an answer's body carries, from what was read ahead (never a second read).
fn answer_error<B: Body<Data = Bytes>>(result: &Peeked<B>) -> Option<CallError> {
    result.as_ref().ok().and_then(|response| {
        let body = response.body();
        body.is_complete()
            .then(|| telemetry::answer_error(&body.held_bytes()))
            .flatten()
    })
}

impl<S, ReqB, ResB, P, R> fmt::Debug for ResponseFuture<S, ReqB, ResB, P, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    R: ReadAhead<ResB>,
    P: RetryPolicy<ReqB, R::Inner>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("layer", &self.config.layer)
            .finish_non_exhaustive()
    }
}
