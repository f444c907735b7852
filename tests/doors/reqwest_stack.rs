//! reqwest as the stack's inner HTTP client, through `agentcore_tower::reqwest`,
//! against the AgentCore emulator (which checks the SigV4 signature of every request) and
//! against a raw TCP listener that shows what reqwest writes on the wire.

use crate::common;

use std::error::Error as StdError;
use std::time::{Duration, Instant};

use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::recommended_layers;
use agentcore_tower::reqwest::ReqwestService;
use agentcore_tower::{
    AttemptRecord, ErrorKind, ReplayGuardLayer,
    record::{Outcome, Verdict},
    rule::FailureKind,
};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, RetryAfter};
use bytes::Bytes;
use common::mcp_post;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Service, ServiceExt};

type BoxError = Box<dyn StdError + Send + Sync>;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"reqwest-stack-test","version":"0"}}}"#;
const ADD: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}"#;
const COUNTER: &str =
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"counter","arguments":{}}}"#;

fn client() -> ReqwestService {
    ReqwestService::with_client(|builder| builder.no_proxy()).expect("a reqwest client")
}

/// The recommended stack over reqwest, for `emulator`.
fn stack(
    emulator: &Emulator,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<impl Body<Data = Bytes, Error: Into<BoxError>>>,
    Error = agentcore_tower::Error,
> {
    stack_with(emulator, client())
}

/// The recommended stack over `client`, for `emulator`.
fn stack_with(
    emulator: &Emulator,
    client: ReqwestService,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<impl Body<Data = Bytes, Error: Into<BoxError>>>,
    Error = agentcore_tower::Error,
> {
    let signer = emulator.signer().build().expect("a valid target");
    tower::ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer,
        ))
        .service(client)
}

fn mcp_request(session: Option<&str>, payload: &'static str) -> Request<Full<Bytes>> {
    mcp_post("http://agentcore.invalid/mcp", session, payload)
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
    record: AttemptRecord,
}

async fn post<S, B>(
    stack: &mut S,
    session: Option<&str>,
    payload: &'static str,
) -> Result<Answer, agentcore_tower::Error>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = agentcore_tower::Error>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let response = stack
        .ready()
        .await?
        .call(mcp_request(session, payload))
        .await?;
    let record = AttemptRecord::of_response(&response)
        .cloned()
        .expect("every answer carries its record");
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(Into::into)
        .expect("the answer's body reads to the end")
        .to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}, HTTP {}",
                String::from_utf8_lossy(&bytes),
                parts.status
            )
        })
    };
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
        record,
    })
}

/// `initialize`, checked; the `mcp-session-id` it returned.
async fn initialize<S, B>(stack: &mut S) -> String
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = agentcore_tower::Error>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let init = post(stack, None, INITIALIZE).await.unwrap();
    assert_eq!(init.status, StatusCode::OK, "{}", init.body);
    init.headers["mcp-session-id"].to_str().unwrap().to_owned()
}

fn outcomes(record: &AttemptRecord) -> Vec<Outcome> {
    record
        .attempts()
        .iter()
        .map(|a| a.outcome().clone())
        .collect()
}

fn ok_200() -> Outcome {
    Outcome::Response {
        status: StatusCode::OK,
        error_type: agentcore_tower::record::ErrorType::Absent,
    }
}

/// `{:?}` of the error and of every link of its `source()` chain.
fn error_chain(error: &(dyn StdError + 'static)) -> Vec<String> {
    let mut links = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        links.push(format!("{e:?}"));
        next = e.source();
    }
    links
}

#[tokio::test]
async fn initialize_and_add_succeed_with_valid_signatures() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut stack = stack(&emulator);

    let init = post(&mut stack, None, INITIALIZE).await.unwrap();
    assert_eq!(init.status, StatusCode::OK, "{}", init.body);
    assert_eq!(
        init.body["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    assert_eq!(init.body["result"]["protocolVersion"], "2025-06-18");
    let session = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(outcomes(&init.record), [ok_200()]);

    let add = post(&mut stack, Some(&session), ADD).await.unwrap();
    assert_eq!(add.status, StatusCode::OK);
    assert_eq!(
        add.body,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "5"}], "isError": false}})
    );
    assert_eq!(outcomes(&add.record), [ok_200()]);

    let audit = emulator.audit();
    assert_eq!(audit.signature_failures, 0);
    assert_eq!(audit.requests, 2);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.sessions_started, 1);
}

#[tokio::test]
async fn a_provisioning_session_is_waited_out() {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(300)))
            .await
            .unwrap();
    let mut stack = stack(&emulator);

    let started = Instant::now();
    let init = post(&mut stack, None, INITIALIZE).await.unwrap();
    assert_eq!(init.status, StatusCode::OK);
    assert_eq!(
        init.body["result"]["serverInfo"]["name"], "agentcore-tower-emulator",
        "the answer is the initialize result, not the refusal: {}",
        init.body
    );
    assert!(started.elapsed() >= Duration::from_millis(300));

    let audit = emulator.audit();
    assert!(audit.busy_refusals > 0, "{audit:?}");
    assert_eq!(audit.signature_failures, 0);
    // Every refusal was an attempt the session-busy layer sent again; the last one answered.
    let attempts = init.record.attempts();
    assert_eq!(
        attempts.len() as u64,
        audit.busy_refusals + 1,
        "{}",
        init.record
    );
    assert_eq!(audit.requests, audit.busy_refusals + 1);
    for refused in &attempts[..attempts.len() - 1] {
        assert!(refused.was_sent_again(), "{}", init.record);
    }
    assert_eq!(attempts.last().unwrap().outcome(), &ok_200());
    assert!(!attempts.last().unwrap().was_sent_again());
}

#[tokio::test]
async fn a_throttle_is_waited_out() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut stack = stack(&emulator);
    let session = initialize(&mut stack).await;

    emulator.push_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(1)),
    });
    let started = Instant::now();
    let add = post(&mut stack, Some(&session), ADD).await.unwrap();
    let waited = started.elapsed();

    assert_eq!(add.status, StatusCode::OK);
    assert_eq!(add.body["result"]["content"][0]["text"], "5");
    assert_eq!(
        outcomes(&add.record),
        [
            Outcome::Response {
                status: StatusCode::TOO_MANY_REQUESTS,
                error_type: agentcore_tower::record::ErrorType::Named("ThrottlingException".into()),
            },
            ok_200(),
        ]
    );
    assert!(add.record.attempts()[0].was_sent_again(), "{}", add.record);
    assert!(
        waited >= Duration::from_secs(1),
        "Retry-After: 1 honoured, waited {waited:?}"
    );
    let audit = emulator.audit();
    assert_eq!(audit.throttled, 1);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.signature_failures, 0);
}

#[tokio::test]
async fn a_dropped_counter_call_is_not_sent_again() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut stack = stack(&emulator);
    let session = initialize(&mut stack).await;

    emulator.push_fault(Fault::DropAfterRun);
    let error = match post(&mut stack, Some(&session), COUNTER).await {
        Ok(answer) => panic!(
            "expected an error, got HTTP {}: {}",
            answer.status, answer.body
        ),
        Err(error) => error,
    };

    // The undeclared, non-idempotent tool ran once and was not re-sent.
    assert_eq!(emulator.counter(), 1);
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 1);
    assert_eq!(audit.dropped, 1);
    assert_eq!(audit.requests, 2, "initialize + one counter attempt");
    assert_eq!(error.kind(), ErrorKind::Service);
    let record = error.record().expect("the error carries its record");
    assert_eq!(record.len(), 1, "{record}");
    assert!(!record.attempts()[0].was_sent_again(), "{record}");

    // reqwest's error for the dropped connection is classified as a dropped connection: its
    // chain is reqwest::Error -> hyper_util::client::legacy::Error -> hyper::Error
    // (IncompleteMessage), and `FailureKind::of_error` stops at the hyper error.
    let chain = error_chain(&error);
    let source = error.source().expect("the service's error is the source");
    let reqwest_error = source
        .downcast_ref::<reqwest::Error>()
        .unwrap_or_else(|| panic!("the source is reqwest's error: {chain:#?}"));
    assert!(reqwest_error.is_request(), "{chain:#?}");
    let legacy = reqwest_error
        .source()
        .and_then(|e| e.downcast_ref::<hyper_util::client::legacy::Error>())
        .unwrap_or_else(|| panic!("reqwest wraps hyper-util's error: {chain:#?}"));
    assert!(!legacy.is_connect(), "{chain:#?}");
    let hyper = legacy
        .source()
        .and_then(|e| e.downcast_ref::<hyper::Error>())
        .unwrap_or_else(|| panic!("hyper-util wraps hyper's error: {chain:#?}"));
    assert!(hyper.is_incomplete_message(), "{chain:#?}");
    assert_eq!(
        error.failure_kind(),
        FailureKind::ConnectionDropped,
        "{chain:#?}"
    );
    let attempt = &record.attempts()[0];
    assert_eq!(
        attempt.outcome(),
        &Outcome::Failure(FailureKind::ConnectionDropped),
        "{record}"
    );
    let decisions: Vec<(&str, &Verdict)> = attempt
        .decisions()
        .iter()
        .map(|d| (d.layer(), d.verdict()))
        .collect();
    assert_eq!(
        decisions,
        [(
            "replay_guard",
            &Verdict::Forbidden {
                cause: "connection dropped",
                reason: "tools/call `counter` is not declared replayable".to_owned(),
            }
        )],
        "{record}"
    );
}

/// A timeout of reqwest's own (`ClientBuilder::timeout`) is classified as a timeout: reqwest
/// reports it as `reqwest::Error { kind: Request, source: reqwest::error::TimedOut }`, whose
/// `TimedOut` is a private type, so `FailureKind::of_error` asks `reqwest::Error::is_timeout`
/// (feature `reqwest`). A timeout may come after the tool ran: the undeclared call is not sent
/// again.
#[tokio::test]
async fn a_reqwest_timeout_is_classified_as_timed_out() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let client =
        ReqwestService::with_client(|b| b.no_proxy().timeout(Duration::from_millis(200))).unwrap();
    let mut stack = stack_with(&emulator, client);
    let session = initialize(&mut stack).await;

    emulator.push_fault(Fault::Slow(Duration::from_millis(600)));
    let error = match post(&mut stack, Some(&session), COUNTER).await {
        Ok(answer) => panic!(
            "expected a timeout, got HTTP {}: {}",
            answer.status, answer.body
        ),
        Err(error) => error,
    };
    let chain = error_chain(&error);
    let reqwest_error = error
        .source()
        .and_then(|e| e.downcast_ref::<reqwest::Error>())
        .unwrap_or_else(|| panic!("the source is reqwest's error: {chain:#?}"));
    assert!(reqwest_error.is_timeout(), "{chain:#?}");
    assert!(reqwest_error.is_request(), "{chain:#?}");
    assert_eq!(
        chain.len(),
        3,
        "ours -> reqwest::Error -> TimedOut: {chain:#?}"
    );
    assert_eq!(chain[2], "TimedOut", "{chain:#?}");
    assert_eq!(error.failure_kind(), FailureKind::TimedOut, "{chain:#?}");
    let record = error.record().expect("the error carries its record");
    assert_eq!(record.len(), 1, "{record}");
    assert_eq!(
        record.attempts()[0].outcome(),
        &Outcome::Failure(FailureKind::TimedOut),
        "{record}"
    );
    // The emulator ran the tool before its slow answer; it was not sent again.
    assert_eq!(emulator.counter(), 1);
}

/// One request read off a raw TCP connection: the request line and the header lines.
#[derive(Debug)]
struct Wire {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Accepts connections on `listener`; reads one request from each, answers `200 {}` and closes.
fn raw_server(listener: tokio::net::TcpListener) -> tokio::sync::mpsc::UnboundedReceiver<Wire> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let wire = loop {
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the connection closed mid-request");
                buf.extend_from_slice(&chunk[..n]);
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = std::str::from_utf8(&buf[..end]).unwrap();
                let mut lines = head.split("\r\n");
                let request_line = lines.next().unwrap().to_owned();
                let headers: Vec<(String, String)> = lines
                    .map(|line| {
                        let (name, value) = line.split_once(':').unwrap();
                        (name.to_owned(), value.trim().to_owned())
                    })
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.parse().unwrap());
                if buf.len() >= end + 4 + length {
                    break Wire {
                        request_line,
                        headers,
                        body: buf[end + 4..end + 4 + length].to_vec(),
                    };
                }
            };
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .await
                .unwrap();
            let _ = tx.send(wire);
        }
    });
    rx
}

fn header_list(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

/// `a` minus `b`, as multisets of (lower-case name, value).
fn minus(a: &[(String, String)], b: &[(String, String)]) -> Vec<(String, String)> {
    let mut rest: Vec<(String, String)> = b
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    let mut out = Vec::new();
    for (n, v) in a {
        let item = (n.to_ascii_lowercase(), v.clone());
        match rest.iter().position(|r| *r == item) {
            Some(i) => {
                rest.remove(i);
            }
            None => out.push(item),
        }
    }
    out.sort();
    out
}

fn signed_headers(headers: &HeaderMap) -> Vec<String> {
    let authorization = headers["authorization"].to_str().unwrap();
    let list = authorization
        .split(", ")
        .find_map(|part| part.strip_prefix("SignedHeaders="))
        .expect("SignedHeaders in authorization");
    list.split(';').map(str::to_owned).collect()
}

/// What the signer handed to reqwest goes on the wire unchanged: every header (signed or not)
/// with its value, `host` and `content-length` included, the path, the body. reqwest adds
/// `accept: */*` only when the request has no `accept`, and that header is not signed.
#[tokio::test]
async fn reqwest_sends_the_signed_request_unaltered() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let mut wire = raw_server(listener);

    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn(agentcore_tower_emulator::DEFAULT_RUNTIME_ARN).endpoint(&endpoint),
        aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"),
    )
    .build()
    .unwrap();
    let handed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, HeaderMap)>::new()));
    let mut stack = tower::ServiceBuilder::new()
        .layer(signer)
        .map_request({
            let handed = handed.clone();
            move |request: Request<Full<Bytes>>| {
                handed.lock().unwrap().push((
                    request.uri().path_and_query().unwrap().to_string(),
                    request.headers().clone(),
                ));
                request
            }
        })
        .service(client());

    // With `accept`: nothing added, nothing changed.
    let response = ServiceExt::<Request<Full<Bytes>>>::ready(&mut stack)
        .await
        .unwrap()
        .call(mcp_request(None, ADD))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        "{}"
    );
    let seen = wire.recv().await.unwrap();
    let (path, headers) = handed.lock().unwrap()[0].clone();
    assert_eq!(seen.request_line, format!("POST {path} HTTP/1.1"));
    assert!(
        path.starts_with(
            "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2F"
        ),
        "{path}"
    );
    assert_eq!(seen.body, ADD.as_bytes());
    let handed_list = header_list(&headers);
    assert_eq!(
        minus(&handed_list, &seen.headers),
        [],
        "nothing handed is lost or changed: {seen:#?}"
    );
    assert_eq!(
        minus(&seen.headers, &handed_list),
        [],
        "nothing is added: {seen:#?}"
    );
    let signed = signed_headers(&headers);
    for name in [
        "host",
        "content-length",
        "content-type",
        "accept",
        "x-amz-date",
    ] {
        assert!(
            signed.iter().any(|s| s == name),
            "{name} is signed: {signed:?}"
        );
    }
    assert_eq!(headers["host"], endpoint.trim_start_matches("http://"));
    assert_eq!(headers["content-length"], ADD.len().to_string());

    // Without `accept`: the signer sends the one the MCP contract requires, signed, so reqwest
    // adds none of its own (it would add an unsigned `accept: */*`, which the runtime refuses).
    let request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(ADD.as_bytes())))
        .unwrap();
    let response = ServiceExt::<Request<Full<Bytes>>>::ready(&mut stack)
        .await
        .unwrap()
        .call(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = wire.recv().await.unwrap();
    let (_, headers) = handed.lock().unwrap()[1].clone();
    let handed_list = header_list(&headers);
    assert_eq!(minus(&handed_list, &seen.headers), [], "{seen:#?}");
    assert_eq!(minus(&seen.headers, &handed_list), [], "{seen:#?}");
    assert_eq!(headers["accept"], "application/json, text/event-stream");
    assert!(signed_headers(&headers).iter().any(|s| s == "accept"));
}
