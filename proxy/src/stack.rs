//! The stack every request goes through, for the door the command line names: a runtime
//! (`InvokeAgentRuntime`) or an MCP URL (a gateway, any server), signed with the AWS
//! configuration's credentials or carrying a bearer token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentcore_tower::auth::CachedCredentials;
use agentcore_tower::bridge::ProtocolBridgeLayer;
use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::invoke::{InvokeTarget, RuntimeSessions, SigV4InvokeLayer};
use agentcore_tower::mcp_session::McpSessionRecovery;
use agentcore_tower::tasks::{TaskBody, TaskPollingLayer};
use agentcore_tower::telemetry::{Metrics, TraceContext};
use agentcore_tower::{
    AttemptRecord, BoxError, McpSessionRecoveryLayer, RecommendedLayers, ReplayGuardLayer,
    recommended_layers,
};
use aws_config::BehaviorVersion;
use aws_credential_types::provider::SharedCredentialsProvider;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tracing::{info, warn};

use crate::answers::Upstream;
use crate::call::{CallDeadline, InnerBody, Limits, ResBody, TimedOut};
use crate::cli::{Args, Door, TokenSource, shown, shown_duration};
use crate::tokens::{self, TokenError, Tokens};

/// The stack, boxed: cheap to clone, one per request.
pub type Stack = BoxCloneSyncService<Request<Full<Bytes>>, Response<ResBody>, BoxError>;

/// Why the stack could not be built, and the exit code that says so.
pub enum StartError {
    /// A setting is wrong (exit code 2).
    Usage(String),
    /// Something outside the command line (exit code 1).
    Failed(String),
}

/// What the proxy talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An AgentCore Runtime, through `InvokeAgentRuntime`: the signing layer maps each request
    /// (a DELETE may become `StopRuntimeSession`).
    Runtime,
    /// An MCP endpoint (an AgentCore Gateway, any MCP URL): requests go as they are.
    Endpoint,
}

/// The stack and where it sends.
pub struct Built {
    pub stack: Stack,
    /// The URI every request is made for: with [`Kind::Endpoint`], where it goes (path and
    /// query included); with [`Kind::Runtime`], the invocation URI, only reported (the signer
    /// decides where a request goes).
    pub uri: Uri,
    pub kind: Kind,
    /// The region requests are signed for (none with a bearer token to an MCP URL).
    pub region: Option<String>,
    /// `--header`: what the stack sets on every request.
    pub headers: HeaderMap,
    /// The server and the limits, as the proxy's own answers speak of them.
    pub upstream: Upstream,
}

/// How the signer is set up for the mode.
pub struct Mode {
    /// Many MCP sessions over one proxy (`--listen`): a runtime session for each.
    pub per_mcp_session: bool,
    /// A DELETE becomes `StopRuntimeSession`.
    pub stop_session_on_delete: bool,
}

/// Builds the stack for `args`: the token provider when a bearer flag is given (and then no AWS
/// credentials at all), else the AWS configuration's credentials; recording what `telemetry`
/// asks for.
pub async fn build(args: &Args, mode: Mode, telemetry: &Telemetry) -> Result<Built, StartError> {
    info!(
        timeout = %shown_duration(args.timeout),
        idle_timeout = %shown_duration(args.idle_timeout),
        "limits of a call"
    );
    let tokens = match &args.tokens {
        Some(source) => Some(tokens::provider(source).await.map_err(|e| match e {
            TokenError::Usage(message) => StartError::Usage(message),
            TokenError::Failed(message) => StartError::Failed(message),
        })?),
        None => None,
    };
    let upstream = upstream(args, tokens.is_some());
    let auth = match &args.tokens {
        Some(TokenSource::Env(name)) => format!("bearer token from ${name}"),
        Some(TokenSource::Command(_)) => "bearer token from --bearer-token-command".to_owned(),
        None => "SigV4".to_owned(),
    };
    let start = Start {
        args,
        tokens,
        auth: &auth,
        telemetry,
        upstream,
    };
    match &args.door {
        Door::Runtime(arn) => runtime(start, arn, mode).await,
        Door::Gateway(url) => endpoint(start, url, None).await,
        Door::Url(url) => {
            let signing_name = args.signing_name.as_deref().unwrap_or_default();
            endpoint(start, url, Some(signing_name)).await
        }
    }
}

/// What [`build`] hands to the builder of the door's stack.
struct Start<'a> {
    args: &'a Args,
    /// The bearer tokens, when a TOKEN option is given (else SigV4).
    tokens: Option<Tokens>,
    /// How requests are authorized, for the log.
    auth: &'a str,
    telemetry: &'a Telemetry,
    upstream: Upstream,
}

/// What the proxy's answers say of the server for `args`: its name, the IAM action a call
/// needs, the credentials in use (a `bearer` token, else SigV4 with a profile), the limits.
fn upstream(args: &Args, bearer: bool) -> Upstream {
    let profile = args
        .profile
        .clone()
        .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()));
    Upstream {
        name: match &args.door {
            Door::Url(_) => "the MCP server",
            Door::Runtime(_) | Door::Gateway(_) => "AgentCore",
        },
        bearer,
        action: match &args.door {
            Door::Runtime(_) => Some("bedrock-agentcore:InvokeAgentRuntime"),
            Door::Gateway(_) => Some("bedrock-agentcore:InvokeGateway"),
            Door::Url(_) => None,
        },
        profile: profile.filter(|_| !bearer).map(Arc::from),
        limits: Limits {
            total: args.timeout,
            idle: args.idle_timeout,
        },
    }
}

/// An AgentCore Runtime: `InvokeAgentRuntime`, signed or with the bearer token.
async fn runtime(start: Start<'_>, arn: &str, mode: Mode) -> Result<Built, StartError> {
    let Start {
        args,
        tokens,
        auth,
        telemetry,
        upstream,
    } = start;
    let (target, credentials) = runtime_target(args, arn, tokens.is_none()).await?;
    let sessions = if mode.per_mcp_session {
        RuntimeSessions::PerMcpSession
    } else {
        RuntimeSessions::PerLayer
    };
    let builder = match (credentials, tokens) {
        // aws-config's chain does not cache: without the cache it would run on every attempt.
        (Some(credentials), _) => {
            SigV4InvokeLayer::builder(target, CachedCredentials::new(credentials))
        }
        (None, Some(tokens)) => SigV4InvokeLayer::bearer(target, tokens),
        (None, None) => unreachable!("SigV4 has credentials"),
    };
    let mut builder = builder
        .runtime_sessions(sessions)
        .stop_session_on_delete(mode.stop_session_on_delete);
    if let Some(user) = &args.runtime_user_id {
        builder = builder.runtime_user_id(user.clone());
    }
    if let Some(idle) = args.runtime_idle_timeout {
        builder = builder.runtime_session_idle_timeout(idle);
    }
    if let Some(lifetime) = args.runtime_max_lifetime {
        builder = builder.runtime_session_max_lifetime(lifetime);
    }
    let signer = builder.build().map_err(|e| match &args.runtime_user_id {
        Some(_) if e.to_string().contains("user id") => {
            StartError::Usage(format!("--runtime-user-id: {e}"))
        }
        _ => StartError::Usage(e.to_string()),
    })?;
    let uri = signer.target().invocation_uri();
    let region = Some(signer.target().region().to_owned());
    info!(
        runtime = %arn,
        region = signer.target().region(),
        endpoint = %shown(&uri),
        auth = %auth,
        headers = ?args.headers,
        "proxying to AgentCore Runtime"
    );
    let stack = over_client(signer, &uri, args, telemetry)?;
    Ok(Built {
        stack,
        uri,
        kind: Kind::Runtime,
        region,
        headers: args.headers.0.clone(),
        upstream,
    })
}

/// The runtime to invoke, its qualifier, region and endpoint as the command line and the AWS
/// configuration give them; with `sigv4`, the AWS configuration's credentials too.
async fn runtime_target(
    args: &Args,
    arn: &str,
    sigv4: bool,
) -> Result<(InvokeTarget, Option<SharedCredentialsProvider>), StartError> {
    let mut target = InvokeTarget::arn(arn);
    if let Some(qualifier) = &args.qualifier {
        target = target.qualifier(qualifier);
    }
    // SigV4: the AWS configuration, for its credentials and region. A bearer token needs no
    // credentials: only the region, and only when neither --region nor the ARN names it.
    let (credentials, configured_region) = match sigv4 {
        true => {
            let mut loader = aws_config_loader(args);
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
            (Some(credentials), config.region().map(ToString::to_string))
        }
        false if args.region.is_some() || arn_region(arn).is_some() => (None, None),
        false => (None, configured_region().await),
    };
    // The region: --region, else the ARN's (the runtime lives there: a profile's default region
    // must not send the call elsewhere), else the configured one.
    if args.region.is_none()
        && let (Some(configured), Some(in_arn)) = (configured_region.as_deref(), arn_region(arn))
        && configured != in_arn
    {
        warn!("the configured region {configured} is not the ARN's ({in_arn}); using the ARN's");
    }
    if let Some(region) = args
        .region
        .clone()
        .or_else(|| arn_region(arn).map(str::to_owned))
        .or(configured_region)
    {
        target = target.region(region);
    }
    if let Some(endpoint) = args.endpoint.clone().or_else(endpoint_from_env) {
        target = target.endpoint(endpoint);
    }
    Ok((target, credentials))
}

/// An MCP endpoint at `url`: an AgentCore Gateway (`signing_name` `None`: bedrock-agentcore,
/// the region off the host), or any URL (`Some`: signed for that name, unless there is a
/// bearer token); signed, or with the bearer token.
async fn endpoint(
    start: Start<'_>,
    url: &Uri,
    signing_name: Option<&str>,
) -> Result<Built, StartError> {
    let Start {
        args,
        tokens,
        auth,
        telemetry,
        upstream,
    } = start;
    let gateway = signing_name.is_none();
    let flag = args.door.flag();
    let (signer, region) = match tokens {
        Some(tokens) => (
            McpEndpointLayer::bearer(tokens)
                .origin(url.to_string())
                .build()
                .map_err(|e| StartError::Usage(e.to_string()))?,
            None,
        ),
        None => {
            // A gateway's region is in its host name: the credential scope must match it.
            let in_host = gateway.then(|| url.host().and_then(host_region)).flatten();
            if let (Some(in_host), Some(given)) = (in_host, &args.region)
                && in_host != given
            {
                warn!(
                    "--region {given} is not the gateway URL's ({in_host}); signing for {in_host}"
                );
            }
            let known = in_host.map(str::to_owned).or_else(|| args.region.clone());
            let mut loader = aws_config_loader(args);
            if let Some(region) = &known {
                loader = loader.region(aws_config::Region::new(region.clone()));
            }
            let config = loader.load().await;
            let Some(credentials) = config.credentials_provider() else {
                return Err(StartError::Failed(
                    "the AWS configuration has no credentials provider".into(),
                ));
            };
            let Some(region) = known.or_else(|| config.region().map(ToString::to_string)) else {
                return Err(StartError::Usage(format!(
                    "{flag} with SigV4 needs a region to sign for: give --region REGION (or set \
                     AWS_REGION)"
                )));
            };
            let signer = McpEndpointLayer::sigv4(CachedCredentials::new(credentials))
                .region(region.clone())
                .signing_name(signing_name.unwrap_or(GATEWAY_SIGNING_NAME))
                .origin(url.to_string())
                .build()
                .map_err(|e| StartError::Usage(format!("{flag}: {e}")))?;
            (signer, Some(region))
        }
    };
    let what = if gateway {
        "proxying to AgentCore Gateway"
    } else {
        "proxying to an MCP server"
    };
    let signing_name = region
        .as_ref()
        .map(|_| signing_name.unwrap_or(GATEWAY_SIGNING_NAME));
    info!(
        url = %shown(url),
        region = %region.as_deref().unwrap_or("-"),
        signing_name = %signing_name.unwrap_or("-"),
        auth = %auth,
        headers = ?args.headers,
        "{what}"
    );
    let stack = over_client(signer, url, args, telemetry)?;
    Ok(Built {
        stack,
        uri: url.clone(),
        kind: Kind::Endpoint,
        region,
        headers: args.headers.0.clone(),
        upstream,
    })
}

/// The replay guard the command line declares: `--idempotent-tool`, `--strict-tool`, and the
/// server's annotations with `--trust-tool-annotations` (the guard learns them from the
/// `tools/list` answers that pass, before the proxy filters them).
fn guard(args: &Args) -> ReplayGuardLayer {
    ReplayGuardLayer::new()
        .idempotent_tools(args.idempotent_tools.clone())
        .strict_tools(args.strict_tools.clone())
        .learn_idempotent_hints(args.trust_tool_annotations)
}

/// aws-config's loader: the standard chain, for `--profile`'s profile when given (its
/// credentials, SSO and assume-role included, and its region).
pub fn aws_config_loader(args: &Args) -> aws_config::ConfigLoader {
    let loader = aws_config::defaults(BehaviorVersion::latest()).http_client(aws_http_client());
    match &args.profile {
        Some(profile) => {
            if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
                warn!(
                    "AWS_ACCESS_KEY_ID is set: the standard chain takes the credentials in the \
                     environment before those of --profile {profile}"
                );
            }
            info!(profile = %profile, "AWS profile");
            loader.profile_name(profile)
        }
        None => loader,
    }
}

/// The HTTP client of aws-config's providers (SSO, STS, instance metadata): HTTPS over rustls
/// with ring, as the proxy's own client, and the system's root certificates, as aws-config's
/// default client.
fn aws_http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The signing name of AgentCore Gateway (and Runtime).
const GATEWAY_SIGNING_NAME: &str = "bedrock-agentcore";

/// The region an AgentCore host name carries:
/// `{id}.gateway.bedrock-agentcore.{region}.amazonaws.com` (or `.amazonaws.com.cn`).
pub fn host_region(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.split('.').collect();
    let at = labels
        .iter()
        .position(|l| l.eq_ignore_ascii_case("bedrock-agentcore"))?;
    let region = labels.get(at + 1)?;
    let rest = &labels[at + 2..];
    let aws = rest
        .first()
        .is_some_and(|l| l.eq_ignore_ascii_case("amazonaws"))
        && matches!(rest.len(), 2 | 3);
    (aws && !region.is_empty()).then_some(*region)
}

/// The region of the AWS configuration alone (environment, profile, instance metadata): what a
/// bearer-token runtime needs when neither --region nor its ARN names one. No credentials.
async fn configured_region() -> Option<String> {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(aws_http_client())
        .load()
        .await
        .region()
        .map(|r| r.to_string())
}

/// The task layer `--no-tasks` and `--max-task-duration` ask for.
fn tasks(args: &Args) -> Option<TaskPollingLayer> {
    // Declared on every call from the first: a 2025 client sends no server/discover to learn
    // from, and a server that does not offer Tasks ignores a capability it does not know.
    let layer = TaskPollingLayer::new().target_offers_tasks();
    args.tasks.then(|| match args.max_task_duration {
        Some(limit) => layer.max_job_duration(limit),
        None => layer,
    })
}

/// The bridge between MCP's eras `--bridge-modern-clients` asks for.
fn bridge(args: &Args) -> ProtocolBridgeLayer {
    let bridge = ProtocolBridgeLayer::new();
    if args.bridge_modern_clients {
        bridge.bridge_modern_clients()
    } else {
        bridge
    }
}

/// The stack over hyper's client: plain HTTP for an `http://` URI (a local test server), else
/// HTTPS.
fn over_client<L>(
    signer: L,
    uri: &Uri,
    args: &Args,
    telemetry: &Telemetry,
) -> Result<Stack, StartError>
where
    L: Layer<HttpClient> + Layer<HttpsClient>,
    RecommendedLayers<L>: Layer<HttpClient> + Layer<HttpsClient>,
    McpSessionRecovery<<RecommendedLayers<L> as Layer<HttpClient>>::Service>: Boxable,
    McpSessionRecovery<<RecommendedLayers<L> as Layer<HttpsClient>>::Service>: Boxable,
{
    let executor = TokioExecutor::new();
    let around = Around {
        guard: guard(args),
        tasks: tasks(args),
        bridge: bridge(args),
        headers: Arc::new(args.headers.0.clone()),
        total: args.timeout,
        telemetry,
    };
    Ok(if uri.scheme() == Some(&http::uri::Scheme::HTTP) {
        let client = Client::builder(executor).build_http();
        stack_over(signer, client, around)
    } else {
        let client = Client::builder(executor).build(https_connector()?);
        stack_over(signer, client, around)
    })
}

/// What the command line and the telemetry set around the signer.
struct Around<'a> {
    guard: ReplayGuardLayer,
    /// `--no-tasks`, `--max-task-duration`.
    tasks: Option<TaskPollingLayer>,
    /// `--bridge-modern-clients`.
    bridge: ProtocolBridgeLayer,
    /// `--header`: set on every request at the top.
    headers: Arc<HeaderMap>,
    /// `--timeout`.
    total: Duration,
    telemetry: &'a Telemetry,
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;
type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The stack below [`Deadline`], boxed.
type Inner = BoxCloneSyncService<Request<Full<Bytes>>, Response<ResBody>, agentcore_tower::Error>;

/// A service [`Inner`] can box.
pub trait Boxable:
    tower::Service<
        Request<Full<Bytes>>,
        Response = Response<InnerBody>,
        Error = agentcore_tower::Error,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Boxable for S where
    S: tower::Service<
            Request<Full<Bytes>>,
            Response = Response<InnerBody>,
            Error = agentcore_tower::Error,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The stack, outer to inner: the Tasks extension run for clients that do not declare it
/// (unless `--no-tasks`), one deadline per request ([`Deadline`]), the MCP session re-opened
/// when the server no longer knows it, the replay rule, throttle and session-busy retries, the
/// signer — over `client`. The headers of `--header` are set on every request at the top, so
/// that the signer signs them like the rest.
fn stack_over<L, C>(signer: L, client: C, around: Around<'_>) -> Stack
where
    RecommendedLayers<L>: Layer<C>,
    McpSessionRecovery<<RecommendedLayers<L> as Layer<C>>::Service>: Boxable,
{
    let Around {
        guard,
        tasks,
        bridge,
        headers,
        total,
        telemetry,
    } = around;
    let mut recovery = McpSessionRecoveryLayer::new();
    let mut layers = recommended_layers(guard, signer);
    if let Some(trace_context) = &telemetry.trace_context {
        recovery = recovery.trace_context(trace_context.clone());
        layers = layers.trace_context(trace_context.clone());
    }
    if let Some(metrics) = &telemetry.metrics {
        recovery = recovery.metrics(metrics.clone());
        layers = layers.metrics(metrics.clone());
        // The retry budget the stack's layers share, as instruments.
        if let Some(budget) = layers.budget() {
            metrics.observe_budget(budget, &[]);
        }
    }
    // The bridge between MCP's eras acts only when a client's initialize is refused.
    let below = ServiceBuilder::new()
        .layer(bridge)
        .layer(recovery)
        .layer(layers)
        .service(client);
    // The task layer inside the deadline: `--timeout` bounds the request that creates a task
    // (and its re-send declaring the extension) and, through the layer's poll timeout, each
    // poll; never the job, whose answer carries no deadline for the relays.
    let inner: Inner = match tasks {
        Some(tasks) => BoxCloneSyncService::new(tasks.poll_timeout(total).layer(below)),
        None => BoxCloneSyncService::new(below.map_response(|r| r.map(TaskBody::from))),
    };
    BoxCloneSyncService::new(
        Deadline {
            inner,
            total,
            headers,
        }
        .map_response(untimed_if_task),
    )
}

/// The answer the task layer wrote for a job, without the deadline of the request that
/// created the task.
fn untimed_if_task(mut answer: Response<ResBody>) -> Response<ResBody> {
    if answer.body().is_task() {
        answer.extensions_mut().remove::<CallDeadline>();
    }
    answer
}

/// What the stack records for OpenTelemetry when the proxy exports it (see `otlp`): the trace
/// context its attempts carry, its histograms. Nothing by default.
#[derive(Default)]
pub struct Telemetry {
    pub trace_context: Option<TraceContext>,
    pub metrics: Option<Metrics>,
}

/// The outermost layer: one deadline for the whole call (`--timeout`), retries included, and
/// the call's record kept past it — tower's timeout would drop the record with the call. The
/// record goes in the request (the stack's layers write to it) and comes back in the answer's
/// extensions, with the deadline, for the relays that read the answer's body.
#[derive(Clone)]
struct Deadline {
    inner: Inner,
    total: Duration,
    /// `--header`: set on every request (a `--listen` client's header of the same name and
    /// another value is refused before it comes here).
    headers: Arc<HeaderMap>,
}

impl Service<Request<Full<Bytes>>> for Deadline {
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each call readies a clone of the stack (`oneshot`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Full<Bytes>>) -> Self::Future {
        for (name, value) in self.headers.iter() {
            request.headers_mut().insert(name, value.clone());
        }
        let record = request
            .extensions_mut()
            .get_or_insert_with(AttemptRecord::new)
            .clone();
        let total = self.total;
        let deadline = tokio::time::Instant::now() + total;
        // The call's one ceiling in time is `--timeout`: every layer's waits end before it,
        // whatever kind of refusal they wait out.
        request.extensions_mut().insert(
            agentcore_tower::CallBudget::new()
                .max_duration(None)
                .deadline(deadline),
        );
        let call = self.inner.clone().oneshot(request);
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(mut response)) => {
                    let extensions = response.extensions_mut();
                    extensions.insert(CallDeadline(deadline));
                    if extensions.get::<AttemptRecord>().is_none() {
                        extensions.insert(record);
                    }
                    Ok(response)
                }
                Ok(Err(error)) => Err(error.into()),
                // The call is dropped by now: its record says so.
                Err(_) => Err(Box::new(TimedOut { total, record }) as BoxError),
            }
        })
    }
}

/// rustls (ring, the webpki roots) over hyper-util's connector; `https_or_http` so an
/// `http://` endpoint works too. The crypto provider is named: with more than one in a build,
/// rustls cannot pick one itself.
pub fn https_connector() -> Result<HttpsConnector<HttpConnector>, StartError> {
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

    #[test]
    fn the_region_is_read_off_an_agentcore_host() {
        for (host, region) in [
            (
                "gw-abc.gateway.bedrock-agentcore.us-west-2.amazonaws.com",
                Some("us-west-2"),
            ),
            (
                "GW.Gateway.Bedrock-AgentCore.eu-central-1.AmazonAWS.com",
                Some("eu-central-1"),
            ),
            (
                "gw.gateway.bedrock-agentcore.cn-north-1.amazonaws.com.cn",
                Some("cn-north-1"),
            ),
            (
                "bedrock-agentcore.us-east-1.amazonaws.com",
                Some("us-east-1"),
            ),
            ("abc.execute-api.us-west-2.amazonaws.com", None),
            ("bedrock-agentcore.us-east-1.example.com", None),
            ("bedrock-agentcore", None),
            ("127.0.0.1", None),
        ] {
            assert_eq!(host_region(host), region, "{host}");
        }
    }
}
