//! The metrics (feature `opentelemetry`): `mcp.client.operation.duration` per call and
//! `http.client.request.duration` per attempt, the retry budget's counters as instruments, the
//! MCP sessions' durations.

#[cfg(feature = "opentelemetry")]
use std::fmt;

use http::Uri;

use crate::jsonrpc::Body as JsonRpcBody;

#[cfg(feature = "opentelemetry")]
use super::names::*;
use super::spans::*;

/// The OpenTelemetry histograms of the calls, sessions and attempts (feature `opentelemetry`):
/// `mcp.client.operation.duration` (one per call, recorded when the call's owner finishes it),
/// `mcp.client.session.duration` (one per MCP session
/// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer) saw opened and ended) and
/// `http.client.request.duration` (one per attempt sent, when it is answered), in seconds, with
/// the buckets and attributes of OpenTelemetry's conventions; `server.address` and
/// `server.port` are those of the endpoint the signer sends to. Set on the layers with
/// [`RetryLayer::metrics`](crate::retry::RetryLayer::metrics),
/// [`RecommendedLayers::metrics`](crate::RecommendedLayers::metrics),
/// [`McpSessionRecoveryLayer::metrics`](crate::McpSessionRecoveryLayer::metrics). A
/// [`RetryBudget`](crate::RetryBudget)'s counters: [`Metrics::observe_budget`].
///
/// ```
/// use agentcore_tower::telemetry::Metrics;
/// let metrics = Metrics::new(&opentelemetry::global::meter("my-app"));
/// let layers = agentcore_tower::ThrottleRetryLayer::new().metrics(metrics);
/// # let _ = layers;
/// ```
#[cfg(feature = "opentelemetry")]
#[derive(Clone)]
pub struct Metrics {
    meter: opentelemetry::metrics::Meter,
    operation: opentelemetry::metrics::Histogram<f64>,
    session: opentelemetry::metrics::Histogram<f64>,
    request: opentelemetry::metrics::Histogram<f64>,
}

/// The bucket boundaries of the MCP conventions' histograms, in seconds.
#[cfg(feature = "opentelemetry")]
const MCP_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[cfg(feature = "opentelemetry")]
impl Metrics {
    /// The histograms, from `meter`.
    pub fn new(meter: &opentelemetry::metrics::Meter) -> Self {
        Self {
            meter: meter.clone(),
            operation: meter
                .f64_histogram("mcp.client.operation.duration")
                .with_unit("s")
                .with_description("The duration of the MCP request as observed by the client")
                .with_boundaries(MCP_BUCKETS.to_vec())
                .build(),
            session: meter
                .f64_histogram("mcp.client.session.duration")
                .with_unit("s")
                .with_description("The duration of the MCP session as observed by the client")
                .with_boundaries(MCP_BUCKETS.to_vec())
                .build(),
            request: meter
                .f64_histogram("http.client.request.duration")
                .with_unit("s")
                .with_description("Duration of HTTP client requests")
                .with_boundaries(vec![
                    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                ])
                .build(),
        }
    }

    /// An MCP session with `server` (its `server.address` and `server.port`) ended after
    /// `duration`, with `error` (an `error.type`) or not.
    pub(crate) fn session_ended(
        &self,
        duration: std::time::Duration,
        server: Option<(&str, i64)>,
        protocol_version: Option<&str>,
        error: Option<&'static str>,
    ) {
        use opentelemetry::KeyValue;
        let mut attributes = Vec::with_capacity(4);
        if let Some((address, port)) = server {
            attributes.push(KeyValue::new("server.address", address.to_owned()));
            attributes.push(KeyValue::new("server.port", port));
        }
        if let Some(version) = protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.to_owned()));
        }
        if let Some(error) = error {
            attributes.push(KeyValue::new("error.type", error));
        }
        self.session.record(duration.as_secs_f64(), &attributes);
    }

    /// The histograms of the global meter provider's meter `agentcore-tower`.
    pub fn global() -> Self {
        Self::new(&opentelemetry::global::meter("agentcore-tower"))
    }

    /// Reports what `budget` counts ([`RetryBudget::counters`](crate::RetryBudget::counters))
    /// as asynchronous instruments of this meter, read at each collection, with `attributes`
    /// (to tell several budgets apart; none for one):
    ///
    /// | Instrument | Kind | Unit | What |
    /// |---|---|---|---|
    /// | `agentcore_tower.retry_budget.calls` | counter | `{call}` | calls ended |
    /// | `agentcore_tower.retry_budget.attempts` | counter | `{attempt}` | their attempts |
    /// | `agentcore_tower.retry_budget.resends` | counter | `{attempt}` | re-sends, by `agentcore_tower.resend.cause`: `throttled`, `session_busy`, `session_expired`, `failure` |
    /// | `agentcore_tower.retry_budget.refusals` | counter | `{attempt}` | re-sends the budget refused |
    /// | `agentcore_tower.retry_budget.wait` | counter | `s` | time waited before re-sends |
    /// | `agentcore_tower.retry_budget.tokens` | gauge | `{token}` | tokens in the bucket |
    ///
    /// The meter provider keeps the budget (a clone: the same bucket) for as long as it lives.
    /// Call it once per budget: each call registers callbacks of its own, so a budget observed
    /// twice with the same attributes is reported twice.
    ///
    /// ```
    /// use agentcore_tower::RecommendedLayers;
    /// use agentcore_tower::telemetry::Metrics;
    /// # let signer = tower::layer::util::Identity::new();
    /// let metrics = Metrics::global();
    /// let layers = RecommendedLayers::new(signer).metrics(metrics.clone());
    /// // The one budget the recommended layers share.
    /// metrics.observe_budget(&layers.budget().unwrap(), &[]);
    /// ```
    pub fn observe_budget(
        &self,
        budget: &crate::budget::RetryBudget,
        attributes: &[opentelemetry::KeyValue],
    ) {
        use opentelemetry::KeyValue;
        let attributes: std::sync::Arc<[KeyValue]> = attributes.into();
        let counter = |name: &'static str,
                       unit: &'static str,
                       description: &'static str,
                       read: fn(&crate::budget::BudgetCounters) -> u64| {
            let budget = budget.clone();
            let attributes = attributes.clone();
            self.meter
                .u64_observable_counter(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |observer| {
                    observer.observe(read(&budget.counters()), &attributes);
                })
                .build();
        };
        counter(
            "agentcore_tower.retry_budget.calls",
            "{call}",
            "Calls ended",
            |c| c.calls,
        );
        counter(
            "agentcore_tower.retry_budget.attempts",
            "{attempt}",
            "Attempts of the calls ended",
            |c| c.attempts,
        );
        counter(
            "agentcore_tower.retry_budget.refusals",
            "{attempt}",
            "Re-sends the retry budget refused",
            |c| c.budget_refusals,
        );
        {
            let budget = budget.clone();
            let by_cause: std::sync::Arc<[Vec<KeyValue>; 4]> = std::sync::Arc::new(
                ["throttled", "session_busy", "session_expired", "failure"].map(|cause| {
                    let mut set = attributes.to_vec();
                    set.push(KeyValue::new("agentcore_tower.resend.cause", cause));
                    set
                }),
            );
            self.meter
                .u64_observable_counter("agentcore_tower.retry_budget.resends")
                .with_unit("{attempt}")
                .with_description("Re-sends, by cause")
                .with_callback(move |observer| {
                    let c = budget.counters();
                    let counts = [
                        c.resent_throttled,
                        c.resent_session_busy,
                        c.resent_session_expired,
                        c.resent_failures,
                    ];
                    for (count, attributes) in counts.into_iter().zip(by_cause.iter()) {
                        observer.observe(count, attributes);
                    }
                })
                .build();
        }
        {
            let budget = budget.clone();
            let attributes = attributes.clone();
            self.meter
                .f64_observable_counter("agentcore_tower.retry_budget.wait")
                .with_unit("s")
                .with_description("Time waited before re-sends")
                .with_callback(move |observer| {
                    observer.observe(budget.counters().waited.as_secs_f64(), &attributes);
                })
                .build();
        }
        let budget = budget.clone();
        self.meter
            .u64_observable_gauge("agentcore_tower.retry_budget.tokens")
            .with_unit("{token}")
            .with_description("Tokens in the retry budget's bucket")
            .with_callback(move |observer| {
                observer.observe(u64::from(budget.counters().tokens), &attributes);
            })
            .build();
    }
}

#[cfg(feature = "opentelemetry")]
impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Metrics(..)")
    }
}

/// What a call's metrics need, kept in its context: nothing unless metrics are on.
#[derive(Default)]
pub(crate) struct CallMetrics {
    #[cfg(feature = "opentelemetry")]
    on: Option<Box<MetricsOn>>,
}

#[cfg(feature = "opentelemetry")]
struct MetricsOn {
    metrics: Metrics,
    started: std::time::Instant,
    /// The server of the first attempt: `server.address`, `server.port`.
    server: Option<(String, i64)>,
    /// The `mcp-method`, `mcp-name` and `mcp-protocol-version` headers of the first attempt.
    headers: [Option<String>; 3],
    /// The attempts in flight: index, start, HTTP method.
    attempts: Vec<(usize, std::time::Instant, http::Method)>,
}

impl CallMetrics {
    /// Whether metrics are on for the call.
    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "opentelemetry")]
        return self.on.is_some();
        #[cfg(not(feature = "opentelemetry"))]
        false
    }

    /// Turns metrics on for the call, from now.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn enable(&mut self, metrics: &Metrics) {
        if self.on.is_none() {
            self.on = Some(Box::new(MetricsOn {
                metrics: metrics.clone(),
                started: std::time::Instant::now(),
                server: None,
                headers: Default::default(),
                attempts: Vec::new(),
            }));
        }
    }

    /// An attempt at `index` is handed down as `request`.
    pub(crate) fn attempt_sent<B>(&mut self, index: usize, request: &http::Request<B>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on {
            if on.attempts.iter().any(|(i, ..)| *i == index) {
                return;
            }
            if on.server.is_none()
                && let Some((host, port)) = server_of(request.uri())
            {
                on.server = Some((host.to_owned(), i64::from(port)));
                let text = |name| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                on.headers = [text(MCP_METHOD), text(MCP_NAME), text(MCP_PROTOCOL_VERSION)];
            }
            on.attempts
                .push((index, std::time::Instant::now(), request.method().clone()));
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (index, request);
    }

    /// The call's requests go to `uri` (a signer's endpoint): the server of its metrics.
    pub(crate) fn sent_to(&mut self, uri: &Uri) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on
            && let Some((host, port)) = server_of(uri)
        {
            on.server = Some((host.to_owned(), i64::from(port)));
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = uri;
    }

    /// The server the call's requests went to (`server.address`, `server.port`), when metrics
    /// are on.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn server(&self) -> Option<(String, i64)> {
        self.on.as_ref()?.server.clone()
    }

    /// The attempt at `index` was never sent: no request duration for it.
    pub(crate) fn attempt_dropped(&mut self, index: usize) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on {
            on.attempts.retain(|(i, ..)| *i != index);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = index;
    }

    /// The attempt at `index` is answered (status) or failed (a short error kind).
    pub(crate) fn attempt_answered(&mut self, index: usize, answer: Result<u16, &'static str>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = &mut self.on
            && let Some(at) = on.attempts.iter().position(|(i, ..)| *i == index)
        {
            use opentelemetry::KeyValue;
            let (_, started, method) = on.attempts.swap_remove(at);
            let mut attributes = vec![KeyValue::new(
                "http.request.method",
                method.as_str().to_owned(),
            )];
            if let Some((address, port)) = &on.server {
                attributes.push(KeyValue::new("server.address", address.clone()));
                attributes.push(KeyValue::new("server.port", *port));
            }
            match answer {
                Ok(status) => {
                    attributes.push(KeyValue::new(
                        "http.response.status_code",
                        i64::from(status),
                    ));
                    if status >= 400 {
                        attributes.push(KeyValue::new("error.type", status.to_string()));
                    }
                }
                Err(kind) => attributes.push(KeyValue::new("error.type", kind)),
            }
            on.metrics
                .request
                .record(started.elapsed().as_secs_f64(), &attributes);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (index, answer);
    }

    /// The call ended: its body as the layers read it, how it failed.
    pub(crate) fn call_ended(&mut self, body: Option<&JsonRpcBody>, error: Option<CallError>) {
        #[cfg(feature = "opentelemetry")]
        if let Some(on) = self.on.take() {
            use opentelemetry::KeyValue;
            let message = match body {
                Some(JsonRpcBody::Single(message)) => Some(message),
                _ => None,
            };
            let method = message
                .and_then(|m| m.method.as_deref())
                .or(on.headers[0].as_deref());
            let name = message
                .and_then(|m| m.name.as_deref())
                .or(on.headers[1].as_deref());
            let mut attributes = vec![KeyValue::new(
                "mcp.method.name",
                method.unwrap_or("_OTHER").to_owned(),
            )];
            match (method, name) {
                (Some("tools/call"), Some(tool)) => {
                    attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
                }
                (Some("prompts/get"), Some(prompt)) => {
                    attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.to_owned()));
                }
                _ => {}
            }
            if method == Some("tools/call") {
                attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            }
            if let Some(version) = &on.headers[2] {
                attributes.push(KeyValue::new("mcp.protocol.version", version.clone()));
            }
            if let Some((address, port)) = &on.server {
                attributes.push(KeyValue::new("server.address", address.clone()));
                attributes.push(KeyValue::new("server.port", *port));
            }
            if let Some(error) = error {
                let kind = match error {
                    CallError::JsonRpc(code) => {
                        attributes
                            .push(KeyValue::new("rpc.response.status_code", code.to_string()));
                        code.to_string()
                    }
                    CallError::Tool => "tool_error".to_owned(),
                    CallError::Http(status) => status.to_string(),
                    CallError::Transport(kind) => kind.to_owned(),
                };
                attributes.push(KeyValue::new("error.type", kind));
            }
            on.metrics
                .operation
                .record(on.started.elapsed().as_secs_f64(), &attributes);
        }
        #[cfg(not(feature = "opentelemetry"))]
        let _ = (body, error);
    }
}

#[cfg(all(test, feature = "opentelemetry"))]
mod metrics_tests {
    use std::collections::BTreeMap;

    use opentelemetry::KeyValue;

    use super::Metrics;
    use crate::rule::{Failure, Refusal};
    use crate::telemetry::test_meter::{TestMeter, point};

    #[test]
    fn the_retry_budgets_counters_are_instruments() {
        let meter = TestMeter::default();
        let metrics = Metrics::new(&meter.meter());
        let budget = crate::budget::RetryBudget::new();
        metrics.observe_budget(&budget, &[KeyValue::new("runtime", "calc")]);
        budget
            .withdraw(&Failure::Refused(Refusal::Throttled))
            .unwrap();
        budget
            .withdraw(&Failure::Refused(Refusal::SessionBusy))
            .unwrap();
        budget
            .withdraw(&Failure::Refused(Refusal::SessionBusy))
            .unwrap();
        budget.waited(std::time::Duration::from_millis(1500));
        budget.ended(4, true);
        let points = meter.read();
        let runtime = "runtime=calc";
        let expected: BTreeMap<_, _> = [
            (
                point("agentcore_tower.retry_budget.calls", "{call}", &[runtime]),
                "1",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.attempts",
                    "{attempt}",
                    &[runtime],
                ),
                "4",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.refusals",
                    "{attempt}",
                    &[runtime],
                ),
                "0",
            ),
            (
                point("agentcore_tower.retry_budget.wait", "s", &[runtime]),
                "1.5",
            ),
            // 500 - 5 (throttled) + 1 (a success): session busy costs nothing.
            (
                point("agentcore_tower.retry_budget.tokens", "{token}", &[runtime]),
                "496",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=throttled"],
                ),
                "1",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=session_busy"],
                ),
                "2",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=session_expired"],
                ),
                "0",
            ),
            (
                point(
                    "agentcore_tower.retry_budget.resends",
                    "{attempt}",
                    &[runtime, "agentcore_tower.resend.cause=failure"],
                ),
                "0",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
        assert_eq!(points, expected);
    }
}
