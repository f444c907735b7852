//! Tower middleware that makes MCP clients talk to AWS Bedrock AgentCore correctly: retrying
//! what is safe to retry, never re-running what may have run, and keeping the record of every
//! attempt.
//!
//! # The layers
//! * [`ThrottleRetryLayer`] — re-sends a throttled request (HTTP 429, or AgentCore's HTTP 200
//!   with JSON-RPC -32003), honouring `Retry-After` under a total-wait ceiling.
//! * [`SessionBusyRetryLayer`] — recognises AgentCore Runtime's "session operation in
//!   progress" refusal exactly (HTTP 200 + JSON-RPC -32005 with its message, or HTTP 409
//!   `RetryableConflictException`) and re-sends with a short backoff, without losing a byte of
//!   an answer it read ahead.
//! * [`ReplayGuardLayer`] — the replay rule: which failed attempt may be sent again (refusals
//!   assumed to have run nothing; a dropped connection only for what the app declared
//!   replayable); it re-sends those itself.
//! * [`SigV4InvokeLayer`] — carries an MCP Streamable HTTP POST to a runtime as AgentCore's
//!   `InvokeAgentRuntime`, signed afresh with `aws-sigv4` on every attempt (or with a bearer
//!   token, for a runtime with OAuth inbound auth), answering locally what the operation cannot
//!   carry.
//! * [`McpEndpointLayer`](endpoint::McpEndpointLayer) — in place of the invoke layer, for an
//!   AgentCore Gateway or any other SigV4- or OAuth-protected MCP URL: the request sent as it
//!   is, authenticated afresh on every attempt.
//! * [`McpSessionRecoveryLayer`] — an MCP session that outlives the server's: MCP's 404 for a
//!   session the server no longer knows (a microVM replaced after its idle timeout, a Gateway
//!   session past its timeout) opens a new session and sends the request once more.
//! * [`TaskPollingLayer`](tasks::TaskPollingLayer) — jobs past an answer's 15-minute limit for
//!   a client that does not speak MCP's Tasks extension: the call sent declaring it, the task
//!   polled on its runtime session, the final result as the answer to the client's own call.
//! * [`ProtocolBridgeLayer`](bridge::ProtocolBridgeLayer) — a client and a server of different
//!   MCP revisions (those that open a session with `initialize`, 2024-11-05 to 2025-11-25, and
//!   2026-07-28, which has none), bridged only when the direct path fails.
//! * `RecordTapLayer` (feature `rmcp`, module `rmcp`) — every call's [`AttemptRecord`] handed to
//!   a closure, for MCP clients such as rmcp that never hand the app an HTTP response.
//!
//! The three retry layers are one generic [`RetryLayer<P>`](retry::RetryLayer) over their policies
//! ([`Throttled`](throttle::Throttled), [`SessionBusy`](session_busy::SessionBusy), [`ReplayDeclarations`](replay::ReplayDeclarations)), as tower's `RetryLayer<P>` is over its
//! `Policy`; the policies are sealed ([why](retry#why-the-policies-are-sealed)). Every layer is an independent tower [`Layer`](tower::Layer): use one alone, or
//! stack them — in the recommended order, outer to inner, or in any other.
//! [`RecommendedLayers`] (or [`recommended_layers`]) is the four from the guard down as one
//! layer, each configurable, their retry layers sharing one [`RetryBudget`]:
//!
//! ```text
//! ServiceBuilder::new()
//!     .layer(TaskPollingLayer)        // a task the server answers with → polled to its end for the client
//!     .layer(TimeoutLayer)            // tower::timeout: one deadline for the whole call, retries included
//!     .layer(ProtocolBridgeLayer)     // a client of one MCP revision at a server of the other
//!     .layer(McpSessionRecoveryLayer) // MCP's 404 for an expired session → a new session, the request again
//!     .layer(ReplayGuardLayer)        // the replay rule; re-sends what may have run only when replayable
//!     .layer(ThrottleRetryLayer)      // 429 → wait (Retry-After) → same request again
//!     .layer(SessionBusyRetryLayer)   // -32005 / 409 RetryableConflictException → short backoff → again
//!     .layer(SigV4InvokeLayer)        // POST → InvokeAgentRuntime, signed afresh for every attempt
//!     .service(http_client)           // hyper-util's legacy Client (TLS: hyper-rustls), or reqwest
//! ```
//!
//! # The promises belong to the call
//! The first of this crate's layers that a call meets puts the call's context in the request's
//! extensions; every layer below — and every re-send, a clone of the request — finds the same
//! one. Through it, whatever the order:
//! * **one record**: every attempt is recorded in the call's [`AttemptRecord`] as it is handed
//!   down ("sent, no answer yet"), completed when its answer or failure arrives; the response
//!   (and every [`Error`]) carries it back; every `on_record` hook of the layers the call passed
//!   fires once, when the call ends or is dropped;
//! * **one budget**: each kind of failure has an allowance of its own — a layer's
//!   `max_attempts` and `max_total_wait` count the attempts and waits of the kind it re-sends
//!   after (session busy, throttling, an expired MCP session, a failure that may have run…),
//!   over every layer, so stacked layers never multiply them and no kind eats another's: a
//!   cold start's dozen refusals leave the first 429's re-send and a tool's re-send after a
//!   dropped connection whole. The call has one ceiling in time over all of them (90 s from its
//!   first attempt by default) and a cap on attempts in all; an app sets its own with a
//!   [`CallBudget`] (a deadline among them). Across calls, a [`RetryBudget`] (a token bucket,
//!   as the AWS SDKs' retry quota) keeps a fleet of clients from re-sending in step;
//! * **one rule**: every retry layer asks the call's replay rules before a re-send — the app's
//!   [`SharedReplayRule`](rule::SharedReplayRule) and the rule of each guard the call passed, also for the layers
//!   stacked above a guard — and every one must permit it: forbidding always wins. Without a
//!   rule, refusals the platform documents as coming before execution are re-sent on the
//!   adapter's own policy, and nothing that may have run is;
//! * **one runtime session**: the signer picks the call's runtime session at its first attempt
//!   and keeps it for every attempt; a request that names its own goes there, for that request
//!   only; many MCP sessions can share one layer, each in a runtime session of its own
//!   ([`invoke::RuntimeSessions`]).
//!
//! # What the order changes
//! Nothing of the above. What a different order does change:
//! * **Layers below the signer re-send the signed request**: the same signature and
//!   `x-amz-date`, credentials not resolved again. AgentCore accepts a signature for 5 minutes,
//!   so re-sends soon after still go through, but a credential that rotated meanwhile is not
//!   picked up — the reason the signer belongs innermost. Below it, the retry layers see the
//!   `InvokeAgentRuntime` request: the DELETE that became `StopRuntimeSession` is a POST there,
//!   not an idempotent method, and is not re-sent after a 5xx.
//! * **The signer answers GET and DELETE itself** (405): layers below it never see them.
//! * **A timeout inside the stack** times one attempt, not the call: put `tower::timeout`
//!   outermost for a deadline of the whole call (its `Elapsed` below the guard is a failure
//!   that may have run, re-sent only when replayable).
//! * **The layer named in the final `delivered`** of the record is the outermost of the crate's.
//! * **The response body type** nests in the order of the layers.
//!
//! # When sessions end
//! AgentCore sessions have a life, and a user meets all of it in an ordinary day. What the
//! stack does at each point, with its defaults (the proxy runs the same stack):
//!
//! | what happens | what the server answers | what the stack does |
//! |---|---|---|
//! | **a cold start**: a new runtime session starts a microVM (users report up to ~12.6 s) | the session-busy refusal (HTTP 200 -32005, or HTTP 409 `RetryableConflictException`) until it is up | [`SessionBusyRetryLayer`] waits it out by time: up to 45 s of waits, each at most 2 s, so the call is answered within about 2 s of the session coming up; past 45 s the refusal is delivered |
//! | **a container that does not become ready in time** (AgentCore's initialization limit: 30 s in most reports, 60 s and 120 s too) | -32010 "Runtime initialization time exceeded. …" in an HTTP 200, or HTTP 424 `RuntimeClientError` with that message | sent once more ([`initialization_attempts`](SessionBusyRetryLayer::initialization_attempts)): the message names a container that never took the request; the new microVM's cold start is waited out as above. A second one is delivered as it came; a strict tool is never re-sent. Every other -32010 may have run: re-sent only for what is declared replayable |
//! | **the microVM terminates** after its idle timeout or lifetime (up to 15 s) | the session-busy refusal until it is gone, then a cold start | waited out by the same allowance, then the next row: the call runs once |
//! | **the idle timeout** (`idleRuntimeSessionTimeout`, 900 s by default) or **the lifetime** (`maxLifetime`, 8 h by default; up to 14 days on AgentCore Instances) has passed | a new microVM's MCP server answers the old `Mcp-Session-Id` with HTTP 404 | [`McpSessionRecoveryLayer`] opens a new MCP session through the layers below (its own `initialize`, signed, refusals waited out) and sends the request once more with the new id; later requests carry it. Tell the signer the runtime's settings with [`runtime_session_idle_timeout`](invoke::SigV4InvokeLayerBuilder::runtime_session_idle_timeout) and [`runtime_session_max_lifetime`](invoke::SigV4InvokeLayerBuilder::runtime_session_max_lifetime) |
//! | **a Gateway session ends** (`sessionTimeoutInSeconds`, 3,600 s from `initialize` by default), or a stateful MCP server forgets a session | HTTP 404 for its id | the same |
//! | an unknown runtime, endpoint or qualifier | HTTP 404 with `x-amzn-errortype: ResourceNotFoundException` | delivered at once: a new session cannot help |
//! | a 404 right after a recovery, or for an id the layer never saw opened | HTTP 404 | delivered (no loop) |
//! | a request naming no runtime session (a plain MCP client given the runtime's URL: [`McpEndpointLayer`](endpoint::McpEndpointLayer), the proxy's `--url`) | AgentCore routes it by its `Mcp-Session-Id` to the runtime session that issued it, else to a new one | one MCP session stays in one microVM; after it ends, the 404 and a new session as above. [`SigV4InvokeLayer`] always names a runtime session |
//!
//! Requests that meet one expiry share one new session. With rmcp, which re-opens a session by
//! itself, one of the two recovers, never both; on MCP 2026-07-28 there is no session to lose
//! ([`mcp_session`] says more). Each layer's module docs say why its numbers are what they are.
//!
//! # Keeping the record past a deadline
//! A deadline outside the stack (`tower::timeout`) drops the call, and with it the response or
//! error that would carry the record. To keep it, put your own [`AttemptRecord`] in the
//! request's extensions before sending, or use `on_record`: the attempt in flight stays "sent,
//! no answer yet" — the server may be running it — followed by [`Verdict::CallDropped`](record::Verdict::CallDropped).
//!
//! # Naming the request type
//! Every layer accepts any request body type, so where nothing else fixes it, say which one:
//! `ServiceExt::<http::Request<Full<Bytes>>>::ready(&mut stack).await?`. (`oneshot(request)`
//! infers it from the request.)
//!
//! # Request bodies
//! A re-send is a clone of the original request, so the retry layers require the request body
//! to be `Clone` (`http_body_util::Full<Bytes>`, `String`, `Bytes`, …). A body that cannot be
//! cloned cannot be retried, and the compiler says so, rather than a stream being half-sent.
//!
//! # Example
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::ThrottleRetryLayer;
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let client = ServiceBuilder::new()
//!     .layer(ThrottleRetryLayer::new())
//!     .service(service_fn(|_req: Request<Full<Bytes>>| async {
//!         Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
//!     }));
//! let response = client
//!     .oneshot(Request::post("http://localhost/mcp").body(Full::new(Bytes::new())).unwrap())
//!     .await
//!     .unwrap();
//! assert_eq!(response.status(), 200);
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod allowance;
pub mod auth;
pub mod body;
pub mod bridge;
pub mod budget;
mod context;
pub mod contract;
pub mod endpoint;
pub mod error;
mod exchange;
pub mod invoke;
mod jsonrpc;
pub mod mcp_session;
mod peek;
pub mod protocol;
pub mod record;
pub mod redact;
pub mod replay;
#[cfg(feature = "reqwest")]
pub mod reqwest;
pub mod retry;
#[cfg(feature = "rmcp")]
pub mod rmcp;
pub mod rule;
mod sends;
pub mod session_busy;
mod stack;
pub mod tasks;
pub mod telemetry;
pub mod throttle;
mod uri;
mod urlencode;

// What a user needs first; the rest lives in its module.
pub use budget::{CallBudget, RetryBudget};
pub use error::{BoxError, Error, ErrorKind};
pub use invoke::{InvokeTarget, SigV4InvokeLayer};
pub use mcp_session::McpSessionRecoveryLayer;
pub use record::AttemptRecord;
pub use replay::ReplayGuardLayer;
pub use session_busy::SessionBusyRetryLayer;
pub use stack::{
    RecommendedBody, RecommendedEndpointStack, RecommendedLayers, RecommendedStack,
    recommended_layers,
};
pub use throttle::ThrottleRetryLayer;
