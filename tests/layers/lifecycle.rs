//! Sessions end: the whole stack, with its defaults, against the emulator living AgentCore's
//! session lifecycle on a paused clock — cold starts of seconds in either refusal form, a
//! microVM replaced after its idle timeout, a Gateway session past its timeout, and the MCP
//! 404 that follows each. Every call is answered, and every tool runs as often as it was
//! called (a declared one once more after a dropped connection).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentcore_tower::contract::PlatformError;
use agentcore_tower::record::Verdict;
use agentcore_tower::rule::{Assumption, By, Permission};
use agentcore_tower::{McpSessionRecoveryLayer, ReplayGuardLayer, recommended_layers};
use agentcore_tower_emulator::{BusyForm, Emulator, EmulatorConfig, Fault, PlatformForm};
use bytes::Bytes;
use common::stack::{Answered, Stack, read_whole, resends, send_through};
use common::{http_client, mcp_post};
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// What the proxy runs, with the defaults: the session recovery layer outermost, then the
/// recommended stack (the guard given), to the emulated runtime.
fn runtime_stack(emulator: &Emulator, guard: ReplayGuardLayer) -> Stack {
    read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(
                guard,
                emulator.signer().build().unwrap(),
            ))
            .service(http_client()),
    )
}

/// An MCP client of the emulated runtime over [`runtime_stack`] (the guard given), its
/// session not yet opened.
fn runtime_client(emulator: &Emulator, guard: ReplayGuardLayer) -> Client {
    Client::new(
        runtime_stack(emulator, guard),
        "http://agentcore.invalid/mcp".into(),
    )
}

/// A client of the emulated runtime through the stack with the guard's defaults, its MCP
/// session opened.
async fn opened_runtime_client(emulator: &Emulator) -> Client {
    let mut client = runtime_client(emulator, ReplayGuardLayer::new());
    client.open().await;
    client
}

/// The same to the emulated gateway.
fn gateway_stack(emulator: &Emulator) -> Stack {
    read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(
                ReplayGuardLayer::new(),
                emulator.endpoint_signer().build().unwrap(),
            ))
            .service(http_client()),
    )
}

/// One MCP client session over a stack: the id it was given, its requests.
#[derive(Clone)]
struct Client {
    stack: Stack,
    url: String,
    session: Option<String>,
    next_id: u64,
}

impl Client {
    fn new(stack: Stack, url: String) -> Self {
        Self {
            stack,
            url,
            session: None,
            next_id: 1,
        }
    }

    async fn send(&self, body: Value) -> Answered {
        let request = mcp_post(&self.url, self.session.as_deref(), body.to_string());
        send_through(&self.stack, request).await
    }

    /// `initialize`, then `notifications/initialized`, as an MCP client opens its session.
    async fn open(&mut self) -> Answered {
        let answer = self
            .send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "lifecycle", "version": "1"}}}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert!(
            answer.json["result"]["protocolVersion"].is_string(),
            "{answer:?}"
        );
        self.session = Some(answer.session.clone().expect("an Mcp-Session-Id"));
        let initialized = self
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status, StatusCode::ACCEPTED, "{initialized:?}");
        answer
    }

    /// A `tools/call`: `counter` (not idempotent), `add` or `echo`.
    async fn call(&mut self, tool: &str, arguments: Value) -> Answered {
        let id = self.next_id;
        self.next_id += 1;
        let answer = self
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}))
            .await;
        if answer.status == StatusCode::OK {
            assert_eq!(answer.json["id"], id, "{answer:?}");
        }
        answer
    }
}

async fn start(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
}

const EXPIRED: &str = "MCP session expired (HTTP 404)";

#[tokio::test(start_paused = true)]
async fn cold_starts_of_8_and_12_s_in_either_form_are_waited_out_with_the_defaults() {
    for (seconds, form) in [
        (8, BusyForm::JsonRpc200),
        (8, BusyForm::Conflict409),
        (12, BusyForm::JsonRpc200),
        (12, BusyForm::Conflict409),
    ] {
        let emulator = start(
            EmulatorConfig::default()
                .provisioning(Duration::from_secs(seconds))
                .busy_form(form),
        )
        .await;
        let mut client = runtime_client(&emulator, ReplayGuardLayer::new());
        let started = Instant::now();
        let opened = client.open().await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(seconds) && waited < Duration::from_secs(seconds + 2),
            "{seconds} s {form:?}: answered after {waited:?}: {}",
            opened.record
        );
        let busy = resends(&opened.record);
        assert!(
            busy.len() >= 5 && busy.iter().all(|(layer, _)| *layer == "session_busy"),
            "{}",
            opened.record
        );
        let answer = client.call("counter", json!({})).await;
        assert_eq!(answer.text(), "1");
        assert_eq!(answer.record.len(), 1, "up at once: {}", answer.record);
        let answer = client.call("add", json!({"a": 2, "b": 3})).await;
        assert_eq!(answer.text(), "5");
        let audit = emulator.audit();
        assert_eq!(audit.executions_of("counter"), 1);
        assert_eq!(audit.executions_of("add"), 1);
        assert_eq!(audit.microvms_started, 1);
        assert_eq!(audit.mcp_sessions_started, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_20_minute_idle_gap_the_next_call_meets_a_new_microvm_and_runs_once() {
    let emulator = start(EmulatorConfig::default().provisioning(Duration::from_secs(12))).await;
    let mut client = opened_runtime_client(&emulator).await;
    let given = client.session.clone();
    assert_eq!(client.call("counter", json!({})).await.text(), "1");

    tokio::time::advance(Duration::from_secs(20 * 60)).await;
    let started = Instant::now();
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.record);
    assert_eq!(answer.text(), "2", "{}", answer.record);
    assert!(started.elapsed() >= Duration::from_secs(12));
    // The cold start waited out, then the 404 of the forgotten session, recovered once.
    let resent = resends(&answer.record);
    let (last, busy) = resent.split_last().unwrap();
    assert_eq!(*last, ("mcp_session", EXPIRED), "{}", answer.record);
    assert!(busy.iter().all(|(layer, _)| *layer == "session_busy"));
    assert!(busy.len() >= 5, "{}", answer.record);
    // The client keeps the id it was given: an answer that names one names it.
    assert!(
        answer.session.is_none() || answer.session == given,
        "{:?}",
        answer.session
    );
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!(audit.microvms_started, 2);
    assert_eq!(audit.mcp_sessions_started, 2);
    assert_eq!(audit.mcp_sessions_not_found, 1);

    // Later calls go to the new session straight away.
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.text(), "3");
    assert_eq!(answer.record.len(), 1);
    assert_eq!(emulator.audit().mcp_sessions_not_found, 1);
}

#[tokio::test(start_paused = true)]
async fn a_gateway_session_past_its_timeout_is_recovered() {
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let mut client = Client::new(gateway_stack(&emulator), emulator.gateway_url());
    client.open().await;
    assert_eq!(client.call("counter", json!({})).await.text(), "1");
    tokio::time::advance(Duration::from_secs(3_601)).await;
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.record);
    assert_eq!(answer.text(), "2");
    assert_eq!(resends(&answer.record), [("mcp_session", EXPIRED)]);
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!(audit.mcp_sessions_started, 2);
}

#[tokio::test(start_paused = true)]
async fn fifty_concurrent_requests_meeting_one_expiry_share_one_initialize() {
    let emulator = start(EmulatorConfig::default().provisioning(Duration::from_secs(3))).await;
    let client = opened_runtime_client(&emulator).await;
    assert_eq!(emulator.end_microvms(), 1);
    let calls = (0..50u64).map(|i| {
        let client = client.clone();
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": i, "b": 1}}});
            (i, client.send(body).await)
        })
    });
    for joined in futures_util::future::join_all(calls).await {
        let (i, answer) = joined.unwrap();
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.record);
        assert_eq!(answer.text(), (i + 1).to_string());
    }
    let audit = emulator.audit();
    assert_eq!(
        audit.mcp_sessions_started, 2,
        "one re-initialize for all 50"
    );
    assert_eq!(audit.microvms_started, 2);
    assert_eq!(audit.executions_of("add"), 50);
}

#[tokio::test(start_paused = true)]
async fn an_undeclared_tool_answered_404_is_sent_once_more_after_the_new_session_and_runs_once() {
    let emulator = start(EmulatorConfig::default()).await;
    let mut client = opened_runtime_client(&emulator).await;
    assert!(emulator.expire_mcp_session(client.session.as_deref().unwrap()));
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.text(), "1");
    let attempts = answer.record.attempts();
    assert_eq!(attempts.len(), 2, "{}", answer.record);
    assert_eq!(
        attempts[0].decisions()[0].permission(),
        Some(&Permission::new(
            By::Adapter,
            Assumption::RefusedBeforeExecution
        ))
    );
    assert_eq!(resends(&answer.record), [("mcp_session", EXPIRED)]);
    assert_eq!(emulator.audit().executions_of("counter"), 1);
    assert_eq!(emulator.audit().mcp_sessions_started, 2);
}

#[tokio::test(start_paused = true)]
async fn a_404_resource_not_found_is_delivered_at_once() {
    let emulator = start(EmulatorConfig::default()).await;
    let mut client = opened_runtime_client(&emulator).await;
    emulator.push_fault(Fault::Platform {
        error: PlatformError::ResourceNotFound,
        form: PlatformForm::Http,
    });
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.record.len(), 1, "{}", answer.record);
    assert!(resends(&answer.record).is_empty());
    assert_eq!(emulator.audit().mcp_sessions_started, 1, "no re-initialize");
    assert_eq!(emulator.audit().executions_of("counter"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_404_again_right_after_a_recovery_is_delivered() {
    let emulator = Arc::new(start(EmulatorConfig::default()).await);
    // Between the stack and the runtime: every session ends once its client said
    // `notifications/initialized` (a server that keeps no session), once the client's own is
    // open.
    let expire_new = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forgetful = tower::service_fn({
        let emulator = emulator.clone();
        let expire_new = expire_new.clone();
        let client = http_client();
        move |request: Request<Full<Bytes>>| {
            let (emulator, expire_new, client) =
                (emulator.clone(), expire_new.clone(), client.clone());
            async move {
                let session = request.headers().get("mcp-session-id").cloned();
                let answer = client.oneshot(request).await?;
                if expire_new.load(std::sync::atomic::Ordering::SeqCst)
                    && answer.status() == StatusCode::ACCEPTED
                    && let Some(id) = session
                {
                    emulator.expire_mcp_session(id.to_str().unwrap());
                }
                Ok::<_, hyper_util::client::legacy::Error>(answer)
            }
        }
    });
    let stack = read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(
                ReplayGuardLayer::new(),
                emulator.signer().build().unwrap(),
            ))
            .service(forgetful),
    );
    let mut client = Client::new(stack, "http://agentcore.invalid/mcp".into());
    client.open().await;
    expire_new.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(emulator.expire_mcp_session(client.session.as_deref().unwrap()));
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.record);
    assert_eq!(answer.record.len(), 2, "no loop: {}", answer.record);
    assert_eq!(resends(&answer.record), [("mcp_session", EXPIRED)]);
    assert_eq!(
        answer.record.attempts()[1].decisions()[0].verdict(),
        &Verdict::Delivered
    );
    assert_eq!(emulator.audit().mcp_sessions_started, 2);
    assert_eq!(emulator.audit().executions_of("counter"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_declared_tool_dropped_after_a_12_s_cold_start_is_sent_again() {
    let emulator = start(EmulatorConfig::default().provisioning(Duration::from_secs(12))).await;
    let mut client = runtime_client(&emulator, ReplayGuardLayer::new().idempotent_tools(["add"]));
    // The first request of the runtime session is the call: it meets the cold start, then a
    // connection that drops after the tool ran.
    emulator.push_fault(Fault::DropAfterRun);
    let answer = client.call("add", json!({"a": 1, "b": 1})).await;
    assert_eq!(answer.text(), "2", "{}", answer.record);
    let resent = resends(&answer.record);
    let (last, busy) = resent.split_last().unwrap();
    assert_eq!(last.0, "replay_guard", "{}", answer.record);
    assert!(busy.len() >= 5 && busy.iter().all(|(l, _)| *l == "session_busy"));
    assert_eq!(
        emulator.audit().executions_of("add"),
        2,
        "declared: run again"
    );

    // And after an idle gap: a cold start, the 404 recovered, then the drop.
    client.open().await;
    tokio::time::advance(Duration::from_secs(20 * 60)).await;
    emulator.push_fault(Fault::DropAfterRun);
    let answer = client.call("add", json!({"a": 2, "b": 2})).await;
    assert_eq!(answer.text(), "4", "{}", answer.record);
    let resent = resends(&answer.record);
    let layers: Vec<&str> = resent.iter().map(|(l, _)| *l).collect();
    assert_eq!(layers.last(), Some(&"replay_guard"), "{}", answer.record);
    assert!(layers.contains(&"mcp_session"), "{}", answer.record);
    assert_eq!(emulator.audit().executions_of("add"), 4);
}

#[tokio::test(start_paused = true)]
async fn with_a_runtime_session_per_mcp_session_the_new_session_stays_on_the_microvm_brought_up() {
    let emulator = start(EmulatorConfig::default().provisioning(Duration::from_secs(12))).await;
    let signer = emulator
        .signer()
        .runtime_sessions(agentcore_tower::invoke::RuntimeSessions::PerMcpSession)
        .build()
        .unwrap();
    let stack = read_whole(
        ServiceBuilder::new()
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(ReplayGuardLayer::new(), signer))
            .service(http_client()),
    );
    let mut client = Client::new(stack, "http://agentcore.invalid/mcp".into());
    client.open().await;
    assert_eq!(client.call("counter", json!({})).await.text(), "1");
    // Under the signer's idle time (900 s) but past the emulated runtime's, so the binding is
    // still there when the microVM is gone.
    emulator.end_microvms();
    let started = Instant::now();
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.text(), "2", "{}", answer.record);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(12) && waited < Duration::from_secs(14),
        "one cold start, not two: {waited:?}"
    );
    let audit = emulator.audit();
    assert_eq!(audit.microvms_started, 2, "one cold start, not two");
    assert_eq!(audit.sessions_started, 1, "one runtime session throughout");
    let runtime_sessions: std::collections::BTreeSet<_> = audit
        .received
        .iter()
        .filter_map(|r| r.runtime_session_id.clone())
        .collect();
    assert_eq!(runtime_sessions.len(), 1, "{runtime_sessions:?}");
    // And the next call goes there at once.
    let answer = client.call("counter", json!({})).await;
    assert_eq!(answer.text(), "3");
    assert_eq!(answer.record.len(), 1);
}
