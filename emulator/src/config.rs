//! How the emulator behaves: [`EmulatorConfig`], the faults it applies ([`Fault`],
//! [`FaultRates`]) and the forms its refusals take.

use std::fmt;
use std::time::Duration;

use aws_credential_types::Credentials;

/// The ARN the emulated runtime answers to, unless configured.
pub const DEFAULT_RUNTIME_ARN: &str =
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/emulated_mcp-AbC123";

/// The form of the session-busy refusal the emulator answers while a session provisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BusyForm {
    /// HTTP 200 with the JSON-RPC error -32005 "Session operation in progress, please retry".
    JsonRpc200,
    /// HTTP 409 with `x-amzn-errortype: RetryableConflictException`.
    Conflict409,
    /// One then the other, alternating.
    Alternate,
}

/// How a throttled answer says when to come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryAfter {
    /// `Retry-After: N` (delta-seconds).
    Seconds(u64),
    /// `Retry-After: <HTTP-date>`, this far in the future.
    DateIn(Duration),
    /// `x-amz-retry-after: N`, in milliseconds, as AWS services send it, with no `Retry-After`.
    Milliseconds(u64),
}

/// A fault the emulator applies to one `tools/call` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// HTTP 429 `ThrottlingException`, with or without `Retry-After`. Nothing runs.
    Throttle {
        /// The `Retry-After` to send, if any.
        retry_after: Option<RetryAfter>,
    },
    /// The session-busy refusal (in the configured form). Nothing runs.
    Busy,
    /// The MCP server no longer knows the request's MCP session, as after its idle timeout or
    /// a restart: the session is forgotten, and the request gets MCP's 404 (-32001 "Session
    /// not found", no `x-amzn-errortype`). Nothing runs.
    SessionExpired,
    /// The tool runs, then the connection is dropped without an answer.
    DropAfterRun,
    /// HTTP 500 `InternalServerException`; `after_run` says whether the tool ran first.
    ServerError {
        /// Whether the tool ran before the 500.
        after_run: bool,
    },
    /// HTTP 200 with the ConflictException look-alike (-32005 "Resource conflict - Resource
    /// already exists"). Nothing runs.
    ConflictLookAlike,
    /// HTTP 200 with -32010 "Runtime health check failed or timed out". Nothing runs.
    HealthCheckFailed,
    /// The tool runs, then the server behind the runtime raises the session-busy -32005 itself:
    /// the documented known limit (the match cannot tell it from the platform's refusal).
    BusyAfterRun,
    /// The answer comes after this delay (the tool runs).
    Slow(Duration),
    /// HTTP 403 `ExpiredTokenException`: the signing credentials expired. Nothing runs.
    ExpiredToken,
    /// The microVM the request meets does not become ready within the runtime's
    /// [`initialization_limit`](EmulatorConfig::initialization_limit): the platform answers
    /// when that microVM has been starting for the limit (a request that started it waits the
    /// whole limit, on tokio's clock) with -32010 "Runtime initialization time exceeded.
    /// Please make sure that initialization completes in *N*s." — in an HTTP 200 (`JsonRpc`)
    /// or as HTTP 424 `RuntimeClientError` with that `message` (`Http`). Nothing runs, and the
    /// microVM is gone: the runtime session's next request starts a new one, a cold start that
    /// provisions. Queued with [`Emulator::push_request_fault`] it meets the next request
    /// whatever its method; with [`Emulator::push_fault`], the next `tools/call`. At a gateway
    /// (no microVM) it is answered at once. `Platform { error: InitializationTimedOut, .. }` is
    /// the same fault.
    ///
    /// [`Emulator::push_request_fault`]: super::Emulator::push_request_fault
    /// [`Emulator::push_fault`]: super::Emulator::push_fault
    InitializationTimedOut {
        /// In which form.
        form: PlatformForm,
    },
    /// An error of the runtime's table ([`contract`](agentcore_tower::contract)), in the form given, with
    /// the contract's code, status, exception and exact message. Nothing runs — except for
    /// `RuntimeClientError`, where the tool runs and then its code fails.
    Platform {
        /// Which row of the table.
        error: agentcore_tower::contract::PlatformError,
        /// In which form.
        form: PlatformForm,
    },
}

/// The form a [`Fault::Platform`] is answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlatformForm {
    /// The MCP contract's: a JSON-RPC error (in an HTTP 200, or the status the table gives).
    JsonRpc,
    /// The API reference's: the HTTP status with `x-amzn-errortype`.
    Http,
}

/// Random fault rates for `tools/call` requests (each in `[0, 1]`), drawn from a seeded RNG so
/// a run can be repeated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultRates {
    /// Session-busy refusals.
    pub busy: f64,
    /// 429s (half with `Retry-After: 0`, half without).
    pub throttle: f64,
    /// Connections dropped after the tool ran.
    pub drop_after_run: f64,
    /// 500s (before the tool ran).
    pub server_error: f64,
    /// The RNG seed.
    pub seed: u64,
}

/// How the emulator behaves.
#[derive(Clone)]
pub struct EmulatorConfig {
    pub(super) runtime_arn: String,
    pub(super) region: String,
    pub(super) credentials: Vec<Credentials>,
    pub(super) provisioning: Duration,
    pub(super) busy_form: BusyForm,
    pub(super) sse: bool,
    pub(super) rates: Option<FaultRates>,
    pub(super) bearer_tokens: Option<Vec<String>>,
    pub(super) issuer: String,
    pub(super) gateway: bool,
    pub(super) signing_name: String,
    pub(super) idle_timeout: Duration,
    pub(super) max_lifetime: Duration,
    pub(super) stateful: bool,
    pub(super) gateway_session_timeout: Duration,
    pub(super) header_allowlist: Option<Vec<String>>,
    pub(super) newest_protocol_version: String,
    pub(super) oldest_protocol_version: String,
    pub(super) slow_job_duration: Duration,
    pub(super) long_job_duration: Duration,
    pub(super) task_ttl: Duration,
    pub(super) task_poll_interval: Duration,
    pub(super) termination_delay: Duration,
    pub(super) initialization_limit: Duration,
}

/// A runtime session's idle timeout, unless configured: AgentCore's default
/// `idleRuntimeSessionTimeout`, 900 s (AWS takes 60 to 28,800 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(900);

/// A runtime session's microVM lifetime, unless configured: AgentCore's default `maxLifetime`,
/// 28,800 s (8 hours; AWS takes 60 to 28,800 s).
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(28_800);

/// How long a microVM takes to terminate after its idle timeout or its lifetime ended it,
/// unless configured: 15 s, the most the developer guide gives ("Termination can last up to 15
/// seconds due to logging and other process completion", runtime lifecycle settings).
pub const DEFAULT_TERMINATION_DELAY: Duration = Duration::from_secs(15);

/// How long a microVM may take to become ready before the platform gives up on it, unless
/// configured: 30 s, the limit most reports quote ("Runtime initialization time exceeded.
/// Please make sure that initialization completes in 30s."; 60 s and 120 s are reported too).
pub const DEFAULT_INITIALIZATION_LIMIT: Duration = Duration::from_secs(30);

/// A gateway MCP session's timeout from its `initialize`, unless configured: the gateway's
/// default `sessionTimeoutInSeconds`, 3,600 s (AWS takes 900 to 28,800 s).
pub const DEFAULT_GATEWAY_SESSION_TIMEOUT: Duration = Duration::from_secs(3_600);

/// The authorization server the emulator's protected-resource metadata names, unless configured.
pub const DEFAULT_ISSUER: &str = "https://issuer.example/emulator";

/// The SigV4 service name signatures are checked for, unless configured.
pub const DEFAULT_SIGNING_NAME: &str = "bedrock-agentcore";

/// How long the `slow_job` tool takes, unless configured: 200 ms (on tokio's clock).
pub const DEFAULT_SLOW_JOB_DURATION: Duration = Duration::from_millis(200);

/// How long the `long_job` tool works when its call names no `seconds`, unless configured: 40
/// minutes (on the jobs clock: see [`Emulator::advance_jobs`](super::Emulator::advance_jobs)).
pub const DEFAULT_LONG_JOB_DURATION: Duration = Duration::from_secs(40 * 60);

/// A `long_job` task's `ttlMs`, unless configured: one hour.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3_600);

/// A `long_job` task's `pollIntervalMs`, unless configured: 5,000 ms.
pub const DEFAULT_TASK_POLL_INTERVAL: Duration = Duration::from_secs(5);

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            runtime_arn: DEFAULT_RUNTIME_ARN.to_owned(),
            region: "us-east-1".to_owned(),
            credentials: vec![Credentials::new(
                "AKIDEMULATOR",
                "emulator-secret-access-key",
                Some("emulator-session-token".to_owned()),
                None,
                "emulator",
            )],
            provisioning: Duration::ZERO,
            busy_form: BusyForm::JsonRpc200,
            sse: false,
            rates: None,
            bearer_tokens: None,
            issuer: DEFAULT_ISSUER.to_owned(),
            gateway: false,
            signing_name: DEFAULT_SIGNING_NAME.to_owned(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_lifetime: DEFAULT_MAX_LIFETIME,
            stateful: false,
            gateway_session_timeout: DEFAULT_GATEWAY_SESSION_TIMEOUT,
            header_allowlist: None,
            newest_protocol_version: agentcore_tower::protocol::LATEST.to_owned(),
            oldest_protocol_version: agentcore_tower::protocol::KNOWN_VERSIONS[0].to_owned(),
            slow_job_duration: DEFAULT_SLOW_JOB_DURATION,
            long_job_duration: DEFAULT_LONG_JOB_DURATION,
            task_ttl: DEFAULT_TASK_TTL,
            task_poll_interval: DEFAULT_TASK_POLL_INTERVAL,
            termination_delay: DEFAULT_TERMINATION_DELAY,
            initialization_limit: DEFAULT_INITIALIZATION_LIMIT,
        }
    }
}

impl fmt::Debug for EmulatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmulatorConfig")
            .field("runtime_arn", &self.runtime_arn)
            .field("region", &self.region)
            .field(
                "access_keys",
                &self
                    .credentials
                    .iter()
                    .map(|c| c.access_key_id())
                    .collect::<Vec<_>>(),
            )
            .field("provisioning", &self.provisioning)
            .field("busy_form", &self.busy_form)
            .field("sse", &self.sse)
            .field("rates", &self.rates)
            // How many tokens, never the tokens.
            .field("bearer_tokens", &self.bearer_tokens.as_ref().map(Vec::len))
            .field("issuer", &self.issuer)
            .field("gateway", &self.gateway)
            .field("signing_name", &self.signing_name)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_lifetime", &self.max_lifetime)
            .field("stateful", &self.stateful)
            .field("gateway_session_timeout", &self.gateway_session_timeout)
            .field("header_allowlist", &self.header_allowlist)
            .field("newest_protocol_version", &self.newest_protocol_version)
            .field("oldest_protocol_version", &self.oldest_protocol_version)
            .field("slow_job_duration", &self.slow_job_duration)
            .field("long_job_duration", &self.long_job_duration)
            .field("task_ttl", &self.task_ttl)
            .field("task_poll_interval", &self.task_poll_interval)
            .field("termination_delay", &self.termination_delay)
            .field("initialization_limit", &self.initialization_limit)
            .finish()
    }
}

impl EmulatorConfig {
    /// The runtime's request-header allowlist: the `X-Amzn-Bedrock-AgentCore-Runtime-Custom-*`
    /// headers passed to the container (any case). Without one (the default), every custom
    /// header is. What was passed is in [`Received::custom_headers`](super::Received).
    pub fn header_allowlist(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let names = names.into_iter().map(|n| n.into().to_ascii_lowercase());
        self.header_allowlist = Some(names.collect());
        self
    }

    /// The runtime ARN requests must name (default [`DEFAULT_RUNTIME_ARN`]).
    pub fn runtime_arn(mut self, arn: impl Into<String>) -> Self {
        self.runtime_arn = arn.into();
        self
    }

    /// The region signatures are checked for (default `us-east-1`).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Replaces the accepted credentials with these.
    pub fn credentials(mut self, credentials: impl IntoIterator<Item = Credentials>) -> Self {
        self.credentials = credentials.into_iter().collect();
        self
    }

    /// How long a new microVM provisions, answering every request of its runtime session with
    /// the session-busy refusal (default: none). Each cold start provisions this long: a new
    /// runtime session's first microVM, and each one after the last ended (see [the session
    /// lifecycle](crate#the-session-lifecycle)).
    pub fn provisioning(mut self, time: Duration) -> Self {
        self.provisioning = time;
        self
    }

    /// How long a runtime session may go without a request before its microVM ends (default
    /// [`DEFAULT_IDLE_TIMEOUT`], 900 s). The next request then meets a new microVM: a cold
    /// start, whose MCP server knows none of the old one's MCP sessions. Any duration is taken,
    /// up to 14 days and beyond: AWS takes 60 to 28,800 s for a runtime's microVMs, and up to
    /// 1,209,600 s (14 days) for an AgentCore Instance's `idleRuntimeSessionTimeout`.
    pub fn idle_timeout(mut self, time: Duration) -> Self {
        self.idle_timeout = time;
        self
    }

    /// How long a microVM lives, in use or not, from the request that started it (default
    /// [`DEFAULT_MAX_LIFETIME`], 8 hours). The next request then meets a new microVM, as after
    /// the idle timeout. Any duration is taken, up to 14 days and beyond: AWS takes 60 to
    /// 28,800 s for a runtime's microVMs, and up to 1,209,600 s (14 days) for an AgentCore
    /// Instance's `maxLifetime`.
    pub fn max_lifetime(mut self, time: Duration) -> Self {
        self.max_lifetime = time;
        self
    }

    /// How long a microVM takes to terminate once its idle timeout or its lifetime has ended it
    /// (default [`DEFAULT_TERMINATION_DELAY`], 15 s; zero for none), on tokio's clock. A
    /// request of its runtime session meeting it meanwhile gets the session-busy refusal (the
    /// platform is tearing the session down; nothing runs, and the refusal does not keep the
    /// microVM alive); the first request after it starts a new microVM, a cold start. Ending a
    /// microVM on purpose ([`Emulator::end_microvm`](super::Emulator::end_microvm)) takes no
    /// time.
    pub fn termination_delay(mut self, time: Duration) -> Self {
        self.termination_delay = time;
        self
    }

    /// How long a microVM may take to become ready (default [`DEFAULT_INITIALIZATION_LIMIT`],
    /// 30 s): what [`Fault::InitializationTimedOut`] waits for and names in its message (in
    /// whole seconds, rounded up). Provisioning ([`provisioning`](Self::provisioning)) longer
    /// than this is not refused for it: the fault is scripted.
    pub fn initialization_limit(mut self, time: Duration) -> Self {
        self.initialization_limit = time;
        self
    }

    /// Makes the runtime's MCP server check every request's `Mcp-Session-Id` (default: off).
    ///
    /// On: a request other than `initialize` must carry an `Mcp-Session-Id` that the MCP server
    /// in its microVM issued and still knows, else it is answered 400 (no header) or 404 (an id
    /// this microVM did not issue, or no longer knows), and nothing runs. Off: a request
    /// without the header, or with an id the emulator never issued, goes on; an id a microVM
    /// issued and then lost (the microVM ended, or the session was expired) still gets the
    /// 404. Either way `initialize` opens a new MCP session. Gateway mode always checks.
    pub fn stateful(mut self, stateful: bool) -> Self {
        self.stateful = stateful;
        self
    }

    /// How long a gateway MCP session lasts from its `initialize`, used or not (default
    /// [`DEFAULT_GATEWAY_SESSION_TIMEOUT`], one hour). Any duration is taken; AWS takes 900
    /// to 28,800 s.
    pub fn gateway_session_timeout(mut self, time: Duration) -> Self {
        self.gateway_session_timeout = time;
        self
    }

    /// The form of the session-busy refusal (default HTTP 200 JSON-RPC -32005).
    pub fn busy_form(mut self, form: BusyForm) -> Self {
        self.busy_form = form;
        self
    }

    /// Answers MCP requests as `text/event-stream` instead of JSON.
    pub fn sse(mut self, sse: bool) -> Self {
        self.sse = sse;
        self
    }

    /// Random faults for `tools/call`, on top of the scripted ones.
    pub fn fault_rates(mut self, rates: FaultRates) -> Self {
        self.rates = Some(rates);
        self
    }

    /// OAuth inbound auth instead of SigV4: requests must carry `Authorization: Bearer <token>`
    /// with one of these tokens (opaque strings, compared whole). A SigV4-signed request is
    /// then refused, as a runtime configured for OAuth refuses it (see the module docs for
    /// the answers). An empty list turns bearer auth on and accepts no token.
    pub fn bearer_tokens(mut self, tokens: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.bearer_tokens = Some(tokens.into_iter().map(Into::into).collect());
        self
    }

    /// The authorization server the protected-resource metadata names (default
    /// [`DEFAULT_ISSUER`]).
    pub fn issuer(mut self, url: impl Into<String>) -> Self {
        self.issuer = url.into();
        self
    }

    /// Plays an AgentCore Gateway instead of a runtime: plain MCP Streamable HTTP at `/mcp`,
    /// with gateway MCP sessions (see the module docs).
    pub fn gateway(mut self, gateway: bool) -> Self {
        self.gateway = gateway;
        self
    }

    /// The SigV4 service name signatures must be scoped to (default [`DEFAULT_SIGNING_NAME`]),
    /// in either mode: `execute-api` plays an API Gateway in front of an MCP server.
    pub fn signing_name(mut self, name: impl Into<String>) -> Self {
        self.signing_name = name.into();
        self
    }

    /// The newest MCP protocol version the emulator's MCP server speaks (default
    /// [`protocol::LATEST`](agentcore_tower::protocol::LATEST), 2026-07-28): it speaks every
    /// [known version](agentcore_tower::protocol::KNOWN_VERSIONS) from
    /// [`oldest_protocol_version`](Self::oldest_protocol_version) up to this one. Versions
    /// compare as the dates they are.
    ///
    /// `"2025-11-25"` plays a server of the `initialize` era only, as the SDKs' 2025 servers
    /// are: it reads no request as MCP 2026-07-28, and a request whose `MCP-Protocol-Version`
    /// names a version it does not speak gets the HTTP 400 (-32000) of the MCP TypeScript
    /// SDK's 2025 transport. What each client meets there: [servers of one
    /// era](crate#servers-of-one-era).
    pub fn newest_protocol_version(mut self, version: impl Into<String>) -> Self {
        self.newest_protocol_version = version.into();
        self
    }

    /// The oldest MCP protocol version the emulator's MCP server speaks (default 2024-11-05,
    /// the first [known version](agentcore_tower::protocol::KNOWN_VERSIONS)): older ones are not spoken.
    ///
    /// `"2026-07-28"` plays a modern-only server, as rmcp 3.11's is: no MCP session is ever
    /// issued, `initialize` is refused with an HTTP 400 (-32022 naming the versions spoken),
    /// and so is any other request without a version in `_meta`, before anything runs;
    /// `server/discover` lists 2026-07-28 alone. What each client meets there: [servers of
    /// one era](crate#servers-of-one-era). A version between the eras (say
    /// `"2025-06-18"`) keeps `initialize`, and a header naming an older version gets the 400
    /// of a 2025 server.
    pub fn oldest_protocol_version(mut self, version: impl Into<String>) -> Self {
        self.oldest_protocol_version = version.into();
        self
    }

    /// How long the `slow_job` tool takes (default [`DEFAULT_SLOW_JOB_DURATION`], 200 ms), on
    /// tokio's clock: a test on a paused clock moves through it with `tokio::time::advance`.
    /// See the module docs for the tasks extension it answers with.
    pub fn slow_job_duration(mut self, time: Duration) -> Self {
        self.slow_job_duration = time;
        self
    }

    /// How long the `long_job` tool works when its call names no `seconds` (default
    /// [`DEFAULT_LONG_JOB_DURATION`], 40 minutes), on the jobs clock: tokio's, moved by
    /// `tokio::time::advance` on a paused clock, plus what
    /// [`Emulator::advance_jobs`](super::Emulator::advance_jobs) adds.
    pub fn long_job_duration(mut self, time: Duration) -> Self {
        self.long_job_duration = time;
        self
    }

    /// The `ttlMs` of a `long_job` task (default [`DEFAULT_TASK_TTL`], one hour): a task not
    /// done by `createdAt + ttlMs` (on the jobs clock) is gone, and `tasks/get` answers -32602
    /// "Failed to retrieve task: Task has expired". (`slow_job`'s tasks keep rmcp's `ttlMs:
    /// null`.)
    pub fn task_ttl(mut self, time: Duration) -> Self {
        self.task_ttl = time;
        self
    }

    /// The `pollIntervalMs` a `long_job` task suggests (default
    /// [`DEFAULT_TASK_POLL_INTERVAL`], 5,000 ms). (`slow_job`'s tasks keep 100 ms.)
    pub fn task_poll_interval(mut self, time: Duration) -> Self {
        self.task_poll_interval = time;
        self
    }
}
