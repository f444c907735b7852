//! rmcp (the official Rust MCP SDK) over this crate's stack (feature `rmcp`).
//!
//! [`TowerClient`] implements rmcp's [`StreamableHttpClient`] for any tower service that takes an
//! `http::Request<Full<Bytes>>` and answers an `http::Response<B>` with a `Bytes` body — this
//! crate's layers over hyper-util's client, a whole stack of your own, or anything else that
//! speaks HTTP. rmcp's own clients (reqwest, Unix socket) each own their HTTP client; this one
//! lets the middleware sit between rmcp and the wire:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), agentcore_tower::BoxError> {
//! use agentcore_tower_emulator::{Emulator, EmulatorConfig};
//! use agentcore_tower::rmcp::{RecordTapLayer, TowerClient};
//! use agentcore_tower::{ReplayGuardLayer, recommended_layers};
//! use rmcp::ServiceExt as _;
//! use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
//!
//! // A local AgentCore Runtime; for a real one, build the signer from
//! // `SigV4InvokeLayer::builder(InvokeTarget::arn(..), credentials)`.
//! let emulator = Emulator::start(EmulatorConfig::default()).await?;
//! let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//!     .build_http();
//! let stack = tower::ServiceBuilder::new()
//!     // Every call's attempt record, with what the call was for.
//!     .layer(RecordTapLayer::new(|exchange, record| println!("{exchange}:\n{record}")))
//!     .layer(recommended_layers(
//!         ReplayGuardLayer::new().idempotent_tools(["add"]),
//!         emulator.signer().build()?,
//!     ))
//!     .service(http);
//!
//! // rmcp needs a URI; SigV4InvokeLayer sends every request to its InvokeTarget instead.
//! let transport = TowerClient::new(stack).into_transport("http://agentcore.invalid/mcp");
//! // A protocol version that has `initialize` (rmcp's default, 2026-07-28, has none).
//! let client = ClientConfig::default()
//!     .with_protocol_version(ProtocolVersion::V_2025_06_18)
//!     .serve(transport)
//!     .await?;
//! let tools = client.list_all_tools().await?;
//! assert_eq!(tools.len(), 3);
//! let arguments = serde_json::json!({"a": 2, "b": 3}).as_object().cloned().unwrap_or_default();
//! let sum = client
//!     .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
//!     .await?;
//! assert_eq!(sum.content[0].as_text().map(|t| t.text.as_str()), Some("5"));
//! client.cancel().await?;
//! # Ok(())
//! # }
//! ```
//!
//! ```text
//! rmcp client ── StreamableHttpClientTransport ── TowerClient ── RecordTap ── tower stack ── HTTP client
//! ```
//!
//! rmcp is a public dependency of this module: its types appear in the API, so the feature
//! follows rmcp 3.x, and a new major version of rmcp is a new major version of this crate.
//! Inside the examples `rmcp::` is the SDK itself, a dependency of your own
//! (`default-features = false, features = ["client"]` is enough).
//!
//! # Seeing the attempt records
//! rmcp never hands the app an HTTP response, so the [`AttemptRecord`] this crate's layers put
//! in the response's extensions (or in the [`Error`](crate::Error)) is out of reach above rmcp.
//! Two ways to see it:
//! * [`RecordTap`] (or [`RecordTapLayer`]), outermost, between [`TowerClient`] and the stack:
//!   it hands every call's record to a callback with the [`Exchange`] it was for (`POST
//!   tools/call add`, the JSON-RPC id) — when the answer's head arrives, when the call fails,
//!   and when it is dropped unfinished (a deadline, rmcp cancelling): then the attempt in
//!   flight shows "sent, no answer yet". Over a `tower::timeout` too: it passes the service's
//!   error type through.
//! * `on_record` of any of the crate's layers
//!   ([`RetryLayer::on_record`](crate::retry::RetryLayer::on_record)): the record alone, once per call
//!   that passed the layer.
//!
//! # An expired MCP session: rmcp re-initialises, and the guard sees a new call
//! A Streamable HTTP server that does not know the `Mcp-Session-Id` a request carries (it
//! restarted, or ended the session) answers HTTP 404. [`TowerClient`] reports that 404 as
//! rmcp's [`StreamableHttpError::SessionExpired`] — unless the 404 carries `x-amzn-errortype`:
//! then it is AgentCore's own (`ResourceNotFoundException`: a wrong runtime ARN or qualifier),
//! which a new MCP session could not cure, and rmcp gets it as an unexpected answer. On
//! `SessionExpired` rmcp (with `reinit_on_expired_session`, its default) sends its saved
//! `initialize` again without a session, then `notifications/initialized`, then re-sends every
//! message that got the 404 — once each; not its control messages (cancellations, answers to
//! the server).
//!
//! How that meets the stack, [`ReplayGuardLayer`](crate::ReplayGuardLayer) among it:
//! * **The 404 is delivered as it came.** It is no refusal of AgentCore's error table, so no
//!   layer re-sends it: the call ends with one attempt, `HTTP 404 -> … delivered`.
//! * **rmcp's re-send is a new call**, as are the re-initialisation's two requests: a new
//!   request with a record of its own, a budget of its own (`max_attempts` and the wait
//!   ceiling count again from zero; a [`CallBudget`](crate::CallBudget) of the first call is not
//!   carried over), judged afresh by every replay rule. A [`RecordTap`] sees both calls, each
//!   with its record, and the same JSON-RPC id ([`Exchange::request_id`]).
//! * **It is safe, even for a tool that is not idempotent**, because the 404 ran nothing: the
//!   transport's rule is that a server which ended a session answers 404 to every request
//!   carrying its id — it does not process them. The re-send is rmcp's decision on the server's answer,
//!   not a retry of a failure that may have run, so no replay rule is asked for it. That
//!   assumption is the server's to keep: one that ran the request and then answered 404 would
//!   have it run twice. For such a server, turn rmcp's recovery off
//!   (`StreamableHttpClientTransportConfig::reinit_on_expired_session(false)`).
//! * **What the guard still rules**: every request of the recovery is an ordinary call. A
//!   dropped connection or a 5xx while re-sending is judged as for any call (an undeclared
//!   `tools/call` is not sent again); a throttle or a session-busy refusal is waited out.
//! * **The runtime session**: with [`RuntimeSessions::PerLayer`](crate::invoke::RuntimeSessions)
//!   (the default) the new MCP session goes to the same runtime session (the same microVM);
//!   with `PerMcpSession` the new `initialize`, carrying no `Mcp-Session-Id`, gets a runtime
//!   session of its own, and the new `Mcp-Session-Id` is bound to it.
//!
//! Or let the stack recover instead: with
//! [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) in the stack (above the signer),
//! the 404 never reaches rmcp — the layer opens the new session itself, re-sends the request
//! within the same call (one record, asked of the replay rule, `assumes
//! refused-before-execution`), and with `PerMcpSession` keeps the new session on the old one's
//! runtime session. rmcp's own recovery then never runs: one of the two recovers, never both. It
//! runs only when the layer could not (opening the new session failed, or the layer never saw
//! the session opened), and the 404 reaches rmcp as above.
//!
//! `tests/doors/rmcp_client.rs` (`an_expired_mcp_session_is_opened_again_and_the_call_runs_once`)
//! shows it with the non-idempotent `counter`: two calls, one 404, one run.
//!
//! # What goes out
//! * **POST**: the JSON-RPC message serialized as the body, `content-type: application/json`,
//!   `accept: application/json, text/event-stream`.
//! * **GET** (the standalone server stream): `accept: text/event-stream`, plus `last-event-id`
//!   when rmcp resumes a stream.
//! * **DELETE** (the end of a session): no body.
//! * On all three: `mcp-session-id` when rmcp has a session, `authorization: Bearer …` (marked
//!   sensitive) only when rmcp was given a token, and every header of rmcp's `custom_headers`
//!   (among them `MCP-Protocol-Version`, which rmcp adds once the version is negotiated). The
//!   reserved `accept`, `mcp-session-id` and `last-event-id` are refused as custom headers with
//!   [`StreamableHttpError::ReservedHeaderConflict`], as rmcp's own clients do.
//!
//! Behind [`SigV4InvokeLayer`](crate::SigV4InvokeLayer) the request URI is not where requests
//! go (the layer sends them to its `InvokeTarget`), and the layer answers the GET and the
//! DELETE itself with 405, sending nothing: rmcp goes on without the server stream, and closes
//! all the same. (With
//! [`stop_session_on_delete`](crate::invoke::SigV4InvokeLayerBuilder::stop_session_on_delete)
//! the DELETE ends the runtime session instead.)
//!
//! # How answers map to rmcp
//! | answer | rmcp sees |
//! |---|---|
//! | POST 202 / 204 | `Accepted` |
//! | POST 2xx `application/json` | the body collected (within `max_json_response_size`) and parsed as a `ServerJsonRpcMessage`: `Json(message, mcp-session-id)` |
//! | POST 2xx `text/event-stream` | an SSE stream over the body (each event within `max_sse_event_size`): `Sse(stream, mcp-session-id)` |
//! | POST 2xx to a notification or a response, empty or of another type | `Accepted` |
//! | POST 404 to a request that carried `mcp-session-id`, without `x-amzn-errortype` | `SessionExpired` (above) |
//! | POST 429; 5xx unless its JSON body is a JSON-RPC error | `HttpStatus(HttpStatusError { status, retry_after })` (the raw `Retry-After`); the body of a 429 or of a non-JSON 5xx is not read |
//! | POST 4xx/5xx whose JSON body is a JSON-RPC error (not 401/403) | `Json(error)`, so the caller sees the server's error |
//! | 401 / 403 with `WWW-Authenticate` | `AuthRequired` / `InsufficientScope` |
//! | any other non-2xx | `UnexpectedServerResponse("HTTP 409 RetryableConflictException: <body prefix>")`: the status, AWS's `x-amzn-errortype` if any, and at most `max_error_response_size` bytes of the body |
//! | a body that is not what its `content-type` says | `UnexpectedServerResponse` with a lossy preview of the bytes (a notification's answer is `Accepted` anyway) — never a panic |
//! | GET 405 | `ServerDoesNotSupportSse` (rmcp goes on without the stream) |
//! | GET 2xx `text/event-stream` | the event stream; another content type is `UnexpectedContentType` |
//! | DELETE 405 | `ServerDoesNotSupportDeleteSession` (rmcp logs it and closes) |
//! | DELETE 2xx or 404 (the session is gone either way) | `Ok(())` |
//! | GET / DELETE 429 or 5xx; other failures | `HttpStatus`; `UnexpectedServerResponse` as above |
//! | the tower service fails | `Client(TowerClientError::Service(error))`: for this crate's layers an [`Error`](crate::Error) carrying the record |
//!
//! rmcp retries none of these itself (except the re-initialisation after `SessionExpired`):
//! retrying throttles and refusals is the stack's job.
//!
//! # Limits
//! rmcp's size limiters are private to rmcp, so this module applies rmcp's
//! [`StreamableHttpResponseLimits`] itself: a JSON body past `max_json_response_size` is
//! refused ([`StreamableHttpError::ResponseBodyTooLarge`]); an SSE event past
//! `max_sse_event_size` ends its stream with [`TowerClientError::SseEventTooLarge`]; an error
//! body is read only up to `max_error_response_size`, for the diagnostic.
//!
//! # MCP 2026-07-28's probe
//! With `ClientLifecycleMode::Auto`, rmcp probes with a sessionless `server/discover` and falls
//! back to `initialize` when the server refuses it. A server of an earlier protocol refuses it
//! with a 4xx that may carry no JSON-RPC error, or one with an id of its own (the Python SDK's
//! `"server-error"`): as rmcp's own clients do, such a refusal (any 4xx but 401, 403 and 429,
//! and not an AWS error such as an unknown runtime) reaches rmcp as a JSON-RPC error
//! correlated to the probe — the server's own error when the body is one, else an
//! invalid-request error quoting the answer — so the fallback happens.
//!
//! rmcp waits 10 s for the probe's answer in `Auto` mode, then sends `initialize`. Its worker
//! cannot cancel the first message of the lifecycle, though: it would hand rmcp the probe's
//! answer whenever it came — through a cold start of more than 10 s, while the stack waits out
//! AgentCore's session-busy refusals, after `initialize` was sent, and rmcp's handshake would
//! fail (`conflict initialized response id`). So the first probe (id 0) is not sent at all:
//! [`TowerClient`] answers it at once with the error by which a server asks for a probe again
//! (-32022, the requested version among the supported ones), and rmcp sends `server/discover`
//! once more, as a request it cancels when its 10 s end. Through a long cold start `Auto` mode
//! then falls back to `initialize`, and `Discover` mode waits it out; against a server that
//! answers in time nothing changes but the probe's id. `tests/doors/rmcp_client.rs`
//! (`auto_mode_through_a_cold_start_longer_than_rmcps_discover_wait_connects_and_runs_a_call_once`)
//! shows it.
//!
//! [`AttemptRecord`]: crate::AttemptRecord
//! [`StreamableHttpClient`]: ::rmcp::transport::streamable_http_client::StreamableHttpClient
//! [`StreamableHttpError::ReservedHeaderConflict`]: ::rmcp::transport::streamable_http_client::StreamableHttpError::ReservedHeaderConflict
//! [`StreamableHttpError::ResponseBodyTooLarge`]: ::rmcp::transport::streamable_http_client::StreamableHttpError::ResponseBodyTooLarge
//! [`StreamableHttpError::SessionExpired`]: ::rmcp::transport::streamable_http_client::StreamableHttpError::SessionExpired
//! [`StreamableHttpResponseLimits`]: ::rmcp::transport::streamable_http_client::StreamableHttpResponseLimits

mod answer;
mod client;
mod error;
mod probe;
mod sse;
mod tap;

pub use client::TowerClient;
pub use error::TowerClientError;
pub use tap::{Exchange, RecordTap, RecordTapFuture, RecordTapLayer};
