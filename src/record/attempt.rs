//! What a record holds: each [`Attempt`], what came back ([`Outcome`]), what each layer
//! decided about it ([`Decision`], [`Verdict`]), and its [`Effect`] — with how each reads in
//! a log line.

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::ErrorType;
use crate::contract::{Classified, Form, PlatformError, REQUIRED_ACCEPT};
use crate::rule::{FailureKind, Permission};

/// One attempt: a request handed to the service below (or stopped before it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub(super) number: u32,
    pub(super) outcome: Outcome,
    pub(super) platform: Option<Classified>,
    /// The first decision held in place (most attempts have one).
    pub(super) decisions: smallvec::SmallVec<[Decision; 1]>,
}

impl Attempt {
    /// Its number in the call, from 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// What came back ([`Outcome::Pending`] while nothing has).
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The error of the platform's table its answer carried, in either form (see
    /// [`contract`](crate::contract)), when one of the crate's retry layers read it.
    pub fn platform_error(&self) -> Option<&Classified> {
        self.platform.as_ref()
    }

    /// What each layer that had an opinion decided about it, innermost first.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// Whether it was sent again by some layer.
    pub fn was_sent_again(&self) -> bool {
        self.decisions
            .iter()
            .any(|d| matches!(d.verdict, Verdict::SentAgain { .. }))
    }

    /// What the attempt did on the server: always [`Effect::Unknown`]. A client cannot know;
    /// the [`Permission`] of a re-send says what was assumed instead.
    pub fn effect(&self) -> Effect {
        Effect::Unknown
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}", self.number, self.outcome)?;
        match &self.platform {
            Some(platform) if matches!(platform.form(), Form::JsonRpc(_)) => {
                write!(f, " ({platform})")?;
            }
            // The head form: the status and the error type are shown already — only the 406
            // says nothing by itself, and only the contract gives it a meaning.
            Some(platform) if platform.error() == PlatformError::RequestUnacceptable => {
                write!(
                    f,
                    " ({} (the Accept header must be `{REQUIRED_ACCEPT}`))",
                    platform.error()
                )?;
            }
            _ => {}
        }
        let mut sep = " -> ";
        for decision in &self.decisions {
            write!(f, "{sep}{decision}")?;
            sep = "; ";
        }
        write!(f, "; effect {}", self.effect())
    }
}

/// What came back from one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The attempt was handed to the service below and nothing has come back (yet). A call
    /// that ends this way — a deadline outside the stack, a cancellation — may still be running
    /// on the server.
    Pending,
    /// A response with this status.
    Response {
        /// The HTTP status.
        status: StatusCode,
        /// The service's error type, from `x-amzn-errortype`.
        error_type: ErrorType,
    },
    /// The service below returned an error instead of a response.
    Failure(FailureKind),
    /// The attempt was stopped before anything was sent (e.g. its send gate refused it).
    NotSent(String),
}

impl Outcome {
    /// The outcome for a response head: its status and AWS error type.
    pub fn of_response(status: StatusCode, headers: &HeaderMap) -> Self {
        Outcome::Response {
            status,
            error_type: ErrorType::of(headers),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pending => f.write_str("sent, no answer yet"),
            Outcome::Response {
                status,
                error_type: ErrorType::Absent,
            } => write!(f, "HTTP {}", status.as_u16()),
            Outcome::Response { status, error_type } => {
                write!(f, "HTTP {} {error_type}", status.as_u16())
            }
            Outcome::Failure(kind) => write!(f, "failed: {kind}"),
            Outcome::NotSent(why) => write!(f, "not sent: {why}"),
        }
    }
}

/// What one layer decided about one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    layer: &'static str,
    pub(super) verdict: Verdict,
    permission: Option<Permission>,
}

impl Decision {
    pub(crate) fn new(
        layer: &'static str,
        verdict: Verdict,
        permission: Option<Permission>,
    ) -> Self {
        Self {
            layer,
            verdict,
            permission,
        }
    }

    /// The layer that decided (`"throttle"`, `"session_busy"`, `"replay_guard"`, `"sigv4"`,
    /// `"mcp-endpoint"`).
    pub fn layer(&self) -> &'static str {
        self.layer
    }

    /// What it decided.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// On whose permission and assumption a re-send went ahead (or would have, when the budget
    /// stopped it).
    pub fn permission(&self) -> Option<&Permission> {
        self.permission.as_ref()
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.layer, self.verdict)?;
        if let Some(p) = &self.permission {
            write!(f, " ({p})")?;
        }
        Ok(())
    }
}

/// What a layer decided about an attempt: sent again, or delivered — and when delivered although
/// a layer wanted to send again, what stopped it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The request was sent again after this wait.
    SentAgain {
        /// Why the layer wanted to send again (e.g. `"HTTP 429"`).
        cause: &'static str,
        /// How long it waited first.
        wait: Duration,
        /// What the server asked for in `Retry-After`, when it did and was honoured.
        retry_after: Option<Duration>,
    },
    /// The answer (or error) was handed up as it came: no layer wanted to send it again.
    Delivered,
    /// A layer wanted to send again, but the call had sent its maximum number of attempts.
    AttemptsExhausted {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// The attempt cap that was reached.
        max_attempts: u32,
    },
    /// A layer wanted to send again, but the wait would have passed the call's ceiling (or its
    /// deadline).
    WaitCeiling {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// The wait it would have needed.
        wait: Duration,
        /// What was left of the ceiling.
        remaining: Duration,
    },
    /// A layer wanted to send again, but the retry budget shared with the other calls did not
    /// have the re-send's cost (see [`RetryBudget`](crate::RetryBudget)).
    BudgetExhausted {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// What the re-send would have cost.
        cost: u32,
        /// The tokens left.
        left: u32,
    },
    /// A layer wanted to send again, but the replay rule refused it.
    Forbidden {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// Why the rule refused it.
        reason: String,
    },
    /// The call was dropped before it ended — a deadline or a cancellation outside the
    /// stack — while this attempt was in flight, or while a re-send was waited for.
    CallDropped,
    /// The MCP session had expired, and a new one could not be opened (see
    /// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer)): the answer was handed up.
    NotRenewed {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// Why no new session was opened.
        reason: String,
    },
}

impl Verdict {
    /// Whether the answer was handed up (every verdict but `SentAgain` and `CallDropped`).
    pub fn is_delivered(&self) -> bool {
        !matches!(self, Verdict::SentAgain { .. } | Verdict::CallDropped)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::SentAgain {
                cause,
                wait,
                retry_after,
            } => {
                write!(f, "{cause}, sent again after {}", Millis(*wait))?;
                if let Some(ra) = retry_after {
                    write!(f, " (Retry-After {})", Millis(*ra))?;
                }
                Ok(())
            }
            Verdict::Delivered => f.write_str("delivered"),
            Verdict::AttemptsExhausted {
                cause,
                max_attempts,
            } => write!(
                f,
                "delivered ({cause}, but the cap of {max_attempts} attempts was reached)"
            ),
            Verdict::WaitCeiling {
                cause,
                wait,
                remaining,
            } => write!(
                f,
                "delivered ({cause}, but a wait of {} passes the ceiling ({} left))",
                Millis(*wait),
                Millis(*remaining)
            ),
            Verdict::BudgetExhausted { cause, cost, left } => write!(
                f,
                "delivered ({cause}, but the retry budget is exhausted: {left} tokens left, {cost} needed)"
            ),
            Verdict::Forbidden { cause, reason } => {
                write!(
                    f,
                    "delivered ({cause}, but a re-send is forbidden: {reason})"
                )
            }
            Verdict::CallDropped => {
                f.write_str("call dropped before it ended (a deadline or cancellation outside)")
            }
            Verdict::NotRenewed { cause, reason } => {
                write!(f, "delivered ({cause}, but no new session: {reason})")
            }
        }
    }
}

/// What an attempt did on the server. A client cannot know, so it is always `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Effect {
    /// Nobody on the client side knows whether the attempt ran.
    Unknown,
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown")
    }
}

/// A duration shown to the millisecond: `850ms`, `1s`, `1.25s`.
struct Millis(Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms < 1000 {
            write!(f, "{ms}ms")
        } else if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            let frac = format!("{:03}", ms % 1000);
            write!(f, "{}.{}s", ms / 1000, frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis() {
        let m = |ms| Millis(Duration::from_millis(ms)).to_string();
        assert_eq!(m(0), "0ms");
        assert_eq!(m(850), "850ms");
        assert_eq!(m(1000), "1s");
        assert_eq!(m(1250), "1.25s");
        assert_eq!(m(86_400_000), "86400s");
        assert_eq!(Millis(Duration::from_micros(232_192)).to_string(), "232ms");
    }
}
