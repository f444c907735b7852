//! The calls of 2026-07-28 clients that a 2025 server paused to ask something (an
//! `elicitation/create`, a `sampling/createMessage`, … on the call's event stream): the rest of
//! each call's stream, kept by the `requestState` the client was given, until the client sends
//! the call again with its responses.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::events::EventReader;
use super::legacy::LegacySession;

/// What every `requestState` the bridge gives a client starts with.
pub(super) const STATE_PREFIX: &str = "agentcore-tower/bridge/state/";

/// How many calls may wait for their clients at once: past that, the one paused longest ago is
/// given up (its stream closed).
const MAX_PAUSED: usize = 1_000;

/// How long a call waits for its client to come back: a user answers a question in minutes.
const PAUSED_FOR: Duration = Duration::from_secs(60 * 60);

/// A call the server paused: the rest of its stream, and what the server asked.
#[derive(Debug)]
pub(super) struct Paused {
    /// The rest of the server's answer.
    pub(super) stream: EventReader,
    /// The session the call runs in, where the client's responses are posted.
    pub(super) session: LegacySession,
    /// The id of the request as the server has it (what its final answer names).
    pub(super) id: Value,
    /// Whether its result is one 2026-07-28 gives caching hints.
    pub(super) cacheable: bool,
    /// The server's request: its key in the client's `inputRequests`, its id, its method.
    pub(super) asked: (String, Value, String),
    since: Instant,
}

impl Paused {
    /// A call paused now.
    pub(super) fn new(
        stream: EventReader,
        session: LegacySession,
        id: Value,
        cacheable: bool,
        asked: (String, Value, String),
    ) -> Self {
        Self {
            stream,
            session,
            id,
            cacheable,
            asked,
            since: Instant::now(),
        }
    }
}

/// The paused calls, by the `requestState` each client was given.
#[derive(Default)]
pub(super) struct PausedCalls(Mutex<HashMap<String, Paused>>);

impl PausedCalls {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Paused>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `paused`: the `requestState` its client is to send back. Calls past their hour,
    /// and past the bound the oldest, are given up.
    pub(super) fn park(&self, paused: Paused) -> String {
        let state = format!("{STATE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let mut calls = self.lock();
        calls.retain(|_, call| call.since.elapsed() < PAUSED_FOR);
        while calls.len() >= MAX_PAUSED {
            let Some(oldest) = calls
                .iter()
                .min_by_key(|(_, call)| call.since)
                .map(|(state, _)| state.clone())
            else {
                break;
            };
            calls.remove(&oldest);
        }
        calls.insert(state.clone(), paused);
        state
    }

    /// The call paused under `state`, taken out: a state is good once, within its hour.
    pub(super) fn take(&self, state: &str) -> Option<Paused> {
        self.lock()
            .remove(state)
            .filter(|call| call.since.elapsed() < PAUSED_FOR)
    }

    /// How many calls wait for their clients.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
