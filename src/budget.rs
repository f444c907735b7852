//! Budgets: what a call may spend on re-sends. Two of them, both over every layer of this crate
//! that the call passes:
//!
//! * [`CallBudget`] — an app's own limits for one call (attempts, waits, a deadline), put in the
//!   request's extensions;
//! * [`RetryBudget`] — one token bucket shared by every call through a stack (or several),
//!   drawn from before any re-send by any layer, so a fleet of clients meeting a throttled
//!   runtime does not re-send in step and double the load it is refused under.
//!
//! # The retry budget
//! Modelled on the AWS SDKs' retry quota (aws-smithy-runtime's `TokenBucket`, standard retry
//! mode): a bucket of **500** tokens; a re-send after throttling costs **5**, after a failure
//! that may have run or was never sent **14**; every call that ends in a success puts **1**
//! back (never past the capacity). When a re-send's cost is not in the bucket, the answer is
//! delivered as it came, recorded as [`Verdict::BudgetExhausted`](crate::record::Verdict).
//!
//! **Session busy costs nothing** by default: a runtime session answers it while it provisions
//! — the normal cold start of every MCP session, short, and not a sign of load — and a budget
//! that failed cold starts under load would be wrong. The call's own caps bound it. Nor does
//! the re-send after an expired MCP session was opened again: it happens once per expiry, the
//! ordinary end of an idle session, and is priced as session busy is.
//!
//! Each retry layer has a budget of its own unless given one; the call uses the budget of the
//! first of the crate's layers it meets (the one that owns it), or the one in the request's
//! extensions. Hand one [`RetryBudget`] to several layers or stacks to share it, or turn it off
//! with [`RetryLayer::no_retry_budget`](crate::retry::RetryLayer::no_retry_budget).
//!
//! ```
//! use agentcore_tower::{RetryBudget, ThrottleRetryLayer, SessionBusyRetryLayer};
//!
//! // One budget for two stacks to the same runtime.
//! let budget = RetryBudget::new().capacity(200);
//! let a = ThrottleRetryLayer::new().retry_budget(budget.clone());
//! let b = SessionBusyRetryLayer::new().retry_budget(budget.clone());
//! # let _ = (a, b);
//! assert_eq!(budget.counters().tokens, 200);
//! ```
//!
//! The budget also counts what went through it ([`RetryBudget::counters`]): attempts, re-sends by
//! cause, budget refusals and time waited — plain numbers to export to whatever metrics system
//! the app uses.

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::rule::{Failure, Refusal};

/// A token bucket shared by the calls of one or more stacks. Cheap to clone: clones share the
/// bucket. See the [module docs](self).
#[derive(Clone)]
pub struct RetryBudget(Arc<Inner>);

struct Inner {
    costs: Costs,
    tokens: Mutex<u32>,
    counts: Counts,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Costs {
    capacity: u32,
    throttled: u32,
    failure: u32,
    session_busy: u32,
    success: u32,
}

#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    attempts: AtomicU64,
    throttled: AtomicU64,
    session_busy: AtomicU64,
    session_expired: AtomicU64,
    failures: AtomicU64,
    refusals: AtomicU64,
    waited_ms: AtomicU64,
}

/// What a [`RetryBudget`] counted, at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetCounters {
    /// The tokens in the bucket now.
    pub tokens: u32,
    /// Calls ended.
    pub calls: u64,
    /// Attempts those calls made.
    pub attempts: u64,
    /// Re-sends after throttling (429, -32003).
    pub resent_throttled: u64,
    /// Re-sends after the session-busy refusal.
    pub resent_session_busy: u64,
    /// Re-sends after an expired MCP session was opened again
    /// ([`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer)).
    pub resent_session_expired: u64,
    /// Re-sends after a failure that may have run or was never sent (and after a refused
    /// signature).
    pub resent_failures: u64,
    /// Re-sends the budget refused.
    pub budget_refusals: u64,
    /// Time waited before re-sends, in all.
    pub waited: Duration,
}

impl RetryBudget {
    /// The AWS SDKs' retry quota: 500 tokens, 5 per re-send after throttling, 14 after a
    /// failure, none after session busy, 1 back per call that succeeds.
    pub fn new() -> Self {
        Self::with(Costs {
            capacity: 500,
            throttled: 5,
            failure: 14,
            session_busy: 0,
            success: 1,
        })
    }

    fn with(costs: Costs) -> Self {
        Self(Arc::new(Inner {
            tokens: Mutex::new(costs.capacity),
            costs,
            counts: Counts::default(),
        }))
    }

    fn rebuilt(&self, change: impl FnOnce(&mut Costs)) -> Self {
        let mut costs = self.0.costs;
        change(&mut costs);
        Self::with(costs)
    }

    /// The bucket's size, and how full it starts.
    pub fn capacity(self, tokens: u32) -> Self {
        self.rebuilt(|c| c.capacity = tokens)
    }

    /// What a re-send after throttling (429, -32003) costs.
    pub fn throttled_cost(self, tokens: u32) -> Self {
        self.rebuilt(|c| c.throttled = tokens)
    }

    /// What a re-send after a failure that may have run, or was never sent, costs.
    pub fn failure_cost(self, tokens: u32) -> Self {
        self.rebuilt(|c| c.failure = tokens)
    }

    /// What a re-send after the session-busy refusal costs, and after an expired MCP session
    /// was opened again (default nothing: see the module docs).
    pub fn session_busy_cost(self, tokens: u32) -> Self {
        self.rebuilt(|c| c.session_busy = tokens)
    }

    /// What a call that ends in a success puts back.
    pub fn success_refill(self, tokens: u32) -> Self {
        self.rebuilt(|c| c.success = tokens)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u32> {
        self.0.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a re-send after `failure` costs.
    pub(crate) fn cost(&self, failure: &Failure) -> u32 {
        let costs = &self.0.costs;
        match failure {
            Failure::Refused(Refusal::Throttled) => costs.throttled,
            Failure::Refused(Refusal::SessionBusy | Refusal::SessionExpired) => costs.session_busy,
            Failure::Refused(_) | Failure::MayHaveRun(_) | Failure::NeverDelivered => costs.failure,
        }
    }

    /// Takes a re-send's cost out of the bucket; the tokens left when it is not there.
    pub(crate) fn withdraw(&self, failure: &Failure) -> Result<(), u32> {
        let cost = self.cost(failure);
        let mut tokens = self.lock();
        if *tokens < cost {
            drop(tokens);
            self.0.counts.refusals.fetch_add(1, Ordering::Relaxed);
            return Err(self.counters().tokens);
        }
        *tokens -= cost;
        drop(tokens);
        self.counter(failure).fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Puts back the cost of a re-send that did not happen after all.
    pub(crate) fn refund(&self, failure: &Failure) {
        let cost = self.cost(failure);
        let mut tokens = self.lock();
        *tokens = tokens.saturating_add(cost).min(self.0.costs.capacity);
        drop(tokens);
        self.counter(failure).fetch_sub(1, Ordering::Relaxed);
    }

    /// The count of re-sends after `failure`.
    fn counter(&self, failure: &Failure) -> &AtomicU64 {
        let counts = &self.0.counts;
        match failure {
            Failure::Refused(Refusal::Throttled) => &counts.throttled,
            Failure::Refused(Refusal::SessionBusy) => &counts.session_busy,
            Failure::Refused(Refusal::SessionExpired) => &counts.session_expired,
            _ => &counts.failures,
        }
    }

    /// Counts a wait before a re-send.
    pub(crate) fn waited(&self, wait: Duration) {
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.0.counts.waited_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// A call ended after `attempts` attempts; a success puts tokens back.
    pub(crate) fn ended(&self, attempts: u32, succeeded: bool) {
        self.0.counts.calls.fetch_add(1, Ordering::Relaxed);
        self.0
            .counts
            .attempts
            .fetch_add(u64::from(attempts), Ordering::Relaxed);
        if succeeded {
            let mut tokens = self.lock();
            *tokens = tokens
                .saturating_add(self.0.costs.success)
                .min(self.0.costs.capacity);
        }
    }

    /// What it counted so far, and the tokens in the bucket now.
    pub fn counters(&self) -> BudgetCounters {
        let c = &self.0.counts;
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        BudgetCounters {
            tokens: *self.lock(),
            calls: load(&c.calls),
            attempts: load(&c.attempts),
            resent_throttled: load(&c.throttled),
            resent_session_busy: load(&c.session_busy),
            resent_session_expired: load(&c.session_expired),
            resent_failures: load(&c.failures),
            budget_refusals: load(&c.refusals),
            waited: Duration::from_millis(load(&c.waited_ms)),
        }
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("costs", &self.0.costs)
            .field("tokens", &*self.lock())
            .finish()
    }
}

/// The limits of one call, over every layer of this crate that re-sends it, whatever the kind
/// of failure: one ceiling in time, a cap on attempts in all, and what an app adds (its waits in
/// all, a deadline). A call whose request carries none has [`CallBudget::new`]'s; put one in
/// the request's extensions to change them. Each retry layer still keeps its own schedule and
/// its allowance for the kind of failure it re-sends (see
/// [`RetryLayer::max_attempts`](crate::retry::RetryLayer::max_attempts)); these bound them all.
///
/// ```
/// use std::time::Duration;
/// use agentcore_tower::CallBudget;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(
///     CallBudget::new()
///         .max_attempts(4)
///         .max_total_wait(Duration::from_secs(3))
///         // The deadline of a `tower::timeout` around the stack: no wait is started that would
///         // end after it, so the call hands back its last answer rather than a timeout.
///         .deadline(tokio::time::Instant::now() + Duration::from_secs(10)),
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallBudget {
    pub(crate) max_attempts: u32,
    pub(crate) max_total_wait: Option<Duration>,
    pub(crate) max_duration: Option<Duration>,
    pub(crate) deadline: Option<Instant>,
}

impl CallBudget {
    /// The call's ceiling in time by default: 90 s from its first attempt. It holds the longest
    /// the default allowances can wait one after another in a bad minute and a half — a
    /// termination and a cold start waited out (session busy's 45 s), then throttling (10 s),
    /// then a re-send after a dropped connection (5 s) — with the attempts' own time besides.
    pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(90);

    /// The call's cap on attempts in all, by default: 100, more than the default allowances add
    /// up to (session busy's 50, throttling's 3, the guard's 3, one renewal of an expired MCP
    /// session), so that a kind's allowance or the ceiling in time stops a call first.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 100;

    /// The defaults: [`DEFAULT_MAX_DURATION`](Self::DEFAULT_MAX_DURATION) from the call's first
    /// attempt, [`DEFAULT_MAX_ATTEMPTS`](Self::DEFAULT_MAX_ATTEMPTS), no cap on the waits in
    /// all beyond the layers', no deadline.
    pub const fn new() -> Self {
        Self {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            max_total_wait: None,
            max_duration: Some(Self::DEFAULT_MAX_DURATION),
            deadline: None,
        }
    }

    /// At most this many attempts in all, the first one included, whatever failed (`0` is taken
    /// as 1).
    pub const fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = if max_attempts == 0 { 1 } else { max_attempts };
        self
    }

    /// At most this much waiting in all, between attempts, whatever failed.
    pub const fn max_total_wait(mut self, max_total_wait: Duration) -> Self {
        self.max_total_wait = Some(max_total_wait);
        self
    }

    /// The call's ceiling in time, counted from its first attempt: no wait is started that
    /// would end after it, and no attempt after it (the last answer is delivered as it came).
    /// `None` lifts it: then only the layers' allowances, [`deadline`](Self::deadline) and the
    /// caps bound the call. Like the deadline, it does not cancel an attempt in flight.
    pub const fn max_duration(mut self, max_duration: Option<Duration>) -> Self {
        self.max_duration = max_duration;
        self
    }

    /// No wait is started that would end after `deadline`. The deadline does not cancel an
    /// attempt in flight: pair it with a `tower::timeout` (or your own) ending at the same time.
    pub const fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }
}

impl Default for CallBudget {
    fn default() -> Self {
        Self::new()
    }
}
