//! [`ProtocolBridgeLayer`]: a client of MCP's `initialize` era at a server that speaks only
//! MCP 2026-07-28.
//!
//! MCP 2026-07-28 has no `initialize` and no MCP session: every request carries its version,
//! the client's information and capabilities in `_meta`, and a client learns the server with
//! `server/discover`. Its compatibility rules leave a client of the 2025 revisions with no way
//! forward at a server that speaks only 2026-07-28 ("legacy clients have no fall-forward"):
//! its `initialize` is refused, and that is all. Servers built on the new SDKs are appearing
//! while hosts upgrade on their own schedule.
//!
//! This layer is the bridge, and only when the direct path fails, so nothing changes where the
//! eras match:
//!
//! * a client's `initialize` is sent as it is; refused (an error that is not an authentication
//!   error, nor one of AgentCore's), the layer asks the server's `server/discover` (a 2026-07-28
//!   request of its own, with the client's information and capabilities). A server that names
//!   2026-07-28 among its versions is then bridged: the client's `initialize` is answered from
//!   the discovery — the client's own version agreed, the server's capabilities, information
//!   and instructions — with an `Mcp-Session-Id` of the layer's own, and the runtime session
//!   the `initialize` went to named on every request of the session (a signer binding runtime
//!   sessions per MCP session keeps it on that microVM, and the session's DELETE stops it). The
//!   target's era is logged once. A server that answers no discovery either gets its refusal
//!   delivered as it came — or, when it named only versions of 2026-07-28 (-32022), an error
//!   that names both ("the client speaks MCP 2025-11-25, and the server only 2026-07-28"),
//!   the server's own in its `data`;
//! * every later request of that session is sent as 2026-07-28 writes it: the revision, the
//!   client's information and capabilities in `_meta` (what the request declares itself wins),
//!   `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` headers
//!   the tools' listing annotates (learned from the `tools/list` answers that pass), no
//!   `Mcp-Session-Id`;
//! * a server's `InputRequiredResult` (it asks the user before it answers) reaches a client
//!   that reads an event stream as a 2025 server asks: each of its `inputRequests` a request
//!   on the call's stream under an id of the bridge's, the client's response (POSTed in its
//!   session, as MCP says) taken by the bridge, and the call sent again with the
//!   `inputResponses` and the server's `requestState` until the server answers it;
//! * the client's GET of the server's own stream, which the revision does not have, is carried
//!   on a `subscriptions/listen` the bridge opens in the client's name (the lists' changes):
//!   each notification passed on as it comes, the stream ended when the server ends the
//!   listen (HTTP 405, "not offered", from a server that takes none);
//! * what the revision has nothing to send to is answered by the layer: `ping` (an empty
//!   result), a notification or a response of the client's (HTTP 202); the DELETE that ends
//!   the session goes on naming its runtime session (HTTP 200 from the bridge when what is
//!   below does not end it).
//!
//! ```
//! use std::convert::Infallible;
//!
//! use agentcore_tower::bridge::ProtocolBridgeLayer;
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Full};
//! use serde_json::{Value, json};
//! use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A server that speaks only MCP 2026-07-28.
//! let server = service_fn(|request: Request<Full<Bytes>>| async move {
//!     let body = request.into_body().collect().await.unwrap().to_bytes();
//!     let message: Value = serde_json::from_slice(&body).unwrap();
//!     let (status, answer) = match message["method"].as_str().unwrap() {
//!         "server/discover" => (200, json!({"jsonrpc": "2.0", "id": message["id"], "result": {
//!             "resultType": "complete", "supportedVersions": ["2026-07-28"],
//!             "capabilities": {"tools": {}},
//!             "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "calc", "version": "2"}}}})),
//!         "initialize" => (400, json!({"jsonrpc": "2.0", "id": message["id"], "error": {
//!             "code": -32022, "message": "Unsupported protocol version",
//!             "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}})),
//!         _ => (200, json!({"jsonrpc": "2.0", "id": message["id"], "result": {
//!             "resultType": "complete", "tools": [],
//!             "version": message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]}})),
//!     };
//!     Ok::<_, Infallible>(Response::builder().status(status)
//!         .header("content-type", "application/json")
//!         .body(Full::new(Bytes::from(answer.to_string()))).unwrap())
//! });
//! let mut client = ServiceBuilder::new().layer(ProtocolBridgeLayer::new()).service(server);
//! let post = |session: Option<&str>, message: Value| {
//!     let mut request = Request::post("https://mcp.example/mcp")
//!         .header("content-type", "application/json")
//!         .header("accept", "application/json, text/event-stream");
//!     if let Some(session) = session {
//!         request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
//!     }
//!     request.body(Full::new(Bytes::from(message.to_string()))).unwrap()
//! };
//!
//! // A client of 2025-11-25 opens its session as it always does.
//! let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
//!     "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}});
//! let opened = client.ready().await.unwrap().call(post(None, initialize)).await.unwrap();
//! let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
//! let body = opened.into_body().collect().await.unwrap().to_bytes();
//! let answer: Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
//! assert_eq!(answer["result"]["serverInfo"]["name"], "calc");
//!
//! // Its requests reach the server as 2026-07-28 requests.
//! let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
//! let listed = client.ready().await.unwrap().call(post(Some(&session), list)).await.unwrap();
//! let body = listed.into_body().collect().await.unwrap().to_bytes();
//! let answer: Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(answer["result"]["version"], "2026-07-28");
//! # }
//! ```
//!
//! # Where it goes in the stack
//! Above [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) and the signer (its
//! discovery is sent through them: signed, a cold start waited out), below
//! [`TaskPollingLayer`](crate::tasks::TaskPollingLayer) (whose requests about a task of a
//! bridged session it carries like the client's). The sessions it opens are its own: at most
//! [`max_sessions`](ProtocolBridgeLayer::max_sessions) (default 10,000), the oldest forgotten
//! past that.
//!
//! The other direction — a client pinned to 2026-07-28 at a server of the `initialize` era —
//! is bridged when asked for ([`bridge_modern_clients`](ProtocolBridgeLayer::bridge_modern_clients)):
//! its `server/discover` answered from an `initialize` the bridge makes itself (one MCP session
//! per client, as each says what it is in `_meta`; opened again when the server no longer
//! knows it), its requests sent in that session, their results given the `resultType` the
//! revision reads, and the server's own requests on a call's stream (an elicitation, a
//! sampling) put to the client as the revision asks: an `InputRequiredResult`, the server's
//! stream kept waiting until the client sends the call again with its answer (see
//! [`calls_awaiting_input`](ProtocolBridgeLayer::calls_awaiting_input)).
//!
//! # Known limits
//! A server's `InputRequiredResult` reaches a 2025 client that reads no event stream as it
//! came. A bridged 2025 client's `resources/subscribe` has no counterpart in the listen the
//! bridge opens (its lists' changes only). A 2025 server's notifications outside a call (its
//! own GET stream) do not reach a client of 2026-07-28.

mod ask;
mod body;
mod carry;
mod down;
mod events;
mod legacy;
mod listen;
mod local;
mod open;
mod paused;
mod round_trip;
mod service;
mod sessions;
mod typed;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tower::Layer;

use crate::protocol::ParamHeaders;
pub use body::BridgeBody;
pub use service::{ProtocolBridge, ResponseFuture};

/// The default of [`ProtocolBridgeLayer::max_sessions`].
const MAX_SESSIONS: usize = 10_000;

/// Bridges a client of MCP's `initialize` era and a server that speaks only MCP 2026-07-28. See
/// the [module docs](self).
#[derive(Clone)]
pub struct ProtocolBridgeLayer {
    sessions: Arc<sessions::Sessions>,
    /// The target refused an `initialize` and answered `server/discover`: it speaks only
    /// 2026-07-28.
    modern_only: Arc<AtomicBool>,
    /// What the tools' listings annotate, for the `Mcp-Param-*` headers of their calls.
    params: Arc<Mutex<ParamHeaders>>,
    /// The target refused a `server/discover` as a server of the `initialize` era does.
    legacy_only: Arc<AtomicBool>,
    /// The MCP sessions the bridge holds with such a target, one per client of 2026-07-28.
    legacy: Arc<legacy::LegacySessions>,
    /// The calls of clients of 2026-07-28 that such a target paused to ask them something.
    paused: Arc<paused::PausedCalls>,
    /// Whether a client of 2026-07-28 is bridged to a server of the `initialize` era.
    down: bool,
    /// The responses of bridged clients to the server's requests put to them.
    awaited: Arc<crate::exchange::Awaited>,
    discover_timeout: Duration,
}

impl ProtocolBridgeLayer {
    /// The bridge, at most 10,000 sessions.
    pub fn new() -> Self {
        Self {
            sessions: Arc::new(sessions::Sessions::new(MAX_SESSIONS)),
            modern_only: Arc::default(),
            params: Arc::default(),
            legacy_only: Arc::default(),
            legacy: Arc::new(legacy::LegacySessions::new(MAX_SESSIONS)),
            paused: Arc::default(),
            down: false,
            awaited: Arc::default(),
            discover_timeout: Duration::from_secs(60),
        }
    }

    /// Sets how many sessions the bridge keeps (at least 1) of each kind — those it answers
    /// clients of the `initialize` era with, and those it opens with a server of that era for
    /// clients of 2026-07-28: past that, the one opened longest ago is forgotten. Starts empty
    /// tables.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.sessions = Arc::new(sessions::Sessions::new(sessions));
        self.legacy = Arc::new(legacy::LegacySessions::new(sessions));
        self
    }

    /// Bridges a client of MCP 2026-07-28 to a server of the `initialize` era too: its
    /// `server/discover` refused as such a server refuses it (an error that is no recognised
    /// error of 2026-07-28, nor an authentication error, nor AgentCore's), the bridge opens one
    /// MCP session itself (`initialize`, `notifications/initialized`: the client's information
    /// and capabilities, the newest version of that era), answers the discovery from it, and
    /// sends every later request of the revision in it — the revision's `_meta` keys taken
    /// out, its headers replaced by the session's, the answers' results given the
    /// `resultType` the revision reads. One session serves every such client of the layer.
    ///
    /// Off by default: a client of both eras (rmcp's and the SDKs' `auto` modes) falls back to
    /// `initialize` by itself after that refusal, and would be bridged instead. Turn it on for
    /// clients pinned to 2026-07-28.
    pub fn bridge_modern_clients(mut self) -> Self {
        self.down = true;
        self
    }

    /// Sets how long the bridge's `server/discover` may take, the retries of the layers below
    /// included (default 60 s): past it, the client's refusal is delivered as it came.
    pub fn discover_timeout(mut self, timeout: Duration) -> Self {
        self.discover_timeout = timeout;
        self
    }

    /// Whether the bridge has found the target of one era only: it speaks only MCP 2026-07-28
    /// (it refused an `initialize` and answered the bridge's `server/discover`), or only the
    /// `initialize` era (it refused a `server/discover` as such a server does and took the
    /// bridge's `initialize`).
    pub fn bridges(&self) -> bool {
        self.modern_only.load(Ordering::Acquire) || self.knows_legacy_only()
    }

    /// How many sessions the bridge has open.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// How many calls of clients of 2026-07-28 wait for their clients' responses to what a
    /// server of the `initialize` era asked them (each for an hour at most).
    pub fn calls_awaiting_input(&self) -> usize {
        self.paused.len()
    }

    fn knows_legacy_only(&self) -> bool {
        self.legacy_only.load(Ordering::Acquire)
    }

    /// Whether clients of 2026-07-28 are bridged.
    fn bridges_down(&self) -> bool {
        self.down
    }

    fn learn_legacy_only(&self, version: &str) {
        if !self.legacy_only.swap(true, Ordering::AcqRel) {
            tracing::info!(
                client = crate::protocol::LATEST,
                server = version,
                "the server speaks only MCP's initialize era ({version}): clients of {} are bridged",
                crate::protocol::LATEST
            );
        }
    }

    fn learn_modern_only(&self, client_version: &str) {
        if !self.modern_only.swap(true, Ordering::AcqRel) {
            tracing::info!(
                client = client_version,
                server = crate::protocol::LATEST,
                "the server speaks only MCP {}: clients of {client_version} are bridged",
                crate::protocol::LATEST
            );
        }
    }

    fn param_headers(&self) -> ParamHeaders {
        self.params
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn learn_param_headers(&self, listing: &Value) {
        self.params
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .learn(listing);
    }
}

impl Default for ProtocolBridgeLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ProtocolBridgeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtocolBridgeLayer")
            .field("bridges", &self.bridges())
            .field("sessions", &self.sessions())
            .field("calls_awaiting_input", &self.calls_awaiting_input())
            .field("bridge_modern_clients", &self.down)
            .field("discover_timeout", &self.discover_timeout)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for ProtocolBridgeLayer {
    type Service = ProtocolBridge<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ProtocolBridge {
            inner,
            layer: self.clone(),
        }
    }
}
