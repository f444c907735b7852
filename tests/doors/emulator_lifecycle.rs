//! The emulator lives the AgentCore session lifecycle: cold starts that provision for seconds,
//! microVMs that end at their idle timeout or lifetime (and with them the MCP sessions their
//! server issued) and take 15 s to terminate, microVMs that do not initialize in time,
//! requests without a runtime session id routed by their `Mcp-Session-Id`, gateway sessions
//! that time out from `initialize`, and the faults that end either on purpose.
//!
//! Every test runs on a paused tokio clock, moved by `tokio::time::advance` between requests
//! (and by tokio itself through a wait the emulator or the stack holds), and talks to the
//! emulator over loopback HTTP through the emulator's own signer. The first tests have no
//! retry layer, so each raw answer is asserted as it came: status, headers, body, and the
//! audit's counts. The last ones meet the same faults through the stack the proxy runs (the
//! session recovery layer and the recommended layers with their defaults): the answer, every
//! re-send and why, and how often each tool ran.

use crate::common;

use std::collections::BTreeSet;
use std::fmt::Arguments;
use std::ops::Range;
use std::time::Duration;

use agentcore_tower::contract::PlatformError;
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::record::Verdict;
use agentcore_tower::rule::{Assumption, By, Permission};
use agentcore_tower::{
    McpSessionRecoveryLayer, RecommendedLayers, ReplayGuardLayer, SessionBusyRetryLayer,
};
use agentcore_tower_emulator::{
    Audit, BusyForm, Emulator, EmulatorConfig, Fault, PlatformForm, Routed,
};
use common::stack::{Answered, Stack, read_whole, resends, send_through};
use common::{Raw, http_client, mcp_post};
use http::StatusCode;
use serde_json::{Value, json};
use tokio::time::{Instant, advance};
use tower::{ServiceBuilder, ServiceExt};

const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
/// The headers of an invocation's answer from the MCP server.
const INVOCATION_HEADERS: [&str; 4] = [
    "content-length",
    "content-type",
    RUNTIME_SESSION_ID,
    "x-amzn-requestid",
];
const SESSION: &str = "lifecycle-runtime-session-000000000000000001";
const OTHER_SESSION: &str = "lifecycle-runtime-session-000000000000000002";

impl Raw {
    fn header_names(&self) -> BTreeSet<&str> {
        self.headers.keys().map(|name| name.as_str()).collect()
    }

    /// The `Mcp-Session-Id` of an answered `initialize`.
    fn mcp_session(&self) -> String {
        self.header("mcp-session-id")
            .unwrap_or_else(|| panic!("no Mcp-Session-Id: {self:?}"))
            .to_owned()
    }

    /// The text of a `tools/call` result.
    fn text(&self) -> String {
        self.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no tool result: {self:?}"))
            .to_owned()
    }
}

fn message(id: Option<u64>, method: &str, params: Value) -> Value {
    match id {
        Some(id) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        None => json!({"jsonrpc": "2.0", "method": method, "params": params}),
    }
}

fn initialize(id: u64) -> Value {
    message(
        Some(id),
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lifecycle", "version": "1"}}),
    )
}

fn counter(id: u64) -> Value {
    message(
        Some(id),
        "tools/call",
        json!({"name": "counter", "arguments": {}}),
    )
}

/// One `InvokeAgentRuntime` of runtime session `runtime_session`, signed by the emulator's
/// signer, sent by a plain hyper client: the raw answer.
async fn invoke(
    emulator: &Emulator,
    runtime_session: &str,
    mcp_session: Option<&str>,
    body: &Value,
) -> Raw {
    let signer = emulator
        .signer()
        .runtime_session_id(runtime_session)
        .build()
        .unwrap();
    invoke_signed(signer, mcp_session, body).await
}

/// One `InvokeAgentRuntime` signed by `signer`, sent by a plain hyper client: the raw answer.
async fn invoke_signed(signer: SigV4InvokeLayer, mcp_session: Option<&str>, body: &Value) -> Raw {
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let request = mcp_post(RUNTIME_URL, mcp_session, body.to_string());
    Raw::read(stack.oneshot(request).await.unwrap()).await
}

/// One POST to the emulated gateway's `/mcp`, SigV4-signed for it.
async fn gateway_post(emulator: &Emulator, mcp_session: Option<&str>, body: &Value) -> Raw {
    let signer = emulator.endpoint_signer().build().unwrap();
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let request = mcp_post(&emulator.gateway_url(), mcp_session, body.to_string());
    Raw::read(stack.oneshot(request).await.unwrap()).await
}

/// The audit's lifecycle counts, to compare whole.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    sessions: u64,
    microvms: u64,
    busy: u64,
    mcp_sessions: u64,
    /// Requests refused for their MCP session (missing or unknown)...
    refused: u64,
    /// ... and of those, refused as not found (404).
    not_found: u64,
    /// Runs of the `counter` tool.
    runs: u64,
}

/// Asserts the audit's counts: those named, every other 0 (then the message, if any).
macro_rules! assert_counts {
    ($emulator:expr, $($field:ident: $count:expr),+ $(; $($message:tt)+)?) => {{
        let mut expected = Counts::default();
        $(expected.$field = $count;)+
        assert_eq!(counts($emulator), expected $(, $($message)+)?);
    }};
}

fn counts(emulator: &Emulator) -> Counts {
    let audit: Audit = emulator.audit();
    assert_eq!(
        audit.executions_of("counter"),
        emulator.counter(),
        "the counter ran as often as the audit says"
    );
    Counts {
        sessions: audit.sessions_started,
        microvms: audit.microvms_started,
        busy: audit.busy_refusals,
        mcp_sessions: audit.mcp_sessions_started,
        refused: audit.mcp_session_refusals,
        not_found: audit.mcp_sessions_not_found,
        runs: audit.executions_of("counter"),
    }
}

/// The config of a runtime whose microVMs take 12 s to provision.
fn cold_start() -> EmulatorConfig {
    EmulatorConfig::default().provisioning(Duration::from_secs(12))
}

/// An emulator started with `config`.
async fn start(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
}

/// The session-busy refusal in `form`, for JSON-RPC id `id`, of runtime session `session`.
fn assert_busy(answer: &Raw, form: BusyForm, id: u64, session: &str) {
    assert_eq!(
        answer.header(RUNTIME_SESSION_ID),
        Some(session),
        "{answer:?}"
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("mcp-session-id"), None, "{answer:?}");
    match form {
        BusyForm::Conflict409 => {
            assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
            assert_eq!(
                answer.header("x-amzn-errortype"),
                Some(
                    "RetryableConflictException:http://internal.amazon.com/coral/com.amazon.bedrock/"
                )
            );
            assert_eq!(
                answer.json(),
                json!({"message": "The session is being provisioned or torn down; retry."})
            );
        }
        _ => {
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            assert_eq!(answer.header("x-amzn-errortype"), None);
            assert_eq!(
                answer.json(),
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32005, "message": "Session operation in progress, please retry"}})
            );
        }
    }
}

/// The MCP server's own 404 for an MCP session it does not know: no `x-amzn-errortype`, the
/// runtime session's header as on every invocation answer.
fn assert_mcp_404(answer: &Raw, id: Value, session: &str) {
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    assert_eq!(
        answer.header_names(),
        BTreeSet::from(INVOCATION_HEADERS),
        "no x-amzn-errortype, no Mcp-Session-Id: {answer:?}"
    );
    assert_eq!(answer.header(RUNTIME_SESSION_ID), Some(session));
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": "Session not found"}})
    );
}

/// `initialize` (id `id`) in runtime session `session`, carrying `mcp_session` when there is
/// one, answered: its new `Mcp-Session-Id`.
async fn initialized_session(
    emulator: &Emulator,
    session: &str,
    mcp_session: Option<&str>,
    id: u64,
) -> String {
    let answer = invoke(emulator, session, mcp_session, &initialize(id)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.header(RUNTIME_SESSION_ID), Some(session));
    assert_eq!(answer.header("x-amzn-errortype"), None);
    let json = answer.json();
    assert_eq!(json["id"], id);
    assert_eq!(
        json["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    answer.mcp_session()
}

#[tokio::test(start_paused = true)]
async fn twelve_seconds_of_provisioning_are_busy_refusals_in_either_form() {
    for form in [BusyForm::JsonRpc200, BusyForm::Conflict409] {
        let emulator = start(cold_start().busy_form(form)).await;
        let started = Instant::now();
        // Refused at once, half-way, and a millisecond before the twelfth second.
        for (id, wait) in [
            (1, Duration::ZERO),
            (2, Duration::from_secs(6)),
            (3, Duration::from_millis(5_999)),
        ] {
            advance(wait).await;
            let answer = invoke(&emulator, SESSION, None, &initialize(id)).await;
            assert_busy(&answer, form, id, SESSION);
        }
        assert_eq!(emulator.audit().executions.len(), 0, "nothing ran");
        // At 12 s the microVM answers.
        advance(Duration::from_millis(1)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(12), "{form:?}");
        let mcp_session = initialized_session(&emulator, SESSION, None, 4).await;
        let answer = invoke(&emulator, SESSION, Some(&mcp_session), &counter(5)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.text(), "1");
        assert_counts!(
            &emulator,
            sessions: 1, microvms: 1, busy: 3, mcp_sessions: 1, runs: 1;
            "{form:?}"
        );
        // Another runtime session is a cold start of its own.
        let answer = invoke(&emulator, OTHER_SESSION, None, &initialize(6)).await;
        assert_busy(&answer, form, 6, OTHER_SESSION);
        assert_eq!(emulator.audit().microvms_started, 2);
    }
}

#[tokio::test(start_paused = true)]
async fn after_20_idle_minutes_a_new_microvm_provisions_and_has_forgotten_the_mcp_session() {
    let emulator = start(cold_start()).await;
    let busy = invoke(&emulator, SESSION, None, &initialize(1)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 1, SESSION);
    advance(Duration::from_secs(12)).await;
    let first = initialized_session(&emulator, SESSION, None, 2).await;
    let initialized = message(None, "notifications/initialized", json!({}));
    let accepted = invoke(&emulator, SESSION, Some(&first), &initialized).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{accepted:?}");
    assert_eq!(accepted.text, "");
    let ran = invoke(&emulator, SESSION, Some(&first), &counter(3)).await;
    assert_eq!(ran.text(), "1");

    // 899 s later the microVM still runs, and the request restarts its idle clock.
    advance(Duration::from_secs(899)).await;
    let ran = invoke(&emulator, SESSION, Some(&first), &counter(4)).await;
    assert_eq!((ran.status, ran.text()), (StatusCode::OK, "2".to_owned()));
    assert_eq!(emulator.audit().microvms_started, 1);

    // 20 idle minutes: the microVM is gone; the next request meets a new one, provisioning.
    advance(Duration::from_secs(20 * 60)).await;
    let busy = invoke(&emulator, SESSION, Some(&first), &counter(5)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 5, SESSION);
    assert_counts!(&emulator, sessions: 1, microvms: 2, busy: 2, mcp_sessions: 1, runs: 2);

    // Provisioned: its MCP server never issued the old Mcp-Session-Id. 404, nothing runs.
    advance(Duration::from_secs(12)).await;
    let gone = invoke(&emulator, SESSION, Some(&first), &counter(6)).await;
    assert_mcp_404(&gone, json!(6), SESSION);
    let gone = invoke(&emulator, SESSION, Some(&first), &initialized).await;
    assert_mcp_404(&gone, Value::Null, SESSION);

    // A new initialize opens a new MCP session in the new microVM, and the call runs.
    let second = initialized_session(&emulator, SESSION, Some(&first), 7).await;
    assert_ne!(second, first);
    let ran = invoke(&emulator, SESSION, Some(&second), &counter(8)).await;
    assert_eq!((ran.status, ran.text()), (StatusCode::OK, "3".to_owned()));
    assert_counts!(
        &emulator,
        sessions: 1, microvms: 2, busy: 2, mcp_sessions: 2, refused: 2, not_found: 2, runs: 3
    );
    let audit = emulator.audit();
    assert_eq!(
        audit
            .executions_by_id
            .get(&("counter".to_owned(), "6".to_owned())),
        None,
        "the 404'd call never ran"
    );
    assert_eq!(audit.requests, 10);
}

#[tokio::test(start_paused = true)]
async fn the_idle_timeout_is_a_setting() {
    // With no termination delay: the microVM is gone the instant its idle timeout ends it.
    let emulator = start(
        EmulatorConfig::default()
            .idle_timeout(Duration::from_secs(60))
            .termination_delay(Duration::ZERO),
    )
    .await;
    let mcp_session = initialized_session(&emulator, SESSION, None, 1).await;
    advance(Duration::from_millis(59_999)).await;
    let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(2)).await;
    assert_eq!(ran.text(), "1");
    advance(Duration::from_secs(60)).await;
    // No provisioning configured: the new microVM answers at once, and knows no MCP session.
    let gone = invoke(&emulator, SESSION, Some(&mcp_session), &counter(3)).await;
    assert_mcp_404(&gone, json!(3), SESSION);
    assert_counts!(
        &emulator,
        sessions: 1, microvms: 2, mcp_sessions: 1, refused: 1, not_found: 1, runs: 1
    );
}

#[tokio::test(start_paused = true)]
async fn a_microvm_in_constant_use_still_ends_at_its_8_hour_lifetime() {
    let emulator = start(cold_start()).await;
    let started = Instant::now();
    assert_busy(
        &invoke(&emulator, SESSION, None, &initialize(1)).await,
        BusyForm::JsonRpc200,
        1,
        SESSION,
    );
    advance(Duration::from_secs(12)).await;
    let mcp_session = initialized_session(&emulator, SESSION, None, 2).await;
    // A call every 10 minutes, never idle, up to a second before 8 hours.
    let mut id = 2;
    let mut runs = 0;
    while started.elapsed() + Duration::from_secs(600) < Duration::from_secs(8 * 3600) {
        advance(Duration::from_secs(600)).await;
        id += 1;
        runs += 1;
        let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
        assert_eq!(
            (ran.status, ran.text()),
            (StatusCode::OK, runs.to_string()),
            "at {:?}",
            started.elapsed()
        );
    }
    assert_eq!(runs, 47);
    let last = started.elapsed();
    advance(Duration::from_secs(8 * 3600) - Duration::from_secs(1) - last).await;
    id += 1;
    let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_eq!(
        ran.text(),
        "48",
        "still the first microVM a second before 8 h"
    );
    assert_eq!(emulator.audit().microvms_started, 1);

    // At 8 hours from its start the microVM ends, in use or not: it terminates for 15 s (busy),
    // then a cold start (busy), then the 404.
    advance(Duration::from_secs(1)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(8 * 3600));
    id += 1;
    let busy = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, id, SESSION);
    assert_eq!(emulator.audit().busy_terminating, 1);
    assert_eq!(emulator.audit().microvms_started, 1, "still terminating");
    advance(Duration::from_secs(15)).await;
    id += 1;
    let busy = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, id, SESSION);
    assert_eq!(emulator.audit().busy_terminating, 1, "provisioning now");
    advance(Duration::from_secs(12)).await;
    id += 1;
    let gone = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_mcp_404(&gone, json!(id), SESSION);
    assert_counts!(
        &emulator,
        sessions: 1, microvms: 2, busy: 3, mcp_sessions: 1, refused: 1, not_found: 1, runs: 48
    );
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_shorter_than_provisioning_keeps_a_session_busy() {
    // A microVM whose lifetime ends while it still provisions never answers: each request
    // after its end meets a new one, provisioning again (here with no termination delay).
    let emulator = start(
        cold_start()
            .max_lifetime(Duration::from_secs(10))
            .termination_delay(Duration::ZERO),
    )
    .await;
    for (id, wait) in [(1, 0), (2, 9), (3, 1), (4, 9), (5, 1)] {
        advance(Duration::from_secs(wait)).await;
        let answer = invoke(&emulator, SESSION, None, &initialize(id)).await;
        assert_busy(&answer, BusyForm::JsonRpc200, id, SESSION);
    }
    assert_counts!(&emulator, sessions: 1, microvms: 3, busy: 5);
}

#[tokio::test(start_paused = true)]
async fn initialize_always_opens_a_new_mcp_session() {
    let emulator = start(EmulatorConfig::default().stateful(true)).await;
    let first = initialized_session(&emulator, SESSION, None, 1).await;
    // Carrying an id (its own, or one never issued), initialize still gets a new one.
    let second = initialized_session(&emulator, SESSION, Some(&first), 2).await;
    let third = initialized_session(&emulator, SESSION, Some("made-up"), 3).await;
    assert_eq!(BTreeSet::from([&first, &second, &third]).len(), 3);
    // All three live in the microVM.
    for (id, session) in [(4, &first), (5, &second), (6, &third)] {
        let ran = invoke(&emulator, SESSION, Some(session), &counter(id)).await;
        assert_eq!(ran.status, StatusCode::OK, "{ran:?}");
    }
    assert_counts!(&emulator, sessions: 1, microvms: 1, mcp_sessions: 3, runs: 3);
}

#[tokio::test(start_paused = true)]
async fn a_stateful_server_refuses_what_it_did_not_issue_and_a_lenient_one_takes_it() {
    let stateful = start(EmulatorConfig::default().stateful(true)).await;
    let lenient = start(EmulatorConfig::default()).await;
    let mut issued = Vec::new();
    for emulator in [&stateful, &lenient] {
        let mcp_session = initialized_session(emulator, SESSION, None, 1).await;
        let ran = invoke(emulator, SESSION, Some(&mcp_session), &counter(2)).await;
        assert_eq!(ran.text(), "1");
        issued.push(mcp_session);
    }

    // No Mcp-Session-Id: the stateful server's 400.
    let missing = invoke(&stateful, SESSION, None, &counter(3)).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{missing:?}");
    assert_eq!(missing.header_names(), BTreeSet::from(INVOCATION_HEADERS));
    assert_eq!(
        missing.json(),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
    );
    // An id it never issued, and its own id sent to another runtime session's microVM: 404.
    let made_up = invoke(&stateful, SESSION, Some("made-up"), &counter(4)).await;
    assert_mcp_404(&made_up, json!(4), SESSION);
    let elsewhere = invoke(&stateful, OTHER_SESSION, Some(&issued[0]), &counter(5)).await;
    assert_mcp_404(&elsewhere, json!(5), OTHER_SESSION);
    assert_counts!(
        &stateful,
        sessions: 2, microvms: 2, mcp_sessions: 1, refused: 3, not_found: 2, runs: 1
    );

    // The default server takes all three: none was issued and then lost.
    for (id, session, mcp_session) in [
        (3, SESSION, None),
        (4, SESSION, Some("made-up")),
        (5, OTHER_SESSION, Some(issued[1].as_str())),
    ] {
        let ran = invoke(&lenient, session, mcp_session, &counter(id)).await;
        assert_eq!(ran.status, StatusCode::OK, "{ran:?}");
    }
    assert_counts!(&lenient, sessions: 2, microvms: 2, mcp_sessions: 1, runs: 4);
}

#[tokio::test(start_paused = true)]
async fn expire_mcp_session_ends_one_mcp_session_at_a_runtime() {
    for stateful in [false, true] {
        let emulator = start(EmulatorConfig::default().stateful(stateful)).await;
        let a = initialized_session(&emulator, SESSION, None, 1).await;
        let b = initialized_session(&emulator, SESSION, None, 2).await;
        assert!(emulator.expire_mcp_session(&a));
        assert!(!emulator.expire_mcp_session(&a), "already expired");
        assert!(!emulator.expire_mcp_session("never-issued"));
        let gone = invoke(&emulator, SESSION, Some(&a), &counter(3)).await;
        assert_mcp_404(&gone, json!(3), SESSION);
        let ran = invoke(&emulator, SESSION, Some(&b), &counter(4)).await;
        assert_eq!(ran.text(), "1", "the other session lives on");

        // All of them at once.
        emulator.expire_mcp_sessions();
        let gone = invoke(&emulator, SESSION, Some(&b), &counter(5)).await;
        assert_mcp_404(&gone, json!(5), SESSION);
        assert_counts!(
            &emulator,
            sessions: 1, microvms: 1, mcp_sessions: 2, refused: 2, not_found: 2, runs: 1;
            "stateful: {stateful}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn end_microvm_makes_the_next_request_a_cold_start() {
    let emulator = start(cold_start().busy_form(BusyForm::Conflict409)).await;
    let mut mcp_sessions = Vec::new();
    for (id, session) in [(1, SESSION), (2, OTHER_SESSION)] {
        let busy = invoke(&emulator, session, None, &initialize(id)).await;
        assert_busy(&busy, BusyForm::Conflict409, id, session);
    }
    advance(Duration::from_secs(12)).await;
    for (id, session) in [(3, SESSION), (4, OTHER_SESSION)] {
        mcp_sessions.push(initialized_session(&emulator, session, None, id).await);
    }
    assert!(emulator.end_microvm(SESSION));
    assert!(!emulator.end_microvm(SESSION), "already ended");
    assert!(!emulator.end_microvm("never-seen-runtime-session-0000000000000"));

    // The ended one cold-starts; the other runs on.
    let busy = invoke(&emulator, SESSION, Some(&mcp_sessions[0]), &counter(5)).await;
    assert_busy(&busy, BusyForm::Conflict409, 5, SESSION);
    let ran = invoke(
        &emulator,
        OTHER_SESSION,
        Some(&mcp_sessions[1]),
        &counter(6),
    )
    .await;
    assert_eq!(ran.text(), "1");
    advance(Duration::from_millis(11_999)).await;
    let busy = invoke(&emulator, SESSION, Some(&mcp_sessions[0]), &counter(7)).await;
    assert_busy(&busy, BusyForm::Conflict409, 7, SESSION);
    advance(Duration::from_millis(1)).await;
    let gone = invoke(&emulator, SESSION, Some(&mcp_sessions[0]), &counter(8)).await;
    assert_mcp_404(&gone, json!(8), SESSION);
    let again = initialized_session(&emulator, SESSION, None, 9).await;
    let ran = invoke(&emulator, SESSION, Some(&again), &counter(10)).await;
    assert_eq!(ran.text(), "2");

    // Every microVM at once: both sessions cold-start.
    assert_eq!(emulator.end_microvms(), 2);
    for (id, session, mcp_session) in [(11, SESSION, &again), (12, OTHER_SESSION, &mcp_sessions[1])]
    {
        let busy = invoke(&emulator, session, Some(mcp_session), &counter(id)).await;
        assert_busy(&busy, BusyForm::Conflict409, id, session);
    }
    assert_counts!(
        &emulator,
        sessions: 2, microvms: 5, busy: 6, mcp_sessions: 3, refused: 1, not_found: 1, runs: 2
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_runtime_is_the_platforms_404_with_its_error_type() {
    let emulator = start(EmulatorConfig::default()).await;
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/other-XyZ789")
            .endpoint(emulator.endpoint()),
        emulator.credentials(),
    )
    .runtime_session_id(SESSION)
    .build()
    .unwrap();
    let answer = invoke_signed(signer, Some("any"), &counter(1)).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    assert_eq!(
        answer.header_names(),
        BTreeSet::from([
            "content-length",
            "content-type",
            "x-amzn-errortype",
            "x-amzn-requestid"
        ])
    );
    assert_eq!(
        answer.header("x-amzn-errortype"),
        Some("ResourceNotFoundException:http://internal.amazon.com/coral/com.amazon.bedrock/")
    );
    assert_eq!(
        answer.json(),
        json!({"message": "No runtime with this ARN."})
    );
    assert_eq!(
        counts(&emulator),
        Counts::default(),
        "no session, nothing ran"
    );
    assert_eq!(emulator.audit().requests, 1);
}

#[tokio::test(start_paused = true)]
async fn a_gateway_session_times_out_an_hour_after_initialize_however_used() {
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let started = Instant::now();
    let answer = gateway_post(&emulator, None, &initialize(1)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let first = answer.mcp_session();
    // Used every 20 minutes: counted from initialize all the same.
    for (id, expected) in [(2, "1"), (3, "2")] {
        advance(Duration::from_secs(20 * 60)).await;
        let ran = gateway_post(&emulator, Some(&first), &counter(id)).await;
        assert_eq!(
            (ran.status, ran.text()),
            (StatusCode::OK, expected.to_owned())
        );
    }
    advance(Duration::from_millis(20 * 60 * 1000 - 1)).await;
    let ran = gateway_post(&emulator, Some(&first), &counter(4)).await;
    assert_eq!(ran.text(), "3", "a millisecond before the hour");
    advance(Duration::from_millis(1)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(3600));
    let gone = gateway_post(&emulator, Some(&first), &counter(5)).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{gone:?}");
    assert_eq!(
        gone.header_names(),
        BTreeSet::from(["content-length", "content-type", "date", "x-amzn-requestid"]),
        "no x-amzn-errortype: {gone:?}"
    );
    assert_eq!(
        gone.json(),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32001, "message": "Session not found or expired"}})
    );

    // A fresh initialize opens a new session, and the call runs.
    let answer = gateway_post(&emulator, Some(&first), &initialize(6)).await;
    assert_eq!(answer.status, StatusCode::OK);
    let second = answer.mcp_session();
    assert_ne!(second, first);
    let ran = gateway_post(&emulator, Some(&second), &counter(7)).await;
    assert_eq!(ran.text(), "4");
    assert_counts!(&emulator, mcp_sessions: 2, refused: 1, not_found: 1, runs: 4);
}

#[tokio::test(start_paused = true)]
async fn the_gateway_session_timeout_is_a_setting_and_sessions_expire_one_by_one() {
    let emulator = start(
        EmulatorConfig::default()
            .gateway(true)
            .gateway_session_timeout(Duration::from_secs(900)),
    )
    .await;
    let a = gateway_post(&emulator, None, &initialize(1))
        .await
        .mcp_session();
    let b = gateway_post(&emulator, None, &initialize(2))
        .await
        .mcp_session();
    assert!(emulator.expire_mcp_session(&a));
    assert!(!emulator.expire_mcp_session(&a));
    let gone = gateway_post(&emulator, Some(&a), &counter(3)).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let ran = gateway_post(&emulator, Some(&b), &counter(4)).await;
    assert_eq!(ran.text(), "1");
    advance(Duration::from_secs(899)).await;
    let ran = gateway_post(&emulator, Some(&b), &counter(5)).await;
    assert_eq!(ran.text(), "2");
    advance(Duration::from_secs(1)).await;
    assert!(!emulator.expire_mcp_session(&b), "timed out already");
    let gone = gateway_post(&emulator, Some(&b), &counter(6)).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_counts!(&emulator, mcp_sessions: 2, refused: 2, not_found: 2, runs: 2);
}

// ---- The lifecycle completed: the initialization limit, termination, routing ----

const INITIALIZATION_EXCEEDED_30: &str =
    "Runtime initialization time exceeded. Please make sure that initialization completes in 30s.";
const INITIALIZATION_EXCEEDED_60: &str =
    "Runtime initialization time exceeded. Please make sure that initialization completes in 60s.";
const AMZN_RUNTIME_CLIENT_ERROR: &str =
    "RuntimeClientError:http://internal.amazon.com/coral/com.amazon.bedrock/";

/// The platform error the crate's classifier reads off a raw answer.
fn classified(answer: &Raw) -> Option<PlatformError> {
    agentcore_tower::contract::classify(
        answer.status,
        &answer.headers,
        Some(answer.text.as_bytes()),
    )
    .map(|c| c.error())
}

#[tokio::test(start_paused = true)]
async fn a_microvm_that_does_not_initialize_in_time_is_answered_when_its_limit_passes_and_is_gone()
{
    // The JSON-RPC form, met by an `initialize` 10 s into a 12 s cold start: answered when the
    // microVM has been starting for 30 s.
    let emulator = start(cold_start()).await;
    let started = Instant::now();
    let busy = invoke(&emulator, SESSION, None, &initialize(1)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 1, SESSION);
    advance(Duration::from_secs(10)).await;
    emulator.push_request_fault(Fault::InitializationTimedOut {
        form: PlatformForm::JsonRpc,
    });
    let failed = invoke(&emulator, SESSION, None, &initialize(2)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(failed.status, StatusCode::OK, "{failed:?}");
    assert_eq!(failed.header(RUNTIME_SESSION_ID), Some(SESSION));
    assert_eq!(failed.header("x-amzn-errortype"), None);
    assert_eq!(failed.header("mcp-session-id"), None);
    assert_eq!(
        failed.json(),
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32010, "message": INITIALIZATION_EXCEEDED_30}})
    );
    assert_eq!(
        classified(&failed),
        Some(PlatformError::InitializationTimedOut)
    );
    let audit = emulator.audit();
    assert_eq!(
        (audit.initializations_timed_out, audit.microvms_started),
        (1, 1)
    );

    // The microVM is gone: the next request starts a new one, which provisions 12 s.
    let busy = invoke(&emulator, SESSION, None, &initialize(3)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 3, SESSION);
    advance(Duration::from_secs(12)).await;
    let mcp_session = initialized_session(&emulator, SESSION, None, 4).await;
    let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(5)).await;
    assert_eq!(ran.text(), "1");
    assert_counts!(&emulator, sessions: 1, microvms: 2, busy: 2, mcp_sessions: 1, runs: 1);

    // The HTTP form, with a 60 s limit, met by a `tools/call` that starts its microVM: held
    // the whole limit, HTTP 424 `RuntimeClientError` with the message, nothing ran.
    let emulator =
        start(EmulatorConfig::default().initialization_limit(Duration::from_secs(60))).await;
    emulator.push_fault(Fault::InitializationTimedOut {
        form: PlatformForm::Http,
    });
    let started = Instant::now();
    let failed = invoke(&emulator, SESSION, None, &counter(1)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert_eq!(failed.status, StatusCode::FAILED_DEPENDENCY, "{failed:?}");
    assert_eq!(
        failed.header("x-amzn-errortype"),
        Some(AMZN_RUNTIME_CLIENT_ERROR)
    );
    assert_eq!(failed.header("content-type"), Some("application/json"));
    assert_eq!(failed.header(RUNTIME_SESSION_ID), Some(SESSION));
    assert_eq!(
        failed.json(),
        json!({"message": INITIALIZATION_EXCEEDED_60})
    );
    assert_eq!(
        classified(&failed),
        Some(PlatformError::InitializationTimedOut)
    );
    assert_eq!(emulator.counter(), 0, "nothing ran");
    let ran = invoke(&emulator, SESSION, None, &counter(2)).await;
    assert_eq!(ran.text(), "1");
    assert_eq!(emulator.audit().microvms_started, 2);
    assert_eq!(emulator.audit().initializations_timed_out, 1);
}

#[tokio::test(start_paused = true)]
async fn a_microvm_past_its_idle_timeout_terminates_for_15_s_refusing_its_requests_as_busy() {
    for form in [BusyForm::JsonRpc200, BusyForm::Conflict409] {
        let emulator = start(EmulatorConfig::default().busy_form(form)).await;
        let mcp_session = initialized_session(&emulator, SESSION, None, 1).await;
        let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(2)).await;
        assert_eq!(ran.text(), "1");
        // Idle for its whole idle timeout: terminating, refused as busy, for 15 s — and the
        // refused requests do not keep it alive.
        advance(Duration::from_secs(900)).await;
        let busy = invoke(&emulator, SESSION, Some(&mcp_session), &counter(3)).await;
        assert_busy(&busy, form, 3, SESSION);
        advance(Duration::from_millis(14_999)).await;
        let busy = invoke(&emulator, SESSION, Some(&mcp_session), &counter(4)).await;
        assert_busy(&busy, form, 4, SESSION);
        let audit = emulator.audit();
        assert_eq!((audit.busy_terminating, audit.microvms_started), (2, 1));
        // Terminated: a new microVM, which never issued the MCP session.
        advance(Duration::from_millis(1)).await;
        let gone = invoke(&emulator, SESSION, Some(&mcp_session), &counter(5)).await;
        assert_mcp_404(&gone, json!(5), SESSION);
        assert_counts!(
            &emulator,
            sessions: 1, microvms: 2, busy: 2, mcp_sessions: 1, refused: 1, not_found: 1, runs: 1;
            "{form:?}"
        );
        assert_eq!(emulator.audit().busy_terminating, 2);
    }
}

/// A SigV4 signer for plain MCP requests to the runtime's invocations URL: no runtime session
/// id, as a plain MCP client sends them.
fn plain_signer(emulator: &Emulator) -> agentcore_tower::endpoint::McpEndpointLayer {
    agentcore_tower::endpoint::McpEndpointLayer::sigv4(emulator.credentials())
        .region(emulator.region())
        .origin(emulator.invocations_url())
        .build()
        .unwrap()
}

/// One POST to the runtime's invocations URL without a runtime session id. The `Date` header
/// hyper's server adds is dropped, as the runtime door drops every header its operation does
/// not model, so that answers compare with the others here.
async fn plain_post(emulator: &Emulator, mcp_session: Option<&str>, body: &Value) -> Raw {
    let stack = ServiceBuilder::new()
        .layer(plain_signer(emulator))
        .service(http_client());
    let request = mcp_post(&emulator.invocations_url(), mcp_session, body.to_string());
    let mut answer = Raw::read(stack.oneshot(request).await.unwrap()).await;
    answer.headers.remove(http::header::DATE);
    answer
}

fn routed(mcp_session: Option<&str>, runtime_session: &str, by_mcp_session: bool) -> Routed {
    let mut routed = Routed::default();
    routed.mcp_session_id = mcp_session.map(str::to_owned);
    routed.runtime_session_id = runtime_session.to_owned();
    routed.by_mcp_session = by_mcp_session;
    routed
}

#[tokio::test(start_paused = true)]
async fn an_invocation_without_a_runtime_session_id_is_routed_by_its_mcp_session() {
    let emulator = start(cold_start().stateful(true)).await;
    // No runtime session id, no MCP session: a new runtime session, named in the answer; the
    // request that started it is held while it provisions, then served.
    let started = Instant::now();
    let opened = plain_post(&emulator, None, &initialize(1)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    assert_eq!(opened.status, StatusCode::OK, "{opened:?}");
    let runtime_session = opened.header(RUNTIME_SESSION_ID).unwrap().to_owned();
    let mcp_session = opened.mcp_session();
    // Its MCP session routes the next requests to that runtime session.
    for id in [2, 3] {
        let ran = plain_post(&emulator, Some(&mcp_session), &counter(id)).await;
        assert_eq!(ran.status, StatusCode::OK, "{ran:?}");
        assert_eq!(
            ran.header(RUNTIME_SESSION_ID),
            Some(runtime_session.as_str())
        );
        assert_eq!(ran.text(), (id - 1).to_string());
    }
    // Another client without either: a runtime session of its own.
    let other = plain_post(&emulator, None, &initialize(4)).await;
    let other_session = other.header(RUNTIME_SESSION_ID).unwrap().to_owned();
    assert_ne!(other_session, runtime_session);
    // An id no microVM issued routes nowhere known: a new session, whose server refuses it.
    let unknown = plain_post(&emulator, Some("made-up"), &counter(5)).await;
    let unknown_session = unknown.header(RUNTIME_SESSION_ID).unwrap().to_owned();
    assert_mcp_404(&unknown, json!(5), &unknown_session);
    // The microVM ended: the id still routes to its runtime session, whose new microVM (a cold
    // start: refused as busy, since the session exists) then answers the 404.
    assert!(emulator.end_microvm(&runtime_session));
    let busy = plain_post(&emulator, Some(&mcp_session), &counter(6)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 6, &runtime_session);
    advance(Duration::from_secs(12)).await;
    let gone = plain_post(&emulator, Some(&mcp_session), &counter(7)).await;
    assert_mcp_404(&gone, json!(7), &runtime_session);

    let audit = emulator.audit();
    assert_eq!(
        audit.routed,
        [
            routed(None, &runtime_session, false),
            routed(Some(&mcp_session), &runtime_session, true),
            routed(Some(&mcp_session), &runtime_session, true),
            routed(None, &other_session, false),
            routed(Some("made-up"), &unknown_session, false),
            routed(Some(&mcp_session), &runtime_session, true),
            routed(Some(&mcp_session), &runtime_session, true),
        ]
    );
    assert!(
        audit
            .received
            .iter()
            .all(|r| r.runtime_session_id.is_none())
    );
    assert_counts!(
        &emulator,
        sessions: 3, microvms: 4, busy: 1, mcp_sessions: 2, refused: 2, not_found: 2, runs: 2
    );
    // A request that names its runtime session goes there, whatever its MCP session says.
    let named = invoke(&emulator, SESSION, Some(&mcp_session), &initialize(8)).await;
    assert_busy(&named, BusyForm::JsonRpc200, 8, SESSION);
    assert_eq!(emulator.audit().routed.len(), 7, "not routed: it named one");
}

// ---- The same faults met by the stack: the session recovery layer, the recommended layers
// with their defaults, the emulator's signer ----

/// What the proxy runs: session recovery, then the recommended layers (the guard given) and
/// the emulator's signer.
fn runtime_stack(layers: RecommendedLayers<SigV4InvokeLayer>) -> Stack {
    read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(layers)
            .service(http_client()),
    )
}

fn defaults(emulator: &Emulator) -> RecommendedLayers<SigV4InvokeLayer> {
    RecommendedLayers::new(emulator.signer().build().unwrap())
}

/// One POST of `body` to `url` through `stack`, in `mcp_session` when there is one.
async fn send(stack: &Stack, url: &str, mcp_session: Option<&str>, body: &Value) -> Answered {
    send_through(stack, mcp_post(url, mcp_session, body.to_string())).await
}

/// `initialize` and `notifications/initialized` through `stack`: the MCP session.
async fn open(stack: &Stack, url: &str) -> String {
    let opened = send(stack, url, None, &initialize(0)).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.record);
    let mcp_session = opened.session.expect("an Mcp-Session-Id");
    let initialized = message(None, "notifications/initialized", json!({}));
    let accepted = send(stack, url, Some(&mcp_session), &initialized).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.record);
    mcp_session
}

/// `counter(id)` sent through `stack` to the runtime, in `mcp_session` when there is one: the
/// answer, and how long it took.
async fn timed_call(stack: &Stack, mcp_session: Option<&str>, id: u64) -> (Answered, Duration) {
    let started = Instant::now();
    let answer = send(stack, RUNTIME_URL, mcp_session, &counter(id)).await;
    (answer, started.elapsed())
}

/// Asserts `took` lies in `range`, in seconds.
#[track_caller]
fn assert_took(took: Duration, range: Range<u64>, context: Arguments) {
    let range = Duration::from_secs(range.start)..Duration::from_secs(range.end);
    assert!(range.contains(&took), "{context}: {took:?}");
}

const RUNTIME_URL: &str = "http://agentcore.invalid/mcp";
const BUSY_200: &str = "session busy (JSON-RPC -32005)";
const BUSY_409: &str = "session busy (HTTP 409 RetryableConflictException)";
const EXPIRED: &str = "MCP session expired (HTTP 404)";

fn initialization_cause(form: PlatformForm) -> &'static str {
    match form {
        PlatformForm::Http => "runtime initialization time exceeded (HTTP 424 RuntimeClientError)",
        _ => "runtime initialization time exceeded (JSON-RPC -32010)",
    }
}

#[tokio::test(start_paused = true)]
async fn the_stack_re_sends_a_call_whose_microvm_did_not_initialize_and_it_runs_once() {
    for form in [PlatformForm::JsonRpc, PlatformForm::Http] {
        let emulator = start(cold_start()).await;
        let stack = runtime_stack(defaults(&emulator));
        // The session's first request is a call of a tool declared nothing (`counter`, not
        // idempotent): its microVM gives up after 30 s; the re-send meets a new one, whose
        // 12 s cold start is waited out; the tool runs once.
        emulator.push_fault(Fault::InitializationTimedOut { form });
        let (answer, took) = timed_call(&stack, None, 1).await;
        let record = &answer.record;
        assert_eq!(answer.text(), "1", "{form:?}: {record}");
        assert_took(took, 42..45, format_args!("{form:?}: {record}"));
        let attempts = record.attempts();
        assert_eq!(
            attempts[0].platform_error().map(|p| p.error()),
            Some(PlatformError::InitializationTimedOut),
            "{record}"
        );
        let first = &attempts[0].decisions()[0];
        assert_eq!(first.layer(), "session_busy");
        assert!(
            matches!(first.verdict(), Verdict::SentAgain { cause, .. } if *cause == initialization_cause(form)),
            "{record}"
        );
        assert_eq!(
            first.permission(),
            Some(&Permission::new(
                By::Adapter,
                Assumption::RefusedBeforeExecution
            ))
        );
        // Then the new microVM's cold start, every refusal of it waited out.
        let audit = emulator.audit();
        let resent = resends(record);
        assert_eq!(resent[0], ("session_busy", initialization_cause(form)));
        assert_eq!(
            resent[1..],
            vec![("session_busy", BUSY_200); audit.busy_refusals as usize][..],
            "{record}"
        );
        assert!(audit.busy_refusals >= 5, "{record}");
        assert_eq!(
            attempts.len() as u64,
            audit.requests,
            "every attempt recorded"
        );
        assert_eq!(audit.executions_of("counter"), 1);
        assert_eq!(audit.initializations_timed_out, 1);
        assert_eq!((audit.sessions_started, audit.microvms_started), (1, 2));
        assert!(
            attempts.last().unwrap().decisions()[0]
                .verdict()
                .is_delivered()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_runtime_that_never_initializes_is_re_sent_once_then_delivered_as_it_came() {
    for form in [PlatformForm::JsonRpc, PlatformForm::Http] {
        let emulator = start(EmulatorConfig::default()).await;
        let stack = runtime_stack(defaults(&emulator));
        // A container that cannot start: every microVM gives up after 30 s. The session's
        // first request is the call.
        emulator.push_fault(Fault::InitializationTimedOut { form });
        emulator.push_fault(Fault::InitializationTimedOut { form });
        emulator.push_fault(Fault::InitializationTimedOut { form });
        let started = Instant::now();
        let answer = send(&stack, RUNTIME_URL, None, &counter(7)).await;
        let record = &answer.record;
        // Two attempts of 30 s each, a short wait between: the second is delivered as it came.
        let took = started.elapsed();
        assert!(
            took > Duration::from_secs(60) && took < Duration::from_secs(61),
            "{took:?}: {record}"
        );
        match form {
            PlatformForm::Http => {
                assert_eq!(answer.status, StatusCode::FAILED_DEPENDENCY);
                assert_eq!(answer.json, json!({"message": INITIALIZATION_EXCEEDED_30}));
            }
            _ => {
                assert_eq!(answer.status, StatusCode::OK);
                assert_eq!(
                    answer.json,
                    json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32010, "message": INITIALIZATION_EXCEEDED_30}})
                );
            }
        }
        let attempts = record.attempts();
        assert_eq!(attempts.len(), 2, "{record}");
        assert_eq!(
            resends(record),
            [("session_busy", initialization_cause(form))]
        );
        assert_eq!(
            attempts[1].decisions()[0].verdict(),
            &Verdict::AttemptsExhausted {
                cause: initialization_cause(form),
                max_attempts: 2
            },
            "{record}"
        );
        assert_eq!(attempts[1].decisions().len(), 1, "said once: {record}");
        assert!(
            record
                .to_string()
                .ends_with("but the cap of 2 attempts was reached); effect unknown"),
            "{record}"
        );
        let audit = emulator.audit();
        assert_eq!(audit.executions_of("counter"), 0);
        assert_eq!(audit.initializations_timed_out, 2);
        assert_eq!(audit.microvms_started, 2, "one per attempt, each gone");

        // The third fault is still queued: a strict tool meets it and is not re-sent, nor is
        // any tool with `initialization_attempts(1)`.
        let strict = runtime_stack(
            defaults(&emulator).guard(ReplayGuardLayer::new().strict_tools(["counter"])),
        );
        let answer = send(&strict, RUNTIME_URL, None, &counter(8)).await;
        assert_eq!(answer.record.len(), 1, "{}", answer.record);
        assert!(
            matches!(
                answer.record.attempts()[0].decisions()[0].verdict(),
                Verdict::Forbidden { .. }
            ),
            "{}",
            answer.record
        );
        emulator.push_fault(Fault::InitializationTimedOut { form });
        let once = runtime_stack(
            defaults(&emulator)
                .session_busy(SessionBusyRetryLayer::new().initialization_attempts(1)),
        );
        let answer = send(&once, RUNTIME_URL, None, &counter(9)).await;
        assert_eq!(answer.record.len(), 1, "{}", answer.record);
        assert_eq!(
            answer.record.attempts()[0].decisions()[0].verdict(),
            &Verdict::AttemptsExhausted {
                cause: initialization_cause(form),
                max_attempts: 1
            }
        );
        assert_eq!(emulator.audit().executions_of("counter"), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_120_s_initialization_limit_outlasts_the_calls_ceiling_and_is_delivered_at_once() {
    let emulator =
        start(EmulatorConfig::default().initialization_limit(Duration::from_secs(120))).await;
    let stack = runtime_stack(defaults(&emulator));
    emulator.push_fault(Fault::InitializationTimedOut {
        form: PlatformForm::JsonRpc,
    });
    let answer = send(&stack, RUNTIME_URL, None, &counter(1)).await;
    assert_eq!(answer.json["error"]["code"], -32010);
    assert_eq!(
        answer.json["error"]["message"],
        "Runtime initialization time exceeded. Please make sure that initialization completes in 120s."
    );
    // Answered 120 s after the call began, past its 60 s ceiling: no re-send can start.
    let attempts = answer.record.attempts();
    assert_eq!(attempts.len(), 1, "{}", answer.record);
    assert!(
        matches!(
            attempts[0].decisions()[0].verdict(),
            Verdict::WaitCeiling { remaining, .. } if remaining.is_zero()
        ),
        "{}",
        answer.record
    );
    assert_eq!(emulator.audit().executions_of("counter"), 0);
}

#[tokio::test(start_paused = true)]
async fn every_other_32010_is_delivered_as_it_came_for_an_undeclared_tool() {
    let emulator = start(EmulatorConfig::default()).await;
    let stack = runtime_stack(defaults(&emulator));
    let mcp_session = open(&stack, RUNTIME_URL).await;
    for (id, fault, ran) in [
        (1, Fault::HealthCheckFailed, 0),
        (
            2,
            Fault::Platform {
                error: PlatformError::RuntimeClientError,
                form: PlatformForm::JsonRpc,
            },
            1,
        ),
        (
            3,
            Fault::Platform {
                error: PlatformError::RuntimeClientError,
                form: PlatformForm::Http,
            },
            2,
        ),
    ] {
        emulator.push_fault(fault);
        let answer = send(&stack, RUNTIME_URL, Some(&mcp_session), &counter(id)).await;
        assert_eq!(answer.record.len(), 1, "{fault:?}: {}", answer.record);
        assert!(resends(&answer.record).is_empty());
        assert_eq!(
            answer.record.attempts()[0]
                .platform_error()
                .map(|p| p.error()),
            Some(PlatformError::RuntimeClientError)
        );
        assert_eq!(emulator.audit().executions_of("counter"), ran, "{fault:?}");
    }
    assert_eq!(emulator.audit().initializations_timed_out, 0);
}

#[tokio::test(start_paused = true)]
async fn the_stack_waits_out_a_terminating_microvm_and_its_successor_and_runs_the_call_once() {
    // An 8 s cold start after the 15 s termination: refused for 23 s, and up to 2 s more before
    // the first attempt after the termination starts the new microVM — within session busy's
    // 30 s of waits with room for its last wait (2 s at most). (A 12 s cold start after it
    // can pass the ceiling: 15 + 2 + 12 + 2 s.)
    for (end, form) in [
        ("idle", BusyForm::JsonRpc200),
        ("idle", BusyForm::Conflict409),
        ("lifetime", BusyForm::JsonRpc200),
    ] {
        let mut config = EmulatorConfig::default()
            .provisioning(Duration::from_secs(8))
            .busy_form(form);
        if end == "lifetime" {
            // Never idle long enough: the lifetime ends it.
            config = config
                .max_lifetime(Duration::from_secs(1_200))
                .idle_timeout(Duration::from_secs(1_200));
        }
        let emulator = start(config).await;
        let stack = runtime_stack(defaults(&emulator));
        let born = Instant::now();
        let mcp_session = open(&stack, RUNTIME_URL).await;
        let ran = send(&stack, RUNTIME_URL, Some(&mcp_session), &counter(1)).await;
        assert_eq!(ran.text(), "1");
        // The next call arrives at the end: its idle timeout from the last request, or its
        // lifetime from its start.
        match end {
            "idle" => advance(Duration::from_secs(900)).await,
            _ => advance(born + Duration::from_secs(1_200) - Instant::now()).await,
        }
        let before = emulator.audit().busy_refusals;
        let (answer, took) = timed_call(&stack, Some(&mcp_session), 2).await;
        let record = &answer.record;
        assert_eq!(answer.text(), "2", "{end} {form:?}: {record}");
        // 15 s terminating, then an 8 s cold start, each refusal waited out; then the new
        // microVM's 404, recovered once.
        assert_took(took, 23..27, format_args!("{end} {form:?}: {record}"));
        let audit = emulator.audit();
        let busy = if form == BusyForm::Conflict409 {
            BUSY_409
        } else {
            BUSY_200
        };
        let mut expected = vec![("session_busy", busy); (audit.busy_refusals - before) as usize];
        expected.push(("mcp_session", EXPIRED));
        assert_eq!(resends(record), expected, "{record}");
        assert!(audit.busy_terminating >= 5, "{end}: {record}");
        assert_eq!(audit.executions_of("counter"), 2, "{end} {form:?}");
        assert_eq!(audit.microvms_started, 2);
        assert_eq!(audit.mcp_sessions_started, 2);
        assert_eq!(audit.mcp_sessions_not_found, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_plain_mcp_client_at_the_runtime_url_stays_in_its_runtime_session_by_its_mcp_session() {
    let emulator = start(cold_start().stateful(true)).await;
    // The recommended layers over a plain MCP signer: no runtime session id on any request.
    let url = emulator.invocations_url();
    let stack = read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(RecommendedLayers::new(plain_signer(&emulator)))
            .service(http_client()),
    );
    let mcp_session = open(&stack, &url).await;
    for id in 1..=2 {
        let answer = send(&stack, &url, Some(&mcp_session), &counter(id)).await;
        assert_eq!(answer.text(), id.to_string(), "{}", answer.record);
        assert_eq!(answer.record.len(), 1, "{}", answer.record);
    }
    let audit = emulator.audit();
    let first = audit.routed[0].runtime_session_id.clone();
    assert_eq!(audit.routed[0], routed(None, &first, false));
    assert_eq!(
        audit.routed[1..],
        vec![routed(Some(&mcp_session), &first, true); 3][..]
    );
    assert_eq!((audit.sessions_started, audit.microvms_started), (1, 1));
    assert_eq!(
        audit.busy_refusals, 0,
        "the first request was held, not refused"
    );
    assert_eq!(audit.mcp_sessions_not_found, 0);

    // Idle past the timeout and the termination: the MCP session still routes to its runtime
    // session, whose new microVM's cold start is waited out, then answers 404; the new MCP
    // session's `initialize` starts a runtime session of its own, where the call runs once.
    advance(Duration::from_secs(900 + 15)).await;
    let answer = send(&stack, &url, Some(&mcp_session), &counter(3)).await;
    assert_eq!(answer.text(), "3", "{}", answer.record);
    assert_eq!(
        resends(&answer.record).last(),
        Some(&("mcp_session", EXPIRED))
    );
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 3);
    assert_eq!(audit.sessions_started, 2);
    assert_eq!(audit.microvms_started, 3);
    assert_eq!(audit.mcp_sessions_not_found, 1);
    let renewed = audit
        .routed
        .iter()
        .rev()
        .find(|r| !r.by_mcp_session)
        .unwrap();
    assert_ne!(renewed.runtime_session_id, first);
    assert_eq!(
        audit.routed.last().unwrap().runtime_session_id,
        renewed.runtime_session_id,
        "the re-sent call went to the new MCP session's runtime session"
    );
}
