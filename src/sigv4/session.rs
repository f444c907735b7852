//! Which runtime session a request goes to: the MCP session's, never the last caller's.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};

use http::HeaderMap;

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
    /// 405 here (there is nothing to stop). At most 10,000 MCP sessions are remembered: beyond
    /// that, the one used least recently is forgotten (its next request gets a new microVM).
    ///
    /// A server that never hands out an `Mcp-Session-Id` — a stateless one, as AgentCore's
    /// guide sets MCP servers up, and every server on MCP's stateless protocol versions
    /// (2026-07-28 and later) — gets a new runtime session for every request this way: name
    /// the runtime session per request in the header instead, or use one
    /// [`PerLayer`](Self::PerLayer) layer per MCP client.
    PerMcpSession,
}

/// How many MCP sessions a [`RuntimeSessions::PerMcpSession`] layer remembers.
const MAX_BOUND: usize = 10_000;

/// The runtime sessions of one layer.
pub(crate) struct Sessions {
    mode: RuntimeSessions,
    default: RwLock<Arc<str>>,
    bound: Mutex<Bound>,
}

/// The runtime session of each MCP session, with when it was last used.
#[derive(Default)]
struct Bound {
    ids: HashMap<String, (Arc<str>, u64)>,
    clock: u64,
}

impl Bound {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The runtime session of `mcp_session`, marked used now.
    fn get(&mut self, mcp_session: &str) -> Option<Arc<str>> {
        let now = self.tick();
        let (id, used) = self.ids.get_mut(mcp_session)?;
        *used = now;
        Some(id.clone())
    }

    /// Binds `mcp_session` to `id`; over the cap, forgets the MCP session used least recently.
    fn bind(&mut self, mcp_session: &str, id: Arc<str>) {
        let now = self.tick();
        self.ids.insert(mcp_session.to_owned(), (id, now));
        if self.ids.len() > MAX_BOUND
            && let Some(oldest) = self
                .ids
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone())
        {
            self.ids.remove(&oldest);
        }
    }
}

/// The runtime session an attempt was sent to by the layer's choice (the request named none).
#[derive(Clone, Debug)]
pub(crate) struct Chosen {
    pub(crate) id: Arc<str>,
    mcp_session: Option<String>,
}

impl Sessions {
    pub(crate) fn new(mode: RuntimeSessions, default: String) -> Self {
        Self {
            mode,
            default: RwLock::new(default.into()),
            bound: Mutex::new(Bound::default()),
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

    /// How many MCP sessions are bound to a runtime session.
    pub(crate) fn bound(&self) -> usize {
        self.lock_bound().ids.len()
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

    /// The runtime session for a request that names none, in the MCP session `mcp_session`.
    pub(crate) fn choose(&self, mcp_session: Option<&str>) -> Chosen {
        let id = match (self.mode, mcp_session) {
            (RuntimeSessions::PerLayer, _) => self.default_id(),
            (RuntimeSessions::PerMcpSession, None) => new_id(),
            (RuntimeSessions::PerMcpSession, Some(key)) => {
                let mut bound = self.lock_bound();
                match bound.get(key) {
                    Some(id) => id,
                    None => {
                        let id = new_id();
                        bound.bind(key, id.clone());
                        id
                    }
                }
            }
        };
        Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
        }
    }

    /// The runtime session a DELETE without one of its own stops: the layer's own, or the one
    /// bound to its MCP session — none when none is bound (nothing to stop).
    pub(crate) fn to_stop(&self, request: &HeaderMap) -> Option<Chosen> {
        let mcp_session = mcp_session_of(request);
        let id = match self.mode {
            RuntimeSessions::PerLayer => self.default_id(),
            RuntimeSessions::PerMcpSession => self
                .lock_bound()
                .ids
                .get(mcp_session?)
                .map(|(id, _)| id.clone())?,
        };
        Some(Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
        })
    }

    /// What a later attempt of a call uses: the id its first attempt was given.
    pub(crate) fn pinned(&self, id: Arc<str>, mcp_session: Option<&str>) -> Chosen {
        Chosen {
            id,
            mcp_session: self.key_of(mcp_session),
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
                let mut bound = self.lock_bound();
                // Never another MCP session's runtime session: that would put two sessions'
                // state in one microVM.
                let taken = id != chosen.id
                    && bound
                        .ids
                        .iter()
                        .any(|(other, (other_id, _))| other != key && *other_id == id);
                match bound.ids.get(key) {
                    _ if taken => {}
                    Some((current, _)) if *current != chosen.id => {}
                    _ => bound.bind(key, id),
                }
            }
        }
    }

    /// Forgets the runtime session of an MCP session that was stopped.
    pub(crate) fn forget(&self, chosen: &Chosen) {
        if let (RuntimeSessions::PerMcpSession, Some(key)) = (self.mode, &chosen.mcp_session) {
            let mut bound = self.lock_bound();
            if bound.ids.get(key).is_some_and(|(id, _)| *id == chosen.id) {
                bound.ids.remove(key);
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
            RuntimeSessions::PerMcpSession => s.field("bound_mcp_sessions", &self.bound()),
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

    #[test]
    fn per_layer_adopts_only_over_what_the_request_used() {
        let s = Sessions::new(RuntimeSessions::PerLayer, "a".repeat(36));
        let first = s.choose(None);
        let b = "b".repeat(36);
        s.adopt(&first, &answer(&b, None));
        assert_eq!(&*s.default_id(), b.as_str());
        // A late answer to a request that used the old id does not switch it back.
        s.adopt(&first, &answer(&"c".repeat(36), None));
        assert_eq!(&*s.default_id(), b.as_str());
        // Invalid or redacted ids are never adopted.
        let now = s.choose(None);
        s.adopt(&now, &answer("[redacted]", None));
        assert_eq!(&*s.default_id(), b.as_str());
    }

    #[test]
    fn per_mcp_session_binds_and_separates() {
        let s = Sessions::new(RuntimeSessions::PerMcpSession, "d".repeat(36));
        let init_a = s.choose(None);
        let init_b = s.choose(None);
        assert_ne!(init_a.id, init_b.id, "each initialize gets its own");
        s.adopt(&init_a, &answer(&init_a.id, Some("mcp-a")));
        s.adopt(&init_b, &answer(&init_b.id, Some("mcp-b")));
        assert_eq!(s.choose(Some("mcp-a")).id, init_a.id);
        assert_eq!(s.choose(Some("mcp-b")).id, init_b.id);
        // An answer to A's request never changes B's session, nor puts A in B's.
        let a = s.choose(Some("mcp-a"));
        s.adopt(&a, &answer(&init_b.id, Some("mcp-b")));
        assert_eq!(s.choose(Some("mcp-a")).id, init_a.id, "B's id is B's");
        s.adopt(&a, &answer(&"e".repeat(36), Some("mcp-b")));
        assert_eq!(s.choose(Some("mcp-b")).id, init_b.id);
        assert_eq!(&*s.choose(Some("mcp-a")).id, "e".repeat(36).as_str());
        s.forget(&s.choose(Some("mcp-b")));
        assert_ne!(s.choose(Some("mcp-b")).id, init_b.id, "stopped: a new one");
    }

    #[test]
    fn the_bound_sessions_are_capped() {
        let s = Sessions::new(RuntimeSessions::PerMcpSession, "d".repeat(36));
        for i in 0..MAX_BOUND + 5 {
            s.choose(Some(&format!("mcp-{i}")));
        }
        assert_eq!(s.bound(), MAX_BOUND);
    }
}
