//! The proxy binary against the emulator living the rest of AgentCore's session lifecycle: a
//! microVM whose container does not initialize in time (-32010 "Runtime initialization time
//! exceeded", in an HTTP 200 or as HTTP 424), a microVM that takes its time to terminate after
//! its idle timeout, and a plain MCP door to the runtime's URL, whose requests name no runtime
//! session and are routed by their `Mcp-Session-Id`. Each test checks what the client gets and
//! how often each tool ran. Real time: the emulator's durations are short.

use std::time::{Duration, Instant};

use agentcore_tower_emulator::{EmulatorConfig, Fault, PlatformForm};
use serde_json::{Value, json};

use crate::common;
use common::*;

const TOKEN: &str = "lifecycle-test-token";

fn initialization_exceeded(seconds: u64) -> String {
    format!(
        "Runtime initialization time exceeded. Please make sure that initialization completes in {seconds}s."
    )
}

/// A tool's answer to request `id`: its text.
fn tool_text(answer: &Value, id: u64) -> String {
    assert_eq!(answer["id"], id, "{answer}");
    text_of(answer).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_whose_microvm_did_not_initialize_in_time_is_sent_once_more_and_answered() {
    for form in [PlatformForm::JsonRpc, PlatformForm::Http] {
        let emulator = start_emulator(
            EmulatorConfig::default()
                .provisioning(Duration::from_millis(300))
                .initialization_limit(Duration::from_secs(1)),
        )
        .await;
        // The session's first request meets a microVM that gives up after 1 s; the re-send
        // meets a new one, whose 300 ms cold start is waited out.
        emulator.push_request_fault(Fault::InitializationTimedOut { form });
        let mut proxy = Proxy::start(&emulator, &[]);
        let sent = Instant::now();
        proxy.open().await;
        let waited = sent.elapsed();
        assert!(
            waited >= Duration::from_millis(1_300),
            "{form:?}: {waited:?}"
        );
        proxy.send(&call(2, "counter", json!({})));
        let answer = proxy.next().await;
        assert_eq!(tool_text(&answer, 2), "1", "stderr:\n{}", proxy.stderr());

        let proxy = proxy.closed_cleanly("nothing more").await;
        let audit = emulator.audit();
        assert_eq!(audit.initializations_timed_out, 1, "{form:?}");
        assert_eq!((audit.sessions_started, audit.microvms_started), (1, 2));
        assert_eq!(audit.mcp_sessions_started, 1);
        assert_eq!(audit.executions_of("counter"), 1);
        assert!(audit.busy_refusals >= 1, "the new microVM's cold start");
        assert!(
            proxy
                .stderr()
                .contains("runtime initialization time exceeded"),
            "the re-send is logged with its cause:\n{}",
            proxy.stderr()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_runtime_that_never_initializes_gets_the_32010_after_one_re_send() {
    for form in [PlatformForm::JsonRpc, PlatformForm::Http] {
        // 500 ms is named "1s" in the message: whole seconds, rounded up.
        let emulator = start_emulator(
            EmulatorConfig::default().initialization_limit(Duration::from_millis(500)),
        )
        .await;
        let mut proxy = Proxy::start(&emulator, &[]);
        proxy.open().await;
        emulator.push_fault(Fault::InitializationTimedOut { form });
        emulator.push_fault(Fault::InitializationTimedOut { form });
        proxy.send(&call(2, "counter", json!({})));
        let answer = proxy.next().await;
        match form {
            PlatformForm::Http => {
                assert_eq!(answer["id"], 2, "{answer}");
                let error = &answer["error"];
                assert_eq!(error["code"], -32000, "{answer}");
                let message = error["message"].as_str().unwrap();
                assert!(message.contains("HTTP 424"), "{message}");
                assert!(message.contains(&initialization_exceeded(1)), "{message}");
                assert_eq!(error["data"]["httpStatus"], 424);
                assert_eq!(error["data"]["errorType"], "RuntimeClientError");
            }
            _ => {
                // The JSON-RPC form as it came, what it is said in `data` as for the HTTP form.
                assert_eq!(answer["id"], 2, "{answer}");
                let error = &answer["error"];
                assert_eq!(error["code"], -32010, "{answer}");
                assert_eq!(error["message"], initialization_exceeded(1).as_str());
                assert_eq!(error["data"]["httpStatus"], 200);
            }
        }
        // Either form says what it is, with the advice and the record of both attempts.
        let data = &answer["error"]["data"];
        assert_eq!(data["kind"], "not_ready", "{answer}");
        assert!(
            data["advice"]
                .as_str()
                .unwrap()
                .contains("did not become ready in time"),
            "{answer}"
        );
        assert_eq!(
            data["attempts"].as_array().map(Vec::len),
            Some(2),
            "{answer}"
        );
        let audit = emulator.audit();
        assert_eq!(audit.executions_of("counter"), 0, "{form:?}");
        assert_eq!(audit.initializations_timed_out, 2);
        assert_eq!(audit.microvms_started, 2);

        // The container starts again: the next call meets a new microVM, which never issued
        // the proxy's MCP session; the proxy opens a new one and the call runs once.
        proxy.send(&call(3, "counter", json!({})));
        let answer = proxy.next().await;
        assert_eq!(tool_text(&answer, 3), "1", "stderr:\n{}", proxy.stderr());
        proxy.closed_cleanly("nothing more").await;
        let audit = emulator.audit();
        assert_eq!(audit.executions_of("counter"), 1);
        assert_eq!(audit.microvms_started, 3);
        assert_eq!(audit.mcp_sessions_started, 2);
        assert_eq!(audit.mcp_sessions_not_found, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_meeting_a_terminating_microvm_waits_for_it_and_its_successor_and_runs_once() {
    // An idle timeout longer than the proxy's longest wait between attempts (2 s), so that
    // the new microVM is not idle between them (AgentCore's is 60 s at least).
    let emulator = start_emulator(
        EmulatorConfig::default()
            .idle_timeout(Duration::from_secs(3))
            .termination_delay(Duration::from_secs(2))
            .provisioning(Duration::from_millis(300)),
    )
    .await;
    let mut proxy = Proxy::start(&emulator, &[]);
    proxy.open().await;
    proxy.send(&call(2, "counter", json!({})));
    assert_eq!(tool_text(&proxy.next().await, 2), "1");
    let idle_from = Instant::now();

    // Idle past its timeout: the microVM terminates for 2 s, refusing as busy; then a new one
    // starts (300 ms), which does not know the MCP session; the proxy opens a new one and the
    // call runs once.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    proxy.send(&call(3, "counter", json!({})));
    let answer = proxy.next().await;
    assert_eq!(tool_text(&answer, 3), "2", "stderr:\n{}", proxy.stderr());
    assert!(
        idle_from.elapsed() >= Duration::from_millis(5_300),
        "the termination and the cold start were waited out: {:?}",
        idle_from.elapsed()
    );
    proxy.closed_cleanly("nothing more").await;
    let audit = emulator.audit();
    assert!(audit.busy_terminating >= 1, "{audit:?}");
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!((audit.sessions_started, audit.microvms_started), (1, 2));
    assert_eq!(audit.mcp_sessions_started, 2);
    assert_eq!(audit.mcp_sessions_not_found, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_mcp_door_to_the_runtime_url_stays_in_one_runtime_session_by_its_mcp_session() {
    for door in ["bearer", "sigv4"] {
        let mut config = EmulatorConfig::default()
            .stateful(true)
            .provisioning(Duration::from_millis(300));
        if door == "bearer" {
            config = config.bearer_tokens([TOKEN]);
        }
        let emulator = start_emulator(config).await;
        let url = emulator.invocations_url();
        let credentials = emulator.credentials();
        let mut proxy = if door == "bearer" {
            Proxy::start_with(
                &["--url", &url, "--bearer-token-env", "LIFECYCLE_TOKEN"],
                &[("LIFECYCLE_TOKEN", TOKEN)],
            )
        } else {
            Proxy::start_with(
                &["--url", &url, "--signing-name", "bedrock-agentcore"],
                &[
                    ("AWS_ACCESS_KEY_ID", credentials.access_key_id()),
                    ("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key()),
                    ("AWS_SESSION_TOKEN", credentials.session_token().unwrap()),
                ],
            )
        };
        proxy.open().await;
        for id in [2, 3] {
            proxy.send(&call(id, "counter", json!({})));
            let answer = proxy.next().await;
            assert_eq!(
                tool_text(&answer, id),
                (id - 1).to_string(),
                "{door}: stderr:\n{}",
                proxy.stderr()
            );
        }
        proxy.closed_cleanly("nothing more").await;

        let audit = emulator.audit();
        assert!(
            audit
                .received
                .iter()
                .all(|r| r.runtime_session_id.is_none()),
            "{door}: a plain MCP door names no runtime session"
        );
        // initialize, notifications/initialized, two calls: one runtime session, one microVM.
        assert_eq!(audit.routed.len(), 4, "{door}: {:?}", audit.routed);
        let first = &audit.routed[0];
        assert!(!first.by_mcp_session && first.mcp_session_id.is_none());
        for routed in &audit.routed[1..] {
            assert!(routed.by_mcp_session, "{door}: {routed:?}");
            assert_eq!(routed.runtime_session_id, first.runtime_session_id);
        }
        assert_eq!((audit.sessions_started, audit.microvms_started), (1, 1));
        assert_eq!(audit.busy_refusals, 0, "{door}: the first request was held");
        assert_eq!(audit.mcp_sessions_started, 1);
        assert_eq!(audit.mcp_sessions_not_found, 0);
        assert_eq!(audit.executions_of("counter"), 2);
    }
}
