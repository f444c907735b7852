//! OpenTelemetry export over OTLP/HTTP, through the built binary against the emulator, to a
//! collector played here: what a call exports (its span, its attempts' spans, the resource, the
//! histograms) once the proxy has exited; nothing without the variables that ask for it (or with
//! those that turn it off); and never a secret.

use std::sync::Mutex;

use agentcore_tower_emulator::EmulatorConfig;
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
type Collector = Recorder<Received>;

impl Recorder<Received> {
    async fn start() -> Collector {
        Recorder::serve(|sink, request| async move { collect(&sink, request).await }).await
    }

    /// The bodies received at `path`, as JSON.
    fn json_at(&self, path: &str) -> Vec<Value> {
        self.recorded()
            .iter()
            .filter(|r| r.path == path)
            .map(|r| {
                assert_eq!(r.content_type.as_deref(), Some("application/json"), "{r:?}");
                serde_json::from_slice(&r.body).unwrap()
            })
            .collect()
    }
}

async fn collect(
    sink: &Mutex<Vec<Received>>,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<http_body_util::Full<Bytes>> {
    let (parts, body) = read_request(request).await;
    let content_type = header_of(&parts.headers, "content-type");
    sink.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        content_type: content_type.clone(),
        authorization: header_of(&parts.headers, "authorization"),
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
    exported(bodies, "Spans", "spans")
}

/// Every metric exported, with the attributes of its resource.
fn metrics(bodies: &[Value]) -> Vec<(Value, Value)> {
    exported(bodies, "Metrics", "metrics")
}

/// Every item of a signal exported (`resource{signal}`, `scope{signal}`, then `items`), with
/// the attributes of its resource.
fn exported(bodies: &[Value], signal: &str, items: &str) -> Vec<(Value, Value)> {
    let mut all = Vec::new();
    for body in bodies {
        for of_resource in body[format!("resource{signal}")].as_array().unwrap() {
            let resource = of_resource["resource"]["attributes"].clone();
            for scope in of_resource[format!("scope{signal}")].as_array().unwrap() {
                for item in scope[items].as_array().unwrap() {
                    all.push((resource.clone(), item.clone()));
                }
            }
        }
    }
    all
}

/// The one item exported (a span, a metric) named `name`, with its resource's attributes.
fn the_one<'a>(exported: &'a [(Value, Value)], name: &str) -> &'a (Value, Value) {
    let named: Vec<&(Value, Value)> = exported.iter().filter(|(_, e)| e["name"] == name).collect();
    assert_eq!(named.len(), 1, "{name}: {exported:#?}");
    named[0]
}

/// Each of `expected` (a key and its value as text) in a list of OTLP key-values.
fn assert_attributes(attributes: &Value, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(attribute(attributes, key), Some(json!(value)), "{key}");
    }
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
    let emulator = start_emulator(EmulatorConfig::default()).await;
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

    let received = collector.recorded();
    assert!(received.iter().all(|r| r.method == "POST"), "{received:?}");
    let spans = spans(&collector.json_at("/v1/traces"));
    // initialize's call span and the call's, one attempt each (the notification's too).
    let (resource, span) = the_one(&spans, "tools/call add");
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
    assert_attributes(
        attributes,
        &[
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "add"),
            ("gen_ai.operation.name", "execute_tool"),
            ("jsonrpc.request.id", "2"),
        ],
    );
    assert_attributes(
        resource,
        &[
            ("service.name", SERVICE),
            ("service.version", env!("CARGO_PKG_VERSION")),
            ("deployment.environment.name", "test"),
        ],
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
    assert_attributes(
        attributes,
        &[
            ("http.request.method", "POST"),
            ("http.response.status_code", "200"),
        ],
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
    let (resource, duration) = the_one(&metrics, "mcp.client.operation.duration");
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
    let emulator = start_emulator(EmulatorConfig::default()).await;
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
        assert_eq!(collector.recorded().len(), 0, "case {i}: {env:?}");
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
type Forwarder = Recorder<String>;

impl Recorder<String> {
    async fn start(to: std::net::SocketAddr) -> Forwarder {
        use http_body_util::BodyExt;
        let client = hyper_client();
        Recorder::serve(move |sink, request| {
            let client = client.clone();
            async move {
                let (mut parts, body) = read_request(request).await;
                sink.lock()
                    .unwrap()
                    .extend(header_of(&parts.headers, "authorization"));
                // The Host header stays: it is signed.
                parts.uri = format!("http://{to}{}", parts.uri.path_and_query().unwrap())
                    .parse()
                    .unwrap();
                let request = http::Request::from_parts(parts, http_body_util::Full::new(body));
                let answer = client.request(request).await.unwrap();
                let (parts, body) = answer.into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                http::Response::from_parts(parts, http_body_util::Full::new(body))
            }
        })
        .await
    }

    /// The `Signature=` of every request passed on.
    fn signatures(&self) -> Vec<String> {
        self.recorded()
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
    let emulator = start_emulator(EmulatorConfig::default()).await;
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

        let received = collector.recorded();
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
    let emulator = start_emulator(EmulatorConfig::default()).await;
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

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listening_proxy_stopped_by_sigterm_exports_its_calls_before_it_exits() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let collector = Collector::start().await;
    let proxy = Proxy::start_with_otel(
        &emulator,
        &["--listen", "127.0.0.1:0"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    let listening = Listening::of(proxy).await;
    let answer = listening
        .client()
        .await
        .post(&call(2, "add", json!({"a": 2, "b": 3})))
        .await;
    let body = String::from_utf8_lossy(&answer.body);
    assert_eq!(answer.status, 200, "{body}");
    assert!(body.contains(r#""text":"5""#), "{body}");

    listening.terminated_cleanly().await;

    let spans = spans(&collector.json_at("/v1/traces"));
    the_one(&spans, "tools/call add");
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
