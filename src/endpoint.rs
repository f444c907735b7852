//! [`McpEndpointLayer`]: an MCP request sent as it is to the URL it names — an AgentCore
//! Gateway, an MCP server behind API Gateway or a Lambda function URL, any SigV4- or
//! OAuth-gated MCP server — authenticated afresh for every attempt.
//!
//! ```
//! use agentcore_tower::endpoint::{McpEndpointLayer, gateway_url};
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
//! answer keeps every header but the hop-by-hop ones, [redacted](crate::redact). The URL must be
//! absolute and carry no user or password, and be at the layer's
//! [`origin`](McpEndpointLayerBuilder::origin) when it was given one
//! ([`ErrorKind::InvalidRequest`](crate::ErrorKind) otherwise, and nothing is sent). The
//! retry layers and the guard work over it as over the
//! [invoke layer](crate::invoke::SigV4InvokeLayer): [`RecommendedLayers`](crate::RecommendedLayers)
//! takes either. A request's [send gate](crate::invoke::SharedSendGate) is asked as there.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use aws_credential_types::provider::ProvideCredentials;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Full;
use tower::{Layer, Service};

use crate::auth::{AuthSource, Clock, ProvideToken};
use crate::error::{BoxError, ConfigError, Error};
use crate::invoke::{Mapping, Origin, ResponseFuture, SIGNING_NAME, Shared, check_region};
use crate::redact::InvokeBody;

/// The URL of an AgentCore Gateway's MCP endpoint:
/// `https://{gateway_id}.gateway.bedrock-agentcore.{region}.amazonaws.com/mcp`.
///
/// ```
/// let url = agentcore_tower::endpoint::gateway_url("my-gateway-abc123", "us-east-1")?;
/// assert_eq!(
///     url.to_string(),
///     "https://my-gateway-abc123.gateway.bedrock-agentcore.us-east-1.amazonaws.com/mcp"
/// );
/// # Ok::<(), agentcore_tower::error::ConfigError>(())
/// ```
pub fn gateway_url(gateway_id: &str, region: &str) -> Result<http::Uri, ConfigError> {
    let plausible = (1..=100).contains(&gateway_id.len())
        && gateway_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !gateway_id.starts_with('-')
        && !gateway_id.ends_with('-');
    if !plausible {
        return Err(ConfigError::InvalidGatewayId(gateway_id.to_owned()));
    }
    check_region(region)?;
    let id = gateway_id.to_ascii_lowercase();
    format!("https://{id}.gateway.bedrock-agentcore.{region}.amazonaws.com/mcp")
        .parse()
        .map_err(|_| ConfigError::InvalidGatewayId(gateway_id.to_owned()))
}

/// Builds an [`McpEndpointLayer`], checking every setting.
pub struct McpEndpointLayerBuilder {
    auth: AuthSource,
    region: Option<String>,
    signing_name: String,
    clock: Clock,
    origin: Option<String>,
}

impl McpEndpointLayerBuilder {
    /// The region signatures are made for (SigV4: required; unused with a bearer token).
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// The service name signatures are made for (default `bedrock-agentcore`, AgentCore
    /// Gateway's): `execute-api` for API Gateway, `lambda` for a Lambda function URL, the
    /// service's own for an AWS-managed MCP server.
    pub fn signing_name(mut self, name: impl Into<String>) -> Self {
        self.signing_name = name.into();
        self
    }

    /// Sends to the origin of `url` only: its scheme, host and port (its path and query do not
    /// matter). A request that names another origin is not sent, and fails with
    /// [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest): no signature is made
    /// for it and no token attached (the provider may have been asked for one), so that a
    /// token or signature meant for one server never reaches another, whatever URL an MCP
    /// client is handed or a layer shared by several servers' clients is given. Without it,
    /// the layer sends wherever each request names.
    ///
    /// ```
    /// use agentcore_tower::auth::BearerToken;
    /// use agentcore_tower::endpoint::McpEndpointLayer;
    ///
    /// let layer = McpEndpointLayer::bearer(BearerToken::new("eyJhbGciOi..."))
    ///     .origin("https://mcp.example.com/mcp")
    ///     .build()?;
    /// assert_eq!(
    ///     format!("{layer:?}"),
    ///     r#"McpEndpoint { auth: Bearer(..), origin: https://mcp.example.com }"#
    /// );
    /// // A URL that is none, or plain http with a bearer token: refused when built.
    /// assert!(McpEndpointLayer::bearer(BearerToken::new("eyJhbGciOi..."))
    ///     .origin("http://mcp.example.com")
    ///     .build()
    ///     .is_err());
    /// # Ok::<(), agentcore_tower::error::ConfigError>(())
    /// ```
    pub fn origin(mut self, url: impl Into<String>) -> Self {
        self.origin = Some(url.into());
        self
    }

    /// The wall clock signatures are dated by (default `SystemTime::now`); for tests.
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Checks the settings and builds the layer; the error names what is wrong.
    pub fn build(self) -> Result<McpEndpointLayer, ConfigError> {
        let name = &self.signing_name;
        let plausible = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !plausible {
            return Err(ConfigError::InvalidSigningName(name.clone()));
        }
        let region = match (&self.region, self.auth.is_sigv4()) {
            (Some(region), _) => {
                check_region(region)?;
                region.clone()
            }
            (None, true) => return Err(ConfigError::MissingRegion),
            (None, false) => String::new(),
        };
        let origin = match &self.origin {
            Some(url) => Some(Origin::parse(url, !self.auth.is_sigv4()).map_err(|reason| {
                ConfigError::InvalidEndpoint {
                    endpoint: crate::uri::shown_text(url),
                    reason: reason.to_owned(),
                }
            })?),
            None => None,
        };
        Ok(McpEndpointLayer {
            shared: Arc::new(Shared {
                auth: self.auth.into_auth(name, &region, self.clock),
                mapping: Mapping::Endpoint(origin),
            }),
        })
    }
}

impl fmt::Debug for McpEndpointLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpEndpointLayerBuilder")
            .field("auth", &self.auth)
            .field("region", &self.region)
            .field("signing_name", &self.signing_name)
            .field(
                "origin",
                &self.origin.as_deref().map(crate::uri::shown_text),
            )
            .finish_non_exhaustive()
    }
}

/// Sends MCP requests as they are to the URL each names, authenticated for every attempt with
/// SigV4 or a bearer token. See the [module docs](self).
#[derive(Clone)]
pub struct McpEndpointLayer {
    shared: Arc<Shared>,
}

impl McpEndpointLayer {
    /// Starts building a layer that signs with SigV4, with credentials from `credentials`
    /// resolved for every attempt (as
    /// [`SigV4InvokeLayer::builder`](crate::invoke::SigV4InvokeLayer::builder) does). Give it the [`region`](McpEndpointLayerBuilder::region), and the
    /// [`signing_name`](McpEndpointLayerBuilder::signing_name) when the server is not an
    /// AgentCore Gateway.
    pub fn sigv4(credentials: impl ProvideCredentials + 'static) -> McpEndpointLayerBuilder {
        Self::with_auth(AuthSource::sigv4(credentials))
    }

    /// Starts building a layer that sends `Authorization: Bearer <token>`, with a token from
    /// `tokens` asked for every attempt, asked again after a 401 named the refused token (see
    /// [`SigV4InvokeLayer::bearer`](crate::invoke::SigV4InvokeLayer::bearer)).
    ///
    /// The token goes to every URL the requests name — over https only (plain http to a
    /// loopback host) — unless the layer is given its server's
    /// [`origin`](McpEndpointLayerBuilder::origin): give it, or use one layer per MCP server,
    /// so that a token meant for one never reaches another (the MCP authorization
    /// specification's audience rule).
    pub fn bearer(tokens: impl ProvideToken) -> McpEndpointLayerBuilder {
        Self::with_auth(AuthSource::bearer(tokens))
    }

    /// Starts building a SigV4 layer from an AWS configuration (feature `aws-config`): its
    /// region and its credentials provider, cached
    /// ([`CachedCredentials`](crate::auth::CachedCredentials)).
    #[cfg(feature = "aws-config")]
    pub fn from_sdk_config(
        config: &aws_config::SdkConfig,
    ) -> Result<McpEndpointLayerBuilder, ConfigError> {
        let provider = config
            .credentials_provider()
            .ok_or(ConfigError::NoCredentials)?;
        let mut builder = Self::sigv4(crate::auth::CachedCredentials::new(provider));
        builder.region = config.region().map(|r| r.as_ref().to_owned());
        Ok(builder)
    }

    fn with_auth(auth: AuthSource) -> McpEndpointLayerBuilder {
        McpEndpointLayerBuilder {
            auth,
            region: None,
            signing_name: SIGNING_NAME.to_owned(),
            clock: Arc::new(SystemTime::now),
            origin: None,
        }
    }
}

/// The service [`McpEndpointLayer`] builds: each MCP request sent as it is to the URL it names,
/// authenticated afresh on every attempt.
#[derive(Clone)]
pub struct McpEndpoint<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> McpEndpoint<S> {
    /// The service below.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The service below, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service below.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Layer<S> for McpEndpointLayer {
    type Service = McpEndpoint<S>;

    fn layer(&self, inner: S) -> Self::Service {
        McpEndpoint {
            inner,
            shared: self.shared.clone(),
        }
    }
}

impl fmt::Debug for McpEndpointLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.shared, f)
    }
}

impl<S: fmt::Debug> fmt::Debug for McpEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpEndpoint")
            .field("inner", &self.inner)
            .field("shared", &self.shared)
            .finish()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for McpEndpoint<S>
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
        crate::invoke::call(&mut self.inner, &self.shared, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_urls_are_built_from_checked_parts() {
        assert_eq!(
            gateway_url("GW-1", "eu-west-1").unwrap().to_string(),
            "https://gw-1.gateway.bedrock-agentcore.eu-west-1.amazonaws.com/mcp"
        );
        for id in ["", "-a", "a-", "a.b", "a/b", "a@b"] {
            assert_eq!(
                gateway_url(id, "us-east-1").err(),
                Some(ConfigError::InvalidGatewayId(id.to_owned())),
                "{id:?}"
            );
        }
        assert_eq!(
            gateway_url("gw", "US East").err(),
            Some(ConfigError::InvalidRegion("US East".to_owned()))
        );
        assert_eq!(
            gateway_url("gw", "").err(),
            Some(ConfigError::MissingRegion)
        );
    }

    #[test]
    fn a_sigv4_endpoint_needs_a_region_and_a_plausible_signing_name() {
        let credentials =
            aws_credential_types::Credentials::new("AKIDTEST", "secret", None, None, "test");
        assert_eq!(
            McpEndpointLayer::sigv4(credentials.clone()).build().err(),
            Some(ConfigError::MissingRegion)
        );
        assert_eq!(
            McpEndpointLayer::sigv4(credentials.clone())
                .region("us-east-1")
                .signing_name("Execute API")
                .build()
                .err(),
            Some(ConfigError::InvalidSigningName("Execute API".to_owned()))
        );
        let layer = McpEndpointLayer::sigv4(credentials)
            .region("us-east-1")
            .signing_name("execute-api")
            .build()
            .unwrap();
        let debug = format!("{layer:?}");
        assert!(debug.contains(r#"signing_name: "execute-api""#), "{debug}");
        // A bearer token signs nothing: no region needed.
        let layer = McpEndpointLayer::bearer(crate::auth::BearerToken::new("t0ken-secret"))
            .build()
            .unwrap();
        assert_eq!(format!("{layer:?}"), "McpEndpoint { auth: Bearer(..) }");
    }

    #[test]
    fn an_origin_is_an_absolute_url_and_plain_http_only_to_loopback_with_a_token() {
        let credentials =
            aws_credential_types::Credentials::new("AKIDTEST", "secret", None, None, "test");
        let bearer = || McpEndpointLayer::bearer(crate::auth::BearerToken::new("t0ken-secret"));
        let refused =
            |builder: McpEndpointLayerBuilder| builder.build().err().map(|e| e.to_string());
        for (url, reason) in [
            ("/mcp", "no scheme (http:// or https://)"),
            ("ftp://mcp.example.com/", "the scheme must be http or https"),
            (
                "https://user:hunter2@mcp.example.com/",
                "credentials in the URL are not allowed",
            ),
            ("not a url at all", "not a URL"),
            (
                "http://mcp.example.com/",
                "a bearer token is sent over https only (plain http to a loopback host)",
            ),
        ] {
            let error = refused(bearer().origin(url)).unwrap();
            assert!(
                error.ends_with(&format!("cannot be used: {reason}")),
                "{url}: {error}"
            );
            assert!(!error.contains("hunter2"), "{error}");
        }
        // Plain http: to a loopback host with a token; anywhere with SigV4 (it holds no secret).
        let layer = bearer()
            .origin("http://127.0.0.1:8080/mcp")
            .build()
            .unwrap();
        assert_eq!(
            format!("{layer:?}"),
            "McpEndpoint { auth: Bearer(..), origin: http://127.0.0.1:8080 }"
        );
        let layer = McpEndpointLayer::sigv4(credentials)
            .region("us-east-1")
            .origin("HTTP://Gateway.Example:80/mcp")
            .build()
            .unwrap();
        assert!(
            format!("{layer:?}").ends_with(r#"origin: http://gateway.example }"#),
            "{layer:?}"
        );
        // The builder never shows what the URL could carry.
        let builder = bearer().origin("https://user:hunter2@mcp.example.com/mcp?key=abc");
        let debug = format!("{builder:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("abc"),
            "{debug}"
        );
    }
}
