//! Sixteen `tools/call`s of one MCP session at once, as rmcp sends them by default since 3.2
//! (`max_concurrent_requests`, 16: rust-sdk PR #1186), through the recommended stack to the
//! emulator on tokio's paused clock: a cold start, throttles and session-busy refusals met
//! sixteen at a time. Every call runs once, in one runtime session, and its record names only
//! refusals before the attempt it delivered, within the default allowances.
//!
//! * At 2025-06-18 the session's cold start is its `initialize`'s: rmcp sends nothing else
//!   before it is answered. The sixteen calls then meet the faults queued for them.
//! * At 2026-07-28 (no MCP session: nothing to lose with a microVM) the microVM `server/discover`
//!   provisioned is ended first, as its idle timeout would: the sixteen calls are the requests
//!   of the cold start, and every one of them is refused while it provisions.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::audit::one_runtime_session;
use crate::common::{BoxError, http_client};
use crate::records::{Records, add, serve_client, tap_into, text_of};
use agentcore_tower::record::{ErrorType, Outcome, Verdict};
use agentcore_tower::rmcp::TowerClient;
use agentcore_tower::{AttemptRecord, CallBudget, ReplayGuardLayer, recommended_layers};
use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig, Fault, RetryAfter};
use http::StatusCode;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _, RoleClient};

type Client = RunningService<RoleClient, ClientConfig>;

/// rmcp's default, set here so that a change of rmcp's default does not change the test.
const CALLS: usize = 16;
/// A cold start as users report them (up to ~12.6 s), on the paused clock.
const PROVISIONING: Duration = Duration::from_secs(12);
/// The faults queued for the calls: fewer than the calls, so that each is met by a call's
/// first answered attempt (see [`throttle`]).
const THROTTLES: u64 = 4;
const BUSY: u64 = 4;

/// The default allowances ([`agentcore_tower::ThrottleRetryLayer`],
/// [`agentcore_tower::SessionBusyRetryLayer`], [`CallBudget`]).
const THROTTLE_ATTEMPTS: usize = 3;
const THROTTLE_WAIT: Duration = Duration::from_secs(10);
const BUSY_ATTEMPTS: usize = 50;
const BUSY_WAIT: Duration = Duration::from_secs(45);

/// A throttle whose `Retry-After` (3 s) is longer than session busy's longest wait (2 s): by the
/// time a throttled call comes back, every other call has had an attempt answered since, and
/// those took whatever faults were left — no call meets two.
fn throttle() -> Fault {
    Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(3)),
    }
}

/// The emulator's next answers: `THROTTLES` throttles, then `BUSY` session-busy refusals.
fn throttles_then_busy(emulator: &Emulator) {
    for _ in 0..THROTTLES {
        emulator.push_fault(throttle());
    }
    for _ in 0..BUSY {
        emulator.push_fault(Fault::Busy);
    }
}

fn config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("concurrency-test", "0"),
    )
}

/// rmcp's client, sending up to [`CALLS`] POSTs at once, over `RecordTap` → the recommended
/// layers (no tool declared replayable: only refusals are sent again) → SigV4 → hyper-util,
/// connected to `emulator` as `lifecycle` says.
async fn connect(
    emulator: &Emulator,
    lifecycle: ClientLifecycleMode,
) -> Result<(Client, Records), BoxError> {
    let records = Records::default();
    let stack = tower::ServiceBuilder::new()
        .layer(tap_into(&records))
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build()?,
        ))
        .service(http_client());
    let transport = StreamableHttpClientTransport::with_client(
        TowerClient::new(stack),
        StreamableHttpClientTransportConfig::with_uri("http://agentcore.invalid/mcp")
            .max_concurrent_requests(CALLS),
    );
    let client = match lifecycle {
        ClientLifecycleMode::Initialize => {
            serve_client(config(), transport, Some(ProtocolVersion::V_2025_06_18)).await?
        }
        lifecycle => config().serve_with_lifecycle(transport, lifecycle).await?,
    };
    Ok((client, records))
}

/// `add(i, 1000)` for each call `i`, all at once: each must answer `i + 1000`.
async fn sixteen_calls_at_once(client: &Client) -> Result<(), BoxError> {
    let calls = (0..CALLS as i64).map(|i| client.call_tool(add(i, 1000)));
    let results = futures_util::future::join_all(calls).await;
    for (i, result) in results.into_iter().enumerate() {
        let result = result?;
        assert_eq!(text_of(&result), [(i + 1000).to_string()], "call {i}");
        assert_eq!(result.is_error, Some(false), "call {i}");
    }
    Ok(())
}

/// What a call's record says it met before its delivered attempt.
#[derive(Debug, Default, PartialEq, Eq)]
struct Met {
    throttled: usize,
    busy: usize,
}

fn busy_answer() -> Outcome {
    Outcome::Response {
        status: StatusCode::OK,
        error_type: ErrorType::Absent,
    }
}

fn throttled_answer() -> Outcome {
    Outcome::Response {
        status: StatusCode::TOO_MANY_REQUESTS,
        error_type: ErrorType::Named("ThrottlingException".to_owned()),
    }
}

/// A call's record: every attempt but the last a refusal sent again by the layer of its kind
/// (a 429 by `throttle`, the -32005 in an HTTP 200 by `session_busy`), within that kind's
/// default allowance; the last answered 200 and delivered. What it met.
fn refusals_then_delivered(record: &AttemptRecord) -> Met {
    let attempts = record.attempts();
    let (last, refused) = attempts.split_last().expect("an attempt");
    let mut met = Met::default();
    let (mut throttle_wait, mut busy_wait) = (Duration::ZERO, Duration::ZERO);
    for attempt in refused {
        let resent: Vec<_> = attempt
            .decisions()
            .iter()
            .filter_map(|d| match d.verdict() {
                Verdict::SentAgain { cause, wait, .. } => Some((d.layer(), *cause, *wait)),
                _ => None,
            })
            .collect();
        let [(layer, cause, wait)] = resent[..] else {
            panic!("one layer sent {attempt} again: {record}");
        };
        match (layer, cause) {
            ("throttle", "HTTP 429") => {
                assert_eq!(attempt.outcome(), &throttled_answer(), "{record}");
                assert_eq!(wait, Duration::from_secs(3), "Retry-After: {record}");
                met.throttled += 1;
                throttle_wait += wait;
            }
            ("session_busy", "session busy (JSON-RPC -32005)") => {
                assert_eq!(attempt.outcome(), &busy_answer(), "{record}");
                met.busy += 1;
                busy_wait += wait;
            }
            other => panic!("{other:?} is no refusal: {record}"),
        }
    }
    assert_eq!(
        last.outcome(),
        &Outcome::Response {
            status: StatusCode::OK,
            error_type: ErrorType::Absent
        },
        "{record}"
    );
    assert!(!last.was_sent_again(), "{record}");
    assert!(
        last.decisions().iter().all(|d| d.verdict().is_delivered()),
        "{record}"
    );
    assert!(met.throttled < THROTTLE_ATTEMPTS, "{record}");
    assert!(throttle_wait <= THROTTLE_WAIT, "{record}");
    assert!(met.busy < BUSY_ATTEMPTS, "{record}");
    assert!(busy_wait <= BUSY_WAIT, "{record}");
    assert!(attempts.len() <= CallBudget::DEFAULT_MAX_ATTEMPTS as usize);
    assert!(throttle_wait + busy_wait <= CallBudget::DEFAULT_MAX_DURATION);
    met
}

/// The sixteen calls' records, one per JSON-RPC id, and the emulator's audit: each call ran
/// once; what the records met is what the emulator refused; each call met at most one queued
/// fault. What the calls met, in all.
fn each_ran_once(records: &Records, audit: &Audit) -> Vec<Met> {
    let records = records.lock().unwrap();
    let calls: BTreeMap<String, &AttemptRecord> = records
        .iter()
        .filter(|(e, _)| e.rpc_method.as_deref() == Some("tools/call"))
        .map(|(e, r)| {
            let id = e.request_id.as_ref().expect("a request").to_string();
            (id, r)
        })
        .collect();
    assert_eq!(calls.len(), CALLS, "one record per call: {records:?}");
    let tapped_calls = records
        .iter()
        .filter(|(e, _)| e.rpc_method.as_deref() == Some("tools/call"))
        .count();
    assert_eq!(tapped_calls, CALLS, "each call once through the stack");

    // Each call ran once: sixteen executions of `add`, each id once, and nothing else ran.
    assert_eq!(audit.executions_of("add"), CALLS as u64);
    assert_eq!(audit.executions.values().sum::<u64>(), CALLS as u64);
    let ran: BTreeMap<String, u64> = audit
        .executions_by_id
        .iter()
        .map(|((tool, id), n)| {
            assert_eq!(tool, "add");
            (id.clone(), *n)
        })
        .collect();
    let expected: BTreeMap<String, u64> = calls.keys().map(|id| (id.clone(), 1)).collect();
    assert_eq!(ran, expected);

    let met: Vec<Met> = calls.values().map(|r| refusals_then_delivered(r)).collect();
    assert_eq!(
        met.iter().map(|m| m.throttled as u64).sum::<u64>(),
        THROTTLES,
        "every queued throttle met once"
    );
    assert_eq!(audit.throttled, THROTTLES);
    assert!(met.iter().all(|m| m.throttled <= 1), "{met:?}");
    assert_eq!(audit.dropped + audit.server_errors, 0);
    assert_eq!(audit.mcp_sessions_not_found, 0);
    met
}

/// The refusals of the non-call exchanges' records (the cold start of `initialize` or
/// `server/discover`), which must be busy refusals only.
fn busy_before_the_calls(records: &Records) -> usize {
    records
        .lock()
        .unwrap()
        .iter()
        .filter(|(e, _)| e.http_method == http::Method::POST)
        .filter(|(e, _)| e.rpc_method.as_deref() != Some("tools/call"))
        .map(|(_, r)| {
            let met = refusals_then_delivered_or_accepted(r);
            assert_eq!(met.throttled, 0, "{r}");
            met.busy
        })
        .sum()
}

/// [`refusals_then_delivered`], for a record whose last answer may be a 202 (a notification).
fn refusals_then_delivered_or_accepted(record: &AttemptRecord) -> Met {
    let attempts = record.attempts();
    let last = attempts.last().expect("an attempt");
    if last.outcome()
        == (&Outcome::Response {
            status: StatusCode::ACCEPTED,
            error_type: ErrorType::Absent,
        })
    {
        assert_eq!(attempts.len(), 1, "{record}");
        return Met::default();
    }
    refusals_then_delivered(record)
}

#[tokio::test(start_paused = true)]
async fn sixteen_calls_at_once_after_a_cold_start_run_once_each_in_one_runtime_session()
-> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(PROVISIONING)).await?;
    let (client, records) = connect(&emulator, ClientLifecycleMode::Initialize).await?;
    let cold_start = emulator.audit().busy_refusals;
    assert!(cold_start > 0, "initialize met the cold start");
    throttles_then_busy(&emulator);

    sixteen_calls_at_once(&client).await?;

    let audit = emulator.audit();
    let met = each_ran_once(&records, &audit);
    assert_eq!(met.iter().map(|m| m.busy as u64).sum::<u64>(), BUSY);
    assert!(met.iter().all(|m| m.throttled + m.busy <= 1), "{met:?}");
    assert_eq!(busy_before_the_calls(&records) as u64, cold_start);
    assert_eq!(audit.busy_refusals, cold_start + BUSY);
    one_runtime_session(&audit, 1);
    assert_eq!(audit.mcp_sessions_started, 1);
    // Every call carried the one MCP session.
    let mcp_sessions: BTreeSet<Option<&str>> = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .map(|r| r.mcp_session_id.as_deref())
        .collect();
    assert_eq!(mcp_sessions.len(), 1, "{mcp_sessions:?}");
    assert!(mcp_sessions.iter().all(Option::is_some));
    client.cancel().await?;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn sixteen_calls_at_once_of_2026_07_28_through_a_cold_start_run_once_each_in_one_runtime_session()
-> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().provisioning(PROVISIONING)).await?;
    let (client, records) = connect(
        &emulator,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await?;
    let server = client.peer_info().expect("discovered");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    let discovery = emulator.audit();
    assert!(
        discovery.busy_refusals > 0,
        "server/discover met a cold start"
    );
    // The microVM ends, as after its idle timeout: the calls meet the next one's cold start.
    assert!(emulator.end_microvm(&one_runtime_session(&discovery, 1)));
    throttles_then_busy(&emulator);

    sixteen_calls_at_once(&client).await?;

    let audit = emulator.audit();
    let met = each_ran_once(&records, &audit);
    // Every call's first attempt was refused while the microVM provisioned.
    let call_busy: u64 = met.iter().map(|m| m.busy as u64).sum();
    assert!(met.iter().all(|m| m.busy >= 1), "{met:?}");
    assert_eq!(
        busy_before_the_calls(&records) as u64,
        discovery.busy_refusals
    );
    assert_eq!(audit.busy_refusals, discovery.busy_refusals + call_busy);
    assert!(call_busy >= CALLS as u64 + BUSY, "{met:?}");
    // One microVM for discovery, one for the sixteen calls' cold start.
    one_runtime_session(&audit, 2);
    assert_eq!(audit.mcp_sessions_started, 0);
    assert!(audit.received.iter().all(|r| r.mcp_session_id.is_none()));
    client.cancel().await?;
    Ok(())
}
