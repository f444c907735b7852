//! The one retry layer of this crate, generic over what it re-sends: [`RetryLayer<P>`], its
//! service [`Retry<S, P>`] and their [`ResponseFuture`]. The three retry layers are its
//! policies: [`ThrottleRetryLayer`](crate::ThrottleRetryLayer) is `RetryLayer<Throttled>`,
//! [`SessionBusyRetryLayer`](crate::SessionBusyRetryLayer) is `RetryLayer<SessionBusy>`,
//! [`ReplayGuardLayer`](crate::ReplayGuardLayer) is `RetryLayer<ReplayDeclarations>` — as tower's
//! `RetryLayer<P>` is generic over its `Policy`.
//!
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::{ThrottleRetryLayer, retry::RetryLayer, throttle::Throttled};
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The alias and the generic name are one type.
//! let layer: RetryLayer<Throttled> = ThrottleRetryLayer::new().max_attempts(4);
//! let client = ServiceBuilder::new().layer(layer).service(service_fn(|_: Request<Full<Bytes>>| async {
//!     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
//! }));
//! let response = client.oneshot(Request::new(Full::new(Bytes::new()))).await.unwrap();
//! assert_eq!(response.status(), 200);
//! # }
//! ```
//!
//! A policy decides only what it makes of one attempt's result. The loop does the rest, the
//! same way for every layer:
//!
//! 1. Send the request through the service that was polled ready (tower's rule: a clone of a
//!    ready service is not ready; the ready one is taken, a clone left in its place). The
//!    attempt is recorded as sent, with no answer yet, as it is handed down.
//! 2. Hand the result to the policy. No opinion: deliver it.
//! 3. A reason to send again: stop if the call has made as many attempts of the failure's kind
//!    as this layer's cap allows (its allowance for that kind: the first attempt and the
//!    re-sends after failures of the kind, counted over every layer, so stacked layers never
//!    multiply their caps and no kind eats another's), or as many attempts in all as the
//!    call's [`CallBudget`](crate::CallBudget) allows; ask the call's replay rule (refusing
//!    always wins); stop if the wait — `Retry-After` when the server sent a valid one,
//!    otherwise this layer's [`Backoff`] — does not fit in what the call may still wait (this
//!    layer's ceiling minus the waits of that kind so far, the call's ceiling in time from its
//!    first attempt, the app's limits and deadline). The last answer is then delivered as it
//!    came.
//! 4. Otherwise record the decision, release the refused answer (its body is dropped, so no
//!    keep-alive connection stays pinned by it), wait, poll the service ready again, and send a
//!    clone of the request this layer received (method, URI, version, headers, extensions,
//!    body).
//!
//! Dropping the response future cancels whatever is under way: the wait, or the attempt in
//! flight. The call's record keeps the evidence: an attempt in flight stays "sent, no answer
//! yet", followed by [`Verdict::CallDropped`], and the `on_record`
//! hooks are called.
//!
//! Request bodies are cloned for every re-send, so the layers require `ReqBody: Clone` (and an
//! `http_body::Body<Data = Bytes>`, which the first of them reads at once when it is in memory,
//! to name the call's span): a body that cannot be cloned cannot be retried, and that is a
//! compile-time fact rather than a half-sent stream at run time. MCP requests are small JSON
//! documents: send them as `http_body_util::Full<Bytes>` or `String`.

pub(crate) mod backoff;
pub(crate) mod retry_after;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::body::{InnerReadAhead, OwnReadAhead, ReadAhead};
use crate::budget::RetryBudget;
use crate::context::{CallContext, Head, KeptExtensions, OnRecord, Ownership};
use crate::error::{BoxError, Error};
use crate::peek::{DEFAULT_PEEK_LIMIT, PeekResult, peek_result};
use crate::record::{Decision, Handed, Verdict};
use crate::telemetry::{self, TraceContext};
use crate::uri::Shown;
pub use backoff::Backoff;
pub use retry_after::{parse_retry_after, retry_after, retry_after_at};
use sealed::{Decide, Judge, RetryAction};

/// What a policy's decision is made of. Sealed: the crate's three policies implement it.
pub(crate) mod sealed {
    use std::future::Future;
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, Response};

    use crate::body::PeekedBody;
    use crate::context::CallContext;
    use crate::contract::Classified;
    use crate::error::Error;
    use crate::rule::Failure;

    /// A policy over requests with bodies `ReqB` and responses with bodies `ResB`.
    pub trait Decide<ReqB, ResB: http_body::Body>: Clone {
        /// The body of the responses the layer hands up.
        type Body;
        /// What decides about each attempt of one call.
        type Judge: Judge<ResB, Body = Self::Body>;
        /// Looks at a call before its first attempt (the guard reads the body).
        type Prepare: Future<Output = Self::Judge>;
        /// Starts a call.
        fn prepare(&self, request: &Request<ReqB>, context: &CallContext) -> Self::Prepare;
    }

    /// A policy that reads nothing of a request before its first attempt: its judge is ready
    /// at once, and answers go up as the loop read them ahead. (The call's span is still named
    /// from an in-memory body, when the layer is the call's first.)
    pub trait JudgeAtOnce: Clone {
        /// What decides about each attempt of one call.
        type CallJudge;
        /// The judge of one call.
        fn for_call(&self, context: &CallContext) -> Self::CallJudge;
    }

    impl<P, ReqB, ResB> Decide<ReqB, ResB> for P
    where
        P: JudgeAtOnce,
        P::CallJudge: Judge<ResB, Body = PeekedBody<ResB>>,
        ReqB: http_body::Body<Data = Bytes> + Clone,
        ResB: http_body::Body<Data = Bytes> + Unpin,
    {
        type Body = PeekedBody<ResB>;
        type Judge = P::CallJudge;
        type Prepare = std::future::Ready<P::CallJudge>;

        fn prepare(&self, request: &Request<ReqB>, context: &CallContext) -> Self::Prepare {
            // Names the call's span from an in-memory body, when this layer is the call's first.
            context.describe_from(request.body());
            std::future::ready(self.for_call(context))
        }
    }

    /// A decision over one attempt's result, once the loop has read the platform error it
    /// carries, if any (the answer's head, or its bounded read-ahead: see `peek`).
    pub trait Judge<B: http_body::Body> {
        /// The body of the responses it hands back.
        type Body;
        /// What it makes of the result.
        fn judge(
            &self,
            answer: Result<&Response<PeekedBody<B>>, &Error>,
            platform: Option<Classified>,
        ) -> RetryAction;
        /// The response as the layer hands it up.
        fn wrap(&self, response: Response<PeekedBody<B>>) -> Response<Self::Body>;
    }

    /// What a decision makes of one attempt's result.
    pub enum RetryAction {
        /// Nothing to say: deliver the result as it is.
        NoOpinion,
        /// Worth sending again, for this reason — if the call's rule and budget allow.
        Retry(RetryReason),
    }

    /// Why a layer would send a request again.
    pub struct RetryReason {
        /// The failure, as the replay rule sees it.
        pub failure: Failure,
        /// A short description for the record and logs (e.g. `"HTTP 429"`).
        pub cause: &'static str,
        /// The wait the server asked for, when it did (a valid `Retry-After`).
        pub retry_after: Option<Duration>,
    }
}

/// What a [`RetryLayer`] re-sends: one of the crate's three policies —
/// [`Throttled`](crate::throttle::Throttled), [`SessionBusy`](crate::session_busy::SessionBusy),
/// [`ReplayDeclarations`](crate::replay::ReplayDeclarations). Sealed: it cannot be implemented outside this crate.
pub trait RetryPolicy<ReqB, ResB: Body>: Decide<ReqB, ResB> {}

impl<P: Decide<ReqB, ResB>, ReqB, ResB: Body> RetryPolicy<ReqB, ResB> for P {}

/// What an `on_retry` hook is told before a re-send.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryInfo {
    /// The layer re-sending (`"throttle"`, `"session_busy"`, `"replay_guard"`).
    pub layer: &'static str,
    /// The number of the attempt about to start in the call (2 for the first re-send),
    /// counted over every layer.
    pub attempt: u32,
    /// This layer's cap on the attempts of the failure's kind (bounded by the call's
    /// [`CallBudget`](crate::CallBudget)). Only the first attempt and the re-sends after
    /// failures of that kind count against it, so `attempt` may pass it (see
    /// [`RetryLayer::max_attempts`]).
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
struct OnRetry(Arc<dyn Fn(&RetryInfo) + Send + Sync>);

impl fmt::Debug for OnRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRetry(..)")
    }
}

/// A retry layer's settings: its name, its schedule, its read-ahead and its hooks.
#[derive(Clone, Debug)]
struct RetryConfig {
    layer: &'static str,
    backoff: Backoff,
    peek_limit: usize,
    budget: Option<RetryBudget>,
    // The budget is the layer's default one, not one the app set (or took away).
    default_budget: bool,
    on_retry: Option<OnRetry>,
    on_record: Option<OnRecord>,
    trace_context: Option<TraceContext>,
    #[cfg(feature = "opentelemetry")]
    metrics: Option<telemetry::Metrics>,
}

/// Re-sends what its policy `P` says is worth sending again, within the call's budget and rule.
/// Use it by its policy's name: [`ThrottleRetryLayer`](crate::ThrottleRetryLayer),
/// [`SessionBusyRetryLayer`](crate::SessionBusyRetryLayer),
/// [`ReplayGuardLayer`](crate::ReplayGuardLayer). See the [module docs](self).
///
/// The second parameter says where the layer holds the answer it reads ahead: see
/// [`over_retry_layer`](Self::over_retry_layer).
#[derive(Clone, Debug)]
pub struct RetryLayer<P, R = OwnReadAhead> {
    policy: P,
    config: RetryConfig,
    read_ahead: PhantomData<fn() -> R>,
}

impl<P> RetryLayer<P> {
    /// A layer named `layer` (in records and logs) with `policy` and `backoff`.
    pub(crate) fn with_policy(layer: &'static str, policy: P, backoff: Backoff) -> Self {
        Self {
            policy,
            config: RetryConfig {
                layer,
                backoff,
                peek_limit: DEFAULT_PEEK_LIMIT,
                budget: Some(RetryBudget::new()),
                default_budget: true,
                on_retry: None,
                on_record: None,
                trace_context: None,
                #[cfg(feature = "opentelemetry")]
                metrics: None,
            },
            read_ahead: PhantomData,
        }
    }

    /// For a layer stacked right over another retry layer of this crate (the guard over
    /// throttling, as in [`RecommendedLayers`](crate::RecommendedLayers)): the answer stays
    /// in the [`PeekedBody`](crate::body::PeekedBody) the layer under it read it ahead into,
    /// so the stack's body type nests one read-ahead wrapper, not one per retry layer. The
    /// answer is read ahead once either way. Over any other service, the layer does not
    /// build (its answers are not in a `PeekedBody`).
    ///
    /// ```
    /// use agentcore_tower::body::{ObservedBody, PeekedBody};
    /// use agentcore_tower::{ReplayGuardLayer, ThrottleRetryLayer};
    /// use http_body_util::Full;
    /// use tower::{Service, ServiceBuilder, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stack = ServiceBuilder::new()
    ///     .layer(ReplayGuardLayer::new().over_retry_layer())
    ///     .layer(ThrottleRetryLayer::new())
    ///     .service(service_fn(|_: http::Request<Full<bytes::Bytes>>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::new())))
    ///     }));
    /// let response: http::Response<ObservedBody<PeekedBody<Full<bytes::Bytes>>>> =
    ///     stack.call(http::Request::new(Full::new(bytes::Bytes::new()))).await.unwrap();
    /// # let _ = response;
    /// # }
    /// ```
    pub fn over_retry_layer(self) -> RetryLayer<P, InnerReadAhead> {
        RetryLayer {
            policy: self.policy,
            config: self.config,
            read_ahead: PhantomData,
        }
    }
}

impl<P, R> RetryLayer<P, R> {
    pub(crate) fn policy(&self) -> &P {
        &self.policy
    }

    pub(crate) fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// Sets this layer's allowance of attempts for the kind of failure it re-sends after, the
    /// first attempt included, counted over every layer of the call (`0` is taken as 1). A
    /// layer stacked inside another does not start counting again when the outer one re-sends.
    ///
    /// Each kind of failure has an allowance of its own: session busy, throttling, an expired
    /// MCP session, a refused signature, a request never written, a failure that may have run
    /// (a dropped connection, a 5xx). Only the first attempt and the re-sends after failures of
    /// the kind being decided on count: a cold start's dozen session-busy refusals leave the
    /// throttle's allowance whole, and no refusal eats a tool's re-sends after a drop. The same
    /// holds for [`max_total_wait`](Self::max_total_wait). What counts every attempt and every
    /// wait is the call's [`CallBudget`](crate::CallBudget): its ceiling in time (90 s from the
    /// first attempt by default) and its cap on attempts in all (100).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.config.backoff = self.config.backoff.with_max_attempts(max_attempts);
        self
    }

    /// Sets the ceiling on the time a call may have waited before re-sends after failures of the
    /// kind this layer re-sends, over every layer, when this layer starts a wait. A wait that
    /// would pass it (or the call's ceiling in time) is not started: the last answer is
    /// delivered at once.
    pub fn max_total_wait(mut self, max_total_wait: Duration) -> Self {
        self.config.backoff = self.config.backoff.with_max_total_wait(max_total_wait);
        self
    }

    /// Sets the delay the first re-send's backoff is computed from (before jitter).
    pub fn base_delay(mut self, base: Duration) -> Self {
        self.config.backoff = self.config.backoff.with_base(base);
        self
    }

    /// Sets the cap on one backoff wait (before jitter). A server's `Retry-After` is not
    /// capped by it, only by [`max_total_wait`](Self::max_total_wait).
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.config.backoff = self.config.backoff.with_max_delay(max_delay);
        self
    }

    /// Replaces the whole schedule at once.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Writes the trace headers of `trace` (the app's current trace context) on every attempt
    /// of the calls this layer owns or meets first with a source: see
    /// [`TraceContext`].
    pub fn trace_context(mut self, trace: TraceContext) -> Self {
        self.config.trace_context = Some(trace);
        self
    }

    /// Draws this layer's calls' re-sends from `budget` (shared by its clones, and by every other
    /// layer or stack it is handed to) instead of a budget of its own. A call uses the budget of
    /// the first of the crate's layers it meets. See [`RetryBudget`].
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.config.budget = Some(budget);
        self.config.default_budget = false;
        self
    }

    /// Records the durations of the calls this layer owns (or meets first with metrics) and of
    /// their attempts in `metrics`: see [`Metrics`](telemetry::Metrics).
    #[cfg(feature = "opentelemetry")]
    pub fn metrics(mut self, metrics: telemetry::Metrics) -> Self {
        self.config.metrics = Some(metrics);
        self
    }

    /// `metrics` unless the layer has metrics of its own.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn or_metrics(mut self, metrics: Option<&telemetry::Metrics>) -> Self {
        if self.config.metrics.is_none() {
            self.config.metrics = metrics.cloned();
        }
        self
    }

    /// `trace` unless the layer has a trace context of its own.
    pub(crate) fn or_trace_context(mut self, trace: Option<&TraceContext>) -> Self {
        if self.config.trace_context.is_none() {
            self.config.trace_context = trace.cloned();
        }
        self
    }

    /// `budget` in place of the layer's default one; a budget the app set (or took away) is
    /// kept.
    pub(crate) fn or_retry_budget(mut self, budget: Option<&RetryBudget>) -> Self {
        if self.config.default_budget {
            self.config.budget = budget.cloned();
        }
        self
    }

    /// No retry budget for the calls this layer owns: only the call's caps bound its re-sends.
    pub fn no_retry_budget(mut self) -> Self {
        self.config.budget = None;
        self.config.default_budget = false;
        self
    }

    /// Sets how many bytes of an HTTP 200 `application/json` answer may be read ahead to find
    /// a platform error in its JSON-RPC form (default 4096: such a reply is about 100 bytes). A
    /// larger answer is passed on unread. When several of the crate's layers are stacked, the
    /// innermost reads ahead and the others take its finding: an answer is read ahead once.
    pub fn peek_limit(mut self, bytes: usize) -> Self {
        self.config.peek_limit = bytes;
        self
    }

    /// Calls `hook` before every re-send by this layer, with the attempt about to start, the
    /// cap, the wait and the `Retry-After` if any. It runs inside the call: keep it short.
    pub fn on_retry(mut self, hook: impl Fn(&RetryInfo) + Send + Sync + 'static) -> Self {
        self.config.on_retry = Some(OnRetry(Arc::new(hook)));
        self
    }

    /// Calls `hook` once with the finished attempt record of every call that passes this layer
    /// — when the call ends, or when it is dropped before (a deadline outside the stack): for
    /// MCP clients that never hand the HTTP response to the app, so the record would otherwise
    /// be out of reach. Wherever the layer sits in the stack. It runs inside the call (or the
    /// drop): keep it short, and do not panic in it.
    pub fn on_record(
        mut self,
        hook: impl Fn(&crate::AttemptRecord) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_record = Some(OnRecord(Arc::new(hook)));
        self
    }
}

impl<S, P: Clone, R> Layer<S> for RetryLayer<P, R> {
    type Service = Retry<S, P, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry {
            inner,
            policy: self.policy.clone(),
            config: Arc::new(self.config.clone()),
            read_ahead: PhantomData,
        }
    }
}

/// The service a [`RetryLayer`] builds.
#[derive(Clone, Debug)]
pub struct Retry<S, P, R = OwnReadAhead> {
    inner: S,
    policy: P,
    // Shared by the service's clones and the calls' futures: a clone is a count.
    config: Arc<RetryConfig>,
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
    inner_service_accessors!();
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
        let config = &self.config;
        let (context, ownership) = CallContext::enter(
            &mut request,
            config.layer,
            config.on_record.as_ref(),
            config.budget.as_ref(),
        );
        if let Some(trace) = &config.trace_context {
            context.use_trace_context(trace);
        }
        #[cfg(feature = "opentelemetry")]
        if let Some(metrics) = &config.metrics {
            context.use_metrics(metrics);
        }
        let clone = self.inner.clone();
        let service = std::mem::replace(&mut self.inner, clone);
        // The call's span, opened by the call's owner ([`CallContext::enter`]): entered from
        // the first attempt on, once the method is known (OpenTelemetry names a span when it
        // starts).
        let span = context.span();
        let template = (context.max_attempts(config.backoff.max_attempts()) > 1)
            .then(|| Template::of(&request, &context));
        let prepare = self.policy.prepare(&request, &context);
        ResponseFuture {
            handed: Handed::of(context.record(), &request),
            state: State::Preparing {
                future: prepare,
                first: Some(request),
            },
            service,
            template,
            judge: None,
            config: self.config.clone(),
            context,
            index: 0,
            span,
            attempt: tracing::Span::none(),
            ownership,
            read_ahead: PhantomData,
        }
    }
}

/// What a retry layer re-sends: the request it received — the head shared with the layer above
/// when that one kept the same, its own body (a body cannot be compared), and its extensions
/// (copied, unless they hold nothing but the call's own marks: see
/// [`CallContext::keep_extensions`]).
struct Template<B> {
    head: Arc<Head>,
    body: B,
    extensions: KeptExtensions,
}

impl<B> Template<B> {
    fn uri(&self) -> &http::Uri {
        self.head.uri()
    }
}

impl<B: Clone> Template<B> {
    fn of(request: &Request<B>, context: &CallContext) -> Self {
        Self {
            head: context.head_of(request),
            body: request.body().clone(),
            extensions: context.keep_extensions(request.extensions()),
        }
    }

    /// A copy for a re-send: method, URI, version, headers, extensions and body.
    fn request(&self, context: &CallContext) -> Request<B> {
        self.head.request(
            self.body.clone(),
            context.restore_extensions(&self.extensions),
        )
    }
}

pin_project! {
    /// The response future of a [`Retry`] service: the retry state machine.
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

/// What to do after a decision.
enum Next {
    Deliver,
    Wait(Duration),
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
    type Output = Result<Response<P::Body>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // The spans are entered from the first attempt on, not while preparing: the call's span
        // is not named yet.
        loop {
            match this.state.as_mut().project() {
                StateProj::Preparing { future, first } => {
                    let judge = ready!(future.poll(cx));
                    *this.judge = Some(judge);
                    let Some(mut request) = first.take() else {
                        unreachable!("the first request is sent once")
                    };
                    // The first attempt of this layer is the one a layer above handed down,
                    // when there is one on its way.
                    this.handed.sent();
                    (*this.index, *this.attempt) = this.context.dispatch(&mut request);
                    let _call = this.span.enter();
                    let _attempt = this.attempt.enter();
                    let future = this.service.call(request);
                    this.state.set(State::Calling { future });
                }
                StateProj::Calling { future } => {
                    let entered = (this.span.enter(), this.attempt.enter());
                    let result = ready!(future.poll(cx)).map_err(Error::from_service);
                    drop(entered);
                    this.context.complete(*this.index, &result);
                    let result = result.map(|response| response.map(R::peeked));
                    let future = peek_result(result, this.config.peek_limit);
                    this.state.set(State::Classifying { future });
                }
                StateProj::Classifying { future } => {
                    let entered = (this.span.enter(), this.attempt.enter());
                    let (result, platform) = ready!(future.poll(cx));
                    drop(entered);
                    let _call = this.span.enter();
                    this.context.record().note_platform(*this.index, platform);
                    let Some(judge) = this.judge.as_ref() else {
                        unreachable!("prepared before the first attempt")
                    };
                    let action = judge.judge(result.as_ref(), platform);
                    // The error the answer's body carries, from what was read ahead (never a
                    // second read), for the call's span: only its owner's, when traced.
                    let answer_error = (this.ownership.is_some() && !this.span.is_disabled())
                        .then(|| {
                            result.as_ref().ok().and_then(|r| {
                                let body = r.body();
                                body.is_complete()
                                    .then(|| telemetry::answer_error(&body.held_bytes()))
                                    .flatten()
                            })
                        })
                        .flatten();
                    let result = result.map(|response| judge.wrap(response));
                    match decide(action, this.template.as_ref(), this.config, this.context) {
                        Next::Wait(wait) => {
                            this.context.end_attempts();
                            *this.attempt = tracing::Span::none();
                            // Release the refused answer now: its body is not read further,
                            // and a pooled connection is not held while we wait.
                            drop(result);
                            this.state.set(State::Waiting {
                                sleep: tokio::time::sleep(wait),
                            });
                        }
                        Next::Deliver => {
                            this.state.set(State::Done);
                            let record = this.context.record();
                            let owner = this.ownership.take();
                            let owns = owner.is_some();
                            if let Some(owner) = owner {
                                // A success: a 2xx that carries no platform error.
                                let succeeded = result.as_ref().is_ok_and(|r| {
                                    r.status().is_success() && record.latest_is_clear()
                                });
                                owner.finish_with(succeeded, &result, answer_error);
                            }
                            return Poll::Ready(match result {
                                Ok(mut response) => {
                                    if owns {
                                        response.extensions_mut().insert(record.clone());
                                    }
                                    Ok(response)
                                }
                                Err(error) => Err(error.with_record(record)),
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
                        let record = this.context.record();
                        record.not_sent("the service below failed before it was ready".into());
                        if let Some(owner) = this.ownership.take() {
                            owner.finish(false);
                        }
                        return Poll::Ready(Err(
                            Error::from_service(error).with_record(this.context.record())
                        ));
                    }
                    let Some(template) = this.template.as_ref() else {
                        unreachable!(
                            "a re-send is only scheduled when a copy of the request was kept"
                        )
                    };
                    let mut request = template.request(this.context);
                    (*this.index, *this.attempt) = this.context.dispatch(&mut request);
                    let _call = this.span.enter();
                    let _attempt = this.attempt.enter();
                    let future = this.service.call(request);
                    this.state.set(State::Calling { future });
                }
                StateProj::Done => panic!("ResponseFuture polled after it completed"),
            }
        }
    }
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

/// The loop's decision after a policy's: deliver, or wait and send again. Records it.
fn decide<ReqB>(
    action: RetryAction,
    template: Option<&Template<ReqB>>,
    config: &RetryConfig,
    context: &CallContext,
) -> Next {
    let reason = match action {
        RetryAction::NoOpinion => return Next::Deliver,
        RetryAction::Retry(reason) => reason,
    };
    let (layer, cause) = (config.layer, reason.cause);
    let deliver = |verdict, permission| {
        context.decide(Decision::new(layer, verdict, permission));
        Next::Deliver
    };
    let max_attempts = context.max_attempts(config.backoff.max_attempts());
    let attempts = context.attempts();
    let Some(template) = template else {
        return deliver(
            Verdict::AttemptsExhausted {
                cause,
                max_attempts,
            },
            None,
        );
    };
    // Each layer keeps its own schedule: its backoff grows with its own re-sends of the call.
    // Waits are whole milliseconds, the resolution of tokio's timer: what is recorded is what
    // is waited.
    let wait = round_up_to_millis(
        reason
            .retry_after
            .unwrap_or_else(|| config.backoff.delay(context.resends(layer) + 1)),
    );
    let limits = (
        config.backoff.max_attempts(),
        config.backoff.max_total_wait(),
    );
    let permission = match context.grant(layer, &reason.failure, cause, limits, wait) {
        Ok(permission) => permission,
        Err((verdict, permission)) => return deliver(verdict, permission),
    };
    context.decide(Decision::new(
        layer,
        Verdict::SentAgain {
            cause,
            wait,
            retry_after: reason.retry_after,
        },
        Some(permission),
    ));
    tracing::debug!(
        attempt = attempts + 1,
        max_attempts,
        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        retry_after_s = reason.retry_after.map(|d| d.as_secs()),
        cause,
        uri = %Shown(template.uri()),
        "sending again"
    );
    if let Some(hook) = &config.on_retry {
        (hook.0)(&RetryInfo {
            layer,
            attempt: attempts + 1,
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
