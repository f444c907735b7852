//! [`SigV4InvokeLayer`]: an MCP Streamable HTTP POST carried as AgentCore's
//! `InvokeAgentRuntime`, signed afresh with `aws-sigv4` for every attempt (or carrying a bearer
//! token, for a runtime with OAuth inbound auth). An AgentCore Gateway or any other SigV4- or
//! OAuth-gated MCP URL takes an MCP request as it is: see [`endpoint`](crate::endpoint).
//!
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
//! use aws_credential_types::Credentials;
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let signer = SigV4InvokeLayer::builder(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "example"),
//! )
//! .build()?;
//!
//! // Where the HTTP client would be: look at what would go on the wire.
//! let client = ServiceBuilder::new().layer(signer).service(service_fn(|request: Request<Full<Bytes>>| async move {
//!     assert_eq!(request.method(), "POST");
//!     assert_eq!(
//!         request.uri().path(),
//!         "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations"
//!     );
//!     assert!(request.headers()["authorization"].to_str().unwrap().starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"));
//!     assert_eq!(request.headers()["mcp-method"], "tools/call");
//!     assert_eq!(request.headers()["mcp-name"], "add");
//!     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
//! }));
//!
//! let request = Request::post("http://mcp.invalid/mcp") // ignored: the target decides
//!     .header("content-type", "application/json")
//!     .header("accept", "application/json, text/event-stream")
//!     .body(Full::new(Bytes::from_static(
//!         br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#,
//!     )))?;
//! let response = client.oneshot(request).await?;
//! assert_eq!(response.status(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! # The mapping
//! | MCP request | `InvokeAgentRuntime` |
//! |---|---|
//! | POST body | payload (the body is collected; more than 100,000,000 bytes is refused) |
//! | the URI the client passes | ignored on purpose (a placeholder does): the request goes to `/runtimes/{ARN}/invocations` of the [`InvokeTarget`], which the call's spans and metrics name as its `url.full` and `server.address` |
//! | `content-type`, `accept`, `mcp-session-id`, `mcp-protocol-version`, `mcp-method`, `mcp-name`, runtime session and user ids, `x-amzn-trace-id`, `traceparent`, `tracestate`, `baggage` | carried (lengths checked against the model; a value outside them is refused with [`ErrorKind::InvalidRequest`](crate::ErrorKind)) |
//! | `x-amzn-bedrock-agentcore-runtime-custom-*` (any case) | carried and signed, for the container (AgentCore passes the ones the runtime's request-header allowlist names; a value over 4 KB is refused with [`ErrorKind::InvalidRequest`](crate::ErrorKind)) |
//! | every other header | dropped before signing |
//! | GET (the server-message stream), DELETE | answered here with **405** and `Allow: POST`: the MCP spec reads 405 as "not offered", and clients carry on. With [`stop_session_on_delete`](SigV4InvokeLayerBuilder::stop_session_on_delete), a DELETE becomes `StopRuntimeSession` |
//! | any other method | 405 |
//!
//! `mcp-method` and `mcp-name` are filled from the JSON-RPC body when the client did not set
//! them: for `tools/call`, `resources/read` and `prompts/get`, and — for MCP 2026-07-28 and
//! later, which asks for `Mcp-Method` on every request — for every method, `mcp-name` where the
//! revision names one (a task's polls by its `taskId`). Values are written in the revision's
//! encoding ([`protocol::encode_header_value`](crate::protocol::encode_header_value)); one that
//! is empty or, encoded, over the model's 1,024 characters is left out (the headers are
//! optional to the runtime) and the call goes on. A request whose
//! `params._meta["io.modelcontextprotocol/protocolVersion"]` names its version and that carries
//! no `mcp-protocol-version` gets that version as the header, the one value the revision allows
//! there. `Host` is set here
//! (hyper-util adds it only after the layers ran, and it is signed), then `content-length`,
//! then the request is signed: signing name `bedrock-agentcore`, `aws-sigv4`'s default
//! settings — as the official SDK signs the same operation.
//!
//! # Every attempt is signed afresh
//! Put this layer innermost, under the retry layers: each attempt resolves the credentials
//! again (a credential rotated during a wait is never reused) and gets its own `x-amz-date` and
//! signature. Resolving is cheap when the provider caches; aws-config's default chain does not
//! (the AWS SDK caches in its own identity cache): wrap it in [`CachedCredentials`]. An
//! answer refusing expired credentials, or a signature from a clock far off, gets one more
//! attempt, freshly signed ([`auth`](crate::auth#expired-credentials-a-skewed-clock)).
//!
//! # The runtime session
//! A runtime session is a microVM with the MCP server's state in it: it belongs to one MCP
//! session, never to whichever caller came last.
//!
//! * A request that names its runtime session (`X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`)
//!   goes to that one, for that request only: the layer's own is untouched.
//! * Any other request gets one from the layer, picked at its call's first attempt and kept for
//!   every attempt of that call, whatever another call's answer says meanwhile. With
//!   [`RuntimeSessions::PerLayer`] (the default) that is the layer's own — a UUID v4 unless
//!   configured — shared by its clones and the services it builds: one layer per MCP client.
//!   With [`RuntimeSessions::PerMcpSession`] it is the one bound to the request's
//!   `Mcp-Session-Id`: one layer for an app that serves many MCP sessions. A binding is
//!   forgotten once idle longer than the runtime's idle timeout or past its lifetime (its
//!   microVM is gone by then:
//!   [`runtime_session_idle_timeout`](SigV4InvokeLayerBuilder::runtime_session_idle_timeout),
//!   default 900 s;
//!   [`runtime_session_max_lifetime`](SigV4InvokeLayerBuilder::runtime_session_max_lifetime),
//!   default 8 hours), or when the layer holds
//!   [`max_bound_mcp_sessions`](SigV4InvokeLayerBuilder::max_bound_mcp_sessions) (default
//!   100,000) and binds one more: the least recently used goes.
//! * Only an answer to a request the layer picked the session for may replace it, and only
//!   what that request used (an id the service returns: 33 to 256 visible ASCII characters,
//!   read after the answer was redacted, so an attempt's secret is never taken for one).
//! * `StopRuntimeSession` stops the session the DELETE names, else the one the layer picks
//!   for it; its `clientToken` is generated once per stop and sent on every attempt of it, as
//!   the SDK does.
//!
//! ```
//! use std::time::Duration;
//! use agentcore_tower::invoke::{InvokeTarget, RuntimeSessions, SigV4InvokeLayer};
//! use aws_credential_types::Credentials;
//! # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
//! // One layer for every user of a multi-tenant app: each MCP session gets its own microVM.
//! let signer = SigV4InvokeLayer::builder(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"),
//! )
//! .runtime_sessions(RuntimeSessions::PerMcpSession)
//! // The runtime's `idleRuntimeSessionTimeout` and `maxLifetime`, when they are not
//! // AgentCore's defaults (900 s, 8 hours): here a runtime on Instances, up to 14 days.
//! .runtime_session_idle_timeout(Duration::from_secs(3600))
//! .runtime_session_max_lifetime(Duration::from_secs(3 * 86_400))
//! .stop_session_on_delete(true)
//! .build()?;
//! assert_eq!(signer.runtime_sessions(), RuntimeSessions::PerMcpSession);
//! # Ok(())
//! # }
//! ```
//!
//! # The answer
//! The status, the body (streamed, never buffered here: JSON or SSE) and the headers the
//! operation models come back: `content-type`, `content-length`, `mcp-session-id`,
//! `mcp-protocol-version`, the runtime session id and session endpoint URL, `retry-after`,
//! `x-amzn-errortype`, `x-amzn-requestid`, the trace headers, `www-authenticate`. A service error keeps its status
//! and `x-amzn-errortype`, so the retry layers above can decide. No trailer comes back (the
//! operation models none). The attempt's signature and session token are redacted from every
//! header and body byte the app reads (`InvalidSignatureException` quotes the canonical request,
//! which carries the token), plainly or JSON-escaped, with masks as long as what they cover, so
//! `Content-Length` stays exact (see [redaction](crate::redact)). The outcome, the error type
//! and the runtime session id are read from the answer after it is redacted.
//!
//! A 404 from the service (`x-amzn-errortype: ResourceNotFoundException`: a wrong runtime ARN or
//! qualifier) comes back as a 404 too. MCP clients read a 404 on a request that carries an
//! `Mcp-Session-Id` as "session expired" and re-initialise: check `x-amzn-errortype` first.
//!
//! # Runtimes with OAuth inbound auth
//! [`SigV4InvokeLayer::bearer`] is the same layer with a token provider in place of
//! credentials, for a runtime with a JWT authorizer: see
//! [`auth`](crate::auth#runtimes-with-oauth-inbound-auth).
//!
//! # The send gate
//! A request may carry a [`SharedSendGate`] in its extensions: asked after signing, just before
//! the service below is called, on every attempt. A refusal ends the call, and nothing is sent.
//! An [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer) asks it the same way.
//!
//! [`CachedCredentials`]: crate::auth::CachedCredentials

mod future;
mod gate;
mod request;
mod service;
mod session;
pub(crate) mod target;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use http::{Method, Request};

pub use future::ResponseFuture;
pub(crate) use future::call;
pub use gate::{ClosableGate, SendGate, SharedSendGate};
pub(crate) use request::{Origin, RUNTIME_SESSION_ID, SIGNING_NAME};
pub use request::{RUNTIME_CUSTOM_MAX_VALUE, RUNTIME_CUSTOM_PREFIX};
pub use service::SigV4Invoke;
pub use session::{MAX_RUNTIME_SESSION_TIME, RuntimeSessions};
pub(crate) use session::{RenewedFrom, mcp_session_of};
pub(crate) use target::check_region;
pub use target::{InvokeTarget, ResolvedTarget};

use crate::auth::{Auth, AuthSource, Clock, ProvideToken};
use crate::error::ConfigError;
use request::is_valid_session_id;
use session::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND, DEFAULT_MAX_LIFETIME, Sessions};

/// The largest payload `InvokeAgentRuntime` accepts.
pub const MAX_PAYLOAD_BYTES: usize = 100_000_000;

/// What a layer shares with its services and their calls (an [`McpEndpointLayer`]'s too: the
/// two layers are one service over two mappings).
///
/// [`McpEndpointLayer`]: crate::endpoint::McpEndpointLayer
pub(crate) struct Shared {
    pub(crate) auth: Auth,
    pub(crate) mapping: Mapping,
}

/// Where a request goes, and what it becomes on the way.
pub(crate) enum Mapping {
    /// Carried as `InvokeAgentRuntime` to a runtime.
    Invoke(Box<Invoke>),
    /// Sent to the URL it names, as it is (an MCP endpoint: AgentCore Gateway, any MCP server),
    /// at the one origin given, if any.
    Endpoint(Option<Origin>),
}

/// The invoke mapping's settings.
pub(crate) struct Invoke {
    target: ResolvedTarget,
    sessions: Sessions,
    user_id: Option<String>,
    stop_on_delete: bool,
}

impl Shared {
    /// The invoke mapping's settings: only an invoke layer asks.
    fn invoke(&self) -> &Invoke {
        match &self.mapping {
            Mapping::Invoke(invoke) => invoke,
            Mapping::Endpoint(_) => unreachable!("only an invoke layer has invoke settings"),
        }
    }

    /// What `request` becomes under the mapping: sent as it is to an endpoint; for a runtime,
    /// an invocation, a `StopRuntimeSession`, or (why) a local 405.
    fn operation<B>(&self, request: &Request<B>) -> Result<Operation, String> {
        match &self.mapping {
            Mapping::Endpoint(_) => Ok(Operation::Forward),
            Mapping::Invoke(invoke) => invoke.operation(request),
        }
    }

    /// The layer's name in the record.
    fn layer(&self) -> &'static str {
        match self.mapping {
            Mapping::Invoke(_) => "sigv4",
            Mapping::Endpoint(_) => "mcp-endpoint",
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the credentials or the token: only what kind of auth.
        let mut f = f.debug_struct(match self.mapping {
            Mapping::Invoke(_) => "SigV4Invoke",
            Mapping::Endpoint(_) => "McpEndpoint",
        });
        f.field("auth", &self.auth);
        if let Mapping::Invoke(invoke) = &self.mapping {
            f.field("target", &invoke.target)
                .field("runtime_sessions", &invoke.sessions)
                .field("runtime_user_id", &invoke.user_id)
                .field("stop_session_on_delete", &invoke.stop_on_delete);
        }
        if let Mapping::Endpoint(Some(origin)) = &self.mapping {
            f.field("origin", &format_args!("{origin}"));
        }
        f.finish()
    }
}

/// Builds a [`SigV4InvokeLayer`], checking every setting.
pub struct SigV4InvokeLayerBuilder {
    target: InvokeTarget,
    auth: AuthSource,
    session_id: Option<String>,
    sessions: RuntimeSessions,
    idle_timeout: Duration,
    max_lifetime: Duration,
    max_bound: usize,
    user_id: Option<String>,
    stop_on_delete: bool,
    clock: Clock,
}

impl SigV4InvokeLayerBuilder {
    /// Uses this runtime session id for the layer instead of a generated one (33 to 256
    /// visible ASCII characters; to be safe with the service's answers, 33 to 100 of
    /// `[A-Za-z0-9-_]`).
    pub fn runtime_session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// How a request that names no runtime session gets one (default
    /// [`RuntimeSessions::PerLayer`]; [`RuntimeSessions::PerMcpSession`] for an app that serves
    /// many MCP sessions over one layer).
    pub fn runtime_sessions(mut self, sessions: RuntimeSessions) -> Self {
        self.sessions = sessions;
        self
    }

    /// With [`RuntimeSessions::PerMcpSession`]: how long the binding of an MCP session to its
    /// runtime session is kept after the session's last request or answer. Set it to the
    /// runtime's `idleRuntimeSessionTimeout`; the default, 900 s, is AgentCore's default for
    /// it. After that long idle AgentCore has stopped the microVM, so the next request of that
    /// MCP session gets a new runtime session (as it would get a new microVM anyway), and the
    /// binding's memory is freed.
    ///
    /// At least 60 s, AgentCore's least `idleRuntimeSessionTimeout`: a shorter time (zero
    /// among them) is taken as 60 s — no runtime stops an idle microVM sooner, so forgetting
    /// it sooner would only send a live MCP session to a new microVM, without its state. At
    /// most [`MAX_RUNTIME_SESSION_TIME`], 14 days: AgentCore takes up to 28,800 s (8 hours)
    /// for a runtime on microVMs, up to 1,209,600 s (14 days) for one on AgentCore Instances
    /// (managed EC2); longer is refused by [`build`](Self::build). The time counts from when the layer last chose the binding for a request
    /// or read an answer's head for it: an answer streamed for longer than this (an SSE stream
    /// may last an hour) leaves the binding idle meanwhile — set the time above your longest
    /// stream if a session's next request must find its microVM after one. Time is read from
    /// tokio's clock, so a test with a paused clock drives it. Ignored with
    /// [`RuntimeSessions::PerLayer`].
    pub fn runtime_session_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// With [`RuntimeSessions::PerMcpSession`]: how long after its runtime session was first
    /// bound the binding of an MCP session is kept, however busy the session is. Set it to the
    /// runtime's `maxLifetime`; the default, 28,800 s (8 hours), is AgentCore's default for it.
    /// By then AgentCore has ended the microVM, so the next request of that MCP session gets a
    /// new runtime session, as after the idle timeout. A renewed MCP session that takes over
    /// its expired session's microVM takes over its lifetime too: the microVM is the same.
    ///
    /// At least 60 s (a shorter time is taken as 60 s), at most [`MAX_RUNTIME_SESSION_TIME`],
    /// 14 days: AgentCore takes up to 28,800 s for a runtime on microVMs, up to 1,209,600 s
    /// for one on AgentCore Instances; longer is refused by [`build`](Self::build). Time is
    /// read from tokio's clock.
    ///
    /// With [`RuntimeSessions::PerLayer`] there is nothing to forget: AgentCore ends the
    /// layer's runtime session at its lifetime, and the next request with the same id starts
    /// a new microVM (a cold start, then MCP's 404, which
    /// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) recovers from). The
    /// setting is still checked.
    pub fn runtime_session_max_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_lifetime = lifetime;
        self
    }

    /// With [`RuntimeSessions::PerMcpSession`]: how many MCP sessions are bound at most; binding
    /// one more forgets the one used least recently (its next request gets a new runtime
    /// session). Default 100,000: a memory bound — some 280 bytes a binding with UUID ids, so
    /// 28 MB full (`compat/benches/runtime_sessions.rs`) — a hundred times the runtime sessions
    /// an account may have active by default (its AgentCore quota: 1,000 in us-east-1 and
    /// us-west-2, 500 elsewhere), so that the idle time forgets, not the count. Raise it with
    /// the quota. At least 1: zero is taken as 1. Ignored with [`RuntimeSessions::PerLayer`].
    pub fn max_bound_mcp_sessions(mut self, max: usize) -> Self {
        self.max_bound = max;
        self
    }

    /// Sends `X-Amzn-Bedrock-AgentCore-Runtime-User-Id` with every request that does not carry
    /// its own (needs the `bedrock-agentcore:InvokeAgentRuntimeForUser` permission).
    pub fn runtime_user_id(mut self, id: impl Into<String>) -> Self {
        self.user_id = Some(id.into());
        self
    }

    /// Turns an MCP DELETE (the client ending its session) into `StopRuntimeSession` for the
    /// runtime session of that request (the one it names, else the one the layer picks for it),
    /// instead of answering 405. Off by default.
    pub fn stop_session_on_delete(mut self, stop: bool) -> Self {
        self.stop_on_delete = stop;
        self
    }

    /// The wall clock signatures are dated by (default `SystemTime::now`); for tests.
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Checks the settings and builds the layer; the error names what is wrong.
    pub fn build(self) -> Result<SigV4InvokeLayer, ConfigError> {
        let target = self.target.resolve()?;
        self.check_session_times()?;
        let session_id = match self.session_id {
            Some(id) if is_valid_session_id(&id) => id,
            Some(id) => {
                return Err(ConfigError::InvalidRuntimeSessionId {
                    length: id.chars().count(),
                });
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        if let Some(user) = &self.user_id {
            let length = user.chars().count();
            if !(1..=1024).contains(&length)
                || !user.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
            {
                return Err(ConfigError::InvalidRuntimeUserId { length });
            }
        }
        let auth = self
            .auth
            .into_auth(SIGNING_NAME, target.region(), self.clock);
        Ok(SigV4InvokeLayer {
            shared: Arc::new(Shared {
                auth,
                mapping: Mapping::Invoke(Box::new(Invoke {
                    target,
                    sessions: Sessions::new(
                        self.sessions,
                        session_id,
                        self.idle_timeout,
                        self.max_lifetime,
                        self.max_bound,
                    ),
                    user_id: self.user_id,
                    stop_on_delete: self.stop_on_delete,
                })),
            }),
        })
    }
}

impl SigV4InvokeLayerBuilder {
    /// The idle timeout and the lifetime, each at most [`MAX_RUNTIME_SESSION_TIME`].
    fn check_session_times(&self) -> Result<(), ConfigError> {
        let times = [
            ("runtime_session_idle_timeout", self.idle_timeout),
            ("runtime_session_max_lifetime", self.max_lifetime),
        ];
        match times
            .into_iter()
            .find(|(_, time)| *time > MAX_RUNTIME_SESSION_TIME)
        {
            Some((setting, given)) => Err(ConfigError::RuntimeSessionTimeTooLong {
                setting,
                given,
                max: MAX_RUNTIME_SESSION_TIME,
            }),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for SigV4InvokeLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4InvokeLayerBuilder")
            .field("target", &self.target)
            .field("auth", &self.auth)
            .field("runtime_session_id", &self.session_id)
            .field("runtime_sessions", &self.sessions)
            .field("runtime_session_idle_timeout", &self.idle_timeout)
            .field("runtime_session_max_lifetime", &self.max_lifetime)
            .field("max_bound_mcp_sessions", &self.max_bound)
            .field("runtime_user_id", &self.user_id)
            .field("stop_session_on_delete", &self.stop_on_delete)
            .finish_non_exhaustive()
    }
}

/// Carries MCP Streamable HTTP POSTs as `InvokeAgentRuntime`, signed for every attempt. See the
/// [module docs](self).
#[derive(Clone)]
pub struct SigV4InvokeLayer {
    shared: Arc<Shared>,
}

impl SigV4InvokeLayer {
    /// Starts building a layer for `target`, signing with credentials from `credentials` (any
    /// provider: static `Credentials`, a `SharedCredentialsProvider`, aws-config's chain…),
    /// resolved for every attempt. A provider that does not cache by itself — aws-config's
    /// default chain does not — runs on every attempt: wrap it in [`CachedCredentials`] (whose
    /// cache the layer then drops when the service says the credentials expired).
    ///
    /// [`CachedCredentials`]: crate::auth::CachedCredentials
    pub fn builder(
        target: InvokeTarget,
        credentials: impl ProvideCredentials + 'static,
    ) -> SigV4InvokeLayerBuilder {
        Self::with_auth(target, AuthSource::sigv4(credentials))
    }

    /// Starts building a layer for `target` — a runtime with OAuth inbound auth — that sends
    /// `Authorization: Bearer <token>` instead of a signature, with a token from `tokens`
    /// asked for every attempt (a [`BearerToken`], a [`TokenFn`], or your own
    /// [`ProvideToken`]). The mapping is the same as with SigV4: such a runtime is called at the
    /// same URL, with the same headers, and takes a token or a signature, never both.
    ///
    /// A 401 was refused before anything ran (the token was not taken): the provider is asked
    /// again, named the refused token, and the request sent once more, when the provider can
    /// refresh (a static [`BearerToken`] cannot) and the call's rule and budget allow it. A 401
    /// that stays one is delivered as an answer with its `WWW-Authenticate`, and the challenge
    /// read in its extensions ([`BearerChallenge`]: the `resource_metadata` URL an app's OAuth
    /// flow starts from).
    ///
    /// ```
    /// use agentcore_tower::auth::BearerToken;
    /// use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
    /// # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
    /// let layer = SigV4InvokeLayer::bearer(
    ///     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
    ///     BearerToken::new(std::env::var("MCP_TOKEN").unwrap_or_default()),
    /// )
    /// .build()?;
    /// assert!(format!("{layer:?}").contains("Bearer(..)"));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`BearerToken`]: crate::auth::BearerToken
    /// [`TokenFn`]: crate::auth::TokenFn
    /// [`BearerChallenge`]: crate::auth::BearerChallenge
    pub fn bearer(target: InvokeTarget, tokens: impl ProvideToken) -> SigV4InvokeLayerBuilder {
        Self::with_auth(target, AuthSource::bearer(tokens))
    }

    fn with_auth(target: InvokeTarget, auth: AuthSource) -> SigV4InvokeLayerBuilder {
        SigV4InvokeLayerBuilder {
            target,
            auth,
            session_id: None,
            sessions: RuntimeSessions::PerLayer,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_lifetime: DEFAULT_MAX_LIFETIME,
            max_bound: DEFAULT_MAX_BOUND,
            user_id: None,
            stop_on_delete: false,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// Starts building a layer for `target` from an AWS configuration (feature `aws-config`):
    /// the region when neither the target nor its ARN names one, the endpoint when the target
    /// sets none and the configuration has one, and the configuration's credentials provider,
    /// cached ([`CachedCredentials`](crate::auth::CachedCredentials): aws-config's chain does
    /// not cache by itself).
    ///
    /// ```no_run
    /// use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    /// let signer = SigV4InvokeLayer::from_sdk_config(
    ///     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
    ///     &config,
    /// )?
    /// .build()?;
    /// # let _ = signer;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "aws-config")]
    pub fn from_sdk_config(
        target: InvokeTarget,
        config: &aws_config::SdkConfig,
    ) -> Result<SigV4InvokeLayerBuilder, ConfigError> {
        let provider = config
            .credentials_provider()
            .ok_or(ConfigError::NoCredentials)?;
        Ok(Self::builder(
            target.completed_by(config),
            crate::auth::CachedCredentials::new(provider),
        ))
    }

    /// The layer's own runtime session id: the one requests that name none carry now with
    /// [`RuntimeSessions::PerLayer`]. With [`RuntimeSessions::PerMcpSession`] no request uses
    /// it: each MCP session has its own.
    pub fn runtime_session_id(&self) -> String {
        self.shared.invoke().sessions.default_id().to_string()
    }

    /// How the layer picks runtime sessions.
    pub fn runtime_sessions(&self) -> RuntimeSessions {
        self.shared.invoke().sessions.mode()
    }

    /// The checked target.
    pub fn target(&self) -> &ResolvedTarget {
        &self.shared.invoke().target
    }
}

/// What a call is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Invoke,
    StopSession,
    /// Sent as it is, to the URL it names (an MCP endpoint).
    Forward,
}

impl Invoke {
    /// What `request` becomes: an invocation, a `StopRuntimeSession`, or (why) a local 405.
    fn operation<B>(&self, request: &Request<B>) -> Result<Operation, String> {
        match *request.method() {
            Method::POST => Ok(Operation::Invoke),
            Method::DELETE if self.stop_on_delete => {
                let names_one = request.headers().contains_key(RUNTIME_SESSION_ID)
                    || self.sessions.to_stop(request.headers()).is_some();
                if names_one {
                    Ok(Operation::StopSession)
                } else {
                    Err(
                        "DELETE answered here with 405: no runtime session is bound to its MCP \
                         session, so there is none to stop"
                            .to_owned(),
                    )
                }
            }
            ref method => Err(format!(
                "{method} answered here with 405: InvokeAgentRuntime carries POST only"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
