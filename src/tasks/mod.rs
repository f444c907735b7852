//! [`TaskPollingLayer`]: jobs longer than an answer may take, for a client that does not speak
//! MCP's Tasks extension.
//!
//! An answer has a time limit: AgentCore Gateway and Runtime answer a synchronous `tools/call`
//! within 15 minutes. The way past it is the Tasks extension (`io.modelcontextprotocol/tasks`,
//! MCP 2026-07-28; modelcontextprotocol/ext-tasks, `specification/draft/tasks.md`): a client
//! declares it in each request's `params._meta["io.modelcontextprotocol/clientCapabilities"]`,
//! the server may answer a `tools/call` with a task handle (`resultType: "task"`), and the
//! client polls `tasks/get` until the task has ended. Many clients declare no such thing; a
//! server that can run a tool only as a task then answers them -32021 "Missing required client
//! capability", and a tool that would run as a task for them runs synchronously and dies at
//! the limit.
//!
//! This layer does the Tasks side on the client's behalf:
//!
//! * a `tools/call` that does not declare the extension is sent declaring it once the target is
//!   known to offer it (a `server/discover` answer through the layer said so, the layer asked
//!   itself with [`discover_target`](TaskPollingLayer::discover_target), or
//!   [`target_offers_tasks`](TaskPollingLayer::target_offers_tasks)); otherwise it is sent as
//!   it is, and a -32021 that names the extension — the server ran nothing — is a refusal: it
//!   is sent again once, declaring it, and the record says so (`tasks: … sent again (by
//!   adapter, assumes refused-before-execution)`);
//! * a task handle answering a call the layer declared on is polled: `tasks/get` at the
//!   server's `pollIntervalMs`, each with `Mcp-Name` set to the task id and on the runtime
//!   session the task was created in (the answer's
//!   `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`), each a call of its own through the layers
//!   below, replayable (a read) — the `tools/call` that created the task is not;
//! * the client gets the task's final result as the answer to its own `tools/call`, however
//!   long the job ran: the result of a `completed` task, the request's own JSON-RPC error of a
//!   `failed` one (its message and `data` naming the task), and an error -32000 whose
//!   `data.kind` says what happened otherwise — `task_cancelled`, `task_lost` (the server no
//!   longer knows the task: expired, or its microVM ended), `task_unreachable` (polls kept
//!   failing), `task_limit` (the job ran past the layer's limit; the task is cancelled) —
//!   with `data.taskId`;
//! * while the task works, a client that reads an event stream hears of it: a
//!   `notifications/progress` for the call's `progressToken` after each poll (so its own
//!   timeout sees life), else an event-stream comment;
//! * a task that needs the client's input (`input_required`) has the server's requests put to
//!   the client in its revision's way — a 2026-07-28 client gets an `InputRequiredResult`
//!   (`resultType: "input_required"`, with a `requestState` of the layer's) and its next
//!   `tools/call` carrying that state resumes the job; a 2025 client gets each request on the
//!   answer's event stream and POSTs its response, which the layer takes (HTTP 202) — and the
//!   answers go to the server with `tasks/update` (see "The client's input" below);
//! * a client that cancels the call has the task cancelled: a 2025 client's
//!   `notifications/cancelled` for the call (passed on to the server too), or an answer dropped
//!   before the task ended (2026-07-28 cancels by closing the stream) — `tasks/cancel` is sent
//!   on the tokio runtime the drop happens on, and the call gets no answer.
//!
//! A client that declared the extension itself gets the server's answers untouched: its task
//! handles, its `tasks/*` requests, as without the layer.
//!
//! ```
//! use std::convert::Infallible;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use agentcore_tower::tasks::TaskPollingLayer;
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Full};
//! use serde_json::{Value, json};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // A server that runs `report` only as a task, done at the third poll.
//! let polls = Arc::new(AtomicU32::new(0));
//! let server = service_fn({
//!     let polls = polls.clone();
//!     move |request: Request<Full<Bytes>>| {
//!         let polls = polls.clone();
//!         async move {
//!             let body = request.into_body().collect().await.unwrap().to_bytes();
//!             let message: Value = serde_json::from_slice(&body).unwrap();
//!             let declared = message.pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions/io.modelcontextprotocol~1tasks").is_some();
//!             let answer = match message["method"].as_str().unwrap() {
//!                 "tools/call" if !declared => json!({"jsonrpc": "2.0", "id": message["id"], "error": {
//!                     "code": -32021, "message": "Missing required client capability",
//!                     "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}}),
//!                 "tools/call" => json!({"jsonrpc": "2.0", "id": message["id"],
//!                     "result": {"resultType": "task", "taskId": "t-1", "status": "working", "pollIntervalMs": 60_000}}),
//!                 _ if polls.fetch_add(1, Ordering::SeqCst) < 2 => json!({"jsonrpc": "2.0", "id": message["id"],
//!                     "result": {"resultType": "complete", "taskId": "t-1", "status": "working"}}),
//!                 _ => json!({"jsonrpc": "2.0", "id": message["id"], "result": {"resultType": "complete",
//!                     "taskId": "t-1", "status": "completed", "result": {"content": [{"type": "text", "text": "done"}]}}}),
//!             };
//!             Ok::<_, Infallible>(Response::builder()
//!                 .header("content-type", "application/json")
//!                 .body(Full::new(Bytes::from(answer.to_string())))
//!                 .unwrap())
//!         }
//!     }
//! });
//!
//! // A client that knows nothing of tasks, and reads JSON only.
//! let client = ServiceBuilder::new().layer(TaskPollingLayer::new()).service(server);
//! let call = Request::post("https://mcp.example/mcp")
//!     .header("content-type", "application/json")
//!     .header("accept", "application/json")
//!     .body(Full::new(Bytes::from_static(
//!         br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"report","arguments":{}}}"#,
//!     )))
//!     .unwrap();
//! let answer = client.oneshot(call).await.unwrap();
//! let body = answer.into_body().collect().await.unwrap().to_bytes();
//! let answer: Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(answer["id"], 7);
//! assert_eq!(answer["result"]["content"][0]["text"], "done");
//! assert_eq!(polls.load(Ordering::SeqCst), 3); // three minutes on tokio's paused clock
//! # }
//! ```
//!
//! # Where it goes in the stack
//! Above [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer), the retry layers and the
//! signer. Its polls are calls of their own through everything below it: signed, their
//! refusals waited out, their records their own, each bounded by
//! [`poll_timeout`](TaskPollingLayer::poll_timeout). A timeout outside it (tower's
//! `TimeoutLayer`) bounds the request that creates the task — until the answer's head — and
//! never the job, whose answer is written as its body; the job has a limit of its own
//! ([`max_job_duration`](TaskPollingLayer::max_job_duration)).
//!
//! # What it reads
//! A POST whose `Content-Type` is JSON: a clone of its body, read (at most 4 MiB) and parsed
//! only when it holds `tools/call` or `server/discover`. An answer to such a call: its first
//! 64 KiB, to tell a task handle — a JSON answer whole when it is smaller, an event stream until
//! it ends or brings a message of the server's own (which the client should not wait for: the
//! answer is then handed on as it is). Every other request and answer passes untouched, and
//! every answer the layer does not take over reaches the client byte for byte.
//!
//! # The client's input
//! An elicitation a 2025 client answers with an error is sent as `{"action": "cancel"}`; any
//! other request of the server's it refuses ends the job (`data.kind: task_input_refused`). A
//! 2025 client that reads no event stream cannot be asked: the task is cancelled
//! (`data.kind: task_input_required`). A `requestState` is good once, until the job's limit;
//! one the layer did not issue, or issued and saw used, is answered -32602 "Invalid or expired
//! requestState" without reaching the server. At most 10,000 jobs wait for input at once.
//!
//! # Known limits
//! Whether the target offers the extension is learned per layer, not per origin: a layer in
//! front of several MCP servers should be told with
//! [`target_offers_tasks`](TaskPollingLayer::target_offers_tasks) or left to learn from -32021.
//! A task handle that comes after other events on an event stream is not seen: the answer is
//! handed on as it came.

mod body;
mod call;
mod client;
mod discover;
mod future;
mod input;
mod job;
mod request;
mod service;
mod table;
mod wait;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tower::Layer;

pub use body::TaskBody;
pub use future::ResponseFuture;
pub use service::TaskPolling;

const LAYER: &str = "tasks";

/// Nothing known of the target yet.
const UNKNOWN: u8 = 0;
/// A call is asking the target (`server/discover`).
const PROBING: u8 = 1;
/// The target offers the extension.
const OFFERED: u8 = 2;
/// The target's `server/discover` answer did not offer it.
const NOT_OFFERED: u8 = 3;

/// How long a job may run when neither the layer nor the task (its `ttlMs`) says: AgentCore
/// Runtime's longest microVM lifetime, 8 hours.
pub const DEFAULT_JOB_LIMIT: Duration = Duration::from_secs(8 * 60 * 60);

/// The poll interval when the server suggests none (`pollIntervalMs`).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long one request about a task may take, unless told: the crate's default ceiling of a
/// call ([`CallBudget`](crate::CallBudget)).
pub const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the Tasks extension on behalf of clients that do not declare it. See the
/// [module docs](self).
#[derive(Clone)]
pub struct TaskPollingLayer {
    /// What the layer knows of the target: [`UNKNOWN`], [`PROBING`], [`OFFERED`],
    /// [`NOT_OFFERED`].
    target: Arc<AtomicU8>,
    /// Whether the layer asks the target (`server/discover`) before the first call it does not
    /// know the answer for.
    discovers: bool,
    limits: job::Limits,
    table: Arc<table::Table<job::JobState>>,
}

impl TaskPollingLayer {
    /// The layer: it learns whether the target offers the extension from the answers that pass.
    pub fn new() -> Self {
        Self {
            target: Arc::new(AtomicU8::new(UNKNOWN)),
            discovers: false,
            limits: job::Limits {
                job: None,
                poll_interval: DEFAULT_POLL_INTERVAL,
                poll_failures: 3,
                poll_timeout: DEFAULT_POLL_TIMEOUT,
            },
            table: Arc::default(),
        }
    }

    /// Declares the extension on every `tools/call` from the first, rather than once a
    /// `server/discover` answer or a -32021 has said the target offers it: for a target known
    /// to (an AgentCore Gateway with Tasks, a runtime whose server offers them), so that a tool
    /// the server may run either way runs as a task.
    pub fn target_offers_tasks(self) -> Self {
        self.target.store(OFFERED, Ordering::Release);
        self
    }

    /// Asks the target whether it offers the extension before the first `tools/call` whose
    /// client did not declare it, when no `server/discover` answer has said yet: one
    /// `server/discover` of MCP 2026-07-28 of the layer's own, with that call's URI and
    /// credentials, once for the layer (asked again only after no answer came). For clients
    /// that never send one — a 2025 client opens its session with `initialize` — so that a tool
    /// the server may run either way runs as a task. An answer that offers it (or a -32021
    /// later) makes the layer declare it; any other answer (an error: a server of the 2025 era)
    /// makes it send calls as they are.
    pub fn discover_target(mut self) -> Self {
        self.discovers = true;
        self
    }

    /// Sets how long a job may run, from the answer that created its task (default: the
    /// task's `ttlMs`, or [`DEFAULT_JOB_LIMIT`]). Past it the task is cancelled and the client
    /// told (`data.kind: task_limit`).
    pub fn max_job_duration(mut self, limit: Duration) -> Self {
        self.limits.job = Some(limit);
        self
    }

    /// Sets the poll interval used when the server suggests none (default
    /// [`DEFAULT_POLL_INTERVAL`]).
    pub fn default_poll_interval(mut self, interval: Duration) -> Self {
        self.limits.poll_interval = interval;
        self
    }

    /// Sets how long one request about a task (a poll, a cancel) may take, its retries by the
    /// layers below included (default [`DEFAULT_POLL_TIMEOUT`]): one that takes longer counts
    /// as a failed poll.
    pub fn poll_timeout(mut self, timeout: Duration) -> Self {
        self.limits.poll_timeout = timeout;
        self
    }

    /// Sets how many polls in a row may fail (after the retries of the layers below) before
    /// the client is told (`data.kind: task_unreachable`; default 3, at least 1).
    pub fn max_poll_failures(mut self, failures: u32) -> Self {
        self.limits.poll_failures = failures.max(1);
        self
    }

    /// Whether the layer declares the extension on the calls it sends (told so, or learned).
    pub fn declares_tasks(&self) -> bool {
        self.offered()
    }

    fn offered(&self) -> bool {
        self.target.load(Ordering::Acquire) == OFFERED
    }

    fn learn_offered(&self) {
        self.target.store(OFFERED, Ordering::Release);
    }

    /// Whether this call is the one to ask the target (nothing known, nobody asking).
    fn begin_discovery(&self) -> bool {
        self.discovers
            && self
                .target
                .compare_exchange(UNKNOWN, PROBING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// What the layer's `server/discover` taught (unless an answer taught more meanwhile).
    fn learned(&self, learned: discover::Learned) {
        let now = match learned {
            discover::Learned::Offered => OFFERED,
            discover::Learned::NotOffered => NOT_OFFERED,
            discover::Learned::Unknown => UNKNOWN,
        };
        let _ = self
            .target
            .compare_exchange(PROBING, now, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Default for TaskPollingLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for TaskPollingLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskPollingLayer")
            .field("declares_tasks", &self.offered())
            .field("discover_target", &self.discovers)
            .field("max_job_duration", &self.limits.job)
            .field("default_poll_interval", &self.limits.poll_interval)
            .field("max_poll_failures", &self.limits.poll_failures)
            .field("poll_timeout", &self.limits.poll_timeout)
            .field("jobs_paused_running_asking", &self.table.counts())
            .finish()
    }
}

impl<S> Layer<S> for TaskPollingLayer {
    type Service = TaskPolling<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TaskPolling {
            inner,
            layer: self.clone(),
        }
    }
}
