//! The one retry loop every retry layer of this crate runs, and what it is made of.
//!
//! A layer differs from another only in its *decision*: what it makes of one attempt's result
//! ([`RetryAction`]). The loop does the rest, the same way for every layer:
//!
//! 1. Send the request through the service that was polled ready (tower's rule: a clone of a
//!    ready service is not ready; the ready one is taken, a clone left in its place).
//! 2. Hand the result to the layer's decision. `NoOpinion` delivers it.
//! 3. `Retry`: ask the replay rule ([`SharedReplayRule`](crate::SharedReplayRule) in the
//!    request's extensions, or the crate's default). Forbidding always wins.
//! 4. Stop if the attempt cap is reached, or if the wait — `Retry-After` when the server sent a
//!    valid one, otherwise the [`Backoff`] — would pass the call's total-wait ceiling. The last
//!    answer is then delivered as it came.
//! 5. Otherwise record the decision, release the refused answer (its body is dropped, so no
//!    keep-alive connection stays pinned by it), wait, poll the service ready again, and send a
//!    clone of the original request (method, URI, version, headers, extensions, body).
//!
//! Dropping the response future cancels whatever is under way: the wait, or the attempt in
//! flight.
//!
//! Request bodies are cloned for every re-send, so the layers require `ReqBody: Clone`: a body
//! that cannot be cloned cannot be retried, and that is a compile-time fact rather than a
//! half-sent stream at run time. MCP requests are small JSON documents: send them as
//! `http_body_util::Full<Bytes>`, `String` or `Bytes`.

pub(crate) mod backoff;
pub(crate) mod retry_after;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response, Uri};
use pin_project_lite::pin_project;
use tower::Service;

use crate::error::{BoxError, Error};
use crate::record::{AttemptRecord, Decision, DeliveryReason, Outcome, Verdict};
use crate::replay::{Failure, RuleVerdict, SharedReplayRule};
pub use backoff::Backoff;

/// What one layer's decision makes of one attempt's result.
///
/// Combine several with [`RetryAction::or`]: `Forbidden` always wins.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryAction {
    /// The layer has nothing to say: deliver the result as it is.
    NoOpinion,
    /// The layer would send the request again, for this reason.
    Retry(RetryReason),
    /// The request must not be sent again; the reason is recorded.
    Forbidden(String),
}

impl RetryAction {
    /// Combines two opinions: `Forbidden` wins over anything, then `Retry` (the first one),
    /// then `NoOpinion`.
    pub fn or(self, other: RetryAction) -> RetryAction {
        match (self, other) {
            (f @ RetryAction::Forbidden(_), _) | (_, f @ RetryAction::Forbidden(_)) => f,
            (r @ RetryAction::Retry(_), _) | (_, r @ RetryAction::Retry(_)) => r,
            _ => RetryAction::NoOpinion,
        }
    }
}

/// Why a layer would send a request again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryReason {
    /// The failure, as the replay rule sees it.
    pub failure: Failure,
    /// A short description for the record and logs (e.g. `"HTTP 429"`).
    pub cause: &'static str,
    /// The wait the server asked for, when it did (a valid `Retry-After`).
    pub retry_after: Option<Duration>,
}

/// What an `on_retry` hook is told before a re-send.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryInfo {
    /// The layer re-sending (`"throttle"`, `"session_busy"`, `"replay_guard"`).
    pub layer: &'static str,
    /// The number of the attempt about to start (2 for the first re-send), in this layer.
    pub attempt: u32,
    /// The layer's attempt cap.
    pub max_attempts: u32,
    /// How long the layer waits before sending it.
    pub wait: Duration,
    /// What the server asked for in `Retry-After`, when it did.
    pub retry_after: Option<Duration>,
    /// Why it is sent again (e.g. `"HTTP 429"`).
    pub cause: &'static str,
}

/// A hook called before every re-send.
#[derive(Clone)]
pub(crate) struct OnRetry(Arc<dyn Fn(&RetryInfo) + Send + Sync>);

impl OnRetry {
    pub(crate) fn new(f: impl Fn(&RetryInfo) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl fmt::Debug for OnRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRetry(..)")
    }
}

/// A hook called with the finished record of a call.
#[derive(Clone)]
pub(crate) struct OnRecord(pub(crate) Arc<dyn Fn(&AttemptRecord) + Send + Sync>);

impl fmt::Debug for OnRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRecord(..)")
    }
}

/// A retry layer's settings: its schedule and its hooks.
#[derive(Clone, Debug)]
pub(crate) struct RetryConfig {
    pub(crate) backoff: Backoff,
    pub(crate) on_retry: Option<OnRetry>,
    pub(crate) on_record: Option<OnRecord>,
}

impl RetryConfig {
    pub(crate) const fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            on_retry: None,
            on_record: None,
        }
    }
}

/// What a decision hands back: the result (possibly with a rewrapped body) and its opinion.
pub(crate) struct Classified<B> {
    pub(crate) result: Result<Response<B>, Error>,
    pub(crate) action: RetryAction,
}

/// A layer's decision over one attempt's result. It may need to read (part of) the body first,
/// so it answers with a future.
pub(crate) trait Classify<B>: Clone {
    /// The body of the responses it hands back.
    type Body;
    /// Its answer.
    type Future: Future<Output = Classified<Self::Body>>;
    /// Decides about one attempt's result.
    fn classify(&self, result: Result<Response<B>, Error>) -> Self::Future;
}

/// Copies a request for a re-send: method, URI, version, headers, extensions and body.
pub(crate) fn clone_request<B: Clone>(request: &Request<B>) -> Request<B> {
    let mut copy = Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    copy
}

/// Displays a URI without its query (which may carry anything): scheme, authority and path.
pub(crate) struct UriWithoutQuery<'a>(pub(crate) &'a Uri);

impl fmt::Display for UriWithoutQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(scheme), Some(authority)) = (self.0.scheme(), self.0.authority()) {
            write!(f, "{scheme}://{authority}")?;
        }
        f.write_str(self.0.path())
    }
}

pin_project! {
    /// The retry state machine. Each layer's public `ResponseFuture` wraps one.
    pub(crate) struct RetryFuture<S, ReqB, ResB, C>
    where
        S: Service<Request<ReqB>, Response = Response<ResB>>,
        C: Classify<ResB>,
    {
        #[pin]
        state: State<S::Future, C::Future>,
        service: S,
        template: Option<Request<ReqB>>,
        classify: C,
        config: RetryConfig,
        layer: &'static str,
        attempt: u32,
        waited: Duration,
        record: AttemptRecord,
        owner: bool,
        seen: usize,
        span: tracing::Span,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, CF> {
        Calling { #[pin] future: F },
        Classifying { #[pin] future: CF },
        Waiting { #[pin] sleep: tokio::time::Sleep },
        Readying,
        Done,
    }
}

impl<S, ReqB, ResB, C> RetryFuture<S, ReqB, ResB, C>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: Clone,
    C: Classify<ResB>,
{
    /// Starts a call: attaches the attempt record, keeps a copy of the request for re-sends,
    /// and sends the first attempt through `ready` — the service the caller polled ready (a
    /// clone takes its place in the layer).
    pub(crate) fn start(
        service: &mut S,
        request: Request<ReqB>,
        classify: C,
        config: RetryConfig,
        layer: &'static str,
    ) -> Self {
        let clone = service.clone();
        let ready = std::mem::replace(service, clone);
        Self::start_ready(ready, request, classify, config, layer)
    }
}

impl<S, ReqB, ResB, C> RetryFuture<S, ReqB, ResB, C>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ReqB: Clone,
    C: Classify<ResB>,
{
    /// [`start`](Self::start) with the service already taken from the layer: `ready` must be
    /// the one that was polled ready.
    pub(crate) fn start_ready(
        mut ready: S,
        mut request: Request<ReqB>,
        classify: C,
        config: RetryConfig,
        layer: &'static str,
    ) -> Self {
        let (record, owner) = AttemptRecord::attach(&mut request);
        let span = tracing::debug_span!(
            "agentcore_tower::call",
            layer,
            method = %request.method(),
            uri = %UriWithoutQuery(request.uri()),
        );
        let template = (config.backoff.max_attempts() > 1).then(|| clone_request(&request));
        let seen = record.len();
        let future = {
            let _entered = span.enter();
            ready.call(request)
        };
        Self {
            state: State::Calling { future },
            service: ready,
            template,
            classify,
            config,
            layer,
            attempt: 1,
            waited: Duration::ZERO,
            record,
            owner,
            seen,
            span,
        }
    }
}

/// What to do after a decision.
enum Next {
    Deliver,
    Wait(Duration),
}

impl<S, ReqB, ResB, C> Future for RetryFuture<S, ReqB, ResB, C>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Clone,
    C: Classify<ResB>,
{
    type Output = Result<Response<C::Body>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.enter();
        loop {
            match this.state.as_mut().project() {
                StateProj::Calling { future } => {
                    let result = ready!(future.poll(cx)).map_err(Error::from_service);
                    this.record.note_outcome(*this.seen, || match &result {
                        Ok(response) => Outcome::of_response(response.status(), response.headers()),
                        Err(error) => Outcome::Failure(error.failure_kind()),
                    });
                    let future = this.classify.classify(result);
                    this.state.set(State::Classifying { future });
                }
                StateProj::Classifying { future } => {
                    let Classified { result, action } = ready!(future.poll(cx));
                    let next = decide(
                        action,
                        this.template.as_ref(),
                        this.config,
                        this.layer,
                        *this.attempt,
                        *this.waited,
                        this.record,
                    );
                    match next {
                        Next::Wait(wait) => {
                            // Release the refused answer now: its body is not read further,
                            // and a pooled connection is not held while we wait.
                            drop(result);
                            *this.waited += wait;
                            this.state.set(State::Waiting {
                                sleep: tokio::time::sleep(wait),
                            });
                        }
                        Next::Deliver => {
                            this.state.set(State::Done);
                            if *this.owner {
                                this.record.deliver_if_undecided(this.layer);
                                if let Some(hook) = &this.config.on_record {
                                    (hook.0)(this.record);
                                }
                            }
                            return Poll::Ready(match result {
                                Ok(mut response) => {
                                    if *this.owner {
                                        response.extensions_mut().insert(this.record.clone());
                                    }
                                    Ok(response)
                                }
                                Err(error) => Err(error.with_record(this.record)),
                            });
                        }
                    }
                }
                StateProj::Waiting { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Readying);
                }
                StateProj::Readying => {
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(
                            Error::from_service(error).with_record(this.record)
                        ));
                    }
                    let Some(template) = this.template.as_ref() else {
                        unreachable!(
                            "a re-send is only scheduled when a copy of the request was kept"
                        )
                    };
                    *this.attempt += 1;
                    *this.seen = this.record.len();
                    let future = this.service.call(clone_request(template));
                    this.state.set(State::Calling { future });
                }
                StateProj::Done => panic!("RetryFuture polled after it completed"),
            }
        }
    }
}

/// The loop's decision after a layer's: deliver, or wait and send again. Records it.
fn decide<ReqB>(
    action: RetryAction,
    template: Option<&Request<ReqB>>,
    config: &RetryConfig,
    layer: &'static str,
    attempt: u32,
    waited: Duration,
    record: &AttemptRecord,
) -> Next {
    let deliver = |reason: DeliveryReason, permission| {
        record.decide(Decision::new(layer, Verdict::Delivered(reason), permission));
        Next::Deliver
    };
    let reason = match action {
        RetryAction::NoOpinion => return Next::Deliver,
        RetryAction::Forbidden(reason) => {
            return deliver(DeliveryReason::Forbidden { cause: "", reason }, None);
        }
        RetryAction::Retry(reason) => reason,
    };
    let cause = reason.cause;
    let max_attempts = config.backoff.max_attempts();
    let Some(template) = template.filter(|_| attempt < max_attempts) else {
        return deliver(
            DeliveryReason::AttemptsExhausted {
                cause,
                max_attempts,
            },
            None,
        );
    };
    let permission = match SharedReplayRule::verdict_for(template.extensions(), &reason.failure) {
        RuleVerdict::Permit(permission) => permission,
        RuleVerdict::Forbid(why) => {
            return deliver(DeliveryReason::Forbidden { cause, reason: why }, None);
        }
    };
    // Waits are whole milliseconds, the resolution of tokio's timer: what is recorded is what
    // is waited.
    let wait = round_up_to_millis(
        reason
            .retry_after
            .unwrap_or_else(|| config.backoff.delay(attempt)),
    );
    let remaining = config.backoff.max_total_wait().saturating_sub(waited);
    if wait > remaining {
        return deliver(
            DeliveryReason::WaitCeiling {
                cause,
                wait,
                remaining,
            },
            Some(permission),
        );
    }
    record.decide(Decision::new(
        layer,
        Verdict::SentAgain {
            cause,
            wait,
            retry_after: reason.retry_after,
        },
        Some(permission),
    ));
    tracing::debug!(
        attempt = attempt + 1,
        max_attempts,
        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        retry_after_s = reason.retry_after.map(|d| d.as_secs()),
        cause,
        uri = %UriWithoutQuery(template.uri()),
        "sending again"
    );
    if let Some(hook) = &config.on_retry {
        (hook.0)(&RetryInfo {
            layer,
            attempt: attempt + 1,
            max_attempts,
            wait,
            retry_after: reason.retry_after,
            cause,
        });
    }
    Next::Wait(wait)
}

fn round_up_to_millis(d: Duration) -> Duration {
    let whole = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if whole < d {
        whole.saturating_add(Duration::from_millis(1))
    } else {
        whole
    }
}
