//! The 2026-07-28 requests in flight that a client may cancel: the revision posts no
//! notification over HTTP, so a `notifications/cancelled` closes the request's stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentcore_tower::protocol;
use serde_json::Value;

use crate::answers::is_held;

/// A request the client may cancel by closing its stream: a 2026-07-28 request with an id.
pub(super) struct Cancellable {
    /// Its id, as JSON text.
    pub(super) key: String,
    /// Whether its stream is held open by the client ([`is_held`]).
    pub(super) held: bool,
}

impl Cancellable {
    pub(super) fn of(message: &Value) -> Option<Cancellable> {
        let id = message.get("id")?;
        (message.get("method").is_some()
            && protocol::version_in_meta(message).is_some_and(protocol::is_stateless))
        .then(|| Cancellable {
            key: id.to_string(),
            held: is_held(message),
        })
    }
}

/// A request in flight that the client may cancel.
pub(super) struct InFlight {
    pub(super) abort: tokio::task::AbortHandle,
    pub(super) cancel: Cancel,
    pub(super) held: bool,
}

/// Whether the client cancelled a request, shared by its task and the stdin loop.
#[derive(Clone, Default)]
pub(super) struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
