//! [`SigV4InvokeLayer`]: an MCP Streamable HTTP POST carried as AgentCore's
//! `InvokeAgentRuntime`, signed afresh with `aws-sigv4` for every attempt (or carrying a bearer
//! token, for a runtime with OAuth inbound auth); [`McpEndpointLayer`]: an MCP request sent as
//! it is to an AgentCore Gateway or any SigV4- or OAuth-gated MCP URL.
//!
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::sigv4::{InvokeTarget, SigV4InvokeLayer};
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
//! | the URI the client passes | ignored on purpose: it names the MCP endpoint for reports; the request goes to `/runtimes/{ARN}/invocations` of the [`InvokeTarget`] |
//! | `content-type`, `accept`, `mcp-session-id`, `mcp-protocol-version`, `mcp-method`, `mcp-name`, runtime session and user ids, `x-amzn-trace-id`, `traceparent`, `tracestate`, `baggage` | carried (lengths checked against the model; a value outside them is refused with [`ErrorKind::InvalidRequest`](crate::ErrorKind)) |
//! | every other header | dropped before signing |
//! | GET (the server-message stream), DELETE | answered here with **405** and `Allow: POST`: the MCP spec reads 405 as "not offered", and clients carry on. With [`stop_session_on_delete`](SigV4InvokeLayerBuilder::stop_session_on_delete), a DELETE becomes `StopRuntimeSession` |
//! | any other method | 405 |
//!
//! `mcp-method` and `mcp-name` are filled from the JSON-RPC body for `tools/call`,
//! `resources/read` and `prompts/get` when the client did not set them — `mcp-name` only when
//! the tool, prompt or resource name can be one within the model's limits (visible ASCII, 1 to
//! 1,024 characters): the header is optional, so an empty, non-ASCII or longer name is left out
//! and the call goes on. `Host` is set here
//! (hyper-util adds it only after the layers ran, and it is signed), then `content-length`,
//! then the request is signed: signing name `bedrock-agentcore`, `aws-sigv4`'s default
//! settings — as the official SDK signs the same operation.
//!
//! # Every attempt is signed afresh
//! Put this layer innermost, under the retry layers: each attempt resolves the credentials
//! again (a credential rotated during a wait is never reused) and gets its own `x-amz-date` and
//! signature. Resolving is cheap when the provider caches; aws-config's default chain does not
//! (the AWS SDK caches in its own identity cache): wrap it in [`CachedCredentials`]. An answer
//! refusing expired credentials, or a signature from a clock far off, gets one more attempt,
//! freshly signed ([`auth`](crate::auth#expired-credentials-a-skewed-clock)).
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
//!   forgotten once idle longer than the runtime's idle timeout (its microVM is gone by then:
//!   [`runtime_session_idle_timeout`](SigV4InvokeLayerBuilder::runtime_session_idle_timeout),
//!   default 900 s), or when the layer holds
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
//! use agentcore_tower::sigv4::{InvokeTarget, RuntimeSessions, SigV4InvokeLayer};
//! use aws_credential_types::Credentials;
//! # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
//! // One layer for every user of a multi-tenant app: each MCP session gets its own microVM.
//! let signer = SigV4InvokeLayer::builder(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"),
//! )
//! .runtime_sessions(RuntimeSessions::PerMcpSession)
//! // The runtime's `idleRuntimeSessionTimeout`, when it is not AgentCore's default 900 s.
//! .runtime_session_idle_timeout(Duration::from_secs(3600))
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
//! `Content-Length` stays exact (see
//! [redaction](crate::redact)). The outcome, the error type and the runtime session
//! id are read from the answer after it is redacted.
//!
//! A 404 from the service (`x-amzn-errortype: ResourceNotFoundException`: a wrong runtime ARN or
//! qualifier) comes back as a 404 too. MCP clients read a 404 on a request that carries an
//! `Mcp-Session-Id` as "session expired" and re-initialise: check `x-amzn-errortype` first.
//!
//! # Runtimes with OAuth inbound auth
//! [`SigV4InvokeLayer::bearer`] is the same layer with a token provider in place of credentials,
//! for a runtime with a JWT authorizer: see [`auth`](crate::auth#runtimes-with-oauth-inbound-auth).
//!
//! # MCP endpoints
//! [`McpEndpointLayer`] sends an MCP request as it is — method, URL (path and query), headers —
//! to the URL it names, authenticated afresh on every attempt with SigV4 (for a configurable
//! [`signing_name`](McpEndpointLayerBuilder::signing_name), default `bedrock-agentcore`, and
//! region) or a bearer token:
//!
//! * **AgentCore Gateway**: `https://{gateway-id}.gateway.bedrock-agentcore.{region}.amazonaws.com/mcp`
//!   ([`gateway_url`]), plain MCP Streamable HTTP, inbound auth `AWS_IAM` (SigV4, signing name
//!   `bedrock-agentcore`) or `CUSTOM_JWT` (a bearer token; a 401 carries
//!   `Bearer error="invalid_token", scope=…, resource_metadata="https://{host}/.well-known/oauth-protected-resource"`,
//!   a token without the scopes a 403 `insufficient_scope`). With sessions on, `initialize`
//!   answers an `Mcp-Session-Id`; a later request without it gets a 400, an expired id or
//!   another principal's a **404** — delivered, so an MCP client re-initialises (AgentCore
//!   developer guide, *Gateway sessions*).
//! * **Any SigV4-gated MCP server**: API Gateway with IAM auth (signing name `execute-api`), a
//!   Lambda function URL (`lambda`), an AWS-managed MCP server (its own, e.g. `aws-mcp` for
//!   `aws-mcp.us-east-1.api.aws`).
//!
//! The request's own headers travel (the MCP ones among them), minus the hop-by-hop ones and
//! any `Authorization`, `X-Amz-Date` or `X-Amz-Security-Token` of its own; `Host` comes from the
//! URL, `Content-Length` from the body. The signature covers every header but `user-agent`,
//! `x-amzn-trace-id` and `transfer-encoding` (`aws-sigv4`'s defaults, as the AWS SDKs and
//! botocore sign), and the real payload hash. Nothing is answered locally: GET (the server's
//! message stream) and DELETE (ending the MCP session) go to the server, which decides. The
//! answer keeps every header but the hop-by-hop ones, redacted as above. The URL must be
//! absolute and carry no user or password, and be at the layer's
//! [`origin`](McpEndpointLayerBuilder::origin) when it was given one
//! ([`ErrorKind::InvalidRequest`](crate::ErrorKind) otherwise, and nothing is sent). The
//! retry layers and the guard work over it as over the invoke layer:
//! [`RecommendedLayers`](crate::RecommendedLayers) takes either.
//!
//! ```
//! use agentcore_tower::sigv4::{McpEndpointLayer, gateway_url};
//! use agentcore_tower::{ReplayGuardLayer, recommended_layers};
//! use aws_credential_types::Credentials;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gateway = gateway_url("my-gateway-abc123", "us-east-1")?;
//! let signer = McpEndpointLayer::sigv4(Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"))
//!     .region("us-east-1")
//!     .build()?;
//! let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//!     .build_http::<http_body_util::Full<bytes::Bytes>>();
//! let stack = tower::ServiceBuilder::new()
//!     .layer(recommended_layers(ReplayGuardLayer::new(), signer))
//!     .service(client);
//! // Every request names the gateway's URL: `Request::post(gateway.clone())…`.
//! # let _ = (stack, gateway);
//! # Ok(())
//! # }
//! ```
//!
//! # The send gate
//! A request may carry a [`SharedSendGate`] in its extensions: asked after signing, just before
//! the service below is called, on every attempt. A refusal ends the call, and nothing is sent.

mod endpoint;
mod gate;
mod request;
mod session;
mod target;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Full;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

pub use endpoint::{McpEndpoint, McpEndpointLayer, McpEndpointLayerBuilder, gateway_url};
pub use gate::{ClosableGate, SendGate, SharedSendGate};
pub use session::RuntimeSessions;
pub(crate) use session::{RenewedFrom, mcp_session_of};
/// Percent-encodes a path label as the SDK does (the emulator builds its URLs with it).
#[cfg(feature = "emulator")]
pub(crate) use target::encode as encode_label;
pub use target::{InvokeTarget, ResolvedTarget};

use crate::auth::{
    Auth, AuthSource, BearerChallenge, BearerToken, CachedCredentials, Clock, Key, KeyFuture,
    ProvideToken, Refresh,
};
use crate::body::{ReadError, ReadToBytes};
use crate::context::{CallContext, KeptExtensions, Ownership};
use crate::error::{BoxError, ConfigError, Error, ErrorKind};
use crate::record::{Decision, Handed, Outcome, Verdict};
use crate::redact::{self, InvokeBody, Secrets};
use crate::rule::{Failure, Refusal};
use request::{RUNTIME_SESSION_ID, SIGNING_NAME, is_valid_session_id};
use session::{Chosen, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND, Sessions};

/// The largest payload `InvokeAgentRuntime` accepts.
pub const MAX_PAYLOAD_BYTES: usize = 100_000_000;

/// What a layer shares with its services and their calls.
struct Shared {
    auth: Auth,
    mapping: Mapping,
}

/// Where a request goes, and what it becomes on the way.
enum Mapping {
    /// Carried as `InvokeAgentRuntime` to a runtime.
    Invoke(Box<Invoke>),
    /// Sent to the URL it names, as it is (an MCP endpoint: AgentCore Gateway, any MCP server),
    /// at the one origin given, if any.
    Endpoint(Option<request::Origin>),
}

/// The invoke mapping's settings.
struct Invoke {
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
    /// it sooner would only send a live MCP session to a new microVM, without its state. A
    /// longer one is taken as given (up to 8 hours for a runtime on microVMs, 14 days on
    /// instances). The time counts from when the layer last chose the binding for a request
    /// or read an answer's head for it: an answer streamed for longer than this (an SSE stream
    /// may last an hour) leaves the binding idle meanwhile — set the time above your longest
    /// stream if a session's next request must find its microVM after one. Time is read from
    /// tokio's clock, so a test with a paused clock drives it. Ignored with
    /// [`RuntimeSessions::PerLayer`].
    pub fn runtime_session_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// With [`RuntimeSessions::PerMcpSession`]: how many MCP sessions are bound at most; binding
    /// one more forgets the one used least recently (its next request gets a new runtime
    /// session). Default 100,000: a memory bound — some 260 bytes a binding with UUID ids, so
    /// 26 MB full (`compat/benches/runtime_sessions.rs`) — a hundred times the runtime sessions
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
                        self.max_bound,
                    ),
                    user_id: self.user_id,
                    stop_on_delete: self.stop_on_delete,
                })),
            }),
        })
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
    pub fn builder(
        target: InvokeTarget,
        credentials: impl ProvideCredentials + 'static,
    ) -> SigV4InvokeLayerBuilder {
        Self::with_auth(target, AuthSource::sigv4(credentials))
    }

    /// Starts building a layer for `target` — a runtime with OAuth inbound auth — that sends
    /// `Authorization: Bearer <token>` instead of a signature, with a token from `tokens`
    /// asked for every attempt (a [`BearerToken`], a [`TokenFn`](crate::auth::TokenFn), or
    /// your own [`ProvideToken`]). The mapping is the same as with SigV4: such a runtime is called at the
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
    /// use agentcore_tower::sigv4::{InvokeTarget, SigV4InvokeLayer};
    /// use agentcore_tower::auth::BearerToken;
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
            max_bound: DEFAULT_MAX_BOUND,
            user_id: None,
            stop_on_delete: false,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// Starts building a layer for `target` from an AWS configuration (feature `aws-config`):
    /// the region when neither the target nor its ARN names one, the endpoint when the target
    /// sets none and the configuration has one, and the configuration's credentials provider,
    /// cached ([`CachedCredentials`]: aws-config's chain does not cache by itself).
    ///
    /// ```no_run
    /// use agentcore_tower::sigv4::{InvokeTarget, SigV4InvokeLayer};
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
            CachedCredentials::new(provider),
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

impl fmt::Debug for SigV4InvokeLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shared, f)
    }
}

impl<S> Layer<S> for SigV4InvokeLayer {
    type Service = SigV4Invoke<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SigV4Invoke {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The service [`SigV4InvokeLayer`] builds.
#[derive(Clone)]
pub struct SigV4Invoke<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> SigV4Invoke<S> {
    /// The layer's own runtime session id: the one requests that name none carry now with
    /// [`RuntimeSessions::PerLayer`]. With [`RuntimeSessions::PerMcpSession`] no request uses
    /// it: each MCP session has its own.
    pub fn runtime_session_id(&self) -> String {
        self.shared.invoke().sessions.default_id().to_string()
    }

    inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for SigV4Invoke<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4Invoke")
            .field("inner", &self.inner)
            .field("shared", &self.shared)
            .finish()
    }
}

/// What a call is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Invoke,
    StopSession,
    /// Sent as it is, to the URL it names (an MCP endpoint).
    Forward,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for SigV4Invoke<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    type Response = Response<InvokeBody<ResB>>;
    type Error = Error;
    type Future = ResponseFuture<S, ReqB, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::from_service)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let operation = match &self.shared.mapping {
            Mapping::Endpoint(_) => Ok(Operation::Forward),
            Mapping::Invoke(invoke) => invoke.operation(&request),
        };
        call(&mut self.inner, &self.shared, request, operation)
    }
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

/// Starts a call of `request` through `inner` (the ready service; a clone stays behind), as
/// `operation` says.
fn call<S, ReqB, ResB>(
    inner: &mut S,
    shared: &Arc<Shared>,
    mut request: Request<ReqB>,
    operation: Result<Operation, String>,
) -> ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>> + Clone,
    ReqB: Body,
    ResB: Body<Data = Bytes>,
{
    let layer = shared.layer();
    let (context, ownership) = CallContext::enter(&mut request, layer, None, None);
    let mut call = Call {
        handed: Handed::of(context.record(), &request),
        index: 0,
        layer,
        context,
        ownership,
    };
    let operation = match operation {
        Ok(operation) => operation,
        Err(why) => {
            // GET (the server-message stream), DELETE and anything else: not offered.
            let response = redact::local(StatusCode::METHOD_NOT_ALLOWED, &[("allow", "POST")], "");
            call.handed.not_sent(why);
            return ResponseFuture {
                state: State::Local {
                    response: Some(response),
                },
                call,
            };
        }
    };
    let clone = inner.clone();
    let service = std::mem::replace(inner, clone);
    let (parts, body) = request.into_parts();
    ResponseFuture {
        state: State::Reading {
            reading: ReadToBytes::new(body, MAX_PAYLOAD_BYTES),
            pending: Some(Pending {
                parts,
                service,
                shared: shared.clone(),
                operation,
                may_refresh: true,
                kept_extensions: None,
            }),
        },
        call,
    }
}

struct Pending<S> {
    parts: http::request::Parts,
    service: S,
    shared: Arc<Shared>,
    operation: Operation,
    /// Whether this call may still be sent once more, authenticated afresh (expired
    /// credentials, a skewed clock, a refused token).
    may_refresh: bool,
    /// For that re-send: the extensions the first attempt carried, put back into `parts`
    /// only if it is made.
    kept_extensions: Option<KeptExtensions>,
}

struct Prepared<S, ResB> {
    pending: Pending<S>,
    body: Bytes,
    /// For a re-send after a refusal: the refused answer, delivered as it came when the
    /// re-send cannot be made (no fresh token or credentials, the service not ready), and the
    /// secrets of the refused attempt, kept out of the new answer too.
    refused: Option<Refused<ResB>>,
}

/// An answer that called for fresh authentication, held until the re-send is on its way.
struct Refused<ResB> {
    parts: http::response::Parts,
    body: ResB,
    secrets: Secrets,
    chosen: Option<Chosen>,
}

/// What one attempt was signed with, for its answer.
struct Signed {
    request: Request<Full<Bytes>>,
    secrets: Secrets,
    /// The time its signature was dated by (SigV4).
    signed_at: Option<SystemTime>,
    /// The runtime session, when the layer chose it (the request named none).
    chosen: Option<Chosen>,
}

/// The call as this layer sees it: the attempt it was handed (until it sends it on) and the one
/// it sent, its context, its ownership when this layer is the first of the crate's. (Dropped in
/// this order: the record is final before the owner calls the hooks.)
struct Call {
    handed: Handed,
    index: usize,
    /// The layer's name in the record.
    layer: &'static str,
    context: CallContext,
    ownership: Option<Ownership>,
}

impl Call {
    /// Records a failure before sending and returns the error, with the record.
    fn not_sent(&mut self, error: Error) -> Error {
        self.handed.not_sent(error.to_string());
        self.end(false);
        error.with_record(self.context.record())
    }

    /// A re-send after a refusal could not be made (`error`): the refused answer is delivered
    /// as it came, the re-send recorded as not sent. Without one (the first attempt), the
    /// error ends the call.
    fn not_resent<S, ResB: Body>(
        &mut self,
        error: Error,
        refused: Option<Refused<ResB>>,
        pending: &Pending<S>,
    ) -> Result<Response<InvokeBody<ResB>>, Error> {
        let Some(refused) = refused else {
            return Err(self.not_sent(error));
        };
        self.handed.not_sent(format!(
            "{error}; the refused answer is delivered as it came"
        ));
        let response = deliver(
            self,
            &pending.shared,
            pending.operation,
            refused.chosen,
            refused.parts,
            refused.body,
            refused.secrets,
        );
        self.end(false);
        Ok(response)
    }

    /// Whether the call may be sent once more after `refresh`: the call's rule and budget
    /// allow it. Records the decision either way.
    fn may_send_again(&self, refresh: &Refresh) -> bool {
        let record = self.context.record();
        let cause = refresh.cause();
        let failure = Failure::Refused(Refusal::CredentialsRejected);
        // The signer has no cap or ceiling of its own: the call's, its rule and budget decide.
        let verdict = self.context.grant(
            self.layer,
            &failure,
            cause,
            (u32::MAX, std::time::Duration::MAX),
            std::time::Duration::ZERO,
        );
        match verdict {
            Ok(permission) => {
                record.decide(Decision::new(
                    self.layer,
                    Verdict::SentAgain {
                        cause,
                        wait: std::time::Duration::ZERO,
                        retry_after: None,
                    },
                    Some(permission),
                ));
                true
            }
            Err((verdict, permission)) => {
                record.decide(Decision::new(self.layer, verdict, permission));
                false
            }
        }
    }

    /// Sends `request` on as this call's attempt.
    fn dispatch<B>(&mut self, request: &mut Request<B>) {
        self.handed.sent();
        self.index = self.context.record().dispatch(request);
    }

    /// The call ends here with an answer or an error.
    fn end(&mut self, succeeded: bool) {
        if let Some(owner) = self.ownership.take() {
            owner.finish(succeeded);
        }
    }
}

pin_project! {
    /// The response future of [`SigV4Invoke`].
    pub struct ResponseFuture<S, ReqB, ResB>
    where
        S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
        ReqB: Body,
        ResB: Body,
    {
        #[pin]
        state: State<S, ReqB, ResB>,
        call: Call,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqB, ResB>
    where
        S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
        ReqB: Body,
        ResB: Body,
    {
        Reading {
            #[pin]
            reading: ReadToBytes<ReqB>,
            pending: Option<Pending<S>>,
        },
        Resolving {
            key: KeyFuture,
            prepared: Option<Prepared<S, ResB>>,
        },
        Calling {
            #[pin]
            future: S::Future,
            secrets: Secrets,
            signed_at: Option<SystemTime>,
            chosen: Option<Chosen>,
            shared: Arc<Shared>,
            operation: Operation,
            again: Option<Prepared<S, ResB>>,
            // The bearer token sent, named to its provider should the server refuse it.
            token: Option<BearerToken>,
        },
        Refreshing {
            prepared: Option<Prepared<S, ResB>>,
            // The bearer token the server refused, when that is why it is sent again.
            refused_token: Option<BearerToken>,
        },
        Local {
            response: Option<Response<InvokeBody<ResB>>>,
        },
        Done,
    }
}

impl<S, ReqB, ResB> Future for ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    type Output = Result<Response<InvokeBody<ResB>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Reading { reading, pending } => {
                    let read = std::task::ready!(reading.poll(cx));
                    let pending = pending.take().unwrap_or_else(|| unreachable!("taken once"));
                    let body = match read {
                        Ok(bytes) => bytes,
                        Err(error) => {
                            this.state.set(State::Done);
                            let error = match error {
                                ReadError::TooLarge => {
                                    Error::new(ErrorKind::BodyTooLarge, None, None)
                                }
                                ReadError::Body(e) => {
                                    Error::new(ErrorKind::RequestBody, None, Some(e.into()))
                                }
                            };
                            return Poll::Ready(Err(this.call.not_sent(error)));
                        }
                    };
                    let key = pending.shared.auth.resolve(None);
                    this.state.set(State::Resolving {
                        key,
                        prepared: Some(Prepared {
                            pending,
                            body,
                            refused: None,
                        }),
                    });
                }
                StateProj::Resolving { key, prepared } => {
                    let resolved = std::task::ready!(key.as_mut().poll(cx));
                    let Prepared {
                        mut pending,
                        body,
                        refused,
                    } = prepared
                        .take()
                        .unwrap_or_else(|| unreachable!("taken once"));
                    let context = &this.call.context;
                    // What a re-send with fresh credentials would need: the request as it came.
                    // Signing reads the head and moves the extensions to the request sent: only
                    // they are kept (copied unless they are the call's own marks alone); the
                    // head is kept as it is.
                    let copy = pending.may_refresh.then(|| {
                        (
                            context.keep_extensions(&pending.parts.extensions),
                            body.clone(),
                        )
                    });
                    let mut token = None;
                    let sent = resolved.and_then(|key| {
                        if let (Key::Bearer(sent), Some(_)) = (&key, &copy) {
                            token = Some(sent.clone());
                        }
                        sign_attempt(&mut pending, body, &key, context)
                    });
                    let Signed {
                        mut request,
                        mut secrets,
                        signed_at,
                        chosen,
                    } = match sent {
                        Ok(signed) => signed,
                        Err(error) => {
                            this.state.set(State::Done);
                            return Poll::Ready(this.call.not_resent(error, refused, &pending));
                        }
                    };
                    if let Some(refused) = &refused {
                        // The refused attempt's secrets (a token no longer used, an old
                        // session token) must not come back in this answer either.
                        secrets.extend(&refused.secrets);
                    }
                    if let Some(gate) = request.extensions().get::<SharedSendGate>()
                        && let Err(reason) = gate.check()
                    {
                        this.state.set(State::Done);
                        let error = Error::new(ErrorKind::SendGateClosed, reason, None);
                        return Poll::Ready(this.call.not_resent(error, refused, &pending));
                    }
                    let Pending {
                        parts,
                        mut service,
                        shared,
                        operation,
                        ..
                    } = pending;
                    this.call.dispatch(&mut request);
                    let future = service.call(request);
                    let again = copy.map(|(extensions, body)| Prepared {
                        refused: None,
                        pending: Pending {
                            parts,
                            service,
                            shared: shared.clone(),
                            operation,
                            may_refresh: false,
                            kept_extensions: Some(extensions),
                        },
                        body,
                    });
                    this.state.set(State::Calling {
                        future,
                        secrets,
                        signed_at,
                        chosen,
                        shared,
                        operation,
                        again,
                        token,
                    });
                }
                StateProj::Refreshing {
                    prepared,
                    refused_token,
                } => {
                    let Some(again) = prepared.as_mut() else {
                        unreachable!("taken once")
                    };
                    if let Err(error) = std::task::ready!(again.pending.service.poll_ready(cx)) {
                        let Some(again) = prepared.take() else {
                            unreachable!("taken once")
                        };
                        this.state.set(State::Done);
                        let error = Error::from_service(error);
                        return Poll::Ready(this.call.not_resent(
                            error,
                            again.refused,
                            &again.pending,
                        ));
                    }
                    let key = again.pending.shared.auth.resolve(refused_token.as_ref());
                    let prepared = prepared.take();
                    this.state.set(State::Resolving { key, prepared });
                }
                StateProj::Calling {
                    future,
                    secrets,
                    signed_at,
                    chosen,
                    shared,
                    operation,
                    again,
                    token,
                } => {
                    let result = std::task::ready!(future.poll(cx));
                    let token = token.take();
                    let secrets = std::mem::take(secrets);
                    let signed_at = *signed_at;
                    let chosen = chosen.take();
                    let shared = shared.clone();
                    let operation = *operation;
                    let again = again.take();
                    this.state.set(State::Done);
                    let call = &mut *this.call;
                    let record = call.context.record().clone();
                    let result = match result {
                        Ok(response) => {
                            let (mut parts, body) = response.into_parts();
                            // The server's clock, read before the head is filtered (the app
                            // does not get `Date`): only parsed, never shown.
                            let server_time = parts
                                .headers
                                .get(http::header::DATE)
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| httpdate::parse_http_date(v).ok());
                            // Redact first: nothing below is read from an unredacted head.
                            match shared.mapping {
                                Mapping::Invoke(_) => {
                                    redact::filter_headers(&mut parts.headers, &secrets);
                                }
                                Mapping::Endpoint(_) => {
                                    redact::filter_endpoint_headers(&mut parts.headers, &secrets);
                                }
                            }
                            record.complete(call.index, || {
                                Outcome::of_response(parts.status, &parts.headers)
                            });
                            // Expired credentials, a skewed clock, a refused token: once more,
                            // authenticated afresh.
                            let refresh = again
                                .is_some()
                                .then(|| {
                                    shared.auth.refresh_for(
                                        parts.status,
                                        &parts.headers,
                                        server_time,
                                        signed_at,
                                    )
                                })
                                .flatten();
                            if let (Some(refresh), Some(mut again)) = (refresh, again)
                                && call.may_send_again(&refresh)
                            {
                                shared.auth.refresh(&refresh);
                                // Held, not read: delivered as it came if the re-send cannot
                                // be made.
                                again.refused = Some(Refused {
                                    parts,
                                    body,
                                    secrets,
                                    chosen,
                                });
                                this.state.set(State::Refreshing {
                                    prepared: Some(again),
                                    refused_token: token
                                        .filter(|_| matches!(refresh, Refresh::TokenRefused)),
                                });
                                continue;
                            }
                            Ok(deliver(
                                call, &shared, operation, chosen, parts, body, secrets,
                            ))
                        }
                        Err(error) => {
                            let error = Error::from_service(error);
                            record.complete(call.index, || Outcome::Failure(error.failure_kind()));
                            Err(error.with_record(&record))
                        }
                    };
                    // The head says whether it succeeded; a platform error in a 200 is for the
                    // layers above to read (they end the call when they own it).
                    call.end(result.as_ref().is_ok_and(|r| r.status().is_success()));
                    return Poll::Ready(result);
                }
                StateProj::Local { response } => {
                    let mut response = response
                        .take()
                        .unwrap_or_else(|| unreachable!("taken once"));
                    this.state.set(State::Done);
                    if this.call.ownership.is_some() {
                        response
                            .extensions_mut()
                            .insert(this.call.context.record().clone());
                    }
                    this.call.end(false);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done => panic!("ResponseFuture polled after it completed"),
            }
        }
    }
}

/// Hands an answer (its head redacted) to the app: the runtime session adopted or forgotten,
/// a `Bearer` challenge read into its extensions, the record attached when this layer owns
/// the call, the call ended.
fn deliver<ResB: Body>(
    call: &mut Call,
    shared: &Shared,
    operation: Operation,
    chosen: Option<Chosen>,
    mut parts: http::response::Parts,
    body: ResB,
    secrets: Secrets,
) -> Response<InvokeBody<ResB>> {
    if let Some(chosen) = &chosen {
        let sessions = &shared.invoke().sessions;
        match operation {
            Operation::Invoke => sessions.adopt(chosen, &parts.headers),
            Operation::StopSession if parts.status.is_success() => sessions.forget(chosen),
            Operation::StopSession | Operation::Forward => {}
        }
    }
    // A refused token (401), too few scopes (403 `insufficient_scope`): the challenge, for an
    // app that runs the OAuth flow.
    if matches!(
        parts.status,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
    ) && let Some(challenge) = BearerChallenge::of(&parts.headers)
    {
        parts.extensions.insert(challenge);
    }
    if call.ownership.is_some() {
        parts.extensions.insert(call.context.record().clone());
    }
    Response::from_parts(parts, InvokeBody::remote(body, secrets))
}

/// Maps and authenticates one attempt.
fn sign_attempt<S>(
    pending: &mut Pending<S>,
    body: Bytes,
    key: &Key,
    context: &CallContext,
) -> Result<Signed, Error> {
    let shared = &pending.shared;
    // Each attempt is a call of its own here: the extensions move to the request sent (for a
    // re-send, those the first attempt carried).
    let extensions = match pending.kept_extensions.take() {
        Some(kept) => context.restore_extensions(&kept),
        None => std::mem::take(&mut pending.parts.extensions),
    };
    if pending.operation == Operation::Forward {
        let bearer = matches!(shared.auth, Auth::Bearer(_));
        let origin = match &shared.mapping {
            Mapping::Endpoint(origin) => origin.as_ref(),
            Mapping::Invoke(_) => None,
        };
        let (uri, text, host) = request::endpoint_uri(&pending.parts.uri, bearer, origin)?;
        let method = pending.parts.method.clone();
        let headers = request::endpoint_headers(&pending.parts.headers, host, &method, &body);
        let (request, secrets, signed_at) =
            shared
                .auth
                .authorize(key, method, (uri, &text), headers, body, extensions)?;
        return Ok(Signed {
            request,
            secrets,
            signed_at,
            chosen: None,
        });
    }
    let invoke = shared.invoke();
    let target = &invoke.target;
    let headers = &pending.parts.headers;
    // A request that names its runtime session goes there, for that request only. Else the
    // layer picks one, the same for every attempt of the call.
    let chosen = match headers.get(RUNTIME_SESSION_ID) {
        Some(_) => None,
        None => {
            let mcp_session = mcp_session_of(headers);
            // An `initialize` that re-opens an expired MCP session: on that session's microVM.
            let renewed_from = extensions.get::<RenewedFrom>();
            let mut picked = None;
            let id = context.runtime_session(|| {
                let chosen = match pending.operation {
                    Operation::StopSession => invoke.sessions.to_stop(headers),
                    Operation::Invoke | Operation::Forward => None,
                }
                .unwrap_or_else(|| invoke.sessions.choose(mcp_session, renewed_from));
                let id = chosen.id.clone();
                picked = Some(chosen);
                id
            });
            Some(picked.unwrap_or_else(|| invoke.sessions.pinned(id, mcp_session, renewed_from)))
        }
    };
    let session_id = chosen.as_ref().map(|c| &*c.id);
    let (uri, uri_text, headers, body) = match pending.operation {
        Operation::StopSession => {
            let session_id = match session_id {
                Some(id) => id,
                None => headers
                    .get(RUNTIME_SESSION_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
            };
            let (headers, body) = request::stop_request(session_id, &context.stop_token(), target)?;
            (
                target.stop_session_uri(),
                target.stop_session_text(),
                headers,
                body,
            )
        }
        Operation::Invoke | Operation::Forward => {
            let headers = request::invoke_headers(
                headers,
                context,
                &body,
                session_id,
                invoke.user_id.as_deref(),
                target,
            )?;
            (
                target.invocation_uri(),
                target.invocation_text(),
                headers,
                body,
            )
        }
    };
    let (request, secrets, signed_at) = shared.auth.authorize(
        key,
        Method::POST,
        (uri, uri_text),
        headers,
        body,
        extensions,
    )?;
    Ok(Signed {
        request,
        secrets,
        signed_at,
        chosen,
    })
}

impl<S, ReqB, ResB> fmt::Debug for ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    ReqB: Body,
    ResB: Body,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

#[cfg(all(test, feature = "aws-config"))]
mod sdk_config_tests {
    use super::*;
    use aws_credential_types::Credentials;
    use aws_credential_types::provider::SharedCredentialsProvider;

    #[test]
    fn a_signer_from_an_sdk_config_takes_what_the_target_leaves_open() {
        let config = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("eu-west-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "AKID", "secret", None, None, "test",
            )))
            .build();
        // A runtime id names no region: the configuration's.
        let signer = SigV4InvokeLayer::from_sdk_config(
            InvokeTarget::runtime_id("calc-AbC123", "123456789012"),
            &config,
        )
        .unwrap()
        .build()
        .unwrap();
        assert_eq!(signer.target().region(), "eu-west-1");
        // An ARN names its own: it wins over the configuration's.
        let signer = SigV4InvokeLayer::from_sdk_config(
            InvokeTarget::arn(
                "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/calc-AbC123",
            ),
            &config,
        )
        .unwrap()
        .build()
        .unwrap();
        assert_eq!(signer.target().region(), "us-west-2");
        let bare = aws_config::SdkConfig::builder().build();
        assert_eq!(
            SigV4InvokeLayer::from_sdk_config(InvokeTarget::runtime_id("x", "123456789012"), &bare)
                .err(),
            Some(ConfigError::NoCredentials)
        );
    }
}

#[cfg(test)]
mod session_tests {
    use std::convert::Infallible;
    use std::sync::Mutex;

    use aws_credential_types::Credentials;
    use tower::{ServiceExt, service_fn};

    use super::*;

    /// An `initialize` carrying [`RenewedFrom`] goes to the expired MCP session's microVM, and
    /// the new MCP session takes it over.
    #[tokio::test]
    async fn a_renewal_is_read_from_the_requests_extensions() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = service_fn({
            let seen = seen.clone();
            move |request: Request<Full<Bytes>>| {
                let runtime = request.headers()[RUNTIME_SESSION_ID]
                    .to_str()
                    .unwrap()
                    .to_owned();
                let opens = !request.headers().contains_key("mcp-session-id");
                seen.lock().unwrap().push(runtime);
                let mut answer = Response::builder().status(200);
                if opens {
                    answer = answer.header("mcp-session-id", "new");
                }
                async move { Ok::<_, Infallible>(answer.body(Full::new(Bytes::new())).unwrap()) }
            }
        });
        let signer = SigV4InvokeLayer::builder(
            InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-AbC123"),
            Credentials::new("AKID", "secret", None, None, "test"),
        )
        .runtime_sessions(RuntimeSessions::PerMcpSession)
        .build()
        .unwrap();
        let service = signer.layer(server);
        let send = |mcp_session: Option<&str>, renewed_from: Option<&str>| {
            let mut request = Request::post("http://mcp.invalid/mcp")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            if let Some(mcp_session) = mcp_session {
                request = request.header("mcp-session-id", mcp_session);
            }
            let mut request = request
                .body(Full::new(Bytes::from_static(
                    br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                )))
                .unwrap();
            if let Some(old) = renewed_from {
                request.extensions_mut().insert(RenewedFrom(old.into()));
            }
            service.clone().oneshot(request)
        };
        send(Some("old"), None).await.unwrap();
        send(None, Some("old")).await.unwrap();
        send(Some("new"), None).await.unwrap();
        send(Some("old"), None).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen[1], seen[0],
            "the renewal goes to the old session's microVM"
        );
        assert_eq!(seen[2], seen[0], "and the new MCP session stays there");
        assert_ne!(
            seen[3], seen[0],
            "the old MCP session is bound to it no more"
        );
    }
}
