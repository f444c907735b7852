//! The emulator lives the AgentCore session lifecycle: cold starts that provision for seconds,
//! microVMs that end at their idle timeout or lifetime (and with them the MCP sessions their
//! server issued), gateway sessions that time out from `initialize`, and the faults that end
//! either on purpose.
//!
//! Every test runs on a paused tokio clock, moved only by `tokio::time::advance` between
//! requests (nothing here holds a timer, so the clock never moves on its own), and talks to
//! the emulator over loopback HTTP through the emulator's own signer — with no retry layer, so
//! each raw answer is asserted as it came: status, headers, body, and the audit's counts.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use agentcore_tower::emulator::{Audit, BusyForm, Emulator, EmulatorConfig};
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use bytes::Bytes;
use common::{http_client, read_all};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::time::{Instant, advance};
use tower::{ServiceBuilder, ServiceExt};

const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
const SESSION: &str = "lifecycle-runtime-session-000000000000000001";
const OTHER_SESSION: &str = "lifecycle-runtime-session-000000000000000002";

/// An answer, read whole.
#[derive(Debug)]
struct Raw {
    status: StatusCode,
    headers: http::HeaderMap,
    text: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn header_names(&self) -> BTreeSet<&str> {
        self.headers.keys().map(|name| name.as_str()).collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
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

async fn read<B>(response: Response<B>) -> Raw
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let (parts, body) = response.into_parts();
    let (bytes, _) = read_all(body).await;
    Raw {
        status: parts.status,
        headers: parts.headers,
        text: String::from_utf8(bytes.to_vec()).unwrap(),
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

fn mcp_request(url: &str, mcp_session: Option<&str>, body: &Value) -> Request<Full<Bytes>> {
    let mut request = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = mcp_session {
        request = request.header("mcp-session-id", id);
    }
    request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
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
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let request = mcp_request("http://agentcore.invalid/mcp", mcp_session, body);
    read(stack.oneshot(request).await.unwrap()).await
}

/// One POST to the emulated gateway's `/mcp`, SigV4-signed for it.
async fn gateway_post(emulator: &Emulator, mcp_session: Option<&str>, body: &Value) -> Raw {
    let signer = emulator.endpoint_signer().build().unwrap();
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let request = mcp_request(&emulator.gateway_url(), mcp_session, body);
    read(stack.oneshot(request).await.unwrap()).await
}

/// The audit's lifecycle counts, to compare whole.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    sessions_started: u64,
    microvms_started: u64,
    busy_refusals: u64,
    mcp_sessions_started: u64,
    mcp_session_refusals: u64,
    mcp_sessions_not_found: u64,
    counter_runs: u64,
}

fn counts(emulator: &Emulator) -> Counts {
    let audit: Audit = emulator.audit();
    assert_eq!(
        audit.executions_of("counter"),
        emulator.counter(),
        "the counter ran as often as the audit says"
    );
    Counts {
        sessions_started: audit.sessions_started,
        microvms_started: audit.microvms_started,
        busy_refusals: audit.busy_refusals,
        mcp_sessions_started: audit.mcp_sessions_started,
        mcp_session_refusals: audit.mcp_session_refusals,
        mcp_sessions_not_found: audit.mcp_sessions_not_found,
        counter_runs: audit.executions_of("counter"),
    }
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
        BTreeSet::from([
            "content-length",
            "content-type",
            RUNTIME_SESSION_ID,
            "x-amzn-requestid"
        ]),
        "no x-amzn-errortype, no Mcp-Session-Id: {answer:?}"
    );
    assert_eq!(answer.header(RUNTIME_SESSION_ID), Some(session));
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": "Session not found"}})
    );
}

/// An answered `initialize` of runtime session `session`: its new `Mcp-Session-Id`.
fn assert_initialized(answer: &Raw, id: u64, session: &str) -> String {
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
        let emulator = Emulator::start(
            EmulatorConfig::default()
                .provisioning(Duration::from_secs(12))
                .busy_form(form),
        )
        .await
        .unwrap();
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
        let answer = invoke(&emulator, SESSION, None, &initialize(4)).await;
        let mcp_session = assert_initialized(&answer, 4, SESSION);
        let answer = invoke(&emulator, SESSION, Some(&mcp_session), &counter(5)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.text(), "1");
        assert_eq!(
            counts(&emulator),
            Counts {
                sessions_started: 1,
                microvms_started: 1,
                busy_refusals: 3,
                mcp_sessions_started: 1,
                counter_runs: 1,
                ..Counts::default()
            },
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
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(Duration::from_secs(12)))
        .await
        .unwrap();
    let busy = invoke(&emulator, SESSION, None, &initialize(1)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, 1, SESSION);
    advance(Duration::from_secs(12)).await;
    let first = assert_initialized(
        &invoke(&emulator, SESSION, None, &initialize(2)).await,
        2,
        SESSION,
    );
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
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 2,
            busy_refusals: 2,
            mcp_sessions_started: 1,
            counter_runs: 2,
            ..Counts::default()
        }
    );

    // Provisioned: its MCP server never issued the old Mcp-Session-Id. 404, nothing runs.
    advance(Duration::from_secs(12)).await;
    let gone = invoke(&emulator, SESSION, Some(&first), &counter(6)).await;
    assert_mcp_404(&gone, json!(6), SESSION);
    let gone = invoke(&emulator, SESSION, Some(&first), &initialized).await;
    assert_mcp_404(&gone, Value::Null, SESSION);

    // A new initialize opens a new MCP session in the new microVM, and the call runs.
    let second = assert_initialized(
        &invoke(&emulator, SESSION, Some(&first), &initialize(7)).await,
        7,
        SESSION,
    );
    assert_ne!(second, first);
    let ran = invoke(&emulator, SESSION, Some(&second), &counter(8)).await;
    assert_eq!((ran.status, ran.text()), (StatusCode::OK, "3".to_owned()));
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 2,
            busy_refusals: 2,
            mcp_sessions_started: 2,
            mcp_session_refusals: 2,
            mcp_sessions_not_found: 2,
            counter_runs: 3,
        }
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
    let emulator = Emulator::start(EmulatorConfig::default().idle_timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    let mcp_session = assert_initialized(
        &invoke(&emulator, SESSION, None, &initialize(1)).await,
        1,
        SESSION,
    );
    advance(Duration::from_millis(59_999)).await;
    let ran = invoke(&emulator, SESSION, Some(&mcp_session), &counter(2)).await;
    assert_eq!(ran.text(), "1");
    advance(Duration::from_secs(60)).await;
    // No provisioning configured: the new microVM answers at once, and knows no MCP session.
    let gone = invoke(&emulator, SESSION, Some(&mcp_session), &counter(3)).await;
    assert_mcp_404(&gone, json!(3), SESSION);
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 2,
            mcp_sessions_started: 1,
            mcp_session_refusals: 1,
            mcp_sessions_not_found: 1,
            counter_runs: 1,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_microvm_in_constant_use_still_ends_at_its_8_hour_lifetime() {
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(Duration::from_secs(12)))
        .await
        .unwrap();
    let started = Instant::now();
    assert_busy(
        &invoke(&emulator, SESSION, None, &initialize(1)).await,
        BusyForm::JsonRpc200,
        1,
        SESSION,
    );
    advance(Duration::from_secs(12)).await;
    let mcp_session = assert_initialized(
        &invoke(&emulator, SESSION, None, &initialize(2)).await,
        2,
        SESSION,
    );
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

    // At 8 hours from its start the microVM ends, in use or not: a cold start, then the 404.
    advance(Duration::from_secs(1)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(8 * 3600));
    id += 1;
    let busy = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_busy(&busy, BusyForm::JsonRpc200, id, SESSION);
    advance(Duration::from_secs(12)).await;
    id += 1;
    let gone = invoke(&emulator, SESSION, Some(&mcp_session), &counter(id)).await;
    assert_mcp_404(&gone, json!(id), SESSION);
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 2,
            busy_refusals: 2,
            mcp_sessions_started: 1,
            mcp_session_refusals: 1,
            mcp_sessions_not_found: 1,
            counter_runs: 48,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_shorter_than_provisioning_keeps_a_session_busy() {
    // A microVM whose lifetime ends while it still provisions never answers: each request
    // after its end meets a new one, provisioning again.
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .provisioning(Duration::from_secs(12))
            .max_lifetime(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    for (id, wait) in [(1, 0), (2, 9), (3, 1), (4, 9), (5, 1)] {
        advance(Duration::from_secs(wait)).await;
        let answer = invoke(&emulator, SESSION, None, &initialize(id)).await;
        assert_busy(&answer, BusyForm::JsonRpc200, id, SESSION);
    }
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 3,
            busy_refusals: 5,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn initialize_always_opens_a_new_mcp_session() {
    let emulator = Emulator::start(EmulatorConfig::default().stateful(true))
        .await
        .unwrap();
    let first = assert_initialized(
        &invoke(&emulator, SESSION, None, &initialize(1)).await,
        1,
        SESSION,
    );
    // Carrying an id (its own, or one never issued), initialize still gets a new one.
    let second = assert_initialized(
        &invoke(&emulator, SESSION, Some(&first), &initialize(2)).await,
        2,
        SESSION,
    );
    let third = assert_initialized(
        &invoke(&emulator, SESSION, Some("made-up"), &initialize(3)).await,
        3,
        SESSION,
    );
    assert_eq!(BTreeSet::from([&first, &second, &third]).len(), 3);
    // All three live in the microVM.
    for (id, session) in [(4, &first), (5, &second), (6, &third)] {
        let ran = invoke(&emulator, SESSION, Some(session), &counter(id)).await;
        assert_eq!(ran.status, StatusCode::OK, "{ran:?}");
    }
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 1,
            microvms_started: 1,
            mcp_sessions_started: 3,
            counter_runs: 3,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_stateful_server_refuses_what_it_did_not_issue_and_a_lenient_one_takes_it() {
    let stateful = Emulator::start(EmulatorConfig::default().stateful(true))
        .await
        .unwrap();
    let lenient = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut issued = Vec::new();
    for emulator in [&stateful, &lenient] {
        let mcp_session = assert_initialized(
            &invoke(emulator, SESSION, None, &initialize(1)).await,
            1,
            SESSION,
        );
        let ran = invoke(emulator, SESSION, Some(&mcp_session), &counter(2)).await;
        assert_eq!(ran.text(), "1");
        issued.push(mcp_session);
    }

    // No Mcp-Session-Id: the stateful server's 400.
    let missing = invoke(&stateful, SESSION, None, &counter(3)).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{missing:?}");
    assert_eq!(
        missing.header_names(),
        BTreeSet::from([
            "content-length",
            "content-type",
            RUNTIME_SESSION_ID,
            "x-amzn-requestid"
        ])
    );
    assert_eq!(
        missing.json(),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
    );
    // An id it never issued, and its own id sent to another runtime session's microVM: 404.
    let made_up = invoke(&stateful, SESSION, Some("made-up"), &counter(4)).await;
    assert_mcp_404(&made_up, json!(4), SESSION);
    let elsewhere = invoke(&stateful, OTHER_SESSION, Some(&issued[0]), &counter(5)).await;
    assert_mcp_404(&elsewhere, json!(5), OTHER_SESSION);
    assert_eq!(
        counts(&stateful),
        Counts {
            sessions_started: 2,
            microvms_started: 2,
            mcp_sessions_started: 1,
            mcp_session_refusals: 3,
            mcp_sessions_not_found: 2,
            counter_runs: 1,
            ..Counts::default()
        }
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
    assert_eq!(
        counts(&lenient),
        Counts {
            sessions_started: 2,
            microvms_started: 2,
            mcp_sessions_started: 1,
            counter_runs: 4,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn expire_mcp_session_ends_one_mcp_session_at_a_runtime() {
    for stateful in [false, true] {
        let emulator = Emulator::start(EmulatorConfig::default().stateful(stateful))
            .await
            .unwrap();
        let a = assert_initialized(
            &invoke(&emulator, SESSION, None, &initialize(1)).await,
            1,
            SESSION,
        );
        let b = assert_initialized(
            &invoke(&emulator, SESSION, None, &initialize(2)).await,
            2,
            SESSION,
        );
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
        assert_eq!(
            counts(&emulator),
            Counts {
                sessions_started: 1,
                microvms_started: 1,
                mcp_sessions_started: 2,
                mcp_session_refusals: 2,
                mcp_sessions_not_found: 2,
                counter_runs: 1,
                ..Counts::default()
            },
            "stateful: {stateful}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn end_microvm_makes_the_next_request_a_cold_start() {
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .provisioning(Duration::from_secs(12))
            .busy_form(BusyForm::Conflict409),
    )
    .await
    .unwrap();
    let mut mcp_sessions = Vec::new();
    for (id, session) in [(1, SESSION), (2, OTHER_SESSION)] {
        let busy = invoke(&emulator, session, None, &initialize(id)).await;
        assert_busy(&busy, BusyForm::Conflict409, id, session);
    }
    advance(Duration::from_secs(12)).await;
    for (id, session) in [(3, SESSION), (4, OTHER_SESSION)] {
        let answer = invoke(&emulator, session, None, &initialize(id)).await;
        mcp_sessions.push(assert_initialized(&answer, id, session));
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
    let again = assert_initialized(
        &invoke(&emulator, SESSION, None, &initialize(9)).await,
        9,
        SESSION,
    );
    let ran = invoke(&emulator, SESSION, Some(&again), &counter(10)).await;
    assert_eq!(ran.text(), "2");

    // Every microVM at once: both sessions cold-start.
    assert_eq!(emulator.end_microvms(), 2);
    for (id, session, mcp_session) in [(11, SESSION, &again), (12, OTHER_SESSION, &mcp_sessions[1])]
    {
        let busy = invoke(&emulator, session, Some(mcp_session), &counter(id)).await;
        assert_busy(&busy, BusyForm::Conflict409, id, session);
    }
    assert_eq!(
        counts(&emulator),
        Counts {
            sessions_started: 2,
            microvms_started: 5,
            busy_refusals: 6,
            mcp_sessions_started: 3,
            mcp_session_refusals: 1,
            mcp_sessions_not_found: 1,
            counter_runs: 2,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_runtime_is_the_platforms_404_with_its_error_type() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/other-XyZ789")
            .endpoint(emulator.endpoint()),
        emulator.credentials(),
    )
    .runtime_session_id(SESSION)
    .build()
    .unwrap();
    let stack = ServiceBuilder::new().layer(signer).service(http_client());
    let request = mcp_request("http://agentcore.invalid/mcp", Some("any"), &counter(1));
    let answer = read(stack.oneshot(request).await.unwrap()).await;
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
    let emulator = Emulator::start(EmulatorConfig::default().gateway(true))
        .await
        .unwrap();
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
    assert_eq!(
        counts(&emulator),
        Counts {
            mcp_sessions_started: 2,
            mcp_session_refusals: 1,
            mcp_sessions_not_found: 1,
            counter_runs: 4,
            ..Counts::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_gateway_session_timeout_is_a_setting_and_sessions_expire_one_by_one() {
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .gateway(true)
            .gateway_session_timeout(Duration::from_secs(900)),
    )
    .await
    .unwrap();
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
    assert_eq!(
        counts(&emulator),
        Counts {
            mcp_sessions_started: 2,
            mcp_session_refusals: 2,
            mcp_sessions_not_found: 2,
            counter_runs: 2,
            ..Counts::default()
        }
    );
}
