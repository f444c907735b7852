//! The full stack over hyper-util against the emulator on loopback: every emulated fault gives
//! its expected outcome, attempt record and execution count.

use crate::common;

use std::time::{Duration, Instant};

use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::recommended_layers;
use agentcore_tower::{
    AttemptRecord, Error, ReplayGuardLayer,
    record::{Outcome, Verdict},
    rule::{Assumption, By, FailureKind},
};
use agentcore_tower_emulator::{BusyForm, Emulator, EmulatorConfig, Fault, RetryAfter};
use aws_credential_types::Credentials;
use bytes::Bytes;
use common::*;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

#[derive(Debug)]
struct Answer {
    status: StatusCode,
    json: Value,
    record: AttemptRecord,
    content_type: String,
}

/// An emulator started with `config` (the other emulator test files start theirs here too).
pub(crate) async fn start(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
}

fn guard() -> ReplayGuardLayer {
    ReplayGuardLayer::new().idempotent_tools(["add"])
}

/// One call through the full stack; the answer (JSON or SSE) or the error.
async fn call_with(
    emulator: &Emulator,
    guard: ReplayGuardLayer,
    credentials: Credentials,
    signer: impl FnOnce(
        agentcore_tower::invoke::SigV4InvokeLayerBuilder,
    ) -> agentcore_tower::invoke::SigV4InvokeLayerBuilder,
    request: Request<Full<Bytes>>,
) -> Result<Answer, Error> {
    let signer = signer(SigV4InvokeLayer::builder(
        InvokeTarget::arn(emulator.runtime_arn()).endpoint(emulator.endpoint()),
        credentials,
    ))
    .build()
    .unwrap();
    let stack = ServiceBuilder::new()
        .layer(recommended_layers(guard, signer))
        .service(http_client());
    let response = stack.oneshot(request).await?;
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let (body, _) = read_all(response.into_body()).await;
    let text = String::from_utf8(body.to_vec()).unwrap();
    let text = if content_type.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        text
    };
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Answer {
        status,
        json,
        record,
        content_type,
    })
}

async fn call(emulator: &Emulator, request: Request<Full<Bytes>>) -> Result<Answer, Error> {
    call_with(emulator, guard(), emulator.credentials(), |b| b, request).await
}

/// One call through the full stack, `fault` pushed first: the answer or the error.
async fn call_meeting(
    emulator: &Emulator,
    fault: Fault,
    request: Request<Full<Bytes>>,
) -> Result<Answer, Error> {
    emulator.push_fault(fault);
    call(emulator, request).await
}

/// A `tools/call` of the emulator's `counter`.
fn counter(id: u64) -> Request<Full<Bytes>> {
    tool_call(id, "counter", json!({}))
}

fn text_of(answer: &Answer) -> &str {
    answer
        .json
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn first_decision(
    record: &AttemptRecord,
    attempt: usize,
) -> (String, Verdict, Option<(By, Assumption)>) {
    let attempts = record.attempts();
    let d = attempts[attempt].decisions()[0].clone();
    (
        d.layer().to_owned(),
        d.verdict().clone(),
        d.permission().map(|p| (p.by, p.assumes)),
    )
}

/// The first attempt was sent again by `layer`, allowed by `by` under `assumes`.
fn assert_first_sent_again_by(record: &AttemptRecord, layer: &str, by: By, assumes: Assumption) {
    let (decided_by, verdict, permission) = first_decision(record, 0);
    assert!(
        matches!(verdict, Verdict::SentAgain { .. }),
        "{verdict:?}: {record}"
    );
    assert_eq!(
        (decided_by.as_str(), permission),
        (layer, Some((by, assumes)))
    );
}

#[tokio::test]
async fn a_provisioning_session_is_waited_out_in_either_busy_form() {
    for form in [
        BusyForm::JsonRpc200,
        BusyForm::Conflict409,
        BusyForm::Alternate,
    ] {
        let emulator = start(
            EmulatorConfig::default()
                .provisioning(Duration::from_millis(300))
                .busy_form(form),
        )
        .await;
        let answer = call(&emulator, rpc_request(1, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})))
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{form:?}");
        assert_eq!(
            answer.json["result"]["serverInfo"]["name"],
            "agentcore-tower-emulator"
        );
        let audit = emulator.audit();
        assert!(audit.busy_refusals >= 1, "{form:?}");
        assert_eq!(
            audit.sessions_started, 1,
            "one runtime session for the whole call"
        );
        assert_eq!(answer.record.len() as u64, audit.busy_refusals + 1);
        let (layer, verdict, permission) = first_decision(&answer.record, 0);
        assert_eq!(layer, "session_busy");
        assert!(matches!(verdict, Verdict::SentAgain { .. }));
        assert_eq!(
            permission,
            Some((By::Adapter, Assumption::RefusedBeforeExecution))
        );
    }
}

#[tokio::test]
async fn throttles_are_waited_out_with_and_without_retry_after() {
    let emulator = start(EmulatorConfig::default()).await;
    for (id, retry_after, least) in [
        (1, Some(RetryAfter::Seconds(1)), Duration::from_secs(1)),
        (
            2,
            Some(RetryAfter::DateIn(Duration::from_secs(2))),
            Duration::from_secs(1),
        ),
        (3, None, Duration::from_millis(100)),
    ] {
        emulator.push_fault(Fault::Throttle { retry_after });
        let started = Instant::now();
        let answer = call(&emulator, counter(id)).await.unwrap();
        assert!(
            started.elapsed() >= least,
            "{retry_after:?}: {:?}",
            started.elapsed()
        );
        assert_eq!(answer.status, 200);
        let (layer, verdict, permission) = first_decision(&answer.record, 0);
        assert_eq!(layer, "throttle");
        match verdict {
            Verdict::SentAgain {
                retry_after: asked, ..
            } => assert_eq!(asked.is_some(), retry_after.is_some()),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            permission,
            Some((By::Adapter, Assumption::RejectedBeforeExecution))
        );
    }
    let audit = emulator.audit();
    assert_eq!(audit.throttled, 3);
    assert_eq!(
        audit.executions_of("counter"),
        3,
        "a throttled call ran nothing; each re-send ran once"
    );
}

#[tokio::test]
async fn a_dropped_connection_re_sends_only_what_was_declared() {
    let emulator = start(EmulatorConfig::default()).await;
    let error = call_meeting(&emulator, Fault::DropAfterRun, counter(1))
        .await
        .unwrap_err();
    assert_eq!(error.failure_kind(), FailureKind::ConnectionDropped);
    let record = error.record().unwrap();
    assert_eq!(record.len(), 1);
    assert_eq!(
        record.attempts()[0].outcome(),
        &Outcome::Failure(FailureKind::ConnectionDropped)
    );
    assert_eq!(emulator.counter(), 1, "ran once, not re-sent");

    let answer = call_meeting(
        &emulator,
        Fault::DropAfterRun,
        tool_call(2, "add", json!({"a": 2, "b": 3})),
    )
    .await
    .unwrap();
    assert_eq!(text_of(&answer), "5");
    assert_eq!(answer.record.len(), 2);
    assert_first_sent_again_by(
        &answer.record,
        "replay_guard",
        By::AppDeclaration,
        Assumption::Idempotent,
    );
    assert_eq!(
        emulator.audit().executions_of("add"),
        2,
        "the evidence: it ran twice, as declared safe"
    );
}

#[tokio::test]
async fn a_500_is_re_sent_only_for_what_was_declared() {
    let emulator = start(EmulatorConfig::default()).await;
    let answer = call_meeting(
        &emulator,
        Fault::ServerError { after_run: true },
        counter(1),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 500);
    assert_eq!(answer.record.len(), 1);
    assert!(matches!(
        first_decision(&answer.record, 0).1,
        Verdict::Forbidden { .. }
    ));
    assert_eq!(emulator.counter(), 1);

    let answer = call_meeting(
        &emulator,
        Fault::ServerError { after_run: false },
        tool_call(2, "add", json!({"a": 1, "b": 1})),
    )
    .await
    .unwrap();
    assert_eq!((answer.status.as_u16(), text_of(&answer)), (200, "2"));
    assert_eq!(answer.record.len(), 2);
}

#[tokio::test]
async fn look_alikes_are_delivered_as_they_came() {
    let emulator = start(EmulatorConfig::default()).await;
    let answer = call_meeting(&emulator, Fault::ConflictLookAlike, counter(1))
        .await
        .unwrap();
    assert_eq!(answer.json["error"]["code"], -32005);
    assert_eq!(
        answer.json["error"]["message"],
        "Resource conflict - Resource already exists"
    );
    assert_eq!(answer.record.len(), 1);

    let answer = call_meeting(&emulator, Fault::HealthCheckFailed, counter(2))
        .await
        .unwrap();
    assert_eq!(answer.json["error"]["code"], -32010);
    assert_eq!(answer.record.len(), 1);
    assert_eq!(emulator.counter(), 0);
}

#[tokio::test]
async fn the_known_limit_a_server_raised_busy_after_the_call_ran() {
    // The HTTP 200 form cannot tell a server-raised -32005 from the platform's refusal: the call
    // is re-sent and runs twice — and the record says it was an assumption, not a fact.
    let emulator = start(EmulatorConfig::default()).await;
    let answer = call_meeting(&emulator, Fault::BusyAfterRun, counter(1))
        .await
        .unwrap();
    assert_eq!(text_of(&answer), "2");
    assert_eq!(emulator.counter(), 2);
    assert_first_sent_again_by(
        &answer.record,
        "session_busy",
        By::Adapter,
        Assumption::RefusedBeforeExecution,
    );
    assert_eq!(
        answer.record.attempts()[0].effect(),
        agentcore_tower::record::Effect::Unknown
    );

    // An app that cannot take that risk declares the tool strict.
    emulator.push_fault(Fault::BusyAfterRun);
    let strict = ReplayGuardLayer::new().strict_tools(["counter"]);
    let answer = call_with(&emulator, strict, emulator.credentials(), |b| b, counter(2))
        .await
        .unwrap();
    assert_eq!(answer.json["error"]["code"], -32005);
    assert_eq!(answer.record.len(), 1);
    assert_eq!(emulator.counter(), 3, "ran once more, not re-sent");
}

#[tokio::test]
async fn a_slow_answer_arrives_and_a_deadline_outside_the_stack_ends_the_call() {
    let emulator = start(EmulatorConfig::default()).await;
    emulator.push_fault(Fault::Slow(Duration::from_millis(300)));
    let started = Instant::now();
    let answer = call(&emulator, tool_call(1, "echo", json!({"text": "hi"})))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(text_of(&answer), "hi");

    emulator.push_fault(Fault::Slow(Duration::from_secs(5)));
    let signer = emulator.signer().build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(
            500,
        )))
        .layer(recommended_layers(guard(), signer))
        .service(http_client());
    let started = Instant::now();
    let error = stack
        .oneshot(tool_call(2, "echo", json!({"text": "late"})))
        .await
        .unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>());
    assert!(started.elapsed() < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let audit = emulator.audit();
    assert_eq!(
        audit.executions_of("echo"),
        2,
        "the first call and the late one, each once"
    );
    assert_eq!(
        audit.requests, 2,
        "the late call was sent once and never again"
    );
}

#[tokio::test]
async fn delete_stops_the_runtime_session_when_asked() {
    let emulator = start(EmulatorConfig::default()).await;
    let session = "sess-0123456789abcdef0123456789abcdef";
    call_with(
        &emulator,
        guard(),
        emulator.credentials(),
        |b| b.runtime_session_id(session).stop_session_on_delete(true),
        rpc_request(1, "ping", json!({})),
    )
    .await
    .unwrap();
    let delete = Request::delete("http://agentcore.invalid/mcp")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = call_with(
        &emulator,
        guard(),
        emulator.credentials(),
        |b| b.runtime_session_id(session).stop_session_on_delete(true),
        delete,
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
    let audit = emulator.audit();
    assert_eq!((audit.sessions_started, audit.sessions_stopped), (1, 1));

    // Without the option, DELETE is answered 405 here and never reaches the service.
    let before = emulator.audit().requests;
    let delete = Request::delete("http://agentcore.invalid/mcp")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = call(&emulator, delete).await.unwrap();
    assert_eq!(answer.status, 405);
    assert_eq!(emulator.audit().requests, before);
}

#[tokio::test]
async fn wrong_credentials_are_refused_and_nothing_secret_comes_back() {
    let emulator = start(EmulatorConfig::default()).await;
    let wrong = Credentials::new(
        "AKIDEMULATOR",
        "not-the-secret",
        Some("emulator-session-token".into()),
        None,
        "t",
    );
    let answer = call_with(
        &emulator,
        guard(),
        wrong,
        |b| b,
        rpc_request(1, "ping", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 403);
    assert_eq!(
        answer.record.attempts()[0].outcome(),
        &Outcome::Response {
            status: StatusCode::FORBIDDEN,
            error_type: agentcore_tower::record::ErrorType::Named(
                "InvalidSignatureException".into()
            )
        }
    );
    assert_eq!(emulator.audit().signature_failures, 1);
    let text = answer.json.to_string();
    assert!(!text.contains("emulator-session-token"), "{text}");
}

#[tokio::test]
async fn sse_answers_pass_through_intact() {
    let emulator = start(EmulatorConfig::default().sse(true)).await;
    let answer = call(&emulator, tool_call(1, "add", json!({"a": 40, "b": 2})))
        .await
        .unwrap();
    assert!(answer.content_type.starts_with("text/event-stream"));
    assert_eq!(text_of(&answer), "42");
    let answer = call(&emulator, rpc_request(2, "tools/list", json!({})))
        .await
        .unwrap();
    let names: Vec<_> = answer.json["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["add", "echo", "counter"]);
}

#[tokio::test]
async fn notifications_are_accepted_without_a_body() {
    let emulator = start(EmulatorConfig::default()).await;
    let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let answer = call(&emulator, request).await.unwrap();
    assert_eq!(answer.status, 202);
    assert_eq!(answer.json, Value::Null);
}

#[tokio::test]
async fn the_protocol_version_is_negotiated_down_to_one_spoken_here() {
    let emulator = start(EmulatorConfig::default()).await;
    for (asked, answered) in [
        ("2025-06-18", "2025-06-18"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let answer = call(&emulator, rpc_request(1, "initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})))
            .await
            .unwrap();
        assert_eq!(
            answer.json["result"]["protocolVersion"], answered,
            "{asked}"
        );
    }
}

#[tokio::test]
async fn a_signature_dated_more_than_5_minutes_off_is_refused_and_the_clock_corrected() {
    let emulator = start(EmulatorConfig::default()).await;
    for (offset_secs, attempts) in [(-400i64, 2usize), (400, 2), (-200, 1), (200, 1)] {
        let when = if offset_secs < 0 {
            std::time::SystemTime::now() - Duration::from_secs(offset_secs.unsigned_abs())
        } else {
            std::time::SystemTime::now() + Duration::from_secs(offset_secs as u64)
        };
        let answer = call_with(
            &emulator,
            guard(),
            emulator.credentials(),
            move |b| b.clock(move || when),
            rpc_request(1, "ping", json!({})),
        )
        .await
        .unwrap();
        assert_eq!(answer.status.as_u16(), 200, "signed {offset_secs} s off");
        assert_eq!(answer.record.len(), attempts, "{}", answer.record);
        if attempts == 2 {
            // The emulator refused the first as AWS does; the signer took the offset from the
            // answer's Date and signed once more.
            let first = answer.record.attempts()[0].clone();
            assert_eq!(
                first.outcome(),
                &Outcome::Response {
                    status: StatusCode::FORBIDDEN,
                    error_type: agentcore_tower::record::ErrorType::Named(
                        "InvalidSignatureException".into()
                    )
                }
            );
            assert_eq!(first.decisions()[0].layer(), "sigv4");
        }
    }
    assert_eq!(emulator.audit().signature_failures, 2);
}
