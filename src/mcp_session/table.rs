//! The sessions a layer saw opened: each with the requests that opened it, kept to be sent
//! again, and the id the server knows it by now; at most so many, the oldest forgotten first.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use http::header::AUTHORIZATION;
use http::{HeaderValue, Request, Response};

use crate::context::{CallContext, Head};
use crate::contract::MCP_SESSION_ID;

/// The sessions of one layer, keyed by the id their client holds.
pub(super) struct Sessions {
    pub(super) max: usize,
    table: Mutex<Table>,
    /// Where the sessions' durations are recorded, when the layer was given metrics.
    #[cfg(feature = "opentelemetry")]
    pub(super) metrics: Option<crate::telemetry::Metrics>,
}

#[derive(Default)]
pub(super) struct Table {
    /// The sessions by the id their client holds; two servers behind one layer may give the
    /// same id, so each id has the sessions of every endpoint that gave it (almost always one).
    by_id: HashMap<Arc<str>, Vec<Arc<Session>>>,
    /// The sessions in the order they were opened; one forgotten since stays until it reaches
    /// the front, and the queue is swept when it grows past twice the table.
    opened: VecDeque<Arc<Session>>,
    pub(super) len: usize,
}

impl Table {
    fn remove(&mut self, session: &Arc<Session>) -> bool {
        let id = &session.client_id;
        let Some(sessions) = self.by_id.get_mut(id) else {
            return false;
        };
        let before = sessions.len();
        sessions.retain(|s| !Arc::ptr_eq(s, session));
        let removed = sessions.len() < before;
        if sessions.is_empty() {
            self.by_id.remove(id);
        }
        self.len -= usize::from(removed);
        removed
    }
}

impl Sessions {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            table: Mutex::new(Table::default()),
            #[cfg(feature = "opentelemetry")]
            metrics: None,
        }
    }

    /// The client ended `session` (`error: None`), or it was lost: its 404 reached the client
    /// (`error`: why). Its duration is recorded once, when metrics are on.
    pub(super) fn ended(&self, session: &Session, error: Option<&'static str>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(metrics) = &self.metrics
            && !session
                .ended
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            let version = session
                .initialized
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .and_then(|kept| {
                    kept.head
                        .header(crate::contract::MCP_PROTOCOL_VERSION.as_str())
                });
            let from_uri = crate::telemetry::server_of(session.initialize.head.uri())
                .map(|(host, port)| (host.to_owned(), i64::from(port)));
            let server = session.server.clone().or(from_uri);
            metrics.session_ended(
                session.opened.elapsed(),
                server.as_ref().map(|(host, port)| (host.as_str(), *port)),
                version.as_ref().and_then(|v| v.to_str().ok()),
                error,
            );
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (session, error);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `id` names at the endpoint `uri` is for.
    pub(super) fn get(&self, id: &str, uri: &http::Uri) -> Option<Arc<Session>> {
        self.lock()
            .by_id
            .get(id)?
            .iter()
            .find(|s| s.is_at(uri))
            .cloned()
    }

    pub(super) fn open(&self, session: Session) {
        let session = Arc::new(session);
        let mut table = self.lock();
        // A server that gives an id again replaces the session it named.
        if let Some(old) = table.get_old(&session) {
            table.remove(&old);
        }
        table
            .by_id
            .entry(session.client_id.clone())
            .or_default()
            .push(session.clone());
        table.len += 1;
        table.opened.push_back(session);
        while table.len > self.max {
            let Some(oldest) = table.opened.pop_front() else {
                break;
            };
            table.remove(&oldest);
        }
        if table.opened.len() > 2 * self.max {
            let Table { by_id, opened, .. } = &mut *table;
            opened.retain(|s| {
                by_id
                    .get(&s.client_id)
                    .is_some_and(|live| live.iter().any(|l| Arc::ptr_eq(l, s)))
            });
        }
    }

    pub(super) fn forget(&self, session: &Arc<Session>) {
        self.lock().remove(session);
    }
}

impl Table {
    /// The session already kept under `session`'s id at its endpoint.
    fn get_old(&self, session: &Session) -> Option<Arc<Session>> {
        self.by_id
            .get(&session.client_id)?
            .iter()
            .find(|s| s.is_at(session.initialize.head.uri()))
            .cloned()
    }
}

/// A request kept to be sent again: its head and its body (the client's body type, erased).
#[derive(Clone)]
pub(super) struct Kept {
    pub(super) head: Arc<Head>,
    pub(super) body: Arc<dyn Any + Send + Sync>,
}

impl Kept {
    pub(super) fn of<B: Clone + Send + Sync + 'static>(
        request: &Request<B>,
        context: &CallContext,
    ) -> Self {
        Self {
            head: context.head_of(request),
            body: Arc::new(request.body().clone()),
        }
    }

    /// A copy, to the session `id`, with `authorization` when the request being served has one
    /// (a token refreshed since is used) — or why there is none: the body is of another type,
    /// or a header cannot be built again ([`Head::request`]).
    pub(super) fn request<B: Clone + 'static>(
        &self,
        id: Option<&Arc<str>>,
        authorization: Option<&HeaderValue>,
    ) -> Result<Request<B>, &'static str> {
        let body = (self.body.downcast_ref::<B>())
            .ok_or("the kept request's body is of another type")?
            .clone();
        let mut request = (self.head.request(body, http::Extensions::new()))
            .ok_or("a header of the kept request cannot be copied")?;
        let headers = request.headers_mut();
        headers.remove(MCP_SESSION_ID);
        if let Some(value) = id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(MCP_SESSION_ID, value);
        }
        if let Some(auth) = authorization {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        Ok(request)
    }
}

/// One MCP session the layer saw opened.
pub(super) struct Session {
    /// The id the client holds: the first the server gave.
    pub(super) client_id: Arc<str>,
    pub(super) initialize: Kept,
    pub(super) initialized: Mutex<Option<Kept>>,
    /// The id the server knows the session by now.
    pub(super) current: Mutex<Arc<str>>,
    /// How many attempts to re-open the session failed: a request that waited for one sees
    /// it, and does not try again itself.
    pub(super) failures: AtomicU64,
    pub(super) renewing: tokio::sync::Mutex<()>,
    /// When its `initialize` was answered, and whether its end was recorded.
    #[cfg(feature = "opentelemetry")]
    opened: std::time::Instant,
    /// The server its `initialize` went to (the signer's endpoint), when metrics are on.
    #[cfg(feature = "opentelemetry")]
    pub(super) server: Option<(String, i64)>,
    #[cfg(feature = "opentelemetry")]
    ended: std::sync::atomic::AtomicBool,
}

impl Session {
    pub(super) fn new(id: Arc<str>, initialize: Kept) -> Self {
        Self {
            client_id: id.clone(),
            initialize,
            initialized: Mutex::new(None),
            current: Mutex::new(id),
            failures: AtomicU64::new(0),
            renewing: tokio::sync::Mutex::new(()),
            #[cfg(feature = "opentelemetry")]
            opened: std::time::Instant::now(),
            #[cfg(feature = "opentelemetry")]
            server: None,
            #[cfg(feature = "opentelemetry")]
            ended: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether a request for `uri` is for this session's endpoint (its scheme, authority and
    /// path: the query may differ).
    pub(super) fn is_at(&self, uri: &http::Uri) -> bool {
        let own = self.initialize.head.uri();
        own.scheme() == uri.scheme()
            && own.authority() == uri.authority()
            && own.path() == uri.path()
    }

    pub(super) fn current(&self) -> Arc<str> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn has_initialized(&self) -> bool {
        self.initialized
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

/// The `Mcp-Session-Id` a successful answer opened a session with.
pub(super) fn opened_id<B>(answer: &Response<B>) -> Option<Arc<str>> {
    answer
        .status()
        .is_success()
        .then(|| crate::invoke::mcp_session_of(answer.headers()))
        .flatten()
        .map(Arc::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(uri: &str) -> Kept {
        Kept {
            head: Arc::new(Head::of(&Request::post(uri).body(()).unwrap())),
            body: Arc::new(String::new()),
        }
    }

    #[test]
    fn the_table_forgets_the_oldest_past_its_size() {
        let sessions = Sessions::new(2);
        let uri: http::Uri = "https://a.example/mcp".parse().unwrap();
        for id in ["a", "b", "c"] {
            sessions.open(Session::new(id.into(), kept("https://a.example/mcp")));
        }
        assert!(sessions.get("a", &uri).is_none());
        let b = sessions.get("b", &uri).unwrap();
        assert!(sessions.get("c", &uri).is_some());
        sessions.forget(&b);
        assert!(sessions.get("b", &uri).is_none());
        assert_eq!(sessions.lock().len, 1);
    }

    #[test]
    fn an_id_given_again_replaces_its_session_and_the_queue_stays_bounded() {
        let sessions = Sessions::new(3);
        let uri: http::Uri = "https://a.example/mcp".parse().unwrap();
        for _ in 0..100 {
            sessions.open(Session::new("same".into(), kept("https://a.example/mcp")));
        }
        assert_eq!(sessions.lock().len, 1);
        assert!(sessions.lock().opened.len() <= 6);
        assert!(sessions.get("same", &uri).is_some());
    }

    #[test]
    fn two_endpoints_that_give_one_id_keep_two_sessions() {
        let sessions = Sessions::new(10);
        sessions.open(Session::new("s".into(), kept("https://a.example/mcp")));
        sessions.open(Session::new("s".into(), kept("https://b.example/mcp")));
        assert_eq!(sessions.lock().len, 2);
        let a = sessions
            .get("s", &"https://a.example/mcp?x=1".parse().unwrap())
            .unwrap();
        assert_eq!(a.initialize.head.uri().host(), Some("a.example"));
        let b = sessions
            .get("s", &"https://b.example/mcp".parse().unwrap())
            .unwrap();
        assert_eq!(b.initialize.head.uri().host(), Some("b.example"));
        assert!(
            sessions
                .get("s", &"https://c.example/mcp".parse().unwrap())
                .is_none()
        );
        assert!(
            sessions
                .get("s", &"https://a.example/other".parse().unwrap())
                .is_none()
        );
    }
}
