//! SigV4InvokeLayer alone (in-memory) and over hyper-util against a real local server that
//! re-signs what it received.

use crate::common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agentcore_tower::error::ConfigError;
use agentcore_tower::invoke::{ClosableGate, InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{AttemptRecord, ErrorKind, ThrottleRetryLayer, record::Outcome};
use agentcore_tower_emulator::SignatureVerifier;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, future};
use bytes::Bytes;
use common::*;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer as _, ServiceBuilder, ServiceExt};

const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRETKEY";
const TOKEN: &str = "IQoJb3JpZ2luX2VjEJr//////////SESSIONTOKEN+abc/def==";
const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#;

fn creds(key: &str) -> Credentials {
    Credentials::new(key, SECRET_KEY, Some(TOKEN.to_string()), None, "test")
}

fn verifier() -> SignatureVerifier {
    SignatureVerifier::new("us-east-1", "bedrock-agentcore")
        .with_credentials(creds("AKIDONE"))
        .with_credentials(creds("AKIDTWO"))
}

fn mcp_post(body: &'static str) -> Request<Full<Bytes>> {
    Request::post("http://mcp.example/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", "Bearer must-not-travel")
        .header("cookie", "session=must-not-travel")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

fn signature_of(parts: &http::request::Parts) -> String {
    let auth = parts.headers["authorization"].to_str().unwrap();
    auth.rsplit("Signature=").next().unwrap().to_owned()
}

/// What the local server saw of each request, and whether its signature checked out.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Received>>>);

/// A request as the server received it, and its signature check.
type Received = (http::request::Parts, Bytes, Result<(), String>);

impl Seen {
    fn all(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }
}

/// A server that verifies every signature and answers from `answer` (given the attempt number).
async fn verifying_server(
    seen: Seen,
    answer: impl Fn(usize) -> Response<Full<Bytes>> + Send + Sync + 'static,
) -> LocalServer {
    let verifier = verifier();
    serve(move |parts, body| {
        let checked = verifier
            .verify(&parts, &body, SystemTime::now())
            .map_err(|e| e.to_string());
        let n = {
            let mut all = seen.0.lock().unwrap();
            all.push((parts, body, checked.clone()));
            all.len()
        };
        match checked {
            Ok(()) => answer(n),
            Err(message) => Response::builder()
                .status(403)
                .header("x-amzn-errortype", "InvalidSignatureException")
                .body(Full::new(Bytes::from(format!(
                    "{{\"message\":\"{message}\"}}"
                ))))
                .unwrap(),
        }
    })
    .await
}

/// An answer with `status` and `headers`, and no body.
fn bodiless(status: u16, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let mut builder = Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

fn json_ok(body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", "application/json")
        .header("x-amzn-requestid", "req-1")
        .header("set-cookie", "dropped=1")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

fn layer_for(
    server: &LocalServer,
    credentials: impl ProvideCredentials + 'static,
) -> SigV4InvokeLayer {
    SigV4InvokeLayer::builder(
        InvokeTarget::arn(ARN)
            .qualifier("DEFAULT")
            .endpoint(format!("http://{}", server.addr)),
        credentials,
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn a_local_server_re_signs_what_it_received_and_agrees() {
    let seen = Seen::default();
    let server = verifying_server(seen.clone(), |_| {
        json_ok(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#)
    })
    .await;
    let client = ServiceBuilder::new()
        .layer(layer_for(&server, creds("AKIDONE")))
        .service(http_client());
    let response = client.oneshot(mcp_post(CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-amzn-requestid"], "req-1");
    assert!(
        response.headers().get("set-cookie").is_none(),
        "only modelled headers come back"
    );
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);

    let all = seen.all();
    assert_eq!(all.len(), 1);
    let (parts, body, checked) = &all[0];
    assert_eq!(checked, &Ok(()));
    assert_eq!(parts.method, "POST");
    assert_eq!(
        parts.uri.path_and_query().unwrap().as_str(),
        "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations?qualifier=DEFAULT"
    );
    assert_eq!(&body[..], CALL.as_bytes());
    let mut names: Vec<_> = parts.headers.keys().map(|k| k.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "accept",
            "authorization",
            "content-length",
            "content-type",
            "host",
            "mcp-method",
            "mcp-name",
            "mcp-protocol-version",
            "x-amz-date",
            "x-amz-security-token",
            "x-amzn-bedrock-agentcore-runtime-session-id",
        ]
    );
    assert!(
        parts.headers["authorization"].to_str().unwrap().contains(
            "SignedHeaders=accept;content-length;content-type;host;mcp-method;mcp-name;mcp-protocol-version;x-amz-date;x-amz-security-token;x-amzn-bedrock-agentcore-runtime-session-id,"
        ),
        "{:?}",
        parts.headers["authorization"]
    );
}

#[tokio::test]
async fn a_re_sent_attempt_carries_a_new_date_and_signature() {
    let seen = Seen::default();
    let server = verifying_server(seen.clone(), |n| match n {
        1 => bodiless(
            429,
            &[
                ("x-amzn-errortype", "ThrottlingException"),
                ("retry-after", "0"),
            ],
        ),
        _ => json_ok("{}"),
    })
    .await;
    let base = SystemTime::now();
    let tick = Arc::new(AtomicU64::new(0));
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn(ARN).endpoint(format!("http://{}", server.addr)),
        creds("AKIDONE"),
    )
    .clock({
        let tick = tick.clone();
        move || base + Duration::from_secs(tick.fetch_add(1, Ordering::SeqCst))
    })
    .build()
    .unwrap();
    let client = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer(signer)
        .service(http_client());
    let response = client.oneshot(mcp_post(CALL)).await.unwrap();
    assert_eq!(response.status(), 200);
    let all = seen.all();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|(_, _, checked)| checked.is_ok()));
    assert_ne!(
        all[0].0.headers["x-amz-date"],
        all[1].0.headers["x-amz-date"]
    );
    assert_ne!(signature_of(&all[0].0), signature_of(&all[1].0));
    let record = AttemptRecord::of_response(&response).unwrap().attempts();
    assert_eq!(record.len(), 2);
    assert_eq!(
        record[0].outcome(),
        &Outcome::Response {
            status: StatusCode::TOO_MANY_REQUESTS,
            error_type: agentcore_tower::record::ErrorType::Named("ThrottlingException".into())
        }
    );
}

/// Hands out a different key on every resolution, as a rotating provider would.
#[derive(Debug)]
struct Rotating(AtomicUsize);

impl ProvideCredentials for Rotating {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(creds(if n == 0 { "AKIDONE" } else { "AKIDTWO" })))
    }
}

#[tokio::test]
async fn credentials_rotated_between_attempts_are_used() {
    let seen = Seen::default();
    let server = verifying_server(seen.clone(), |n| match n {
        1 => bodiless(429, &[("retry-after", "0")]),
        _ => json_ok("{}"),
    })
    .await;
    let client = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer(layer_for(&server, Rotating(AtomicUsize::new(0))))
        .service(http_client());
    assert_eq!(client.oneshot(mcp_post(CALL)).await.unwrap().status(), 200);
    let keys: Vec<_> = seen
        .all()
        .iter()
        .map(|(p, _, c)| (SignatureVerifier::access_key_of(p).unwrap(), c.is_ok()))
        .collect();
    assert_eq!(
        keys,
        [("AKIDONE".to_string(), true), ("AKIDTWO".to_string(), true)]
    );
}

/// An in-memory inner service that records what it was sent.
type Sent = Arc<Mutex<Vec<Request<Full<Bytes>>>>>;

fn recording_inner() -> (
    Sent,
    impl tower::Service<
        Request<Full<Bytes>>,
        Response = Response<Full<Bytes>>,
        Error = BoxError,
        Future = impl Send,
    > + Clone,
) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let svc = tower::service_fn({
        let sent = sent.clone();
        move |request: Request<Full<Bytes>>| {
            sent.lock().unwrap().push(request);
            async { Ok::<_, BoxError>(Response::new(Full::new(Bytes::from_static(b"{}")))) }
        }
    });
    (sent, svc)
}

fn in_memory_layer() -> SigV4InvokeLayer {
    SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("AKIDONE"))
        .build()
        .unwrap()
}

#[tokio::test]
async fn get_and_delete_are_answered_405_without_calling_the_service() {
    let (sent, inner) = recording_inner();
    let svc = in_memory_layer().layer(inner);
    for method in ["GET", "DELETE", "PUT", "PATCH", "HEAD"] {
        let request = Request::builder()
            .method(method)
            .uri("http://mcp.example/mcp")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = svc.clone().oneshot(request).await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}"
        );
        assert_eq!(response.headers()["allow"], "POST");
        let record = AttemptRecord::of_response(&response).unwrap().attempts();
        assert_eq!(
            record[0].outcome(),
            &Outcome::NotSent(format!(
                "{method} answered here with 405: InvokeAgentRuntime carries POST only"
            ))
        );
        assert_eq!(read_all(response.into_body()).await.0.len(), 0);
    }
    assert!(sent.lock().unwrap().is_empty());
}

#[tokio::test]
async fn delete_becomes_stop_runtime_session_when_asked() {
    let (sent, inner) = recording_inner();
    let layer =
        SigV4InvokeLayer::builder(InvokeTarget::arn(ARN).qualifier("prod"), creds("AKIDONE"))
            .runtime_session_id("sess-0123456789abcdef0123456789abcdef")
            .stop_session_on_delete(true)
            .build()
            .unwrap();
    let svc = tower::Layer::layer(&layer, inner);
    let request = Request::delete("http://mcp.example/mcp")
        .header("mcp-session-id", "m-1")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let stop = sent.lock().unwrap().remove(0);
    let stop = &stop;
    assert_eq!(stop.method(), "POST");
    assert_eq!(
        stop.uri().to_string(),
        "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/stopruntimesession?qualifier=prod"
    );
    assert_eq!(
        stop.headers()["x-amzn-bedrock-agentcore-runtime-session-id"],
        "sess-0123456789abcdef0123456789abcdef"
    );
    assert_eq!(stop.headers()["content-type"], "application/json");
    assert!(stop.headers().get("mcp-session-id").is_none());
    let body = read_all(stop.body().clone()).await.0;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let token = json["clientToken"].as_str().unwrap();
    assert_eq!(token.len(), 36);
    let (parts, _) = clone_parts(stop);
    verifier().verify(&parts, &body, SystemTime::now()).unwrap();
}

fn clone_parts(request: &Request<Full<Bytes>>) -> (http::request::Parts, ()) {
    let mut copy = Request::builder()
        .method(request.method())
        .uri(request.uri().clone());
    for (k, v) in request.headers() {
        copy = copy.header(k, v);
    }
    copy.body(()).unwrap().into_parts()
}

#[tokio::test]
async fn an_oversize_body_is_refused_before_anything_is_sent() {
    let (sent, inner) = recording_inner();
    let svc = in_memory_layer().layer(inner);
    // 101 frames of the same 1 MB: the bytes are shared, the count is what matters.
    let mb = Bytes::from(vec![b' '; 1_000_000]);
    let frames: Vec<Result<http_body::Frame<Bytes>, BoxError>> = (0..101)
        .map(|_| Ok(http_body::Frame::data(mb.clone())))
        .collect();
    let body = ScriptedBody::new(frames);
    let probe = body.probe();
    let request = Request::post("http://mcp.example/mcp").body(body).unwrap();
    let error = svc.oneshot(request).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::BodyTooLarge);
    assert_eq!(
        error.to_string(),
        "the request body is larger than InvokeAgentRuntime accepts (100000000 bytes) (after 1 attempt)"
    );
    assert_eq!(
        probe.polls(),
        101,
        "stopped as soon as the limit was passed"
    );
    assert!(sent.lock().unwrap().is_empty());
    let record = error.record().unwrap().attempts();
    assert!(matches!(record[0].outcome(), Outcome::NotSent(_)));

    // Exactly the limit is fine.
    let (sent, inner) = recording_inner();
    let svc = in_memory_layer().layer(inner);
    let frames: Vec<Result<http_body::Frame<Bytes>, BoxError>> = (0..100)
        .map(|_| Ok(http_body::Frame::data(mb.clone())))
        .collect();
    let request = Request::post("http://mcp.example/mcp")
        .body(ScriptedBody::new(frames))
        .unwrap();
    svc.oneshot(request).await.unwrap();
    assert_eq!(
        sent.lock().unwrap()[0].headers()["content-length"],
        "100000000"
    );
}

#[tokio::test]
async fn bad_settings_are_refused_when_the_layer_is_built() {
    let build =
        |b: agentcore_tower::invoke::SigV4InvokeLayerBuilder| b.build().map(|_| ()).unwrap_err();
    assert_eq!(
        build(
            SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("A"))
                .runtime_session_id("too-short")
        ),
        ConfigError::InvalidRuntimeSessionId { length: 9 }
    );
    assert_eq!(
        build(
            SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("A"))
                .runtime_session_id("x".repeat(257))
        ),
        ConfigError::InvalidRuntimeSessionId { length: 257 }
    );
    assert_eq!(
        build(SigV4InvokeLayer::builder(InvokeTarget::arn(""), creds("A"))),
        ConfigError::EmptyRuntimeArn
    );
    assert_eq!(
        build(SigV4InvokeLayer::builder(
            InvokeTarget::arn(ARN).endpoint("localhost:1"),
            creds("A")
        ))
        .to_string(),
        "the endpoint `localhost:1` cannot be used: no scheme (http:// or https://)"
    );
    assert_eq!(
        build(SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("A")).runtime_user_id("")),
        ConfigError::InvalidRuntimeUserId { length: 0 }
    );
}

#[tokio::test]
async fn one_runtime_session_per_layer_adopting_the_services_id() {
    let (sent, inner) = recording_inner();
    let layer = in_memory_layer();
    let generated = layer.runtime_session_id();
    assert_eq!(generated.len(), 36, "a UUID v4");
    let a = tower::Layer::layer(&layer, inner.clone());
    let b = tower::Layer::layer(&layer.clone(), inner);
    a.oneshot(mcp_post(CALL)).await.unwrap();
    b.clone().oneshot(mcp_post(CALL)).await.unwrap();
    // The request's own id wins for that request.
    let mut own = mcp_post(CALL);
    own.headers_mut().insert(
        "x-amzn-bedrock-agentcore-runtime-session-id",
        "mine-0123456789abcdef0123456789abcdef".parse().unwrap(),
    );
    b.clone().oneshot(own).await.unwrap();
    let ids: Vec<_> = sent
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            r.headers()["x-amzn-bedrock-agentcore-runtime-session-id"]
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        ids,
        [
            generated.clone(),
            generated.clone(),
            "mine-0123456789abcdef0123456789abcdef".to_string()
        ]
    );

    // An id the service returns is used from then on.
    let returned = "svc-0123456789abcdef0123456789abcdef99";
    let inner = tower::service_fn(move |_r: Request<Full<Bytes>>| async move {
        Ok::<_, BoxError>(
            Response::builder()
                .header("x-amzn-bedrock-agentcore-runtime-session-id", returned)
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
    });
    let svc = tower::Layer::layer(&layer, inner);
    let response = svc.oneshot(mcp_post(CALL)).await.unwrap();
    assert_eq!(
        response.headers()["x-amzn-bedrock-agentcore-runtime-session-id"],
        returned
    );
    assert_eq!(layer.runtime_session_id(), returned);
}

#[tokio::test]
async fn a_closed_send_gate_stops_the_attempt_after_signing() {
    let (sent, inner) = recording_inner();
    let svc = in_memory_layer().layer(inner);
    let gate = ClosableGate::new();
    let mut request = mcp_post(CALL);
    request.extensions_mut().insert(gate.shared());
    svc.clone().oneshot(request).await.unwrap();
    assert_eq!(sent.lock().unwrap().len(), 1);
    gate.close("the MCP client was closed");
    let mut request = mcp_post(CALL);
    request.extensions_mut().insert(gate.shared());
    let error = svc.oneshot(request).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::SendGateClosed);
    assert_eq!(
        error.to_string(),
        "the send gate refused the request; nothing was sent: the MCP client was closed (after 1 attempt)"
    );
    assert_eq!(sent.lock().unwrap().len(), 1, "nothing more was sent");
    assert_eq!(
        error.record().unwrap().attempts()[0].outcome(),
        &Outcome::NotSent(
            "the send gate refused the request; nothing was sent: the MCP client was closed".into()
        )
    );
}

/// Fails once, then recovers.
#[derive(Debug)]
struct Flaky(AtomicUsize);

impl ProvideCredentials for Flaky {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            future::ProvideCredentials::ready(Err(CredentialsError::provider_error(
                "the STS endpoint did not answer",
            )))
        } else {
            future::ProvideCredentials::ready(Ok(creds("AKIDONE")))
        }
    }
}

#[tokio::test]
async fn a_failing_credentials_provider_gives_a_clear_error_then_recovers() {
    let (sent, inner) = recording_inner();
    let layer = SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), Flaky(AtomicUsize::new(0)))
        .build()
        .unwrap();
    let svc = tower::Layer::layer(&layer, inner);
    let error = svc.clone().oneshot(mcp_post(CALL)).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Credentials);
    assert_eq!(
        error.to_string(),
        "could not resolve AWS credentials: an error occurred while loading credentials: the STS endpoint did not answer (after 1 attempt)"
    );
    assert!(sent.lock().unwrap().is_empty());
    svc.oneshot(mcp_post(CALL)).await.unwrap();
    assert_eq!(sent.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn headers_outside_the_models_limits_are_refused_not_sent() {
    let (sent, inner) = recording_inner();
    let svc = in_memory_layer().layer(inner);
    let mut request = mcp_post(CALL);
    request
        .headers_mut()
        .insert("mcp-session-id", "x".repeat(2000).parse().unwrap());
    let error = svc.oneshot(request).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidRequest);
    assert!(
        error.to_string().contains(
            "the header `mcp-session-id` is 2000 characters; the service accepts 1 to 1024"
        )
    );
    assert!(sent.lock().unwrap().is_empty());
}

#[tokio::test]
async fn no_secret_reaches_logs_errors_debug_or_the_body_of_a_hostile_echo() {
    let logs = Logs::capture();

    // Echoes the whole request — head and body — into a 403 body and into headers.
    let seen = Seen::default();
    let server = serve({
        let seen = seen.clone();
        move |parts, body| {
            let mut echo = format!("{} {}\n", parts.method, parts.uri);
            for (k, v) in &parts.headers {
                echo.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
            }
            echo.push_str(&String::from_utf8_lossy(&body));
            let auth = parts.headers["authorization"].to_str().unwrap().to_owned();
            seen.0.lock().unwrap().push((parts, body, Ok(())));
            Response::builder()
                .status(403)
                .header("x-amzn-errortype", "InvalidSignatureException")
                .header("mcp-session-id", auth)
                .header("x-amzn-requestid", TOKEN)
                .body(Full::new(Bytes::from(echo)))
                .unwrap()
        }
    })
    .await;
    let layer = layer_for(&server, creds("AKIDONE"));
    // The Debug of every public type that holds or meets credentials or requests.
    let builder = SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("AKIDONE"))
        .runtime_user_id("user-1");
    let emulator = agentcore_tower_emulator::Emulator::start(
        agentcore_tower_emulator::EmulatorConfig::default().credentials([creds("AKIDONE")]),
    )
    .await
    .unwrap();
    let gate = ClosableGate::new();
    let mut debug_of_layer = format!(
        "{layer:?} {builder:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {emulator:?} {gate:?} {:?}",
        tower::Layer::layer(&layer, http_client()),
        InvokeTarget::arn(ARN),
        layer.target(),
        verifier(),
        agentcore_tower::ReplayGuardLayer::new().idempotent_tools(["a"]),
        agentcore_tower::ThrottleRetryLayer::new(),
        agentcore_tower::SessionBusyRetryLayer::new(),
        agentcore_tower_emulator::EmulatorConfig::default().credentials([creds("AKIDONE")]),
        agentcore_tower::AttemptRecord::new(),
        agentcore_tower::retry::Backoff::default(),
        gate.shared(),
    );
    let call = tower::Layer::layer(&layer, http_client()).oneshot(mcp_post(CALL));
    debug_of_layer.push_str(&format!("{call:?}"));
    drop(call);
    let client = ServiceBuilder::new()
        .layer(agentcore_tower::ReplayGuardLayer::new())
        .layer(ThrottleRetryLayer::new())
        .layer(agentcore_tower::SessionBusyRetryLayer::new())
        .layer(layer)
        .service(http_client());
    let response = client.clone().oneshot(mcp_post(CALL)).await.unwrap();
    assert_eq!(response.status(), 403);
    let headers = format!("{:?}", response.headers());
    let record = format!(
        "{:?} {}",
        AttemptRecord::of_response(&response).unwrap(),
        AttemptRecord::of_response(&response).unwrap()
    );
    let (body, _) = read_all(response.into_body()).await;
    let body = String::from_utf8(body.to_vec()).unwrap();

    // A failing call too: its error, Display and Debug, with the source chain.
    let failing = SigV4InvokeLayer::builder(
        InvokeTarget::arn(ARN).endpoint("http://127.0.0.1:9"),
        creds("AKIDONE"),
    )
    .build()
    .unwrap();
    let error = ServiceBuilder::new()
        .layer(failing)
        .service(http_client())
        .oneshot(mcp_post(CALL))
        .await
        .unwrap_err();
    let mut errors = format!("{error} {error:?}");
    let mut source = std::error::Error::source(&error);
    while let Some(s) = source {
        errors.push_str(&format!(" {s} {s:?}"));
        source = s.source();
    }

    let sent = seen.all();
    let signature = signature_of(&sent[0].0);
    assert!(body.contains("x-amz-date"), "the echo is there: {body}");
    assert!(body.contains("[redacted]"), "{body}");
    let logs = logs.text();
    for (what, text) in [
        ("body", &body),
        ("headers", &headers),
        ("record", &record),
        ("logs", &logs),
        ("errors", &errors),
        ("debug", &debug_of_layer),
    ] {
        for secret in [SECRET_KEY, TOKEN, signature.as_str()] {
            assert!(!text.contains(secret), "{what} leaks a secret: {text}");
        }
    }
    assert!(!logs.is_empty(), "TRACE logging was on");
}

/// The re-send after expired credentials carries the extensions the first attempt did: an
/// app's value, and the call's record (kept without a copy when they are all there is).
#[tokio::test]
async fn a_freshly_signed_resend_carries_the_extensions_of_the_first() {
    #[derive(Clone, Debug, PartialEq)]
    struct AppMark(u32);
    for app_value in [true, false] {
        let seen: Arc<Mutex<Vec<http::Extensions>>> = Arc::default();
        let inner = tower::service_fn({
            let seen = seen.clone();
            move |request: Request<Full<Bytes>>| {
                let seen = seen.clone();
                async move {
                    let first = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(request.extensions().clone());
                        seen.len() == 1
                    };
                    let response = if first {
                        bodiless(403, &[("x-amzn-errortype", "ExpiredTokenException")])
                    } else {
                        json_ok(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#)
                    };
                    Ok::<_, std::convert::Infallible>(response)
                }
            }
        });
        let signer = SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), creds("AKIDONE"))
            .build()
            .unwrap()
            .layer(inner);
        let mut request = mcp_post(CALL);
        if app_value {
            request.extensions_mut().insert(AppMark(9));
        }
        let response = signer.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let record = AttemptRecord::of_response(&response).unwrap();
        assert_eq!(record.len(), 2, "{record}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        for extensions in seen.iter() {
            let want = app_value.then_some(AppMark(9));
            assert_eq!(extensions.get::<AppMark>(), want.as_ref());
            assert_eq!(AttemptRecord::of_extensions(extensions).unwrap().len(), 2);
        }
    }
}
