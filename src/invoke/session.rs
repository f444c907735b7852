//! Which runtime session a request goes to: the MCP session's, never the last caller's. The
//! tests of the bindings (idle time, lifetime, the least recently used, renewals, concurrent
//! adoption) are in `tests.rs` beside it.

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
/// crate offers — `lru` and `hashlink` key one map, so the second index would be kept in step
/// by hand all the same — and either brings `hashbrown` and its hasher into every build of a
/// crate that has neither; the list is a few index links in a `Vec`, without `unsafe`.
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

    /// Whether [`choose`](Self::choose) depends on whether the request opens an MCP session:
    /// with a runtime session per MCP session, for a request outside one.
    pub(crate) fn asks_whether_opens(&self, mcp_session: Option<&str>) -> bool {
        self.mode == RuntimeSessions::PerMcpSession && mcp_session.is_none()
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
mod tests;
