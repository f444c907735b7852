//! The runtime session lifecycle: each runtime session's microVM (provisioning, idle timeout,
//! lifetime) and the MCP sessions the MCP server in it issued.
//!
//! Everything is measured on tokio's clock ([`Instant`]), so a test on a paused clock moves it
//! with `tokio::time::advance`. A microVM ends lazily: the request that arrives after its idle
//! timeout or its lifetime finds it terminating (for the termination delay: refused as busy),
//! then gone, and starts a new one.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

/// How long a microVM provisions, may idle and may live (from the config).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) provisioning: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_lifetime: Duration,
    pub(crate) termination_delay: Duration,
}

/// The runtime sessions, their microVMs, and every MCP session a microVM issued.
#[derive(Debug, Default)]
pub(crate) struct Runtime {
    /// The runtime sessions by `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`.
    sessions: HashMap<String, RuntimeSession>,
    /// Every `Mcp-Session-Id` a microVM issued, and which one: to tell an id that was issued
    /// and then lost (its microVM ended, or it was expired) from one never issued here.
    issued: HashMap<String, Issuer>,
    /// The serial number of the last microVM started.
    last_microvm: u64,
}

/// A runtime session: its microVM, if one runs.
#[derive(Debug, Default)]
struct RuntimeSession {
    /// `None` once a fault ended it (the next request starts a new one).
    microvm: Option<MicroVm>,
}

/// One microVM of a runtime session, with the MCP server in it.
#[derive(Debug)]
struct MicroVm {
    serial: u64,
    started: Instant,
    last_request: Instant,
    /// The `Mcp-Session-Id`s its MCP server issued and still knows.
    mcp_sessions: HashSet<String>,
}

impl MicroVm {
    /// When its idle timeout or its lifetime ends it, whichever comes first.
    fn ends(&self, limits: &Limits) -> Instant {
        (self.started + limits.max_lifetime).min(self.last_request + limits.idle_timeout)
    }

    /// Whether it still runs at `now`: neither idle for its idle timeout nor at its lifetime.
    fn alive(&self, now: Instant, limits: &Limits) -> bool {
        now < self.ends(limits)
    }

    /// Whether it is gone at `now`: ended, and done terminating.
    fn terminated(&self, now: Instant, limits: &Limits) -> bool {
        now >= self.ends(limits) + limits.termination_delay
    }
}

/// Which microVM issued an MCP session.
#[derive(Debug)]
struct Issuer {
    runtime_session: String,
    microvm: u64,
}

/// Where a request arrived.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    /// The serial number of the microVM it reached.
    pub(crate) microvm: u64,
    /// Whether that microVM is still provisioning (the platform refuses the request).
    pub(crate) provisioning: bool,
    /// Whether that microVM is terminating after its idle timeout or lifetime (the platform
    /// refuses the request).
    pub(crate) terminating: bool,
    /// How long that microVM has been there.
    pub(crate) age: Duration,
    /// Whether the request started its runtime session.
    pub(crate) new_session: bool,
    /// Whether the request started a microVM (a cold start).
    pub(crate) new_microvm: bool,
}

/// What the MCP server in a microVM makes of a request's `Mcp-Session-Id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum McpCheck {
    /// The request goes on.
    Accepted,
    /// A stateful server's answer to a request without the header: 400.
    Missing,
    /// The server does not know the session: 404.
    NotFound,
}

impl Runtime {
    /// A request for `session` arrives at `now`: its microVM, started if it has none that
    /// still runs, and marked used.
    ///
    /// A microVM whose idle timeout or lifetime has passed is terminating for the termination
    /// delay: the request is refused meanwhile, and is no use of it (its idle clock is not
    /// restarted).
    pub(crate) fn arrive(&mut self, session: &str, now: Instant, limits: &Limits) -> Arrival {
        let new_session = !self.sessions.contains_key(session);
        let entry = self.sessions.entry(session.to_owned()).or_default();
        if let Some(vm) = entry.microvm.as_ref() {
            if vm.terminated(now, limits) {
                entry.microvm = None;
            } else if !vm.alive(now, limits) {
                return Arrival {
                    microvm: vm.serial,
                    provisioning: false,
                    terminating: true,
                    age: now.duration_since(vm.started),
                    new_session,
                    new_microvm: false,
                };
            }
        }
        let mut new_microvm = false;
        let last = &mut self.last_microvm;
        let vm = entry.microvm.get_or_insert_with(|| {
            new_microvm = true;
            *last += 1;
            MicroVm {
                serial: *last,
                started: now,
                last_request: now,
                mcp_sessions: HashSet::new(),
            }
        });
        vm.last_request = now;
        Arrival {
            microvm: vm.serial,
            provisioning: now.duration_since(vm.started) < limits.provisioning,
            terminating: false,
            age: now.duration_since(vm.started),
            new_session,
            new_microvm,
        }
    }

    /// The runtime session whose microVM issued the MCP session `id`, if one did: where the
    /// platform routes a request that names no runtime session but carries that
    /// `Mcp-Session-Id`. Also after that microVM ended: the session's next microVM then
    /// answers the id with the 404 of an unknown session.
    pub(crate) fn issuer_of(&self, id: &str) -> Option<String> {
        self.issued.get(id).map(|i| i.runtime_session.clone())
    }

    /// Microvm `microvm` of `session` did not become ready in time: it is gone at once (no
    /// termination delay), whether it still was. Whether it was.
    pub(crate) fn fail(&mut self, session: &str, microvm: u64) -> bool {
        let Some(entry) = self.sessions.get_mut(session) else {
            return false;
        };
        if entry
            .microvm
            .as_ref()
            .is_some_and(|vm| vm.serial == microvm)
        {
            entry.microvm = None;
            return true;
        }
        false
    }

    /// What microVM `microvm` of `session` makes of a request carrying `mcp_session`.
    ///
    /// A stateful server knows only the sessions it issued (and answers a request without one
    /// 400). Otherwise any id goes, and none, but for an id this emulator issued that its
    /// microVM no longer knows: that one gets the 404 a real server would send.
    pub(crate) fn check(
        &self,
        session: &str,
        microvm: u64,
        mcp_session: Option<&str>,
        stateful: bool,
        now: Instant,
        limits: &Limits,
    ) -> McpCheck {
        let Some(id) = mcp_session else {
            return if stateful {
                McpCheck::Missing
            } else {
                McpCheck::Accepted
            };
        };
        if self
            .microvm(session, microvm)
            .is_some_and(|vm| vm.mcp_sessions.contains(id))
        {
            return McpCheck::Accepted;
        }
        if stateful {
            return McpCheck::NotFound;
        }
        match self.issued.get(id) {
            // Never issued here: a server that does not check takes it.
            None => McpCheck::Accepted,
            // Issued by another runtime session's microVM that still knows it.
            Some(issuer)
                if self
                    .microvm(&issuer.runtime_session, issuer.microvm)
                    .is_some_and(|vm| vm.alive(now, limits) && vm.mcp_sessions.contains(id)) =>
            {
                McpCheck::Accepted
            }
            Some(_) => McpCheck::NotFound,
        }
    }

    /// The MCP server of microVM `microvm` of `session` issues a new MCP session: its id.
    pub(crate) fn issue(&mut self, session: &str, microvm: u64) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        if let Some(vm) = self.microvm_mut(session, microvm) {
            vm.mcp_sessions.insert(id.clone());
        }
        self.issued.insert(
            id.clone(),
            Issuer {
                runtime_session: session.to_owned(),
                microvm,
            },
        );
        id
    }

    /// Expires one MCP session: whether a running microVM knew it.
    pub(crate) fn expire(&mut self, id: &str, now: Instant, limits: &Limits) -> bool {
        let Some(issuer) = self.issued.get(id) else {
            return false;
        };
        let (session, microvm) = (issuer.runtime_session.clone(), issuer.microvm);
        self.microvm_mut(&session, microvm)
            .filter(|vm| vm.alive(now, limits))
            .is_some_and(|vm| vm.mcp_sessions.remove(id))
    }

    /// Expires every MCP session.
    pub(crate) fn expire_all(&mut self) {
        for vm in self
            .sessions
            .values_mut()
            .filter_map(|s| s.microvm.as_mut())
        {
            vm.mcp_sessions.clear();
        }
    }

    /// Ends the microVM of `session` at once (no termination delay): whether one was running.
    pub(crate) fn end_microvm(&mut self, session: &str, now: Instant, limits: &Limits) -> bool {
        self.sessions
            .get_mut(session)
            .and_then(|s| s.microvm.take())
            .is_some_and(|vm| vm.alive(now, limits))
    }

    /// Ends every microVM: how many were running.
    pub(crate) fn end_microvms(&mut self, now: Instant, limits: &Limits) -> usize {
        self.sessions
            .values_mut()
            .filter_map(|s| s.microvm.take())
            .filter(|vm| vm.alive(now, limits))
            .count()
    }

    /// `StopRuntimeSession`: ends the session and its microVM; whether the session was known.
    pub(crate) fn stop(&mut self, session: &str) -> bool {
        self.sessions.remove(session).is_some()
    }

    fn microvm(&self, session: &str, microvm: u64) -> Option<&MicroVm> {
        self.sessions
            .get(session)?
            .microvm
            .as_ref()
            .filter(|vm| vm.serial == microvm)
    }

    fn microvm_mut(&mut self, session: &str, microvm: u64) -> Option<&mut MicroVm> {
        self.sessions
            .get_mut(session)?
            .microvm
            .as_mut()
            .filter(|vm| vm.serial == microvm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        provisioning: Duration::from_secs(12),
        idle_timeout: Duration::from_secs(900),
        max_lifetime: Duration::from_secs(28_800),
        termination_delay: Duration::ZERO,
    };

    #[test]
    fn a_microvm_provisions_then_idles_out_and_its_mcp_sessions_are_lost() {
        let mut runtime = Runtime::default();
        let t0 = Instant::now();
        let first = runtime.arrive("s", t0, &LIMITS);
        assert!(first.new_session && first.new_microvm && first.provisioning);
        let ready = runtime.arrive("s", t0 + Duration::from_secs(12), &LIMITS);
        assert!(!ready.new_session && !ready.new_microvm && !ready.provisioning);
        assert_eq!(ready.microvm, first.microvm);
        let id = runtime.issue("s", ready.microvm);
        let at = t0 + Duration::from_secs(13);
        let check = |runtime: &Runtime, microvm, stateful, at| {
            runtime.check("s", microvm, Some(&id), stateful, at, &LIMITS)
        };
        assert_eq!(check(&runtime, ready.microvm, true, at), McpCheck::Accepted);
        assert_eq!(
            runtime.check("s", ready.microvm, None, true, at, &LIMITS),
            McpCheck::Missing
        );
        assert_eq!(
            runtime.check("s", ready.microvm, Some("made-up"), false, at, &LIMITS),
            McpCheck::Accepted
        );
        assert_eq!(
            runtime.check("s", ready.microvm, Some("made-up"), true, at, &LIMITS),
            McpCheck::NotFound
        );

        // 900 s after the last request: a new microVM, which never issued the id.
        let later = t0 + Duration::from_secs(12 + 900);
        let cold = runtime.arrive("s", later, &LIMITS);
        assert!(!cold.new_session && cold.new_microvm && cold.provisioning);
        assert_ne!(cold.microvm, ready.microvm);
        for stateful in [false, true] {
            assert_eq!(
                check(&runtime, cold.microvm, stateful, later),
                McpCheck::NotFound
            );
        }
        assert!(!runtime.expire(&id, later, &LIMITS), "already lost");
    }

    #[test]
    fn a_microvm_in_use_still_ends_at_its_lifetime() {
        let mut runtime = Runtime::default();
        let t0 = Instant::now();
        let first = runtime.arrive("s", t0, &LIMITS).microvm;
        let mut at = t0;
        while at < t0 + LIMITS.max_lifetime - Duration::from_secs(600) {
            at += Duration::from_secs(600);
            assert_eq!(runtime.arrive("s", at, &LIMITS).microvm, first);
        }
        let next = runtime.arrive("s", t0 + LIMITS.max_lifetime, &LIMITS);
        assert!(next.new_microvm && next.provisioning);
    }

    #[test]
    fn an_ended_microvm_terminates_for_the_delay_and_is_not_kept_alive_by_refused_requests() {
        let limits = Limits {
            termination_delay: Duration::from_secs(15),
            ..LIMITS
        };
        let mut runtime = Runtime::default();
        let t0 = Instant::now();
        let first = runtime.arrive("s", t0, &limits).microvm;
        let idle_end = t0 + limits.idle_timeout;
        for at in [idle_end, idle_end + Duration::from_millis(14_999)] {
            let arrival = runtime.arrive("s", at, &limits);
            assert!(arrival.terminating && !arrival.provisioning && !arrival.new_microvm);
            assert_eq!(arrival.microvm, first);
        }
        let next = runtime.arrive("s", idle_end + Duration::from_secs(15), &limits);
        assert!(next.new_microvm && next.provisioning && !next.terminating);
        assert_ne!(next.microvm, first);

        // The lifetime too, in constant use.
        let mut runtime = Runtime::default();
        let first = runtime.arrive("s", t0, &limits).microvm;
        let mut at = t0;
        while at + Duration::from_secs(600) < t0 + limits.max_lifetime {
            at += Duration::from_secs(600);
            assert_eq!(runtime.arrive("s", at, &limits).microvm, first);
        }
        let end = t0 + limits.max_lifetime;
        assert!(runtime.arrive("s", end, &limits).terminating);
        assert!(
            runtime
                .arrive("s", end + Duration::from_secs(15), &limits)
                .new_microvm
        );
    }

    #[test]
    fn a_failed_microvm_is_gone_at_once_and_mcp_sessions_route_to_their_issuer() {
        let mut runtime = Runtime::default();
        let t0 = Instant::now() + LIMITS.provisioning;
        let vm = runtime.arrive("s", t0, &LIMITS).microvm;
        let id = runtime.issue("s", vm);
        assert_eq!(runtime.issuer_of(&id).as_deref(), Some("s"));
        assert_eq!(runtime.issuer_of("never-issued"), None);
        assert!(!runtime.fail("s", vm + 1), "another microVM");
        assert!(runtime.fail("s", vm));
        assert!(!runtime.fail("s", vm), "gone already");
        let next = runtime.arrive("s", t0, &LIMITS);
        assert!(next.new_microvm && !next.new_session);
        assert_eq!(
            runtime.issuer_of(&id).as_deref(),
            Some("s"),
            "still routed there"
        );
    }

    #[test]
    fn faults_expire_a_session_and_end_a_microvm() {
        let mut runtime = Runtime::default();
        let t0 = Instant::now() + LIMITS.provisioning;
        let vm = runtime.arrive("s", t0, &LIMITS).microvm;
        let (a, b) = (runtime.issue("s", vm), runtime.issue("s", vm));
        assert!(runtime.expire(&a, t0, &LIMITS));
        assert!(!runtime.expire(&a, t0, &LIMITS));
        // What the MCP server of `session`'s microVM `vm` makes of the MCP session `id` now.
        let check = |runtime: &Runtime, session: &str, vm: u64, id: &str, stateful: bool| {
            runtime.check(session, vm, Some(id), stateful, t0, &LIMITS)
        };
        assert_eq!(check(&runtime, "s", vm, &a, false), McpCheck::NotFound);
        assert_eq!(check(&runtime, "s", vm, &b, false), McpCheck::Accepted);
        // Another runtime session carrying b: a lenient server takes it, a stateful one not.
        let other = runtime.arrive("o", t0, &LIMITS).microvm;
        assert_eq!(check(&runtime, "o", other, &b, false), McpCheck::Accepted);
        assert_eq!(check(&runtime, "o", other, &b, true), McpCheck::NotFound);
        assert!(runtime.end_microvm("s", t0, &LIMITS));
        assert!(!runtime.end_microvm("s", t0, &LIMITS));
        assert!(!runtime.end_microvm("unknown", t0, &LIMITS));
        let next = runtime.arrive("s", t0, &LIMITS);
        assert!(next.new_microvm && !next.new_session);
        assert_eq!(
            check(&runtime, "s", next.microvm, &b, false),
            McpCheck::NotFound
        );
        assert_eq!(runtime.end_microvms(t0, &LIMITS), 2);
        assert!(runtime.stop("s") && !runtime.stop("s"));
        assert!(runtime.arrive("s", t0, &LIMITS).new_session);
    }
}
