//! OpenTelemetry export over OTLP/HTTP, on when the standard environment asks for it: a signal
//! (traces, metrics) is exported when `OTEL_EXPORTER_OTLP_ENDPOINT` or its own
//! `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT` is set, unless `OTEL_SDK_DISABLED=true` or
//! `OTEL_{TRACES,METRICS}_EXPORTER=none`. Otherwise nothing of it exists: no provider, no
//! thread, no `tracing` layer, no client.
//!
//! What goes out: agentcore-tower's spans (target `agentcore_tower`: each call's span, its
//! attempts' spans and their decision events) through `tracing-opentelemetry`, and its
//! metrics (`mcp.client.operation.duration`, `mcp.client.session.duration`,
//! `http.client.request.duration`, the retry budget's `agentcore_tower.retry_budget.*`) through a
//! periodic reader — what the crate records, which holds no credential, token or signature, and
//! URLs without user info and with every query value redacted. The proxy's own log lines are not
//! exported. The resource: `service.name` (`OTEL_SERVICE_NAME`, else `OTEL_RESOURCE_ATTRIBUTES`'s,
//! else `agentcore-mcp-proxy`), `service.version`, `OTEL_RESOURCE_ATTRIBUTES`, the SDK's
//! `telemetry.sdk.*`.
//!
//! The endpoint (a signal's own URL as it is, else the generic one with `/v1/traces` or
//! `/v1/metrics` after it; one with a user or password in it is refused) and the protocol
//! (`OTEL_EXPORTER_OTLP_PROTOCOL`, or a signal's own: `http/protobuf`, the default, or
//! `http/json`; `grpc` is not supported, and a signal asked for over it is not exported) are
//! resolved here, so that what is logged is what is used, without a secret. The exporter reads
//! the rest of the standard variables itself: the headers (`OTEL_EXPORTER_OTLP_HEADERS`, never
//! logged: they hold collector keys), the timeout.
//! Requests go through the proxy's own HTTP client (hyper, rustls with ring and the webpki
//! roots), run on its runtime: the SDK's batch span processor and periodic reader run on threads
//! of their own, outside any runtime.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::resource::{
    EnvResourceDetector, ResourceDetector, SdkProvidedResourceDetector, TelemetryResourceDetector,
};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::{info, warn};

use crate::cli::NAME;

/// How long flushing what is left may hold up the exit.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// How much longer than [`SHUTDOWN_TIMEOUT`] the exit waits for a provider that overruns it.
const GRACE: Duration = Duration::from_secs(1);

/// The instrumentation scope of the spans and metrics: the crate that records them.
const SCOPE: &str = "agentcore-tower";

/// The longest an answer of the collector may be (its body is not read, only its status).
const MAX_ANSWER: usize = 64 * 1024;

/// The variables that turn a signal on, and that name its protocol and exporter.
struct Signal {
    name: &'static str,
    endpoint: &'static str,
    protocol: &'static str,
    exporter: &'static str,
    path: &'static str,
}

const TRACES: Signal = Signal {
    name: "traces",
    endpoint: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    protocol: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    exporter: "OTEL_TRACES_EXPORTER",
    path: "/v1/traces",
};

const METRICS: Signal = Signal {
    name: "metrics",
    endpoint: "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    protocol: "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    exporter: "OTEL_METRICS_EXPORTER",
    path: "/v1/metrics",
};

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// A variable's value; unset when empty (as the OpenTelemetry specification reads them).
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What the environment asks for: read at start, before anything is built. Nothing but
/// variables read when no endpoint is set.
pub struct Plan {
    traces: Option<Target>,
    metrics: Option<Target>,
    /// Said once logging is on.
    warnings: Vec<String>,
}

/// Where a signal goes, and how.
struct Target {
    endpoint: String,
    /// The endpoint for the log: no user info, no query.
    shown: String,
    protocol: Protocol,
}

impl Target {
    /// What is exported where, for the log.
    fn describe(&self, signal: &Signal) -> String {
        let protocol = match self.protocol {
            Protocol::HttpJson => "http/json",
            _ => "http/protobuf",
        };
        format!("{} to {} ({protocol})", signal.name, self.shown)
    }
}

impl Plan {
    pub fn from_env() -> Plan {
        let mut plan = Plan {
            traces: None,
            metrics: None,
            warnings: Vec::new(),
        };
        if var(ENDPOINT).is_none()
            && var(TRACES.endpoint).is_none()
            && var(METRICS.endpoint).is_none()
        {
            return plan;
        }
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return plan;
        }
        plan.traces = plan.signal(&TRACES);
        plan.metrics = plan.signal(&METRICS);
        plan
    }

    /// Whether anything is to be exported.
    pub fn is_on(&self) -> bool {
        self.traces.is_some() || self.metrics.is_some()
    }

    /// Where and how `signal` is to be exported, if it is.
    fn signal(&mut self, signal: &Signal) -> Option<Target> {
        // The specification's: a signal's own URL as it is, else the generic one's with the
        // signal's path after it.
        let (name, endpoint) = match (var(signal.endpoint), var(ENDPOINT)) {
            (Some(endpoint), _) => (signal.endpoint, endpoint),
            (None, Some(base)) => (
                ENDPOINT,
                format!("{}{}", base.trim_end_matches('/'), signal.path),
            ),
            (None, None) => return None,
        };
        if let Some(exporters) = var(signal.exporter) {
            let names: Vec<String> = exporters
                .split(',')
                .map(|n| n.trim().to_ascii_lowercase())
                .filter(|n| !n.is_empty())
                .collect();
            if names.iter().any(|n| n == "none") {
                return None;
            }
            if !names.iter().any(|n| n == "otlp") {
                self.warn(format!(
                    "{}={exporters}: only otlp is supported; no {} are exported",
                    signal.exporter, signal.name
                ));
                return None;
            }
        }
        // Never its value in a message: it may hold a secret.
        let uri = match endpoint.trim().parse::<http::Uri>() {
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https"))
                    && uri.host().is_some_and(|h| !h.is_empty()) =>
            {
                uri
            }
            _ => {
                self.warn(format!(
                    "{name} is not an http:// or https:// URL: nothing is exported to it"
                ));
                return None;
            }
        };
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            self.warn(format!(
                "{name} has a user or password in it (give the collector's credentials in \
                 OTEL_EXPORTER_OTLP_HEADERS): nothing is exported to it"
            ));
            return None;
        }
        let protocol = match var(signal.protocol)
            .map(|value| (signal.protocol, value))
            .or_else(|| var(PROTOCOL).map(|value| (PROTOCOL, value)))
        {
            None => Protocol::HttpBinary,
            Some((name, value)) => match value.trim().to_ascii_lowercase().as_str() {
                "http/protobuf" => Protocol::HttpBinary,
                "http/json" => Protocol::HttpJson,
                "grpc" => {
                    self.warn(format!(
                        "{name}=grpc: OTLP over gRPC is not supported (only http/protobuf and \
                         http/json): nothing is exported over it"
                    ));
                    return None;
                }
                _ => {
                    self.warn(format!(
                        "{name}={value}: not an OTLP protocol (http/protobuf, http/json): \
                         nothing is exported over it"
                    ));
                    return None;
                }
            },
        };
        Some(Target {
            endpoint: endpoint.trim().to_owned(),
            shown: crate::cli::shown(&uri),
            protocol,
        })
    }

    fn warn(&mut self, warning: String) {
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    /// Builds the providers for what is to be exported, their requests to run on `runtime`
    /// (`None` when nothing is). Logs nothing (logging is not on yet): [`Export::report`]
    /// does, once it is.
    pub fn start(mut self, runtime: &tokio::runtime::Handle) -> Option<Export> {
        if !self.is_on() {
            return (!self.warnings.is_empty()).then(|| Export::nothing(self.warnings));
        }
        let client = match crate::stack::https_connector() {
            Ok(connector) => Collector {
                client: Client::builder(TokioExecutor::new()).build(connector),
                runtime: runtime.clone(),
            },
            Err(_) => {
                self.warnings.push(
                    "cannot set up TLS for the OTLP exporter: nothing is exported".to_owned(),
                );
                return Some(Export::nothing(self.warnings));
            }
        };
        let resource = resource();
        let mut export = Export::nothing(Vec::new());
        if let Some(target) = &self.traces {
            match opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(&target.endpoint)
                .with_protocol(target.protocol)
                .with_http_client(client.clone())
                .build()
            {
                Ok(exporter) => {
                    export.traces = Some(
                        SdkTracerProvider::builder()
                            .with_batch_exporter(exporter)
                            .with_resource(resource.clone())
                            .build(),
                    );
                    export.exporting.push(target.describe(&TRACES));
                }
                Err(e) => self.warnings.push(format!("no traces are exported: {e}")),
            }
        }
        if let Some(target) = &self.metrics {
            match opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(&target.endpoint)
                .with_protocol(target.protocol)
                .with_http_client(client)
                .build()
            {
                Ok(exporter) => {
                    export.metrics = Some(
                        SdkMeterProvider::builder()
                            .with_reader(PeriodicReader::builder(exporter).build())
                            .with_resource(resource)
                            .build(),
                    );
                    export.exporting.push(target.describe(&METRICS));
                }
                Err(e) => self.warnings.push(format!("no metrics are exported: {e}")),
            }
        }
        export.warnings = self.warnings;
        Some(export)
    }
}

/// The resource: `service.name` defaults to the proxy's name and `service.version` to its
/// version; `OTEL_RESOURCE_ATTRIBUTES` over them, and `OTEL_SERVICE_NAME` over that (the
/// specification's order: the SDK's own builder would let the attributes' `service.name` win).
fn resource() -> Resource {
    let mut detectors: Vec<Box<dyn ResourceDetector>> = vec![
        Box::new(TelemetryResourceDetector),
        Box::new(EnvResourceDetector::new()),
    ];
    if var("OTEL_SERVICE_NAME").is_some() {
        detectors.push(Box::new(SdkProvidedResourceDetector));
    }
    Resource::builder_empty()
        .with_service_name(NAME)
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_detectors(&detectors)
        .build()
}

/// The providers of the signals exported, to flush and shut down at exit.
pub struct Export {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
    /// What is exported where, for the log.
    exporting: Vec<String>,
    warnings: Vec<String>,
}

impl Export {
    fn nothing(warnings: Vec<String>) -> Export {
        Export {
            traces: None,
            metrics: None,
            exporting: Vec::new(),
            warnings,
        }
    }

    /// The tracer for `tracing-opentelemetry`'s layer, when traces are exported.
    pub fn tracer(&self) -> Option<SdkTracer> {
        self.traces.as_ref().map(|p| p.tracer(SCOPE))
    }

    /// The stack's telemetry: the trace headers of the current span when traces are exported
    /// (so that AgentCore's spans join the trace), the histograms when metrics are.
    pub fn for_stack(&self) -> crate::stack::Telemetry {
        use opentelemetry::metrics::MeterProvider as _;
        crate::stack::Telemetry {
            trace_context: self
                .traces
                .as_ref()
                .map(|_| agentcore_tower::telemetry::TraceContext::opentelemetry()),
            metrics: self
                .metrics
                .as_ref()
                .map(|p| agentcore_tower::telemetry::Metrics::new(&p.meter(SCOPE))),
        }
    }

    /// Says what is exported, and why something asked for is not: once logging is on.
    pub fn report(&self) {
        for warning in &self.warnings {
            warn!("OpenTelemetry: {warning}");
        }
        if !self.exporting.is_empty() {
            info!(
                "exporting OpenTelemetry {} over OTLP/HTTP",
                self.exporting.join(", ")
            );
        }
    }

    /// Exports what is left and shuts the providers down, each given `limit` (the metrics
    /// reader takes 5 s whatever it is told); their requests run on the runtime, which must
    /// still run. What did not make it is said. Waits `limit` and [`GRACE`] at most, in case a
    /// provider overruns its own limit.
    pub fn shutdown(self, limit: Duration) {
        let (done, finished) = std::sync::mpsc::channel();
        let mut running = 0;
        if let Some(traces) = self.traces {
            let done = done.clone();
            running += 1;
            std::thread::spawn(move || {
                let _ = done.send(("traces", traces.shutdown_with_timeout(limit)));
            });
        }
        if let Some(metrics) = self.metrics {
            let done = done.clone();
            running += 1;
            std::thread::spawn(move || {
                let _ = done.send(("metrics", metrics.shutdown_with_timeout(limit)));
            });
        }
        let deadline = std::time::Instant::now() + limit + GRACE;
        for _ in 0..running {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match finished.recv_timeout(left) {
                Ok((_, Ok(()))) => {}
                Ok((signal, Err(e))) => {
                    warn!("OpenTelemetry: the last {signal} were not exported: {e}")
                }
                Err(_) => {
                    warn!(
                        "OpenTelemetry: the last export still runs after {:?}: giving up on it",
                        limit + GRACE
                    );
                    return;
                }
            }
        }
    }
}

/// The exporter's HTTP client: hyper over the proxy's TLS connector, each request run on the
/// proxy's runtime (the SDK's threads have none).
#[derive(Clone)]
struct Collector {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Collector(..)")
    }
}

impl HttpClient for Collector {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            let request = request.map(Full::new);
            let answer = tokio::time::timeout(
                opentelemetry_otlp::OTEL_EXPORTER_OTLP_TIMEOUT_DEFAULT,
                async {
                    let answer = client.request(request).await?;
                    let (parts, body) = answer.into_parts();
                    let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
                    Ok::<_, HttpError>(Response::from_parts(parts, body))
                },
            )
            .await;
            match answer {
                Ok(answer) => answer,
                Err(_) => Err("no answer from the collector in time".into()),
            }
        });
        Box::pin(async move {
            match task.await {
                Ok(answer) => answer,
                Err(e) => Err(Box::new(e) as HttpError),
            }
        })
    }
}
