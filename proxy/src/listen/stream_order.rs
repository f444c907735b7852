//! The order a server sees a session's requests in: a request waits while the session's stream
//! (its GET) is on its way upstream, and, just after `initialized`, for the client's GET to come,
//! so a server that sends its own request on that stream as soon as a tool is called finds it
//! open.

use std::time::{Duration, Instant};

use http::HeaderValue;
use tracing::debug;

use super::{Endpoint, lock};

/// How long a session's request waits for its stream on the way upstream.
const STREAM_OPENING_WAIT: Duration = Duration::from_secs(60);

/// How long after `initialized` a session's request waits for the client's GET to come: long
/// enough for a GET sent before the request, short enough that a client that never opens one
/// barely notices (its first requests, once).
const STREAM_EXPECTED_WAIT: Duration = Duration::from_millis(250);

/// A session's stream on its way upstream: dropped, it lets the session's requests go on.
pub(super) struct StreamOpening<'a> {
    endpoint: &'a Endpoint,
    session: HeaderValue,
    sent: tokio::sync::watch::Sender<bool>,
}

impl Drop for StreamOpening<'_> {
    fn drop(&mut self) {
        let _ = self.sent.send(true);
        let mut opening = lock(&self.endpoint.opening);
        // Only this stream's mark: a later GET of the session may have put its own.
        if opening
            .get(&self.session)
            .is_some_and(|mark| mark.same_channel(&self.sent.subscribe()))
        {
            opening.remove(&self.session);
        }
    }
}

impl Endpoint {
    /// Marks the session's stream as on its way upstream, until the mark is dropped.
    pub(super) fn stream_opening(&self, session: HeaderValue) -> StreamOpening<'_> {
        let (sent, receiver) = tokio::sync::watch::channel(false);
        lock(&self.opening).insert(session.clone(), receiver);
        // Only now that the mark is there: the requests that waited for the GET to come wait
        // on for it to reach the server.
        if let Some((_, arrived)) = lock(&self.expected).remove(&session) {
            let _ = arrived.send(true);
        }
        StreamOpening {
            endpoint: self,
            session,
            sent,
        }
    }

    /// The session is initialized: for [`STREAM_EXPECTED_WAIT`] its requests wait for the
    /// client's GET to come.
    pub(super) fn expect_stream(&self, session: HeaderValue) {
        let now = Instant::now();
        let mut expected = lock(&self.expected);
        // Those of clients that never opened one, once their wait is over.
        expected.retain(|_, (until, _)| *until > now);
        expected.insert(
            session,
            (
                now + STREAM_EXPECTED_WAIT,
                tokio::sync::watch::channel(false).0,
            ),
        );
    }

    /// Waits until the session's stream is open upstream: for the client's GET to come, when
    /// the session was initialized moments ago (at most [`STREAM_EXPECTED_WAIT`]), then for
    /// the GET on its way upstream to be answered (at most [`STREAM_OPENING_WAIT`]).
    pub(super) async fn after_stream_opened(&self, session: &HeaderValue) {
        let expected = lock(&self.expected)
            .get(session)
            .map(|(until, arrived)| (*until, arrived.subscribe()));
        if let Some((until, mut arrived)) = expected {
            let came = tokio::time::timeout_at(until.into(), arrived.wait_for(|came| *came));
            if came.await.is_err() {
                debug!("no stream from the client within {STREAM_EXPECTED_WAIT:?} of initialized");
                lock(&self.expected).remove(session);
            }
        }
        let Some(mut opened) = lock(&self.opening).get(session).cloned() else {
            return;
        };
        let waited = tokio::time::timeout(STREAM_OPENING_WAIT, opened.wait_for(|done| *done));
        if waited.await.is_err() {
            debug!("a request went on before its session's stream was open");
        }
    }
}
