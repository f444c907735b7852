//! MCP 2026-07-28 through the proxy to an AgentCore Runtime (the emulator), over stdio and over
//! `--listen`: a multi round-trip request (MRTR) and a task, end to end. Each client's requests
//! reach one runtime session (a task lives in the microVM that made it, so its polls must reach
//! that one), nothing runs twice, and a task outlives the limit on one answer: the way to run a
//! job past AgentCore's 15 minutes per answer, played here with `--timeout 1s`.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use agentcore_tower::protocol;
use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};

use common::{Client, HttpClient, Proxy, modern, start_emulator};

use common::MODERN as VERSION;
/// How long `slow_job` runs: longer than the proxy's `--timeout` below.
const JOB: Duration = Duration::from_millis(1_500);
const TIMEOUT: &str = "1s";

/// Over `--listen`, as an HTTP client of the revision writes: no `Mcp-Session-Id`, the version
/// and the standard headers on every POST.
struct Revision(HttpClient);

impl Client for Revision {
    async fn ask(&mut self, request: Value) -> Value {
        let headers = protocol::request_headers(&request, None);
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect();
        let answer = self.0.send("POST", Some(&request), &headers).await;
        assert_eq!(answer.status, 200, "{request}");
        assert!(answer.header("mcp-session-id").is_none());
        // A JSON answer, or an SSE stream whose last message is the answer.
        let answer = answer.last_message();
        assert_eq!(answer["id"], request["id"], "{answer}");
        answer
    }
}

async fn emulator() -> Emulator {
    start_emulator(EmulatorConfig::default().slow_job_duration(JOB)).await
}

/// `server/discover`, an MRTR round trip with `confirm`, a `slow_job` task polled to its end;
/// then what the emulator saw: each request of the revision, no `initialize`, one runtime
/// session, each tool run once, every poll where the task lives.
async fn discover_confirm_and_a_task(client: &mut impl Client, emulator: &Emulator) {
    let discovered = client
        .ask(modern(1, "server/discover", json!({}), false))
        .await;
    let versions = &discovered["result"]["supportedVersions"];
    assert!(
        versions.as_array().unwrap().contains(&json!(VERSION)),
        "{discovered}"
    );

    // MRTR: the first answer asks for input and runs nothing; the re-send is a new request.
    let call = json!({"name": "confirm", "arguments": {"action": "deploy"}});
    let asked = client
        .ask(modern(2, "tools/call", call.clone(), false))
        .await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(
        result["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    assert_eq!(emulator.audit().executions_of("confirm"), 0);
    let mut answered = call;
    answered["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"confirmed": true}}});
    answered["requestState"] = result["requestState"].clone();
    let done = client.ask(modern(3, "tools/call", answered, false)).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "confirmed: deploy",
        "{done}"
    );

    // A task: a handle at once, then polls until it is done, past the limit on one answer.
    let created = client
        .ask(modern(
            4,
            "tools/call",
            json!({"name": "slow_job", "arguments": {}}),
            true,
        ))
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let mut polls = 0;
    let finished = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        polls += 1;
        let poll = client
            .ask(modern(
                10 + polls,
                "tasks/get",
                json!({"taskId": task}),
                true,
            ))
            .await;
        assert_eq!(poll["result"]["taskId"], task.as_str(), "{poll}");
        if poll["result"]["status"] == "completed" {
            break poll;
        }
        assert_eq!(poll["result"]["status"], "working", "{poll}");
        assert!(polls < 40, "the task never completed");
    };
    assert!(started.elapsed() >= JOB);
    assert_eq!(
        finished["result"]["result"]["content"][0]["text"],
        "slow_job done"
    );

    let audit = emulator.audit();
    assert_eq!(audit.executions_of("confirm"), 1);
    assert_eq!(audit.executions_of("slow_job"), 1);
    assert_eq!(audit.inputs_required, 1);
    assert_eq!(audit.tasks_created, 1);
    assert_eq!(audit.header_mismatches, 0);
    assert_eq!(audit.mcp_sessions_started, 0);
    let methods: Vec<_> = audit
        .received
        .iter()
        .filter_map(|r| r.method.as_deref())
        .collect();
    let mut expected = vec!["server/discover", "tools/call", "tools/call", "tools/call"];
    expected.extend(std::iter::repeat_n("tasks/get", polls as usize));
    assert_eq!(methods, expected);
    let sessions: BTreeSet<_> = audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone())
        .collect();
    assert_eq!(sessions.len(), 1, "one runtime session: {sessions:?}");
    assert_eq!(audit.task_requests.len(), polls as usize);
    assert!(audit.task_requests.iter().all(|poll| poll.found));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_an_mrtr_round_trip_and_a_task_run_once_in_one_runtime_session() {
    let emulator = emulator().await;
    let mut proxy = Proxy::start(&emulator, &["--timeout", TIMEOUT]);
    discover_confirm_and_a_task(&mut proxy, &emulator).await;
    proxy
        .closed_cleanly("nothing more after the last answer")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_an_mrtr_round_trip_and_a_task_run_once_in_one_runtime_session() {
    let emulator = emulator().await;
    let proxy = Proxy::start(
        &emulator,
        &["--timeout", TIMEOUT, "--listen", "127.0.0.1:0"],
    );
    let mut client = Revision(HttpClient::new(&proxy.listen_url().await, None));
    client.0.protocol_version = Some(VERSION.into());
    discover_confirm_and_a_task(&mut client, &emulator).await;
}
