//! A retry layer's settings ([`RetryConfig`]) and the builder methods every [`RetryLayer`] has
//! to set them: its schedule, its budget, its read-ahead, its tracing and its hooks. What each
//! policy adds (the guard's declarations, session busy's `initialization_attempts`) is on its
//! own layer, in its module.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::Request;

use super::{Backoff, RetryLayer};
use crate::budget::RetryBudget;
use crate::context::{CallContext, OnRecord, Ownership};
use crate::peek::DEFAULT_PEEK_LIMIT;
use crate::record::AttemptRecord;
#[cfg(feature = "opentelemetry")]
use crate::telemetry::Metrics;
use crate::telemetry::TraceContext;

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
pub(super) struct OnRetry(Arc<dyn Fn(&RetryInfo) + Send + Sync>);

impl OnRetry {
    /// Tells the hook about the re-send `info` describes.
    pub(super) fn call(&self, info: &RetryInfo) {
        (self.0)(info);
    }
}

impl fmt::Debug for OnRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRetry(..)")
    }
}

/// A retry layer's settings: its name, its schedule, its read-ahead and its hooks.
#[derive(Clone, Debug)]
pub(super) struct RetryConfig {
    /// The layer's name in records and logs.
    pub(super) layer: &'static str,
    /// Its schedule and its caps.
    pub(super) backoff: Backoff,
    /// How many bytes of an answer it may read ahead.
    pub(super) peek_limit: usize,
    /// The budget the calls it owns draw their re-sends from.
    pub(super) budget: Option<RetryBudget>,
    /// The budget is the layer's default one, not one the app set (or took away).
    pub(super) default_budget: bool,
    /// Called before every re-send.
    pub(super) on_retry: Option<OnRetry>,
    /// Called with the record of every call that passes the layer.
    pub(super) on_record: Option<OnRecord>,
    /// The trace context written on every attempt.
    pub(super) trace_context: Option<TraceContext>,
    /// Where the durations of calls and attempts are recorded.
    #[cfg(feature = "opentelemetry")]
    pub(super) metrics: Option<Metrics>,
}

impl RetryConfig {
    /// The settings of a layer named `layer` with the schedule `backoff`, the rest by default.
    pub(super) fn new(layer: &'static str, backoff: Backoff) -> Self {
        Self {
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
        }
    }

    /// Enters a call through this layer (see [`CallContext::enter`]): the call's context, and
    /// its ownership when this is the call's first layer of the crate; the layer's trace
    /// context and metrics in force for it.
    pub(super) fn enter<B>(&self, request: &mut Request<B>) -> (CallContext, Option<Ownership>) {
        let (context, ownership) = CallContext::enter(
            request,
            self.layer,
            self.on_record.as_ref(),
            self.budget.as_ref(),
        );
        if let Some(trace) = &self.trace_context {
            context.use_trace_context(trace);
        }
        #[cfg(feature = "opentelemetry")]
        if let Some(metrics) = &self.metrics {
            context.use_metrics(metrics);
        }
        (context, ownership)
    }
}

impl<P, R> RetryLayer<P, R> {
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
    /// their attempts in `metrics`: see [`Metrics`].
    #[cfg(feature = "opentelemetry")]
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.config.metrics = Some(metrics);
        self
    }

    /// `metrics` unless the layer has metrics of its own.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn or_metrics(mut self, metrics: Option<&Metrics>) -> Self {
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
    pub fn on_record(mut self, hook: impl Fn(&AttemptRecord) + Send + Sync + 'static) -> Self {
        self.config.on_record = Some(OnRecord(Arc::new(hook)));
        self
    }
}
