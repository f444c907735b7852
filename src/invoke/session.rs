//! Which runtime session a request goes to: the MCP session's, never the last caller's.
//!
//! One concept, long for its tests: some 540 of its lines are the tests of the bindings (idle
//! time, lifetime, the least recently used, renewals, concurrent adoption).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

use super::request::{RUNTIME_SESSION_ID, is_valid_session_id};
use crate::contract::MCP_SESSION_ID;

/// How a [`SigV4InvokeLayer`](super::SigV4InvokeLayer) picks the runtime session (the microVM) of
/// a request that does not name one in `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`.
///
/// A request that names its runtime session always goes to that one, for that request only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeSessions {
    /// One runtime session for every request through the layer (its clones and the services it
    /// builds): one layer per MCP client. The default.
    #[default]
    PerLayer,
    /// One runtime session per MCP session, keyed by the request's `Mcp-Session-Id`: for an app
    /// that serves many MCP sessions (many users) over one layer. A request without an
    /// `Mcp-Session-Id` (the `initialize` that opens a session) gets a runtime session of its
    /// own; the `Mcp-Session-Id` its answer carries is then bound to it, so every later request
    /// of that MCP session goes to the same microVM, and no other does. A successful
    /// `StopRuntimeSession` unbinds it; a DELETE of an MCP session bound to none is answered
    /// 405 here (there is nothing to stop).
    ///
    /// A binding is forgotten once its MCP session has sent nothing for longer than
    /// [`runtime_session_idle_timeout`](super::SigV4InvokeLayerBuilder::runtime_session_idle_timeout)
    /// (default 900 s, AgentCore's default `idleRuntimeSessionTimeout`: by then AgentCore has
    /// stopped the microVM, so there is nothing left to go back to), once its runtime session
    /// was bound longer ago than
    /// [`runtime_session_max_lifetime`](super::SigV4InvokeLayerBuilder::runtime_session_max_lifetime)
    /// (default 28,800 s, AgentCore's default `maxLifetime`: the microVM has ended however busy
    /// it was), and when more than
    /// [`max_bound_mcp_sessions`](super::SigV4InvokeLayerBuilder::max_bound_mcp_sessions)
    /// (default 100,000) are bound, the one used least recently is. Either way, the next request
    /// of that MCP session gets a new microVM. Each costs O(1): nothing is scanned, and no task
    /// runs in the background — an idle binding is dropped when it is next looked up, or when a
    /// new one is bound.
    ///
    /// A request in no MCP session that opens none — every request of MCP's stateless
    /// protocol versions (2026-07-28 and later, which have no `initialize` and no
    /// `Mcp-Session-Id`), and of a server that never hands out an id — goes to the layer's own
    /// runtime session, as with [`PerLayer`](Self::PerLayer): one microVM for them, never a
    /// cold start per request, and a task's polls reach the microVM that holds the task. The
    /// layer cannot tell such clients apart: an app that serves several of them and wants each
    /// in a microVM of its own names the runtime session per request in the header.
    PerMcpSession,
}

/// How long a binding is kept after its MCP session's last request, unless configured:
/// AgentCore's default `idleRuntimeSessionTimeout`, after which the microVM is gone.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(900);

/// The shortest idle time taken: AgentCore's least `idleRuntimeSessionTimeout`. No runtime
/// stops an idle microVM sooner, so forgetting it sooner would only throw away a live one.
pub(crate) const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a binding is kept after its runtime session was first bound, unless configured:
/// AgentCore's default `maxLifetime`, after which the microVM has ended.
pub(crate) const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(28_800);

/// The shortest lifetime taken: AgentCore's least `maxLifetime`, as for the idle time.
pub(crate) const MIN_MAX_LIFETIME: Duration = Duration::from_secs(60);

/// The longest runtime session idle timeout and lifetime AgentCore takes: 1,209,600 s (14 days),
/// for a runtime on AgentCore Instances (managed EC2). A runtime on microVMs takes at most
/// 28,800 s (8 hours) for either. A
/// [`SigV4InvokeLayerBuilder`](super::SigV4InvokeLayerBuilder) set longer is refused when built.
pub const MAX_RUNTIME_SESSION_TIME: Duration = Duration::from_secs(14 * 86_400);

/// How many MCP sessions a [`RuntimeSessions::PerMcpSession`] layer remembers, unless
/// configured: a memory bound (some 280 bytes a binding with UUID ids: 28 MB full, measured by
/// `compat/benches/runtime_sessions.rs`), a hundred times the runtime sessions an AWS account
/// may have active by default (1,000 in us-east-1 and us-west-2, 500 elsewhere), so that in
/// practice the idle time, not the count, forgets.
pub(crate) const DEFAULT_MAX_BOUND: usize = 100_000;

/// A request extension: this request — an `initialize` without `Mcp-Session-Id` — opens a new
/// MCP session in place of the expired one named here.
///
/// With [`RuntimeSessions::PerMcpSession`], the request goes to the runtime session bound to
/// that MCP session, if one is (the microVM its last request provisioned: no second cold
/// start), and the new `Mcp-Session-Id` its answer carries takes that binding over — the old
/// one is dropped, its id is dead. With [`RuntimeSessions::PerLayer`] it changes nothing.
/// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) puts it on the `initialize`
/// that re-opens an expired session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RenewedFrom(pub(crate) Arc<str>);

/// The runtime sessions of one layer.
pub(crate) struct Sessions {
    mode: RuntimeSessions,
    default: RwLock<Arc<str>>,
    bound: Mutex<Bound>,
}

/// No slot: either end of the list.
const NIL: usize = usize::MAX;

/// One MCP session bound to its runtime session.
struct Slot {
    mcp_session: Arc<str>,
    runtime_session: Arc<str>,
    /// When a request of the MCP session last chose it, or an answer confirmed it.
    used: Instant,
    /// When its runtime session was first bound, to this MCP session or to the one it renews
    /// (the microVM is the same): its lifetime counts from then.
    bound_at: Instant,
    /// The slot used just before this one, and just after (the list runs from the least
    /// recently used to the most).
    older: usize,
    newer: usize,
}

/// The runtime session of each MCP session: a map from either id to its slot, the slots in a
/// list by when they were last used — so finding, refreshing, and forgetting the least recently
/// used are O(1).
///
/// Written here rather than taken from a crate: the two maps share the slots (a runtime session
/// is never bound to two MCP sessions, and finding who holds one must not scan), which no LRU
/// crate offers, and the list is a few index links in a `Vec`, without `unsafe`.
struct Bound {
    /// Dense: a slot removed is replaced by the last one.
    slots: Vec<Slot>,
    by_mcp_session: HashMap<Arc<str>, usize>,
    by_runtime_session: HashMap<Arc<str>, usize>,
    oldest: usize,
    newest: usize,
    /// A binding idle longer than this is forgotten.
    idle_timeout: Duration,
    /// A binding whose runtime session was bound longer ago than this is forgotten.
    max_lifetime: Duration,
    /// At most this many are kept.
    max: usize,
}

impl Bound {
    fn new(idle_timeout: Duration, max_lifetime: Duration, max: usize) -> Self {
        Self {
            slots: Vec::new(),
            by_mcp_session: HashMap::new(),
            by_runtime_session: HashMap::new(),
            oldest: NIL,
            newest: NIL,
            idle_timeout,
            max_lifetime,
            max: max.max(1),
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether `slot`'s microVM is gone: idle too long, or past its lifetime.
    fn expired(&self, slot: usize, now: Instant) -> bool {
        let Slot { used, bound_at, .. } = self.slots[slot];
        now.saturating_duration_since(used) > self.idle_timeout
            || now.saturating_duration_since(bound_at) > self.max_lifetime
    }

    /// `slot`, unless its microVM is gone (idle too long, or past its lifetime): then it is
    /// dropped.
    fn live(&mut self, slot: usize, now: Instant) -> Option<usize> {
        if self.expired(slot, now) {
            self.remove(slot);
            None
        } else {
            Some(slot)
        }
    }

    /// The live slot of `mcp_session`.
    fn slot_of(&mut self, mcp_session: &str, now: Instant) -> Option<usize> {
        let slot = *self.by_mcp_session.get(mcp_session)?;
        self.live(slot, now)
    }

    /// The runtime session of `mcp_session`, marked used now.
    fn get(&mut self, mcp_session: &str, now: Instant) -> Option<Arc<str>> {
        let slot = self.slot_of(mcp_session, now)?;
        self.touch(slot, now);
        Some(self.slots[slot].runtime_session.clone())
    }

    /// The runtime session of `mcp_session`, its use left as it is.
    fn peek(&mut self, mcp_session: &str, now: Instant) -> Option<Arc<str>> {
        let slot = self.slot_of(mcp_session, now)?;
        Some(self.slots[slot].runtime_session.clone())
    }

    /// The MCP session `runtime_session` is bound to.
    fn holder(&mut self, runtime_session: &str, now: Instant) -> Option<&str> {
        let slot = *self.by_runtime_session.get(runtime_session)?;
        let slot = self.live(slot, now)?;
        Some(&self.slots[slot].mcp_session)
    }

    /// Binds `mcp_session` to `id`, marked used now; an MCP session bound to `id` before loses
    /// it (one MCP session per microVM), and its lifetime goes on (a runtime session new here
    /// starts its lifetime now). Over the cap, forgets the MCP session used least recently;
    /// first, every binding gone at that end of the list.
    fn bind(&mut self, mcp_session: &str, id: Arc<str>, now: Instant) {
        let mut bound_at = now;
        if let Some(&other) = self.by_runtime_session.get(&*id) {
            bound_at = self.slots[other].bound_at;
            if *self.slots[other].mcp_session != *mcp_session {
                self.remove(other);
            }
        }
        if let Some(&slot) = self.by_mcp_session.get(mcp_session) {
            let before = std::mem::replace(&mut self.slots[slot].runtime_session, id.clone());
            if before != id {
                self.by_runtime_session.remove(&*before);
                self.by_runtime_session.insert(id, slot);
                self.slots[slot].bound_at = bound_at;
            }
            self.touch(slot, now);
            return;
        }
        while self.oldest != NIL && self.expired(self.oldest, now) {
            self.remove(self.oldest);
        }
        if self.slots.len() >= self.max {
            self.remove(self.oldest);
        }
        let slot = self.slots.len();
        let mcp_session: Arc<str> = mcp_session.into();
        self.slots.push(Slot {
            mcp_session: mcp_session.clone(),
            runtime_session: id.clone(),
            used: now,
            bound_at,
            older: NIL,
            newer: NIL,
        });
        self.push_newest(slot);
        self.by_mcp_session.insert(mcp_session, slot);
        self.by_runtime_session.insert(id, slot);
    }

    /// Forgets `mcp_session`'s binding, whichever runtime session it is.
    fn unbind(&mut self, mcp_session: &str) {
        if let Some(&slot) = self.by_mcp_session.get(mcp_session) {
            self.remove(slot);
        }
    }

    /// Marks `slot` used now: the newest.
    fn touch(&mut self, slot: usize, now: Instant) {
        self.slots[slot].used = now;
        if self.newest != slot {
            self.unlink(slot);
            self.push_newest(slot);
        }
    }

    fn push_newest(&mut self, slot: usize) {
        self.slots[slot].older = self.newest;
        self.slots[slot].newer = NIL;
        match self.newest {
            NIL => self.oldest = slot,
            newest => self.slots[newest].newer = slot,
        }
        self.newest = slot;
    }

    fn unlink(&mut self, slot: usize) {
        let Slot { older, newer, .. } = self.slots[slot];
        match older {
            NIL => self.oldest = newer,
            older => self.slots[older].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            newer => self.slots[newer].older = older,
        }
    }

    /// Drops `slot`; the last slot takes its place.
    fn remove(&mut self, slot: usize) {
        self.unlink(slot);
        let removed = self.slots.swap_remove(slot);
        self.by_mcp_session.remove(&*removed.mcp_session);
        self.by_runtime_session.remove(&*removed.runtime_session);
        if let Some(moved) = self.slots.get(slot) {
            let Slot { older, newer, .. } = *moved;
            match older {
                NIL => self.oldest = slot,
                older => self.slots[older].newer = slot,
            }
            match newer {
                NIL => self.newest = slot,
                newer => self.slots[newer].older = slot,
            }
            let moved = &self.slots[slot];
            if let Some(index) = self.by_mcp_session.get_mut(&*moved.mcp_session) {
                *index = slot;
            }
            if let Some(index) = self.by_runtime_session.get_mut(&*moved.runtime_session) {
                *index = slot;
            }
        }
    }
}

/// The runtime session an attempt was sent to by the layer's choice (the request named none).
#[derive(Clone, Debug)]
pub(crate) struct Chosen {
    pub(crate) id: Arc<str>,
    mcp_session: Option<String>,
    /// The expired MCP session the request opens a new one in place of
    /// ([`RuntimeSessions::PerMcpSession`] only).
    renewed_from: Option<Arc<str>>,
}

impl Sessions {
    /// The runtime sessions of a layer in `mode`, its own `default`; with
    /// [`RuntimeSessions::PerMcpSession`], a binding idle longer than `idle_timeout` (at least
    /// [`MIN_IDLE_TIMEOUT`]), or whose runtime session was bound longer ago than `max_lifetime`
    /// (at least [`MIN_MAX_LIFETIME`]), is forgotten, and at most `max_bound` (at least 1) are
    /// kept.
    pub(crate) fn new(
        mode: RuntimeSessions,
        default: String,
        idle_timeout: Duration,
        max_lifetime: Duration,
        max_bound: usize,
    ) -> Self {
        let bound = Bound::new(
            idle_timeout.max(MIN_IDLE_TIMEOUT),
            max_lifetime.max(MIN_MAX_LIFETIME),
            max_bound,
        );
        Self {
            mode,
            default: RwLock::new(default.into()),
            bound: Mutex::new(bound),
        }
    }

    pub(crate) fn mode(&self) -> RuntimeSessions {
        self.mode
    }

    /// The layer's own runtime session.
    pub(crate) fn default_id(&self) -> Arc<str> {
        self.default
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock_bound(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The MCP session a choice remembers: only with [`RuntimeSessions::PerMcpSession`], which
    /// binds by it (a copy per call saved otherwise).
    fn key_of(&self, mcp_session: Option<&str>) -> Option<String> {
        match self.mode {
            RuntimeSessions::PerMcpSession => mcp_session.map(str::to_owned),
            RuntimeSessions::PerLayer => None,
        }
    }

    /// The MCP session a request without one renews: only with
    /// [`RuntimeSessions::PerMcpSession`].
    fn renewal_of(
        &self,
        mcp_session: Option<&str>,
        renewed_from: Option<&RenewedFrom>,
    ) -> Option<Arc<str>> {
        match (self.mode, mcp_session) {
            (RuntimeSessions::PerMcpSession, None) => renewed_from.map(|r| r.0.clone()),
            _ => None,
        }
    }

    /// The runtime session for a request that names none, in the MCP session `mcp_session`
    /// or, for an `initialize` (`opens_session`), renewing the MCP session `renewed_from`. A
    /// request in no MCP session that opens none (MCP 2026-07-28 has no sessions; a stateless
    /// server hands out no id) goes to the layer's own runtime session, as with
    /// [`RuntimeSessions::PerLayer`].
    pub(crate) fn choose(
        &self,
        mcp_session: Option<&str>,
        renewed_from: Option<&RenewedFrom>,
        opens_session: bool,
    ) -> Chosen {
        let renewed_from = self.renewal_of(mcp_session, renewed_from);
        let id = match (self.mode, mcp_session) {
            (RuntimeSessions::PerLayer, _) => self.default_id(),
            (RuntimeSessions::PerMcpSession, None) if renewed_from.is_none() && !opens_session => {
                self.default_id()
            }
            (RuntimeSessions::PerMcpSession, None) => renewed_from
                .as_deref()
                .and_then(|old| self.lock_bound().get(old, Instant::now()))
                .unwrap_or_else(new_id),
            (RuntimeSessions::PerMcpSession, Some(key)) => {
                let now = Instant::now();
                let mut bound = self.lock_bound();
                match bound.get(key, now) {
                    Some(id) => id,
                    None => {
                        let id = new_id();
                        bound.bind(key, id.clone(), now);
                        id
                    }
                }
            }
        };
        Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
            renewed_from,
        }
    }

    /// The runtime session a DELETE without one of its own stops: the layer's own, or the one
    /// bound to its MCP session — none when none is bound (nothing to stop).
    pub(crate) fn to_stop(&self, request: &HeaderMap) -> Option<Chosen> {
        let mcp_session = mcp_session_of(request);
        let id = match self.mode {
            RuntimeSessions::PerLayer => self.default_id(),
            RuntimeSessions::PerMcpSession => {
                self.lock_bound().peek(mcp_session?, Instant::now())?
            }
        };
        Some(Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
            renewed_from: None,
        })
    }

    /// What a later attempt of a call uses: the id its first attempt was given.
    pub(crate) fn pinned(
        &self,
        id: Arc<str>,
        mcp_session: Option<&str>,
        renewed_from: Option<&RenewedFrom>,
    ) -> Chosen {
        Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
            renewed_from: self.renewal_of(mcp_session, renewed_from),
        }
    }

    /// Takes the runtime session an answer names — its headers already redacted, so a secret
    /// is never adopted — for the MCP session of a request the layer chose the session of.
    /// Only what that request used is replaced: a concurrent change by another answer stands.
    pub(crate) fn adopt(&self, chosen: &Chosen, answer: &HeaderMap) {
        let returned = answer
            .get(RUNTIME_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|id| is_valid_session_id(id));
        match self.mode {
            RuntimeSessions::PerLayer => {
                let Some(returned) = returned.filter(|id| **id != *chosen.id) else {
                    return;
                };
                let mut current = self.default.write().unwrap_or_else(|p| p.into_inner());
                if *current == chosen.id {
                    *current = returned.into();
                }
            }
            RuntimeSessions::PerMcpSession => {
                let key = chosen.mcp_session.as_deref().or_else(|| {
                    answer
                        .get(MCP_SESSION_ID)
                        .and_then(|v| v.to_str().ok())
                        .filter(|key| !key.is_empty())
                });
                let Some(key) = key else { return };
                let id: Arc<str> = returned.map_or_else(|| chosen.id.clone(), Into::into);
                let now = Instant::now();
                let mut bound = self.lock_bound();
                // Never another MCP session's runtime session: that would put two sessions'
                // state in one microVM. But the expired one this request renews gives its own
                // up.
                let renewed = chosen.renewed_from.as_deref().filter(|old| *old != key);
                let taken = bound
                    .holder(&id, now)
                    .is_some_and(|holder| holder != key && Some(holder) != renewed);
                if taken {
                    return;
                }
                match bound.peek(key, now) {
                    Some(current) if current != chosen.id => {}
                    _ => {
                        bound.bind(key, id, now);
                        if let Some(old) = renewed {
                            bound.unbind(old);
                        }
                    }
                }
            }
        }
    }

    /// Forgets the runtime session of an MCP session that was stopped.
    pub(crate) fn forget(&self, chosen: &Chosen) {
        if let (RuntimeSessions::PerMcpSession, Some(key)) = (self.mode, &chosen.mcp_session) {
            let mut bound = self.lock_bound();
            if bound
                .peek(key, Instant::now())
                .is_some_and(|id| id == chosen.id)
            {
                bound.unbind(key);
            }
        }
    }
}

fn new_id() -> Arc<str> {
    uuid::Uuid::new_v4().to_string().into()
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("RuntimeSessions");
        s.field("mode", &self.mode);
        match self.mode {
            RuntimeSessions::PerLayer => s.field("runtime_session_id", &self.default_id()),
            RuntimeSessions::PerMcpSession => {
                let bound = self.lock_bound();
                s.field("bound_mcp_sessions", &bound.len())
                    .field("runtime_session_idle_timeout", &bound.idle_timeout)
                    .field("runtime_session_max_lifetime", &bound.max_lifetime)
                    .field("max_bound_mcp_sessions", &bound.max)
            }
        };
        s.finish()
    }
}

/// The `Mcp-Session-Id` of a request, when it has one that is text.
pub(crate) fn mcp_session_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|key| !key.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, mcp: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RUNTIME_SESSION_ID, id.parse().unwrap());
        if let Some(mcp) = mcp {
            h.insert("mcp-session-id", mcp.parse().unwrap());
        }
        h
    }

    fn per_mcp_session(idle_timeout: Duration, max_bound: usize) -> Sessions {
        living(idle_timeout, DEFAULT_MAX_LIFETIME, max_bound)
    }

    /// Per MCP session, with a lifetime.
    fn living(idle_timeout: Duration, max_lifetime: Duration, max_bound: usize) -> Sessions {
        Sessions::new(
            RuntimeSessions::PerMcpSession,
            "d".repeat(36),
            idle_timeout,
            max_lifetime,
            max_bound,
        )
    }

    fn per_layer(id: String) -> Sessions {
        Sessions::new(
            RuntimeSessions::PerLayer,
            id,
            DEFAULT_IDLE_TIMEOUT,
            DEFAULT_MAX_LIFETIME,
            DEFAULT_MAX_BOUND,
        )
    }

    fn renewing(old: &str) -> RenewedFrom {
        RenewedFrom(old.into())
    }

    /// Two MCP sessions bound, "old" then "other", and an `initialize` renewing "old": the
    /// sessions, the runtime session of each, and the one the renewal was given.
    fn renewal_of_old_beside_other() -> (Sessions, Arc<str>, Arc<str>, Chosen) {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        let other = s.choose(Some("other"), None, true).id;
        let init = s.choose(None, Some(&renewing("old")), true);
        (s, old, other, init)
    }

    impl Sessions {
        /// How many MCP sessions are bound (those idle too long among them, until dropped).
        fn bound(&self) -> usize {
            self.lock_bound().len()
        }

        /// The runtime session bound to `mcp_session`, its use left as it is.
        fn bound_to(&self, mcp_session: &str) -> Option<Arc<str>> {
            self.lock_bound().peek(mcp_session, Instant::now())
        }

        /// The MCP sessions bound, from the least recently used to the most, after checking
        /// that the maps and the list agree.
        fn by_use(&self) -> Vec<String> {
            let bound = self.lock_bound();
            let mut order = Vec::new();
            let (mut slot, mut older) = (bound.oldest, NIL);
            while slot != NIL {
                let s = &bound.slots[slot];
                assert_eq!(s.older, older, "links agree");
                assert_eq!(bound.by_mcp_session[&s.mcp_session], slot);
                assert_eq!(bound.by_runtime_session[&s.runtime_session], slot);
                order.push(s.mcp_session.to_string());
                (older, slot) = (slot, s.newer);
            }
            assert_eq!(bound.newest, older);
            assert_eq!(order.len(), bound.slots.len());
            assert_eq!(bound.by_mcp_session.len(), bound.slots.len());
            assert_eq!(bound.by_runtime_session.len(), bound.slots.len());
            order
        }
    }

    #[test]
    fn requests_in_no_mcp_session_that_open_none_share_the_layers_runtime_session() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let first = s.choose(None, None, false);
        let second = s.choose(None, None, false);
        assert_eq!(&*first.id, "d".repeat(36).as_str(), "the layer's own");
        assert_eq!(second.id, first.id, "one microVM for sessionless requests");
        let initialize = s.choose(None, None, true);
        assert_ne!(
            initialize.id, first.id,
            "an initialize opens a session of its own"
        );
    }

    #[test]
    fn per_layer_adopts_only_over_what_the_request_used() {
        let s = per_layer("a".repeat(36));
        let first = s.choose(None, None, true);
        let b = "b".repeat(36);
        s.adopt(&first, &answer(&b, None));
        assert_eq!(&*s.default_id(), b.as_str());
        // A late answer to a request that used the old id does not switch it back.
        s.adopt(&first, &answer(&"c".repeat(36), None));
        assert_eq!(&*s.default_id(), b.as_str());
        // Invalid or redacted ids are never adopted.
        let now = s.choose(None, None, true);
        s.adopt(&now, &answer("[redacted]", None));
        assert_eq!(&*s.default_id(), b.as_str());
    }

    #[test]
    fn per_mcp_session_binds_and_separates() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let init_a = s.choose(None, None, true);
        let init_b = s.choose(None, None, true);
        assert_ne!(init_a.id, init_b.id, "each initialize gets its own");
        s.adopt(&init_a, &answer(&init_a.id, Some("mcp-a")));
        s.adopt(&init_b, &answer(&init_b.id, Some("mcp-b")));
        assert_eq!(s.choose(Some("mcp-a"), None, true).id, init_a.id);
        assert_eq!(s.choose(Some("mcp-b"), None, true).id, init_b.id);
        // An answer to A's request never changes B's session, nor puts A in B's.
        let a = s.choose(Some("mcp-a"), None, true);
        s.adopt(&a, &answer(&init_b.id, Some("mcp-b")));
        assert_eq!(
            s.choose(Some("mcp-a"), None, true).id,
            init_a.id,
            "B's id is B's"
        );
        s.adopt(&a, &answer(&"e".repeat(36), Some("mcp-b")));
        assert_eq!(s.choose(Some("mcp-b"), None, true).id, init_b.id);
        assert_eq!(
            &*s.choose(Some("mcp-a"), None, true).id,
            "e".repeat(36).as_str()
        );
        s.forget(&s.choose(Some("mcp-b"), None, true));
        assert_ne!(
            s.choose(Some("mcp-b"), None, true).id,
            init_b.id,
            "stopped: a new one"
        );
        s.by_use();
    }

    #[test]
    fn the_cap_forgets_the_least_recently_used() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 3);
        let a = s.choose(Some("a"), None, true).id;
        let b = s.choose(Some("b"), None, true).id;
        let c = s.choose(Some("c"), None, true).id;
        // A is used again: B is now the least recently used, and goes for D.
        assert_eq!(s.choose(Some("a"), None, true).id, a);
        let d = s.choose(Some("d"), None, true).id;
        assert_eq!(s.by_use(), ["c", "a", "d"]);
        assert_eq!(s.bound_to("b"), None);
        assert_eq!(s.bound_to("a"), Some(a));
        assert_eq!(s.bound_to("c"), Some(c));
        assert_eq!(s.bound_to("d"), Some(d.clone()));
        // An answer confirming D's session is a use too: C goes next.
        let chosen = s.choose(Some("d"), None, true);
        s.adopt(&chosen, &answer(&d, None));
        let b_again = s.choose(Some("b"), None, true).id;
        assert_ne!(b_again, b, "forgotten: a new microVM");
        assert_eq!(s.by_use(), ["a", "d", "b"]);
        assert_eq!(s.bound(), 3);
    }

    #[test]
    fn the_cap_holds_at_scale_and_forgets_in_order() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 1_000);
        let ids: Vec<_> = (0..1_010)
            .map(|i| s.choose(Some(&format!("mcp-{i}")), None, true).id)
            .collect();
        assert_eq!(s.bound(), 1_000);
        for (i, id) in ids.iter().enumerate() {
            let kept = s.bound_to(&format!("mcp-{i}"));
            assert_eq!(kept.as_ref(), (i >= 10).then_some(id), "mcp-{i}");
        }
        let order = s.by_use();
        assert_eq!(order.first().map(String::as_str), Some("mcp-10"));
        assert_eq!(order.last().map(String::as_str), Some("mcp-1009"));
    }

    #[test]
    fn a_zero_cap_keeps_one() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 0);
        let a = s.choose(Some("a"), None, true).id;
        assert_eq!(s.bound_to("a"), Some(a));
        let b = s.choose(Some("b"), None, true).id;
        assert_eq!(s.by_use(), ["b"]);
        assert_eq!(s.bound_to("b"), Some(b));
    }

    #[tokio::test(start_paused = true)]
    async fn a_binding_idle_longer_than_the_timeout_is_forgotten() {
        let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        tokio::time::advance(Duration::from_secs(900)).await;
        assert_eq!(s.bound_to("a"), Some(a.clone()), "idle 900 s: not longer");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(s.bound_to("a"), None, "idle longer: forgotten");
        assert_eq!(s.bound(), 0, "dropped when looked up");
        let again = s.choose(Some("a"), None, true).id;
        assert_ne!(again, a, "a new microVM");
        assert_eq!(s.bound_to("a"), Some(again));
    }

    #[tokio::test(start_paused = true)]
    async fn a_use_keeps_a_binding() {
        let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        let b = s.choose(Some("b"), None, true).id;
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(s.choose(Some("a"), None, true).id, a, "a request uses it");
        tokio::time::advance(Duration::from_secs(600)).await;
        // An answer is a use too.
        let chosen = s.choose(Some("a"), None, true);
        tokio::time::advance(Duration::from_secs(600)).await;
        s.adopt(&chosen, &answer(&a, None));
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(s.bound_to("a"), Some(a), "idle 600 s");
        assert_eq!(s.bound_to("b"), None, "idle 2,400 s");
        assert_ne!(s.choose(Some("b"), None, true).id, b);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bind_drops_the_expired_at_the_least_recent_end() {
        let s = per_mcp_session(Duration::from_secs(60), DEFAULT_MAX_BOUND);
        s.choose(Some("a"), None, true);
        s.choose(Some("b"), None, true);
        tokio::time::advance(Duration::from_secs(30)).await;
        let c = s.choose(Some("c"), None, true).id;
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(s.bound(), 3, "nothing dropped before it is touched");
        let d = s.choose(Some("d"), None, true).id;
        assert_eq!(s.by_use(), ["c", "d"], "A and B dropped, C is idle 31 s");
        assert_eq!(s.bound_to("c"), Some(c));
        assert_eq!(s.bound_to("d"), Some(d));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_time_below_agentcores_least_is_taken_as_60_seconds() {
        let s = per_mcp_session(Duration::ZERO, DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(s.bound_to("a"), Some(a));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(s.bound_to("a"), None);
        assert!(format!("{s:?}").contains("runtime_session_idle_timeout: 60s"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_binding_past_its_lifetime_is_forgotten_however_busy() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        // A request every 10 minutes for 28,200 s: never idle.
        for _ in 0..47 {
            tokio::time::advance(Duration::from_secs(600)).await;
            assert_eq!(s.choose(Some("a"), None, true).id, a);
        }
        tokio::time::advance(Duration::from_secs(599)).await;
        assert_eq!(s.choose(Some("a"), None, true).id, a, "28,799 s: kept");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(s.bound_to("a"), None, "28,801 s: the microVM has ended");
        let again = s.choose(Some("a"), None, true).id;
        assert_ne!(again, a, "a new microVM");
        // The new runtime session's lifetime counts from its binding.
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(s.bound_to("a"), Some(again));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_takes_the_lifetime_of_the_microvm_it_takes_over() {
        let hour = Duration::from_secs(3600);
        let s = living(hour, hour, DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        tokio::time::advance(Duration::from_secs(3000)).await;
        let init = s.choose(None, Some(&renewing("old")), true);
        assert_eq!(init.id, old);
        s.adopt(&init, &answer(&old, Some("new")));
        tokio::time::advance(Duration::from_secs(599)).await;
        assert_eq!(s.bound_to("new"), Some(old), "3,599 s since it was bound");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(s.bound_to("new"), None, "3,601 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_below_agentcores_least_is_taken_as_60_seconds() {
        let s = living(DEFAULT_IDLE_TIMEOUT, Duration::ZERO, DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(s.choose(Some("a"), None, true).id, a);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(s.bound_to("a"), None);
        assert!(format!("{s:?}").contains("runtime_session_max_lifetime: 60s"));
    }

    /// AgentCore Instances: both up to 14 days.
    #[tokio::test(start_paused = true)]
    async fn a_binding_lives_14_days_on_instances() {
        let days = MAX_RUNTIME_SESSION_TIME;
        assert_eq!(days, Duration::from_secs(1_209_600));
        let s = living(days, days, DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        tokio::time::advance(days - Duration::from_secs(1)).await;
        assert_eq!(s.choose(Some("a"), None, true).id, a, "idle 14 days - 1 s");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(s.bound_to("a"), None, "bound 14 days + 1 s ago");
    }

    #[test]
    fn the_builder_takes_14_days_and_refuses_more() {
        use crate::error::ConfigError;
        use crate::invoke::{InvokeTarget, SigV4InvokeLayer, SigV4InvokeLayerBuilder};
        use aws_credential_types::Credentials;
        let builder = |mode| -> SigV4InvokeLayerBuilder {
            SigV4InvokeLayer::builder(
                InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-1"),
                Credentials::new("AKID", "secret", None, None, "test"),
            )
            .runtime_sessions(mode)
        };
        let per_mcp_session = || builder(RuntimeSessions::PerMcpSession);
        let days = Duration::from_secs(14 * 86_400);
        let layer = per_mcp_session()
            .runtime_session_idle_timeout(days)
            .runtime_session_max_lifetime(days)
            .build()
            .unwrap();
        let shown = format!("{layer:?}");
        assert!(
            shown.contains("runtime_session_idle_timeout: 1209600s"),
            "{shown}"
        );
        assert!(
            shown.contains("runtime_session_max_lifetime: 1209600s"),
            "{shown}"
        );
        let defaults = format!("{:?}", per_mcp_session());
        assert!(
            defaults.contains("runtime_session_idle_timeout: 900s"),
            "{defaults}"
        );
        assert!(
            defaults.contains("runtime_session_max_lifetime: 28800s"),
            "{defaults}"
        );

        let over = days + Duration::from_secs(1);
        let too_long = |setting| ConfigError::RuntimeSessionTimeTooLong {
            setting,
            given: over,
            max: days,
        };
        let idle = per_mcp_session().runtime_session_idle_timeout(over);
        assert_eq!(
            idle.build().err(),
            Some(too_long("runtime_session_idle_timeout"))
        );
        let lifetime = per_mcp_session()
            .runtime_session_max_lifetime(over)
            .build()
            .err();
        assert_eq!(lifetime, Some(too_long("runtime_session_max_lifetime")));
        assert_eq!(
            lifetime.unwrap().to_string(),
            "runtime_session_max_lifetime is 1209601s: AgentCore takes at most 1209600s (14 \
             days, for a runtime on AgentCore Instances; 8 hours on microVMs)"
        );
        // Checked with either mode.
        let per_layer = builder(RuntimeSessions::PerLayer).runtime_session_max_lifetime(over);
        assert_eq!(
            per_layer.build().err(),
            Some(too_long("runtime_session_max_lifetime"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_binding_has_nothing_to_stop() {
        let s = per_mcp_session(Duration::from_secs(60), DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true).id;
        let mut delete = HeaderMap::new();
        delete.insert("mcp-session-id", "a".parse().unwrap());
        assert_eq!(s.to_stop(&delete).map(|c| c.id), Some(a));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(s.to_stop(&delete).is_none());
    }

    #[test]
    fn forget_unbinds_only_what_was_stopped() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let a = s.choose(Some("a"), None, true);
        let b = s.choose(Some("b"), None, true);
        // A stop of a session the MCP session no longer has changes nothing.
        s.adopt(&a, &answer(&"f".repeat(36), None));
        s.forget(&a);
        assert_eq!(&*s.bound_to("a").unwrap(), "f".repeat(36).as_str());
        s.forget(&s.choose(Some("a"), None, true));
        assert_eq!(s.bound_to("a"), None);
        assert_eq!(s.bound_to("b"), Some(b.id));
        assert_eq!(s.by_use(), ["b"]);
    }

    #[test]
    fn a_renewal_goes_to_the_expired_sessions_microvm_and_takes_it_over() {
        let (s, old, other, init) = renewal_of_old_beside_other();
        assert_eq!(init.id, old, "the microVM the old session provisioned");
        s.adopt(&init, &answer(&old, Some("new")));
        assert_eq!(s.bound_to("new"), Some(old.clone()));
        assert_eq!(s.bound_to("old"), None, "the old id is dead");
        assert_eq!(s.bound_to("other"), Some(other));
        assert_eq!(s.by_use(), ["other", "new"]);
        assert_eq!(s.choose(Some("new"), None, true).id, old);
        assert_ne!(s.choose(Some("old"), None, true).id, old, "never shared");
    }

    #[test]
    fn a_renewal_holds_for_every_attempt_and_an_answer_without_the_header() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        let first = s.choose(None, Some(&renewing("old")), true);
        // A later attempt of the call: the id its first attempt had, the same hint.
        let again = s.pinned(first.id.clone(), None, Some(&renewing("old")));
        let mut headers = HeaderMap::new();
        headers.insert("mcp-session-id", "new".parse().unwrap());
        s.adopt(&again, &headers);
        assert_eq!(s.bound_to("new"), Some(old));
        assert_eq!(s.by_use(), ["new"]);
    }

    #[test]
    fn a_renewal_of_a_session_bound_to_none_gets_a_new_microvm() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let other = s.choose(Some("other"), None, true).id;
        let init = s.choose(None, Some(&renewing("unknown")), true);
        assert_ne!(init.id, other);
        s.adopt(&init, &answer(&init.id, Some("new")));
        assert_eq!(s.bound_to("new"), Some(init.id));
        assert_eq!(s.bound_to("other"), Some(other));
        assert_eq!(s.by_use(), ["other", "new"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_of_an_idle_binding_gets_a_new_microvm() {
        let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        tokio::time::advance(Duration::from_secs(901)).await;
        let init = s.choose(None, Some(&renewing("old")), true);
        assert_ne!(init.id, old, "that microVM is gone");
        s.adopt(&init, &answer(&init.id, Some("new")));
        assert_eq!(s.by_use(), ["new"]);
    }

    #[test]
    fn two_renewals_of_one_session_never_share_its_microvm() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        let first = s.choose(None, Some(&renewing("old")), true);
        let second = s.choose(None, Some(&renewing("old")), true);
        assert_eq!((&first.id, &second.id), (&old, &old));
        s.adopt(&first, &answer(&old, Some("new-1")));
        s.adopt(&second, &answer(&old, Some("new-2")));
        assert_eq!(s.bound_to("new-1"), Some(old));
        assert_eq!(s.bound_to("new-2"), None, "the first took it over");
        assert_eq!(s.by_use(), ["new-1"]);
    }

    #[test]
    fn a_renewal_never_takes_a_third_sessions_microvm() {
        let (s, old, other, init) = renewal_of_old_beside_other();
        s.adopt(&init, &answer(&other, Some("new")));
        assert_eq!(s.bound_to("new"), None);
        assert_eq!(
            s.bound_to("old"),
            Some(old),
            "nothing taken over: nothing dropped"
        );
        assert_eq!(s.bound_to("other"), Some(other));
    }

    #[test]
    fn the_hint_changes_nothing_in_an_mcp_session_nor_per_layer() {
        let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
        let old = s.choose(Some("old"), None, true).id;
        let a = s.choose(Some("a"), Some(&renewing("old")), true);
        assert_ne!(a.id, old, "a request of an MCP session goes to its own");
        s.adopt(&a, &answer(&a.id, None));
        assert_eq!(s.bound_to("old"), Some(old));

        let layer = per_layer("a".repeat(36));
        let chosen = layer.choose(None, Some(&renewing("old")), true);
        assert_eq!(&*chosen.id, "a".repeat(36).as_str());
        layer.adopt(&chosen, &answer(&chosen.id, Some("new")));
        assert_eq!(layer.bound(), 0);
    }

    /// Bindings, lookups, stops and time in a seeded random mix, against a plain list kept in
    /// order of use. The lifetime is longer than the run (some 16 hours): the idle time forgets.
    #[tokio::test(start_paused = true)]
    async fn the_bindings_match_a_plain_model() {
        const MAX: usize = 8;
        let idle = Duration::from_secs(60);
        let s = living(idle, MAX_RUNTIME_SESSION_TIME, MAX);
        let mut rng = fastrand::Rng::with_seed(7);
        // (MCP session, runtime session, last used), least recently used first.
        let mut model: Vec<(String, Arc<str>, Instant)> = Vec::new();
        for _ in 0..20_000 {
            let key = format!("mcp-{}", rng.usize(..16));
            let now = Instant::now();
            model.retain(|(_, _, used)| now.saturating_duration_since(*used) <= idle);
            let at = model.iter().position(|(k, _, _)| *k == key);
            match rng.u8(..10) {
                0..=5 => {
                    let id = s.choose(Some(&key), None, true).id;
                    match at {
                        Some(at) => {
                            let (k, kept, _) = model.remove(at);
                            assert_eq!(kept, id, "{key}");
                            model.push((k, kept, now));
                        }
                        None => {
                            if model.len() == MAX {
                                model.remove(0);
                            }
                            model.push((key, id, now));
                        }
                    }
                }
                6 => {
                    if let Some(chosen) = s.to_stop(&answer(&"x".repeat(36), Some(&key))) {
                        s.forget(&chosen);
                    }
                    if let Some(at) = at {
                        model.remove(at);
                    }
                }
                _ => tokio::time::advance(Duration::from_secs(rng.u64(..20))).await,
            }
            let live: Vec<_> = model.iter().map(|(k, _, _)| k.clone()).collect();
            let kept = s.by_use();
            // Expired bindings may still be there until touched: they are the oldest.
            assert!(kept.ends_with(&live), "{kept:?} {live:?}");
        }
    }
}
