//! The runtime's whole error table, in each of its forms, through the full stack against the
//! emulator: for every row, the attempts, the record's words, the bytes delivered and how often
//! the tool ran.

use crate::common;

use std::time::Duration;

use agentcore_tower::contract::{Form, PlatformError};
use agentcore_tower::{
    AttemptRecord, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer, record::Verdict,
};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, PlatformForm};
use bytes::Bytes;
use common::*;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

const TABLE: [PlatformError; 11] = [
    PlatformError::Unauthorized,
    PlatformError::AccessDenied,
    PlatformError::Throttling,
    PlatformError::ServiceQuotaExceeded,
    PlatformError::ResourceNotFound,
    PlatformError::Conflict,
    PlatformError::RetryableConflict,
    PlatformError::Validation,
    PlatformError::RuntimeClientError,
    PlatformError::RequestUnacceptable,
    PlatformError::Internal,
];

/// What the stack does with a row, for a declared-idempotent tool and for an undeclared one.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    /// Refused before execution: sent again, by this layer, whatever the tool.
    SentAgainBy(&'static str),
    /// May have run: sent again only for the declared tool, by the guard.
    SentAgainIfDeclared,
    /// Delivered as it came.
    Delivered,
}

fn expect(error: PlatformError, form: PlatformForm) -> Expect {
    use PlatformError as E;
    match (error, form) {
        (E::Throttling, _) | (E::ServiceQuotaExceeded, PlatformForm::JsonRpc) => {
            Expect::SentAgainBy("throttle")
        }
        (E::RetryableConflict, _) => Expect::SentAgainBy("session_busy"),
        (E::RuntimeClientError, _) | (E::Internal, PlatformForm::Http) => {
            Expect::SentAgainIfDeclared
        }
        _ => Expect::Delivered,
    }
}

struct Answer {
    status: StatusCode,
    body: Bytes,
    record: AttemptRecord,
}

async fn call(emulator: &Emulator, request: Request<Full<Bytes>>) -> Answer {
    let signer = emulator.signer().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(
            ReplayGuardLayer::new()
                .idempotent_tools(["add"])
                .base_delay(Duration::from_millis(1)),
        )
        .layer(ThrottleRetryLayer::new().base_delay(Duration::from_millis(1)))
        .layer(SessionBusyRetryLayer::new().base_delay(Duration::from_millis(1)))
        .layer(signer)
        .service(http_client());
    let response: Response<_> = stack.oneshot(request).await.unwrap();
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let status = response.status();
    let (body, _) = read_all(response.into_body()).await;
    Answer {
        status,
        body,
        record,
    }
}

#[tokio::test]
async fn every_row_of_the_table_in_each_form() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut id = 0;
    for error in TABLE {
        for form in [PlatformForm::JsonRpc, PlatformForm::Http] {
            for tool in ["add", "counter"] {
                id += 1;
                let ran_before = emulator.audit().executions_of(tool);
                emulator.push_fault(Fault::Platform { error, form });
                let args = if tool == "add" {
                    json!({"a": 1, "b": 2})
                } else {
                    json!({})
                };
                let answer = call(&emulator, tool_call(id, tool, args)).await;
                let ran = emulator.audit().executions_of(tool) - ran_before;
                let attempts = answer.record.attempts();
                let row = format!("{error:?} {form:?} {tool}:\n{}", answer.record);

                // The record names the row, in the form it came in.
                let platform = attempts[0]
                    .platform_error()
                    .unwrap_or_else(|| panic!("{row}\n{attempts:#?}"));
                // ServiceQuotaExceeded's JSON-RPC form is throttling's reply: read as that.
                let read_as = match (error, form) {
                    (PlatformError::ServiceQuotaExceeded, PlatformForm::JsonRpc) => {
                        PlatformError::Throttling
                    }
                    _ => error,
                };
                assert_eq!(platform.error(), read_as, "{row}");
                assert_eq!(
                    matches!(platform.form(), Form::JsonRpc(_)),
                    form == PlatformForm::JsonRpc,
                    "{row}"
                );
                assert!(
                    answer.record.to_string().contains(error.exception()),
                    "{row}"
                );
                if error == PlatformError::RequestUnacceptable {
                    assert!(
                        answer.record.to_string().contains(
                            "the Accept header must be `application/json, text/event-stream`"
                        ),
                        "{row}"
                    );
                }

                let runs_on_fault = u64::from(error == PlatformError::RuntimeClientError);
                let resent = match expect(error, form) {
                    Expect::SentAgainBy(layer) => {
                        assert_eq!(attempts[0].decisions()[0].layer(), layer, "{row}");
                        true
                    }
                    Expect::SentAgainIfDeclared => tool == "add",
                    Expect::Delivered => false,
                };
                if resent {
                    assert_eq!(attempts.len(), 2, "{row}");
                    assert!(
                        matches!(
                            attempts[0].decisions()[0].verdict(),
                            Verdict::SentAgain { .. }
                        ),
                        "{row}"
                    );
                    assert_eq!(answer.status, 200, "{row}");
                    let result: Value = serde_json::from_slice(&answer.body).unwrap();
                    assert!(result.get("result").is_some(), "{row}: {result}");
                    assert_eq!(ran, 1 + runs_on_fault, "{row}");
                } else {
                    assert_eq!(attempts.len(), 1, "{row}");
                    assert_eq!(ran, runs_on_fault, "{row}");
                    // Delivered byte for byte as the emulator answered it.
                    let delivered: Value = serde_json::from_slice(&answer.body).expect(&row);
                    match (form, error) {
                        (PlatformForm::JsonRpc, _) => {
                            assert_eq!(delivered["error"]["code"], error.json_rpc_code(), "{row}");
                            assert_eq!(delivered["id"], id, "{row}");
                        }
                        _ => assert!(delivered["message"].is_string(), "{row}"),
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn throttling_in_an_http_200_is_waited_out_and_given_up_on_intact() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let throttled = Fault::Platform {
        error: PlatformError::Throttling,
        form: PlatformForm::JsonRpc,
    };
    // Twice, then an answer: two waits, the tool ran once.
    emulator.push_fault(throttled);
    emulator.push_fault(throttled);
    let answer = call(&emulator, tool_call(1, "counter", json!({}))).await;
    assert_eq!(answer.record.len(), 3, "{}", answer.record);
    assert_eq!(emulator.counter(), 1);
    let first = answer.record.to_string();
    assert!(
        first.starts_with("#1 HTTP 200 (JSON-RPC -32003 ThrottlingException (or ServiceQuotaExceededException: they share the reply)) -> throttle: throttled (JSON-RPC -32003, shared with ServiceQuotaExceeded), sent again after"),
        "{first}"
    );
    // For ever: the last refusal, intact, at the throttle layer's cap.
    for _ in 0..10 {
        emulator.push_fault(throttled);
    }
    let answer = call(&emulator, tool_call(2, "counter", json!({}))).await;
    assert_eq!(answer.record.len(), 3, "{}", answer.record);
    assert!(matches!(
        answer.record.attempts()[2].decisions()[0].verdict(),
        Verdict::AttemptsExhausted {
            max_attempts: 3,
            ..
        }
    ));
    assert_eq!(answer.status, 200);
    let refusal = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32003, "message": "Rate limit exceeded - Too many requests"}});
    assert_eq!(
        serde_json::from_slice::<Value>(&answer.body).unwrap(),
        refusal
    );
    assert_eq!(emulator.counter(), 1, "nothing ran");
}

#[tokio::test(start_paused = true)]
async fn a_look_alike_of_the_throttling_reply_is_delivered_at_once() {
    let look_alike = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32003,"message":"Quota of this MCP server exceeded"}}"#;
    let inner = Scripted::new([Step::Respond(response(
        200,
        &[("content-type", "application/json")],
        look_alike,
    ))]);
    let (response, shared) = call_through(ThrottleRetryLayer::new(), inner).await;
    assert_eq!(shared.calls(), 1);
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    assert_eq!(record.attempts()[0].platform_error(), None);
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(&body[..], look_alike);
}

#[tokio::test(start_paused = true)]
async fn x_amz_retry_after_is_waited_to_the_millisecond() {
    let inner = Scripted::new([
        Step::Respond(response(
            429,
            &[
                ("x-amz-retry-after", "1500"),
                ("x-amzn-errortype", "ThrottlingException"),
            ],
            b"{}",
        )),
        Step::Respond(response(200, &[], b"{}")),
    ]);
    let started = tokio::time::Instant::now();
    let (response, _) = call_through(ThrottleRetryLayer::new(), inner).await;
    assert_eq!(response.status(), 200);
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
    assert_eq!(
        verdict_on(&response, 0),
        Verdict::SentAgain {
            cause: "HTTP 429",
            wait: Duration::from_millis(1500),
            retry_after: Some(Duration::from_millis(1500)),
        }
    );
}

#[tokio::test]
async fn a_stateless_mcp_session_that_never_initializes() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let signer = emulator.signer().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(agentcore_tower::recommended_layers(
            ReplayGuardLayer::new(),
            signer.clone(),
        ))
        .service(http_client());
    let stateless = |mut request: Request<Full<Bytes>>| {
        request
            .headers_mut()
            .insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
        request
    };
    // What a 2026-07-28 client puts in every request's `_meta`; a server refuses a request
    // without it (rmcp and the Python SDK: 400, -32602).
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for (id, request) in [
        rpc_request(0, "server/discover", json!({"_meta": meta})),
        rpc_request(1, "tools/list", json!({"_meta": meta})),
        rpc_request(
            2,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let response = stack.clone().oneshot(stateless(request)).await.unwrap();
        assert_eq!(response.status(), 200, "request {id}");
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "no MCP session is minted"
        );
        let (body, _) = read_all(response.into_body()).await;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert!(answer.get("result").is_some(), "request {id}: {answer}");
    }
    let audit = emulator.audit();
    assert_eq!(
        audit.sessions_started, 1,
        "one runtime session carries the stickiness"
    );
    for received in &audit.received {
        assert_eq!(
            received.mcp_method, received.method,
            "Mcp-Method on every request"
        );
        assert_eq!(
            received.runtime_session_id.as_deref(),
            Some(signer.runtime_session_id().as_str())
        );
        assert_eq!(received.mcp_session_id, None);
    }
    assert_eq!(audit.received[2].mcp_name.as_deref(), Some("add"));
}

/// A provider of the emulator's credentials that counts how often it is asked.
#[derive(Debug)]
struct Counting(
    aws_credential_types::Credentials,
    std::sync::Arc<std::sync::atomic::AtomicU32>,
);

impl aws_credential_types::provider::ProvideCredentials for Counting {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        aws_credential_types::provider::future::ProvideCredentials::ready(Ok(self.0.clone()))
    }
}

/// The recommended stack to the emulator over HTTP, signing with `credentials` by a clock 10
/// minutes ahead of the emulator's.
fn ten_minutes_ahead(
    emulator: &Emulator,
    credentials: impl aws_credential_types::provider::ProvideCredentials + 'static,
) -> agentcore_tower::RecommendedStack<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
> {
    let signer = agentcore_tower::invoke::SigV4InvokeLayer::builder(
        agentcore_tower::InvokeTarget::arn(emulator.runtime_arn()).endpoint(emulator.endpoint()),
        credentials,
    )
    .clock(|| std::time::SystemTime::now() + Duration::from_secs(600))
    .build()
    .unwrap();
    ServiceBuilder::new()
        .layer(agentcore_tower::recommended_layers(
            ReplayGuardLayer::new(),
            signer,
        ))
        .service(http_client())
}

/// A `tools/call` of the emulator's `counter` (JSON-RPC id `id`) through a clone of `stack`:
/// the answer.
async fn call_counter<S, B>(stack: &S, id: u64) -> Response<B>
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    stack
        .clone()
        .oneshot(tool_call(id, "counter", json!({})))
        .await
        .unwrap()
}

#[tokio::test]
async fn expired_credentials_and_a_skewed_clock_are_sent_once_more_freshly_signed() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let asked = std::sync::Arc::new(AtomicU32::new(0));
    let cached = agentcore_tower::auth::CachedCredentials::new(Counting(
        emulator.credentials(),
        asked.clone(),
    ));
    // Our clock is 10 minutes ahead.
    let stack = ten_minutes_ahead(&emulator, cached);

    // The skewed clock: refused once, the offset taken from the answer's Date, then accepted.
    let response = call_counter(&stack, 1).await;
    assert_eq!(response.status(), 200);
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    assert_eq!(record.len(), 2, "{record}");
    assert!(
        record
            .to_string()
            .starts_with("#1 HTTP 403 InvalidSignatureException -> sigv4: clock skew"),
        "{record}"
    );
    assert_eq!(emulator.counter(), 1);
    // Corrected for good: the next call is signed right the first time.
    let response = call_counter(&stack, 2).await;
    assert_eq!(AttemptRecord::of_response(&response).unwrap().len(), 1);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "a skewed clock keeps the cached credentials: only the clock was wrong"
    );

    // An expired token: the cache dropped, the credentials resolved again, sent once more.
    emulator.push_fault(Fault::ExpiredToken);
    let response = call_counter(&stack, 3).await;
    assert_eq!(response.status(), 200);
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    assert_eq!(
        record.attempts()[0].to_string(),
        "#1 HTTP 403 ExpiredTokenException -> sigv4: expired credentials (ExpiredTokenException), sent again after 0ms (by adapter, assumes rejected-before-execution); effect unknown"
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "the cache was dropped for the re-send"
    );
    assert_eq!(emulator.counter(), 3, "ran once per call");

    // Twice expired: only one re-send; any other 403: none.
    emulator.push_fault(Fault::ExpiredToken);
    emulator.push_fault(Fault::ExpiredToken);
    let response = call_counter(&stack, 4).await;
    assert_eq!(response.status(), 403);
    assert_eq!(AttemptRecord::of_response(&response).unwrap().len(), 2);
    emulator.push_fault(Fault::Platform {
        error: PlatformError::AccessDenied,
        form: PlatformForm::Http,
    });
    let response = call_counter(&stack, 5).await;
    assert_eq!(response.status(), 403);
    assert_eq!(AttemptRecord::of_response(&response).unwrap().len(), 1);
}

#[tokio::test]
async fn calls_refused_together_for_a_skewed_clock_correct_it_once_and_all_go_through() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    // Our clock is 10 minutes ahead; eight calls are signed before any answer comes back.
    let stack = ten_minutes_ahead(&emulator, emulator.credentials());
    let calls = (0..8).map(|i| call_counter(&stack, i));
    let answers = futures_util::future::join_all(calls).await;
    // Each refused call sets the correction to the same offset (an added one would have moved
    // the clock 80 minutes back, and every re-send would have been refused again).
    for answer in answers {
        let record = AttemptRecord::of_response(&answer).unwrap().clone();
        assert_eq!(answer.status(), 200, "{record}");
        assert!(record.len() <= 2, "{record}");
    }
    assert_eq!(emulator.counter(), 8);
    let response = call_counter(&stack, 9).await;
    assert_eq!(AttemptRecord::of_response(&response).unwrap().len(), 1);
}
