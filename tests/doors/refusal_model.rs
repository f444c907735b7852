//! A model check of the call: seeded random sequences of refusals of every kind and form — a
//! runtime session still provisioning, session busy (HTTP 200 with -32005, HTTP 409),
//! throttling (HTTP 429 without `Retry-After`, with delta-seconds, with an HTTP-date, with
//! `x-amz-retry-after`; HTTP 200 with -32003), MCP's 404 for an expired session (before the
//! call or in the middle of its sequence) — sometimes a dropped connection after the
//! tool ran, then success; through the recommended stack (McpSessionRecoveryLayer above the
//! guard, throttle, session busy and signer, those four in a random order), against the
//! emulator on a paused clock, with the defaults.
//!
//! The model knows each kind's allowance and the call's ceiling in time, and builds each case
//! so that its outcome is certain whatever the jitter: a sequence whose waits fit ends in
//! success with one execution (two for a declared tool whose connection dropped after it ran);
//! one that does not ends in the refusal of the kind that ran out, delivered as it came, the
//! record naming it, nothing executed; a failure that may have run is re-sent only where
//! declared; the record lists every attempt the emulator saw.

use crate::common;

use std::time::Duration;

use agentcore_tower::contract::PlatformError;
use agentcore_tower::invoke::SigV4InvokeLayer;
use agentcore_tower::record::Verdict;
use agentcore_tower::{
    AttemptRecord, BoxError, CallBudget, McpSessionRecoveryLayer, ReplayGuardLayer,
    SessionBusyRetryLayer, ThrottleRetryLayer,
};
use agentcore_tower_emulator::{
    BusyForm, Emulator, EmulatorConfig, Fault, PlatformForm, RetryAfter,
};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

type Body = UnsyncBoxBody<Bytes, BoxError>;
type Stack = BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError>;

/// How many cases run: each is a fresh emulator and stack, about 10 ms of real time.
const CASES: u64 = 160;

/// fastrand's generator, seeded by the case, so a failing case can be run again.
struct Rng(fastrand::Rng);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One refusal of the sequence, in its form.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Refused {
    Busy200,
    Busy409,
    Throttle429(Option<RetryAfter>),
    Throttle32003,
    /// The MCP server has forgotten the call's MCP session: its 404.
    Expired404,
}

impl Refused {
    fn fault(self) -> Fault {
        let platform = |error, form| Fault::Platform { error, form };
        match self {
            Refused::Busy200 => platform(PlatformError::RetryableConflict, PlatformForm::JsonRpc),
            Refused::Busy409 => platform(PlatformError::RetryableConflict, PlatformForm::Http),
            Refused::Throttle429(retry_after) => Fault::Throttle { retry_after },
            Refused::Throttle32003 => platform(PlatformError::Throttling, PlatformForm::JsonRpc),
            Refused::Expired404 => Fault::SessionExpired,
        }
    }

    fn is_busy(self) -> bool {
        matches!(self, Refused::Busy200 | Refused::Busy409)
    }

    fn is_throttle(self) -> bool {
        matches!(self, Refused::Throttle429(_) | Refused::Throttle32003)
    }

    /// The layer whose allowance it spends, and the cause the record names.
    fn kind(self) -> (&'static str, &'static str) {
        match self {
            Refused::Busy200 => ("session_busy", "session busy (JSON-RPC -32005)"),
            Refused::Busy409 => (
                "session_busy",
                "session busy (HTTP 409 RetryableConflictException)",
            ),
            Refused::Throttle429(_) => ("throttle", "HTTP 429"),
            Refused::Throttle32003 => (
                "throttle",
                "throttled (JSON-RPC -32003, shared with ServiceQuotaExceeded)",
            ),
            Refused::Expired404 => ("mcp_session", "MCP session expired (HTTP 404)"),
        }
    }

    /// The answer's status and, in the JSON-RPC form, its error code.
    fn answer(self) -> (u16, Option<i64>) {
        match self {
            Refused::Busy200 => (200, Some(-32005)),
            Refused::Busy409 => (409, None),
            Refused::Throttle429(_) => (429, None),
            Refused::Throttle32003 => (200, Some(-32003)),
            Refused::Expired404 => (404, Some(-32001)),
        }
    }
}

/// What runs out in a case built not to fit.
#[derive(Clone, Copy, Debug)]
enum RunsOut {
    /// A third throttling refusal: throttling's cap of 3 attempts.
    ThrottleAttempts,
    /// A 429 asking for 11 s: throttling's ceiling of 10 s.
    ThrottleCeiling,
    /// 60 session-busy refusals: session busy's 45 s ceiling (or its 50 attempts).
    Busy,
    /// Two 429s asking for 3 s each under a call ceiling of 4 s.
    CallCeiling,
}

#[derive(Debug)]
struct Case {
    seed: u64,
    /// Outer to inner, below the session recovery layer: 0 guard, 1 throttle, 2 busy, 3 signer.
    order: [u8; 4],
    /// How long the new runtime session provisions (its first requests are refused busy).
    provisioning: Duration,
    /// Whether the MCP session has expired when the call starts (a 404, then a new session).
    expired: bool,
    refusals: Vec<Refused>,
    /// `add` is declared idempotent; `counter` is not.
    tool: &'static str,
    /// The connection drops after the tool ran, after the refusals.
    dropped_after_run: bool,
    runs_out: Option<RunsOut>,
}

fn random_refusal(rng: &mut Rng, busy: bool) -> Refused {
    match (busy, rng.below(5)) {
        (true, n) if n < 2 => Refused::Busy200,
        (true, _) => Refused::Busy409,
        (false, 0) => Refused::Throttle429(None),
        (false, 1) => Refused::Throttle429(Some(RetryAfter::Seconds(1 + rng.below(3)))),
        (false, 2) => Refused::Throttle429(Some(RetryAfter::DateIn(Duration::from_secs(2)))),
        // AWS's own header, in milliseconds.
        (false, 3) => Refused::Throttle429(Some(RetryAfter::Milliseconds(1_500))),
        (false, _) => Refused::Throttle32003,
    }
}

impl Case {
    fn new(seed: u64) -> Case {
        let mut rng = Rng(fastrand::Rng::with_seed(seed));
        let mut order = [0u8, 1, 2, 3];
        for i in (1..4).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let tool = if rng.chance(50) { "add" } else { "counter" };
        let runs_out = match rng.below(10) {
            0 => Some(RunsOut::ThrottleAttempts),
            1 => Some(RunsOut::ThrottleCeiling),
            2 => Some(RunsOut::Busy),
            3 => Some(RunsOut::CallCeiling),
            _ => None,
        };
        let mut refusals = Vec::new();
        let (mut provisioning, mut expired, mut dropped_after_run) = (Duration::ZERO, false, false);
        match runs_out {
            None => {
                // Fits by construction: session busy waits at most the provisioning, one
                // backoff past it (2 s) and 2 s per scripted refusal — 12 + 2 + 12 = 26 s of its
                // 45 s — in at most ~17 + 6 attempts of its 50; throttling at most 2 re-sends of
                // at most 3 s each (its cap is 3 attempts, its ceiling 10 s); 32 s in all, inside
                // the call's 90 s.
                match rng.below(3) {
                    0 => provisioning = Duration::from_secs(3),
                    1 => provisioning = Duration::from_secs(12),
                    _ => expired = rng.chance(60),
                }
                let busy = rng.below(7);
                let throttled = rng.below(3);
                for _ in 0..busy {
                    refusals.push(random_refusal(&mut rng, true));
                }
                for _ in 0..throttled {
                    let at = rng.below(refusals.len() as u64 + 1) as usize;
                    refusals.insert(at, random_refusal(&mut rng, false));
                }
                // An expiry in the middle of the sequence, once (one renewal per expiry), when
                // the call is in an MCP session and none expired before it.
                if provisioning.is_zero() && !expired && rng.chance(40) {
                    let at = rng.below(refusals.len() as u64 + 1) as usize;
                    refusals.insert(at, Refused::Expired404);
                }
                dropped_after_run = rng.chance(30);
            }
            Some(RunsOut::ThrottleAttempts) => {
                for _ in 0..rng.below(7) {
                    refusals.push(random_refusal(&mut rng, true));
                }
                for _ in 0..3 {
                    let at = rng.below(refusals.len() as u64 + 1) as usize;
                    let refused = random_refusal(&mut rng, false);
                    refusals.insert(at, refused);
                }
                // The third throttling refusal is the last attempt: drop what follows it.
                let third = refusals
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.is_throttle())
                    .nth(2)
                    .map(|(at, _)| at)
                    .unwrap();
                refusals.truncate(third + 1);
            }
            Some(RunsOut::ThrottleCeiling) => {
                for _ in 0..rng.below(7) {
                    refusals.push(random_refusal(&mut rng, true));
                }
                refusals.push(Refused::Throttle429(Some(RetryAfter::Seconds(11))));
            }
            Some(RunsOut::Busy) => {
                for _ in 0..60 {
                    refusals.push(random_refusal(&mut rng, true));
                }
            }
            Some(RunsOut::CallCeiling) => {
                refusals.push(Refused::Throttle429(Some(RetryAfter::Seconds(3))));
                refusals.push(Refused::Throttle429(Some(RetryAfter::Seconds(3))));
            }
        }
        Case {
            seed,
            order,
            provisioning,
            expired,
            refusals,
            tool,
            dropped_after_run,
            runs_out,
        }
    }
}

fn boxed<S, B>(service: S) -> Stack
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    BoxCloneService::new(
        service
            .map_response(|response: Response<B>| {
                response.map(|body| body.map_err(Into::into).boxed_unsync())
            })
            .map_err(Into::into),
    )
}

/// The recommended layers with their defaults, the four below the session recovery layer in
/// `order`.
fn stack(order: [u8; 4], signer: &SigV4InvokeLayer) -> Stack {
    let mut service = boxed(common::http_client());
    for layer in order.iter().rev() {
        service = match layer {
            0 => boxed(
                ReplayGuardLayer::new()
                    .idempotent_tools(["add"])
                    .layer(service),
            ),
            1 => boxed(ThrottleRetryLayer::new().layer(service)),
            2 => boxed(SessionBusyRetryLayer::new().layer(service)),
            _ => boxed(signer.layer(service)),
        };
    }
    boxed(McpSessionRecoveryLayer::new().layer(service))
}

fn post(id: u64, method: &str, params: Value, session: Option<&str>) -> Request<Full<Bytes>> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut request = common::mcp_post("http://agentcore.invalid/mcp", session, body.to_string());
    request.headers_mut().insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static("2025-06-18"),
    );
    request
}

/// The JSON-RPC message of an answer, JSON or the last message of an SSE stream.
fn message_of(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(value) = serde_json::from_str(&text) {
        return value;
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .next_back()
        .unwrap_or(Value::Null)
}

/// Opens an MCP session through the stack: its id.
async fn open(stack: &Stack) -> String {
    let params = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "model", "version": "1"}});
    let answer = stack
        .clone()
        .oneshot(post(1, "initialize", params, None))
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = answer.into_body().collect().await;
    let notified = stack.clone().oneshot(post(
        2,
        "notifications/initialized",
        json!({}),
        Some(&session),
    ));
    let notified = notified.await.unwrap();
    assert!(notified.status().is_success(), "{}", notified.status());
    session
}

async fn run(case: &Case) {
    // A provisioning runtime session is met by the call itself: the server keeps no MCP
    // session then, and the call is the first request. Otherwise the MCP session is opened
    // first, and may have expired when the call comes.
    let provisioning = !case.provisioning.is_zero();
    let config = EmulatorConfig::default()
        .stateful(!provisioning)
        .busy_form(BusyForm::Alternate)
        .provisioning(case.provisioning)
        .newest_protocol_version("2025-11-25");
    let emulator = Emulator::start(config).await.unwrap();
    let signer = emulator.signer().build().unwrap();
    let stack = stack(case.order, &signer);
    let session = match provisioning {
        true => None,
        false => Some(open(&stack).await),
    };
    if case.expired {
        emulator.expire_mcp_sessions();
    }
    for refused in &case.refusals {
        emulator.push_fault(refused.fault());
    }
    if case.dropped_after_run {
        emulator.push_fault(Fault::DropAfterRun);
    }
    let before = emulator.audit();
    let record = AttemptRecord::new();
    let arguments = if case.tool == "add" {
        json!({"a": 2, "b": 3})
    } else {
        json!({})
    };
    let mut request = post(
        7,
        "tools/call",
        json!({"name": case.tool, "arguments": arguments}),
        session.as_deref(),
    );
    request.extensions_mut().insert(record.clone());
    if matches!(case.runs_out, Some(RunsOut::CallCeiling)) {
        request
            .extensions_mut()
            .insert(CallBudget::new().max_duration(Some(Duration::from_secs(4))));
    }
    let started = tokio::time::Instant::now();
    let answer = stack.clone().oneshot(request).await;
    let took = started.elapsed();
    let audit = emulator.audit();
    let ran = audit.executions_of(case.tool) - before.executions_of(case.tool);
    let calls = audit
        .received
        .iter()
        .skip(before.received.len())
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .count();
    let why = format!("seed {}: {case:?}\n{record}", case.seed);
    // The record lists every attempt the emulator saw of the call.
    assert_eq!(record.len(), calls, "{why}");
    let resends = |layer: &str| {
        record
            .attempts()
            .iter()
            .flat_map(|a| a.decisions().to_vec())
            .filter(|d| d.layer() == layer)
            .filter(|d| matches!(d.verdict(), Verdict::SentAgain { .. }))
            .count()
    };
    let throttled = case.refusals.iter().filter(|r| r.is_throttle()).count();
    let busy = case.refusals.iter().filter(|r| r.is_busy()).count();
    let expiries = usize::from(case.expired)
        + case
            .refusals
            .iter()
            .filter(|r| **r == Refused::Expired404)
            .count();
    match case.runs_out {
        None => {
            let answer = answer.unwrap_or_else(|e| {
                if case.dropped_after_run && case.tool == "counter" {
                    // Not declared: the drop is delivered, never re-sent.
                    return Response::new(Full::new(Bytes::from(format!("dropped: {e}"))))
                        .map(|b| b.map_err(Into::into).boxed_unsync());
                }
                panic!("{e}\n{why}")
            });
            assert!(took < CallBudget::DEFAULT_MAX_DURATION, "{why}");
            assert_eq!(resends("throttle"), throttled, "{why}");
            // One renewal of the MCP session, and one re-send, per expiry.
            assert_eq!(resends("mcp_session"), expiries, "{why}");
            assert!(resends("session_busy") >= busy, "{why}");
            if case.dropped_after_run && case.tool == "counter" {
                assert_eq!(ran, 1, "ran once before the drop, never again: {why}");
                assert_eq!(resends("replay_guard"), 0, "{why}");
                return;
            }
            assert_eq!(answer.status(), 200, "{why}");
            let body = answer.into_body().collect().await.unwrap().to_bytes();
            let message = message_of(&body);
            assert!(message.get("result").is_some(), "{message}\n{why}");
            if case.dropped_after_run {
                // Declared idempotent: re-sent once, after every refusal before it.
                assert_eq!(ran, 2, "{why}");
                assert_eq!(resends("replay_guard"), 1, "{why}");
            } else {
                assert_eq!(ran, 1, "{why}");
            }
        }
        Some(runs_out) => {
            let answer = answer.unwrap_or_else(|e| panic!("{e}\n{why}"));
            assert_eq!(ran, 0, "nothing ran: {why}");
            let last = case.refusals[record.len() - 1];
            let (status, code) = last.answer();
            assert_eq!(answer.status(), status, "{why}");
            let body = answer.into_body().collect().await.unwrap().to_bytes();
            if let Some(code) = code {
                assert_eq!(message_of(&body)["error"]["code"], code, "{why}");
            }
            let (layer, cause) = last.kind();
            let decisions = record.attempts()[record.len() - 1].decisions().to_vec();
            let gave_up = decisions
                .iter()
                .find(|d| d.layer() == layer)
                .unwrap_or_else(|| panic!("{layer} decided nothing: {why}"));
            match (runs_out, gave_up.verdict()) {
                (
                    RunsOut::ThrottleAttempts,
                    Verdict::AttemptsExhausted {
                        cause: c,
                        max_attempts: 3,
                    },
                )
                | (
                    RunsOut::ThrottleCeiling | RunsOut::CallCeiling,
                    Verdict::WaitCeiling { cause: c, .. },
                )
                | (
                    RunsOut::Busy,
                    Verdict::WaitCeiling { cause: c, .. }
                    | Verdict::AttemptsExhausted { cause: c, .. },
                ) => assert_eq!(*c, cause, "{why}"),
                (_, other) => panic!("{runs_out:?} ended with {other:?}: {why}"),
            }
            match runs_out {
                RunsOut::ThrottleAttempts => assert_eq!(resends("throttle"), 2, "{why}"),
                RunsOut::ThrottleCeiling => assert_eq!(resends("throttle"), 0, "{why}"),
                RunsOut::CallCeiling => assert_eq!(resends("throttle"), 1, "{why}"),
                RunsOut::Busy => assert!(
                    (20..=49).contains(&resends("session_busy")),
                    "45 s of waits of at most 2 s, or 50 attempts: {why}"
                ),
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn any_sequence_of_refusals_is_waited_out_or_ends_in_the_refusal_that_ran_out() {
    let mut outcomes = [0u32; 5];
    let mut forms = [0u32; 11];
    for seed in 0..CASES {
        let case = Case::new(seed);
        outcomes[match case.runs_out {
            None => 0,
            Some(RunsOut::ThrottleAttempts) => 1,
            Some(RunsOut::ThrottleCeiling) => 2,
            Some(RunsOut::Busy) => 3,
            Some(RunsOut::CallCeiling) => 4,
        }] += 1;
        for refused in &case.refusals {
            let form = match refused {
                Refused::Busy200 => 0,
                Refused::Busy409 => 1,
                Refused::Throttle429(None) => 2,
                Refused::Throttle429(Some(RetryAfter::Seconds(_))) => 3,
                Refused::Throttle429(Some(RetryAfter::DateIn(_))) => 4,
                Refused::Throttle429(Some(_)) => 5,
                Refused::Throttle32003 => 6,
                Refused::Expired404 => 7,
            };
            forms[form] += 1;
        }
        forms[8] += u32::from(case.expired);
        forms[9] += u32::from(!case.provisioning.is_zero());
        forms[10] += u32::from(case.dropped_after_run);
        run(&case).await;
    }
    // Every kind of ending was met, and every form of refusal.
    assert!(outcomes.iter().all(|n| *n > 0), "{outcomes:?}");
    assert!(forms.iter().all(|n| *n > 0), "{forms:?}");
}
