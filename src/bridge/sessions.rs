//! The MCP sessions the bridge opened itself for clients of the `initialize` era at a server
//! that speaks only MCP 2026-07-28: by the id the bridge gave each, what the client said of
//! itself (its version, information and capabilities), which every one of its requests carries
//! to the server in `_meta`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// A client of the `initialize` era, as its `initialize` said.
#[derive(Clone, Debug)]
pub(super) struct Client {
    /// The version it asked for and was answered with.
    pub(super) version: String,
    /// `clientInfo`.
    pub(super) info: Value,
    /// `capabilities`.
    pub(super) capabilities: Value,
    /// The runtime session its `initialize` went to, which every request of the session names
    /// (so that a signer binding runtime sessions per MCP session keeps it on one microVM).
    pub(super) runtime_session: Option<http::HeaderValue>,
}

impl Client {
    /// Names the session's runtime session on a request, unless it names one itself.
    pub(super) fn name_runtime_session(&self, headers: &mut http::HeaderMap) {
        let name = http::HeaderName::from_static(crate::invoke::RUNTIME_SESSION_ID);
        if let Some(session) = &self.runtime_session
            && !headers.contains_key(&name)
        {
            headers.insert(name, session.clone());
        }
    }
}

/// The sessions, at most `max`: past that, the one opened longest ago is forgotten (its
/// client's next request then reaches the server as it is, and is refused there).
pub(super) struct Sessions {
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<Arc<str>, Client>,
    /// The ids, oldest first.
    order: VecDeque<Arc<str>>,
}

impl Sessions {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session for `client`: its id.
    pub(super) fn open(&self, client: Client) -> Arc<str> {
        let id: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
        let mut inner = self.lock();
        while inner.by_id.len() >= self.max {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.by_id.remove(&oldest);
        }
        inner.by_id.insert(id.clone(), client);
        inner.order.push_back(id.clone());
        id
    }

    /// The client of session `id`, if the bridge opened it.
    pub(super) fn client(&self, id: &str) -> Option<Client> {
        self.lock().by_id.get(id).cloned()
    }

    /// Ends session `id` (the client's DELETE): whether the bridge had it.
    pub(super) fn close(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let had = inner.by_id.remove(id).is_some();
        if had {
            inner.order.retain(|kept| &**kept != id);
        }
        had
    }

    /// How many sessions are open.
    pub(super) fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn client(name: &str) -> Client {
        Client {
            version: "2025-11-25".into(),
            info: json!({"name": name}),
            capabilities: json!({}),
            runtime_session: None,
        }
    }

    #[test]
    fn a_session_is_kept_until_closed_or_the_oldest_past_the_bound() {
        let sessions = Sessions::new(2);
        let a = sessions.open(client("a"));
        let b = sessions.open(client("b"));
        assert_ne!(a, b);
        assert_eq!(sessions.client(&a).unwrap().info["name"], "a");
        let c = sessions.open(client("c"));
        assert!(sessions.client(&a).is_none(), "the oldest is forgotten");
        assert_eq!(sessions.len(), 2);
        assert!(sessions.close(&b));
        assert!(!sessions.close(&b));
        assert_eq!(sessions.client(&c).unwrap().info["name"], "c");
        assert!(sessions.client("made-up").is_none());
    }
}
