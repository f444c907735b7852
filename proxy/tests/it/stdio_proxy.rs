//! The `agentcore-mcp-proxy` binary, run as a subprocess against the AgentCore Runtime emulator:
//! JSON-RPC lines in on stdin, one JSON line per answer out on stdout; and with `--listen`, an
//! MCP client over Streamable HTTP, and the endpoint's guards.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower_emulator::{Audit, BusyForm, Emulator, EmulatorConfig, Fault};
use serde_json::{Value, json};

use crate::common;
use common::*;

/// How long an answer may take when the proxy waits out a cold start: its session-busy retries
/// wait at most 30 s per call, and the call's deadline is 120 s.
const COLD_START_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_mcp_session_goes_through_the_proxy() {
    let emulator =
        start_emulator(EmulatorConfig::default().provisioning(Duration::from_millis(300))).await;
    let mut proxy = Proxy::start(&emulator, &["--stop-session-on-exit"]);

    // The new runtime session provisions for 300 ms: refused busy, re-sent, answered.
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        answer["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    assert!(emulator.audit().busy_refusals > 0, "{:?}", emulator.audit());

    // A notification: no answer line (the next line answers tools/list).
    proxy.send(&initialized());
    proxy.send(&request(2, "tools/list", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(tool_names(&answer), ["add", "echo", "counter"]);

    proxy.send(&call(3, "add", json!({"a": 2, "b": 3})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(text_of(&answer), "5");
    assert_eq!(answer["result"]["isError"], false);

    // `counter` is not declared idempotent: its connection drops after it ran, and it is not
    // sent again; the client gets one JSON-RPC error naming what happened.
    emulator.push_fault(Fault::DropAfterRun);
    proxy.send(&call(4, "counter", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 4, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    // The crate's error, then its causes (hyper's wording after the crate's).
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "AgentCore request failed: the service below failed: connection dropped (after 1 attempt): "
        ),
        "{message}"
    );
    assert_eq!(answer["error"]["data"]["failure"], "connection dropped");
    assert_eq!(
        answer["error"]["data"]["attempts"],
        json!([
            "#1 failed: connection dropped -> replay_guard: delivered (connection dropped, but a re-send is forbidden: tools/call `counter` is not declared replayable); effect unknown"
        ]),
        "{answer}"
    );
    assert!(answer.get("result").is_none());
    assert_eq!(emulator.counter(), 1);
    assert_eq!(emulator.audit().executions_of("counter"), 1);

    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "no other line, none for id 4");
    assert!(status.success(), "{status:?}; stderr:\n{}", proxy.stderr());
    assert_eq!(status.code(), Some(0));
    let audit = emulator.audit();
    assert_eq!(audit.sessions_stopped, 1, "{audit:?}");
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    assert_eq!(emulator.counter(), 1);
    assert_eq!(proxy.stdout_seen.len(), 4);

    // No secret on either stream.
    let credentials = emulator.credentials();
    let everything = proxy.everything();
    assert!(!everything.contains(credentials.secret_access_key()));
    assert!(!everything.contains(credentials.session_token().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_answered_while_a_slow_tool_runs_and_exit_waits_for_it() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut proxy = Proxy::start(&emulator, &[]);
    proxy.send(&initialize(1));
    assert_eq!(proxy.next().await["id"], 1);
    proxy.send(&initialized());

    emulator.push_fault(Fault::Slow(Duration::from_secs(2)));
    let sent = Instant::now();
    proxy.send(&call(2, "add", json!({"a": 20, "b": 22})));
    proxy.send(&request(3, "ping", json!({})));
    let first = proxy.next().await;
    assert_eq!(first, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    assert!(
        sent.elapsed() < Duration::from_millis(1500),
        "the ping waited for the slow tool: {:?}",
        sent.elapsed()
    );

    // stdin closes while `add` still runs: its answer still comes, then the proxy exits 0.
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], 2);
    assert_eq!(text_of(&rest[0]), "42");
    assert!(sent.elapsed() >= Duration::from_secs(2));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
    // Without --stop-session-on-exit the runtime session is left to expire.
    assert_eq!(emulator.audit().sessions_stopped, 0);
    assert_eq!(emulator.audit().executions_of("add"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_answers_become_one_line_each_and_the_endpoint_comes_from_the_environment() {
    let emulator = start_emulator(EmulatorConfig::default().sse(true)).await;
    let endpoint = emulator.endpoint();
    // The service-specific variable wins over the generic one (which leads nowhere).
    let mut proxy = Proxy::start_signed(
        &emulator,
        &["--runtime-arn", emulator.runtime_arn()],
        &[
            ("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", &endpoint),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ],
    );
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");

    let text = "two\nlines and a \"quote\"";
    proxy.send(&call(2, "echo", json!({"text": text})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(text_of(&answer), text);

    proxy.send(&request(3, "no/such/method", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32601);

    let proxy = proxy.closed_cleanly("nothing more").await;
    assert_eq!(proxy.stdout_seen.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_json_gets_a_parse_error_and_the_proxy_carries_on() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut proxy = Proxy::start(&emulator, &[]);
    proxy.send_raw(r#"{"jsonrpc": "2.0", "id": 1, "method": "ping""#);
    let answer = proxy.next().await;
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["id"], Value::Null);
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(emulator.audit().requests, 0, "nothing was sent");

    proxy.send_raw("");
    proxy.send(&initialize(2));
    assert_eq!(proxy.next().await["id"], 2);
    proxy.send(&request(3, "ping", json!({})));
    assert_eq!(
        proxy.next().await,
        json!({"jsonrpc": "2.0", "id": 3, "result": {}})
    );
    let (rest, status, _proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new());
    assert_eq!(status.code(), Some(0));
}

/// A secret access key the emulator does not know.
const WRONG_SECRET: &str = "not-the-emulator-secret-access-key-0123456789";

/// The proxy for `emulator`'s runtime ([`Proxy::start_at`]), signing with [`WRONG_SECRET`].
fn with_a_wrong_secret(emulator: &Emulator, args: &[&str]) -> Proxy {
    let credentials = credentials_env(emulator);
    let mut env = pairs(&credentials);
    env[1] = ("AWS_SECRET_ACCESS_KEY", WRONG_SECRET);
    Proxy::start_at(emulator, args, &env)
}

/// The JSON-RPC error that answers `initialize` (#1) signed with [`WRONG_SECRET`].
fn assert_invalid_signature(answer: &Value) {
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("AgentCore answered HTTP 403 Forbidden (InvalidSignatureException): "),
        "{message}"
    );
    assert_eq!(answer["error"]["data"]["httpStatus"], 403);
    assert_eq!(
        answer["error"]["data"]["errorType"],
        "InvalidSignatureException"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_without_a_jsonrpc_body_becomes_a_jsonrpc_error_and_no_secret_is_printed() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let credentials = emulator.credentials();
    let mut proxy = with_a_wrong_secret(&emulator, &[]);
    proxy.send(&initialize(1));
    assert_invalid_signature(&proxy.next().await);
    assert_eq!(emulator.audit().signature_failures, 1);

    // A notification that fails has no id to answer: nothing on stdout.
    proxy.send(&initialized());
    let proxy = proxy.closed_cleanly("nothing more").await;
    assert_eq!(emulator.audit().signature_failures, 2);

    // The 403 quotes the canonical request, session token included: redacted everywhere.
    let everything = proxy.everything();
    assert!(!everything.contains(WRONG_SECRET));
    assert!(!everything.contains(credentials.session_token().unwrap()));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_stdio_proxy_as_the_end_of_stdin_does() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut proxy = Proxy::start(&emulator, &["--stop-session-on-exit"]);
    proxy.send(&initialize(1));
    assert_eq!(proxy.next().await["id"], 1);
    emulator.push_fault(Fault::Slow(Duration::from_secs(1)));
    proxy.send(&call(2, "add", json!({"a": 1, "b": 2})));
    tokio::time::sleep(Duration::from_millis(200)).await;

    // stdin stays open: the signal alone ends the run, after the call in flight.
    proxy.sigterm();
    let answer = proxy.next().await;
    assert_eq!(text_of(&answer), "3", "{answer}");
    let status = proxy.exited("SIGTERM").await;
    assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
    assert!(proxy.stderr().contains("SIGTERM: shutting down"));
    assert_eq!(emulator.audit().sessions_stopped, 1);
}

#[test]
fn bad_arguments_get_the_usage_and_exit_code_2() {
    let cases: [&[&str]; 7] = [
        &[],
        &["--region", "us-east-1"],
        &["--runtime-arn"],
        &["--runtime-arn", ARN, "--no-such-flag"],
        &["--runtime-arn", ARN, "--stop-session-on-exit=yes"],
        &[
            "--runtime-arn",
            ARN,
            "--region",
            "us-east-1",
            "--region",
            "us-east-1",
        ],
        // Refused when the signing layer is built: not a region name.
        &["--runtime-arn", ARN, "--region", "Not A Region"],
    ];
    for args in cases {
        let (stdout, stderr) = run(command(args, &[]), 2);
        assert!(stdout.is_empty(), "{args:?}: stdout is for JSON-RPC only");
        assert!(
            stderr.contains("agentcore-mcp-proxy: "),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("usage: agentcore-mcp-proxy --runtime-arn ARN"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn help_reads_like_a_manual_page_and_version_names_the_release() {
    for flag in ["--help", "-h"] {
        let (help, stderr) = run(command(&[flag], &[]), 0);
        assert!(stderr.is_empty());
        let text = String::from_utf8(help).unwrap();
        let mut at = 0;
        for section in [
            "NAME\n",
            "SYNOPSIS\n",
            "DESCRIPTION\n",
            "OPTIONS\n",
            "ENVIRONMENT\n",
            "EXAMPLES\n",
            "EXIT STATUS\n",
        ] {
            let found = text[at..]
                .find(section)
                .unwrap_or_else(|| panic!("no {section:?} after byte {at}:\n{text}"));
            at += found + section.len();
        }
        for option in [
            "--runtime-arn ARN",
            "--gateway-url URL",
            "--url URL",
            "--signing-name NAME",
            "--bearer-token-env VAR",
            "--bearer-token-command CMD",
            "--region REGION",
            "--qualifier QUALIFIER",
            "--endpoint URL",
            "--idempotent-tool NAME",
            "--stop-session-on-exit",
            "--listen ADDRESS:PORT",
            "--listen-token-file PATH",
        ] {
            assert!(text.contains(&format!("\n    {option}\n")), "{option}");
        }
        // An example for each door and each token source.
        let examples = &text[text.find("EXAMPLES\n").unwrap()..text.find("EXIT STATUS\n").unwrap()];
        for door in [
            "--runtime-arn",
            "--gateway-url",
            "--url",
            "--signing-name execute-api",
            "--bearer-token-env",
            "--bearer-token-command",
        ] {
            assert!(examples.contains(door), "no example with {door}");
        }
        assert!(text.contains("\n    VAR (as --bearer-token-env names it)\n"));
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }
    let (version, _) = run(command(&["--version"], &[]), 0);
    assert_eq!(
        String::from_utf8(version).unwrap(),
        format!("agentcore-mcp-proxy {}\n", env!("CARGO_PKG_VERSION"))
    );
}

// ---------------------------------------------------------------------------------------------
// --listen: MCP Streamable HTTP on loopback.

/// A token file, readable by its owner only, removed when dropped.
struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    fn new(content: &str) -> TokenFile {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!(
            "agentcore-mcp-proxy-test-token-{}-{n}",
            std::process::id()
        ));
        std::fs::write(&path, content).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        TokenFile { path }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_over_http_runs_a_session_through_listen() {
    let emulator =
        start_emulator(EmulatorConfig::default().provisioning(Duration::from_millis(300))).await;
    let token = "s3cr3t-local-token-0123456789abcdef";
    let file = TokenFile::new(&format!("{token}\n"));
    let listening = Listening::start(&emulator, &["--listen-token-file", file.arg()]).await;
    let mut client = HttpClient::new(&listening.url, Some(token));

    // The new runtime session provisions for 300 ms: refused busy, re-sent, answered.
    let initialized = client.open().await;
    assert_eq!(initialized["id"], 1);
    assert_eq!(initialized["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        initialized["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    assert!(emulator.audit().busy_refusals > 0, "{:?}", emulator.audit());

    let answer = client.post(&request(2, "tools/list", json!({}))).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(tool_names(&answer.message()), ["add", "echo", "counter"]);

    // Requests run concurrently: a ping is answered while a slow tool runs.
    emulator.push_fault(Fault::Slow(Duration::from_secs(2)));
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.post(&call(3, "add", json!({"a": 2, "b": 3}))).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = Instant::now();
    let ping = client.post(&request(4, "ping", json!({}))).await;
    assert_eq!(
        ping.message(),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}})
    );
    assert!(
        sent.elapsed() < Duration::from_millis(1500),
        "{:?}",
        sent.elapsed()
    );
    let slow = slow.await.unwrap();
    assert_eq!(text_of(&slow.message()), "5");

    // `counter` is not declared idempotent: its connection drops after it ran, and it is not
    // sent again; the client gets one JSON-RPC error naming what happened.
    emulator.push_fault(Fault::DropAfterRun);
    let answer = client.post(&call(5, "counter", json!({}))).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let error = answer.json();
    assert_eq!(error["id"], 5, "{error}");
    assert_eq!(error["error"]["code"], -32000, "{error}");
    assert_eq!(error["error"]["data"]["failure"], "connection dropped");
    assert_eq!(
        error["error"]["data"]["attempts"],
        json!([
            "#1 failed: connection dropped -> replay_guard: delivered (connection dropped, but a re-send is forbidden: tools/call `counter` is not declared replayable); effect unknown"
        ]),
        "{error}"
    );
    assert_eq!(emulator.audit().executions_of("counter"), 1);

    // GET: AgentCore sends server messages only in answer to a POST; 405 says "no stream".
    let get = client
        .send("GET", None, &[("accept", "text/event-stream")])
        .await;
    assert_eq!(get.status, 405, "{get:?}");
    assert_eq!(get.header("allow"), Some("POST"));

    // One MCP session, one runtime session; DELETE ends both.
    let audit = emulator.audit();
    let runtime_sessions: std::collections::HashSet<_> = audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone().unwrap())
        .collect();
    assert_eq!(runtime_sessions.len(), 1, "{:?}", audit.received);
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
    let delete = client.send("DELETE", None, &[]).await;
    assert!(delete.status == 200 || delete.status == 204, "{delete:?}");
    assert_eq!(emulator.audit().sessions_stopped, 1);

    let proxy = listening.terminated_cleanly().await;
    let audit = emulator.audit();
    assert_eq!(audit.sessions_stopped, 1, "nothing more to stop: {audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");

    // No secret, and not the local token, in the log.
    let credentials = emulator.credentials();
    let stderr = proxy.stderr();
    assert!(!stderr.contains(credentials.secret_access_key()));
    assert!(!stderr.contains(credentials.session_token().unwrap()));
    assert!(!stderr.contains(token));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_over_http_each_mcp_session_its_runtime_session_and_all_stopped_at_exit() {
    let emulator = start_emulator(EmulatorConfig::default().sse(true)).await;
    let listening = Listening::start(&emulator, &["--stop-session-on-exit"]).await;
    let mut first = HttpClient::new(&listening.url, None);
    let mut second = HttpClient::new(&listening.url, None);
    first.open().await;
    second.open().await;
    assert_ne!(first.session, second.session);

    let text = "two\nlines and a \"quote\"";
    let answer = first.post(&call(2, "echo", json!({"text": text}))).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let events = answer.events();
    assert_eq!(events.len(), 1, "{answer:?}");
    assert_eq!(events[0]["id"], 2);
    assert_eq!(text_of(&events[0]), text);
    let answer = second.post(&call(2, "add", json!({"a": 40, "b": 2}))).await;
    assert_eq!(text_of(&answer.message()), "42");

    // Each MCP session in its own microVM, each request of it in the same one.
    let audit = emulator.audit();
    // The runtime sessions of the requests of one MCP session (None: outside any).
    let of = |audit: &agentcore_tower_emulator::Audit, session: &Option<String>| {
        audit
            .received
            .iter()
            .filter(|r| r.mcp_session_id == *session && r.method.as_deref() != Some("initialize"))
            .map(|r| r.runtime_session_id.clone().unwrap())
            .collect::<std::collections::HashSet<String>>()
    };
    let (a, b) = (of(&audit, &first.session), of(&audit, &second.session));
    assert_eq!(a.len(), 1, "{:?}", audit.received);
    assert_eq!(b.len(), 1, "{:?}", audit.received);
    assert_ne!(a, b);
    assert_eq!(audit.sessions_started, 2, "{audit:?}");

    // A client of MCP's stateless protocol never initializes: its requests share one runtime
    // session, not a new microVM each.
    let mut stateless = HttpClient::new(&listening.url, None);
    stateless.protocol_version = Some("2026-07-28".into());
    for id in [1, 2] {
        // A 2026-07-28 request carries its version and capabilities in `_meta`.
        let mut request = call(id, "add", json!({"a": id, "b": 1}));
        request["params"]["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let answer = stateless.post(&request).await;
        assert_eq!(text_of(&answer.message()), (id + 1).to_string());
    }
    let audit = emulator.audit();
    let shared = of(&audit, &None);
    assert_eq!(shared.len(), 1, "{:?}", audit.received);
    assert!(shared.is_disjoint(&a) && shared.is_disjoint(&b));
    assert_eq!(audit.sessions_started, 3, "{audit:?}");

    // SIGTERM with --stop-session-on-exit: every runtime session is stopped, exit 0.
    let proxy = listening.terminated_cleanly().await;
    assert_eq!(
        emulator.audit().sessions_stopped,
        3,
        "stderr:\n{}",
        proxy.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_an_aws_error_becomes_a_jsonrpc_error_and_no_secret_is_printed() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let listening = Listening::of(with_a_wrong_secret(&emulator, &listen_args(&[]))).await;
    let client = HttpClient::new(&listening.url, None);

    // A request: HTTP 200 with its JSON-RPC error, not a 403 an MCP client takes for OAuth.
    let mut bodies = String::new();
    let answer = client.post(&initialize(1)).await;
    bodies.push_str(&String::from_utf8_lossy(&answer.body));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_invalid_signature(&answer.json());

    // A notification has no id to answer: HTTP 502, the error naming why.
    let answer = client.post(&initialized()).await;
    bodies.push_str(&String::from_utf8_lossy(&answer.body));
    assert_eq!(answer.status, 502, "{answer:?}");
    assert_eq!(answer.json()["id"], Value::Null);
    assert_eq!(emulator.audit().signature_failures, 2);

    // Not JSON: a parse error, nothing sent.
    let answer = client.send("POST", None, &[]).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(answer.json()["error"]["code"], -32700);
    assert_eq!(emulator.audit().requests, 2);

    // The 403 quotes the canonical request, session token included: redacted everywhere.
    let credentials = emulator.credentials();
    let everything = format!("{bodies}\n{}", listening.proxy.stderr());
    assert!(!everything.contains(WRONG_SECRET));
    assert!(!everything.contains(credentials.session_token().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_refuses_hostile_origins_and_missing_or_wrong_tokens() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let token = "the-right-token-0123456789abcdef";
    let file = TokenFile::new(token);
    let listening = Listening::start(&emulator, &["--listen-token-file", file.arg()]).await;
    let client = HttpClient::new(&listening.url, Some(token));
    let port = listening.port;
    let own = format!("http://127.0.0.1:{port}");
    let rebound_host = format!("evil.example:{port}");
    let bearer_wrong = "Bearer the-wrong-token-0123456789abcdef".to_owned();
    // What is refused, the headers that make it so, the status.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16);
    let cases: Vec<Case> = vec![
        // A web page, and DNS rebinding: another origin, a non-loopback Host.
        (
            "hostile origin",
            vec![("origin", "http://evil.example")],
            403,
        ),
        (
            "hostile origin, own port",
            vec![("origin", "http://evil.example:8765")],
            403,
        ),
        ("opaque origin", vec![("origin", "null")], 403),
        ("https origin", vec![("origin", "https://localhost")], 403),
        ("rebound host", vec![("host", &rebound_host)], 421),
        // The token.
        ("no token", vec![("authorization", "")], 401),
        ("wrong token", vec![("authorization", &bearer_wrong)], 401),
        (
            "not a bearer token",
            vec![("authorization", "Basic dXNlcjpwYXNz")],
            401,
        ),
        // Not an MCP message.
        ("not JSON", vec![("content-type", "text/plain")], 415),
    ];
    for (what, headers, status) in &cases {
        let mut headers = client.headers(headers);
        headers.retain(|(n, v)| !(n == "authorization" && v.is_empty()));
        let answer = send_to(
            &client.client,
            "POST",
            &client.url,
            Some(&initialize(1)),
            &headers,
            LINE_TIMEOUT,
        )
        .await;
        assert_eq!(answer.status, *status, "{what}: {answer:?}");
        let error = answer.json();
        assert_eq!(error["error"]["code"], -32000, "{what}: {error}");
        assert!(error["error"]["message"].is_string(), "{what}: {error}");
        if *status == 401 {
            let challenge = answer.header("www-authenticate").unwrap();
            assert!(challenge.starts_with("Bearer"), "{what}: {challenge}");
        }
    }
    let elsewhere = send_to(
        &client.client,
        "POST",
        &client.url.replace("/mcp", "/other"),
        Some(&initialize(1)),
        &client.headers(&[]),
        LINE_TIMEOUT,
    )
    .await;
    assert_eq!(elsewhere.status, 404, "{elsewhere:?}");
    assert_eq!(
        emulator.audit().requests,
        0,
        "nothing refused reached AgentCore"
    );

    // The endpoint's own origin, and localhost, with the token: served.
    for (origin, host) in [
        (own.clone(), format!("127.0.0.1:{port}")),
        (
            "http://localhost:6274".to_owned(),
            format!("localhost:{port}"),
        ),
    ] {
        let answer = client
            .send(
                "POST",
                Some(&initialize(1)),
                &[("origin", &origin), ("host", &host)],
            )
            .await;
        assert_eq!(answer.status, 200, "{origin}: {answer:?}");
        assert_eq!(answer.message()["result"]["protocolVersion"], "2025-06-18");
    }
    assert_eq!(emulator.audit().requests, 2);
    assert!(!listening.proxy.stderr().contains(token));
    assert!(!listening.proxy.stderr().contains("the-wrong-token"));
}

#[test]
fn listen_refuses_non_loopback_addresses_and_unusable_token_files() {
    let empty = TokenFile::new(" \n");
    let short = TokenFile::new("short");
    let missing = std::env::temp_dir().join("agentcore-mcp-proxy-test-no-such-token-file");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["--listen", "0.0.0.0:8765"],
            "0.0.0.0 binds every network interface",
        ),
        (
            &["--listen", "[::]:8765"],
            ":: binds every network interface",
        ),
        (
            &["--listen", "192.168.1.10:8765"],
            "192.168.1.10 is not a loopback address",
        ),
        (&["--listen", "example.com:8765"], "not an ADDRESS:PORT"),
        (
            &["--listen-token-file", empty.arg()],
            "--listen-token-file needs --listen",
        ),
        (
            &["--listen", "127.0.0.1:0", "--listen-token-file", missing],
            "--listen-token-file",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--listen-token-file",
                empty.arg(),
            ],
            "the file is empty",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--listen-token-file",
                short.arg(),
            ],
            "use at least 16",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["--runtime-arn", ARN];
        all.extend_from_slice(args);
        let (stdout, stderr) = run(command(&all, &[]), 2);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(stdout.is_empty());
    }

    // A port already taken: the proxy cannot start (exit 1), and says why.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let args = [
        "--runtime-arn",
        ARN,
        "--endpoint",
        "http://127.0.0.1:9",
        "--listen",
        &address,
    ];
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "example"),
    ];
    let (_, stderr) = run(command(&args, &env), 1);
    assert!(
        stderr.contains(&format!("cannot listen on {address}")),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// --gateway-url and --url: the proxy against an MCP server played here, with a bearer token or
// SigV4.

/// How the in-test server authenticates a request.
enum ServerAuth {
    /// Only `Authorization: Bearer {0}`; anything else gets a 401 with a `Bearer` challenge.
    Bearer(String),
    /// A SigV4 signature the verifier accepts, its credential scope ending with the text
    /// given (`/us-west-2/execute-api/aws4_request`).
    SigV4(agentcore_tower_emulator::SignatureVerifier, &'static str),
}

/// One request the in-test server got, and its answer's status.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path_and_query: String,
    authorization: Option<String>,
    session: Option<String>,
    /// The JSON-RPC method of a POST.
    rpc: Option<String>,
    /// `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`.
    runtime_session: Option<String>,
    /// `Last-Event-ID`, on a GET that resumes the server's stream.
    last_event_id: Option<String>,
    status: u16,
}

/// The log message the in-test server sends on its own stream.
fn server_log() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "logger": "in-test", "data": "the stream is open"}})
}

/// The resource update the in-test server sends on its own stream.
fn resource_updated() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
        "params": {"uri": "file:///in-test/resource"}})
}

/// What the in-test server's stream sends when it is resumed at `/mcp/resumable`.
fn list_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

/// The MCP session id the in-test server hands out.
const SERVER_SESSION: &str = "in-test-mcp-session-0123456789";

/// A small MCP Streamable HTTP server at `/mcp` (any query): initialize opens a session (its id
/// in `Mcp-Session-Id`, required afterwards), `tools/list`, `tools/call` of `echo`, `ping`, a
/// notification (202), DELETE (200, the session ended); every request recorded.
type McpServer = Recorder<Seen>;

impl Recorder<Seen> {
    async fn start(auth: ServerAuth) -> McpServer {
        let auth = Arc::new(auth);
        Recorder::serve(move |seen, request| {
            let auth = auth.clone();
            async move {
                // The base is the request's own authority: the server knows where it listens.
                let base = format!("http://{}", request.headers()["host"].to_str().unwrap());
                serve(&auth, &base, &seen, request).await
            }
        })
        .await
    }

    /// The requests seen, in the order of an MCP session: a client over `--listen` may send
    /// concurrently, so a notification and the next request may arrive either way round (each
    /// kind's own requests stay in the order they came). Over stdio the proxy keeps the order
    /// itself (`over_stdio_the_handshake_is_serial_the_servers_stream_opens_and_nothing_is_overtaken`).
    fn seen(&self) -> Vec<Seen> {
        let mut seen = self.recorded();
        seen.sort_by_key(|s| match (s.method.as_str(), s.rpc.as_deref()) {
            ("POST", Some("initialize")) => 0,
            ("POST", Some("notifications/initialized")) => 1,
            ("POST", Some("tools/list")) => 2,
            ("POST", Some("tools/call")) => 3,
            _ => 4,
        });
        seen
    }

    /// What the server got since it was last cleared, as it got it: the JSON-RPC method of a
    /// POST, the HTTP method of another request.
    fn order(&self) -> Vec<String> {
        self.recorded()
            .iter()
            .map(|s| s.rpc.clone().unwrap_or_else(|| s.method.clone()))
            .collect()
    }

    /// The `Last-Event-ID` of each GET, in order.
    fn last_event_ids(&self) -> Vec<Option<String>> {
        self.recorded()
            .iter()
            .filter(|s| s.method == "GET")
            .map(|s| s.last_event_id.clone())
            .collect()
    }
}

async fn serve(
    auth: &ServerAuth,
    base: &str,
    seen: &Mutex<Vec<Seen>>,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    let (parts, body) = read_request(request).await;
    let header = |name: &str| header_of(&parts.headers, name);
    let message: Option<Value> = serde_json::from_slice(&body).ok();
    let rpc = message
        .as_ref()
        .and_then(|m| m["method"].as_str())
        .map(str::to_owned);
    // A server slow to take `initialized`, and to open its stream at `/mcp/resumable`: a
    // request forwarded before either is answered would be seen first.
    if rpc.as_deref() == Some("notifications/initialized")
        || (parts.method == http::Method::GET && parts.uri.path() == "/mcp/resumable")
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let respond = |status: u16, headers: &[(&str, &str)], body: String| {
        let mut response = http::Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(*name, *value);
        }
        seen.lock().unwrap().push(Seen {
            method: parts.method.to_string(),
            path_and_query: parts.uri.path_and_query().unwrap().to_string(),
            authorization: header("authorization"),
            session: header("mcp-session-id"),
            rpc: rpc.clone(),
            runtime_session: header("x-amzn-bedrock-agentcore-runtime-session-id"),
            last_event_id: header("last-event-id"),
            status,
        });
        response
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap()
    };
    let json = [("content-type", "application/json")];
    // An MCP endpoint, or a runtime's invocations (InvokeAgentRuntime over plain HTTP).
    let path = parts.uri.path();
    // At `/mcp/resumable` the server's stream asks to be resumed at once and, resumed after
    // its second event, sends a third.
    let resumable = path == "/mcp/resumable";
    if path != "/mcp"
        && !resumable
        && !(path.starts_with("/runtimes/") && path.ends_with("/invocations"))
    {
        return respond(404, &[], String::new());
    }
    match auth {
        ServerAuth::Bearer(accepted) => {
            if header("authorization") != Some(format!("Bearer {accepted}")) {
                let challenge = format!(
                    "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                );
                return respond(
                    401,
                    &[("www-authenticate", &challenge), json[0]],
                    r#"{"error":"invalid_token"}"#.into(),
                );
            }
        }
        ServerAuth::SigV4(verifier, scope) => {
            let scoped = header("authorization").is_some_and(|a| {
                a.split("Credential=")
                    .nth(1)
                    .and_then(|c| c.split(',').next())
                    .is_some_and(|c| c.ends_with(scope))
            });
            let verified = verifier.verify(&parts, &body, std::time::SystemTime::now());
            if !scoped || verified.is_err() {
                return respond(
                    403,
                    &[("x-amzn-errortype", "InvalidSignatureException"), json[0]],
                    format!(r#"{{"message":"{verified:?}, scoped: {scoped}"}}"#),
                );
            }
        }
    }
    let session = header("mcp-session-id");
    let in_session = session.as_deref() == Some(SERVER_SESSION);
    match (parts.method.as_str(), rpc.as_deref()) {
        ("DELETE", _) if in_session => respond(200, &[], String::new()),
        // The server's stream: a log message and a resource update, each with its id, then it
        // ends, asking to be resumed in 10 minutes; resumed, it has nothing newer.
        ("GET", _) if in_session => respond(
            200,
            &[("content-type", "text/event-stream")],
            match header("last-event-id").as_deref() {
                // A tool call's stream, resumed: its answer.
                Some(call) if resumable && call.starts_with("call-") => format!(
                    "id: {call}-answer\ndata: {}\n\n",
                    json!({"jsonrpc": "2.0", "id": call["call-".len()..].parse::<u64>().unwrap(),
                        "result": {"content": [{"type": "text", "text": "answered on the resumed stream"}],
                        "isError": false}})
                ),
                Some("2") if resumable => {
                    format!("retry: 600000\nid: 3\ndata: {}\n\n", list_changed())
                }
                Some(_) => "retry: 600000\n\n".into(),
                None => format!(
                    "retry: {}\nid: 1\ndata: {}\n\nid: 2\ndata: {}\n\n",
                    if resumable { 50 } else { 600_000 },
                    server_log(),
                    resource_updated()
                ),
            },
        ),
        ("POST", Some("initialize")) => {
            let answer = json!({"jsonrpc": "2.0", "id": message.as_ref().unwrap()["id"], "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "in-test", "version": "1"}
            }});
            respond(
                200,
                &[json[0], ("mcp-session-id", SERVER_SESSION)],
                answer.to_string(),
            )
        }
        ("POST", Some(_)) if !in_session => respond(400, &[], "no session".into()),
        ("POST", Some(method)) => {
            let message = message.as_ref().unwrap();
            let Some(id) = message.get("id") else {
                return respond(202, &[], String::new());
            };
            let result = match method {
                "ping" => json!({}),
                "tools/list" => {
                    json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
                }
                "tools/call"
                    if resumable || message["params"]["arguments"]["text"] == "end-early" =>
                {
                    // The tool runs; its stream ends after a priming event (SEP-1699), and the
                    // answer waits for the stream to be resumed from that event.
                    return respond(
                        200,
                        &[("content-type", "text/event-stream")],
                        format!("retry: 50\nid: call-{id}\ndata: \n\n"),
                    );
                }
                "tools/call" => {
                    json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}], "isError": false})
                }
                _ => json!({}),
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            respond(200, &json, answer.to_string())
        }
        _ => respond(405, &[("allow", "POST, DELETE")], String::new()),
    }
}

/// What the server saw, request by request: the HTTP method, the JSON-RPC method, the status.
fn shape(seen: &[Seen]) -> Vec<(&str, Option<&str>, u16)> {
    seen.iter()
        .map(|s| (s.method.as_str(), s.rpc.as_deref(), s.status))
        .collect()
}

/// A request as the in-test server saw it: method, JSON-RPC method, the token, the session
/// id, the status.
type Row = (String, Option<String>, Option<String>, Option<String>, u16);

/// [`Row`] of a request the in-test server saw.
fn summary(seen: &Seen) -> Row {
    (
        seen.method.clone(),
        seen.rpc.clone(),
        seen.authorization
            .as_deref()
            .map(|a| a.trim_start_matches("Bearer ").to_owned()),
        seen.session.clone(),
        seen.status,
    )
}

fn row(method: &str, rpc: Option<&str>, token: &str, session: bool, status: u16) -> Row {
    (
        method.to_owned(),
        rpc.map(str::to_owned),
        Some(token.to_owned()),
        session.then(|| SERVER_SESSION.to_owned()),
        status,
    )
}

/// What the in-test server saw of [`run_session`] with `token`, each request once; through an
/// MCP door (a Gateway, an MCP URL, not a runtime), the GET of the server's stream and the
/// DELETE that ends the session at exit too.
fn session_rows(token: &str, mcp_door: bool) -> Vec<Row> {
    let mut rows = vec![
        row("POST", Some("initialize"), token, false, 200),
        row("POST", Some("notifications/initialized"), token, true, 202),
        row("POST", Some("tools/list"), token, true, 200),
        row("POST", Some("tools/call"), token, true, 200),
    ];
    if mcp_door {
        rows.push(row("GET", None, token, true, 200));
        rows.push(row("DELETE", None, token, true, 200));
    }
    rows
}

/// The proxy's log names the door (`proxying to {door}`) and the variable its bearer token came
/// from; nothing the proxy wrote shows the token.
fn assert_door_logged(proxy: &Proxy, door: &str, variable: &str, token: &str) {
    let stderr = proxy.stderr();
    assert!(stderr.contains(&format!("proxying to {door}")), "{stderr}");
    assert!(
        stderr.contains(&format!("auth=bearer token from ${variable}")),
        "{stderr}"
    );
    let everything = proxy.everything();
    assert!(!everything.contains(token), "{everything}");
}

/// An MCP session through the proxy: initialize, initialized, tools/list, tools/call `echo`.
async fn run_session(proxy: &mut Proxy, stream: bool) {
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "in-test",
        "{answer}"
    );
    proxy.send(&initialized());
    proxy.send(&request(2, "tools/list", json!({})));
    // The server's own stream (where the door offers one) is open before tools/list goes out:
    // its two messages and the answer, in whatever order they come.
    let expected = if stream {
        vec![server_log(), resource_updated()]
    } else {
        Vec::new()
    };
    let (answer, stream) = proxy.answer_among(2, 1 + expected.len()).await;
    assert_eq!(answer["result"]["tools"][0]["name"], "echo", "{answer}");
    assert_eq!(stream, expected);
    proxy.send(&call(3, "echo", json!({"text": "through the door"})));
    let answer = proxy.next().await;
    assert_eq!(text_of(&answer), "through the door");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_handshake_is_serial_the_servers_stream_opens_and_nothing_is_overtaken() {
    let server = McpServer::start(ServerAuth::Bearer("in-order-token-0123".into())).await;
    let url = format!("{}/mcp", server.base);
    for run in 0..20 {
        server.clear();
        let mut proxy = Proxy::for_url(&url, "in-order-token-0123", &[]);
        // Back to back, as a client writes them: the server takes `initialized` slowly.
        proxy.send(&initialize(1));
        proxy.send(&initialized());
        proxy.send(&request(2, "tools/list", json!({})));
        let first = proxy.next().await;
        assert_eq!(first["id"], 1, "{first}");
        let (second, stream) = proxy.answer_among(2, 3).await;
        assert!(second["result"]["tools"].is_array(), "{second}");
        assert_eq!(stream, [server_log(), resource_updated()]);
        let (rest, status, _proxy) = proxy.close().await;
        assert_eq!(rest, Vec::<Value>::new());
        assert_eq!(status.code(), Some(0));
        // The order the server answered them in, unsorted.
        let order = server.order();
        // And the server's stream was open before tools/list went out.
        assert_eq!(
            order[..4],
            [
                "initialize",
                "notifications/initialized",
                "GET",
                "tools/list"
            ],
            "run {run}"
        );
    }
}

/// Over stdio at `/mcp/resumable`: initialize and initialized; then the stream's two events
/// and — resumed 50 ms after it ended, from event 2 — the third.
async fn open_and_resume(proxy: &mut Proxy) {
    proxy.open().await;
    for expected in [server_log(), resource_updated(), list_changed()] {
        assert_eq!(proxy.next().await, expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_servers_stream_is_resumed_after_its_last_event() {
    let server = McpServer::start(ServerAuth::Bearer("resumable-token-0123".into())).await;
    let url = format!("{}/mcp/resumable", server.base);
    let mut proxy = Proxy::for_url(&url, "resumable-token-0123", &[]);
    open_and_resume(&mut proxy).await;
    proxy.closed_cleanly("nothing twice").await;
    let gets = server.last_event_ids();
    assert_eq!(gets, [None, Some("2".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_calls_stream_ended_early_is_resumed_not_sent_again() {
    let server = McpServer::start(ServerAuth::Bearer("resumable-token-0123".into())).await;
    let url = format!("{}/mcp/resumable", server.base);
    let tool_calls = |server: &McpServer| {
        server
            .recorded()
            .iter()
            .filter(|s| s.rpc.as_deref() == Some("tools/call"))
            .count()
    };

    // Over stdio: the proxy resumes the stream itself, and the client gets the answer once.
    let mut proxy = Proxy::for_url(&url, "resumable-token-0123", &[]);
    open_and_resume(&mut proxy).await;
    proxy.send(&call(7, "echo", json!({"text": "once"})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(text_of(&answer), "answered on the resumed stream");
    proxy.closed_cleanly("answered once").await;
    assert_eq!(tool_calls(&server), 1, "resumed, not sent again");
    let resumed = server.last_event_ids();
    assert!(resumed.contains(&Some("call-7".to_owned())), "{resumed:?}");

    // Over --listen: the priming event reaches the client as it came, the stream ends without
    // an error, and the client's own GET with Last-Event-ID reaches the server.
    server.clear();
    let listening = Listening::for_url(&url, "resumable-token-0123", &[]).await;
    let client = listening.client().await;
    let primed = client
        .send("POST", Some(&call(8, "echo", json!({"text": "once"}))), &[])
        .await;
    assert_eq!(primed.status, 200, "{primed:?}");
    assert_eq!(&primed.body[..], b"retry: 50\nid: call-8\ndata: \n\n");
    let resumed = client
        .send(
            "GET",
            None,
            &[("accept", "text/event-stream"), ("last-event-id", "call-8")],
        )
        .await;
    assert_eq!(resumed.status, 200, "{resumed:?}");
    let answer = resumed.events().remove(0);
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(text_of(&answer), "answered on the resumed stream");
    assert_eq!(tool_calls(&server), 1, "resumed, not sent again");
    listening.terminated_cleanly().await;
}

/// Over `--listen`, from `server`'s clearing on: the client's GET of its stream and a
/// `tools/list` (#9), the GET first when `stream_first`, the other `after` it; each answered
/// 200; the order the server got them in.
async fn stream_and_list(
    client: &HttpClient,
    server: &McpServer,
    stream_first: bool,
    after: Duration,
) -> Vec<String> {
    server.clear();
    let stream = async {
        if !stream_first {
            tokio::time::sleep(after).await;
        }
        client
            .send("GET", None, &[("accept", "text/event-stream")])
            .await
    };
    let list = async {
        if stream_first {
            tokio::time::sleep(after).await;
        }
        client
            .send("POST", Some(&request(9, "tools/list", json!({}))), &[])
            .await
    };
    let (stream, list) = tokio::join!(stream, list);
    assert_eq!(stream.status, 200, "{stream:?}");
    assert_eq!(list.status, 200, "{list:?}");
    server.order()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_sessions_request_never_overtakes_its_stream_on_the_way() {
    let server = McpServer::start(ServerAuth::Bearer("ordered-token-0123".into())).await;
    let url = format!("{}/mcp/resumable", server.base);
    let listening = Listening::for_url(&url, "ordered-token-0123", &[]).await;
    let client = listening.client().await;
    for _ in 0..5 {
        // The client opens its stream, then calls a tool a moment later, as MCP clients do;
        // the server takes 50 ms to open the stream.
        let order = stream_and_list(&client, &server, true, Duration::from_millis(5)).await;
        assert_eq!(order, ["GET", "tools/list"]);
    }
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_request_right_after_initialized_waits_for_the_clients_stream() {
    let server = McpServer::start(ServerAuth::Bearer("expected-token-0123".into())).await;
    let url = format!("{}/mcp/resumable", server.base);
    let listening = Listening::for_url(&url, "expected-token-0123", &[]).await;
    for _ in 0..5 {
        // A new session each time: the client's request reaches the proxy before the GET it
        // sent first (on a connection of its own), as MCP clients' requests do right after
        // initialized; the server still gets the GET first.
        let client = listening.client().await;
        let order = stream_and_list(&client, &server, false, Duration::from_millis(40)).await;
        assert_eq!(order, ["GET", "tools/list"]);
    }
    // A client that never opens a stream: its requests go on (after the short wait, once).
    let client = listening.client().await;
    server.clear();
    for id in [10, 11] {
        let list = client
            .send("POST", Some(&request(id, "tools/list", json!({}))), &[])
            .await;
        assert_eq!(list.status, 200, "{list:?}");
    }
    let order = server.order();
    assert_eq!(order, ["tools/list", "tools/list"]);
    listening.terminated_cleanly().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_command_runs_again_after_a_401_and_its_token_is_never_shown() {
    let stale = "stale-7f3a9c1e-token";
    let fresh = "fresh-5b2e8d4a-token";
    let server = McpServer::start(ServerAuth::Bearer(fresh.into())).await;
    let dir = TempDir::new("token-command");
    let command = dir.token_command(&[stale, fresh, "third-never-fetched"]);
    // A query with a secret in it: sent as given, never shown.
    let url = format!("{}/mcp?tenant=acme&key=q-9d8c7b6a", server.base);
    // No AWS credentials at all.
    let mut proxy = Proxy::start_with(&["--url", &url, "--bearer-token-command", &command], &[]);
    run_session(&mut proxy, true).await;
    let proxy = proxy.closed_cleanly("nothing more").await;

    // The first token was refused once; the command ran once more, and its token served the
    // rest, the DELETE that ends the session at exit included.
    let seen = server.seen();
    let mut expected = vec![row("POST", Some("initialize"), stale, false, 401)];
    expected.extend(session_rows(fresh, true));
    assert_eq!(
        seen.iter().map(summary).collect::<Vec<_>>(),
        expected,
        "stderr:\n{}",
        proxy.stderr()
    );
    assert_eq!(dir.runs(), 2);
    for seen in &seen {
        assert_eq!(seen.path_and_query, "/mcp?tenant=acme&key=q-9d8c7b6a");
    }
    let stderr = proxy.stderr();
    assert!(stderr.contains("proxying to an MCP server"), "{stderr}");
    assert!(
        stderr.contains(&format!("url={}/mcp?…", server.base)),
        "{stderr}"
    );
    assert!(stderr.contains("MCP session ended"), "{stderr}");
    let everything = proxy.everything();
    for secret in [stale, fresh, "q-9d8c7b6a"] {
        assert!(
            !everything.contains(secret),
            "{secret} shown:\n{everything}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_gateway_token_from_a_variable_is_answered_without_a_resend() {
    let right = "right-gateway-token-3c2b1a";
    let wrong = "wrong-gateway-token-6f5e4d";
    let server = McpServer::start(ServerAuth::Bearer(right.into())).await;
    let url = format!("{}/mcp", server.base);
    let args = ["--gateway-url", &url, "--bearer-token-env", "GATEWAY_TOKEN"];

    // The variable's token is refused: it cannot change, so it is not sent again; the client
    // gets a JSON-RPC error naming the 401 and where the OAuth metadata is.
    let mut proxy = Proxy::start_with(&args, &[("GATEWAY_TOKEN", wrong)]);
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "AgentCore answered HTTP 401 Unauthorized: the bearer token was refused"
    );
    assert_eq!(answer["error"]["data"]["httpStatus"], 401);
    assert_eq!(
        answer["error"]["data"]["resourceMetadata"],
        format!("{}/.well-known/oauth-protected-resource/mcp", server.base)
    );
    let proxy = proxy.closed_cleanly("nothing more").await;
    // No session was opened: no DELETE at exit.
    assert_eq!(
        server.seen().iter().map(summary).collect::<Vec<_>>(),
        [row("POST", Some("initialize"), wrong, false, 401)]
    );
    let everything = proxy.everything();
    assert!(!everything.contains(wrong), "{everything}");

    // The right token: the session runs, and is ended at exit.
    let mut proxy = Proxy::start_with(&args, &[("GATEWAY_TOKEN", right)]);
    run_session(&mut proxy, true).await;
    let proxy = proxy.closed_cleanly("nothing more").await;
    assert_eq!(
        server.seen()[1..].iter().map(summary).collect::<Vec<_>>(),
        session_rows(right, true)
    );
    assert_door_logged(&proxy, "AgentCore Gateway", "GATEWAY_TOKEN", right);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigv4_url_is_signed_for_the_signing_name_and_region_given() {
    let key = "AKIDPROXYTEST0001";
    let secret = "proxy-test-secret-access-key-9a8b7c6d";
    let session_token = "proxy-test-session-token-1f2e3d4c";
    let signing = SigningKey {
        key,
        secret,
        session_token: Some(session_token),
    };
    let server = McpServer::start(ServerAuth::SigV4(
        signing.verifier("us-west-2", "execute-api"),
        "/us-west-2/execute-api/aws4_request",
    ))
    .await;
    let url = format!("{}/mcp?stage=prod", server.base);
    // AWS_REGION (us-east-1) is not what is signed for: --region is.
    let mut proxy = Proxy::start_with(
        &[
            "--url",
            &url,
            "--signing-name",
            "execute-api",
            "--region",
            "us-west-2",
        ],
        &signing.env(),
    );
    run_session(&mut proxy, true).await;
    let proxy = proxy.closed_cleanly("nothing more").await;
    let seen = server.seen();
    assert_eq!(
        shape(&seen),
        [
            ("POST", Some("initialize"), 200),
            ("POST", Some("notifications/initialized"), 202),
            ("POST", Some("tools/list"), 200),
            ("POST", Some("tools/call"), 200),
            ("GET", None, 200),
            ("DELETE", None, 200),
        ],
        "stderr:\n{}",
        proxy.stderr()
    );
    for seen in &seen {
        let authorization = seen.authorization.as_deref().unwrap();
        assert!(
            authorization.starts_with(&format!("AWS4-HMAC-SHA256 Credential={key}/")),
            "{authorization}"
        );
        assert_eq!(seen.path_and_query, "/mcp?stage=prod");
    }
    let stderr = proxy.stderr();
    assert!(stderr.contains("signing_name=execute-api"), "{stderr}");
    assert!(stderr.contains("region=us-west-2"), "{stderr}");
    let everything = proxy.everything();
    assert!(!everything.contains(secret) && !everything.contains(session_token));
}

#[test]
fn door_and_token_options_that_do_not_go_together_are_usage_errors() {
    let gateway = "https://gw-1.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";
    let url = "https://example.com/mcp";
    let unset = "AGENTCORE_MCP_PROXY_TEST_NO_SUCH_TOKEN";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--region", "us-east-1"],
            "one of --runtime-arn, --gateway-url or --url is required",
        ),
        (
            &["--runtime-arn", ARN, "--gateway-url", gateway],
            "--runtime-arn and --gateway-url exclude each other: give one of them",
        ),
        (
            &[
                "--url",
                url,
                "--bearer-token-env",
                "T",
                "--bearer-token-command",
                "t",
            ],
            "--bearer-token-env and --bearer-token-command exclude each other: give one of them",
        ),
        (
            &["--gateway-url", gateway, "--qualifier", "prod"],
            "--qualifier applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &["--url", url, "--bearer-token-env", "T", "--endpoint", url],
            "--endpoint applies to --runtime-arn only, not to --url",
        ),
        (
            &[
                "--url",
                url,
                "--bearer-token-env",
                "T",
                "--stop-session-on-exit",
            ],
            "--stop-session-on-exit applies to --runtime-arn only, not to --url",
        ),
        (
            &["--url", url],
            "--url needs --signing-name NAME (SigV4: e.g. execute-api for API Gateway, lambda \
             for a Lambda function URL) or a bearer token (--bearer-token-env or \
             --bearer-token-command)",
        ),
        (
            &[
                "--url",
                url,
                "--signing-name",
                "lambda",
                "--bearer-token-env",
                "T",
            ],
            "--signing-name is for SigV4, and --bearer-token-env sends a bearer token instead: \
             give one of them",
        ),
        (
            &["--gateway-url", gateway, "--signing-name", "lambda"],
            "--signing-name applies to --url only: --gateway-url signs for bedrock-agentcore",
        ),
        (
            &[
                "--url",
                "http://example.com/mcp",
                "--signing-name",
                "lambda",
            ],
            "--url http://example.com/mcp: http:// is for a loopback test server only \
             (localhost, 127.0.0.1, [::1]): the request's credentials would cross the network \
             in the clear; use https://",
        ),
        // Found when the proxy starts, still before anything is sent.
        (
            &["--url", url, "--bearer-token-env", unset],
            "--bearer-token-env AGENTCORE_MCP_PROXY_TEST_NO_SUCH_TOKEN: the variable is not set",
        ),
        (
            &[
                "--url",
                url,
                "--signing-name",
                "Execute API",
                "--region",
                "us-west-2",
            ],
            "--url: `Execute API` is not a SigV4 signing name (lower-case letters, digits and \
             `-`)",
        ),
    ];
    for (args, expected) in cases {
        let (stdout, stderr) = run(command(args, &[]), 2);
        assert!(stdout.is_empty(), "{args:?}");
        assert!(
            stderr.contains(&format!("agentcore-mcp-proxy: {expected}\n\nusage: ")),
            "{args:?}: {stderr}"
        );
    }

    // SigV4 for a URL needs a region, and none is configured.
    let mut unsigned = command(&["--url", url, "--signing-name", "execute-api"], &[]);
    unsigned.env_remove("AWS_REGION");
    let (_, stderr) = run(unsigned, 2);
    assert!(
        stderr.contains(
            "agentcore-mcp-proxy: --url with SigV4 needs a region to sign for: give --region \
             REGION (or set AWS_REGION)\n"
        ),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn a_failing_token_command_stops_the_start_and_is_named_without_its_output() {
    let args = [
        "--url",
        "https://example.com/mcp",
        "--bearer-token-command",
        "echo partial-token-8e7d6c; echo 'login required: run my-idp login' >&2; exit 3",
    ];
    let (stdout, stderr) = run(command(&args, &[]), 1);
    assert!(
        stderr.contains(
            "--bearer-token-command failed (exit status 3; stderr: \"login required: run my-idp \
             login\")"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("partial-token-8e7d6c"), "{stderr}");
    assert!(stdout.is_empty());
}

#[test]
fn a_token_every_request_would_refuse_stops_the_start() {
    // Visible ASCII, one word, but shorter than the library's check of every attempt allows.
    for (value, has) in [("shrt7ch", 7), ("two,w0rds", 9)] {
        let args = [
            "--url",
            "https://example.com/mcp",
            "--bearer-token-env",
            "MCP_TEST_TOKEN",
        ];
        let (stdout, stderr) = run(command(&args, &[("MCP_TEST_TOKEN", value)]), 2);
        assert!(
            stderr.contains(&format!(
                "--bearer-token-env MCP_TEST_TOKEN: the variable is not a usable bearer token \
                 (RFC 6750: letters, digits, `-._~+/` then `=`s; at least 8 characters; this \
                 one has {has})"
            )),
            "{stderr}"
        );
        assert!(!stderr.contains(value), "{stderr}");
        assert!(stdout.is_empty());
    }
}

/// The proxy for the runtime [`ARN`] at `server` with the bearer token `token` from
/// `$RUNTIME_TOKEN`: no AWS variable but the region.
fn at_a_runtime_with_oauth(server: &McpServer, token: &str) -> Proxy {
    Proxy::start_with(
        &[
            "--runtime-arn",
            ARN,
            "--endpoint",
            &server.base,
            "--bearer-token-env",
            "RUNTIME_TOKEN",
        ],
        &[("RUNTIME_TOKEN", token)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_with_oauth_inbound_auth_gets_the_token_and_no_aws_credentials_are_needed() {
    let token = "runtime-oauth-token-0a9b8c7d";
    let server = McpServer::start(ServerAuth::Bearer(token.into())).await;
    // No AWS variable but the region: no credentials to find, none needed.
    let mut proxy = at_a_runtime_with_oauth(&server, token);
    run_session(&mut proxy, false).await;
    let proxy = proxy.closed_cleanly("nothing more").await;
    let seen = server.seen();
    // InvokeAgentRuntime's mapping, the token in place of a signature; no DELETE at exit
    // without --stop-session-on-exit.
    assert_eq!(
        seen.iter().map(summary).collect::<Vec<_>>(),
        session_rows(token, false)
    );
    let runtime_session = seen[0].runtime_session.clone();
    assert!(runtime_session.as_ref().is_some_and(|id| id.len() >= 33));
    for seen in &seen {
        assert_eq!(
            seen.path_and_query,
            "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fx-AbC123/invocations"
        );
        assert_eq!(seen.runtime_session, runtime_session, "one runtime session");
    }
    assert_door_logged(&proxy, "AgentCore Runtime", "RUNTIME_TOKEN", token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimes_stream_ended_early_cannot_be_resumed_and_the_error_says_the_tool_may_have_run()
{
    let token = "runtime-oauth-token-5e6f7a8b";
    let server = McpServer::start(ServerAuth::Bearer(token.into())).await;
    let mut proxy = at_a_runtime_with_oauth(&server, token);
    proxy.open().await;
    // The runtime's tool runs and its stream ends after a priming event: a runtime offers no
    // GET to resume it, and sending it again could run the tool twice.
    proxy.send(&call(7, "echo", json!({"text": "end-early"})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 7, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with(
            "ended its answer's stream before the answer, and offers no stream to resume it \
             (GET: 405); the tool may have run"
        ),
        "{answer}"
    );
    proxy.closed_cleanly("answered once").await;
    let seen: Vec<(String, Option<String>)> = server
        .seen()
        .iter()
        .map(|s| (s.method.clone(), s.rpc.clone()))
        .collect();
    let expected: Vec<(String, Option<String>)> = [
        ("POST", Some("initialize")),
        ("POST", Some("notifications/initialized")),
        ("POST", Some("tools/call")),
    ]
    .into_iter()
    .map(|(m, r)| (m.to_owned(), r.map(str::to_owned)))
    .collect();
    assert_eq!(seen, expected, "sent once, never resumed by a GET");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_with_a_url_passes_get_and_delete_on_and_names_no_runtime_session() {
    let token = "listen-url-token-4e3d2c1b";
    let server = McpServer::start(ServerAuth::Bearer(token.into())).await;
    let url = format!("{}/mcp", server.base);
    let listening = Listening::for_url(&url, token, &[]).await;
    let mut client = HttpClient::new(&listening.url, None);
    let opened = client.open().await;
    assert_eq!(
        opened["result"]["serverInfo"]["name"], "in-test",
        "{opened}"
    );
    // A request outside any session goes as it is: no runtime session is made up for it (this
    // server wants one, and its 400 becomes the request's JSON-RPC error).
    let outside = send_to(
        &client.client,
        "POST",
        &listening.url,
        Some(&request(7, "ping", json!({}))),
        &[("content-type".into(), "application/json".into())],
        LINE_TIMEOUT,
    )
    .await;
    assert_eq!(outside.status, 200, "{outside:?}");
    assert_eq!(
        outside.json()["error"]["message"],
        "the MCP server answered HTTP 400 Bad Request"
    );

    // GET: the server's stream, relayed.
    let stream = client
        .send("GET", None, &[("accept", "text/event-stream")])
        .await;
    assert_eq!(stream.status, 200, "{stream:?}");
    assert_eq!(stream.events(), [server_log(), resource_updated()]);
    // DELETE: the server ends the session.
    let ended = client.send("DELETE", None, &[]).await;
    assert_eq!(ended.status, 200, "{ended:?}");

    let proxy = listening.terminated_cleanly().await;
    let seen = server.seen();
    assert_eq!(
        shape(&seen),
        [
            ("POST", Some("initialize"), 200),
            ("POST", Some("notifications/initialized"), 202),
            ("POST", Some("ping"), 400),
            ("GET", None, 200),
            ("DELETE", None, 200),
        ]
    );
    assert!(seen.iter().all(|s| s.runtime_session.is_none()), "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(&format!("Bearer {token}")[..]))
    );
    assert!(!proxy.stderr().contains(token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_is_signed_for_bedrock_agentcore() {
    let secret = "proxy-test-secret-access-key-5e6f7a8b";
    let signing = SigningKey {
        key: "AKIDPROXYTEST0002",
        secret,
        session_token: None,
    };
    let server = McpServer::start(ServerAuth::SigV4(
        signing.verifier("eu-west-1", "bedrock-agentcore"),
        "/eu-west-1/bedrock-agentcore/aws4_request",
    ))
    .await;
    // A loopback URL names no region: --region does.
    let url = format!("{}/mcp", server.base);
    let mut proxy = Proxy::start_with(
        &["--gateway-url", &url, "--region", "eu-west-1"],
        &signing.env(),
    );
    run_session(&mut proxy, true).await;
    let proxy = proxy.closed_cleanly("nothing more").await;
    let statuses: Vec<u16> = server.seen().iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [200, 202, 200, 200, 200, 200],
        "stderr:\n{}",
        proxy.stderr()
    );
    let stderr = proxy.stderr();
    assert!(
        stderr.contains("region=eu-west-1 signing_name=bedrock-agentcore auth=SigV4"),
        "{stderr}"
    );
    assert!(!stderr.contains(secret));
}

// ---------------------------------------------------------------------------------------------
// The session lifecycle, on the real clock: cold starts waited out, and an MCP session that
// outlives the server's (a microVM replaced, a session expired), for MCP clients over stdio and
// over --listen. Every call answered, none run twice, the client's session id never changes.

/// A `tools/call` answer of the emulator: one text, no error.
fn tool_answer(id: u64, text: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": false}
    })
}

/// A tool call: its JSON-RPC id, the tool, its arguments, and the text its answer must carry.
type Step = (u64, &'static str, Value, &'static str);

/// Each call in turn over stdio: each answered exactly, in the usual time.
async fn stdio_calls(proxy: &mut Proxy, steps: Vec<Step>) {
    for (id, tool, arguments, text) in steps {
        proxy.send(&call(id, tool, arguments));
        let answer = proxy.next().await;
        assert_eq!(answer, tool_answer(id, text), "{tool} #{id}");
    }
}

/// Each call in turn over HTTP: each answered 200 with exactly its result, and no
/// `Mcp-Session-Id` (only an `initialize` answer names one); the answers, kept in `seen`.
async fn http_calls(client: &HttpClient, steps: Vec<Step>, seen: &mut Vec<Answer>) {
    for (id, tool, arguments, text) in steps {
        let answer = client.post(&call(id, tool, arguments)).await;
        assert_eq!(answer.status, 200, "{tool} #{id}: {answer:?}");
        assert_eq!(answer.message(), tool_answer(id, text), "{tool} #{id}");
        assert_eq!(answer.header("mcp-session-id"), None, "{answer:?}");
        seen.push(answer);
    }
}

/// Waits until the emulator has received `count` requests of the JSON-RPC `method`: a
/// notification has no answer to wait for, and the stdio proxy sends concurrently.
async fn until_received(emulator: &Emulator, method: &str, count: usize) {
    let deadline = Instant::now() + LINE_TIMEOUT;
    loop {
        let audit = emulator.audit();
        let received = audit
            .received
            .iter()
            .filter(|r| r.method.as_deref() == Some(method))
            .count();
        if received >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{received} of {count} {method}: {:?}",
            audit.received
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every request the emulator received, one line each: the JSON-RPC method and id (or the
/// HTTP method and the operation), the MCP session it named (`A`, `B`, … in the order the ids
/// first appeared; `-` for none) and, at a runtime, its runtime session (`r1`, `r2`, …).
fn received_lines(audit: &Audit) -> Vec<String> {
    fn label(seen: &mut Vec<String>, id: &str) -> usize {
        seen.iter().position(|s| s == id).unwrap_or_else(|| {
            seen.push(id.to_owned());
            seen.len() - 1
        })
    }
    let (mut mcp, mut runtime) = (Vec::new(), Vec::new());
    audit
        .received
        .iter()
        .map(|r| {
            let what = match (&r.method, &r.id) {
                (Some(method), Some(id)) => format!("{method} #{id}"),
                (Some(method), None) => method.clone(),
                (None, _) => format!(
                    "{} {}",
                    r.http_method,
                    r.operation.as_deref().unwrap_or("?")
                ),
            };
            let session = r.mcp_session_id.as_deref().map_or("-".to_owned(), |id| {
                char::from(b'A' + label(&mut mcp, id) as u8).to_string()
            });
            match r.runtime_session_id.as_deref() {
                Some(id) => format!("{what} {session} r{}", label(&mut runtime, id) + 1),
                None => format!("{what} {session}"),
            }
        })
        .collect()
}

/// [`received_lines`], each run of one line (the busy refusals of a cold start) folded into
/// one.
fn trail(audit: &Audit) -> Vec<String> {
    let mut lines = received_lines(audit);
    lines.dedup();
    lines
}

/// How often `line` of [`received_lines`] was received.
fn times_received(audit: &Audit, line: &str) -> usize {
    received_lines(audit).iter().filter(|l| *l == line).count()
}

/// The MCP session ids requests named, in the order they first appeared.
fn mcp_session_ids(audit: &Audit) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for id in audit
        .received
        .iter()
        .filter_map(|r| r.mcp_session_id.clone())
    {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

fn lines(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|l| (*l).to_owned()).collect()
}

/// The calls of a session before its server loses it.
fn before_the_loss() -> Vec<Step> {
    vec![
        (2, "add", json!({"a": 2, "b": 3}), "5"),
        (3, "counter", json!({}), "1"),
        (
            4,
            "echo",
            json!({"text": "before the session was lost"}),
            "before the session was lost",
        ),
    ]
}

/// The calls after the first recovery (#5, `counter`, met the loss).
/// The calls after the MCP session expired (the microVM kept).
fn after_the_expiry() -> Vec<Step> {
    vec![
        (9, "counter", json!({}), "4"),
        (
            10,
            "echo",
            json!({"text": "after the expiry"}),
            "after the expiry",
        ),
    ]
}

fn after_the_loss() -> Vec<Step> {
    vec![
        (6, "add", json!({"a": 40, "b": 2}), "42"),
        (
            7,
            "echo",
            json!({"text": "in the new session"}),
            "in the new session",
        ),
        (8, "counter", json!({}), "3"),
    ]
}

/// What ran of the calls above, #9 (`counter`, after the second loss) and #10 (`echo`)
/// included: each once.
const RAN: [(&str, u64); 9] = [
    ("add", 2),
    ("counter", 3),
    ("echo", 4),
    ("counter", 5),
    ("add", 6),
    ("echo", 7),
    ("counter", 8),
    ("counter", 9),
    ("echo", 10),
];

/// What a runtime received of the session above, the first request of each phase folded with
/// its busy refusals: one runtime session throughout; the MCP session lost twice (a new
/// microVM, then an expiry), each time opened again with the remembered `initialize` (#1) and
/// `notifications/initialized`, and the call that met the 404 sent again once.
fn runtime_trail() -> Vec<String> {
    lines(&[
        "initialize #1 - r1",
        "notifications/initialized A r1",
        "tools/call #2 A r1",
        "tools/call #3 A r1",
        "tools/call #4 A r1",
        // The microVM ended: a cold start (busy refusals), then the new MCP server's 404.
        "tools/call #5 A r1",
        "initialize #1 - r1",
        "notifications/initialized B r1",
        "tools/call #5 B r1",
        "tools/call #6 B r1",
        "tools/call #7 B r1",
        "tools/call #8 B r1",
        // The MCP session expired: the 404 at once.
        "tools/call #9 B r1",
        "initialize #1 - r1",
        "notifications/initialized C r1",
        "tools/call #9 C r1",
        "tools/call #10 C r1",
    ])
}

/// The counts a runtime's audit must show after the session above.
fn assert_runtime_audit(audit: &Audit) {
    // One runtime session, two microVMs (the first cold start, the one after the first ended).
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
    assert_eq!(audit.microvms_started, 2, "{audit:?}");
    // The client's initialize, and one re-initialize for each loss.
    assert_eq!(audit.mcp_sessions_started, 3, "{audit:?}");
    assert_eq!(audit.mcp_sessions_not_found, 2, "{audit:?}");
    assert_eq!(audit.mcp_session_refusals, 2, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    assert_eq!(audit.executions_of("counter"), 4, "{audit:?}");
    assert_eq!(audit.executions_of("add"), 2, "{audit:?}");
    assert_eq!(audit.executions_of("echo"), 3, "{audit:?}");
    ran_once_each(audit, &RAN);
    // #5 met the cold start's refusals (at least two: waits of at most 2 s) and then the 404;
    // #9 met the 404 alone.
    assert!(
        times_received(audit, "tools/call #5 A r1") >= 3,
        "{audit:?}"
    );
    assert_eq!(times_received(audit, "tools/call #5 B r1"), 1, "{audit:?}");
    assert_eq!(times_received(audit, "tools/call #9 B r1"), 1, "{audit:?}");
    assert_eq!(times_received(audit, "tools/call #9 C r1"), 1, "{audit:?}");
}

/// The stdio proxy at a runtime whose microVMs provision for `provisioning`, refusing in
/// `form` meanwhile: the session's first cold start, its microVM replaced mid-session (a
/// cold start again, then the 404 of a server that never knew the session), then its MCP
/// session expired.
async fn a_stdio_session_outlives_its_microvm_and_its_mcp_session(
    form: BusyForm,
    provisioning: Duration,
) {
    let emulator = cold_stateful_runtime(provisioning, form).await;
    let mut proxy = Proxy::start(&emulator, &["--stop-session-on-exit"]);

    // The runtime session's first microVM provisions: initialize is refused until it is up.
    let sent = Instant::now();
    proxy.send(&initialize(1));
    let answer = proxy.next_within(COLD_START_TIMEOUT).await;
    let waited = sent.elapsed();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-06-18",
        "{answer}"
    );
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "agentcore-tower-emulator",
        "{answer}"
    );
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(waited >= provisioning, "{waited:?}");
    let audit = emulator.audit();
    assert!(audit.busy_refusals >= 2, "{audit:?}");
    assert_eq!(
        (audit.microvms_started, audit.mcp_sessions_started),
        (1, 1),
        "{audit:?}"
    );
    proxy.send(&initialized());
    until_received(&emulator, "notifications/initialized", 1).await;
    stdio_calls(&mut proxy, before_the_loss()).await;

    // The microVM ends (its idle timeout, its lifetime): the next call meets a cold start, then
    // a server that does not know the session; the proxy waits, opens a new session, and
    // sends the call again — `counter` runs once.
    let refused = emulator.audit().busy_refusals;
    assert_eq!(emulator.end_microvms(), 1);
    let sent = Instant::now();
    proxy.send(&call(5, "counter", json!({})));
    let answer = proxy.next_within(COLD_START_TIMEOUT).await;
    let waited = sent.elapsed();
    assert_eq!(answer, tool_answer(5, "2"), "stderr:\n{}", proxy.stderr());
    assert!(
        waited >= provisioning && waited < 2 * provisioning,
        "one cold start waited out: {waited:?}"
    );
    assert!(emulator.audit().busy_refusals >= refused + 2);
    stdio_calls(&mut proxy, after_the_loss()).await;

    // The MCP session expires (the microVM stays): recovered at once.
    emulator.expire_mcp_sessions();
    stdio_calls(&mut proxy, after_the_expiry()).await;

    let proxy = proxy.closed_cleanly("nothing more").await;
    let audit = emulator.audit();
    let mut expected = runtime_trail();
    expected.push("POST stopruntimesession - r1".into());
    assert_eq!(trail(&audit), expected, "stderr:\n{}", proxy.stderr());
    assert_runtime_audit(&audit);
    assert_eq!(audit.sessions_stopped, 1, "{audit:?}");
    assert_eq!(emulator.counter(), 4);
    // One line per request, none for the notification.
    assert_eq!(proxy.stdout_seen.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_12s_cold_start_in_the_409_form_and_a_replaced_microvm_lose_no_call() {
    a_stdio_session_outlives_its_microvm_and_its_mcp_session(
        BusyForm::Conflict409,
        Duration::from_secs(12),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_an_8s_cold_start_in_the_jsonrpc_200_form_and_a_replaced_microvm_lose_no_call() {
    a_stdio_session_outlives_its_microvm_and_its_mcp_session(
        BusyForm::JsonRpc200,
        Duration::from_secs(8),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_12s_cold_start_and_a_replaced_microvm_keep_the_clients_session_id() {
    let provisioning = Duration::from_secs(12);
    let emulator = cold_stateful_runtime(provisioning, BusyForm::Conflict409).await;
    let listening = Listening::start(&emulator, &[]).await;
    let mut client = HttpClient::new(&listening.url, None);
    client.timeout = COLD_START_TIMEOUT;

    // The MCP session's runtime session cold-starts: initialize waits it out.
    let sent = Instant::now();
    let opened = client.open().await;
    let waited = sent.elapsed();
    assert_eq!(opened["id"], 1, "{opened}");
    assert_eq!(
        opened["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    assert!(waited >= provisioning, "{waited:?}");
    let held = client.session.clone().unwrap();
    let mut seen = Vec::new();
    http_calls(&client, before_the_loss(), &mut seen).await;
    assert_eq!(
        mcp_session_ids(&emulator.audit()),
        std::slice::from_ref(&held)
    );

    // A new microVM: a cold start, then the 404; the client still sends the id it holds.
    assert_eq!(emulator.end_microvms(), 1);
    let sent = Instant::now();
    let answer = client.post(&call(5, "counter", json!({}))).await;
    let waited = sent.elapsed();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.message(),
        tool_answer(5, "2"),
        "stderr:\n{}",
        listening.proxy.stderr()
    );
    assert_eq!(answer.header("mcp-session-id"), None, "{answer:?}");
    seen.push(answer);
    http_calls(&client, after_the_loss(), &mut seen).await;

    // The MCP session expires.
    emulator.expire_mcp_sessions();
    http_calls(&client, after_the_expiry(), &mut seen).await;
    assert_eq!(client.session.as_deref(), Some(held.as_str()));

    // The client ends its session with the id it holds: the runtime session is stopped.
    let ended = client.send("DELETE", None, &[]).await;
    assert_eq!(ended.status, 200, "{ended:?}");
    let audit = emulator.audit();
    let mut expected = runtime_trail();
    expected.push("POST stopruntimesession - r1".into());
    assert_eq!(
        trail(&audit),
        expected,
        "one cold start per lost microVM (waited {waited:?}); stderr:\n{}",
        listening.proxy.stderr()
    );
    assert_runtime_audit(&audit);
    assert_eq!(audit.sessions_stopped, 1, "{audit:?}");
    assert!(waited < 2 * provisioning, "{waited:?}");

    // The ids the server issued after the client's never reached the client.
    assert_only_the_held_id_was_seen(&audit, &held, &seen);

    listening.terminated_cleanly().await;
}

/// A gateway's session lost twice mid-session (one expired, then all): the stdio proxy
/// opens a new one each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_gateway_session_that_expires_mid_session_is_opened_again_and_no_tool_runs_twice()
 {
    let emulator = start_emulator(EmulatorConfig::default().gateway(true)).await;
    let url = emulator.gateway_url();
    let mut proxy = Proxy::start_signed(
        &emulator,
        &["--gateway-url", &url, "--region", "us-east-1"],
        &[],
    );
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "agentcore-tower-emulator",
        "{answer}"
    );
    proxy.send(&initialized());
    until_received(&emulator, "notifications/initialized", 1).await;
    stdio_calls(&mut proxy, before_the_loss()).await;

    // The gateway ends the session (its timeout): the next call meets its 404.
    let first = mcp_session_ids(&emulator.audit());
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(emulator.expire_mcp_session(&first[0]));
    stdio_calls(&mut proxy, vec![(5, "counter", json!({}), "2")]).await;
    stdio_calls(&mut proxy, after_the_loss()).await;
    emulator.expire_mcp_sessions();
    stdio_calls(&mut proxy, after_the_expiry()).await;

    // At exit the proxy ends the session it holds: the gateway's live one.
    let proxy = proxy.closed_cleanly("nothing more").await;
    let audit = emulator.audit();
    assert_eq!(
        trail(&audit),
        gateway_trail_over_stdio(),
        "stderr:\n{}",
        proxy.stderr()
    );
    assert_gateway_audit(&audit, gateway_trail_over_stdio());
    assert_eq!(emulator.counter(), 4);
    assert_eq!(proxy.stdout_seen.len(), 10);
}

/// What a gateway received of the session above, each request once.
fn gateway_trail() -> Vec<String> {
    lines(&[
        "initialize #1 -",
        "notifications/initialized A",
        "tools/call #2 A",
        "tools/call #3 A",
        "tools/call #4 A",
        "tools/call #5 A",
        "initialize #1 -",
        "notifications/initialized B",
        "tools/call #5 B",
        "tools/call #6 B",
        "tools/call #7 B",
        "tools/call #8 B",
        "tools/call #9 B",
        "initialize #1 -",
        "notifications/initialized C",
        "tools/call #9 C",
        "tools/call #10 C",
        "DELETE mcp C",
    ])
}

/// An emulated runtime whose sessions cold-start for `provisioning` (refused in `form`), with
/// a stateful MCP server.
async fn cold_stateful_runtime(provisioning: Duration, form: BusyForm) -> Emulator {
    start_emulator(
        EmulatorConfig::default()
            .provisioning(provisioning)
            .busy_form(form)
            .stateful(true),
    )
    .await
}

/// The server issued three MCP session ids, the client's first: the two it issued later, in
/// place of lost sessions, appear in no answer the client got.
fn assert_only_the_held_id_was_seen(audit: &Audit, held: &str, seen: &[Answer]) {
    let ids = mcp_session_ids(audit);
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[0], held);
    for answer in seen {
        let text = format!(
            "{:?} {}",
            answer.headers,
            String::from_utf8_lossy(&answer.body)
        );
        assert!(!text.contains(&ids[1]) && !text.contains(&ids[2]), "{text}");
    }
}

/// The same over stdio, where the proxy tries the server's stream once the session is
/// initialized (the emulated gateway answers 405: none offered).
fn gateway_trail_over_stdio() -> Vec<String> {
    let mut trail = gateway_trail();
    trail.insert(2, "GET mcp A".into());
    trail
}

fn assert_gateway_audit(audit: &Audit, trail: Vec<String>) {
    assert_eq!(received_lines(audit), trail, "each request once");
    assert_eq!(audit.mcp_sessions_started, 3, "{audit:?}");
    assert_eq!(audit.mcp_sessions_not_found, 2, "{audit:?}");
    assert_eq!(audit.mcp_session_refusals, 2, "{audit:?}");
    assert_eq!(audit.mcp_sessions_ended, 1, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    assert_eq!(audit.busy_refusals, 0, "{audit:?}");
    assert_eq!(audit.executions_of("counter"), 4, "{audit:?}");
    ran_once_each(audit, &RAN);
}

/// The same over --listen: the client holds the first id throughout, and ends the session
/// with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_gateway_session_that_expires_mid_session_keeps_the_clients_session_id() {
    let emulator = start_emulator(EmulatorConfig::default().gateway(true)).await;
    let url = emulator.gateway_url();
    let args = listen_args(&["--gateway-url", &url, "--region", "us-east-1"]);
    let listening = Listening::of(Proxy::start_signed(&emulator, &args, &[])).await;
    let client = listening.client().await;
    let held = client.session.clone().unwrap();
    let mut seen = Vec::new();
    http_calls(&client, before_the_loss(), &mut seen).await;

    assert!(emulator.expire_mcp_session(&held));
    http_calls(&client, vec![(5, "counter", json!({}), "2")], &mut seen).await;
    http_calls(&client, after_the_loss(), &mut seen).await;
    // The client's id is no longer the server's: expiring it expires nothing.
    assert!(!emulator.expire_mcp_session(&held));
    emulator.expire_mcp_sessions();
    http_calls(&client, after_the_expiry(), &mut seen).await;
    let ended = client.send("DELETE", None, &[]).await;
    assert_eq!(ended.status, 200, "{ended:?}");

    let audit = emulator.audit();
    assert_eq!(
        trail(&audit),
        gateway_trail(),
        "stderr:\n{}",
        listening.proxy.stderr()
    );
    assert_gateway_audit(&audit, gateway_trail());
    assert_only_the_held_id_was_seen(&audit, &held, &seen);
    listening.terminated_cleanly().await;
}

/// rmcp, the official Rust MCP SDK, as the client of `--listen` (its Streamable HTTP client,
/// over plain hyper through `agentcore_tower::rmcp::TowerClient`; the library's feature `rmcp` is
/// on in this crate's dev-dependencies).
mod with_rmcp {
    use super::*;

    use agentcore_tower::rmcp::TowerClient;
    use bytes::Bytes;
    use http_body_util::Full;
    use rmcp::ServiceExt as _;
    use rmcp::model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    };

    /// One request rmcp sent, and its answer, as they crossed the wire to the proxy.
    #[derive(Debug)]
    struct Wire {
        method: String,
        /// The JSON-RPC method of a POST.
        rpc: Option<String>,
        /// The request's `Mcp-Session-Id`.
        sent_with: Option<String>,
        status: u16,
        /// The answer's `Mcp-Session-Id`.
        answered_with: Option<String>,
    }

    type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

    /// Calls `tool` and checks its one text (what crossed the wire so far, if it fails).
    async fn call_tool(
        client: &Client,
        wire: &Mutex<Vec<Wire>>,
        tool: &'static str,
        arguments: Value,
        text: &str,
    ) {
        let mut params = CallToolRequestParams::new(tool);
        if let Value::Object(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let result = client
            .call_tool(params)
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}; the wire: {:#?}", wire.lock().unwrap()));
        let texts: Vec<&str> = result
            .content
            .iter()
            .map(|c| c.as_text().expect("text content").text.as_str())
            .collect();
        assert_eq!(texts, [text], "{tool}");
        assert_eq!(result.is_error, Some(false), "{tool}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rmcp_over_listen_never_sees_a_12s_cold_start_or_a_lost_session() {
        let provisioning = Duration::from_secs(12);
        let emulator = cold_stateful_runtime(provisioning, BusyForm::JsonRpc200).await;
        let listening = Listening::start(&emulator, &[]).await;
        let wire: Arc<Mutex<Vec<Wire>>> = Arc::default();
        let http = hyper_client();
        let tap = {
            let wire = wire.clone();
            tower::service_fn(move |request: http::Request<Full<Bytes>>| {
                let (http, wire) = (http.clone(), wire.clone());
                async move {
                    use http_body_util::BodyExt;
                    let header = |headers: &http::HeaderMap| header_of(headers, "mcp-session-id");
                    let body = request.body().clone().collect().await.unwrap().to_bytes();
                    let rpc = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|m| m["method"].as_str().map(str::to_owned));
                    let (method, sent_with) =
                        (request.method().to_string(), header(request.headers()));
                    let response = http.request(request).await?;
                    wire.lock().unwrap().push(Wire {
                        method,
                        rpc,
                        sent_with,
                        status: response.status().as_u16(),
                        answered_with: header(response.headers()),
                    });
                    Ok::<_, hyper_util::client::legacy::Error>(response)
                }
            })
        };
        let transport = TowerClient::new(tap).into_transport(listening.url.clone());

        // initialize waits out the cold start; rmcp sees only its answer.
        let sent = Instant::now();
        let client: Client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("stdio-proxy-test-rmcp", "1"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_06_18)
        .serve(transport)
        .await
        .unwrap();
        let waited = sent.elapsed();
        assert!(waited >= provisioning, "{waited:?}");
        let server = client.peer_info().expect("initialised");
        assert_eq!(
            server.server_info.as_ref().map(|i| i.name.as_str()),
            Some("agentcore-tower-emulator")
        );
        call_tool(&client, &wire, "add", json!({"a": 2, "b": 3}), "5").await;
        call_tool(&client, &wire, "counter", json!({}), "1").await;

        // A new microVM: a cold start and the 404, both behind the proxy.
        assert_eq!(emulator.end_microvms(), 1);
        let sent = Instant::now();
        call_tool(&client, &wire, "counter", json!({}), "2").await;
        let waited = sent.elapsed();
        call_tool(
            &client,
            &wire,
            "echo",
            json!({"text": "in the new session"}),
            "in the new session",
        )
        .await;
        // The MCP session expires.
        emulator.expire_mcp_sessions();
        call_tool(&client, &wire, "counter", json!({}), "3").await;
        call_tool(&client, &wire, "add", json!({"a": 40, "b": 2}), "42").await;
        client.cancel().await.unwrap();

        // rmcp initialized once and sent every request with the id it was given, and it never
        // met a 404.
        let wire = std::mem::take(&mut *wire.lock().unwrap());
        let initialize: Vec<&Wire> = wire
            .iter()
            .filter(|w| w.rpc.as_deref() == Some("initialize"))
            .collect();
        assert_eq!(initialize.len(), 1, "{wire:?}");
        let held = initialize[0].answered_with.clone().expect("a session id");
        for w in wire
            .iter()
            .filter(|w| w.rpc.as_deref() != Some("initialize"))
        {
            assert_eq!(w.sent_with.as_deref(), Some(held.as_str()), "{wire:?}");
            assert!(
                w.answered_with.is_none() || w.answered_with == Some(held.clone()),
                "{wire:?}"
            );
            assert_ne!(w.status, 404, "{wire:?}");
        }
        let posts: Vec<(Option<&str>, u16)> = wire
            .iter()
            .filter(|w| w.method == "POST")
            .map(|w| (w.rpc.as_deref(), w.status))
            .collect();
        let mut expected = vec![
            (Some("initialize"), 200),
            (Some("notifications/initialized"), 202),
        ];
        expected.extend([(Some("tools/call"), 200); 6]);
        assert_eq!(posts, expected, "{wire:?}");
        // Its DELETE ended the session: the runtime session is stopped.
        let deletes: Vec<u16> = wire
            .iter()
            .filter(|w| w.method == "DELETE")
            .map(|w| w.status)
            .collect();
        assert_eq!(deletes, [200], "{wire:?}");

        let audit = emulator.audit();
        let ids = mcp_session_ids(&audit);
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert_eq!(ids[0], held);
        assert_eq!(
            trail(&audit),
            lines(&[
                "initialize #0 - r1",
                "notifications/initialized A r1",
                "tools/call #1 A r1",
                "tools/call #2 A r1",
                "tools/call #3 A r1",
                "initialize #0 - r1",
                "notifications/initialized B r1",
                "tools/call #3 B r1",
                "tools/call #4 B r1",
                "tools/call #5 B r1",
                "initialize #0 - r1",
                "notifications/initialized C r1",
                "tools/call #5 C r1",
                "tools/call #6 C r1",
                "POST stopruntimesession - r1",
            ]),
            "one cold start per lost microVM (waited {waited:?}); stderr:\n{}",
            listening.proxy.stderr()
        );
        assert!(waited < 2 * provisioning, "{waited:?}");
        assert_eq!(
            (audit.sessions_started, audit.microvms_started),
            (1, 2),
            "{audit:?}"
        );
        assert_eq!(audit.mcp_sessions_started, 3, "{audit:?}");
        assert_eq!(audit.mcp_sessions_not_found, 2, "{audit:?}");
        assert_eq!(audit.sessions_stopped, 1, "{audit:?}");
        assert_eq!(audit.executions_of("counter"), 3, "{audit:?}");
        assert_eq!(emulator.counter(), 3);
        assert!(
            audit.executions_by_id.values().all(|n| *n == 1),
            "{audit:?}"
        );
        assert_eq!(audit.executions_by_id.len(), 6, "{audit:?}");

        listening.terminated_cleanly().await;
    }
}
