//! A local AgentCore Runtime (or Gateway) emulator, for tests and demos (cargo feature
//! `emulator`).
//!
//! One call starts it on 127.0.0.1 (an ephemeral port); it stops when dropped. By default it
//! behaves like the AgentCore Runtime data plane in front of an MCP server:
//!
//! * **SigV4** on every request, for the configured test credentials: the signature is
//!   recomputed from the request as received ([`SignatureVerifier`]); a date more than 5
//!   minutes off, an unknown key, another region or service than configured
//!   ([`signing_name`](EmulatorConfig::signing_name)) or a mismatch get a 403
//!   `InvalidSignatureException` (or `UnrecognizedClientException`), as AWS answers.
//! * **Runtime sessions** keyed by `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` (generated and
//!   returned when absent), each in a microVM that provisions for
//!   [`provisioning`](EmulatorConfig::provisioning) (answering the session-busy refusal
//!   meanwhile, in the configured form: [`BusyForm`]) and ends after its
//!   [`idle_timeout`](EmulatorConfig::idle_timeout) or its
//!   [`max_lifetime`](EmulatorConfig::max_lifetime); the next request then cold-starts a new
//!   one. `StopRuntimeSession` ends a session. See [the session
//!   lifecycle](#the-session-lifecycle).
//! * **MCP** itself: `initialize` (answered with a new `Mcp-Session-Id`, which the microVM
//!   remembers), notifications (202), `ping`,
//!   `tools/list`, `tools/call` with `add` (idempotent), `echo` (read-only) and `counter`
//!   (NOT idempotent: every execution increments it, and a test can read how many ran); and,
//!   unlisted, `blob` (`{"bytes": N}`), whose answer text is N bytes streamed in 64 KiB chunks
//!   from one static buffer — for memory tests of large answers.
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
//! use agentcore_tower::emulator::{Emulator, EmulatorConfig, Fault};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let emulator = Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(200))).await?;
//! emulator.push_fault(Fault::Throttle { retry_after: Some(agentcore_tower::emulator::RetryAfter::Seconds(1)) });
//! println!("runtime {} at {}", emulator.runtime_arn(), emulator.endpoint());
//! assert_eq!(emulator.audit().requests, 0);
//! # Ok(())
//! # }
//! ```
//!
//! A gateway behind bearer tokens:
//!
//! ```
//! use agentcore_tower::emulator::{Emulator, EmulatorConfig};
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
//!   [`DEFAULT_IDLE_TIMEOUT`] (900 s), AgentCore's `idleRuntimeSessionTimeout` (60 to 28,800 s)
//!   *(guide: runtime lifecycle settings)*. A request arriving that long after its session's
//!   last request (answered or refused) meets a new microVM.
//! * **Lifetime**: [`max_lifetime`](EmulatorConfig::max_lifetime), by default
//!   [`DEFAULT_MAX_LIFETIME`] (28,800 s, 8 hours), `maxLifetime` (60 to 28,800 s) *(guide: the
//!   same)*, counted from the request that started the microVM, however busy it has been since.
//! * **A new microVM** is a cold start again: it provisions (busy refusals), and its MCP server
//!   knows none of the old one's MCP sessions. The runtime session id stays the same
//!   ([`Audit::sessions_started`] counts session ids, [`Audit::microvms_started`] cold
//!   starts). A microVM ends at the instant its time is up, found so by the next request; AWS
//!   may take up to 15 s to terminate one *(guide)*. `StopRuntimeSession` ends the session and
//!   its microVM.
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
//!   [`Emulator::end_microvms`] (the next request of the session cold-starts).
//!
//! Not modelled: a request without a runtime session id is routed by its `Mcp-Session-Id` on
//! AWS *(observed: a public sample's measurements)*, and gets a session of its own here; a
//! cold start that outlasts the platform's initialization limit (-32010 "Runtime
//! initialization time exceeded", 120 s) stays a long run of busy refusals here.
//!
//! ```
//! use std::time::Duration;
//! use agentcore_tower::emulator::{
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

mod lifecycle;
mod mcp;
mod server;
mod verify;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_credential_types::Credentials;

pub use verify::{SignatureError, SignatureVerifier};

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
    /// An error of the runtime's table ([`contract`](crate::contract)), in the form given, with
    /// the contract's code, status, exception and exact message. Nothing runs — except for
    /// `RuntimeClientError`, where the tool runs and then its code fails.
    Platform {
        /// Which row of the table.
        error: crate::contract::PlatformError,
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
    runtime_arn: String,
    region: String,
    credentials: Vec<Credentials>,
    provisioning: Duration,
    busy_form: BusyForm,
    sse: bool,
    rates: Option<FaultRates>,
    bearer_tokens: Option<Vec<String>>,
    issuer: String,
    gateway: bool,
    signing_name: String,
    idle_timeout: Duration,
    max_lifetime: Duration,
    stateful: bool,
    gateway_session_timeout: Duration,
}

/// A runtime session's idle timeout, unless configured: AgentCore's default
/// `idleRuntimeSessionTimeout`, 900 s (AWS takes 60 to 28,800 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(900);

/// A runtime session's microVM lifetime, unless configured: AgentCore's default `maxLifetime`,
/// 28,800 s (8 hours; AWS takes 60 to 28,800 s).
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(28_800);

/// A gateway MCP session's timeout from its `initialize`, unless configured: the gateway's
/// default `sessionTimeoutInSeconds`, 3,600 s (AWS takes 900 to 28,800 s).
pub const DEFAULT_GATEWAY_SESSION_TIMEOUT: Duration = Duration::from_secs(3_600);

/// The authorization server the emulator's protected-resource metadata names, unless configured.
pub const DEFAULT_ISSUER: &str = "https://issuer.example/emulator";

/// The SigV4 service name signatures are checked for, unless configured.
pub const DEFAULT_SIGNING_NAME: &str = "bedrock-agentcore";

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
            .finish()
    }
}

impl EmulatorConfig {
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
    /// lifecycle](crate::emulator#the-session-lifecycle)).
    pub fn provisioning(mut self, time: Duration) -> Self {
        self.provisioning = time;
        self
    }

    /// How long a runtime session may go without a request before its microVM ends (default
    /// [`DEFAULT_IDLE_TIMEOUT`], 900 s). The next request then meets a new microVM: a cold
    /// start, whose MCP server knows none of the old one's MCP sessions. Any duration is taken;
    /// AWS takes 60 to 28,800 s.
    pub fn idle_timeout(mut self, time: Duration) -> Self {
        self.idle_timeout = time;
        self
    }

    /// How long a microVM lives, in use or not, from the request that started it (default
    /// [`DEFAULT_MAX_LIFETIME`], 8 hours). The next request then meets a new microVM, as after
    /// the idle timeout. Any duration is taken; AWS takes 60 to 28,800 s.
    pub fn max_lifetime(mut self, time: Duration) -> Self {
        self.max_lifetime = time;
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
}

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
    /// 429s sent.
    pub throttled: u64,
    /// Signatures refused.
    pub signature_failures: u64,
    /// Connections dropped on purpose.
    pub dropped: u64,
    /// 500s sent.
    pub server_errors: u64,
    /// Runtime sessions started: requests that named a runtime session id not seen before (or
    /// not since its `StopRuntimeSession`), or none (the emulator then makes one up). A
    /// session whose microVM ended and was replaced is still the same session: see
    /// `microvms_started`.
    pub sessions_started: u64,
    /// MicroVMs started (cold starts): a runtime session's first, and each one started because
    /// the last had ended (idle timeout, lifetime, [`Emulator::end_microvm`]). Each provisions
    /// for [`provisioning`](EmulatorConfig::provisioning).
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
    /// gateway or a [`stateful`](EmulatorConfig::stateful) runtime) and 404 (below).
    pub mcp_session_refusals: u64,
    /// Of those, the 404s: an MCP session unknown to the server (never issued, lost with its
    /// microVM, expired, or another principal's at a gateway). Nothing ran.
    pub mcp_sessions_not_found: u64,
    /// Every request, in the order received.
    pub received: Vec<Received>,
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
}

impl Audit {
    /// How often `tool` ran.
    pub fn executions_of(&self, tool: &str) -> u64 {
        self.executions.get(tool).copied().unwrap_or(0)
    }
}

/// The emulator's shared state.
pub(crate) struct State {
    config: EmulatorConfig,
    verifier: SignatureVerifier,
    /// `http://127.0.0.1:PORT`, for the URLs the answers name.
    endpoint: String,
    /// The accepted bearer tokens; `None` when SigV4 is the door.
    tokens: Mutex<Option<Vec<String>>>,
    /// Runtime mode: the runtime sessions, their microVMs and the MCP sessions they issued.
    runtime: Mutex<lifecycle::Runtime>,
    /// Gateway mode: the live MCP sessions by `Mcp-Session-Id`.
    mcp_sessions: Mutex<HashMap<String, McpSession>>,
    faults: Mutex<VecDeque<Fault>>,
    rng: Mutex<fastrand::Rng>,
    audit: Mutex<Audit>,
    counter: AtomicU64,
    busy_toggle: AtomicU64,
}

/// Who made a request, as far as session scoping goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Principal {
    /// SigV4: the access key id.
    AccessKey(String),
    /// A JWT bearer token, by its `sub` claim (AWS's scoping).
    Subject(String),
    /// Another bearer token, by a fingerprint (the token itself is not kept with the session).
    Token(u64),
}

/// A gateway MCP session.
pub(crate) struct McpSession {
    principal: Principal,
    started: tokio::time::Instant,
}

impl State {
    /// Whether bearer tokens are the door (else SigV4).
    fn bearer_door(&self) -> bool {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    fn limits(&self) -> lifecycle::Limits {
        lifecycle::Limits {
            provisioning: self.config.provisioning,
            idle_timeout: self.config.idle_timeout,
            max_lifetime: self.config.max_lifetime,
        }
    }

    fn runtime(&self) -> std::sync::MutexGuard<'_, lifecycle::Runtime> {
        self.runtime.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, f: impl FnOnce(&mut Audit)) {
        f(&mut self.audit.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The next fault for a `tools/call`: a scripted one first, else one drawn at the rates.
    fn next_fault(&self) -> Option<Fault> {
        if let Some(fault) = self
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            return Some(fault);
        }
        let rates = self.config.rates?;
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let x = rng.f64();
        let mut edge = rates.busy;
        if x < edge {
            return Some(Fault::Busy);
        }
        edge += rates.throttle;
        if x < edge {
            let retry_after = rng.bool().then_some(RetryAfter::Seconds(0));
            return Some(Fault::Throttle { retry_after });
        }
        edge += rates.drop_after_run;
        if x < edge {
            return Some(Fault::DropAfterRun);
        }
        edge += rates.server_error;
        if x < edge {
            return Some(Fault::ServerError { after_run: false });
        }
        None
    }

    fn busy_form(&self) -> BusyForm {
        match self.config.busy_form {
            BusyForm::Alternate => {
                if self
                    .busy_toggle
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(2)
                {
                    BusyForm::JsonRpc200
                } else {
                    BusyForm::Conflict409
                }
            }
            form => form,
        }
    }
}

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
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            audit: Mutex::new(Audit::default()),
            counter: AtomicU64::new(0),
            busy_toggle: AtomicU64::new(0),
        });
        let task = tokio::spawn(server::accept_loop(listener, state.clone()));
        Ok(Emulator { addr, state, task })
    }

    /// The endpoint to give [`InvokeTarget::endpoint`](crate::invoke::InvokeTarget::endpoint):
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

    /// A [`SigV4InvokeLayer`](crate::invoke::SigV4InvokeLayer) builder aimed at this emulator:
    /// its runtime ARN, its endpoint, its first test credentials. Add settings, then `build()`.
    pub fn signer(&self) -> crate::invoke::SigV4InvokeLayerBuilder {
        crate::invoke::SigV4InvokeLayer::builder(
            crate::invoke::InvokeTarget::arn(self.runtime_arn()).endpoint(self.endpoint()),
            self.credentials(),
        )
    }

    /// An [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer) builder aimed at this emulator
    /// in Gateway mode: SigV4 with its first test credentials, for its region and signing name,
    /// sending to this emulator's origin only. Requests name [`gateway_url`](Self::gateway_url).
    /// Add settings, then `build()`.
    ///
    /// ```
    /// use agentcore_tower::emulator::{Emulator, EmulatorConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let emulator = Emulator::start(EmulatorConfig::default().gateway(true).signing_name("execute-api")).await?;
    /// let signer = emulator.endpoint_signer().build()?;
    /// assert!(format!("{signer:?}").contains(r#"signing_name: "execute-api""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn endpoint_signer(&self) -> crate::endpoint::McpEndpointLayerBuilder {
        crate::endpoint::McpEndpointLayer::sigv4(self.credentials())
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
        let gateway = self
            .state
            .mcp_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .is_some_and(|s| s.started.elapsed() < self.state.config.gateway_session_timeout);
        let limits = self.state.limits();
        let runtime = self
            .state
            .runtime()
            .expire(id, tokio::time::Instant::now(), &limits);
        gateway || runtime
    }

    /// Ends the microVM of runtime session `runtime_session_id` now, as its idle timeout or
    /// lifetime would: the session's next request meets a new microVM (a cold start, which
    /// provisions), whose MCP server knows none of the old one's MCP sessions. The runtime
    /// session itself goes on (unlike `StopRuntimeSession`). Whether a microVM was running.
    pub fn end_microvm(&self, runtime_session_id: &str) -> bool {
        let limits = self.state.limits();
        self.state
            .runtime()
            .end_microvm(runtime_session_id, tokio::time::Instant::now(), &limits)
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
