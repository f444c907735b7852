//! The client's side of a call the layer answers: what it is written, and how.

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::wire::{self, Task};

/// The client's side of one call: who gets the answer, and how.
pub(super) struct Client {
    /// The id of the client's `tools/call`.
    pub(super) id: Value,
    /// `params._meta.progressToken` of its call.
    pub(super) progress_token: Option<Value>,
    /// Whether it reads an event stream (else it gets one JSON answer at the end).
    pub(super) event_stream: bool,
    /// Whether it speaks a stateless revision (2026-07-28 and later): the server's requests
    /// are put to it as an `InputRequiredResult`, else as requests on the answer's stream.
    pub(super) stateless: bool,
    pub(super) sink: mpsc::UnboundedSender<Bytes>,
}

impl Client {
    /// Writes one message for the client: an event, or the whole JSON answer.
    pub(super) fn write(&self, message: &Value) {
        let json = message.to_string();
        let bytes = if self.event_stream {
            format!("event: message\ndata: {json}\n\n")
        } else {
            json
        };
        let _ = self.sink.send(Bytes::from(bytes));
    }

    /// Writes what tells the client the call is alive: progress for its token, else an event
    /// stream comment; nothing to a JSON reader.
    pub(super) fn alive(&self, polls: u64, task: &Task) {
        let message = task
            .status_message
            .clone()
            .unwrap_or_else(|| format!("task {} is working", task.id));
        match &self.progress_token {
            Some(token) if self.event_stream => {
                self.write(&wire::progress(token, polls, &message));
            }
            _ if self.event_stream => self.comment(&format!("task {} working", task.id)),
            _ => {}
        }
    }

    /// An event-stream comment: life, and nothing a client acts on.
    pub(super) fn comment(&self, text: &str) {
        if self.event_stream {
            let _ = self.sink.send(Bytes::from(format!(": {text}\n\n")));
        }
    }

    /// Writes the client's error answer.
    pub(super) fn error(&self, error: Value) {
        self.write(&wire::error_message(&self.id, error));
    }
}
