//! A call's allowances: what it has spent on re-sends, kind by kind of failure.
//!
//! A refusal means nothing ran, so waiting it out is always safe; what bounds a call is time.
//! Each kind of failure has an allowance of its own: a retry layer's `max_attempts` and
//! `max_total_wait` count the first attempt and the re-sends (and waits) that followed
//! failures of the kind it is deciding on, never another kind's. A cold start's dozen
//! session-busy refusals leave the throttle's attempts whole, the first 429 after them is
//! waited out, and no refusal eats the re-sends a failure that may have run is allowed. What
//! counts every attempt and every wait of the call, whatever its kind, is the call's own
//! limits ([`CallBudget`](crate::CallBudget)): one ceiling in time, a total attempt cap large
//! enough that the allowances meet theirs first, an app's deadline.

use std::time::Duration;

use crate::rule::{Failure, Refusal};

/// A kind of failure with an allowance of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Session busy, in either form (HTTP 200 with -32005, HTTP 409).
    SessionBusy,
    /// Throttling, in either form (HTTP 429, HTTP 200 with -32003).
    Throttled,
    /// The MCP server's 404 for a session it no longer knows.
    SessionExpired,
    /// A runtime whose container did not initialize in time (-32010 / 424 "Runtime
    /// initialization time exceeded"). A kind of its own, not session busy's: each re-send
    /// starts a new microVM, whose own cold start (its busy refusals) is then waited out with
    /// session busy's whole allowance, and a failed start must not eat the waits a cold start
    /// needs. Its cap is the session-busy layer's `initialization_attempts` (2: one re-send).
    InitializationTimedOut,
    /// A refused signature.
    CredentialsRejected,
    /// A request the transport proves was never written.
    NeverDelivered,
    /// A failure after which the request may have run.
    MayHaveRun,
}

/// How many kinds there are.
const KINDS: usize = 7;

impl Kind {
    /// The kind of `failure`.
    pub(crate) const fn of(failure: &Failure) -> Kind {
        match failure {
            Failure::Refused(Refusal::SessionBusy) => Kind::SessionBusy,
            Failure::Refused(Refusal::Throttled) => Kind::Throttled,
            Failure::Refused(Refusal::SessionExpired) => Kind::SessionExpired,
            Failure::Refused(Refusal::InitializationTimedOut) => Kind::InitializationTimedOut,
            Failure::Refused(Refusal::CredentialsRejected) => Kind::CredentialsRejected,
            Failure::NeverDelivered => Kind::NeverDelivered,
            Failure::MayHaveRun(_) => Kind::MayHaveRun,
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// What a call has spent on re-sends: by kind, and in all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    resends: [u32; KINDS],
    waited: [Duration; KINDS],
    total_waited: Duration,
}

impl Spent {
    /// The attempts that count against `kind`'s allowance: the first one, and each re-send
    /// after a failure of that kind.
    pub(crate) fn attempts(&self, kind: Kind) -> u32 {
        self.resends[kind.index()].saturating_add(1)
    }

    /// The waits before re-sends after failures of `kind`, in all.
    pub(crate) fn waited(&self, kind: Kind) -> Duration {
        self.waited[kind.index()]
    }

    /// Every wait of the call, whatever its kind.
    pub(crate) fn total_waited(&self) -> Duration {
        self.total_waited
    }

    /// Counts a re-send after a failure of `kind`, `wait` from now.
    pub(crate) fn spend(&mut self, kind: Kind, wait: Duration) {
        let at = kind.index();
        self.resends[at] = self.resends[at].saturating_add(1);
        self.waited[at] = self.waited[at].saturating_add(wait);
        self.total_waited = self.total_waited.saturating_add(wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{FailureKind, MayHaveRun};

    #[test]
    fn each_kind_counts_its_own_attempts_and_waits_and_the_total_counts_all() {
        let mut spent = Spent::default();
        let busy = Kind::of(&Failure::Refused(Refusal::SessionBusy));
        let throttled = Kind::of(&Failure::Refused(Refusal::Throttled));
        let dropped = Kind::of(&Failure::MayHaveRun(MayHaveRun::Transport(
            FailureKind::ConnectionDropped,
        )));
        for _ in 0..13 {
            spent.spend(busy, Duration::from_millis(900));
        }
        spent.spend(throttled, Duration::from_secs(1));
        assert_eq!(spent.attempts(busy), 14);
        assert_eq!(spent.attempts(throttled), 2);
        assert_eq!(spent.attempts(dropped), 1, "untouched by refusals");
        assert_eq!(spent.waited(busy), Duration::from_millis(11_700));
        assert_eq!(spent.waited(throttled), Duration::from_secs(1));
        assert_eq!(spent.waited(dropped), Duration::ZERO);
        assert_eq!(spent.total_waited(), Duration::from_millis(12_700));
    }

    #[test]
    fn every_failure_has_its_kind() {
        assert_eq!(
            Kind::of(&Failure::Refused(Refusal::SessionExpired)),
            Kind::SessionExpired
        );
        assert_eq!(
            Kind::of(&Failure::Refused(Refusal::CredentialsRejected)),
            Kind::CredentialsRejected
        );
        assert_eq!(Kind::of(&Failure::NeverDelivered), Kind::NeverDelivered);
        assert_eq!(
            Kind::of(&Failure::Refused(Refusal::InitializationTimedOut)),
            Kind::InitializationTimedOut
        );
    }

    #[test]
    fn a_failed_start_leaves_session_busys_allowance_whole() {
        let mut spent = Spent::default();
        let failed = Kind::of(&Failure::Refused(Refusal::InitializationTimedOut));
        let busy = Kind::of(&Failure::Refused(Refusal::SessionBusy));
        spent.spend(failed, Duration::from_millis(100));
        for _ in 0..12 {
            spent.spend(busy, Duration::from_secs(1));
        }
        assert_eq!(spent.attempts(failed), 2);
        assert_eq!(spent.attempts(busy), 13);
        assert_eq!(spent.waited(busy), Duration::from_secs(12));
        assert_eq!(spent.waited(failed), Duration::from_millis(100));
    }
}
