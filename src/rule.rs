//! The replay vocabulary every layer shares: what failed ([`Failure`]), on whose word a re-send
//! goes ahead and what that word assumes ([`Permission`]: [`By`], [`Assumption`]), and the rule
//! that grants or refuses it ([`ReplayRule`], shared as [`SharedReplayRule`]).
//!
//! A rule answers `Ok(permission)` or `Err(why not)`; refusing always wins over any layer's wish
//! to send again. [`ReplayGuardLayer`](crate::ReplayGuardLayer) is the crate's rule; an app can
//! bring its own. Without one, [`Failure::default_permission`] applies: refusals documented as
//! coming before execution are re-sent on the adapter's own policy, a request the transport
//! proves was never written is re-sent on that evidence, and nothing that may have run is.
//!
//! ```
//! use agentcore_tower::rule::{Assumption, By, Failure, Refusal};
//!
//! let permission = Failure::Refused(Refusal::Throttled).default_permission().unwrap();
//! assert_eq!(permission.by, By::Adapter);
//! assert_eq!(permission.assumes, Assumption::RejectedBeforeExecution);
//! assert!(Failure::MayHaveRun(agentcore_tower::rule::MayHaveRun::ServerError(http::StatusCode::BAD_GATEWAY))
//!     .default_permission()
//!     .is_err());
//! ```

use std::fmt;
use std::sync::Arc;

/// A failed attempt, as the replay rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The platform refused the request, by a contract that says it refuses before running it.
    Refused(Refusal),
    /// The request may have run: a connection dropped after it may have been written, a
    /// timeout, a 5xx, a `RuntimeClientError`.
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
    /// The signature was refused (an expired token, a clock off by minutes): the service
    /// authenticates a request before it runs anything.
    CredentialsRejected,
    /// The MCP server answered HTTP 404 for the request's `Mcp-Session-Id`: it no longer knows
    /// the session (MCP Streamable HTTP, session management), so it did not run the request.
    SessionExpired,
    /// AgentCore Runtime's "Runtime initialization time exceeded. Please make sure that
    /// initialization completes in *N*s." (JSON-RPC -32010 in an HTTP 200, or HTTP 424
    /// `RuntimeClientError` with that message): the microVM's container did not become ready
    /// within the platform's initialization limit, so the request never reached it. A re-send
    /// starts a new microVM. Every other -32010 / 424 is [`MayHaveRun::RuntimeClientError`];
    /// see [`contract`](crate::contract#-32010-two-errors-under-one-code) for the evidence.
    InitializationTimedOut,
}

impl Refusal {
    /// What re-sending after this refusal assumes.
    pub const fn assumption(self) -> Assumption {
        match self {
            Refusal::Throttled | Refusal::CredentialsRejected => {
                Assumption::RejectedBeforeExecution
            }
            Refusal::SessionBusy | Refusal::SessionExpired | Refusal::InitializationTimedOut => {
                Assumption::RefusedBeforeExecution
            }
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
    /// AgentCore's `RuntimeClientError` (JSON-RPC -32010 in an HTTP 200, or HTTP 424): the
    /// runtime's code failed, after the tool may have run. Not the one whose message says the
    /// runtime's initialization time was exceeded: that one is
    /// [`Refusal::InitializationTimedOut`].
    RuntimeClientError,
}

impl Failure {
    /// Whether the request may have run: [`Failure::MayHaveRun`]. A refusal and a request
    /// never written ran nothing, on the platform's contract or the transport's evidence; the
    /// re-sends after them do not count against a layer's allowance for failures that may have
    /// run (see [`RetryLayer::max_attempts`](crate::retry::RetryLayer::max_attempts)).
    ///
    /// ```
    /// use agentcore_tower::rule::{Failure, Refusal};
    /// assert!(!Failure::Refused(Refusal::SessionBusy).may_have_run());
    /// assert!(!Failure::NeverDelivered.may_have_run());
    /// ```
    pub const fn may_have_run(&self) -> bool {
        matches!(self, Failure::MayHaveRun(_))
    }

    /// The answer when no rule is on the call: refusals are re-sent by the adapter's own
    /// policy, a never-delivered request on the transport's evidence, and a failure that may
    /// have run is refused.
    pub fn default_permission(&self) -> Result<Permission, String> {
        match self {
            Failure::Refused(refusal) => Ok(Permission::new(By::Adapter, refusal.assumption())),
            Failure::NeverDelivered => Ok(Permission::new(By::Transport, Assumption::NotDelivered)),
            Failure::MayHaveRun(_) => {
                Err("the request may have run and nothing declares it replayable".into())
            }
        }
    }
}

/// How an attempt failed without a response, as far as the error tells (see
/// [`FailureKind::of_error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The transport proves the request was never written (e.g. a pooled connection that
    /// closed before the request was sent on it): the server cannot have seen it.
    NeverSent,
    /// The connection broke (reset, closed early) after the request may have been written.
    ConnectionDropped,
    /// A timeout fired while the request may have been in flight.
    TimedOut,
    /// Any other error: nothing is known about whether the request reached the server.
    Other,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::NeverSent => "never sent",
            FailureKind::ConnectionDropped => "connection dropped",
            FailureKind::TimedOut => "timed out",
            FailureKind::Other => "error",
        })
    }
}

/// On whose word a request was sent again, and what that word assumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Permission {
    /// Who granted it.
    pub by: By,
    /// What it assumes about the attempt that failed.
    pub assumes: Assumption,
}

impl Permission {
    /// A permission granted by `by`, assuming `assumes`.
    pub const fn new(by: By, assumes: Assumption) -> Self {
        Self { by, assumes }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "by {}, assumes {}", self.by, self.assumes)
    }
}

/// Who granted a re-send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum By {
    /// This crate's own policy for a refusal the platform documents (429, session busy).
    Adapter,
    /// The application declared the request replayable (a tool name, a predicate, an override).
    AppDeclaration,
    /// The request is a protocol read (ping, tools/list, …), replayable by default.
    ProtocolRead,
    /// The HTTP method is idempotent (RFC 9110 §9.2.2): the DELETE that ends an MCP session,
    /// carried as `StopRuntimeSession` with one client token for all its attempts.
    IdempotentMethod,
    /// The server's own annotation (`idempotentHint`) declared the tool replayable, and the
    /// app chose to trust it.
    ServerAnnotation,
    /// The transport proved the request was never written.
    Transport,
}

impl fmt::Display for By {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            By::Adapter => "adapter",
            By::AppDeclaration => "app declaration",
            By::ProtocolRead => "protocol read",
            By::IdempotentMethod => "idempotent method",
            By::ServerAnnotation => "server annotation",
            By::Transport => "transport",
        })
    }
}

/// What a re-send assumes about the attempt before it. An assumption with a basis, never
/// evidence: the record keeps every attempt's effect [`Effect::Unknown`](crate::record::Effect).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Assumption {
    /// A 429: the service rejected the request before running it.
    RejectedBeforeExecution,
    /// AgentCore's refusals before the container ran anything (session busy, a runtime that did
    /// not initialize in time) and MCP's 404 for an unknown session: refused before running it.
    RefusedBeforeExecution,
    /// Running the request twice does no more than running it once.
    Idempotent,
    /// The request never reached the server.
    NotDelivered,
}

impl Assumption {
    /// The assumption as a short kebab-case word (`"rejected-before-execution"`, …).
    pub const fn as_str(&self) -> &'static str {
        match self {
            Assumption::RejectedBeforeExecution => "rejected-before-execution",
            Assumption::RefusedBeforeExecution => "refused-before-execution",
            Assumption::Idempotent => "idempotent",
            Assumption::NotDelivered => "not-delivered",
        }
    }
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The replay rule: whether a request that failed may be sent again.
///
/// A rule is made for one call (it travels with it), so it can know that request's method, tool
/// and declarations without being handed the request. `Err` carries why not, for the record.
pub trait ReplayRule: fmt::Debug + Send + Sync + 'static {
    /// Whether the request may be sent again after `failure`: on which permission, or why not.
    fn permission(&self, failure: &Failure) -> Result<Permission, String>;
}

/// A replay rule, shared. Put one in a request's extensions to decide for that call yourself
/// (it wins over a guard's declarations); ask the rule in force for a call with
/// [`replay_permission`](crate::replay::replay_permission).
#[derive(Clone, Debug)]
pub struct SharedReplayRule(Arc<dyn ReplayRule>);

impl SharedReplayRule {
    /// Shares `rule`.
    pub fn new(rule: impl ReplayRule) -> Self {
        Self(Arc::new(rule))
    }

    /// Whether the request may be sent again after `failure`.
    pub fn permission(&self, failure: &Failure) -> Result<Permission, String> {
        self.0.permission(failure)
    }
}
