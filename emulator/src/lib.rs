//! A local AgentCore Runtime (or Gateway) emulator, for tests and demos of
//! [`agentcore-tower`](agentcore_tower) stacks and of any other MCP client: a crate of its own,
//! which speaks to the library only through its public contract.
//!
//! One call starts it on 127.0.0.1 (an ephemeral port); it stops when dropped. By default it
//! behaves like the AgentCore Runtime data plane in front of an MCP server:
//!
//! * **SigV4** on every request, for the configured test credentials: the signature is
//!   recomputed from the request as received ([`SignatureVerifier`]); a date more than 5
//!   minutes off, an unknown key, another region or service than configured
//!   ([`signing_name`](EmulatorConfig::signing_name)) or a mismatch get a 403
//!   `InvalidSignatureException` (or `UnrecognizedClientException`), as AWS answers.
//! * **Runtime sessions** keyed by `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` (when absent,
//!   found by the request's `Mcp-Session-Id`, else generated; returned either way), each in a
//!   microVM that provisions for
//!   [`provisioning`](EmulatorConfig::provisioning) (answering the session-busy refusal
//!   meanwhile, in the configured form: [`BusyForm`]) and ends after its
//!   [`idle_timeout`](EmulatorConfig::idle_timeout) or its
//!   [`max_lifetime`](EmulatorConfig::max_lifetime); the next request then cold-starts a new
//!   one. `StopRuntimeSession` ends a session. See [the session
//!   lifecycle](#the-session-lifecycle).
//! * **MCP** itself, every version from 2024-11-05 to 2026-07-28, each request read in its own
//!   era (see [MCP 2026-07-28](#mcp-2026-07-28); or the versions of one era only: [servers of
//!   one era](#servers-of-one-era)). Of the `initialize` era (2024-11-05,
//!   2025-03-26, 2025-06-18, 2025-11-25): `initialize` (answered with a new `Mcp-Session-Id`,
//!   which the microVM remembers; a client asking for 2026-07-28 is answered 2025-11-25),
//!   notifications (202), `ping`, `tools/list`, `tools/call` with `add` (idempotent), `echo`
//!   (read-only) and `counter` (NOT idempotent: every execution increments it, and a test can
//!   read how many ran); and, unlisted, `blob` (`{"bytes": N}`), whose answer text is N bytes
//!   streamed in 64 KiB chunks from one static buffer — for memory tests of large answers. Of
//!   2026-07-28: `server/discover`, `tools/list` and `tools/call` with three more tools
//!   (`confirm`, `weather`, `slow_job`), `subscriptions/listen`, and the tasks extension's
//!   `tasks/get`, `tasks/update`, `tasks/cancel` — which a 2025 request that declares the
//!   extension is answered too, with the task-only `long_job` (see [Tasks](#mcp-2026-07-28)).
//!   JSON answers, or SSE with [`sse`](EmulatorConfig::sse).
//! * **Faults**, scripted one by one ([`Emulator::push_fault`]) or drawn at random rates
//!   ([`FaultRates`]) for `tools/call` requests: see [`Fault`].
//! * **Audit** counters a test reads, and every request's routing headers ([`Received`]):
//!   [`Emulator::audit`]. No bearer token is ever kept in it, nor shown by any `Debug` here
//!   (a config shows how many tokens it has).
//!
//! # The doors an MCP client uses
//!
//! Two settings change the door; sessions, faults and MCP stay as above unless said otherwise.
//! Where a fact comes from follows it in parentheses: *guide*, the AgentCore developer guide;
//! *observed*, reports of answers seen from live AWS endpoints (not AWS's word); or
//! *emulator*, the emulator's own choice where neither says.
//!
//! **OAuth inbound auth on the runtime** ([`bearer_tokens`](EmulatorConfig::bearer_tokens)):
//!
//! * Requests carry `Authorization: Bearer <token>`, one of the accepted tokens (opaque here;
//!   AWS validates a JWT). A runtime takes SigV4 or a bearer token, never both *(guide: "Use
//!   JWT inbound authorization", runtime-oauth)*. [`Emulator::set_bearer_tokens`] replaces the
//!   accepted tokens at run time, so a test can make a client's token stale.
//! * No bearer token (none, or another scheme): HTTP 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="<endpoint>/runtimes/<escaped ARN>/invocations/.well-known/oauth-protected-resource?qualifier=<qualifier>"`,
//!   the qualifier as requested (`DEFAULT` when absent) *(guide: "Deploy MCP servers in
//!   AgentCore Runtime", "Authentication Error Responses for OAuth-Configured Agents", and the
//!   MCP protocol contract)*; the body is
//!   `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Missing Authentication Token"}}`
//!   *(observed: levantar-ai demos, agentcore/05-identity; CopilotKit issue #2912 shows the
//!   same with `"id":"null"`)*. Nothing runs, no runtime session starts.
//! * A token that is not accepted: the same 401 and challenge, message `OAuth authorization
//!   failed: …`. AWS answers a valid JWT of a wrong client with a 401 -32001 naming the claim
//!   *(observed: levantar-ai)*; whether that 401 carries a challenge, and whether AWS adds
//!   `error="invalid_token"`, nobody reports, so the emulator sends the one documented
//!   challenge *(emulator)*. (An unparseable token gets a 403 on AWS *(observed)*; the
//!   emulator does not model that.)
//! * A SigV4-signed request: HTTP 403 `AccessDeniedException` "Authorization method mismatch.
//!   The agent is configured for a different authorization method than what was used in your
//!   request. …" *(observed: aws/agentcore-cli issues #714 and #814; levantar-ai)*, and no
//!   challenge: nothing runs. A bearer token sent to a SigV4 runtime gets the same 403
//!   *(emulator: AWS does not say; its contracts say a SigV4 runtime answers 403 without a
//!   `WWW-Authenticate`)*. `StopRuntimeSession` takes the same door as invocations
//!   *(observed)*.
//! * `GET /runtimes/<escaped ARN>/invocations/.well-known/oauth-protected-resource?qualifier=…`
//!   answers without auth (the `GetRuntimeProtectedResourceMetadata` API, unauthenticated by
//!   design *(guide: VPC interface endpoints)*) with the RFC 9728 document
//!   `{"resource": "<endpoint>/runtimes/<escaped ARN>/invocations?qualifier=<qualifier>",
//!   "authorization_servers": [<issuer>], "bearer_methods_supported": ["header"]}`. The
//!   resource with its qualifier and the one authorization server are as observed *(observed:
//!   a probe of a live runtime)*; AWS's document had no `bearer_methods_supported`, which the
//!   emulator adds (RFC 9728 §2) *(emulator)*. The issuer is
//!   [`issuer`](EmulatorConfig::issuer), by default [`DEFAULT_ISSUER`].
//! * The ARN in these URLs is percent-encoded as the SDK encodes a path label (`:` and `/`
//!   too), and `<endpoint>` is [`Emulator::endpoint`].
//!
//! **AgentCore Gateway** ([`gateway`](EmulatorConfig::gateway)): a managed MCP server at its own
//! URL (`https://<gateway id>.gateway.bedrock-agentcore.<region>.amazonaws.com/mcp` *(guide:
//! "Use MCP sessions with your AgentCore gateway")*), here [`Emulator::gateway_url`]:
//!
//! * Plain MCP Streamable HTTP at `/mcp`: no `InvokeAgentRuntime` path, no runtime sessions, no
//!   `StopRuntimeSession`, no provisioning. `POST` carries JSON-RPC; `DELETE` with a live
//!   session ends it (200, empty) *(emulator: the MCP transport lets a server take it; AWS does
//!   not say)*; `GET` answers 405 (no server-initiated stream) *(emulator)*.
//! * Auth: SigV4 (`AWS_IAM`, signing name `bedrock-agentcore`), or bearer tokens as above
//!   (`CUSTOM_JWT`) *(guide: gateway inbound authorization)*. Without an accepted token: 401
//!   with `WWW-Authenticate: Bearer error="invalid_token", resource_metadata="<endpoint>/.well-known/oauth-protected-resource"`
//!   *(guide: a 401 for no token or an invalid one, with `resource_metadata` (and `scope`,
//!   which the emulator has none of); observed: the exact header, with `error="invalid_token"`
//!   even without a token, in the samples' Entra and Okta inbound-auth guides)*, body
//!   `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Invalid Bearer token"}}`, also the
//!   answer to a SigV4-signed request *(observed: a user's report of a SigV4 call to a JWT
//!   gateway)*. `GET /.well-known/oauth-protected-resource` answers the document above with
//!   `resource` `<endpoint>/mcp` *(observed: the same guides)*.
//! * MCP sessions, as a session-enabled gateway keeps them *(guide: gateway sessions; the
//!   samples' gateway-sessions tutorial for the messages)*: `initialize` opens a new session
//!   and answers its `Mcp-Session-Id`; any other request without the header gets 400
//!   ("Missing required Mcp-Session-Id header"); an unknown or expired id, or another
//!   principal's, gets 404 ("Session not found or expired"), nothing runs. The bodies are
//!   JSON-RPC errors -32000 and -32001 *(emulator: the codes of the MCP TypeScript SDK's
//!   transport; AWS's bodies are not documented)*. A session lasts
//!   [`gateway_session_timeout`](EmulatorConfig::gateway_session_timeout) from its
//!   `initialize` (one hour by default) or until [`Emulator::expire_mcp_session`] (or
//!   [`expire_mcp_sessions`](Emulator::expire_mcp_sessions)). The principal is the access
//!   key id for SigV4 (AWS takes the principal ARN) and, for a bearer token, its `sub` claim when it is a JWT that
//!   has one, as AWS scopes sessions *(guide: gateway sessions)*, so a refreshed token of the
//!   same user keeps the user's sessions; another token is a principal of its own.
//! * Faults apply to `tools/call` as on the runtime.
//!
//! **The signing name** ([`signing_name`](EmulatorConfig::signing_name), default
//! [`DEFAULT_SIGNING_NAME`]) is the SigV4 service name signatures must be scoped to, in either
//! mode: with `execute-api` and gateway mode, the emulator plays an API Gateway in front of an
//! MCP server at `/mcp`. [`Emulator::signer`] signs as `bedrock-agentcore`.
//!
//! ```
//! use std::time::Duration;
//! use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let emulator = Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(200))).await?;
//! emulator.push_fault(Fault::Throttle { retry_after: Some(agentcore_tower_emulator::RetryAfter::Seconds(1)) });
//! println!("runtime {} at {}", emulator.runtime_arn(), emulator.endpoint());
//! assert_eq!(emulator.audit().requests, 0);
//! # Ok(())
//! # }
//! ```
//!
//! A gateway behind bearer tokens:
//!
//! ```
//! use agentcore_tower_emulator::{Emulator, EmulatorConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let emulator = Emulator::start(EmulatorConfig::default().gateway(true).bearer_tokens(["token-1"])).await?;
//! assert_eq!(emulator.gateway_url(), format!("{}/mcp", emulator.endpoint()));
//! // Later: the client's token goes stale, and only a refreshed one is accepted.
//! emulator.set_bearer_tokens(["token-2"]);
//! # Ok(())
//! # }
//! ```
//!
//! # MCP 2026-07-28
//!
//! A request is of MCP 2026-07-28 when its `MCP-Protocol-Version` header or its
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` names a stateless version
//! ([`protocol::is_stateless`](agentcore_tower::protocol::is_stateless)), and it is not `initialize`
//! (which negotiates down, whatever it names). Such a request is in no MCP session, at either
//! door: no `Mcp-Session-Id` is issued, none is required (not even by a
//! [`stateful`](EmulatorConfig::stateful) runtime or a gateway), one it carries is ignored.
//! Where a shape comes from follows it: *rmcp*, the official Rust SDK 3.11 (its model and its
//! Streamable HTTP server); *Python*, the official Python SDK 2.3.0.
//!
//! * **Checks, before anything runs**, first failure wins: no version in `_meta` → HTTP 400,
//!   -32602 "Invalid params: request _meta is missing or has malformed required fields: …"
//!   *(rmcp; Python: the same code)*; a standard header that disagrees with the body or is
//!   missing — `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and for `tools/call` the
//!   `Mcp-Param-*` the tool's `x-mcp-header` annotations ask for
//!   ([`protocol::check_request_headers`](agentcore_tower::protocol::check_request_headers)) → HTTP 400,
//!   -32020 `HeaderMismatch` naming what disagrees ([`Audit::header_mismatches`]); a version not
//!   spoken → HTTP 400, -32022 "Unsupported protocol version" with `data: {"requested": …,
//!   "supported": […]}` *(rmcp)*; no `clientCapabilities` in `_meta` → HTTP 400, -32602
//!   *(rmcp)*. A method the revision does not have (`ping` among them) → HTTP 404, -32601
//!   *(rmcp; the specification)*. A batch or a posted response → HTTP 400, -32600; a
//!   notification → 202, dropped *(Python)*. Other errors are JSON-RPC errors in an HTTP 200
//!   *(rmcp's status mapping)*.
//! * **Results** carry `resultType: "complete"` (or their own) *(SEP-2322)*; `tools/list`
//!   adds `ttlMs: 0` and `cacheScope: "private"` *(rmcp's caching hints for a list that sets
//!   none)*, and lists all seven tools (a client of an earlier version is shown the first three
//!   only; the others still answer it by name).
//! * **`server/discover`** answers rmcp's `DiscoverResult`: `supportedVersions` (every version
//!   spoken, 2026-07-28 included), `capabilities` (`tools.listChanged` and the extension
//!   `io.modelcontextprotocol/tasks`), `ttlMs: 0`, `cacheScope: "private"`, and the server in
//!   `_meta["io.modelcontextprotocol/serverInfo"]`. Sent without a 2026-07-28 version, it is an
//!   unknown method (-32601 in an HTTP 200), as to a 2025 server, and a client in auto mode
//!   falls back to `initialize`.
//! * **`confirm`** (`{"action": "…"}`; "asks the user to confirm, then runs; NOT
//!   idempotent"): a multi round-trip request *(SEP-2322, rmcp's `InputRequiredResult`)*. A
//!   call without `inputResponses` answers `resultType: "input_required"` with one
//!   `elicitation/create` form request (`inputRequests.confirm`) and an opaque `requestState`,
//!   and runs nothing ([`Audit::inputs_required`]); the call sent again with
//!   `inputResponses.confirm = {"action": "accept", "content": {"confirmed": true}}` and that
//!   state (for the same arguments) runs once, counted in [`Audit::executions`]; another answer
//!   runs nothing. A state not issued for these arguments, or none: -32602 "Invalid or expired
//!   requestState" *(Python's wire error)*. A state may be used again, as at a stateless
//!   server: a second leg sent twice runs twice. Of an earlier version, a tool error saying it
//!   needs 2026-07-28.
//! * **`weather`** (`{"city": "…"}`, the city annotated `x-mcp-header: City`): its calls must
//!   carry `Mcp-Param-City`, in the revision's encoding.
//! * **`subscriptions/listen`**: a `text/event-stream` answer whose first event is
//!   `notifications/subscriptions/acknowledged`, naming the notifications it will carry (of
//!   those asked, `toolsListChanged` alone) *(rmcp: what its server sends first)*; then each
//!   notification [`Emulator::notify_listeners`] pushes, its `_meta` naming the subscription
//!   (the listen request's id), until [`Emulator::end_listens`] ends the stream with the listen
//!   request's final result *(rmcp's `SubscriptionsListenResult`)*, or the client goes away
//!   (the stream is a channel the answer's body reads: no task is left behind).
//!   [`Audit::listens`] counts them.
//! * **Tasks** (`io.modelcontextprotocol/tasks`; *ext-tasks*, the extension's draft text,
//!   `specification/draft/tasks.md`), answered the same to a request of either era that
//!   declares the extension in its per-request capabilities
//!   (`params._meta["io.modelcontextprotocol/clientCapabilities"]` =
//!   `{"extensions": {"io.modelcontextprotocol/tasks": {}}}`), as at a dual-era server; the
//!   server's `server/discover` names it. Two tools run as tasks:
//!   * `slow_job` (*rmcp's model*): declared, a task handle at once (`resultType: "task"`,
//!     `taskId`, `status: "working"`, `createdAt`, `lastUpdatedAt`, `ttlMs: null`,
//!     `pollIntervalMs: 100`), done after [`slow_job_duration`](EmulatorConfig::slow_job_duration)
//!     (200 ms by default); not declared, it runs within the call.
//!   * `long_job` (`{"seconds": N, "ask": bool, "fail": bool}`, each optional; NOT idempotent)
//!     runs ONLY as a task *(ext-tasks)*: not declared, -32021 "Missing required
//!     client capability" with `data: {"requiredCapabilities": {"extensions":
//!     {"io.modelcontextprotocol/tasks": {}}}}` (HTTP 400 in 2026-07-28, 200 in a 2025
//!     session), nothing runs. Declared, a task handle with `ttlMs` =
//!     [`task_ttl`](EmulatorConfig::task_ttl) (1 hour) and `pollIntervalMs` =
//!     [`task_poll_interval`](EmulatorConfig::task_poll_interval) (5,000 ms), one execution
//!     counted. It works for `seconds` ([`long_job_duration`](EmulatorConfig::long_job_duration),
//!     40 minutes, by default), then is `completed` with the tool's `result` ("long_job done
//!     after N s"), or with `fail` `failed` with `error: {"code": -32603, "message": "long_job
//!     failed"}` and a `statusMessage`. With `ask`, at its half it is `input_required` with one
//!     `elicitation/create` form (`inputRequests["approve-1"]`) and its clock stops;
//!     `tasks/update` with `inputResponses["approve-1"] = {"action": "accept", "content":
//!     {"proceed": true}}` sets it working again, any other answer completes it with an
//!     `isError: true` result; keys not outstanding are ignored.
//!
//!   `tasks/get` answers the detailed task (`resultType: "complete"`; `inputRequests`,
//!   `result` or `error` as its status carries), `tasks/update` and `tasks/cancel` the empty
//!   `{"resultType": "complete"}`; a task not terminal is `cancelled`. A `long_job` task not
//!   terminal by `createdAt + ttlMs` is gone: -32602 "Failed to retrieve task: Task has
//!   expired", then "Task not found"; an id the server does not hold: -32602 "Failed to
//!   retrieve task: Task not found" (in an HTTP 200). Not declared: -32021 (HTTP 400 in
//!   2026-07-28, 200 in a 2025 session). A task lives in the microVM of the runtime session that created it, as in a real
//!   server's own memory: a poll that reaches another runtime session, or a later microVM, does
//!   not find it. Task time runs on tokio's clock plus [`Emulator::advance_jobs`], for tests
//!   whose client runs in real time. [`Audit::created_tasks`] and [`Audit::task_requests`]
//!   record each task created and each `tasks/*` request, with the runtime session it
//!   arrived on.
//!
//! A test pushes a notification on every open listen stream:
//!
//! ```
//! use agentcore_tower_emulator::{Emulator, EmulatorConfig};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let emulator = Emulator::start(EmulatorConfig::default()).await?;
//! let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
//! assert_eq!(emulator.notify_listeners(changed), 0, "no client listens yet");
//! assert_eq!(emulator.end_listens(), 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Servers of one era
//!
//! By default the MCP server speaks both eras, as a dual-era SDK server does. Two settings
//! narrow it to one, for tests of clients that must meet either:
//! [`newest_protocol_version("2025-11-25")`](EmulatorConfig::newest_protocol_version) (*legacy
//! only*) and [`oldest_protocol_version("2026-07-28")`](EmulatorConfig::oldest_protocol_version)
//! (*modern only*). What a client of each era meets, at the runtime door (bodies are JSON-RPC
//! errors with the request's id unless said; "answered" is as by default):
//!
//! | The client sends | Both eras | Legacy only | Modern only |
//! |---|---|---|---|
//! | `initialize`, any version | 200, the version asked for (2026-07-28: 2025-11-25) and a new `Mcp-Session-Id` | the same | 400, -32022 "Unsupported protocol version", `data: {"requested": <its protocolVersion>, "supported": ["2026-07-28"]}`; no session |
//! | a 2025 request in its session, `MCP-Protocol-Version: 2025-…` | answered | answered | 400, -32602 "Invalid params: request requires protocolVersion in request _meta" |
//! | a 2025 request with `Mcp-Session-Id` and no version header (2025-03-26) | answered | answered | 400, -32020 "Missing MCP-Protocol-Version header for request requiring per-request protocol metadata" |
//! | `server/discover` with no version | 200, -32601 "Method not found: server/discover" | the same | 400, -32020 as above |
//! | `server/discover` of 2026-07-28 | 200, `supportedVersions` from 2024-11-05 to 2026-07-28 | 400, `"id": null`, -32000 "Bad Request: Unsupported protocol version: 2026-07-28 (supported versions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)" | 200, `supportedVersions: ["2026-07-28"]` |
//! | another request of 2026-07-28 (`tools/list`, …) | answered | the same 400 | answered |
//!
//! * **Nothing runs where a request is refused**, and no MCP session opens
//!   ([`Audit::executions`], [`Audit::mcp_sessions_started`]). A modern-only server checks no
//!   `Mcp-Session-Id`, not even as a [`stateful`](EmulatorConfig::stateful) runtime or a
//!   gateway. A legacy-only gateway (or stateful runtime) checks the session first: a
//!   2026-07-28 request, which carries none, gets the 400 of a missing session (as the
//!   TypeScript SDK's transport checks the session before the version).
//! * **Legacy only** answers as the SDKs' 2025 servers: a method it does not know is -32601,
//!   and an `MCP-Protocol-Version` naming a version it does not speak is the HTTP 400 of the
//!   MCP TypeScript SDK 1.x's transport (`validateProtocolVersion`: -32000, a null id, the
//!   versions spoken newest first; the Python SDK 1.x answers the same 400 with -32600). A
//!   client in auto mode reads it as no modern server and falls back to `initialize`.
//! * **Modern only** answers as rmcp 3.11's modern-only server (a handler whose
//!   `supported_protocol_versions` is 2026-07-28 alone, `legacy_session_mode: false`,
//!   `stateless_protocol_metadata_required: true`): its messages, codes and `data` (rmcp's
//!   `ErrorData::unsupported_protocol_version`, `validate_required_protocol_meta`,
//!   `validate_required_protocol_header`). The one change is `initialize`'s status: rmcp's
//!   stateless path sends its -32022 in an HTTP 200, the Python SDK 2.x in a 400
//!   (`ERROR_CODE_HTTP_STATUS`), which the emulator follows, as it does for its other
//!   2026-07-28 errors. Neither SDK answers -32022 to a 2025 request other than `initialize`: rmcp as
//!   above, the Python SDK 2.x -32602 to a request without the `_meta` envelope (it has no
//!   modern-only mode over HTTP). Notifications, batches and posted responses are read as
//!   2026-07-28's (202, or a 400 -32600). A 2025 client has no fall-forward: it fails here.
//!
//! ```
//! use agentcore_tower_emulator::{Emulator, EmulatorConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! // `server/discover` is unknown to the first; `initialize` is refused by the second.
//! let legacy = Emulator::start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await?;
//! let modern = Emulator::start(EmulatorConfig::default().oldest_protocol_version("2026-07-28")).await?;
//! assert_eq!(modern.audit().mcp_sessions_started, 0);
//! # drop(legacy);
//! # Ok(())
//! # }
//! ```
//!
//! # The session lifecycle
//!
//! The emulator keeps time on tokio's clock ([`tokio::time::Instant`]): on a paused clock
//! (`#[tokio::test(start_paused = true)]`), `tokio::time::advance` moves provisioning, idle
//! timeouts, lifetimes and gateway session timeouts exactly as real time would, and a test of
//! hours takes milliseconds. (SigV4 dates stay on the wall clock, as AWS checks them.) Where a
//! fact comes from is tagged as above.
//!
//! * **Cold start.** A runtime session's first request starts its microVM, which provisions
//!   for [`provisioning`](EmulatorConfig::provisioning): none by default *(emulator)*; seconds
//!   on AWS, up to about 12.6 s reported *(observed: a public code comment)*. Every request of
//!   the session meanwhile gets the session-busy refusal before the MCP server sees it, in the
//!   configured [`BusyForm`]: HTTP 200 with JSON-RPC -32005 "Session operation in progress,
//!   please retry", or HTTP 409 with `x-amzn-errortype: RetryableConflictException` *(guide:
//!   the MCP protocol contract's error table; the API reference)*. Nothing runs.
//! * **Idle timeout**: [`idle_timeout`](EmulatorConfig::idle_timeout), by default
//!   [`DEFAULT_IDLE_TIMEOUT`] (900 s), AgentCore's `idleRuntimeSessionTimeout` (60 to 28,800 s
//!   for a runtime's microVMs, up to 1,209,600 s, 14 days, for AgentCore Instances)
//!   *(guide: runtime lifecycle settings)*. A request arriving that long after its session's
//!   last request (answered or refused) meets a new microVM.
//! * **Lifetime**: [`max_lifetime`](EmulatorConfig::max_lifetime), by default
//!   [`DEFAULT_MAX_LIFETIME`] (28,800 s, 8 hours), `maxLifetime` (60 to 28,800 s; up to
//!   1,209,600 s for AgentCore Instances) *(guide: the same)*, counted from the request that started the microVM, however busy it has been since.
//! * **A new microVM** is a cold start again: it provisions (busy refusals), and its MCP server
//!   knows none of the old one's MCP sessions. The runtime session id stays the same
//!   ([`Audit::sessions_started`] counts session ids, [`Audit::microvms_started`] cold
//!   starts). `StopRuntimeSession` ends the session and its microVM.
//! * **Termination** takes [`termination_delay`](EmulatorConfig::termination_delay), by
//!   default [`DEFAULT_TERMINATION_DELAY`] (15 s): "Termination can last up to 15 seconds due to
//!   logging and other process completion" *(guide: runtime lifecycle settings, for both the
//!   idle timeout and the lifetime)*. A request of the session meeting the microVM meanwhile
//!   gets the session-busy refusal, which the MCP contract gives "while the service is
//!   provisioning or tearing down that session" *(guide: the MCP protocol contract's error
//!   table)*; nothing runs, and a refused request does not keep the microVM alive
//!   ([`Audit::busy_terminating`]). The first request after it meets a new microVM. Which
//!   request the refusal goes to in the window, and that the window is the whole 15 s rather
//!   than "up to", is the emulator's choice *(emulator)*.
//! * **Initialization limit**: a microVM that does not become ready in time is given up on
//!   with -32010 (HTTP 424 `RuntimeClientError`) "Runtime initialization time exceeded. Please
//!   make sure that initialization completes in 30s." *(observed: the HTTP 424 body in
//!   aws/bedrock-agentcore-sdk-python#599 and others; 60 s and 120 s are reported too)*. Here
//!   it is the scripted [`Fault::InitializationTimedOut`], in either form, answered when the
//!   microVM has been starting for [`initialization_limit`](EmulatorConfig::initialization_limit)
//!   (30 s by default); the microVM is gone at once and nothing ran
//!   ([`Audit::initializations_timed_out`]). That the JSON-RPC form is -32010 in an HTTP 200
//!   follows the contract's table for `RuntimeClientError` *(guide)*; nobody reports it
//!   verbatim *(emulator)*.
//! * **Routing without a runtime session id**: an invocation that names none goes to the
//!   runtime session whose microVM issued its `Mcp-Session-Id` (also after that microVM ended:
//!   its next microVM then answers the 404 of an unknown session), else to a new runtime
//!   session whose id the answer names *(guide: "the platform adds `Mcp-Session-Id` and uses it
//!   for stickiness", the MCP protocol contract; observed: a public sample measured the new
//!   session without a stable id)*. [`Audit::routed`] records each. A request routed to a new
//!   runtime session is held while that session's microVM provisions, then served, not
//!   refused: its client names no session, so it could never come back to this one, and the
//!   contract gives the busy refusal to "a second operation" on a session being provisioned
//!   *(guide: the MCP protocol contract's error table; the hold is the emulator's reading)*.
//! * **MCP sessions live in the microVM.** `initialize` always opens a new one and answers its
//!   new `Mcp-Session-Id`, whatever the request carried ("AgentCore always returns an
//!   `Mcp-Session-Id`" *(guide: the MCP protocol contract)*); the microVM's MCP server
//!   remembers the ids it issued until the microVM ends or
//!   [`Emulator::expire_mcp_session`] expires one.
//! * **A session the server does not know**: a request other than `initialize` that carries
//!   such an `Mcp-Session-Id` gets HTTP 404, as MCP's Streamable HTTP transport requires of a
//!   server that ended a session (the client must then initialize again) *(MCP specification,
//!   session management)*, with the body
//!   `{"jsonrpc":"2.0","id":<the request's id, or null>,"error":{"code":-32001,"message":"Session not found"}}`
//!   *(emulator: the code and message of the MCP TypeScript SDK's transport; AWS relays what
//!   the server answers)*, `content-type: application/json`, the runtime session id, and no
//!   `x-amzn-errortype`: the MCP server's own 404, relayed. The platform's 404 for an unknown
//!   runtime ARN or qualifier is another: it carries `x-amzn-errortype:
//!   ResourceNotFoundException` *(guide: the API reference)*. Nothing runs and no scripted
//!   fault is used up ([`Audit::mcp_sessions_not_found`]).
//! * **Which ids get that 404** depends on [`stateful`](EmulatorConfig::stateful). Off (the
//!   default): only an id a microVM issued and then lost, because the microVM ended or the
//!   session was expired; a request without `Mcp-Session-Id`, or with an id the emulator never
//!   issued (or one another runtime session's microVM issued and still knows), goes on, as at
//!   a server that does not check *(emulator: the many ways tests and stateless clients call
//!   it)*. On: every id that microVM did not issue or no longer knows, and a request without
//!   `Mcp-Session-Id` gets HTTP 400
//!   `{"jsonrpc":"2.0","id":<the request's id, or null>,"error":{"code":-32600,"message":"Bad Request: Missing session ID"}}`
//!   *(emulator: the message of the MCP Python SDK's transport, FastMCP's)*.
//! * **Gateway sessions** end [`gateway_session_timeout`](EmulatorConfig::gateway_session_timeout)
//!   after their `initialize`, used or not: by default [`DEFAULT_GATEWAY_SESSION_TIMEOUT`]
//!   (3,600 s), `sessionTimeoutInSeconds` (900 to 28,800 s) *(guide: gateway sessions)*; then
//!   the gateway's 404 above.
//! * **Faults a test scripts**: [`Emulator::expire_mcp_session`] and
//!   [`Emulator::expire_mcp_sessions`] (either mode), [`Emulator::end_microvm`] and
//!   [`Emulator::end_microvms`] (at once, no termination delay: the next request of the
//!   session cold-starts), [`Fault::InitializationTimedOut`]; the termination window is the
//!   idle timeout or lifetime passing on tokio's clock.
//!
//! Not modelled: provisioning longer than the initialization limit stays a long run of busy
//! refusals here (the initialization fault is scripted); an `Mcp-Session-Id` routes only to
//! the runtime session whose microVM issued it here, where AWS's own mapping is not documented.
//!
//! ```
//! use std::time::Duration;
//! use agentcore_tower_emulator::{
//!     DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_LIFETIME, Emulator, EmulatorConfig,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! assert_eq!((DEFAULT_IDLE_TIMEOUT.as_secs(), DEFAULT_MAX_LIFETIME.as_secs()), (900, 28_800));
//! // A stateful MCP server behind 12 s cold starts and a one-minute idle timeout.
//! let emulator = Emulator::start(
//!     EmulatorConfig::default()
//!         .provisioning(Duration::from_secs(12))
//!         .idle_timeout(Duration::from_secs(60))
//!         .stateful(true),
//! )
//! .await?;
//! // No runtime session has a microVM yet: nothing to end.
//! assert!(!emulator.end_microvm("a-runtime-session-id-of-33-characters"));
//! assert_eq!(emulator.audit().microvms_started, 0);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod audit;
mod config;
mod label;
mod lifecycle;
mod mcp;
mod server;
mod state;
mod verify;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_credential_types::Credentials;

pub use audit::{Audit, CreatedTask, Received, Routed, TaskRequest};
pub use config::{
    BusyForm, DEFAULT_GATEWAY_SESSION_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_INITIALIZATION_LIMIT,
    DEFAULT_ISSUER, DEFAULT_LONG_JOB_DURATION, DEFAULT_MAX_LIFETIME, DEFAULT_RUNTIME_ARN,
    DEFAULT_SIGNING_NAME, DEFAULT_SLOW_JOB_DURATION, DEFAULT_TASK_POLL_INTERVAL, DEFAULT_TASK_TTL,
    DEFAULT_TERMINATION_DELAY, EmulatorConfig, Fault, FaultRates, PlatformForm, RetryAfter,
};
pub(crate) use state::{McpSession, Principal, State};
pub use verify::{SignatureError, SignatureVerifier};

/// A running emulator. Stops when dropped.
pub struct Emulator {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for Emulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tokens = self
            .state
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Vec::len);
        f.debug_struct("Emulator")
            .field("addr", &self.addr)
            .field("config", &self.state.config)
            .field("bearer_tokens_now", &tokens)
            .finish()
    }
}

impl Emulator {
    /// Starts the emulator on 127.0.0.1, on an ephemeral port, in the current tokio runtime.
    pub async fn start(config: EmulatorConfig) -> std::io::Result<Emulator> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut verifier =
            SignatureVerifier::new(config.region.clone(), config.signing_name.clone());
        for credentials in &config.credentials {
            verifier = verifier.with_credentials(credentials.clone());
        }
        let seed = config.rates.map_or(0, |r| r.seed);
        let state = Arc::new(State {
            endpoint: format!("http://{addr}"),
            tokens: Mutex::new(config.bearer_tokens.clone()),
            config,
            verifier,
            runtime: Mutex::new(lifecycle::Runtime::default()),
            mcp_sessions: Mutex::new(HashMap::new()),
            faults: Mutex::new(VecDeque::new()),
            request_faults: Mutex::new(VecDeque::new()),
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            audit: Mutex::new(Audit::default()),
            counter: AtomicU64::new(0),
            busy_toggle: AtomicU64::new(0),
            mcp: Mutex::new(mcp::Memory::default()),
        });
        let task = tokio::spawn(server::accept_loop(listener, state.clone()));
        Ok(Emulator { addr, state, task })
    }

    /// The endpoint to give [`InvokeTarget::endpoint`](agentcore_tower::invoke::InvokeTarget::endpoint):
    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The runtime ARN it answers to.
    pub fn runtime_arn(&self) -> &str {
        &self.state.config.runtime_arn
    }

    /// The region it checks signatures for.
    pub fn region(&self) -> &str {
        &self.state.config.region
    }

    /// A [`SigV4InvokeLayer`](agentcore_tower::invoke::SigV4InvokeLayer) builder aimed at this emulator:
    /// its runtime ARN, its endpoint, its first test credentials. Add settings, then `build()`.
    pub fn signer(&self) -> agentcore_tower::invoke::SigV4InvokeLayerBuilder {
        agentcore_tower::invoke::SigV4InvokeLayer::builder(
            agentcore_tower::invoke::InvokeTarget::arn(self.runtime_arn())
                .endpoint(self.endpoint()),
            self.credentials(),
        )
    }

    /// An [`McpEndpointLayer`](agentcore_tower::endpoint::McpEndpointLayer) builder aimed at this emulator
    /// in Gateway mode: SigV4 with its first test credentials, for its region and signing name,
    /// sending to this emulator's origin only. Requests name [`gateway_url`](Self::gateway_url).
    /// Add settings, then `build()`.
    ///
    /// ```
    /// use agentcore_tower_emulator::{Emulator, EmulatorConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let emulator = Emulator::start(EmulatorConfig::default().gateway(true).signing_name("execute-api")).await?;
    /// let signer = emulator.endpoint_signer().build()?;
    /// assert!(format!("{signer:?}").contains(r#"signing_name: "execute-api""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn endpoint_signer(&self) -> agentcore_tower::endpoint::McpEndpointLayerBuilder {
        agentcore_tower::endpoint::McpEndpointLayer::sigv4(self.credentials())
            .region(self.region())
            .signing_name(self.state.config.signing_name.clone())
            .origin(self.gateway_url())
    }

    /// The first accepted test credentials.
    pub fn credentials(&self) -> Credentials {
        self.state
            .config
            .credentials
            .first()
            .cloned()
            .unwrap_or_else(|| Credentials::new("none", "none", None, None, "emulator"))
    }

    /// Queues a fault for the next `tools/call` (faults apply in the order pushed).
    pub fn push_fault(&self, fault: Fault) {
        self.state
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(fault);
    }

    /// Queues a fault for the next MCP POST whatever its method (`initialize`, `tools/list`,
    /// …), before the `tools/call` faults of [`push_fault`](Self::push_fault): for the faults
    /// that answer before anything runs (`Throttle`, `Busy`, `ServerError { after_run: false }`,
    /// `ExpiredToken`, `Platform`).
    pub fn push_request_fault(&self, fault: Fault) {
        self.state
            .request_faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(fault);
    }

    /// What it saw so far.
    pub fn audit(&self) -> Audit {
        self.state
            .audit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The `counter` tool's value (its executions).
    pub fn counter(&self) -> u64 {
        self.state.counter.load(Ordering::SeqCst)
    }

    /// The runtime's `InvokeAgentRuntime` URL, qualifier `DEFAULT`:
    /// `http://127.0.0.1:PORT/runtimes/{escaped ARN}/invocations?qualifier=DEFAULT`. The URL a
    /// plain MCP client is given for a runtime (`McpEndpointLayer`, the proxy's `--url`), as
    /// [`InvokeTarget`](agentcore_tower::invoke::InvokeTarget) builds it (the ARN escaped the same way).
    pub fn invocations_url(&self) -> String {
        format!(
            "{}/runtimes/{}/invocations?qualifier=DEFAULT",
            self.endpoint(),
            crate::label::encode_label(self.runtime_arn())
        )
    }

    /// The gateway's MCP URL, `http://127.0.0.1:PORT/mcp` (gateway mode).
    pub fn gateway_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Replaces the accepted bearer tokens from now on (a request in flight keeps its verdict):
    /// a test makes a client's token stale, then sees the client refresh it. On an emulator
    /// started for SigV4 this turns bearer auth on.
    pub fn set_bearer_tokens(&self, tokens: impl IntoIterator<Item = impl Into<String>>) {
        *self.state.tokens.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(tokens.into_iter().map(Into::into).collect());
    }

    /// Expires every live MCP session, in either mode, as a timeout would: a request naming one
    /// then gets the 404 of an unknown session (at a runtime, whether or not it is
    /// [`stateful`](EmulatorConfig::stateful)).
    pub fn expire_mcp_sessions(&self) {
        self.state
            .mcp_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.state.runtime().expire_all();
    }

    /// Expires the MCP session `id`, in either mode, as a timeout would (or a server that ended
    /// it): a request naming it then gets the 404 of an unknown session. Whether it was live.
    pub fn expire_mcp_session(&self, id: &str) -> bool {
        self.state.expire_mcp_session(id)
    }

    /// Ends the microVM of runtime session `runtime_session_id` now, as its idle timeout or
    /// lifetime would, but with no termination delay: the session's next request meets a new
    /// microVM (a cold start, which provisions), whose MCP server knows none of the old one's
    /// MCP sessions. The runtime session itself goes on (unlike `StopRuntimeSession`). Whether
    /// a microVM was running.
    pub fn end_microvm(&self, runtime_session_id: &str) -> bool {
        let limits = self.state.limits();
        self.state
            .runtime()
            .end_microvm(runtime_session_id, tokio::time::Instant::now(), &limits)
    }

    /// Sends `notification` (a JSON-RPC notification, e.g.
    /// `{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}`) on every open
    /// `subscriptions/listen` stream, its `params._meta` naming the stream's subscription (the
    /// listen request's id) as rmcp 3.11's server stamps it. Sent as it is otherwise, whatever
    /// the stream acknowledged. How many open streams it reached (one whose client has gone is
    /// forgotten here).
    pub fn notify_listeners(&self, notification: serde_json::Value) -> usize {
        self.state.mcp().listeners.notify(&notification)
    }

    /// Ends every open `subscriptions/listen` stream, as a server shutting down (or restarting)
    /// does: each gets the final result of its listen request, then its end. How many were
    /// open. A client that listens again opens a new stream.
    pub fn end_listens(&self) -> usize {
        self.state.mcp().listeners.end()
    }

    /// Moves the jobs clock forward by `by`: the clock of every task (`long_job`'s and
    /// `slow_job`'s, in every microVM), and of none of the rest (sessions, microVMs and
    /// provisioning stay on tokio's clock). A task's elapsed time is
    /// `tokio::time::Instant::now() - started` plus what this added since it started: a test
    /// whose client runs in real time (a child process, where tokio's clock cannot be paused)
    /// runs a "40-minute" `long_job` by advancing 40 minutes. Its TTL and its timestamps
    /// (`lastUpdatedAt`) move with it. A task waiting for input does not work meanwhile.
    ///
    /// ```
    /// use std::time::Duration;
    /// use agentcore_tower_emulator::{Emulator, EmulatorConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let emulator = Emulator::start(EmulatorConfig::default()).await?;
    /// // A client created a `long_job` task; its 40 minutes pass at once.
    /// emulator.advance_jobs(Duration::from_secs(40 * 60));
    /// # Ok(())
    /// # }
    /// ```
    pub fn advance_jobs(&self, by: std::time::Duration) {
        self.state.mcp().tasks.advance(by);
    }

    /// Ends every runtime session's microVM now, as [`end_microvm`](Self::end_microvm) does
    /// one's: how many were running.
    pub fn end_microvms(&self) -> usize {
        let limits = self.state.limits();
        self.state
            .runtime()
            .end_microvms(tokio::time::Instant::now(), &limits)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::{Emulator, EmulatorConfig};
    use agentcore_tower::invoke::InvokeTarget;

    #[tokio::test]
    async fn the_invocations_url_is_the_one_the_signer_sends_to() {
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        let signed = InvokeTarget::arn(emulator.runtime_arn())
            .endpoint(emulator.endpoint())
            .qualifier("DEFAULT")
            .resolve()
            .unwrap()
            .invocation_uri();
        assert_eq!(emulator.invocations_url(), signed.to_string());
        assert_eq!(
            emulator.invocations_url(),
            format!(
                "http://{}/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Femulated_mcp-AbC123/invocations?qualifier=DEFAULT",
                emulator.addr()
            )
        );
    }
}
