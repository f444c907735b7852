//! The requests in flight that a client may cancel. A 2026-07-28 request's cancel closes its
//! stream (the revision posts no notification over HTTP); a 2025 request's is posted to the
//! server as the client wrote it, and the request then waits for no answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentcore_tower::protocol;
use serde_json::Value;

use crate::answers::is_held;

/// A request the client may cancel: a request with an id.
pub(super) struct Cancellable {
    /// Its id, as JSON text.
    pub(super) key: String,
    /// Whether its stream is held open by the client ([`is_held`]).
    pub(super) held: bool,
    /// Whether it is of 2026-07-28 (a cancel closes its stream).
    pub(super) stateless: bool,
}

impl Cancellable {
    pub(super) fn of(message: &Value) -> Option<Cancellable> {
        let id = message.get("id")?;
        message.get("method")?;
        Some(Cancellable {
            key: id.to_string(),
            held: is_held(message),
            stateless: protocol::version_in_meta(message).is_some_and(protocol::is_stateless),
        })
    }
}

/// A request in flight that the client may cancel.
pub(super) struct InFlight {
    pub(super) abort: tokio::task::AbortHandle,
    pub(super) cancel: Cancel,
    pub(super) held: bool,
    pub(super) stateless: bool,
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
