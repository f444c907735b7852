//! The replay rule: which failed attempt may be sent again.
//!
//! Every retry layer of this crate asks one rule before each re-send. The rule travels in the
//! request's extensions as a [`SharedReplayRule`], so layers that do not know each other (and
//! third-party retry layers) ask the same rule:
//!
//! ```
//! use agentcore_tower::{Failure, Refusal, RuleVerdict, SharedReplayRule};
//! # fn may_resend<B>(request: &http::Request<B>) -> bool {
//! let failure = Failure::Refused(Refusal::Throttled);
//! let verdict = match request.extensions().get::<SharedReplayRule>() {
//!     Some(rule) => rule.permission(&failure),
//!     None => failure.default_verdict(), // no rule on the request: the crate's own default
//! };
//! matches!(verdict, RuleVerdict::Permit(_))
//! # }
//! ```
//!
//! Without a rule on the request, the layers apply [`Failure::default_verdict`]: refusals the
//! platform documents as coming before execution (HTTP 429, AgentCore's session-busy reply) are
//! re-sent on the adapter's own policy; a failure that proves the request was never written
//! may be re-sent; a failure after which the request may have run is never re-sent.

use std::fmt;
use std::sync::Arc;

use crate::record::{Assumption, By, FailureKind, Permission};

/// A failed attempt, as the replay rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The platform refused the request, by a contract that says it refuses before running it.
    Refused(Refusal),
    /// The request may have run: a connection dropped after it may have been written, a
    /// timeout, a 5xx.
    MayHaveRun(MayHaveRun),
    /// The transport proves the request was never written.
    NeverDelivered,
}

/// A documented refusal before execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// HTTP 429: throttled.
    Throttled,
    /// AgentCore Runtime's "session operation in progress" (JSON-RPC -32005 in an HTTP 200, or
    /// HTTP 409 `RetryableConflictException`).
    SessionBusy,
}

impl Refusal {
    /// What re-sending after this refusal assumes.
    pub const fn assumption(self) -> Assumption {
        match self {
            Refusal::Throttled => Assumption::RejectedBeforeExecution,
            Refusal::SessionBusy => Assumption::RefusedBeforeExecution,
        }
    }
}

/// A failure after which the request may have run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MayHaveRun {
    /// The service below failed without a response (see the kind).
    Transport(FailureKind),
    /// A 5xx answer.
    ServerError(http::StatusCode),
}

impl Failure {
    /// The verdict when no rule is on the request: refusals are re-sent by the adapter's own
    /// policy, a never-delivered request on the transport's evidence, and a failure that may
    /// have run is forbidden.
    pub fn default_verdict(&self) -> RuleVerdict {
        match self {
            Failure::Refused(refusal) => {
                RuleVerdict::Permit(Permission::new(By::Adapter, refusal.assumption()))
            }
            Failure::NeverDelivered => {
                RuleVerdict::Permit(Permission::new(By::Transport, Assumption::NotDelivered))
            }
            Failure::MayHaveRun(_) => RuleVerdict::Forbid(
                "the request may have run and nothing declares it replayable".into(),
            ),
        }
    }
}

/// What the replay rule says of a re-send.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleVerdict {
    /// It may go ahead, on this permission.
    Permit(Permission),
    /// It must not: deliver what came back. Forbidding always wins over any layer's wish.
    Forbid(String),
}

/// The replay rule: whether a request that failed may be sent again.
///
/// A rule is asked about one request (the one in whose extensions it travels), so it can
/// know that request's method, tool and declarations without being handed the request.
pub trait ReplayRule: fmt::Debug + Send + Sync + 'static {
    /// Whether the request may be sent again after `failure`.
    fn permission(&self, failure: &Failure) -> RuleVerdict;
}

/// The replay rule as it travels in a request's extensions. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SharedReplayRule(Arc<dyn ReplayRule>);

impl SharedReplayRule {
    /// Shares `rule`.
    pub fn new(rule: impl ReplayRule) -> Self {
        Self(Arc::new(rule))
    }

    /// Whether the request may be sent again after `failure`.
    pub fn permission(&self, failure: &Failure) -> RuleVerdict {
        self.0.permission(failure)
    }

    /// The verdict for a request: its rule's, or [`Failure::default_verdict`] without one.
    pub fn verdict_for(extensions: &http::Extensions, failure: &Failure) -> RuleVerdict {
        match extensions.get::<SharedReplayRule>() {
            Some(rule) => rule.permission(failure),
            None => failure.default_verdict(),
        }
    }
}
