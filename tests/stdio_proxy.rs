//! The `agentcore-mcp-proxy` binary, run as a subprocess against the AgentCore Runtime emulator:
//! JSON-RPC lines in on stdin, one JSON line per answer out on stdout.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower::emulator::{Emulator, EmulatorConfig, Fault};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long any one stdout line may take.
const LINE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the proxy may take to exit once stdin is closed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// A well-formed runtime ARN, for arguments that are refused before anything is sent.
const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123";

/// The proxy's binary, which cargo builds for this test (feature `proxy`).
fn proxy_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"))
}

/// The proxy as a child process.
struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    /// stdout, line by line (`None` once it closed).
    lines: mpsc::UnboundedReceiver<String>,
    stdout_closed: bool,
    stdout_seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proxy {
    /// Starts the proxy for `emulator`, with the emulator's credentials and endpoint, no real AWS
    /// configuration, and `args` after `--runtime-arn`.
    fn start(emulator: &Emulator, args: &[&str]) -> Proxy {
        let credentials = emulator.credentials();
        let env = [
            ("AWS_ACCESS_KEY_ID", credentials.access_key_id()),
            ("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key()),
            ("AWS_SESSION_TOKEN", credentials.session_token().unwrap()),
        ];
        let mut all = vec!["--runtime-arn", emulator.runtime_arn()];
        all.extend_from_slice(args);
        let endpoint = emulator.endpoint();
        if !args.contains(&"--endpoint") {
            all.extend_from_slice(&["--endpoint", &endpoint]);
        }
        Self::start_with(&all, &env)
    }

    /// Starts the proxy with exactly these arguments and, of the AWS variables, only the
    /// region, `env` and what keeps real configuration out.
    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Proxy {
        let mut command = command(args, env);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the proxy starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proxy {
            child,
            stdin,
            lines,
            stdout_closed: false,
            stdout_seen: Vec::new(),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next stdout line, which must be one JSON value; panics after [`LINE_TIMEOUT`].
    async fn next(&mut self) -> Value {
        match tokio::time::timeout(LINE_TIMEOUT, self.lines.recv()).await {
            Ok(Some(line)) => self.parse(line),
            Ok(None) => panic!("stdout closed; stderr:\n{}", self.stderr()),
            Err(_) => panic!(
                "no stdout line within {LINE_TIMEOUT:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    fn parse(&mut self, line: String) -> Value {
        let value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "stdout line is not JSON ({e}): {line:?}; stderr:\n{}",
                self.stderr()
            )
        });
        self.stdout_seen.push(line);
        value
    }

    /// Closes stdin; returns the lines written after that, and the exit status.
    async fn close(mut self) -> (Vec<Value>, ExitStatus, Proxy) {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_TIMEOUT;
        let mut rest = Vec::new();
        while !self.stdout_closed {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(line)) => {
                    let value = self.parse(line);
                    rest.push(value);
                }
                Ok(None) => self.stdout_closed = true,
                Err(_) => panic!(
                    "stdout still open {EXIT_TIMEOUT:?} after stdin closed; stderr:\n{}",
                    self.stderr()
                ),
            }
        }
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy did not exit {EXIT_TIMEOUT:?} after stdin closed; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        (rest, status, self)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // A failed test must not leave the proxy running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The proxy's command: no AWS variable from outside, no real configuration files, no instance
/// metadata; the region and `env` only.
fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(proxy_binary());
    command.args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    let nowhere = std::env::temp_dir().join("agentcore-tower-stdio-proxy-no-such-aws-config");
    command
        .env("AWS_CONFIG_FILE", &nowhere)
        .env("AWS_SHARED_CREDENTIALS_FILE", &nowhere)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "debug");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize(id: u64) -> Value {
    request(
        id,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "stdio-proxy-test", "version": "1"}
        }),
    )
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_mcp_session_goes_through_the_proxy() {
    let emulator =
        Emulator::start(EmulatorConfig::default().provisioning(Duration::from_millis(300)))
            .await
            .unwrap();
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
    let names: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo", "counter"]);

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
    let everything = format!("{}\n{}", proxy.stdout_seen.join("\n"), proxy.stderr());
    assert!(!everything.contains(credentials.secret_access_key()));
    assert!(!everything.contains(credentials.session_token().unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_answered_while_a_slow_tool_runs_and_exit_waits_for_it() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
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
    let emulator = Emulator::start(EmulatorConfig::default().sse(true))
        .await
        .unwrap();
    let credentials = emulator.credentials();
    let endpoint = emulator.endpoint();
    // The service-specific variable wins over the generic one (which leads nowhere).
    let mut proxy = Proxy::start_with(
        &["--runtime-arn", emulator.runtime_arn()],
        &[
            ("AWS_ACCESS_KEY_ID", credentials.access_key_id()),
            ("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key()),
            ("AWS_SESSION_TOKEN", credentials.session_token().unwrap()),
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

    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new());
    assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
    assert_eq!(proxy.stdout_seen.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_json_gets_a_parse_error_and_the_proxy_carries_on() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_without_a_jsonrpc_body_becomes_a_jsonrpc_error_and_no_secret_is_printed() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let credentials = emulator.credentials();
    let wrong_secret = "not-the-emulator-secret-access-key-0123456789";
    let endpoint = emulator.endpoint();
    let mut proxy = Proxy::start_with(
        &[
            "--runtime-arn",
            emulator.runtime_arn(),
            "--endpoint",
            &endpoint,
        ],
        &[
            ("AWS_ACCESS_KEY_ID", credentials.access_key_id()),
            ("AWS_SECRET_ACCESS_KEY", wrong_secret),
            ("AWS_SESSION_TOKEN", credentials.session_token().unwrap()),
        ],
    );
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
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
    assert_eq!(emulator.audit().signature_failures, 1);

    // A notification that fails has no id to answer: nothing on stdout.
    proxy.send(&initialized());
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new());
    assert_eq!(status.code(), Some(0));
    assert_eq!(emulator.audit().signature_failures, 2);

    // The 403 quotes the canonical request, session token included: redacted everywhere.
    let everything = format!("{}\n{}", proxy.stdout_seen.join("\n"), proxy.stderr());
    assert!(!everything.contains(wrong_secret));
    assert!(!everything.contains(credentials.session_token().unwrap()));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_stdio_proxy_as_the_end_of_stdin_does() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let mut proxy = Proxy::start(&emulator, &["--stop-session-on-exit"]);
    proxy.send(&initialize(1));
    assert_eq!(proxy.next().await["id"], 1);
    emulator.push_fault(Fault::Slow(Duration::from_secs(1)));
    proxy.send(&call(2, "add", json!({"a": 1, "b": 2})));
    tokio::time::sleep(Duration::from_millis(200)).await;

    // stdin stays open: the signal alone ends the run, after the call in flight.
    let pid = proxy.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let answer = proxy.next().await;
    assert_eq!(text_of(&answer), "3", "{answer}");
    let deadline = Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "no exit; stderr:\n{}",
            proxy.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
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
        let output = command(args, &[])
            .stdin(Stdio::null())
            .output()
            .expect("the proxy runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?}: stdout is for JSON-RPC only"
        );
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
        let help = command(&[flag], &[]).stdin(Stdio::null()).output().unwrap();
        assert_eq!(help.status.code(), Some(0));
        assert!(help.stderr.is_empty());
        let text = String::from_utf8(help.stdout).unwrap();
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
            "--region REGION",
            "--qualifier QUALIFIER",
            "--endpoint URL",
            "--idempotent-tool NAME",
            "--stop-session-on-exit",
        ] {
            assert!(text.contains(&format!("\n    {option}\n")), "{option}");
        }
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }
    let version = command(&["--version"], &[])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(version.stdout).unwrap(),
        format!("agentcore-mcp-proxy {}\n", env!("CARGO_PKG_VERSION"))
    );
}
