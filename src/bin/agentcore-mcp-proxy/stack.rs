//! The AWS configuration and the stack every request goes through.

use std::time::Duration;

use agentcore_tower::sigv4::{CachedCredentials, InvokeTarget, RuntimeSessions, SigV4InvokeLayer};
use agentcore_tower::{BoxError, ReplayGuardLayer, recommended_layers};
use aws_config::BehaviorVersion;
use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::ServiceBuilder;
use tower::timeout::TimeoutLayer;
use tower::util::BoxCloneSyncService;
use tracing::{info, warn};

use crate::cli::Args;

/// One deadline for a whole call, retries included; also the longest an answer's body may go
/// without a byte.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The body of the stack's answers.
pub type ResBody = agentcore_tower::RecommendedBody<hyper::body::Incoming>;
/// The stack, boxed: cheap to clone, one per request.
pub type Stack = BoxCloneSyncService<Request<Full<Bytes>>, Response<ResBody>, BoxError>;

/// Why the stack could not be built, and the exit code that says so.
pub enum StartError {
    /// A setting is wrong (exit code 2).
    Usage(String),
    /// Something outside the command line (exit code 1).
    Failed(String),
}

/// The stack and where it sends.
pub struct Built {
    pub stack: Stack,
    /// The invocation URI (only reported: the signer decides where a request goes).
    pub uri: Uri,
}

/// How the signer is set up for the mode.
pub struct Mode {
    /// Many MCP sessions over one proxy (`--listen`): a runtime session for each.
    pub per_mcp_session: bool,
    /// A DELETE becomes `StopRuntimeSession`.
    pub stop_session_on_delete: bool,
}

/// Loads the AWS configuration and builds the stack for `args`.
pub async fn build(args: &Args, mode: Mode) -> Result<Built, StartError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = &args.region {
        // Skips the region chain (which may ask the instance metadata service).
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    let config = loader.load().await;
    let Some(credentials) = config.credentials_provider() else {
        return Err(StartError::Failed(
            "the AWS configuration has no credentials provider".into(),
        ));
    };

    let mut target = InvokeTarget::arn(&args.runtime_arn);
    if let Some(qualifier) = &args.qualifier {
        target = target.qualifier(qualifier);
    }
    // The region: --region, else the ARN's (the runtime lives there: a profile's default region
    // must not send the call elsewhere), else the configured one.
    let configured_region = config.region().map(ToString::to_string);
    if args.region.is_none()
        && let (Some(configured), Some(in_arn)) =
            (configured_region.as_deref(), arn_region(&args.runtime_arn))
        && configured != in_arn
    {
        warn!("the configured region {configured} is not the ARN's ({in_arn}); using the ARN's");
    }
    if let Some(region) = args
        .region
        .clone()
        .or_else(|| arn_region(&args.runtime_arn).map(str::to_owned))
        .or(configured_region)
    {
        target = target.region(region);
    }
    if let Some(endpoint) = args.endpoint.clone().or_else(endpoint_from_env) {
        target = target.endpoint(endpoint);
    }
    let sessions = if mode.per_mcp_session {
        RuntimeSessions::PerMcpSession
    } else {
        RuntimeSessions::PerLayer
    };
    // aws-config's chain does not cache: without the cache it would run on every attempt.
    let signer = SigV4InvokeLayer::builder(target, CachedCredentials::new(credentials))
        .runtime_sessions(sessions)
        .stop_session_on_delete(mode.stop_session_on_delete)
        .build()
        .map_err(|e| StartError::Usage(e.to_string()))?;
    let uri = signer.target().invocation_uri();
    info!(
        runtime = %args.runtime_arn,
        region = signer.target().region(),
        endpoint = %UriWithoutQuery(&uri),
        "proxying to AgentCore Runtime"
    );

    let guard = ReplayGuardLayer::new().idempotent_tools(args.idempotent_tools.clone());
    let stack = if uri.scheme() == Some(&http::uri::Scheme::HTTP) {
        // A local emulator or test server: no TLS to set up.
        stack_over(
            guard,
            signer,
            Client::builder(TokioExecutor::new()).build_http(),
        )
    } else {
        stack_over(
            guard,
            signer,
            Client::builder(TokioExecutor::new()).build(https_connector()?),
        )
    };
    Ok(Built { stack, uri })
}

/// The stack, outer to inner: one deadline, the replay rule, throttle and session-busy
/// retries, SigV4 — over `client`.
fn stack_over<C>(guard: ReplayGuardLayer, signer: SigV4InvokeLayer, client: C) -> Stack
where
    C: tower::Service<Request<Full<Bytes>>, Response = Response<hyper::body::Incoming>>
        + Clone
        + Send
        + Sync
        + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            .layer(TimeoutLayer::new(CALL_TIMEOUT))
            .layer(recommended_layers(guard, signer))
            .service(client),
    )
}

/// rustls (ring, the webpki roots) over hyper-util's connector; `https_or_http` so an
/// `http://` endpoint works too. The crypto provider is named: with more than one in a build,
/// rustls cannot pick one itself.
fn https_connector() -> Result<HttpsConnector<HttpConnector>, StartError> {
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| StartError::Failed(format!("cannot set up TLS: {e}")))?
        .https_or_http()
        .enable_http1()
        .build())
}

/// The endpoint AWS tools would use when none is given: the service's variable, then the
/// generic one.
fn endpoint_from_env() -> Option<String> {
    let ignore = std::env::var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    if ignore {
        return None;
    }
    ["AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "AWS_ENDPOINT_URL"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The region an ARN names (`arn:PARTITION:SERVICE:REGION:…`).
fn arn_region(arn: &str) -> Option<&str> {
    let mut parts = arn.split(':');
    (parts.next() == Some("arn")).then_some(())?;
    parts.nth(2).filter(|r| !r.is_empty())
}

/// A URI for logs, without its query.
struct UriWithoutQuery<'a>(&'a Uri);

impl std::fmt::Display for UriWithoutQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let (Some(scheme), Some(authority)) = (self.0.scheme(), self.0.authority()) {
            write!(f, "{scheme}://{authority}")?;
        }
        f.write_str(self.0.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_read_off_an_arn() {
        assert_eq!(
            arn_region("arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/x"),
            Some("eu-west-1")
        );
        assert_eq!(
            arn_region("arn:aws:bedrock-agentcore::123456789012:runtime/x"),
            None
        );
        assert_eq!(arn_region("x-AbC123"), None);
    }
}
