//! The one gate every re-send of the crate passes: the call's attempts and waits, kind by kind
//! ([`allowance`](crate::allowance)), under a layer's cap and ceiling and the call's own limits
//! ([`CallBudget`](crate::CallBudget)), and the shared retry budget's tokens.

use std::time::Duration;

use tokio::time::Instant;

use super::CallContext;
use crate::allowance::Kind;
use crate::record::Verdict;
use crate::rule::{Failure, Permission};

impl CallContext {
    /// The attempts this call has recorded so far, over every layer.
    pub(crate) fn attempts(&self) -> u32 {
        u32::try_from(self.0.record.len().saturating_sub(self.0.first)).unwrap_or(u32::MAX)
    }

    /// A layer's cap on the call's attempts, bounded by the call's own.
    pub(crate) fn max_attempts(&self, layer_cap: u32) -> u32 {
        self.0.budget.max_attempts.min(layer_cap)
    }

    /// Whether a layer whose cap is `layer_cap` may send the call once more after `failure`;
    /// the cap reached when not.
    ///
    /// The layer's cap counts the attempts of the failure's kind ([`allowance`](crate::allowance)):
    /// the first one and the re-sends after failures of that kind — a cold start's dozens of
    /// session-busy refusals leave the throttle's allowance and a tool's re-sends after a
    /// dropped connection whole. The call's [`CallBudget`](crate::CallBudget) caps every attempt, whatever the
    /// failure.
    fn may_attempt_again(&self, failure: &Failure, layer_cap: u32) -> Result<(), u32> {
        let call = self.0.budget.max_attempts;
        if self.attempts() >= call {
            return Err(call);
        }
        if self.lock().spent.attempts(Kind::of(failure)) >= layer_cap {
            return Err(self.max_attempts(layer_cap));
        }
        Ok(())
    }

    /// How often `layer` has re-sent this call (its backoff grows with it).
    pub(crate) fn resends(&self, layer: &'static str) -> u32 {
        self.lock()
            .resends
            .iter()
            .find(|(l, _)| *l == layer)
            .map_or(0, |(_, n)| *n)
    }

    /// Takes `wait` out of what the call may still wait before a re-send after `failure` —
    /// under `layer_ceiling` (the layer's own, for the failure's kind) and the call's
    /// [`CallBudget`](crate::CallBudget) (its waits in all, its ceiling in time from its first attempt, its
    /// deadline) — and counts a re-send by `layer`. When it does not fit, nothing is taken and
    /// the time left is returned.
    fn reserve_wait(
        &self,
        layer: &'static str,
        layer_ceiling: Duration,
        wait: Duration,
        failure: &Failure,
    ) -> Result<(), Duration> {
        let kind = Kind::of(failure);
        let mut state = self.lock();
        let budget = &self.0.budget;
        let mut remaining = layer_ceiling.saturating_sub(state.spent.waited(kind));
        if let Some(call) = budget.max_total_wait {
            remaining = remaining.min(call.saturating_sub(state.spent.total_waited()));
        }
        let ends = [
            budget.deadline,
            budget
                .max_duration
                .and_then(|limit| self.0.started.checked_add(limit)),
        ];
        if let Some(end) = ends.into_iter().flatten().min() {
            let now = Instant::now();
            if now >= end {
                // Past the call's end, not even a re-send without a wait.
                return Err(Duration::ZERO);
            }
            remaining = remaining.min(end - now);
        }
        if wait > remaining {
            return Err(remaining);
        }
        state.spent.spend(kind, wait);
        match state.resends.iter_mut().find(|(l, _)| *l == layer) {
            Some((_, n)) => *n += 1,
            None => state.resends.push((layer, 1)),
        }
        Ok(())
    }

    /// The call's rule and budgets on a re-send by `layer` after `failure` (`cause` for the
    /// record), `wait` from now, under the layer's cap and ceiling: the permission — the re-send
    /// counted, its cost and wait taken — or the verdict that delivers the answer instead, with
    /// the permission when the rule had granted one. The one gate every re-send of the crate
    /// passes.
    pub(crate) fn grant(
        &self,
        layer: &'static str,
        failure: &Failure,
        cause: &'static str,
        (layer_cap, layer_ceiling): (u32, Duration),
        wait: Duration,
    ) -> Result<Permission, (Verdict, Option<Permission>)> {
        if let Err(max_attempts) = self.may_attempt_again(failure, layer_cap) {
            return Err((
                Verdict::AttemptsExhausted {
                    cause,
                    max_attempts,
                },
                None,
            ));
        }
        let permission = self
            .permission(failure)
            .map_err(|reason| (Verdict::Forbidden { cause, reason }, None))?;
        // The budget shared by the calls of the stack, before the wait is taken.
        if let Err(left) = self.withdraw(failure) {
            let cost = self.cost(failure);
            return Err((
                Verdict::BudgetExhausted { cause, cost, left },
                Some(permission),
            ));
        }
        if let Err(remaining) = self.reserve_wait(layer, layer_ceiling, wait, failure) {
            self.refund(failure);
            return Err((
                Verdict::WaitCeiling {
                    cause,
                    wait,
                    remaining,
                },
                Some(permission),
            ));
        }
        self.count_wait(wait);
        Ok(permission)
    }

    /// Takes the cost of a re-send after `failure` out of the shared budget; the tokens left
    /// when it is not there. Without a budget, always granted.
    fn withdraw(&self, failure: &Failure) -> Result<(), u32> {
        match &self.0.retry_budget {
            Some(budget) => budget.withdraw(failure),
            None => Ok(()),
        }
    }

    /// Counts a wait before a re-send in the shared budget's counters.
    fn count_wait(&self, wait: Duration) {
        if let Some(budget) = &self.0.retry_budget {
            budget.waited(wait);
        }
    }

    /// What a re-send after `failure` costs.
    fn cost(&self, failure: &Failure) -> u32 {
        self.0.retry_budget.as_ref().map_or(0, |b| b.cost(failure))
    }

    /// Gives back what [`withdraw`](Self::withdraw) took, for a re-send that did not happen.
    pub(crate) fn refund(&self, failure: &Failure) {
        if let Some(budget) = &self.0.retry_budget {
            budget.refund(failure);
        }
    }
}
