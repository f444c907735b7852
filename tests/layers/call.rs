//! The call's promises, whatever order the layers are stacked in: each kind of failure waited
//! out within its own allowance, one ceiling in time, one replay rule, one record written at
//! dispatch, one runtime session per MCP session — against the emulator on loopback, and in
//! memory where a paused clock helps.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentcore_tower::invoke::{RuntimeSessions, SigV4InvokeLayer};
use agentcore_tower::{
    AttemptRecord, CallBudget, Error, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer,
    recommended_layers,
    record::{Outcome, Verdict},
    rule::By,
};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, FaultRates};
use bytes::Bytes;
use common::*;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceBuilder, ServiceExt};

const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";

type Stack = BoxCloneService<Request<Full<Bytes>>, Response<TestBody>, Error>;

/// A signer for in-memory tests: a made-up runtime, static credentials.
fn test_signer() -> agentcore_tower::invoke::SigV4InvokeLayerBuilder {
    SigV4InvokeLayer::builder(
        agentcore_tower::InvokeTarget::arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123",
        ),
        aws_credential_types::Credentials::new("AKID", "secret", None, None, "test"),
    )
}

/// Short schedules, so a run is brief and the allowances are reached. Each kind of failure has
/// its own: session busy at most 6 attempts (its 40 ms ceiling holds no more than 5 waits of at
/// least 1, 2, 4, 8 and 16 ms), throttling 3 within 30 ms, the guard's re-sends after a failure
/// that may have run 3 within 20 ms. A call makes at most the first attempt and the re-sends of
/// each kind, 1 + 5 + 2 + 2, and waits at most the three ceilings.
const CALL_CAP: usize = 10;
const BUSY_CEILING: Duration = Duration::from_millis(40);
const THROTTLE_CEILING: Duration = Duration::from_millis(30);
const GUARD_CEILING: Duration = Duration::from_millis(20);
const CALL_CEILING: Duration = Duration::from_millis(90);

fn guard() -> ReplayGuardLayer {
    ReplayGuardLayer::new()
        .idempotent_tools(["add"])
        .strict_tools(["echo"])
        .base_delay(Duration::from_millis(2))
        .max_total_wait(GUARD_CEILING)
}

fn throttle() -> ThrottleRetryLayer {
    ThrottleRetryLayer::new()
        .base_delay(Duration::from_millis(2))
        .max_total_wait(THROTTLE_CEILING)
}

fn busy() -> SessionBusyRetryLayer {
    SessionBusyRetryLayer::new()
        .base_delay(Duration::from_millis(2))
        .max_total_wait(BUSY_CEILING)
}

/// The four layers in the order numbered by `order` (a permutation of 0..4: guard, throttle,
/// session busy, signer), outer to inner, over hyper-util's client, boxed to one type.
macro_rules! stack_in_order {
    ($order:expr, $signer:expr, $($a:tt $b:tt $c:tt $d:tt),+ $(,)?) => {
        match $order {
            $([$a, $b, $c, $d] => {
                let builder = ServiceBuilder::new();
                let builder = stack_in_order!(@layer builder, $a, $signer);
                let builder = stack_in_order!(@layer builder, $b, $signer);
                let builder = stack_in_order!(@layer builder, $c, $signer);
                let builder = stack_in_order!(@layer builder, $d, $signer);
                boxed_stack(builder.service(http_client()))
            })+
            other => unreachable!("not a permutation: {other:?}"),
        }
    };
    (@layer $builder:ident, 0, $signer:expr) => { $builder.layer(guard()) };
    (@layer $builder:ident, 1, $signer:expr) => { $builder.layer(throttle()) };
    (@layer $builder:ident, 2, $signer:expr) => { $builder.layer(busy()) };
    (@layer $builder:ident, 3, $signer:expr) => { $builder.layer($signer.clone()) };
}

fn boxed_stack<S, B>(service: S) -> Stack
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>, Error = Error>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    BoxCloneService::new(service.map_response(|response: Response<B>| response.map(boxed)))
}

fn stack(order: [u8; 4], signer: &SigV4InvokeLayer) -> Stack {
    stack_in_order!(order, signer,
        0 1 2 3, 0 1 3 2, 0 2 1 3, 0 2 3 1, 0 3 1 2, 0 3 2 1,
        1 0 2 3, 1 0 3 2, 1 2 0 3, 1 2 3 0, 1 3 0 2, 1 3 2 0,
        2 0 1 3, 2 0 3 1, 2 1 0 3, 2 1 3 0, 2 3 0 1, 2 3 1 0,
        3 0 1 2, 3 0 2 1, 3 1 0 2, 3 1 2 0, 3 2 0 1, 3 2 1 0,
    )
}

fn permutations() -> Vec<[u8; 4]> {
    let mut all = Vec::new();
    for a in 0..4u8 {
        for b in 0..4u8 {
            for c in 0..4u8 {
                for d in 0..4u8 {
                    let order = [a, b, c, d];
                    if HashSet::from(order).len() == 4 {
                        all.push(order);
                    }
                }
            }
        }
    }
    all
}

fn waited(record: &AttemptRecord) -> Duration {
    resends(record, None).1
}

/// The re-sends `layer` made (every layer's with `None`), and their waits in all.
fn resends(record: &AttemptRecord, layer: Option<&str>) -> (usize, Duration) {
    record
        .attempts()
        .iter()
        .flat_map(|a| a.decisions().to_vec())
        .filter(|d| layer.is_none_or(|layer| d.layer() == layer))
        .filter_map(|d| match d.verdict() {
            Verdict::SentAgain { wait, .. } => Some(*wait),
            _ => None,
        })
        .fold((0, Duration::ZERO), |(n, all), wait| (n + 1, all + wait))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_keeps_the_calls_promises_under_mixed_faults() {
    let orders = permutations();
    assert_eq!(orders.len(), 24);
    let mut attempts_by_order = Vec::new();
    let mut faults = [0u64; 4];
    for (n, order) in orders.into_iter().enumerate() {
        let emulator = Emulator::start(EmulatorConfig::default().fault_rates(FaultRates {
            busy: 0.15,
            throttle: 0.15,
            drop_after_run: 0.05,
            server_error: 0.05,
            seed: 100 + n as u64,
        }))
        .await
        .unwrap();
        let signer = emulator.signer().build().unwrap();
        let stack = stack(order, &signer);
        let mut recorded = 0u64;
        let mut recorded_by_id = HashMap::new();
        for id in 0..40u64 {
            let request = match id % 4 {
                0 => tool_call(id, "counter", json!({})),
                1 => tool_call(id, "echo", json!({"text": "hi"})),
                2 => tool_call(id, "add", json!({"a": id, "b": 1})),
                _ => rpc_request(id, "ping", json!({})),
            };
            let record = match stack.clone().oneshot(request).await {
                Ok(response) => {
                    let record = AttemptRecord::of_response(&response)
                        .unwrap_or_else(|| panic!("{order:?}: the record is handed back"))
                        .clone();
                    let _ = response.into_body().collect().await;
                    record
                }
                Err(error) => error
                    .record()
                    .unwrap_or_else(|| panic!("{order:?}: every error carries the record"))
                    .clone(),
            };
            assert!(
                record.len() <= CALL_CAP,
                "{order:?}: call {id} made {} attempts:\n{record}",
                record.len()
            );
            assert!(
                waited(&record) <= CALL_CEILING,
                "{order:?}: call {id} waited {:?}:\n{record}",
                waited(&record)
            );
            // Each kind within its own allowance, whatever the others spent.
            for (layer, cap, ceiling) in [
                ("session_busy", 6, BUSY_CEILING),
                ("throttle", 3, THROTTLE_CEILING),
                ("replay_guard", 3, GUARD_CEILING),
            ] {
                let (sent_again, waited) = resends(&record, Some(layer));
                assert!(
                    sent_again < cap && waited <= ceiling,
                    "{order:?}: call {id}: {layer} re-sent {sent_again} times, {waited:?}:\n{record}"
                );
            }
            assert!(
                record
                    .attempts()
                    .iter()
                    .all(|a| *a.outcome() != Outcome::Pending),
                "{order:?}: every attempt of an ended call has its outcome:\n{record}"
            );
            recorded += record.len() as u64;
            recorded_by_id.insert(id.to_string(), record.len());
        }
        let audit = emulator.audit();
        let mut seen_by_id: HashMap<String, usize> = HashMap::new();
        for received in &audit.received {
            *seen_by_id.entry(received.id.clone().unwrap()).or_default() += 1;
        }
        assert_eq!(
            seen_by_id, recorded_by_id,
            "{order:?}: each call's record lists the attempts the emulator saw of it"
        );
        for ((tool, id), runs) in &audit.executions_by_id {
            if tool == "counter" || tool == "echo" {
                assert_eq!(*runs, 1, "{order:?}: `{tool}` (id {id}) ran {runs} times");
            }
        }
        assert_eq!(
            recorded, audit.requests,
            "{order:?}: the records list every attempt the emulator saw"
        );
        assert!(
            audit.requests > 40,
            "{order:?}: faults were met and re-sent"
        );
        faults = [
            faults[0] + audit.busy_refusals,
            faults[1] + audit.throttled,
            faults[2] + audit.dropped,
            faults[3] + audit.server_errors,
        ];
        attempts_by_order.push((order, audit.requests));
    }
    println!("requests seen per order (40 calls each): {attempts_by_order:?}");
    println!("busy, throttled, dropped after running, 500s: {faults:?}");
    assert!(faults.iter().all(|n| *n > 0), "every kind of fault was met");
}

/// A server that refuses forever, alternating the two refusals.
fn refusing_forever() -> Scripted {
    let n = AtomicU32::new(0);
    Scripted::with_fallback([], move || {
        if n.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
            Step::Respond(response(429, &[("retry-after", "1")], b"{}"))
        } else {
            Step::Respond(response(
                200,
                &[("content-type", "application/json")],
                br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#,
            ))
        }
    })
}

#[tokio::test(start_paused = true)]
async fn stacked_retry_layers_share_each_kinds_allowance() {
    // Before the call's budget: guard 3 × throttle 3 × session busy 6 = 54 attempts. Then one
    // cap for the call, the largest of its layers', counting every refusal: 3 here, the
    // throttle's cap spent by busy refusals. Now each kind has its allowance, counted over
    // every layer and spent only by refusals of that kind.
    let stack = |inner| {
        ServiceBuilder::new()
            .layer(ReplayGuardLayer::new())
            .layer(ThrottleRetryLayer::new())
            .layer(SessionBusyRetryLayer::new().max_attempts(6))
            .service(inner)
    };
    let ping = || json_request(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);

    // 429, busy, 429, busy, 429: the throttle's third attempt is its last; busy has used 3 of
    // its 6.
    let inner = refusing_forever();
    let shared = inner.shared();
    let started = tokio::time::Instant::now();
    let answer = stack(inner).oneshot(ping()).await.unwrap();
    let record = AttemptRecord::of_response(&answer).unwrap().clone();
    assert_eq!(shared.calls(), 5, "{record}");
    assert_eq!(answer.status(), 429);
    assert!(
        matches!(
            record.attempts()[4].decisions()[0].verdict(),
            Verdict::AttemptsExhausted {
                max_attempts: 3,
                cause: "HTTP 429",
            }
        ),
        "{record}"
    );
    assert_eq!(resends(&record, Some("throttle")).0, 2);
    assert_eq!(resends(&record, Some("session_busy")).0, 2);
    assert_eq!(
        started.elapsed(),
        waited(&record),
        "what is recorded is what was waited"
    );

    // Only session-busy refusals: the largest cap of the stack, 6, within its 30 s ceiling.
    let inner = Scripted::with_fallback([], || {
        Step::Respond(response(
            200,
            &[("content-type", "application/json")],
            br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#,
        ))
    });
    let shared = inner.shared();
    let answer = stack(inner).oneshot(ping()).await.unwrap();
    let record = AttemptRecord::of_response(&answer).unwrap().clone();
    assert_eq!(shared.calls(), 6, "{record}");
    assert!(waited(&record) <= Duration::from_secs(30), "{record}");
}

const BUSY: &[u8] = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;

/// A burst, as a new runtime session meets it: 12 s of session-busy refusals (409 and -32005,
/// alternating) while it provisions, then one 429 with `Retry-After: 1`, then the answer.
fn cold_start_then_throttled() -> Scripted {
    let mut steps: Vec<Step> = (0..13)
        .map(|n| {
            Step::Respond(if n % 2 == 0 {
                response(
                    409,
                    &[("x-amzn-errortype", "RetryableConflictException:http://internal.amazon.com/coral/com.amazonaws.bedrockagentcore/")],
                    b"{}",
                )
            } else {
                response(200, &[("content-type", "application/json")], BUSY)
            })
        })
        .collect();
    steps.push(Step::Respond(response(429, &[("retry-after", "1")], b"{}")));
    Scripted::with_fallback(steps, || {
        Step::Respond(response(
            200,
            &[("content-type", "application/json")],
            br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        ))
    })
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_then_a_429_is_waited_out_with_the_defaults_in_every_order() {
    let guard = ReplayGuardLayer::new;
    let throttle = ThrottleRetryLayer::new;
    let busy = SessionBusyRetryLayer::new;
    macro_rules! each_order {
        ($($a:ident $b:ident $c:ident),+) => {[$({
            let inner = cold_start_then_throttled();
            let shared = inner.shared();
            let service = ServiceBuilder::new().layer($a()).layer($b()).layer($c()).service(inner);
            let started = tokio::time::Instant::now();
            let ping = json_request(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
            let answer = service.oneshot(ping).await.unwrap();
            let record = AttemptRecord::of_response(&answer).unwrap().clone();
            (stringify!($a $b $c), answer.status(), shared.calls(), record, started.elapsed())
        }),+]};
    }
    for (order, status, calls, record, took) in each_order!(
        guard throttle busy, guard busy throttle, throttle guard busy,
        throttle busy guard, busy guard throttle, busy throttle guard
    ) {
        assert_eq!(status, 200, "{order}: {record}");
        assert_eq!(
            calls, 15,
            "{order}: 13 refusals, a 429, the answer:\n{record}"
        );
        assert_eq!(resends(&record, Some("session_busy")).0, 13, "{order}");
        let (throttled, waited) = resends(&record, Some("throttle"));
        assert_eq!((throttled, waited), (1, Duration::from_secs(1)), "{order}");
        assert!(took < Duration::from_secs(30), "{order}: {took:?}");
        assert_eq!(took, self::waited(&record), "{order}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_apps_budget_bounds_every_layer() {
    let inner = refusing_forever();
    let shared = inner.shared();
    let stack = ServiceBuilder::new()
        .layer(SessionBusyRetryLayer::new())
        .layer(ThrottleRetryLayer::new())
        .service(inner);
    let mut request = json_request(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    request
        .extensions_mut()
        .insert(CallBudget::new().max_attempts(3));
    let answer = stack.clone().oneshot(request).await.unwrap();
    assert_eq!(shared.calls(), 3);
    let record = AttemptRecord::of_response(&answer).unwrap();
    assert!(matches!(
        record.attempts()[2].decisions()[0].verdict(),
        Verdict::AttemptsExhausted {
            max_attempts: 3,
            ..
        }
    ));

    // A deadline 1.5 s away: the 1 s Retry-After fits once, not twice.
    let inner = Scripted::with_fallback([], || {
        Step::Respond(response(429, &[("retry-after", "1")], b"{}"))
    });
    let shared = inner.shared();
    let stack = ThrottleRetryLayer::new().layer(inner);
    let mut request = json_request(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    let started = tokio::time::Instant::now();
    request
        .extensions_mut()
        .insert(CallBudget::new().deadline(started + Duration::from_millis(1500)));
    let response = stack.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 2);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "no wait past the deadline"
    );
    assert_eq!(
        verdict_on(&response, 1),
        Verdict::WaitCeiling {
            cause: "HTTP 429",
            wait: Duration::from_secs(1),
            remaining: Duration::from_millis(500),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_layer_above_the_guard_asks_the_guards_rule() {
    let inner = Scripted::new([Step::Respond(response(429, &[("retry-after", "0")], b"{}"))]);
    let shared = inner.shared();
    let stack = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer(ReplayGuardLayer::new().strict_tools(["charge"]))
        .service(inner);
    let response = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 1, "`charge` is strict: sent once");
    let record = AttemptRecord::of_response(&response).unwrap();
    assert_eq!(
        record.to_string(),
        "#1 HTTP 429 -> throttle: delivered (HTTP 429, but a re-send is forbidden: tools/call `charge` is strict: never sent again); effect unknown"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_runtime_session_keeps_one_client_token_over_its_attempts() {
    let inner = Scripted::new([
        Step::Respond(response(
            500,
            &[("x-amzn-errortype", "InternalServerException")],
            b"{}",
        )),
        Step::Respond(response(200, &[], b"{}")),
    ]);
    let shared = inner.shared();
    let signer = test_signer().stop_session_on_delete(true).build().unwrap();
    let stack = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(signer.clone())
        .service(inner);
    let delete = Request::delete("http://mcp.invalid/mcp")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = stack.oneshot(delete).await.unwrap();
    assert_eq!(response.status(), 200);
    let requests = shared.requests.lock().unwrap().clone();
    assert_eq!(
        requests.len(),
        2,
        "the 500 was re-sent: a stop is idempotent"
    );
    let token = |i: usize| -> Value { serde_json::from_slice(&requests[i].1).unwrap() };
    assert_eq!(token(0)["clientToken"], token(1)["clientToken"]);
    assert_eq!(token(0)["clientToken"].as_str().unwrap().len(), 36);
    for (parts, _) in &requests {
        assert_eq!(
            parts.headers[RUNTIME_SESSION_ID],
            signer.runtime_session_id().as_str()
        );
    }
    let record = AttemptRecord::of_response(&response).unwrap();
    let permission = record.attempts()[0].decisions()[0].permission().copied();
    assert_eq!(permission.map(|p| p.by), Some(By::IdempotentMethod));
}

#[tokio::test(start_paused = true)]
async fn a_request_naming_its_runtime_session_changes_nothing_for_the_others() {
    let echo_session =
        |id: &'static str| Step::Respond(response(200, &[(RUNTIME_SESSION_ID, id)], b"{}"));
    let own = "own-session-0123456789abcdef0123456789";
    let inner = Scripted::new([echo_session(own), echo_session("x")]);
    let shared = inner.shared();
    let signer = test_signer().build().unwrap();
    let layers_id = signer.runtime_session_id();
    let stack = ServiceBuilder::new().layer(signer.clone()).service(inner);
    let mut named = json_request(TOOLS_CALL);
    named
        .headers_mut()
        .insert(RUNTIME_SESSION_ID, own.parse().unwrap());
    stack.clone().oneshot(named).await.unwrap();
    assert_eq!(
        signer.runtime_session_id(),
        layers_id,
        "the layer's id stands"
    );
    stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    let requests = shared.requests.lock().unwrap().clone();
    assert_eq!(requests[0].0.headers[RUNTIME_SESSION_ID], own);
    assert_eq!(
        requests[1].0.headers[RUNTIME_SESSION_ID],
        layers_id.as_str()
    );
}

#[tokio::test(start_paused = true)]
async fn the_runtime_session_never_changes_between_the_attempts_of_a_call() {
    // Call A is refused and waits; meanwhile call B's answer names a new runtime session.
    let new_id = "new-session-0123456789abcdef0123456789";
    let inner = Scripted::new([
        Step::Respond(response(429, &[("retry-after", "1")], b"{}")),
        Step::Respond(response(200, &[(RUNTIME_SESSION_ID, new_id)], b"{}")),
        Step::Respond(response(200, &[], b"{}")),
    ]);
    let shared = inner.shared();
    let signer = test_signer().build().unwrap();
    let first_id = signer.runtime_session_id();
    let stack = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer(signer.clone())
        .service(inner);
    let a = tokio::spawn(stack.clone().oneshot(json_request(TOOLS_CALL)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(
        signer.runtime_session_id(),
        new_id,
        "B's answer was adopted"
    );
    a.await.unwrap().unwrap();
    let requests = shared.requests.lock().unwrap().clone();
    let ids: Vec<_> = requests
        .iter()
        .map(|(parts, _)| {
            parts.headers[RUNTIME_SESSION_ID]
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, [first_id.clone(), first_id.clone(), first_id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mcp_sessions_over_one_layer_each_keep_their_own_runtime_session() {
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .provisioning(Duration::from_millis(30))
            .fault_rates(FaultRates {
                busy: 0.1,
                throttle: 0.1,
                drop_after_run: 0.0,
                server_error: 0.0,
                seed: 5,
            }),
    )
    .await
    .unwrap();
    let signer = emulator
        .signer()
        .runtime_sessions(RuntimeSessions::PerMcpSession)
        .build()
        .unwrap();
    let stack = ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer,
        ))
        .service(http_client());
    let sessions = futures_util::future::join_all((0..50u64).map(|n| {
        let stack = stack.clone();
        async move {
            let initialize = rpc_request(n * 100, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
            let response = stack.clone().oneshot(initialize).await.unwrap();
            let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
            let (mcp_session, runtime_session) = (header("mcp-session-id"), header(RUNTIME_SESSION_ID));
            for k in 1..=4 {
                let mut call = tool_call(n * 100 + k, "add", json!({"a": n, "b": k}));
                call.headers_mut()
                    .insert("mcp-session-id", mcp_session.parse().unwrap());
                let response = stack.clone().oneshot(call).await.unwrap();
                assert_eq!(response.headers()[RUNTIME_SESSION_ID], runtime_session.as_str());
            }
            (mcp_session, runtime_session)
        }
    }))
    .await;
    let bound: HashMap<String, String> = sessions.iter().cloned().collect();
    let runtime_sessions: HashSet<&String> = bound.values().collect();
    assert_eq!(bound.len(), 50);
    assert_eq!(
        runtime_sessions.len(),
        50,
        "one runtime session per MCP session"
    );
    let audit = emulator.audit();
    let mut seen = 0;
    for received in &audit.received {
        let runtime = received.runtime_session_id.clone().unwrap();
        match &received.mcp_session_id {
            Some(mcp) => {
                seen += 1;
                assert_eq!(
                    bound[mcp], runtime,
                    "every attempt of {mcp} went to its own"
                );
            }
            None => assert!(runtime_sessions.contains(&runtime)),
        }
    }
    assert!(seen >= 200, "every call of every session was checked");
    assert!(
        audit.busy_refusals >= 50,
        "each new runtime session was waited out"
    );
    assert_eq!(audit.sessions_started, 50);
}

#[tokio::test]
async fn a_deadline_outside_the_stack_leaves_the_evidence_in_the_apps_record() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    emulator.push_fault(Fault::Slow(Duration::from_secs(3600)));
    let hooked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let guard = ReplayGuardLayer::new().on_record({
        let hooked = hooked.clone();
        move |record: &AttemptRecord| hooked.lock().unwrap().push(record.to_string())
    });
    let stack = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_millis(
            300,
        )))
        .layer(recommended_layers(
            guard,
            emulator.signer().build().unwrap(),
        ))
        .service(http_client());
    let record = AttemptRecord::new();
    let mut request = tool_call(1, "counter", json!({}));
    request.extensions_mut().insert(record.clone());
    let error = stack.oneshot(request).await.unwrap_err();
    assert!(error.is::<tower::timeout::error::Elapsed>());
    assert_eq!(emulator.counter(), 1, "the server received it and ran it");
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 1, "{record}");
    assert_eq!(attempts[0].outcome(), &Outcome::Pending);
    assert_eq!(
        attempts[0].decisions().last().map(|d| d.verdict().clone()),
        Some(Verdict::CallDropped)
    );
    assert_eq!(
        record.to_string(),
        "#1 sent, no answer yet -> replay_guard: call dropped before it ended (a deadline or cancellation outside); effect unknown"
    );
    assert_eq!(
        *hooked.lock().unwrap(),
        [record.to_string()],
        "on_record fired once"
    );
}

#[tokio::test]
async fn names_that_cannot_be_plain_headers_are_encoded_or_left_out() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let stack = ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build().unwrap(),
        ))
        .service(http_client());
    let uri = format!("file:///{}", "u".repeat(2000));
    let calls = [
        tool_call(1, "", json!({})),
        rpc_request(2, "prompts/get", json!({"name": "café"})),
        rpc_request(3, "resources/read", json!({"uri": uri})),
    ];
    for call in calls {
        let response = stack.clone().oneshot(call).await.unwrap();
        assert_eq!(response.status(), 200);
        let (body, _) = read_all(response.into_body()).await;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert!(answer["error"]["code"].is_i64(), "answered: {answer}");
    }
    let audit = emulator.audit();
    assert_eq!(audit.received.len(), 3);
    assert_eq!(audit.signature_failures, 0, "signed as sent");
    // Empty and too long: left out; non-ASCII: the MCP specification's Base64 sentinel form.
    let expected = [
        ("tools/call", None),
        ("prompts/get", Some("=?base64?Y2Fmw6k=?=")),
        ("resources/read", None),
    ];
    for (received, (method, name)) in audit.received.iter().zip(expected) {
        assert!(received.signed);
        assert_eq!(received.mcp_method.as_deref(), Some(method));
        assert_eq!(received.mcp_name.as_deref(), name);
    }
}

/// A layer of someone else's between the crate's: it sends every request twice at once.
#[derive(Clone)]
struct Hedge<S>(S);

impl<S> tower::Service<Request<Full<Bytes>>> for Hedge<S>
where
    S: tower::Service<Request<Full<Bytes>>> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures_util::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let mut copy = Request::new(request.body().clone());
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        let (a, b) = (self.0.clone(), self.0.clone());
        Box::pin(async move {
            let (first, _second) = futures_util::join!(a.oneshot(request), b.oneshot(copy));
            first
        })
    }
}

#[tokio::test(start_paused = true)]
async fn copies_sent_by_a_layer_in_between_are_attempts_of_their_own() {
    let inner = Scripted::with_fallback([], || Step::Respond(response(200, &[], b"{}")));
    let shared = inner.shared();
    let stack = ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .layer_fn(Hedge)
        .layer(SessionBusyRetryLayer::new())
        .service(inner);
    let response = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    let record = AttemptRecord::of_response(&response).unwrap();
    assert_eq!(shared.calls(), 2);
    assert_eq!(record.len(), 2, "two sends, two attempts:\n{record}");
}

#[tokio::test(start_paused = true)]
async fn a_record_reused_after_a_dropped_call_keeps_each_calls_cap() {
    let record = AttemptRecord::new();
    // The first call is dropped by a deadline while its attempt is in flight.
    let hanging = tower::service_fn(|_: Request<Full<Bytes>>| {
        std::future::pending::<Result<Response<TestBody>, BoxError>>()
    });
    let first = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(1)))
        .layer(ThrottleRetryLayer::new())
        .service(hanging);
    let mut request = json_request(TOOLS_CALL);
    request.extensions_mut().insert(record.clone());
    assert!(first.oneshot(request).await.is_err());
    // The second call, with the same record, is throttled every time.
    let inner = Scripted::with_fallback([], || {
        Step::Respond(response(429, &[("retry-after", "0")], b"{}"))
    });
    let shared = inner.shared();
    let second = ThrottleRetryLayer::new().max_attempts(3).layer(inner);
    let mut request = json_request(TOOLS_CALL);
    request.extensions_mut().insert(record.clone());
    second.oneshot(request).await.unwrap();
    assert_eq!(shared.calls(), 3, "the cap is the second call's own");
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 4, "{record}");
    assert_eq!(
        attempts[0].outcome(),
        &Outcome::Pending,
        "the first call's evidence stands"
    );
}

#[tokio::test(start_paused = true)]
async fn on_record_fires_once_even_when_a_layer_is_met_after_the_call_was_dropped() {
    let fired = Arc::new(AtomicU32::new(0));
    let inner = Scripted::with_fallback([], || Step::Respond(response(200, &[], b"{}")));
    let inner_layer = SessionBusyRetryLayer::new()
        .on_record(common::counting_hook(&fired))
        .layer(inner);
    // A layer in between that hands the request on later, from a task of its own (as a buffer
    // does): the outer call is long dropped by then.
    let late = tower::service_fn(move |request: Request<Full<Bytes>>| {
        let inner = inner_layer.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            inner.oneshot(request).await
        });
        async move { task.await.unwrap() }
    });
    let stack = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(1)))
        .layer(ThrottleRetryLayer::new().on_record(common::counting_hook(&fired)))
        .service(late);
    assert!(stack.oneshot(json_request(TOOLS_CALL)).await.is_err());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 1, "one call, one owner, once");
}

#[tokio::test(start_paused = true)]
async fn two_guards_both_rule_and_refusing_wins() {
    let inner = Scripted::new([Step::Respond(response(429, &[("retry-after", "0")], b"{}"))]);
    let shared = inner.shared();
    let stack = ServiceBuilder::new()
        .layer(ReplayGuardLayer::new())
        .layer(ReplayGuardLayer::new().strict_tools(["charge"]))
        .layer(ThrottleRetryLayer::new())
        .service(inner);
    let response = stack.oneshot(json_request(TOOLS_CALL)).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(shared.calls(), 1, "the inner guard's strict rule holds");
}

struct NeverResolves;

impl aws_credential_types::provider::ProvideCredentials for NeverResolves {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(std::future::pending())
    }
}

impl std::fmt::Debug for NeverResolves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NeverResolves")
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_before_anything_was_sent_says_so() {
    let inner = Scripted::new([]);
    let shared = inner.shared();
    let signer = SigV4InvokeLayer::builder(
        agentcore_tower::InvokeTarget::arn(
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123",
        ),
        NeverResolves,
    )
    .build()
    .unwrap();
    let record = AttemptRecord::new();
    let stack = ServiceBuilder::new()
        .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(1)))
        .layer(recommended_layers(ReplayGuardLayer::new(), signer))
        .service(inner);
    let mut request = json_request(TOOLS_CALL);
    request.extensions_mut().insert(record.clone());
    assert!(stack.oneshot(request).await.is_err());
    assert_eq!(shared.calls(), 0);
    assert_eq!(
        record.to_string(),
        "#1 not sent: the call was dropped before it was sent on -> replay_guard: call dropped before it ended (a deadline or cancellation outside); effect unknown"
    );
}

/// A service that answers once, then fails to become ready.
#[derive(Clone)]
struct ReadyOnce(Arc<AtomicU32>);

impl tower::Service<Request<Full<Bytes>>> for ReadyOnce {
    type Response = Response<TestBody>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Response<TestBody>, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(match self.0.load(Ordering::SeqCst) {
            0 => Ok(()),
            _ => Err("the pool is closed".into()),
        })
    }

    fn call(&mut self, _: Request<Full<Bytes>>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(response(429, &[("retry-after", "0")], b"{}")))
    }
}

#[tokio::test(start_paused = true)]
async fn a_re_send_the_service_below_cannot_take_is_recorded_as_not_sent() {
    let calls = Arc::new(AtomicU32::new(0));
    let error = ThrottleRetryLayer::new()
        .layer(ReadyOnce(calls.clone()))
        .oneshot(json_request(TOOLS_CALL))
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let record = error.record().unwrap();
    assert_eq!(
        record.to_string(),
        "#1 HTTP 429 -> throttle: HTTP 429, sent again after 0ms (Retry-After 0ms) (by adapter, assumes rejected-before-execution); effect unknown\n\
         #2 not sent: the service below failed before it was ready; effect unknown"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_naming_another_mcp_sessions_runtime_session_is_not_taken() {
    // A server that answers session A's second call with B's runtime session id.
    let first_seen = Arc::new(std::sync::Mutex::new(HashMap::<String, String>::new()));
    let sent = Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let server = tower::service_fn({
        let (first_seen, sent) = (first_seen.clone(), sent.clone());
        move |request: Request<Full<Bytes>>| {
            let header = |name: &str| request.headers()[name].to_str().unwrap().to_owned();
            let (mcp, runtime) = (header("mcp-session-id"), header(RUNTIME_SESSION_ID));
            sent.lock().unwrap().push((mcp.clone(), runtime.clone()));
            let answer = {
                let mut first = first_seen.lock().unwrap();
                let again = first.contains_key(&mcp);
                first.entry(mcp.clone()).or_insert(runtime.clone());
                match first.get("B") {
                    Some(b) if mcp == "A" && again => b.clone(),
                    _ => runtime,
                }
            };
            async move { Ok::<_, BoxError>(response(200, &[(RUNTIME_SESSION_ID, &answer)], b"{}")) }
        }
    });
    let signer = test_signer()
        .runtime_sessions(RuntimeSessions::PerMcpSession)
        .build()
        .unwrap();
    let stack = ServiceBuilder::new().layer(signer).service(server);
    let in_session = |mcp: &str| {
        let mut request = json_request(TOOLS_CALL);
        request
            .headers_mut()
            .insert("mcp-session-id", mcp.parse().unwrap());
        request
    };
    for mcp in ["B", "A", "A", "A", "B"] {
        stack.clone().oneshot(in_session(mcp)).await.unwrap();
    }
    let sent = sent.lock().unwrap().clone();
    let first = first_seen.lock().unwrap().clone();
    assert_ne!(first["A"], first["B"]);
    for (mcp, runtime) in &sent {
        assert_eq!(
            runtime, &first[mcp],
            "{mcp} kept its own runtime session: {sent:?}"
        );
    }
}

/// AgentCore's session-busy refusal: HTTP 200, JSON-RPC -32005 with its exact message.
fn session_busy_step() -> Step {
    Step::Respond(response(
        200,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#,
    ))
}

/// A JSON-RPC result.
fn result_step() -> Step {
    Step::Respond(response(
        200,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
    ))
}

/// Throttle → a layer of the app's that applies `change` to every request → session busy
/// (no backoff) → `inner`.
fn with_a_layer_between(
    inner: Scripted,
    change: impl Fn(&mut Request<Full<Bytes>>) + Clone + Send + Sync + 'static,
) -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = http::Response<impl http_body::Body>,
    Error = agentcore_tower::Error,
> {
    use agentcore_tower::{SessionBusyRetryLayer, ThrottleRetryLayer};
    tower::ServiceBuilder::new()
        .layer(ThrottleRetryLayer::new())
        .map_request(move |mut request: Request<Full<Bytes>>| {
            change(&mut request);
            request
        })
        .layer(SessionBusyRetryLayer::new().base_delay(std::time::Duration::ZERO))
        .service(inner)
}

/// A layer of the app's between two of ours that changes the request: the inner layer
/// re-sends what it received, not the head the outer one kept (which the layers share only
/// when it is the same).
#[tokio::test]
async fn an_inner_layer_resends_what_it_received_when_a_layer_between_changed_it() {
    let (busy, done) = (session_busy_step, result_step);
    for change in ["add", "replace", "remove", "none"] {
        let inner = Scripted::new([busy(), busy(), done()]);
        let shared = inner.shared();
        let stack = with_a_layer_between(inner, move |request| {
            let headers = request.headers_mut();
            match change {
                "add" => {
                    headers.insert("x-added", "1".parse().unwrap());
                }
                "replace" => {
                    headers.insert("x-app", "changed".parse().unwrap());
                }
                "remove" => {
                    headers.remove("x-app");
                }
                _ => {}
            }
        });
        let mut request = json_request(TOOLS_CALL);
        request
            .headers_mut()
            .insert("x-app", "original".parse().unwrap());
        let response = stack.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let requests = shared.requests.lock().unwrap();
        assert_eq!(requests.len(), 3, "{change}");
        for (parts, body) in requests.iter() {
            let x_app = parts.headers.get("x-app").map(|v| v.to_str().unwrap());
            let expected = match change {
                "replace" => Some("changed"),
                "remove" => None,
                _ => Some("original"),
            };
            assert_eq!(x_app, expected, "{change}");
            assert_eq!(
                parts.headers.contains_key("x-added"),
                change == "add",
                "{change}"
            );
            assert_eq!(body, TOOLS_CALL.as_bytes(), "{change}");
        }
    }
}

/// Every attempt — the first and the re-sends of both layers — carries the head the app built,
/// exactly: each header in its order, a name's several values, a sensitive value still marked
/// sensitive, bytes outside ASCII, an empty value; the method, URI and version.
#[tokio::test]
async fn every_attempt_carries_the_apps_head_exactly() {
    let listed = |headers: &http::HeaderMap| -> Vec<(String, Vec<u8>, bool)> {
        let entries = headers.iter();
        entries
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec(), v.is_sensitive()))
            .collect()
    };
    let (busy, done) = (session_busy_step, result_step);
    let inner = Scripted::new([busy(), busy(), done()]);
    let shared = inner.shared();
    let stack = with_a_layer_between(inner, |_| {});
    let mut request = json_request(TOOLS_CALL);
    *request.method_mut() = http::Method::PUT;
    *request.version_mut() = http::Version::HTTP_2;
    let headers = request.headers_mut();
    headers.append("x-many", "one".parse().unwrap());
    headers.append("mcp-session-id", "s-1".parse().unwrap());
    headers.append("x-many", "".parse().unwrap());
    let mut secret = http::HeaderValue::from_static("Bearer t0ken");
    secret.set_sensitive(true);
    headers.append(http::header::AUTHORIZATION, secret);
    headers.append(
        "x-obs",
        http::HeaderValue::from_bytes(b"caf\xc3\xa9\t!").unwrap(),
    );
    let sent = (request.uri().clone(), listed(request.headers()));
    let response = stack.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let requests = shared.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    for (parts, body) in requests.iter() {
        assert_eq!(parts.method, http::Method::PUT);
        assert_eq!(parts.version, http::Version::HTTP_2);
        assert_eq!((parts.uri.clone(), listed(&parts.headers)), sent);
        assert_eq!(body, TOOLS_CALL.as_bytes());
    }
}

/// The same for the extensions: a layer re-sends the extensions it received, whether they hold
/// an app's values (copied) or only the call's own marks (put back without a copy), and a layer
/// of the app's between two of ours that adds, replaces or removes one — even the record — is
/// seen by the inner layer's re-sends only.
#[tokio::test]
async fn a_resend_carries_the_extensions_its_layer_received() {
    use agentcore_tower::{SessionBusyRetryLayer, ThrottleRetryLayer};
    #[derive(Clone, Debug, PartialEq)]
    struct AppMark(u32);
    let (busy, done) = (session_busy_step, result_step);
    let throttled = || {
        Step::Respond(response(
            429,
            &[("x-amzn-errortype", "ThrottlingException")],
            b"",
        ))
    };
    let other_record = AttemptRecord::new();
    for change in ["add", "replace", "remove", "record", "none"] {
        // The inner layer re-sends twice (session busy), then the answer: three attempts from
        // what the layer in between handed it.
        let inner = Scripted::new([busy(), busy(), done()]);
        let shared = inner.shared();
        let replacement = other_record.clone();
        let stack = with_a_layer_between(inner, move |request| {
            let extensions = request.extensions_mut();
            match change {
                "add" | "replace" => {
                    extensions.insert(AppMark(1));
                }
                "remove" => {
                    extensions.remove::<AppMark>();
                }
                "record" => {
                    extensions.insert(replacement.clone());
                }
                _ => {}
            }
        });
        let record = AttemptRecord::new();
        let mut request = json_request(TOOLS_CALL);
        request.extensions_mut().insert(record.clone());
        if change != "add" {
            request.extensions_mut().insert(AppMark(0));
        }
        let response = stack.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200, "{change}");
        assert_eq!(record.len(), 3, "{change}");
        let requests = shared.requests.lock().unwrap();
        assert_eq!(requests.len(), 3, "{change}");
        let expected = match change {
            "add" | "replace" => Some(AppMark(1)),
            "remove" => None,
            _ => Some(AppMark(0)),
        };
        for (parts, _) in requests.iter() {
            assert_eq!(
                parts.extensions.get::<AppMark>(),
                expected.as_ref(),
                "{change}"
            );
            let carried = AttemptRecord::of_extensions(&parts.extensions).unwrap();
            let want = if change == "record" { 0 } else { 3 };
            assert_eq!(carried.len(), want, "{change}: the record it received");
        }
    }
    // The outer layer re-sends (throttled, then the answer), with an app's value and without
    // one (then it keeps only the call's marks): both attempts carry what it received.
    for app_value in [true, false] {
        let inner = Scripted::new([throttled(), done()]);
        let shared = inner.shared();
        let stack = tower::ServiceBuilder::new()
            .layer(ThrottleRetryLayer::new().base_delay(std::time::Duration::ZERO))
            .layer(SessionBusyRetryLayer::new())
            .service(inner);
        let record = AttemptRecord::new();
        let mut request = json_request(TOOLS_CALL);
        request.extensions_mut().insert(record.clone());
        if app_value {
            request.extensions_mut().insert(AppMark(7));
        }
        let response = stack.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(record.len(), 2);
        let requests = shared.requests.lock().unwrap();
        assert_eq!(requests.len(), 2);
        for (parts, _) in requests.iter() {
            let want = app_value.then_some(AppMark(7));
            assert_eq!(parts.extensions.get::<AppMark>(), want.as_ref());
            assert_eq!(
                AttemptRecord::of_extensions(&parts.extensions)
                    .unwrap()
                    .len(),
                2
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn refusals_leave_the_allowance_for_failures_that_may_have_run_whole_in_any_order() {
    // Twelve seconds of a session provisioning (busy refusals), then a connection that drops
    // after the tool may have run, then the answer: the declared tool is re-sent once, the
    // guard's cap of 3 and ceiling of 5 s untouched by the refusals before it.
    let busy = || {
        Step::Respond(response(
            409,
            &[("x-amzn-errortype", "RetryableConflictException")],
            b"{}",
        ))
    };
    let script = |busy_for: usize| {
        let mut steps: Vec<Step> = (0..busy_for).map(|_| busy()).collect();
        steps.push(Step::Fail(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))));
        steps.push(Step::Respond(response(
            200,
            &[("content-type", "application/json")],
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        )));
        Scripted::new(steps)
    };
    let call = || tool_call(1, "lookup", json!({}));
    let guard = || ReplayGuardLayer::new().idempotent_tools(["lookup"]);
    for guard_outside in [true, false] {
        let inner = script(12);
        let shared = inner.shared();
        fn seen<B>(answer: Response<B>) -> (http::StatusCode, AttemptRecord) {
            let record = AttemptRecord::of_response(&answer).unwrap().clone();
            (answer.status(), record)
        }
        let (status, record) = if guard_outside {
            ServiceBuilder::new()
                .layer(guard())
                .layer(SessionBusyRetryLayer::new().base_delay(Duration::from_secs(1)))
                .service(inner)
                .oneshot(call())
                .await
                .map(seen)
        } else {
            ServiceBuilder::new()
                .layer(SessionBusyRetryLayer::new().base_delay(Duration::from_secs(1)))
                .layer(guard())
                .service(inner)
                .oneshot(call())
                .await
                .map(seen)
        }
        .unwrap();
        assert_eq!(status, 200, "{record}");
        assert_eq!(shared.calls(), 14, "{record}");
        assert!(waited(&record) > Duration::from_secs(11), "{record}");
        let drop = &record.attempts()[12];
        assert_eq!(drop.decisions()[0].layer(), "replay_guard", "{record}");
        assert!(
            matches!(drop.decisions()[0].verdict(), Verdict::SentAgain { .. }),
            "{record}"
        );
    }

    // The app's own budget still counts every attempt.
    let inner = script(12);
    let shared = inner.shared();
    let mut request = call();
    request
        .extensions_mut()
        .insert(CallBudget::new().max_attempts(13));
    let answer = ServiceBuilder::new()
        .layer(guard())
        .layer(SessionBusyRetryLayer::new().base_delay(Duration::from_secs(1)))
        .service(inner)
        .oneshot(request)
        .await;
    let error = answer.unwrap_err();
    assert_eq!(shared.calls(), 13);
    let record = error.record().unwrap();
    assert!(
        matches!(
            record.attempts()[12].decisions()[0].verdict(),
            Verdict::AttemptsExhausted {
                max_attempts: 13,
                ..
            }
        ),
        "{record}"
    );
}
