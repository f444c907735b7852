//! ReplayGuardLayer alone and over the two retry layers, against an in-memory scripted service
//! that counts executions.

use crate::common;

use std::time::Duration;

use agentcore_tower::{
    AttemptRecord, Error, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer,
    error::RequestNotSent,
    record::{Outcome, Verdict},
    replay::ReplayOverride,
    rule::{Assumption, By, FailureKind},
};
use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::Full;
use tower::{Layer, ServiceBuilder, ServiceExt};

/// What the scripted server does with one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Runs the call and answers 200.
    Ok,
    /// Runs the call, then the connection drops.
    DropAfterRun,
    /// Runs the call, then answers 500.
    ServerError,
    /// Runs the call, then times out.
    TimeoutAfterRun,
    /// Refuses with 429 (runs nothing).
    Throttled,
    /// Refuses with the session-busy 200 (runs nothing).
    Busy200,
    /// Refuses with 409 RetryableConflictException (runs nothing).
    Busy409,
    /// Never receives the request.
    NeverSent,
}

impl Fault {
    fn runs(self) -> bool {
        matches!(
            self,
            Fault::Ok | Fault::DropAfterRun | Fault::ServerError | Fault::TimeoutAfterRun
        )
    }
    fn may_have_run(self) -> bool {
        self.runs() && self != Fault::Ok
    }
    fn step(self) -> Step {
        match self {
            Fault::Ok => Step::Respond(response(200, &[("content-type", "application/json")], br#"{"jsonrpc":"2.0","id":7,"result":{}}"#)),
            Fault::DropAfterRun => Step::Fail(Box::new(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset"))),
            Fault::ServerError => Step::Respond(response(500, &[("x-amzn-errortype", "InternalServerException")], b"{}")),
            Fault::TimeoutAfterRun => Step::Fail(Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut))),
            Fault::Throttled => Step::Respond(response(429, &[("x-amzn-errortype", "ThrottlingException")], b"{}")),
            Fault::Busy200 => Step::Respond(response(200, &[("content-type", "application/json")], br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#)),
            Fault::Busy409 => Step::Respond(response(409, &[("x-amzn-errortype", "RetryableConflictException")], b"{}")),
            Fault::NeverSent => Step::Fail(Box::new(RequestNotSent::new(std::io::Error::other("pool closed")))),
        }
    }
}

fn tools_call(tool: &str) -> Request<Full<Bytes>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"cents":100}}}}}}"#
    );
    Request::post("https://runtime.example/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn rpc(body: &'static str) -> Request<Full<Bytes>> {
    json_request(body)
}

type Outcome2 = Result<
    http::Response<
        agentcore_tower::body::ObservedBody<
            agentcore_tower::body::PeekedBody<
                agentcore_tower::body::PeekedBody<agentcore_tower::body::PeekedBody<TestBody>>,
            >,
        >,
    >,
    Error,
>;

/// The recommended stack over a scripted server: returns the outcome, the faults the server
/// met in order, and how many times the call ran.
async fn run(
    guard: ReplayGuardLayer,
    faults: &[Fault],
    request: Request<Full<Bytes>>,
) -> (Outcome2, Vec<Fault>, usize) {
    let faults_left = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        faults.to_vec(),
    )));
    let met = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let inner = Scripted::with_fallback([], {
        let faults_left = faults_left.clone();
        let met = met.clone();
        move || {
            let fault = faults_left.lock().unwrap().pop_front().unwrap_or(Fault::Ok);
            met.lock().unwrap().push(fault);
            fault.step()
        }
    });
    let svc = ServiceBuilder::new()
        .layer(guard)
        .layer(ThrottleRetryLayer::new())
        .layer(SessionBusyRetryLayer::new())
        .service(inner);
    let outcome = svc.oneshot(request).await;
    let met = met.lock().unwrap().clone();
    let executions = met.iter().filter(|f| f.runs()).count();
    (outcome, met, executions)
}

fn record_of(outcome: &Outcome2) -> AttemptRecord {
    match outcome {
        Ok(r) => AttemptRecord::of_response(r).expect("a record").clone(),
        Err(e) => e.record().expect("a record").clone(),
    }
}

#[tokio::test(start_paused = true)]
async fn an_undeclared_tool_call_is_not_re_sent_after_a_drop() {
    let (outcome, met, executions) = run(
        ReplayGuardLayer::new(),
        &[Fault::DropAfterRun],
        tools_call("charge"),
    )
    .await;
    assert_eq!((met.len(), executions), (1, 1));
    let error = outcome.as_ref().unwrap_err();
    assert_eq!(error.failure_kind(), FailureKind::ConnectionDropped);
    let record = record_of(&outcome);
    assert_eq!(record.len(), 1);
    let attempt = &record.attempts()[0];
    assert_eq!(
        attempt.outcome(),
        &Outcome::Failure(FailureKind::ConnectionDropped)
    );
    assert_eq!(
        attempt.decisions().last().unwrap().verdict(),
        &Verdict::Forbidden {
            cause: "connection dropped",
            reason: "tools/call `charge` is not declared replayable".into()
        }
    );
    assert_eq!(
        record.to_string(),
        "#1 failed: connection dropped -> replay_guard: delivered (connection dropped, but a re-send is forbidden: tools/call `charge` is not declared replayable); effect unknown"
    );
    // The original failure stays reachable.
    let source = std::error::Error::source(error).unwrap();
    assert_eq!(source.to_string(), "reset");
}

#[tokio::test(start_paused = true)]
async fn a_declared_tool_is_re_sent_on_the_apps_word() {
    let guard = ReplayGuardLayer::new().idempotent_tools(["lookup"]);
    let (outcome, met, executions) = run(
        guard,
        &[Fault::DropAfterRun, Fault::ServerError],
        tools_call("lookup"),
    )
    .await;
    assert_eq!(met, [Fault::DropAfterRun, Fault::ServerError, Fault::Ok]);
    assert_eq!(executions, 3);
    let response = outcome.unwrap();
    assert_eq!(response.status(), 200);
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    assert_eq!(attempts.len(), 3);
    for a in &attempts[..2] {
        let d = a.decisions().last().unwrap();
        assert_eq!(d.layer(), "replay_guard");
        let p = d.permission().unwrap();
        assert_eq!(
            (p.by, p.assumes),
            (By::AppDeclaration, Assumption::Idempotent)
        );
    }
    assert_eq!(
        attempts[1].outcome(),
        &Outcome::Response {
            status: http::StatusCode::INTERNAL_SERVER_ERROR,
            error_type: agentcore_tower::record::ErrorType::Named("InternalServerException".into())
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_strict_tool_is_not_re_sent_even_after_a_refusal() {
    let guard = ReplayGuardLayer::new()
        .idempotent_tools(["charge"])
        .strict_tools(["charge"]);
    for refusal in [Fault::Busy200, Fault::Busy409, Fault::Throttled] {
        let (outcome, met, executions) = run(guard.clone(), &[refusal], tools_call("charge")).await;
        assert_eq!((met.len(), executions), (1, 0), "{refusal:?}");
        let response = outcome.unwrap();
        let record = AttemptRecord::of_response(&response).unwrap().attempts();
        assert!(
            matches!(
                record[0].decisions()[0].verdict(),
                Verdict::Forbidden { reason, .. } if reason == "tools/call `charge` is strict: never sent again"
            ),
            "{refusal:?}: {:?}",
            record[0]
        );
        let status = response.status().as_u16();
        let (body, _) = read_all(response.into_body()).await;
        match refusal {
            Fault::Busy200 => assert_eq!((status, &body[..]), (200, &br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#[..])),
            Fault::Busy409 => assert_eq!(status, 409),
            _ => assert_eq!(status, 429),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn refusals_are_re_sent_for_any_tool_by_the_adapters_policy() {
    let (outcome, met, executions) = run(
        ReplayGuardLayer::new(),
        &[Fault::Busy409, Fault::Throttled, Fault::Busy200],
        tools_call("charge"),
    )
    .await;
    assert_eq!(
        met,
        [Fault::Busy409, Fault::Throttled, Fault::Busy200, Fault::Ok]
    );
    assert_eq!(executions, 1);
    let response = outcome.unwrap();
    assert_eq!(response.status(), 200);
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    let perms: Vec<_> = attempts[..3]
        .iter()
        .map(|a| {
            let d = a
                .decisions()
                .iter()
                .find(|d| matches!(d.verdict(), Verdict::SentAgain { .. }))
                .unwrap();
            (
                d.layer(),
                d.permission().unwrap().by,
                d.permission().unwrap().assumes,
            )
        })
        .collect();
    assert_eq!(
        perms,
        [
            (
                "session_busy",
                By::Adapter,
                Assumption::RefusedBeforeExecution
            ),
            ("throttle", By::Adapter, Assumption::RejectedBeforeExecution),
            (
                "session_busy",
                By::Adapter,
                Assumption::RefusedBeforeExecution
            ),
        ]
    );
}

/// A batch of a `tools/list` and a `tools/call` of `tool`, its answer lost after it ran,
/// through a guard that declares `lookup` idempotent: the outcome and the faults met.
async fn lost_batch_calling(tool: &str) -> (Outcome2, Vec<Fault>) {
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":1,"method":"tools/list"}},{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}]"#
    );
    let request = Request::post("https://runtime.example/mcp?secret=query")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(batch)))
        .unwrap();
    let guard = ReplayGuardLayer::new().idempotent_tools(["lookup"]);
    let (outcome, met, _) = run(guard, &[Fault::DropAfterRun], request).await;
    (outcome, met)
}

#[tokio::test(start_paused = true)]
async fn a_batch_with_one_undeclared_member_is_not_re_sent() {
    let (outcome, met) = lost_batch_calling("charge").await;
    assert_eq!(met.len(), 1);
    let record = record_of(&outcome).attempts();
    assert!(matches!(
        record[0].decisions()[0].verdict(),
        Verdict::Forbidden { reason, .. }
            if reason == "a batch member is not replayable: tools/call `charge` is not declared replayable"
    ));
    // Every member replayable: re-sent.
    let (outcome, met) = lost_batch_calling("lookup").await;
    assert_eq!(met.len(), 2);
    let attempts = record_of(&outcome).attempts();
    assert_eq!(
        attempts[0].decisions()[0].permission().unwrap().by,
        By::AppDeclaration
    );
}

#[tokio::test(start_paused = true)]
async fn a_never_written_failure_is_re_sent_for_any_request() {
    let (outcome, met, executions) = run(
        ReplayGuardLayer::new().strict_tools(["charge"]),
        &[Fault::NeverSent],
        tools_call("charge"),
    )
    .await;
    assert_eq!(met, [Fault::NeverSent, Fault::Ok]);
    assert_eq!(executions, 1);
    let attempts = record_of(&outcome).attempts();
    assert_eq!(
        attempts[0].outcome(),
        &Outcome::Failure(FailureKind::NeverSent)
    );
    let p = attempts[0].decisions()[0].permission().unwrap();
    assert_eq!((p.by, p.assumes), (By::Transport, Assumption::NotDelivered));
}

#[tokio::test(start_paused = true)]
async fn protocol_reads_are_replayable_initialize_is_not() {
    let reads = [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1"}}"#,
    ];
    for read in reads {
        let (outcome, met, _) = run(
            ReplayGuardLayer::new(),
            &[Fault::TimeoutAfterRun],
            rpc(read),
        )
        .await;
        assert_eq!(met.len(), 2, "{read}");
        let p = *record_of(&outcome).attempts()[0].decisions()[0]
            .permission()
            .unwrap();
        assert_eq!(
            (p.by, p.assumes),
            (By::ProtocolRead, Assumption::Idempotent),
            "{read}"
        );
    }
    let not = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"t-1"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"t-1"}}"#,
        "not json",
        "",
    ];
    for body in not {
        let (_, met, _) = run(ReplayGuardLayer::new(), &[Fault::ServerError], rpc(body)).await;
        assert_eq!(met.len(), 1, "{body}");
    }
    // Configurable: no protocol reads at all.
    let (_, met, _) = run(
        ReplayGuardLayer::new().protocol_reads(Vec::<String>::new()),
        &[Fault::DropAfterRun],
        rpc(reads[0]),
    )
    .await;
    assert_eq!(met.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_predicate_sees_method_tool_and_arguments() {
    let guard = ReplayGuardLayer::new().replayable_if(|c| {
        c.method() == "tools/call"
            && c.tool() == Some("charge")
            && c.arguments()
                .and_then(|a| a.get("cents"))
                .and_then(|v| v.as_u64())
                == Some(100)
    });
    let (_, met, _) = run(guard.clone(), &[Fault::DropAfterRun], tools_call("charge")).await;
    assert_eq!(met.len(), 2);
    let (_, met, _) = run(guard, &[Fault::DropAfterRun], tools_call("refund")).await;
    assert_eq!(met.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_rule_is_made_once_and_only_when_a_failure_asks_for_it() {
    // The predicate runs when the guard makes the call's rule: never for a call that succeeds
    // at once, once for a call that failed twice (each a failure that may have run).
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    let guard = ReplayGuardLayer::new().replayable_if(move |c| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        c.tool() == Some("charge")
    });
    let (_, met, _) = run(guard.clone(), &[Fault::Ok], tools_call("charge")).await;
    assert_eq!(met.len(), 1);
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    let faults = [Fault::DropAfterRun, Fault::ServerError, Fault::Ok];
    let (_, met, _) = run(guard, &faults, tools_call("charge")).await;
    assert_eq!(met.len(), 3);
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// A `tools/call` of `tool` carrying the per-request `override_`.
fn overridden(tool: &str, override_: ReplayOverride) -> Request<Full<Bytes>> {
    let mut request = tools_call(tool);
    request.extensions_mut().insert(override_);
    request
}

#[tokio::test(start_paused = true)]
async fn a_per_request_override_wins() {
    let request = overridden("charge", ReplayOverride::Replayable);
    let (_, met, _) = run(ReplayGuardLayer::new(), &[Fault::DropAfterRun], request).await;
    assert_eq!(met.len(), 2);

    let lookup_idempotent = || ReplayGuardLayer::new().idempotent_tools(["lookup"]);
    let request = overridden("lookup", ReplayOverride::NotReplayable);
    let (_, met, _) = run(lookup_idempotent(), &[Fault::DropAfterRun], request).await;
    assert_eq!(met.len(), 1);

    let request = overridden("lookup", ReplayOverride::Strict);
    let (_, met, _) = run(lookup_idempotent(), &[Fault::Throttled], request).await;
    assert_eq!(met.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_guard_honours_retry_after_on_a_5xx_within_its_ceiling() {
    let inner = Scripted::new([
        Step::Respond(response(503, &[("retry-after", "2")], b"")),
        Step::Respond(response(503, &[("retry-after", "60")], b"")),
    ]);
    let shared = inner.shared();
    let svc = ReplayGuardLayer::new().layer(inner);
    let start = tokio::time::Instant::now();
    let response = svc
        .oneshot(rpc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(response.status(), 503);
    assert_eq!(shared.calls(), 2);
    let attempts = AttemptRecord::of_response(&response).unwrap().attempts();
    assert!(matches!(
        attempts[1].decisions()[0].verdict(),
        Verdict::WaitCeiling { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn hints_are_learned_only_when_asked() {
    let tools_list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[
        {"name":"lookup","inputSchema":{},"annotations":{"idempotentHint":true}},
        {"name":"read","inputSchema":{},"annotations":{"readOnlyHint":true}},
        {"name":"charge","inputSchema":{},"annotations":{"idempotentHint":false}},
        {"name":"wipe","inputSchema":{},"annotations":{"idempotentHint":true,"destructiveHint":true}}]}}"#;
    for learn in [false, true] {
        let guard = ReplayGuardLayer::new().learn_idempotent_hints(learn);
        let inner = Scripted::with_fallback(
            [Step::Respond(response(
                200,
                &[("content-type", "application/json")],
                tools_list,
            ))],
            || Fault::DropAfterRun.step(),
        );
        let shared = inner.shared();
        let svc = guard.layer(inner);
        let list = svc
            .clone()
            .oneshot(rpc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
            .await
            .unwrap();
        let (body, _) = read_all(list.into_body()).await;
        assert_eq!(
            &body[..],
            &tools_list[..],
            "the answer passes through untouched"
        );
        assert_eq!(
            guard.learned_tools(),
            if learn {
                vec!["lookup", "read"]
            } else {
                vec![]
            }
        );
        let before = shared.calls();
        let error = svc.clone().oneshot(tools_call("lookup")).await.unwrap_err();
        assert_eq!(shared.calls() - before, if learn { 3 } else { 1 });
        if learn {
            let p = *error.record().unwrap().attempts()[0].decisions()[0]
                .permission()
                .unwrap();
            assert_eq!(p.by, By::ServerAnnotation);
        }
        let before = shared.calls();
        svc.clone().oneshot(tools_call("charge")).await.unwrap_err();
        assert_eq!(shared.calls() - before, 1, "annotated not idempotent");
        let before = shared.calls();
        svc.oneshot(tools_call("wipe")).await.unwrap_err();
        assert_eq!(shared.calls() - before, 1, "idempotent but destructive");
    }
}

#[tokio::test(start_paused = true)]
async fn hints_are_learned_from_sse_answers_too() {
    let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\n data:\"result\":{\"tools\":[{\"name\":\"lookup\",\"inputSchema\":{},\"annotations\":{\"idempotentHint\":true}}]}}\n\n";
    let guard = ReplayGuardLayer::new().learn_idempotent_hints(true);
    let inner = Scripted::new([Step::Respond(response(
        200,
        &[("content-type", "text/event-stream")],
        sse,
    ))]);
    let svc = guard.layer(inner);
    let list = svc
        .oneshot(rpc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
        .await
        .unwrap();
    read_all(list.into_body()).await;
    // `data:` then ` data:` — only lines starting with "data:" count; the second does not.
    assert!(guard.learned_tools().is_empty());
    let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata:\"result\":{\"tools\":[{\"name\":\"lookup\",\"inputSchema\":{},\"annotations\":{\"idempotentHint\":true}}]}}\n\n";
    let inner = Scripted::new([Step::Respond(response(
        200,
        &[("content-type", "text/event-stream")],
        sse,
    ))]);
    let list = guard
        .layer(inner)
        .oneshot(rpc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#))
        .await
        .unwrap();
    read_all(list.into_body()).await;
    assert_eq!(guard.learned_tools(), vec!["lookup"]);
}

#[tokio::test(start_paused = true)]
async fn the_guard_polls_readiness_before_every_attempt() {
    let inner = Scripted::new([
        Fault::DropAfterRun.step(),
        Fault::ServerError.step(),
        Fault::Ok.step(),
    ]);
    let shared = inner.shared();
    let svc = ReplayGuardLayer::new().layer(inner);
    svc.oneshot(rpc(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#))
        .await
        .unwrap();
    assert_eq!(shared.calls(), 3);
    assert_eq!(
        shared
            .unready_calls
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

const FAULTS: [Fault; 8] = [
    Fault::Ok,
    Fault::DropAfterRun,
    Fault::ServerError,
    Fault::TimeoutAfterRun,
    Fault::Throttled,
    Fault::Busy200,
    Fault::Busy409,
    Fault::NeverSent,
];

/// For random fault scripts and declarations (seeded): no undeclared tools/call is sent again
/// after a failure that may have run; a strict one is never sent again after anything but a
/// never-sent failure; every declared one whose script fits the limits is delivered.
#[test]
fn undeclared_calls_never_run_twice() {
    let mut rng = fastrand::Rng::with_seed(0x7e9);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    for _ in 0..300 {
        let faults: Vec<Fault> = (0..rng.usize(0..7))
            .map(|_| FAULTS[rng.usize(0..FAULTS.len())])
            .collect();
        let (declared, strict) = (rng.bool(), rng.bool());
        let mut guard = ReplayGuardLayer::new();
        if declared {
            guard = guard.idempotent_tools(["charge"]);
        }
        if strict {
            guard = guard.strict_tools(["charge"]);
        }
        let (outcome, met, executions) = rt.block_on(run(guard, &faults, tools_call("charge")));
        let case = format!("declared {declared}, strict {strict}, met {met:?}");

        // Every attempt is in the record, and only those.
        assert_eq!(record_of(&outcome).len(), met.len(), "{case}");
        // Nothing follows a forbidden re-send.
        for f in &met[..met.len() - 1] {
            if !declared || strict {
                assert!(!f.may_have_run(), "re-sent after {f:?}: {case}");
            }
            if strict {
                assert!(*f == Fault::NeverSent, "strict re-sent after {f:?}: {case}");
            }
        }
        if !declared || strict {
            assert!(executions <= 1, "{case}");
        }
        // What was delivered is what the last attempt got.
        let last = *met.last().unwrap();
        match (&outcome, last) {
            (Ok(r), Fault::Ok | Fault::Busy200) => assert_eq!(r.status(), 200, "{case}"),
            (Ok(r), Fault::ServerError) => assert_eq!(r.status(), 500, "{case}"),
            (Ok(r), Fault::Throttled) => assert_eq!(r.status(), 429, "{case}"),
            (Ok(r), Fault::Busy409) => assert_eq!(r.status(), 409, "{case}"),
            (Err(_), Fault::DropAfterRun | Fault::TimeoutAfterRun | Fault::NeverSent) => {}
            (other, last) => panic!(
                "{last:?} delivered as {:?}: {case}",
                other.as_ref().map(|r| r.status())
            ),
        }
        // Declared, not strict, and at most two faults: always delivered.
        if declared && !strict && faults.iter().filter(|f| **f != Fault::Ok).count() <= 2 {
            let first_ok = faults
                .iter()
                .position(|f| *f == Fault::Ok)
                .unwrap_or(faults.len());
            if faults[..first_ok].len() <= 2 {
                assert_eq!(last, Fault::Ok, "{case}");
                assert_eq!(outcome.unwrap().status(), 200, "{case}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn on_record_hands_over_every_finished_record() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let guard = ReplayGuardLayer::new()
        .idempotent_tools(["lookup"])
        .on_record({
            let seen = seen.clone();
            move |record| seen.lock().unwrap().push(record.to_string())
        });
    let (outcome, _, _) = run(guard.clone(), &[Fault::DropAfterRun], tools_call("lookup")).await;
    assert!(outcome.is_ok());
    let (outcome, _, _) = run(guard, &[Fault::DropAfterRun], tools_call("charge")).await;
    assert!(outcome.is_err());
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.len(),
        2,
        "one record per call, for answers and errors alike"
    );
    assert_eq!(seen[0].lines().count(), 2);
    assert!(
        seen[1].contains("tools/call `charge` is not declared replayable"),
        "{}",
        seen[1]
    );
}
