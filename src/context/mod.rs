//! The call's context: what belongs to one call rather than to a layer, shared by every layer of
//! this crate that the call passes through, in whatever order they are stacked.
//!
//! The first of this crate's layers that sees a call finds no context in the request's
//! extensions, creates one and puts it there; every layer below finds the same one (re-sends are
//! clones of the request, so they carry it too). It holds, for the whole call:
//!
//! * the [`AttemptRecord`] — the app's own when the request carries one — written at dispatch:
//!   an attempt is "sent, no answer yet" from the moment it is handed to the service below;
//! * the **budget**: the call's attempts and waits so far, kind by kind of failure
//!   ([`allowance`](crate::allowance)), and its own limits ([`CallBudget`]: the app's, or the
//!   defaults). A layer re-sends only while the attempts of the kind it decides on are under its
//!   cap, the wait fits under its ceiling for that kind, and the call's limits hold: counted
//!   over every layer, so nesting retry layers never multiplies them, and no kind eats
//!   another's allowance;
//! * the **replay rules** in force: the app's [`SharedReplayRule`], and the rule of each
//!   [`ReplayGuardLayer`](crate::ReplayGuardLayer) the call reaches — so a retry layer stacked
//!   *above* a guard still asks the guard's rule. Every rule must permit a re-send: refusing
//!   always wins;
//! * what the signer keeps stable over the attempts of one call: the runtime session id, a
//!   `StopRuntimeSession` client token;
//! * the call's **span** and its attempts' spans ([`telemetry`](crate::telemetry)): opened
//!   with the context (so by the call's first layer, whatever the order), named from the
//!   request's MCP headers or from the body as the layers read it before the first attempt,
//!   entered by every layer of the crate; the source of the attempts' trace headers and the
//!   call's metrics, when a layer was given them;
//! * who **owns** the call: the layer that created the context (or first met the app's record).
//!   The owner hands the record back in the response's extensions, writes the final decision,
//!   and calls every `on_record` hook of the layers the call went through — also when the call
//!   is dropped before it ends (a deadline outside the stack): then the attempt in flight stays
//!   "sent, no answer yet", followed by [`Verdict::CallDropped`]. A call has one owner, once:
//!   the hooks are called once.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use http::Extensions;
use tokio::time::Instant;

use crate::allowance::Spent;
use crate::budget::{CallBudget, RetryBudget};
use crate::error::Error;
use crate::jsonrpc::ParsedBody;
use crate::record::{AttemptRecord, Decision, Dispatch, Outcome};
use crate::rule::{FailureKind, SharedReplayRule};
use crate::telemetry::{self, AppTraceHeaders, CallMetrics, TraceContext};

mod gate;
mod head;
mod owner;
mod packed;
mod rules;

pub(crate) use head::Head;
use owner::error_kind;
pub(crate) use owner::{Ownership, delivered};
pub use rules::replay_permission;

/// A hook called with the finished record of a call.
#[derive(Clone)]
pub(crate) struct OnRecord(pub(crate) Arc<dyn Fn(&AttemptRecord) + Send + Sync>);

impl fmt::Debug for OnRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRecord(..)")
    }
}

/// The call's context. Cheap to clone: clones are the same context.
#[derive(Clone)]
pub struct CallContext(Arc<Inner>);

struct Inner {
    record: AttemptRecord,
    /// The budget shared with other calls, if any: the request's, or its first layer's.
    retry_budget: Option<RetryBudget>,
    /// How many attempts the record held when the call began (an app may reuse a record).
    first: usize,
    budget: CallBudget,
    /// When the call began: its ceiling in time counts from here.
    started: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The re-sends and waits so far, by kind of failure.
    spent: Spent,
    resends: Vec<(&'static str, u32)>,
    /// The rules in force, each with who put it there (0: the app).
    /// The first held in place (most calls have one).
    rules: smallvec::SmallVec<[(usize, SharedReplayRule); 1]>,
    parsed: Option<ParsedBody>,
    owner: Owner,
    hooks: Vec<OnRecord>,
    runtime_session: Option<Arc<str>>,
    stop_token: Option<Arc<str>>,
    /// The request head the last retry layer kept for its re-sends, for the layers below to
    /// share when they receive it unchanged.
    head: Option<Arc<Head>>,
    /// The call's span ([`telemetry`]), until the owner ends the call; whether its method is
    /// known, and whether the body described it.
    span: CallSpan,
    named: bool,
    /// Whether the headers named the protocol version (else the body's `_meta` may).
    versioned: bool,
    described: bool,
    /// The spans of the attempts still open, by their index in the record (none when tracing
    /// is off: no allocation).
    attempt_spans: Vec<AttemptSpan>,
    /// The URI the call span's server is recorded from, unless the signer names its endpoint
    /// first (recorded once: an exporter keeps every value recorded).
    call_uri: Option<http::Uri>,
    /// Where the attempts' trace headers come from, and which the app set itself on the
    /// call's request.
    trace: Option<TraceContext>,
    app_trace: AppTraceHeaders,
    /// The attempt whose trace headers were written last.
    trace_written: Option<usize>,
    /// Whether the signer named the endpoint the call goes to.
    sent_to: bool,
    /// The trace context written into the body's `params._meta`, read once per call.
    params_meta: Option<Option<telemetry::TraceHeaders>>,
    metrics: CallMetrics,
}

/// An attempt's span, while it is open.
struct AttemptSpan {
    index: usize,
    span: tracing::Span,
    /// The URI its `url.full` and server are recorded from, until they are: the request's,
    /// unless the signer names the endpoint it sends to first.
    uri: Option<http::Uri>,
    /// Whether it shows its answer (the innermost layer's, the first to see it: the layers above
    /// see the same).
    answered: bool,
}

impl AttemptSpan {
    /// Records its URL and server from `uri` (or the request's), once.
    fn locate(&mut self, uri: Option<&http::Uri>) {
        if let Some(own) = self.uri.take() {
            telemetry::attempt_sent_to(&self.span, uri.unwrap_or(&own));
        }
    }
}

impl Drop for AttemptSpan {
    fn drop(&mut self) {
        self.locate(None);
    }
}

/// The call's span: none until the context's creator opens it.
struct CallSpan(tracing::Span);

impl Default for CallSpan {
    fn default() -> Self {
        Self(tracing::Span::none())
    }
}

impl std::ops::Deref for CallSpan {
    type Target = tracing::Span;

    fn deref(&self) -> &tracing::Span {
        &self.0
    }
}

/// A request's extensions as a layer keeps them for a re-send
/// ([`CallContext::keep_extensions`]).
pub(crate) enum KeptExtensions {
    /// The app's own values among them: a copy.
    Copied(Extensions),
    /// Only the call's context, and its record and an attempt's mark where they were there.
    Own {
        record: bool,
        dispatch: Option<Dispatch>,
    },
}

/// Whether a layer owns the call: at most one, once.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Owner {
    #[default]
    None,
    Active,
    Finished,
}

/// Who put the app's rule in force.
const APP: usize = 0;

impl CallContext {
    /// The request's context, creating it when this is the first layer of the crate that sees
    /// the call. Registers `hook` to be called with the finished record. Returns the ownership
    /// of the call when nobody above holds it.
    pub(crate) fn enter<B>(
        request: &mut http::Request<B>,
        layer: &'static str,
        hook: Option<&OnRecord>,
        budget: Option<&RetryBudget>,
    ) -> (CallContext, Option<Ownership>) {
        let context = match request.extensions().get::<CallContext>() {
            Some(context) => context.clone(),
            None => {
                let context = CallContext::new(request.extensions(), budget);
                let (span, named) = telemetry::call_span(request.headers());
                {
                    let mut state = context.lock();
                    if !span.is_disabled() {
                        state.call_uri = Some(request.uri().clone());
                        state.versioned = (request.headers())
                            .contains_key(&crate::contract::MCP_PROTOCOL_VERSION);
                    }
                    state.span = CallSpan(span);
                    state.named = named;
                    state.trace = request.extensions().get::<TraceContext>().cloned();
                    state.app_trace = AppTraceHeaders::of(request.headers());
                }
                let extensions = request.extensions_mut();
                extensions.insert(context.record().clone());
                extensions.insert(context.clone());
                context
            }
        };
        let owns = {
            let mut state = context.lock();
            if let Some(hook) = hook
                && !state.hooks.iter().any(|h| Arc::ptr_eq(&h.0, &hook.0))
            {
                state.hooks.push(hook.clone());
            }
            let owns = state.owner == Owner::None;
            if owns {
                state.owner = Owner::Active;
            }
            owns
        };
        let ownership = owns.then(|| Ownership {
            context: context.clone(),
            layer,
            finished: false,
        });
        (context, ownership)
    }

    fn new(extensions: &Extensions, budget: Option<&RetryBudget>) -> Self {
        let record = extensions
            .get::<AttemptRecord>()
            .cloned()
            .unwrap_or_default();
        Self(Arc::new(Inner {
            first: record.len(),
            record,
            retry_budget: extensions
                .get::<RetryBudget>()
                .cloned()
                .or_else(|| budget.cloned()),
            budget: extensions.get::<CallBudget>().copied().unwrap_or_default(),
            started: Instant::now(),
            state: Mutex::new(State {
                rules: extensions
                    .get::<SharedReplayRule>()
                    .map(|rule| (APP, rule.clone()))
                    .into_iter()
                    .collect(),
                ..State::default()
            }),
        }))
    }

    /// What a layer keeps of a request's `extensions` to re-send it: a copy — or, when they
    /// hold nothing but this call's own marks (this context, its record, an attempt's mark),
    /// which can be compared where an app's values cannot, those marks, put back at the
    /// re-send without a copy of the map. Either way the re-send carries what was received.
    pub(crate) fn keep_extensions(&self, extensions: &Extensions) -> KeptExtensions {
        let this = extensions
            .get::<CallContext>()
            .is_some_and(|context| Arc::ptr_eq(&context.0, &self.0));
        let record = extensions.get::<AttemptRecord>();
        let dispatch = extensions.get::<Dispatch>().copied();
        let own = 1 + usize::from(record.is_some()) + usize::from(dispatch.is_some());
        if this && record.is_none_or(|r| r.is(self.record())) && extensions.len() == own {
            KeptExtensions::Own {
                record: record.is_some(),
                dispatch,
            }
        } else {
            KeptExtensions::Copied(extensions.clone())
        }
    }

    /// The extensions `kept` stands for, for a re-send.
    pub(crate) fn restore_extensions(&self, kept: &KeptExtensions) -> Extensions {
        match kept {
            KeptExtensions::Copied(extensions) => extensions.clone(),
            KeptExtensions::Own { record, dispatch } => {
                let mut extensions = Extensions::new();
                extensions.insert(self.clone());
                if *record {
                    extensions.insert(self.record().clone());
                }
                if let Some(dispatch) = dispatch {
                    extensions.insert(*dispatch);
                }
                extensions
            }
        }
    }

    /// The context a request carries, if one of this crate's layers has seen it.
    pub(crate) fn of(extensions: &Extensions) -> Option<&CallContext> {
        extensions.get::<CallContext>()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The call's record.
    pub(crate) fn record(&self) -> &AttemptRecord {
        &self.0.record
    }

    /// Completes the attempt at `index` of the call's record with what came back for it: the
    /// answer's status and AWS error type, or how the service below failed.
    pub(crate) fn complete<B>(&self, index: usize, result: &Result<http::Response<B>, Error>) {
        self.record().complete(index, || match result {
            Ok(response) => Outcome::of_response(response.status(), response.headers()),
            Err(error) => Outcome::Failure(error.failure_kind()),
        });
        self.answered(
            index,
            match result {
                Ok(response) => Ok((response.status(), response.headers())),
                Err(error) => Err(error.failure_kind()),
            },
        );
    }

    /// Shows what came back for the attempt at `index` on its span and in the metrics (the
    /// record is the caller's).
    pub(crate) fn answered(
        &self,
        index: usize,
        answer: Result<(http::StatusCode, &http::HeaderMap), FailureKind>,
    ) {
        let answer = answer
            .map(|(status, headers)| (status.as_u16(), headers))
            .map_err(error_kind);
        {
            let mut state = self.lock();
            if state.metrics.is_on() {
                state
                    .metrics
                    .attempt_answered(index, answer.map(|(status, _)| status));
            }
        }
        if let Some(span) = self.unanswered_attempt_span(index) {
            telemetry::attempt_answered(&span, answer);
        }
    }

    /// Opens the attempt of a request the signer is about to sign (`parts`): recorded as
    /// handed down — the same attempt as a layer above handed it — its span opened, and its
    /// trace headers written, so they are signed. Returns the attempt's span.
    pub(crate) fn dispatch_head(&self, parts: &mut http::request::Parts) -> (usize, tracing::Span) {
        let (empty, ()) = http::Request::new(()).into_parts();
        let mut request = http::Request::from_parts(std::mem::replace(parts, empty), ());
        let opened = self.dispatch(&mut request);
        *parts = request.into_parts().0;
        opened
    }

    /// The attempt at `index`, opened to be signed, was not sent (no credentials, a closed
    /// gate…): its span says so, and no request duration is recorded for it.
    pub(crate) fn not_sent(&self, index: usize) {
        self.lock().metrics.attempt_dropped(index);
        if let Some(span) = self.unanswered_attempt_span(index) {
            telemetry::attempt_answered(&span, Err("not_sent"));
        }
    }

    /// The signer sends the attempt at `index` to `uri` (the endpoint it maps the request to):
    /// the attempt's `url.full` and server, the call's server, are that endpoint's.
    pub(crate) fn sent_to(&self, index: usize, uri: &http::Uri) {
        let mut state = self.lock();
        if let Some(open) = state.attempt_spans.iter_mut().find(|a| a.index == index) {
            open.locate(Some(uri));
        }
        if !state.sent_to {
            // Once per call: its attempts go to one endpoint.
            state.sent_to = true;
            if let Some(_own) = state.call_uri.take() {
                telemetry::call_sent_to(&state.span, uri);
            }
            state.metrics.sent_to(uri);
        }
    }

    /// Sends `request` as an attempt of the call ([`AttemptRecord::dispatch`]), describing the
    /// call's span from the body as the layers above read it (once, before any layer enters
    /// the span) and opening the attempt's span when it is a new attempt. Returns the attempt's
    /// index and its span.
    pub(crate) fn dispatch<B>(&self, request: &mut http::Request<B>) -> (usize, tracing::Span) {
        let (index, span, trace) = self.open_attempt(request);
        if let Some((trace, app)) = trace {
            // Inside the attempt's span: a context read from it names the attempt as parent.
            let _attempt = span.enter();
            telemetry::inject(&trace, app, request.headers_mut());
        }
        (index, span)
    }

    /// Takes the trace headers of the call's attempts from `trace`, unless the request or a
    /// layer above gave a source already.
    pub(crate) fn use_trace_context(&self, trace: &TraceContext) {
        let mut state = self.lock();
        if state.trace.is_none() {
            state.trace = Some(trace.clone());
        }
    }

    /// The request body `body` with the call's trace context in `params._meta`, when the
    /// call's trace source asks for it ([`TraceContext::params_meta`]): the context read once,
    /// inside the call's span, the same for every attempt. `None`: the body stays as it is.
    pub(crate) fn with_params_meta(&self, body: &[u8]) -> Option<bytes::Bytes> {
        let trace = {
            let state = self.lock();
            let source = state.trace.as_ref().filter(|t| t.is_params_meta())?.clone();
            match &state.params_meta {
                Some(read) => read.clone(),
                None => {
                    let span = state.span.clone();
                    drop(state);
                    let read = span.in_scope(|| source.current());
                    self.lock().params_meta.get_or_insert(read).clone()
                }
            }
        }?;
        telemetry::with_params_meta(body, &trace)
    }

    /// The server the call's requests went to, when metrics are on: the endpoint the signer
    /// sent to, else the request's.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn server(&self) -> Option<(String, i64)> {
        self.lock().metrics.server()
    }

    /// Records the call's and its attempts' durations in `metrics`, unless a layer above does.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn use_metrics(&self, metrics: &telemetry::Metrics) {
        self.lock().metrics.enable(metrics);
    }

    #[allow(clippy::type_complexity)]
    fn open_attempt<B>(
        &self,
        request: &mut http::Request<B>,
    ) -> (
        usize,
        tracing::Span,
        Option<(TraceContext, AppTraceHeaders)>,
    ) {
        let index = self.record().dispatch(request);
        let mut state = self.lock();
        // The trace headers are written once per attempt, by the first layer that hands it
        // down: the layers below it pass the same request on.
        let trace = if state.trace_written == Some(index) {
            None
        } else {
            let trace = state.trace.clone().map(|t| (t, state.app_trace));
            if trace.is_some() {
                state.trace_written = Some(index);
            }
            trace
        };
        state.metrics.attempt_sent(index, request);
        if state.span.is_disabled() {
            return (index, tracing::Span::none(), trace);
        }
        if !state.described {
            state.described = true;
            if let Some(parsed) = &state.parsed {
                telemetry::describe_call(
                    &state.span,
                    (state.named, state.versioned),
                    parsed.body(),
                    Some(parsed.bytes()),
                );
                state.named = true;
            }
        }
        if let Some(open) = state.attempt_spans.iter().find(|a| a.index == index) {
            return (index, open.span.clone(), trace);
        }
        let resends = u32::try_from(index.saturating_sub(self.0.first)).unwrap_or(u32::MAX);
        let span = telemetry::attempt_span(&state.span, request, resends);
        state.attempt_spans.push(AttemptSpan {
            index,
            span: span.clone(),
            uri: Some(request.uri().clone()),
            answered: false,
        });
        (index, span, trace)
    }

    /// Describes the call's span from an in-memory request body, read at once when it can be
    /// ([`telemetry::body_now`]); the parse is kept for the layers below. Only when traced.
    pub(crate) fn describe_from<B>(&self, body: &B)
    where
        B: http_body::Body<Data = bytes::Bytes> + Clone,
    {
        if self.wants_description()
            && let Some(bytes) = telemetry::body_now(body)
        {
            self.describe_bytes(&bytes);
        }
    }

    /// Whether the call's span is traced and not yet described.
    fn wants_description(&self) -> bool {
        let state = self.lock();
        !state.span.is_disabled() && !state.described
    }

    /// Describes the call's span from the whole request body, `bytes` (read by the signer),
    /// unless it was described. The parse is kept for the layers below. Only when traced.
    pub(crate) fn describe_bytes(&self, bytes: &bytes::Bytes) {
        let mut state = self.lock();
        if state.span.is_disabled() || state.described {
            return;
        }
        let parsed = (state.parsed.as_ref())
            .and_then(|kept| kept.of(bytes))
            .unwrap_or_else(|| ParsedBody::lazy(bytes.clone(), false));
        telemetry::describe_call(
            &state.span,
            (state.named, state.versioned),
            parsed.body(),
            Some(bytes),
        );
        state.named = true;
        state.described = true;
        if state.parsed.is_none() {
            state.parsed = Some(parsed);
        }
    }

    /// The call's span (disabled when no subscriber wants it).
    pub(crate) fn span(&self) -> tracing::Span {
        self.lock().span.clone()
    }

    /// The span of the attempt at `index`, while it is open, unless it shows its answer
    /// already; from now on it does (and its URL).
    fn unanswered_attempt_span(&self, index: usize) -> Option<tracing::Span> {
        let mut state = self.lock();
        let open = state.attempt_spans.iter_mut().find(|a| a.index == index)?;
        if open.answered {
            return None;
        }
        open.answered = true;
        open.locate(None);
        Some(open.span.clone())
    }

    /// Records a layer's decision on the latest attempt, and shows it on the attempt's span.
    pub(crate) fn decide(&self, decision: Decision) {
        let latest = {
            let state = self.lock();
            state.attempt_spans.last().map(|a| a.span.clone())
        };
        if let Some(span) = latest {
            telemetry::decision_event(&span, &decision);
        }
        self.record().decide(decision);
    }

    /// Ends the spans of the attempts so far (a re-send is on its way).
    pub(crate) fn end_attempts(&self) {
        let ended = std::mem::take(&mut self.lock().attempt_spans);
        drop(ended);
    }

    /// The reading of the request body a layer kept, if it is of exactly `bytes` (read, or
    /// read when first asked: outside the context's lock).
    pub(crate) fn parsed(&self, bytes: &[u8]) -> Option<ParsedBody> {
        let kept = self.lock().parsed.clone()?;
        kept.of(bytes)
    }

    /// The reading of the request body the first layer that kept one kept, whatever its bytes.
    pub(crate) fn first_parse(&self) -> Option<ParsedBody> {
        self.lock().parsed.clone()
    }

    /// Keeps the reading of the body for the layers below and the attempts after.
    pub(crate) fn set_parsed(&self, parsed: ParsedBody) {
        self.lock().parsed = Some(parsed);
    }

    /// The runtime session id of this call: `choose`n by the first attempt, the same for every
    /// attempt after.
    /// The head of `request`, to keep for a re-send: the one a layer above kept when the
    /// request still has it, else a copy, offered to the layers below.
    pub(crate) fn head_of<B>(&self, request: &http::Request<B>) -> Arc<Head> {
        let mut state = self.lock();
        match &state.head {
            Some(head) if head.is_of(request) => head.clone(),
            _ => {
                let head = Arc::new(Head::of(request));
                state.head = Some(head.clone());
                head
            }
        }
    }

    /// The retry budget the call draws from, if any.
    pub(crate) fn retry_budget(&self) -> Option<&RetryBudget> {
        self.0.retry_budget.as_ref()
    }

    pub(crate) fn runtime_session(&self, choose: impl FnOnce() -> Arc<str>) -> Arc<str> {
        self.lock()
            .runtime_session
            .get_or_insert_with(choose)
            .clone()
    }

    /// The `StopRuntimeSession` client token of this call: one for all its attempts.
    pub(crate) fn stop_token(&self) -> Arc<str> {
        self.lock()
            .stop_token
            .get_or_insert_with(|| uuid::Uuid::new_v4().to_string().into())
            .clone()
    }
}
