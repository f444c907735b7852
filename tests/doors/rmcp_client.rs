//! rmcp's client over this crate's tower stack, against the emulator; and
//! `agentcore_tower::rmcp::TowerClient` on its own, against scripted HTTP answers.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::audit::one_runtime_session;
use crate::common::{Answerer, BoxError, answer_or_forward, http_client};
use crate::records::{Records, add, exchanges, serve_client, session_exchanges, tap_into, text_of};
use agentcore_tower::rmcp::{Exchange, RecordTap, TowerClient, TowerClientError};
use agentcore_tower::{
    AttemptRecord, RecommendedLayers, ReplayGuardLayer, recommended_layers,
    record::{Outcome, Verdict},
};
use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig, Fault, RetryAfter};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientJsonRpcMessage, Implementation,
    JsonRpcMessage, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp::{ClientLifecycleMode, ClientServiceExt as _, RoleClient};
use tower::ServiceExt as _;

type Client = RunningService<RoleClient, ClientConfig>;

// ---------------------------------------------------------------------------------------------
// rmcp over the full stack, against the emulator
// ---------------------------------------------------------------------------------------------

/// rmcp's client over `RecordTap` → ReplayGuard → Throttle → SessionBusy → SigV4 → hyper-util,
/// initialised against `emulator`.
async fn connect(emulator: &Emulator) -> Result<(Client, Records), BoxError> {
    connect_forgetful(emulator, Arc::default()).await
}

/// The same, the emulator standing for an MCP server that forgets the MCP sessions put in
/// `sessions.forgotten` (see [`forgetful`]).
async fn connect_forgetful(
    emulator: &Emulator,
    sessions: Arc<Mutex<McpSessions>>,
) -> Result<(Client, Records), BoxError> {
    connect_through(
        emulator.signer().build()?,
        answer_or_forward(forgetful(sessions)),
        "http://agentcore.invalid/mcp",
    )
    .await
}

/// rmcp's client at 2025-06-18 over `RecordTap` → the recommended layers (`add` declared
/// idempotent) → `signer` → `http`, posting to `uri`, initialised; with the records tapped.
async fn connect_through<Signer, Http>(
    signer: Signer,
    http: Http,
    uri: impl Into<Arc<str>>,
) -> Result<(Client, Records), BoxError>
where
    RecommendedLayers<Signer>: tower::Layer<Http>,
    TowerClient<RecordTap<<RecommendedLayers<Signer> as tower::Layer<Http>>::Service>>:
        StreamableHttpClient + Send + Sync + 'static,
{
    let records = Records::default();
    let stack = tower::ServiceBuilder::new()
        .layer(tap_into(&records))
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer,
        ))
        .service(http);
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("rmcp-client-test", "0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_06_18);
    let client = config
        .serve(TowerClient::new(stack).into_transport(uri))
        .await?;
    Ok((client, records))
}

/// The records of every exchange for `rpc_method` (and `tool`), in the order they ended.
fn records_of(
    records: &Records,
    rpc_method: &str,
    tool: Option<&str>,
) -> Vec<(Exchange, AttemptRecord)> {
    records
        .lock()
        .unwrap()
        .iter()
        .filter(|(e, _)| e.rpc_method.as_deref() == Some(rpc_method) && e.tool.as_deref() == tool)
        .cloned()
        .collect()
}

/// The record of the one exchange for `rpc_method` (and `tool`); fails when there is not
/// exactly one.
fn record_of(records: &Records, rpc_method: &str, tool: Option<&str>) -> AttemptRecord {
    let matching = records_of(records, rpc_method, tool);
    assert_eq!(
        matching.len(),
        1,
        "exchanges for {rpc_method} {tool:?}: {:?}",
        records.lock().unwrap()
    );
    let record = matching[0].1.clone();
    assert!(
        !record.is_empty(),
        "{rpc_method} {tool:?} came back without an attempt"
    );
    record
}

fn response(status: u16, error_type: Option<&str>) -> Outcome {
    Outcome::Response {
        status: StatusCode::from_u16(status).unwrap(),
        error_type: error_type.map_or(agentcore_tower::record::ErrorType::Absent, |t| {
            agentcore_tower::record::ErrorType::Named(t.to_owned())
        }),
    }
}

#[tokio::test]
async fn tools_list_returns_the_emulators_three_tools() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records) = connect(&emulator).await?;

    let tools = client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(names, ["add", "echo", "counter"]);
    let idempotent: Vec<Option<bool>> = tools
        .iter()
        .map(|t| t.annotations.as_ref().and_then(|a| a.idempotent_hint))
        .collect();
    assert_eq!(idempotent, [Some(true), None, Some(false)]);

    let server = client.peer_info().expect("initialised");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2025_06_18);
    assert_eq!(
        server.server_info.as_ref().map(|i| i.name.as_str()),
        Some("agentcore-tower-emulator")
    );
    let list = record_of(&records, "tools/list", None).attempts();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].outcome(), &response(200, None));

    client.cancel().await?;
    let audit = emulator.audit();
    assert_eq!(audit.busy_refusals, 0);
    assert_eq!(audit.signature_failures, 0);
    // initialize, notifications/initialized, tools/list: the GET and the DELETE rmcp sent were
    // answered 405 by SigV4InvokeLayer itself.
    assert_eq!(audit.requests, 3);
    // Every exchange rmcp made, once each (the GET runs concurrently: compare as a set).
    assert_eq!(exchanges(&records), session_exchanges(&["POST tools/list"]));
    Ok(())
}

#[tokio::test]
async fn add_of_2_and_3_returns_5() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records) = connect(&emulator).await?;

    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    assert_eq!(result.is_error, Some(false));

    let attempts = record_of(&records, "tools/call", Some("add")).attempts();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome(), &response(200, None));
    assert!(!attempts[0].was_sent_again());
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn provisioning_refusals_are_retried_below_rmcp() -> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(300))).await?;
    let (client, records) = connect(&emulator).await?;
    let tools = client.list_all_tools().await?;
    assert_eq!(tools.len(), 3);
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);

    let audit = emulator.audit();
    assert!(
        audit.busy_refusals > 0,
        "the session should have refused while provisioning"
    );
    assert_eq!(audit.sessions_started, 1);
    // Every refusal was for `initialize` (the first request, sent while the session
    // provisioned), re-sent by SessionBusyRetryLayer: rmcp sent `initialize` once.
    let initialize = record_of(&records, "initialize", None).attempts();
    assert_eq!(initialize.len() as u64, audit.busy_refusals + 1);
    let (last, refused) = initialize.split_last().unwrap();
    for attempt in refused {
        assert_eq!(attempt.outcome(), &response(200, None), "{attempt}");
        assert!(attempt.was_sent_again(), "{attempt}");
        assert_eq!(attempt.decisions()[0].layer(), "session_busy", "{attempt}");
    }
    assert_eq!(last.outcome(), &response(200, None));
    assert!(!last.was_sent_again());
    // Nothing after it was refused.
    assert_eq!(record_of(&records, "tools/list", None).len(), 1);
    assert_eq!(record_of(&records, "tools/call", Some("add")).len(), 1);
    assert_eq!(audit.executions_of("add"), 1);
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn a_throttled_tools_call_is_retried_below_rmcp() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records) = connect(&emulator).await?;

    emulator.push_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(0)),
    });
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    assert_eq!(emulator.audit().throttled, 1);
    assert_eq!(emulator.audit().executions_of("add"), 1);
    let attempts = record_of(&records, "tools/call", Some("add")).attempts();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        attempts[0].outcome(),
        &response(429, Some("ThrottlingException"))
    );
    assert!(attempts[0].was_sent_again());
    assert_eq!(attempts[1].outcome(), &response(200, None));

    // A 429 ran nothing, so even the non-idempotent `counter` is sent again, and runs once.
    emulator.push_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(0)),
    });
    let result = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    assert_eq!(text_of(&result), ["1"]);
    assert_eq!(emulator.audit().throttled, 2);
    assert_eq!(emulator.audit().executions_of("counter"), 1);
    assert_eq!(emulator.counter(), 1);
    assert_eq!(record_of(&records, "tools/call", Some("counter")).len(), 2);
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn sse_answers_reach_rmcp() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().sse(true)).await?;
    let (client, _records) = connect(&emulator).await?;
    assert_eq!(client.list_all_tools().await?.len(), 3);
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    client.cancel().await?;
    Ok(())
}

/// The MCP sessions a [`forgetful`] server knew, and the ones it forgot.
#[derive(Default)]
struct McpSessions {
    seen: HashSet<String>,
    forgotten: HashSet<String>,
}

/// What an MCP server which forgets its MCP sessions when told (it restarted) answers itself,
/// below the signer and in front of the emulator ([`answer_or_forward`]): HTTP 404 to a request
/// that carries a forgotten `Mcp-Session-Id`, as the Streamable HTTP transport requires, without
/// `x-amzn-errortype` (the MCP server's answer, not AgentCore's), sent nowhere: the request runs
/// nowhere. Every other request goes to the emulator.
fn forgetful(sessions: Arc<Mutex<McpSessions>>) -> impl Answerer {
    move |request: &Request<Full<Bytes>>| {
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)?;
        let mut sessions = sessions.lock().unwrap();
        if sessions.forgotten.contains(&session) {
            // As the TypeScript SDK's server answers an unknown session.
            let body = r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#;
            return Some(
                Response::builder()
                    .status(404)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .unwrap(),
            );
        }
        sessions.seen.insert(session);
        None
    }
}

#[tokio::test]
async fn an_expired_mcp_session_is_opened_again_and_the_call_runs_once() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let sessions = Arc::new(Mutex::new(McpSessions::default()));
    let (client, records) = connect_forgetful(&emulator, sessions.clone()).await?;
    let first_session = {
        let mut sessions = sessions.lock().unwrap();
        let seen: Vec<String> = sessions.seen.drain().collect();
        assert_eq!(seen.len(), 1, "one MCP session so far: {seen:?}");
        sessions.forgotten.extend(seen.iter().cloned());
        seen[0].clone()
    };

    // The server forgot the session: the first POST of `counter` (not idempotent) is answered
    // 404; rmcp opens a new session and sends the request once more — a new call.
    let result = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    assert_eq!(text_of(&result), ["1"]);

    let audit = emulator.audit();
    assert_eq!(
        audit.executions_of("counter"),
        1,
        "the tool ran exactly once"
    );
    assert_eq!(emulator.counter(), 1);
    let received = |method: &str| -> Vec<Option<String>> {
        audit
            .received
            .iter()
            .filter(|r| r.method.as_deref() == Some(method))
            .map(|r| r.mcp_session_id.clone())
            .collect()
    };
    // Two `initialize`s reached the server, neither with a session; the `tools/call` it
    // received carried the new session: the 404'd one never reached it.
    assert_eq!(received("initialize"), [None, None]);
    let calls = received("tools/call");
    assert_eq!(calls.len(), 1);
    let second_session = calls[0].clone().expect("the re-send carries a session");
    assert_ne!(second_session, first_session);
    assert_eq!(
        received("notifications/initialized"),
        [Some(first_session), Some(second_session)]
    );

    // Both calls, each with its own record: one attempt each, the 404 delivered as it came.
    let calls = records_of(&records, "tools/call", Some("counter"));
    assert_eq!(calls.len(), 2, "{calls:?}");
    let ((expired, expired_record), (resent, resent_record)) = (&calls[0], &calls[1]);
    assert_eq!(
        expired.request_id, resent.request_id,
        "the same JSON-RPC request"
    );
    assert!(expired.request_id.is_some());
    let attempts = expired_record.attempts();
    assert_eq!(attempts.len(), 1, "{expired_record}");
    assert!(
        matches!(attempts[0].outcome(), Outcome::Response { status, .. } if *status == 404),
        "{expired_record}"
    );
    assert!(!attempts[0].was_sent_again(), "{expired_record}");
    assert_eq!(
        expired_record.to_string(),
        "#1 HTTP 404 -> replay_guard: delivered; effect unknown"
    );
    assert!(
        attempts[0]
            .decisions()
            .iter()
            .all(|d| d.verdict().is_delivered()),
        "{expired_record}"
    );
    let attempts = resent_record.attempts();
    assert_eq!(attempts.len(), 1, "{resent_record}");
    assert_eq!(attempts[0].outcome(), &response(200, None));
    assert_eq!(
        resent_record.to_string(),
        "#1 HTTP 200 -> replay_guard: delivered; effect unknown"
    );
    assert_eq!(records_of(&records, "initialize", None).len(), 2);

    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn a_call_dropped_by_a_deadline_still_reaches_the_tap() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    emulator.push_fault(Fault::Slow(Duration::from_secs(3600)));
    let seen = Records::default();
    // The deadline outside the tap: the tap's call is dropped, not failed.
    let stack = tower::ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(
            300,
        )))
        .layer(tap_into(&seen))
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build()?,
        ))
        .service(http_client());
    // The app's own record, which the tap hands over.
    let own = AttemptRecord::new();
    let mut request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"counter","arguments":{}}}"#,
        )))?;
    request.extensions_mut().insert(own.clone());
    let error = stack.oneshot(request).await.unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>(), "{error}");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "handed over once");
    let (exchange, record) = &seen[0];
    assert_eq!(exchange.to_string(), "POST tools/call counter");
    assert_eq!(
        exchange.request_id,
        Some(rmcp::model::NumberOrString::String("c-1".into()))
    );
    assert_eq!(record.to_string(), own.to_string(), "the app's own record");
    assert_eq!(
        record.to_string(),
        "#1 sent, no answer yet -> replay_guard: call dropped before it ended (a deadline or cancellation outside); effect unknown"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// TowerClient alone, against scripted answers
// ---------------------------------------------------------------------------------------------

/// The requests a scripted service received.
type Seen = Arc<Mutex<Vec<Request<Full<Bytes>>>>>;

/// A client whose service answers every request with `status`, `headers` and `body`.
fn scripted(
    status: u16,
    headers: &'static [(&'static str, &'static str)],
    body: &'static [u8],
) -> (impl StreamableHttpClient<Error = TowerClientError>, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let service = tower::service_fn(move |request: Request<Full<Bytes>>| {
        log.lock().unwrap().push(request);
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(*name, *value);
        }
        let response = response.body(Full::new(Bytes::from_static(body)));
        async move { response }
    });
    (TowerClient::new(service), seen)
}

fn message(json: &str) -> ClientJsonRpcMessage {
    serde_json::from_str(json).expect("a client JSON-RPC message")
}

fn tools_list() -> ClientJsonRpcMessage {
    message(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#)
}

fn initialized() -> ClientJsonRpcMessage {
    message(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
}

async fn post<C: StreamableHttpClient<Error = TowerClientError>>(
    client: &C,
    message: ClientJsonRpcMessage,
    session: Option<&str>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<TowerClientError>> {
    post_with(client, message, session, None, HashMap::new()).await
}

/// `message` posted as rmcp posts it, with the bearer token `auth` and the `custom` headers
/// rmcp's caller adds.
async fn post_with<C: StreamableHttpClient<Error = TowerClientError>>(
    client: &C,
    message: ClientJsonRpcMessage,
    session: Option<&str>,
    auth: Option<&str>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<TowerClientError>> {
    client
        .post_message(
            "http://mcp.invalid/mcp".into(),
            message,
            session.map(Into::into),
            auth.map(str::to_owned),
            custom,
        )
        .await
}

#[tokio::test]
async fn a_post_carries_the_message_and_the_mcp_headers() {
    let (client, seen) = scripted(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "s-2"),
        ],
        br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#,
    );
    let custom = HashMap::from([(
        HeaderName::from_static("mcp-protocol-version"),
        HeaderValue::from_static("2025-06-18"),
    )]);
    let answer = post_with(&client, tools_list(), Some("s-1"), Some("token"), custom)
        .await
        .unwrap();
    let StreamableHttpPostResponse::Json(JsonRpcMessage::Response(reply), session) = answer else {
        panic!("expected a JSON response, got {answer:?}");
    };
    assert_eq!(session.as_deref(), Some("s-2"));
    assert_eq!(reply.id, rmcp::model::NumberOrString::Number(7));

    let request = seen.lock().unwrap().remove(0);
    assert_eq!(request.method(), "POST");
    assert_eq!(request.uri(), "http://mcp.invalid/mcp");
    let header = |name: &str| request.headers()[name].to_str().unwrap();
    assert_eq!(header("accept"), "application/json, text/event-stream");
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("mcp-session-id"), "s-1");
    assert_eq!(header("mcp-protocol-version"), "2025-06-18");
    assert_eq!(header("authorization"), "Bearer token");
    let body = http_body_util::BodyExt::collect(request.into_body())
        .await
        .unwrap()
        .to_bytes();
    // The message exactly as rmcp serializes it.
    assert_eq!(body, serde_json::to_vec(&tools_list()).unwrap());
}

#[tokio::test]
async fn a_reserved_custom_header_is_refused_before_sending() {
    let (client, seen) = scripted(202, &[], b"");
    let custom = HashMap::from([(
        HeaderName::from_static("mcp-session-id"),
        HeaderValue::from_static("smuggled"),
    )]);
    let result = post_with(&client, tools_list(), None, None, custom).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::ReservedHeaderConflict(name)) if name == "mcp-session-id"),
        "{result:?}"
    );
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn accepted_answers() {
    for status in [202, 204] {
        let (client, _) = scripted(status, &[], b"");
        let answer = post(&client, initialized(), Some("s")).await.unwrap();
        assert!(
            matches!(answer, StreamableHttpPostResponse::Accepted),
            "{status}: {answer:?}"
        );
    }
    // An empty 200 to a notification is taken as received, too.
    let (client, _) = scripted(200, &[("content-length", "0")], b"");
    let answer = post(&client, initialized(), None).await.unwrap();
    assert!(matches!(answer, StreamableHttpPostResponse::Accepted));
}

#[tokio::test]
async fn a_404_with_a_session_is_an_expired_session_unless_aws_says_otherwise() {
    let (client, _) = scripted(404, &[], b"");
    let result = post(&client, tools_list(), Some("s")).await;
    assert!(
        matches!(result, Err(StreamableHttpError::SessionExpired)),
        "{result:?}"
    );

    // Without a session it is just an unexpected answer.
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::UnexpectedServerResponse(m)) if m == "HTTP 404: <empty body>"),
        "{result:?}"
    );

    // AWS's own 404 (the runtime does not exist) must not make rmcp re-initialise.
    let (client, _) = scripted(
        404,
        &[
            ("content-type", "application/json"),
            (
                "x-amzn-errortype",
                "ResourceNotFoundException:http://internal.amazon.com/",
            ),
        ],
        br#"{"message":"No runtime"}"#,
    );
    let result = post(&client, tools_list(), Some("s")).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::UnexpectedServerResponse(m))
            if m == r#"HTTP 404 ResourceNotFoundException: {"message":"No runtime"}"#),
        "{result:?}"
    );
}

#[tokio::test]
async fn throttles_and_server_failures_keep_status_and_retry_after() {
    let (client, _) = scripted(
        429,
        &[
            ("retry-after", "7"),
            ("content-type", "application/json"),
            ("x-amzn-errortype", "ThrottlingException"),
        ],
        br#"{"message":"Rate exceeded"}"#,
    );
    let result = post(&client, tools_list(), Some("s")).await;
    let Err(StreamableHttpError::HttpStatus(status)) = result else {
        panic!("expected HttpStatus, got {result:?}");
    };
    assert_eq!(
        (status.status, status.retry_after.as_deref()),
        (429, Some("7"))
    );

    let (client, _) = scripted(503, &[("content-type", "text/plain")], b"unavailable");
    let result = post(&client, tools_list(), None).await;
    let Err(StreamableHttpError::HttpStatus(status)) = result else {
        panic!("expected HttpStatus, got {result:?}");
    };
    assert_eq!((status.status, status.retry_after), (503, None));

    // A 500 whose body is a JSON-RPC error is that error.
    let (client, _) = scripted(
        500,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"boom"}}"#,
    );
    let answer = post(&client, tools_list(), None).await.unwrap();
    let StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _) = answer else {
        panic!("expected a JSON-RPC error, got {answer:?}");
    };
    assert_eq!(error.error.message, "boom");
}

#[tokio::test]
async fn a_refusal_names_its_status_and_aws_error_type() {
    let (client, _) = scripted(
        409,
        &[
            ("content-type", "application/json"),
            ("x-amzn-errortype", "RetryableConflictException"),
        ],
        br#"{"message":"busy"}"#,
    );
    let result = post(&client, tools_list(), Some("s")).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::UnexpectedServerResponse(m))
            if m == r#"HTTP 409 RetryableConflictException: {"message":"busy"}"#),
        "{result:?}"
    );
}

#[tokio::test]
async fn auth_failures_keep_their_status() {
    // SigV4 refusals carry no challenge: a diagnostic, even with a JSON-RPC-looking body.
    let (client, _) = scripted(
        403,
        &[
            ("content-type", "application/json"),
            ("x-amzn-errortype", "InvalidSignatureException"),
        ],
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"no"}}"#,
    );
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::UnexpectedServerResponse(m))
            if m.starts_with("HTTP 403 InvalidSignatureException: {")),
        "{result:?}"
    );

    let (client, _) = scripted(401, &[("www-authenticate", "Bearer realm=\"mcp\"")], b"");
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::AuthRequired(e))
            if e.www_authenticate_header == "Bearer realm=\"mcp\""),
        "{result:?}"
    );

    let (client, _) = scripted(
        403,
        &[(
            "www-authenticate",
            "Bearer error=\"insufficient_scope\", Scope=\"tools:call tools:list\"",
        )],
        b"",
    );
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::InsufficientScope(e))
            if e.get_required_scope() == Some("tools:call tools:list")),
        "{result:?}"
    );
}

#[tokio::test]
async fn bad_bytes_are_errors_not_panics() {
    // Not JSON at all, and not UTF-8 either.
    let (client, _) = scripted(
        200,
        &[("content-type", "application/json")],
        b"\xff\xfe{not json",
    );
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(&result, Err(StreamableHttpError::UnexpectedServerResponse(m))
            if m.starts_with("HTTP 200: the JSON body is not a JSON-RPC message") && m.ends_with("\u{fffd}\u{fffd}{not json")),
        "{result:?}"
    );
    // The same answer to a notification only says "received".
    let answer = post(&client, initialized(), None).await.unwrap();
    assert!(matches!(answer, StreamableHttpPostResponse::Accepted));

    // No content type.
    let (client, _) = scripted(200, &[], b"{}");
    let result = post(&client, tools_list(), None).await;
    assert!(
        matches!(
            result,
            Err(StreamableHttpError::UnexpectedContentType(None))
        ),
        "{result:?}"
    );

    // Invalid SSE: the stream yields an error.
    let (client, _) = scripted(
        200,
        &[("content-type", "text/event-stream")],
        b"\xff\xfe\n\n",
    );
    let answer = post(&client, tools_list(), None).await.unwrap();
    let StreamableHttpPostResponse::Sse(mut events, None) = answer else {
        panic!("expected an SSE stream, got {answer:?}");
    };
    assert!(matches!(events.next().await, Some(Err(_))));
}

#[tokio::test]
async fn a_json_body_past_the_limit_is_refused() {
    let (client, _) = scripted(
        200,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#,
    );
    let mut limits = StreamableHttpResponseLimits::default();
    limits.max_json_response_size = 10;
    let result = client
        .post_message_with_response_limits(
            "http://mcp.invalid/mcp".into(),
            tools_list(),
            None,
            None,
            HashMap::new(),
            limits,
        )
        .await;
    assert!(
        matches!(
            result,
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size: 10 })
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn sse_answers_are_parsed_and_held_to_the_event_limit() {
    let body: &[u8] =
        b": keep-alive\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\r\n\r\n";
    let (client, _) = scripted(
        200,
        &[("content-type", "text/event-stream; charset=utf-8")],
        body,
    );
    let answer = post(&client, tools_list(), None).await.unwrap();
    let StreamableHttpPostResponse::Sse(events, None) = answer else {
        panic!("expected an SSE stream, got {answer:?}");
    };
    let events: Vec<_> = events.collect().await;
    let data: Vec<Option<String>> = events
        .into_iter()
        .map(|e| e.unwrap().data)
        .filter(Option::is_some)
        .collect();
    assert_eq!(
        data,
        [Some(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.to_owned())]
    );

    // The same stream with a 20-byte event limit: the data line alone is longer.
    let answer = client
        .post_message_with_max_sse_event_size(
            "http://mcp.invalid/mcp".into(),
            tools_list(),
            None,
            None,
            HashMap::new(),
            20,
        )
        .await
        .unwrap();
    let StreamableHttpPostResponse::Sse(events, None) = answer else {
        panic!("expected an SSE stream, got {answer:?}");
    };
    let events: Vec<_> = events.collect().await;
    let Some(Err(SseError::Body(error))) = events.last() else {
        panic!("expected the stream to end with an error, got {events:?}");
    };
    assert!(
        matches!(
            error.downcast_ref::<TowerClientError>(),
            Some(TowerClientError::SseEventTooLarge { max_size: 20 })
        ),
        "{error}"
    );
}

#[tokio::test]
async fn get_and_delete_405_tell_rmcp_to_carry_on() {
    let (client, seen) = scripted(405, &[("allow", "POST")], b"");
    let result = client
        .get_stream(
            "http://mcp.invalid/mcp".into(),
            Some("s".into()),
            Some("41".to_owned()),
            None,
            HashMap::new(),
        )
        .await;
    assert!(
        matches!(result, Err(StreamableHttpError::ServerDoesNotSupportSse)),
        "GET: {:?}",
        result.err()
    );
    let result = client
        .delete_session(
            "http://mcp.invalid/mcp".into(),
            "s".into(),
            None,
            HashMap::new(),
        )
        .await;
    assert!(
        matches!(
            result,
            Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
        ),
        "DELETE: {result:?}"
    );

    let seen = seen.lock().unwrap();
    let (get, delete) = (&seen[0], &seen[1]);
    assert_eq!(get.method(), "GET");
    assert_eq!(get.headers()["accept"], "text/event-stream");
    assert_eq!(get.headers()["mcp-session-id"], "s");
    assert_eq!(get.headers()["last-event-id"], "41");
    assert_eq!(delete.method(), "DELETE");
    assert_eq!(delete.headers()["mcp-session-id"], "s");
    assert!(!delete.headers().contains_key("accept"));
}

#[tokio::test]
async fn a_failing_service_is_a_client_error_with_its_cause() {
    let client = TowerClient::new(tower::service_fn(|_: Request<Full<Bytes>>| async {
        Err::<Response<Full<Bytes>>, _>(std::io::Error::other("connection refused"))
    }));
    let result = post(&client, tools_list(), None).await;
    let Err(StreamableHttpError::Client(TowerClientError::Service(cause))) = result else {
        panic!("expected a service error, got {result:?}");
    };
    assert_eq!(cause.to_string(), "connection refused");

    // An invalid URI is refused before anything is sent.
    let result = client
        .post_message("not a uri".into(), tools_list(), None, None, HashMap::new())
        .await;
    assert!(
        matches!(
            result,
            Err(StreamableHttpError::Client(TowerClientError::Request(_)))
        ),
        "{result:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// rmcp over an AgentCore Gateway (the emulator's Gateway mode), through McpEndpointLayer
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn rmcp_over_a_gateway_runs_a_session_and_opens_it_again_after_it_expires()
-> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().gateway(true)).await?;
    let (client, records) = connect_through(
        emulator.endpoint_signer().build()?,
        http_client(),
        emulator.gateway_url(),
    )
    .await?;
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    assert_eq!(emulator.audit().mcp_sessions_started, 1);

    // The gateway's session expires: its 404 makes rmcp initialise again and send the call
    // once more — a new call, and `counter` runs once.
    emulator.expire_mcp_sessions();
    let result = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    assert_eq!(text_of(&result), ["1"]);
    let audit = emulator.audit();
    assert_eq!(audit.mcp_sessions_started, 2);
    assert_eq!(audit.mcp_session_refusals, 1);
    assert_eq!(emulator.counter(), 1);
    assert_eq!(audit.signature_failures, 0);
    let counter = records_of(&records, "tools/call", Some("counter"));
    assert_eq!(counter.len(), 2, "the refused call and the new one");
    assert_eq!(
        counter[0].1.attempts()[0].outcome(),
        &response(404, None),
        "the 404 delivered as it came"
    );
    client.cancel().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// MCP 2026-07-28's probe through a cold start, on tokio's paused clock
// ---------------------------------------------------------------------------------------------

/// A cold start as users report them (up to ~12.6 s): longer than the 10 s rmcp's `Auto` mode
/// waits for `server/discover` before it falls back to `initialize`.
const LONG_COLD_START: Duration = Duration::from_secs(12);

/// The messages `audit` received, in order, each run of one message re-sent (the same method
/// and JSON-RPC id) folded into one entry with how many times it came.
fn runs_of(audit: &Audit) -> Vec<(String, Option<String>, u64)> {
    let mut runs: Vec<(String, Option<String>, u64)> = Vec::new();
    for received in &audit.received {
        let method = received.method.clone().unwrap_or_default();
        match runs.last_mut() {
            Some((m, id, n)) if *m == method && *id == received.id => *n += 1,
            _ => runs.push((method, received.id.clone(), 1)),
        }
    }
    runs
}

/// The methods and ids of [`runs_of`], without the counts.
fn shape(runs: &[(String, Option<String>, u64)]) -> Vec<(&str, Option<&str>)> {
    runs.iter()
        .map(|(method, id, _)| (method.as_str(), id.as_deref()))
        .collect()
}

/// rmcp's client (`ClientConfig::default()`) over `RecordTap` → the recommended layers (no tool
/// declared replayable) → the emulator's signer → hyper-util, through a `TowerClient` built the
/// ordinary way, connected as `lifecycle` says (`Auto`: [`serve_client`]'s, 2026-07-28 or
/// `initialize` at 2025-11-25).
async fn connect_with(
    emulator: &Emulator,
    records: &Records,
    lifecycle: ClientLifecycleMode,
) -> Result<Client, BoxError> {
    let stack = tower::ServiceBuilder::new()
        .layer(tap_into(records))
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build()?,
        ))
        .service(http_client());
    let transport = TowerClient::new(stack).into_transport("http://agentcore.invalid/mcp");
    Ok(match lifecycle {
        ClientLifecycleMode::Auto { .. } => {
            serve_client(ClientConfig::default(), transport, None).await?
        }
        lifecycle => {
            ClientConfig::default()
                .serve_with_lifecycle(transport, lifecycle)
                .await?
        }
    })
}

/// rmcp's `Auto` mode, as [`serve_client`] sets it.
fn auto() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// `record` has as many attempts as the emulator `received` of its request, the last
/// answered 200 and delivered.
fn delivered_after(record: &AttemptRecord, received: u64) {
    let attempts = record.attempts();
    assert_eq!(attempts.len() as u64, received, "{record}");
    let last = attempts.last().unwrap();
    assert_eq!(last.outcome(), &response(200, None), "{record}");
    assert!(!last.was_sent_again(), "{record}");
}

/// Every attempt of `record` was the session-busy refusal (HTTP 200), and the call was dropped
/// while the next was waited for: nothing of it ran, and nothing of it reached rmcp.
fn refused_then_dropped(record: &AttemptRecord) {
    let attempts = record.attempts();
    assert!(!attempts.is_empty(), "{record}");
    for attempt in &attempts {
        assert_eq!(attempt.outcome(), &response(200, None), "{record}");
    }
    let last = attempts.last().unwrap();
    assert!(
        matches!(
            last.decisions().last().map(|d| d.verdict()),
            Some(Verdict::CallDropped)
        ),
        "{record}"
    );
}

/// rmcp's `Auto` mode against a runtime whose cold start outlasts its 10 s wait for
/// `server/discover`. rmcp cannot cancel the first probe (id 0), so `TowerClient` sends it
/// nowhere and asks rmcp for it again; rmcp's second probe (id 1) is refused while the microVM
/// provisions, and dropped by rmcp's own timeout — nothing of it reaches rmcp, nor the server
/// after it. rmcp falls back to `initialize` (id 2), which waits the rest of the cold start out.
/// The client connects in the era the server answers `initialize` with, and a tool call then
/// runs once.
#[tokio::test(start_paused = true)]
async fn auto_mode_through_a_cold_start_longer_than_rmcps_discover_wait_connects_and_runs_a_call_once()
-> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(LONG_COLD_START)).await?;
    let records = Records::default();
    let started = tokio::time::Instant::now();
    let client = connect_with(&emulator, &records, auto()).await?;
    assert!(
        started.elapsed() >= LONG_COLD_START,
        "connected after the cold start"
    );

    // The era the server offers to `initialize` (rmcp's `legacy_version`, 2025-11-25).
    let server = client.peer_info().expect("initialized");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2025_11_25);

    // The handshake as the emulator saw it: the probe, refused while the microVM provisioned;
    // `initialize`, refused until it was ready, then answered; the notification, once.
    let audit = emulator.audit();
    let runs = runs_of(&audit);
    assert_eq!(
        shape(&runs),
        [
            ("server/discover", Some("1")),
            ("initialize", Some("2")),
            ("notifications/initialized", None),
        ],
        "{runs:?}"
    );
    assert_eq!(runs[2].2, 1, "{runs:?}");
    let sent: u64 = runs.iter().map(|(_, _, n)| n).sum();
    assert_eq!(
        audit.busy_refusals,
        sent - 2,
        "everything before the microVM was ready was refused, nothing after: {runs:?}"
    );
    assert_eq!(audit.executions.values().sum::<u64>(), 0);
    one_runtime_session(&audit, 1);

    // What went through the stack: the probe, refused until rmcp dropped it; `initialize`,
    // refused, then answered and delivered.
    let probe = record_of(&records, "server/discover", None);
    refused_then_dropped(&probe);
    assert_eq!(probe.len() as u64, runs[0].2);
    delivered_after(&record_of(&records, "initialize", None), runs[1].2);

    // A tool that is not idempotent runs once.
    let result = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    assert_eq!(text_of(&result), ["1"]);
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    assert_eq!(emulator.counter(), 1);
    let call = record_of(&records, "tools/call", Some("counter")).attempts();
    assert_eq!(call.len(), 1);
    assert_eq!(call[0].outcome(), &response(200, None));
    assert_eq!(
        shape(&runs_of(&audit)[3..]),
        [("tools/call", Some("3"))],
        "the call, sent once, after the handshake"
    );
    client.cancel().await?;
    Ok(())
}

/// `client` connected in 2026-07-28 by one `server/discover`, sent again while the cold start
/// refused it as busy, then answered and delivered.
fn discovered_through_the_cold_start(client: &Client, emulator: &Emulator, records: &Records) {
    let server = client.peer_info().expect("discovered");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    let audit = emulator.audit();
    let runs = runs_of(&audit);
    assert_eq!(shape(&runs), [("server/discover", Some("1"))], "{runs:?}");
    assert_eq!(audit.busy_refusals, runs[0].2 - 1, "{runs:?}");
    delivered_after(&record_of(records, "server/discover", None), runs[0].2);
}

/// The same cold start in `Discover` mode, which waits as long as it takes: the probe rmcp
/// sends again waits the cold start out, and the client connects in 2026-07-28.
#[tokio::test(start_paused = true)]
async fn discover_mode_through_a_cold_start_longer_than_rmcps_discover_wait_connects_in_2026_07_28()
-> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(LONG_COLD_START)).await?;
    let records = Records::default();
    let client = connect_with(
        &emulator,
        &records,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await?;
    discovered_through_the_cold_start(&client, &emulator, &records);

    let result = client
        .call_tool(CallToolRequestParams::new("counter"))
        .await?;
    assert_eq!(text_of(&result), ["1"]);
    assert_eq!(emulator.audit().executions_of("counter"), 1);
    assert_eq!(emulator.counter(), 1);
    client.cancel().await?;
    Ok(())
}

/// A cold start shorter than rmcp's wait: `Auto` mode's probe waits it out, and the client
/// connects in 2026-07-28.
#[tokio::test(start_paused = true)]
async fn auto_mode_through_a_short_cold_start_connects_in_2026_07_28() -> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_secs(5))).await?;
    let records = Records::default();
    let client = connect_with(&emulator, &records, auto()).await?;
    discovered_through_the_cold_start(&client, &emulator, &records);
    client.cancel().await?;
    Ok(())
}

/// The first `server/discover` of rmcp's lifecycle (id 0, no session) is sent nowhere: rmcp
/// gets the error by which a server asks for it again (-32022, the version it asked for among
/// the supported ones). Any other probe is sent.
#[tokio::test]
async fn the_first_probe_is_sent_nowhere_and_asked_for_again() {
    let (client, seen) = scripted(
        200,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}"#,
    );
    let probe = |id: u32| {
        message(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"server/discover","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}}}"#
        ))
    };

    let answer = post(&client, probe(0), None).await.unwrap();
    let StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), None) = answer else {
        panic!("{answer:?}");
    };
    assert_eq!(error.id, Some(rmcp::model::NumberOrString::Number(0)));
    assert_eq!(
        error.error.code,
        rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
    );
    assert_eq!(
        error.error.data,
        Some(serde_json::json!({"requested": "2026-07-28", "supported": ["2026-07-28"]}))
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing sent");

    // The probe rmcp sends again, and a first probe sent with a session, go out.
    let answer = post(&client, probe(1), None).await.unwrap();
    assert!(
        matches!(
            answer,
            StreamableHttpPostResponse::Json(JsonRpcMessage::Response(_), _)
        ),
        "{answer:?}"
    );
    post(&client, probe(0), Some("s-1")).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
}
