//! The replay rules in force for a call: the app's, and each guard's the call passed. Every one
//! must permit a re-send; refusing always wins.

use http::Extensions;

use super::CallContext;
use crate::rule::{Failure, Permission, SharedReplayRule};

impl CallContext {
    /// Whether the call may be sent again after `failure`: every rule in force must permit it
    /// (refusing always wins); the permission is the first rule's (the app's, else the first
    /// guard's the call met). Without a rule, the default.
    pub(crate) fn permission(&self, failure: &Failure) -> Result<Permission, String> {
        let rules: Vec<SharedReplayRule> = {
            let state = self.lock();
            state.rules.iter().map(|(_, rule)| rule.clone()).collect()
        };
        let mut permission = None;
        for rule in &rules {
            let granted = rule.permission(failure)?;
            permission.get_or_insert(granted);
        }
        permission.map_or_else(|| failure.default_permission(), Ok)
    }

    /// Whether the guard `guard` put its rule in force for the call.
    pub(crate) fn has_rule_of(&self, guard: usize) -> bool {
        self.lock().rules.iter().any(|(by, _)| *by == guard)
    }

    /// Puts the rule of the guard `guard` in force (once), beside those already in force.
    pub(crate) fn add_rule(&self, guard: usize, rule: SharedReplayRule) {
        let mut state = self.lock();
        if !state.rules.iter().any(|(by, _)| *by == guard) {
            state.rules.push((guard, rule));
        }
    }
}

/// Whether the call a request belongs to may be sent again after `failure`: the rules in force
/// for it (the app's [`SharedReplayRule`], and those of the
/// [`ReplayGuardLayer`](crate::ReplayGuardLayer)s the call passed) must all permit it, else
/// [`Failure::default_permission`] decides. For retry layers of your own, stacked anywhere among this
/// crate's.
///
/// ```
/// use agentcore_tower::{rule::{Failure, Refusal}, replay::replay_permission};
/// # fn may_resend<B>(request: &http::Request<B>) -> bool {
/// replay_permission(request.extensions(), &Failure::Refused(Refusal::Throttled)).is_ok()
/// # }
/// ```
pub fn replay_permission(extensions: &Extensions, failure: &Failure) -> Result<Permission, String> {
    match (
        CallContext::of(extensions),
        extensions.get::<SharedReplayRule>(),
    ) {
        (Some(context), _) => context.permission(failure),
        (None, Some(rule)) => rule.permission(failure),
        (None, None) => failure.default_permission(),
    }
}
