//! OpenTelemetry export over OTLP/HTTP, through the built binary against the emulator, to a
//! collector played here: what a call exports (its span, its attempts' spans, the resource, the
//! histograms) once the proxy has exited; nothing without the variables that ask for it (or with
//! those that turn it off); and never a secret.

use std::sync::{Arc, Mutex};

use agentcore_tower::emulator::{Emulator, EmulatorConfig};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// The service name the tests give.
const SERVICE: &str = "otlp-test-proxy";
/// The collector's key (`OTEL_EXPORTER_OTLP_HEADERS`): sent to the collector only.
const COLLECTOR_KEY: &str = "otlp-collector-key-5ecr3t-0123456789";

// ---------------------------------------------------------------------------------------------
// A collector played here.

/// One request the collector got.
#[derive(Clone, Debug)]
struct Received {
    method: String,
    path: String,
    content_type: Option<String>,
    authorization: Option<String>,
    body: Bytes,
}

/// An OTLP/HTTP collector on loopback: every request recorded, answered 200 with an empty
/// message in the request's encoding.
struct Collector {
    base: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Collector {
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = received.clone();
        let (base, task) = common::serve_loopback(move |request| {
            let sink = sink.clone();
            async move { collect(&sink, request).await }
        })
        .await;
        Collector {
            base,
            received,
            task,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The bodies received at `path`, as JSON.
    fn json_at(&self, path: &str) -> Vec<Value> {
        self.received()
            .iter()
            .filter(|r| r.path == path)
            .map(|r| {
                assert_eq!(r.content_type.as_deref(), Some("application/json"), "{r:?}");
                serde_json::from_slice(&r.body).unwrap()
            })
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn collect(
    sink: &Mutex<Vec<Received>>,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<http_body_util::Full<Bytes>> {
    use http_body_util::BodyExt;
    let (parts, body) = request.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let content_type = header("content-type");
    sink.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        content_type: content_type.clone(),
        authorization: header("authorization"),
        body,
    });
    let (content_type, answer) = match content_type.as_deref() {
        Some("application/json") => ("application/json", "{}"),
        _ => ("application/x-protobuf", ""),
    };
    http::Response::builder()
        .status(200)
        .header("content-type", content_type)
        .body(http_body_util::Full::new(Bytes::from_static(
            answer.as_bytes(),
        )))
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Reading OTLP/JSON.

/// An attribute's value in a list of OTLP key-values: the `AnyValue`'s one field.
fn attribute(attributes: &Value, key: &str) -> Option<Value> {
    let found = attributes.as_array()?.iter().find(|kv| kv["key"] == key)?;
    let mut value = &found["value"];
    // `{"stringValue": "x"}`, whatever the nesting of the one-of.
    while let Some(object) = value.as_object() {
        let (_, inner) = object.iter().next()?;
        value = inner;
    }
    Some(value.clone())
}

/// The keys of a list of OTLP key-values, sorted.
fn keys(attributes: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = attributes
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| kv["key"].as_str().unwrap())
        .collect();
    keys.sort_unstable();
    keys
}

/// Every span exported, with the attributes of its resource.
fn spans(bodies: &[Value]) -> Vec<(Value, Value)> {
    let mut all = Vec::new();
    for body in bodies {
        for resource_spans in body["resourceSpans"].as_array().unwrap() {
            let resource = resource_spans["resource"]["attributes"].clone();
            for scope in resource_spans["scopeSpans"].as_array().unwrap() {
                for span in scope["spans"].as_array().unwrap() {
                    all.push((resource.clone(), span.clone()));
                }
            }
        }
    }
    all
}

/// Every metric exported, with the attributes of its resource.
fn metrics(bodies: &[Value]) -> Vec<(Value, Value)> {
    let mut all = Vec::new();
    for body in bodies {
        for resource_metrics in body["resourceMetrics"].as_array().unwrap() {
            let resource = resource_metrics["resource"]["attributes"].clone();
            for scope in resource_metrics["scopeMetrics"].as_array().unwrap() {
                for metric in scope["metrics"].as_array().unwrap() {
                    all.push((resource.clone(), metric.clone()));
                }
            }
        }
    }
    all
}

/// A number that OTLP/JSON may write as a string (64-bit integers).
fn number(value: &Value) -> u64 {
    match value {
        Value::String(text) => text.parse().unwrap(),
        other => other
            .as_u64()
            .unwrap_or_else(|| panic!("not a count: {other}")),
    }
}

/// `SPAN_KIND_CLIENT`.
const CLIENT: i64 = 3;

// ---------------------------------------------------------------------------------------------

/// initialize, a `tools/call` of `add`, its answer; then stdin closes and the proxy exits 0.
async fn one_call(proxy: &mut Proxy) {
    proxy.open().await;
    proxy.send(&call(2, "add", json!({"a": 2, "b": 3})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(text_of(&answer), "5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_exported_with_its_attempts_the_resource_and_its_duration() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let collector = Collector::start().await;
    let mut proxy = Proxy::start_with_otel(
        &emulator,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", SERVICE),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=test",
            ),
        ],
    );
    one_call(&mut proxy).await;
    // Exported by the exit: the batch's delay (5 s) and the metrics' interval (60 s) are far.
    let proxy = proxy.closed_cleanly("nothing after the answer").await;
    let stderr = proxy.stderr();
    assert!(
        stderr.contains(&format!(
            "exporting OpenTelemetry traces to {base}/v1/traces (http/json), metrics to \
             {base}/v1/metrics (http/json) over OTLP/HTTP",
            base = collector.base
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("OpenTelemetry: "), "no warning: {stderr}");

    let received = collector.received();
    assert!(received.iter().all(|r| r.method == "POST"), "{received:?}");
    let spans = spans(&collector.json_at("/v1/traces"));
    // initialize's call span and the call's, one attempt each (the notification's too).
    let calls: Vec<&(Value, Value)> = spans
        .iter()
        .filter(|(_, s)| s["name"] == "tools/call add")
        .collect();
    assert_eq!(calls.len(), 1, "{spans:#?}");
    let (resource, span) = calls[0];
    assert_eq!(span["kind"], CLIENT, "{span}");
    assert_eq!(
        span["parentSpanId"].as_str().unwrap_or(""),
        "",
        "a root: {span}"
    );
    let attributes = &span["attributes"];
    assert_eq!(
        keys(attributes),
        [
            "gen_ai.operation.name",
            "gen_ai.tool.name",
            "jsonrpc.request.id",
            "mcp.method.name",
            "mcp.protocol.version",
            "mcp.session.id",
            "server.address",
            "server.port",
        ],
        "the crate's fields only: {span}"
    );
    assert_eq!(
        attribute(attributes, "mcp.method.name"),
        Some(json!("tools/call"))
    );
    assert_eq!(
        attribute(attributes, "gen_ai.tool.name"),
        Some(json!("add"))
    );
    assert_eq!(
        attribute(attributes, "gen_ai.operation.name"),
        Some(json!("execute_tool"))
    );
    assert_eq!(
        attribute(attributes, "jsonrpc.request.id"),
        Some(json!("2"))
    );
    assert_eq!(attribute(resource, "service.name"), Some(json!(SERVICE)));
    assert_eq!(
        attribute(resource, "service.version"),
        Some(json!(env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        attribute(resource, "deployment.environment.name"),
        Some(json!("test"))
    );
    let call_id = span["spanId"].as_str().unwrap();
    let trace_id = span["traceId"].as_str().unwrap();
    assert_eq!(call_id.len(), 16, "{span}");
    assert_eq!(trace_id.len(), 32, "{span}");

    // Its one attempt, a child of it.
    let attempts: Vec<&Value> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s["parentSpanId"] == call_id)
        .collect();
    assert_eq!(attempts.len(), 1, "{spans:#?}");
    let attempt = attempts[0];
    assert_eq!(attempt["name"], "POST", "{attempt}");
    assert_eq!(attempt["kind"], CLIENT, "{attempt}");
    assert_eq!(attempt["traceId"], trace_id, "{attempt}");
    let attributes = &attempt["attributes"];
    assert_eq!(
        keys(attributes),
        [
            "aws.request_id",
            "http.request.method",
            "http.response.status_code",
            "server.address",
            "server.port",
            "url.full",
        ],
        "{attempt}"
    );
    assert_eq!(
        attribute(attributes, "http.request.method"),
        Some(json!("POST"))
    );
    assert_eq!(
        attribute(attributes, "http.response.status_code"),
        Some(json!("200"))
    );
    // AgentCore joins the trace: the attempt's span is its parent.
    let audit = emulator.audit();
    let sent: Vec<_> = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .collect();
    assert_eq!(sent.len(), 1, "{audit:?}");
    assert_eq!(
        sent[0].traceparent.as_deref(),
        Some(format!("00-{trace_id}-{}-01", attempt["spanId"].as_str().unwrap()).as_str())
    );
    // Every span of the run: one resource, the service's.
    for (resource, span) in &spans {
        assert_eq!(
            attribute(resource, "service.name"),
            Some(json!(SERVICE)),
            "{span}"
        );
    }

    // The call's duration: one measurement of tools/call.
    let metrics = metrics(&collector.json_at("/v1/metrics"));
    let durations: Vec<&(Value, Value)> = metrics
        .iter()
        .filter(|(_, m)| m["name"] == "mcp.client.operation.duration")
        .collect();
    assert_eq!(durations.len(), 1, "{metrics:#?}");
    let (resource, duration) = durations[0];
    assert_eq!(attribute(resource, "service.name"), Some(json!(SERVICE)));
    assert_eq!(duration["unit"], "s", "{duration}");
    let points: Vec<&Value> = duration["histogram"]["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| attribute(&p["attributes"], "mcp.method.name") == Some(json!("tools/call")))
        .collect();
    assert_eq!(points.len(), 1, "{duration:#}");
    assert_eq!(number(&points[0]["count"]), 1, "{duration:#}");
    assert!(
        metrics
            .iter()
            .any(|(_, m)| m["name"] == "http.client.request.duration"),
        "{metrics:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_exported_unless_the_environment_asks() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let collector = Collector::start().await;
    let endpoint = collector.base.clone();
    let with_password = endpoint.replace("http://", "http://otlp-user:otlp-pa55word@");
    let cases: [&[(&str, &str)]; 6] = [
        // No endpoint: what else is set does not turn anything on.
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", SERVICE),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc"),
        ],
        // An endpoint, and what turns export off.
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SDK_DISABLED", "true"),
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_TRACES_EXPORTER", "none"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ],
        // gRPC: not spoken, said once.
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
        // A password in the URL: refused, and not logged.
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &with_password)],
    ];
    for (i, env) in cases.into_iter().enumerate() {
        let mut proxy = Proxy::start_with_otel(&emulator, &[], env);
        one_call(&mut proxy).await;
        let proxy = proxy.closed_cleanly("nothing after the answer").await;
        let stderr = proxy.stderr();
        assert_eq!(collector.received().len(), 0, "case {i}: {env:?}");
        assert!(
            !stderr.contains("exporting OpenTelemetry"),
            "case {i}: {stderr}"
        );
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("OpenTelemetry: "))
            .collect();
        let warning = match i {
            4 => Some(
                "OpenTelemetry: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: OTLP over gRPC is not supported \
                 (only http/protobuf and http/json): nothing is exported over it",
            ),
            5 => Some(
                "OpenTelemetry: OTEL_EXPORTER_OTLP_ENDPOINT has a user or password in it (give \
                 the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS): nothing is exported \
                 to it",
            ),
            _ => None,
        };
        match warning {
            // Once, for both signals.
            Some(warning) => {
                assert_eq!(warnings.len(), 1, "{stderr}");
                assert!(warnings[0].ends_with(warning), "{stderr}");
            }
            None => assert_eq!(warnings, Vec::<&str>::new(), "case {i}"),
        }
        assert!(!stderr.contains("otlp-pa55word"), "{stderr}");
    }
    assert_eq!(emulator.audit().executions_of("add"), 6);
}

/// A forwarder between the proxy and the emulator that keeps every `Authorization` header it
/// passes on: the signatures the proxy computed.
struct Forwarder {
    base: String,
    authorizations: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    async fn start(to: std::net::SocketAddr) -> Forwarder {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let sink = authorizations.clone();
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<Bytes>>();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let sink = sink.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: http::Request<hyper::body::Incoming>| {
                            let sink = sink.clone();
                            let client = client.clone();
                            async move {
                                let (mut parts, body) = request.into_parts();
                                if let Some(value) = parts.headers.get("authorization") {
                                    sink.lock()
                                        .unwrap()
                                        .push(value.to_str().unwrap().to_owned());
                                }
                                let body = body.collect().await.unwrap().to_bytes();
                                // The Host header stays: it is signed.
                                parts.uri =
                                    format!("http://{to}{}", parts.uri.path_and_query().unwrap())
                                        .parse()
                                        .unwrap();
                                let request = http::Request::from_parts(
                                    parts,
                                    http_body_util::Full::new(body),
                                );
                                let answer = client.request(request).await.unwrap();
                                let (parts, body) = answer.into_parts();
                                let body = body.collect().await.unwrap().to_bytes();
                                Ok::<_, std::convert::Infallible>(http::Response::from_parts(
                                    parts,
                                    http_body_util::Full::new(body),
                                ))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Forwarder {
            base,
            authorizations,
            task,
        }
    }

    /// The `Signature=` of every request passed on.
    fn signatures(&self) -> Vec<String> {
        self.authorizations
            .lock()
            .unwrap()
            .iter()
            .map(|a| {
                a.split("Signature=")
                    .nth(1)
                    .unwrap_or_else(|| panic!("not SigV4: {a}"))
                    .to_owned()
            })
            .collect()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every string in a JSON value (keys too), unescaped.
fn strings(value: &Value, into: &mut String) {
    match value {
        Value::String(text) => {
            into.push_str(text);
            into.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings(v, into)),
        Value::Object(map) => {
            for (key, value) in map {
                into.push_str(key);
                into.push('\n');
                strings(value, into);
            }
        }
        _ => {}
    }
}

/// `secret` as JSON may write it: as it is, `/` escaped as `\/`, every character `\u`-escaped.
fn escaped_forms(secret: &str) -> Vec<Vec<u8>> {
    let unicode: String = secret
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    vec![
        secret.as_bytes().to_vec(),
        secret.replace('/', "\\/").into_bytes(),
        unicode.to_lowercase().into_bytes(),
        unicode.to_uppercase().replace("\\U", "\\u").into_bytes(),
    ]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_is_exported() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let forwarder = Forwarder::start(emulator.addr()).await;
    let credentials = emulator.credentials();
    // Over both encodings: JSON, and protobuf (the default).
    for protocol in ["http/json", "http/protobuf"] {
        let collector = Collector::start().await;
        let headers = format!("authorization=Bearer {COLLECTOR_KEY}");
        let mut proxy = Proxy::start_with_otel(
            &emulator,
            &["--endpoint", &forwarder.base],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
                ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
            ],
        );
        one_call(&mut proxy).await;
        let proxy = proxy.closed_cleanly("nothing after the answer").await;
        assert_eq!(emulator.audit().signature_failures, 0);

        let received = collector.received();
        let paths: Vec<&str> = received.iter().map(|r| r.path.as_str()).collect();
        assert!(paths.contains(&"/v1/traces"), "{protocol}: {paths:?}");
        assert!(paths.contains(&"/v1/metrics"), "{protocol}: {paths:?}");
        let content_type = match protocol {
            "http/json" => "application/json",
            _ => "application/x-protobuf",
        };
        let mut secrets = vec![
            credentials.secret_access_key().to_owned(),
            credentials.session_token().unwrap().to_owned(),
            COLLECTOR_KEY.to_owned(),
        ];
        let signatures = forwarder.signatures();
        assert!(!signatures.is_empty());
        secrets.extend(signatures);
        for request in &received {
            assert_eq!(request.content_type.as_deref(), Some(content_type));
            // The collector's key goes to the collector, in its header only.
            assert_eq!(
                request.authorization.as_deref(),
                Some(format!("Bearer {COLLECTOR_KEY}").as_str())
            );
            let mut decoded = String::new();
            if protocol == "http/json" {
                strings(
                    &serde_json::from_slice(&request.body).unwrap(),
                    &mut decoded,
                );
                // What was searched is what was exported.
                let what = match request.path.as_str() {
                    "/v1/traces" => "tools/call add",
                    _ => "mcp.client.operation.duration",
                };
                assert!(decoded.contains(what), "{decoded}");
            }
            for secret in &secrets {
                for form in escaped_forms(secret) {
                    assert!(
                        !contains(&request.body, &form),
                        "{protocol}: {} in {}",
                        String::from_utf8_lossy(&form),
                        request.path
                    );
                }
                assert!(!decoded.contains(secret.as_str()), "{protocol}: {secret}");
            }
        }
        // Nor in the proxy's log.
        let stderr = proxy.stderr();
        for secret in &secrets {
            assert!(!stderr.contains(secret.as_str()), "{protocol}: {secret}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_holds_the_exit_5_s() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    // Takes connections and reads nothing, answers nothing.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut streams = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            streams.push(stream);
        }
    });
    let mut proxy = Proxy::start_with_otel(
        &emulator,
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
    );
    one_call(&mut proxy).await;
    let closed = std::time::Instant::now();
    let proxy = proxy.closed_cleanly("nothing after the answer").await;
    let waited = closed.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(5) && waited < std::time::Duration::from_secs(8),
        "{waited:?}"
    );
    // Each provider gives up after its 5 s, and says so.
    let stderr = proxy.stderr();
    for signal in ["traces", "metrics"] {
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| {
                l.contains(&format!(
                    "OpenTelemetry: the last {signal} were not exported: "
                ))
            })
            .collect();
        assert_eq!(said.len(), 1, "{stderr}");
        assert!(said[0].contains("Timeout(5s)"), "{stderr}");
    }
    assert!(!stderr.contains("giving up"), "{stderr}");
    held.abort();
}

/// POSTs `message` to the proxy's `--listen` URL (in the MCP session `session`): the status,
/// the `Mcp-Session-Id` answered, the body.
async fn post(url: &str, session: Option<&str>, message: &Value) -> (u16, Option<String>, String) {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<Bytes>>();
    let mut request = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let request = request
        .body(http_body_util::Full::new(Bytes::from(message.to_string())))
        .unwrap();
    let answer = client.request(request).await.unwrap();
    let status = answer.status().as_u16();
    let session = answer
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    (status, session, String::from_utf8_lossy(&body).into_owned())
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_proxy_stopped_by_sigterm_exports_its_calls_before_it_exits() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let collector = Collector::start().await;
    let mut proxy = Proxy::start_with_otel(
        &emulator,
        &["--listen", "127.0.0.1:0"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    let url = proxy.listen_url().await;
    let (status, session, body) = post(&url, None, &initialize(1)).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("an MCP session");
    let (status, _, _) = post(&url, Some(&session), &initialized()).await;
    assert_eq!(status, 202);
    let (status, _, body) = post(
        &url,
        Some(&session),
        &call(2, "add", json!({"a": 2, "b": 3})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""text":"5""#), "{body}");

    let pid = proxy.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = std::time::Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "{}", proxy.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());

    let spans = spans(&collector.json_at("/v1/traces"));
    let calls = spans
        .iter()
        .filter(|(_, s)| s["name"] == "tools/call add")
        .count();
    assert_eq!(calls, 1, "{spans:#?}");
    for (resource, _) in &spans {
        assert_eq!(
            attribute(resource, "service.name"),
            Some(json!("agentcore-mcp-proxy")),
            "the default"
        );
    }
    let metrics = metrics(&collector.json_at("/v1/metrics"));
    assert!(
        metrics
            .iter()
            .any(|(_, m)| m["name"] == "mcp.client.operation.duration"),
        "{metrics:#?}"
    );
}
