//! What the layer keeps between requests (the paused jobs are `J`s): jobs paused for the client's input (by the
//! `requestState` the client echoes), the server's requests put to a client (by the id of the
//! request the layer wrote), and the jobs running (by the client's session and request id, so a
//! `notifications/cancelled` reaches them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// What every id and state the layer writes starts with, so that what comes back is told from
/// the server's own.
pub(super) const PREFIX: &str = "agentcore-tower/tasks/";

/// How many paused jobs are kept: past that, the one that would expire first is forgotten.
const MAX_PAUSED: usize = 10_000;

/// A job paused until the client answers the server's requests (MCP 2026-07-28's
/// `InputRequiredResult` round trip).
pub(super) struct Paused<J> {
    pub(super) job: J,
    /// When the job's limit passes: the state is worthless then.
    pub(super) expires: Instant,
}

/// The layer's memory, shared by its clones and the services it builds.
pub(super) struct Table<J> {
    paused: Mutex<HashMap<String, Paused<J>>>,
    awaited: crate::exchange::Awaited,
    running: Mutex<HashMap<String, Arc<Notify>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl<J> Default for Table<J> {
    fn default() -> Self {
        Self {
            paused: Mutex::default(),
            awaited: crate::exchange::Awaited::default(),
            running: Mutex::default(),
        }
    }
}

impl<J> Table<J> {
    /// Keeps a paused job: the `requestState` the client is to echo.
    pub(super) fn pause(&self, paused: Paused<J>) -> String {
        let state = format!("{PREFIX}state/{}", uuid::Uuid::new_v4());
        let mut table = lock(&self.paused);
        let now = Instant::now();
        table.retain(|_, p| p.expires > now);
        if table.len() >= MAX_PAUSED
            && let Some(first) = table
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone())
        {
            table.remove(&first);
        }
        table.insert(state.clone(), paused);
        state
    }

    /// The paused job of `state`, once: `None` when the layer holds no such job (never issued,
    /// used already, or past its limit).
    pub(super) fn resume(&self, state: &str) -> Option<Paused<J>> {
        lock(&self.paused)
            .remove(state)
            .filter(|p| p.expires > Instant::now())
    }

    /// Waits for the client's response to the request the layer wrote with `id`.
    pub(super) fn await_response(&self, id: &str) -> oneshot::Receiver<Value> {
        self.awaited.response_to(id)
    }

    /// Hands the client's response to whoever waits for it: whether someone did.
    pub(super) fn deliver(&self, id: &str, response: Value) -> bool {
        self.awaited.deliver(id, response)
    }

    /// Forgets a request the layer no longer waits for.
    pub(super) fn forget(&self, id: &str) {
        self.awaited.forget(id);
    }

    /// Registers a running job under `key`: what a cancellation of it notifies.
    pub(super) fn running(&self, key: String) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        lock(&self.running).insert(key, notify.clone());
        notify
    }

    /// The job under `key` has ended.
    pub(super) fn ended(&self, key: &str) {
        lock(&self.running).remove(key);
    }

    /// Tells the job under `key` the client cancelled it: whether one was running.
    pub(super) fn cancel(&self, key: &str) -> bool {
        match lock(&self.running).get(key) {
            Some(notify) => {
                notify.notify_one();
                true
            }
            None => false,
        }
    }

    /// How many jobs are paused, running, and requests awaited (for `Debug`).
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        (
            lock(&self.paused).len(),
            lock(&self.running).len(),
            self.awaited.len(),
        )
    }
}

/// The key of a client's request: its MCP session (none in 2026-07-28) and its id.
pub(super) fn request_key(session: Option<&str>, id: &Value) -> String {
    format!("{}\u{0}{id}", session.unwrap_or_default())
}
