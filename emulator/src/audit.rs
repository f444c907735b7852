//! What the emulator saw, for tests to read: [`Audit`], every [`Received`] request, every
//! [`CreatedTask`] and [`TaskRequest`], and where each invocation without a runtime session id
//! was [`Routed`].

use std::collections::HashMap;

/// What the emulator saw, for tests to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Audit {
    /// Requests received (every method and path).
    pub requests: u64,
    /// Executions per tool.
    pub executions: HashMap<String, u64>,
    /// Executions per tool and JSON-RPC request id, to find a call that ran twice.
    pub executions_by_id: HashMap<(String, String), u64>,
    /// Session-busy refusals sent (both forms; not counting `BusyAfterRun`).
    pub busy_refusals: u64,
    /// Of those, the refusals of a request that met its runtime session's microVM terminating
    /// (after its idle timeout or lifetime, for the
    /// [`termination_delay`](super::EmulatorConfig::termination_delay)).
    pub busy_terminating: u64,
    /// Requests answered -32010 / HTTP 424 "Runtime initialization time exceeded"
    /// ([`Fault::InitializationTimedOut`](super::Fault::InitializationTimedOut)). Nothing ran;
    /// each microVM they met is gone.
    pub initializations_timed_out: u64,
    /// 429s sent.
    pub throttled: u64,
    /// Signatures refused.
    pub signature_failures: u64,
    /// Connections dropped on purpose.
    pub dropped: u64,
    /// 500s sent.
    pub server_errors: u64,
    /// Runtime sessions started: requests that named a runtime session id not seen before (or
    /// not since its `StopRuntimeSession`), or none and no `Mcp-Session-Id` a microVM issued
    /// (the emulator then makes one up: see `routed`). A session whose microVM ended and was
    /// replaced is still the same session: see `microvms_started`.
    pub sessions_started: u64,
    /// MicroVMs started (cold starts): a runtime session's first, and each one started because
    /// the last had ended (idle timeout, lifetime, [`Emulator::end_microvm`]). Each provisions
    /// for [`provisioning`](super::EmulatorConfig::provisioning).
    ///
    /// [`Emulator::end_microvm`]: super::Emulator::end_microvm
    pub microvms_started: u64,
    /// Runtime sessions stopped by `StopRuntimeSession`.
    pub sessions_stopped: u64,
    /// 401s sent (a missing or refused bearer token).
    pub unauthorized: u64,
    /// 403s for the other door: a SigV4-signed request to a runtime that takes bearer tokens,
    /// or a bearer token sent to a runtime that takes SigV4.
    pub auth_method_mismatches: u64,
    /// MCP sessions started by `initialize` (each answered with a new `Mcp-Session-Id`), in
    /// either mode.
    pub mcp_sessions_started: u64,
    /// Gateway mode: MCP sessions ended by `DELETE /mcp`.
    pub mcp_sessions_ended: u64,
    /// Requests refused for their MCP session, in either mode: 400 (no `Mcp-Session-Id`, at a
    /// gateway or a [`stateful`](super::EmulatorConfig::stateful) runtime) and 404 (below).
    pub mcp_session_refusals: u64,
    /// Of those, the 404s: an MCP session unknown to the server (never issued, lost with its
    /// microVM, expired, or another principal's at a gateway). Nothing ran.
    pub mcp_sessions_not_found: u64,
    /// MCP 2026-07-28 requests refused with HTTP 400 and -32020 `HeaderMismatch`: a standard
    /// header that disagrees with the body, or is missing. Nothing ran.
    pub header_mismatches: u64,
    /// `InputRequiredResult`s answered (MCP 2026-07-28 multi round-trip requests): the first
    /// leg of a `confirm` call, which runs nothing.
    pub inputs_required: u64,
    /// `subscriptions/listen` requests answered with a stream.
    pub listens: u64,
    /// Tasks created (the `io.modelcontextprotocol/tasks` extension): `slow_job` and `long_job`
    /// calls answered with a task handle. Each is one execution of its tool, counted when it
    /// starts.
    pub tasks_created: u64,
    /// Every task created, in the order created: its tool, its id, where it lives.
    pub created_tasks: Vec<CreatedTask>,
    /// Every `tasks/get`, `tasks/update` and `tasks/cancel`, in the order received, with the
    /// runtime session it arrived on.
    pub task_requests: Vec<TaskRequest>,
    /// Every invocation that named no runtime session, in the order received, and where the
    /// runtime routed it.
    pub routed: Vec<Routed>,
    /// Every request, in the order received.
    pub received: Vec<Received>,
}

/// An invocation without `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`, and where the runtime
/// routed it: by its `Mcp-Session-Id` to the runtime session whose microVM issued that MCP
/// session, else to a new runtime session (AgentCore's stickiness: the runtime session id,
/// else `Mcp-Session-Id`, else a new session). The answer names the runtime session in its
/// `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Routed {
    /// The `Mcp-Session-Id` it carried.
    pub mcp_session_id: Option<String>,
    /// The runtime session it went to.
    pub runtime_session_id: String,
    /// Whether its `Mcp-Session-Id` chose it (else it is a new runtime session).
    pub by_mcp_session: bool,
}

/// One task created: a `tools/call` answered with a task handle (`resultType: "task"`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreatedTask {
    /// The tool it runs: `slow_job` or `long_job`.
    pub tool: String,
    /// Its `taskId`.
    pub task_id: String,
    /// The runtime session whose microVM holds it (`None` at a gateway).
    pub runtime_session_id: Option<String>,
}

/// One `tasks/get` (a poll), `tasks/update` or `tasks/cancel` as the emulator's MCP server met
/// it: where it arrived, and whether that server held the task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskRequest {
    /// `tasks/get`, `tasks/update` or `tasks/cancel`.
    pub method: String,
    /// The `taskId` it named.
    pub task_id: String,
    /// The runtime session it arrived on (`None` at a gateway).
    pub runtime_session_id: Option<String>,
    /// Whether the MCP server it reached holds the task (and answered it): a task lives in the
    /// microVM of the runtime session that created it, and is unknown anywhere else; a task
    /// whose TTL passed before it was done is not found either (it is gone).
    pub found: bool,
}

/// One request as the emulator received it: the headers that route it, and what it asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Received {
    /// The operation of its path: `invocations` or `stopruntimesession`; `mcp` in gateway
    /// mode; `oauth-protected-resource` for the metadata document.
    pub operation: Option<String>,
    /// Its HTTP method (`POST`, `DELETE`, `GET`, …).
    pub http_method: String,
    /// The scheme of its `Authorization` header: `sigv4`, `bearer`, `other`, or `None` without
    /// one. The token itself is never kept.
    pub authorization: Option<&'static str>,
    /// Whether its signature was accepted (never, when the emulator takes bearer tokens).
    pub signed: bool,
    /// Whether its bearer token was one of the accepted tokens.
    pub bearer_accepted: bool,
    /// `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`.
    pub runtime_session_id: Option<String>,
    /// `Mcp-Session-Id`.
    pub mcp_session_id: Option<String>,
    /// `Mcp-Method`.
    pub mcp_method: Option<String>,
    /// `Mcp-Name`.
    pub mcp_name: Option<String>,
    /// The JSON-RPC method of a one-message body.
    pub method: Option<String>,
    /// The JSON-RPC id of a one-message body, as JSON text (`7`, `"a"`).
    pub id: Option<String>,
    /// The `clientToken` of a `StopRuntimeSession` body.
    pub client_token: Option<String>,
    /// Runtime door: the `X-Amzn-Bedrock-AgentCore-Runtime-Custom-*` headers passed to the
    /// container (names in lower case, in the order received), only those the
    /// [`header allowlist`](super::EmulatorConfig::header_allowlist) names when there is one.
    pub custom_headers: Vec<(String, String)>,
    /// The W3C `traceparent` header, as received: the trace the request joins.
    pub traceparent: Option<String>,
    /// X-Ray's `X-Amzn-Trace-Id` header, as received.
    pub amzn_trace_id: Option<String>,
    /// The `traceparent` of a one-message body's `params._meta` (MCP's SEP-414): the trace the
    /// MCP server's span joins.
    pub meta_traceparent: Option<String>,
}

impl Audit {
    /// How often `tool` ran.
    pub fn executions_of(&self, tool: &str) -> u64 {
        self.executions.get(tool).copied().unwrap_or(0)
    }
}
