//! The recommended stack, as one layer whose every layer can be configured, and names for its
//! service and body types (to keep the stack in a struct).

use tower::Layer;

use crate::body::{InnerReadAhead, ObservedBody, PeekedBody};
use crate::budget::RetryBudget;
use crate::endpoint::McpEndpoint;
use crate::invoke::{SigV4Invoke, SigV4InvokeLayer};
use crate::redact::InvokeBody;
use crate::replay::{ReplayGuard, ReplayGuardLayer};
use crate::session_busy::{SessionBusyRetry, SessionBusyRetryLayer};
use crate::telemetry::TraceContext;
use crate::throttle::{ThrottleRetry, ThrottleRetryLayer};

/// The four layers in the recommended order, outer to inner — the guard, throttling,
/// session busy, the signer — as one [`Layer`]: each with its defaults unless set here.
///
/// The three retry layers draw their re-sends from one [`RetryBudget`] (as the AWS SDKs
/// keep one retry quota per client): a new one per `RecommendedLayers`, shared by the stacks
/// it builds, or the one given to [`retry_budget`](Self::retry_budget). A layer handed in with
/// a budget of its own (or none) keeps it.
///
/// The signer is a [`SigV4InvokeLayer`] for a runtime (SigV4 or bearer), or an
/// [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer) for an AgentCore Gateway or another
/// MCP URL: the retry layers and the guard work the same over either.
///
/// ```
/// use std::time::Duration;
/// use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
/// use agentcore_tower::{RecommendedLayers, RecommendedStack, ReplayGuardLayer, ThrottleRetryLayer};
/// use aws_credential_types::Credentials;
/// use hyper_util::client::legacy::{Client, connect::HttpConnector};
///
/// // A struct that keeps the stack: its type has a name.
/// struct McpClient {
///     stack: RecommendedStack<Client<HttpConnector, http_body_util::Full<bytes::Bytes>>>,
/// }
///
/// # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
/// let signer = SigV4InvokeLayer::builder(
///     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
///     Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"),
/// )
/// .build()?;
/// let layers = RecommendedLayers::new(signer)
///     .guard(ReplayGuardLayer::new().idempotent_tools(["lookup"]))
///     .throttle(ThrottleRetryLayer::new().max_total_wait(Duration::from_secs(30)));
/// let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
/// let mcp = McpClient { stack: tower::ServiceBuilder::new().layer(layers).service(client) };
/// # let _ = mcp.stack;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RecommendedLayers<Signer = SigV4InvokeLayer> {
    guard: ReplayGuardLayer,
    throttle: ThrottleRetryLayer,
    session_busy: SessionBusyRetryLayer,
    signer: Signer,
    budget: Option<RetryBudget>,
    trace_context: Option<TraceContext>,
    #[cfg(feature = "opentelemetry")]
    metrics: Option<crate::telemetry::Metrics>,
}

impl<Signer> RecommendedLayers<Signer> {
    /// The stack over `signer`, the three retry layers with their defaults.
    pub fn new(signer: Signer) -> Self {
        Self {
            guard: ReplayGuardLayer::new(),
            throttle: ThrottleRetryLayer::new(),
            session_busy: SessionBusyRetryLayer::new(),
            signer,
            budget: Some(RetryBudget::new()),
            trace_context: None,
            #[cfg(feature = "opentelemetry")]
            metrics: None,
        }
    }

    /// Draws the three retry layers' re-sends from `budget`: shareable with other stacks (one
    /// quota for every client of an app, say).
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Writes the trace headers of `trace` (the app's current trace context) on every attempt:
    /// see [`TraceContext`]. Set on the three retry layers.
    pub fn trace_context(mut self, trace: TraceContext) -> Self {
        self.trace_context = Some(trace);
        self
    }

    /// Records the durations of every call and attempt in `metrics` (see
    /// [`Metrics`](crate::telemetry::Metrics)). Set on the three retry layers.
    #[cfg(feature = "opentelemetry")]
    pub fn metrics(mut self, metrics: crate::telemetry::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// No retry budget: only each call's caps bound its re-sends.
    pub fn no_retry_budget(mut self) -> Self {
        self.budget = None;
        self
    }

    /// The retry budget the three retry layers share, if any (a layer handed in with a budget
    /// of its own keeps that one).
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.budget.as_ref()
    }

    /// Uses this guard (its declarations, its schedule).
    pub fn guard(mut self, guard: ReplayGuardLayer) -> Self {
        self.guard = guard;
        self
    }

    /// Uses this throttling layer.
    pub fn throttle(mut self, throttle: ThrottleRetryLayer) -> Self {
        self.throttle = throttle;
        self
    }

    /// Uses this session-busy layer.
    pub fn session_busy(mut self, session_busy: SessionBusyRetryLayer) -> Self {
        self.session_busy = session_busy;
        self
    }

    /// The signer.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }
}

/// The three retry layers as [`RecommendedLayers`] stack them over `S`, the signer's service:
/// the guard over throttling over session busy, the upper two keeping the answer the lowest
/// read ahead ([`over_retry_layer`](crate::retry::RetryLayer::over_retry_layer)). Written once
/// here for the two public names below and the [`Layer`] impl; rustdoc shows what it stands for.
type Retried<S> = ReplayGuard<ThrottleRetry<SessionBusyRetry<S>, InnerReadAhead>, InnerReadAhead>;

/// The service the [`RecommendedLayers`] build over an HTTP client `S`, with a
/// [`SigV4InvokeLayer`]: the guard over throttling over session busy over the signer. Keep the
/// stack by this name (in a struct, say) rather than by the type it stands for: that type spells
/// an internal choice of how the layers fit together (the upper two retry layers keep the answer
/// the lowest read ahead: [`InnerReadAhead`]).
pub type RecommendedStack<S> = Retried<SigV4Invoke<S>>;

/// The service the [`RecommendedLayers`] build over an HTTP client `S`, with an
/// [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer): as [`RecommendedStack`], with the
/// endpoint layer in place of the signer; keep it by this name for the same reason.
pub type RecommendedEndpointStack<S> = Retried<McpEndpoint<S>>;

/// The body of the responses of a [`RecommendedStack`] (or a [`RecommendedEndpointStack`]) over
/// an HTTP client whose responses have bodies `B` (hyper's `Incoming`, reqwest's body…): one
/// read-ahead wrapper (the innermost retry layer's, which the others keep), and the guard's.
pub type RecommendedBody<B> = ObservedBody<PeekedBody<InvokeBody<B>>>;

impl<S, Signer: Layer<S>> Layer<S> for RecommendedLayers<Signer> {
    type Service = Retried<Signer::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        // The session-busy layer reads the answer ahead; the two above keep its wrapper.
        let budget = self.budget.as_ref();
        let trace = self.trace_context.as_ref();
        #[cfg(feature = "opentelemetry")]
        let (guard, throttle, session_busy) = {
            let metrics = self.metrics.as_ref();
            (
                self.guard.clone().or_metrics(metrics),
                self.throttle.clone().or_metrics(metrics),
                self.session_busy.clone().or_metrics(metrics),
            )
        };
        #[cfg(not(feature = "opentelemetry"))]
        let (guard, throttle, session_busy) = (
            self.guard.clone(),
            self.throttle.clone(),
            self.session_busy.clone(),
        );
        let session_busy = (session_busy.or_retry_budget(budget))
            .or_trace_context(trace)
            .layer(self.signer.layer(inner));
        let throttle = (throttle.or_retry_budget(budget))
            .or_trace_context(trace)
            .over_retry_layer()
            .layer(session_busy);
        (guard.or_retry_budget(budget))
            .or_trace_context(trace)
            .over_retry_layer()
            .layer(throttle)
    }
}

/// The recommended stack, outer to inner: `guard`, a [`ThrottleRetryLayer`] and a
/// [`SessionBusyRetryLayer`] with their defaults, then `signer` — one layer to put over the HTTP
/// client. [`RecommendedLayers`] sets every layer.
///
/// ```
/// use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
/// use agentcore_tower::{ReplayGuardLayer, recommended_layers};
/// use aws_credential_types::Credentials;
/// # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
/// let signer = SigV4InvokeLayer::builder(
///     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
///     Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"),
/// )
/// .build()?;
/// let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
///     .build_http::<http_body_util::Full<bytes::Bytes>>();
/// let stack = tower::ServiceBuilder::new()
///     .layer(recommended_layers(ReplayGuardLayer::new().idempotent_tools(["lookup"]), signer))
///     .service(client);
/// # let _ = stack;
/// # Ok(())
/// # }
/// ```
pub fn recommended_layers<Signer>(
    guard: ReplayGuardLayer,
    signer: Signer,
) -> RecommendedLayers<Signer> {
    RecommendedLayers::new(signer).guard(guard)
}
