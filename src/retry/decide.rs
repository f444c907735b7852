//! The loop's decision once a policy has judged an attempt ([`decide`]): deliver the answer, or
//! wait and send again — when the call's allowance for the failure's kind, its budget, its
//! replay rule and what it may still wait all allow. The decision is recorded either way.

use std::time::Duration;

use super::config::{RetryConfig, RetryInfo};
use super::sealed::RetryAction;
use super::template::Template;
use crate::context::CallContext;
use crate::record::{Decision, Verdict};
use crate::uri::Shown;

/// What to do after a decision.
pub(super) enum Next {
    /// Hand the answer (or the error) up as it came.
    Deliver,
    /// Wait this long, then send the request again.
    Wait(Duration),
}

/// The loop's decision after a policy's: deliver, or wait and send again. Records it.
pub(super) fn decide<ReqB>(
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
        hook.call(&RetryInfo {
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

/// `d`, rounded up to a whole millisecond.
fn round_up_to_millis(d: Duration) -> Duration {
    let whole = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if whole < d {
        whole.saturating_add(Duration::from_millis(1))
    } else {
        whole
    }
}
