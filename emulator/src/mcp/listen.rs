//! `subscriptions/listen` (MCP 2026-07-28): each open stream, and what a test pushes on them.
//!
//! A stream is a channel whose receiving end is the answer's body: no task runs for it, and a
//! client that drops its connection drops the body, which closes the channel; the next push or
//! end forgets it.

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::sse_event as event;

/// The `_meta` key that names the listen request a notification or the final result belongs
/// to (rmcp 3.11's `SUBSCRIPTION_ID_META_KEY`).
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One open stream: the id of the listen request, the sending end.
#[derive(Debug)]
struct Listener {
    id: Value,
    events: mpsc::UnboundedSender<Bytes>,
}

/// The open `subscriptions/listen` streams.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    open: Vec<Listener>,
}

/// `message` with `params._meta[subscriptionId]` set to `id`, as rmcp's `SubscriptionSink`
/// stamps every notification it sends on a stream.
fn stamped(message: &Value, id: &Value) -> Value {
    let mut message = message.clone();
    if let Some(object) = message.as_object_mut() {
        let params = object.entry("params").or_insert_with(|| json!({}));
        if let Some(params) = params.as_object_mut() {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(SUBSCRIPTION_ID.to_owned(), id.clone());
            }
        }
    }
    message
}

impl Listeners {
    /// Opens a stream for listen request `id`: its first event is the acknowledgement of the
    /// notifications `accepted`, as rmcp 3.11's server sends first on an established stream
    /// (`notifications/subscriptions/acknowledged`, `SubscriptionContext::establish`).
    pub(super) fn open(&mut self, id: Value, accepted: Value) -> mpsc::UnboundedReceiver<Bytes> {
        let (events, receiver) = mpsc::unbounded_channel();
        let acknowledged = json!({"jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": accepted}});
        let _ = events.send(event(&stamped(&acknowledged, &id)));
        self.open.retain(|l| !l.events.is_closed());
        self.open.push(Listener { id, events });
        receiver
    }

    /// Sends `notification` on every open stream: how many it reached.
    pub(crate) fn notify(&mut self, notification: &Value) -> usize {
        self.open
            .retain(|l| l.events.send(event(&stamped(notification, &l.id))).is_ok());
        self.open.len()
    }

    /// Ends every open stream with the final result of its listen request (rmcp 3.11's
    /// `SubscriptionsListenResult`: `resultType` and `_meta` naming the subscription and the
    /// server), then closes it: how many were open.
    pub(crate) fn end(&mut self) -> usize {
        let server_info = super::server_info();
        let mut ended = 0;
        for listener in self.open.drain(..) {
            let done = json!({"jsonrpc": "2.0", "id": listener.id, "result": {
                "resultType": "complete",
                "_meta": {SUBSCRIPTION_ID: listener.id, "io.modelcontextprotocol/serverInfo": server_info},
            }});
            ended += usize::from(listener.events.send(event(&done)).is_ok());
        }
        ended
    }
}
