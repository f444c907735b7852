//! What the proxy's tests share: the built binary run as a child process (JSON-RPC lines in on
//! stdin, one JSON line per answer out on stdout), the messages a client sends, a scratch
//! directory; a client of `--listen` ([`listen`]) and what the in-test servers share
//! ([`serve`]).
#![allow(dead_code)]

mod listen;
mod serve;
mod temp_dir;

pub use listen::*;
pub use serve::*;
pub use temp_dir::TempDir;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower::contract::PlatformError;
use agentcore_tower_emulator::{
    Audit, Emulator, EmulatorConfig, Fault, PlatformForm, SignatureVerifier,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long any one stdout line may take.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the proxy may take to exit once stdin is closed.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// A well-formed runtime ARN, for arguments that are refused before anything is sent.
pub const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123";
/// A runtime ARN the emulator does not know.
pub const NOBODY: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/nobody-AbC123";

/// The proxy's binary, which cargo builds for this crate's tests.
pub fn proxy_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"))
}

/// The emulator with `config`, started.
pub async fn start_emulator(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
}

/// The proxy as a child process.
pub struct Proxy {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    /// stdout, line by line (`None` once it closed).
    pub lines: mpsc::UnboundedReceiver<String>,
    pub stdout_closed: bool,
    pub stdout_seen: Vec<String>,
    pub stderr: Arc<Mutex<String>>,
}

impl Proxy {
    /// Starts the proxy for `emulator`'s runtime ([`runtime_args`]) with the emulator's
    /// credentials and no real AWS configuration.
    pub fn start(emulator: &Emulator, args: &[&str]) -> Proxy {
        Self::start_signed(emulator, &strs(&runtime_args(emulator, args)), &[])
    }

    /// Starts the proxy for `emulator`'s runtime ([`runtime_args`]) with, of the AWS
    /// variables, only the region and `env` (no credentials of the emulator's).
    pub fn start_at(emulator: &Emulator, args: &[&str], env: &[(&str, &str)]) -> Proxy {
        Self::start_with(&strs(&runtime_args(emulator, args)), env)
    }

    /// Starts the proxy with exactly these arguments, the emulator's credentials, then `env`.
    pub fn start_signed(emulator: &Emulator, args: &[&str], env: &[(&str, &str)]) -> Proxy {
        let credentials = credentials_env(emulator);
        let mut all = pairs(&credentials);
        all.extend_from_slice(env);
        Self::start_with(args, &all)
    }

    /// Starts the proxy with exactly these arguments and, of the AWS variables, only the
    /// region, `env` and what keeps real configuration out.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Proxy {
        Self::spawn(command(args, env))
    }

    /// Starts the proxy in front of the MCP server at `url` with the bearer token `token` (from
    /// the variable `MCP_TEST_TOKEN`), `args` after.
    pub fn for_url(url: &str, token: &str, args: &[&str]) -> Proxy {
        let mut all = vec!["--url", url, "--bearer-token-env", "MCP_TEST_TOKEN"];
        all.extend_from_slice(args);
        Self::start_with(&all, &[("MCP_TEST_TOKEN", token)])
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// All the proxy wrote: its stdout lines so far, then its log.
    pub fn everything(&self) -> String {
        format!("{}\n{}", self.stdout_seen.join("\n"), self.stderr())
    }

    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next `count` messages on stdout, one of them the answer to `id`: that answer, and
    /// the others in the order they came.
    pub async fn answer_among(&mut self, id: u64, count: usize) -> (Value, Vec<Value>) {
        let mut answer = None;
        let mut others = Vec::new();
        for _ in 0..count {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                answer = Some(message);
            } else {
                others.push(message);
            }
        }
        let answer = answer.unwrap_or_else(|| panic!("no answer to {id} among {others:?}"));
        (answer, others)
    }

    /// The next stdout line, which must be one JSON value; panics after [`LINE_TIMEOUT`].
    pub async fn next(&mut self) -> Value {
        self.next_within(LINE_TIMEOUT).await
    }

    /// The next stdout line, which must be one JSON value; panics after `limit`.
    pub async fn next_within(&mut self, limit: Duration) -> Value {
        match tokio::time::timeout(limit, self.lines.recv()).await {
            Ok(Some(line)) => self.parse(line),
            Ok(None) => panic!("stdout closed; stderr:\n{}", self.stderr()),
            Err(_) => panic!(
                "no stdout line within {limit:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    pub fn parse(&mut self, line: String) -> Value {
        let value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "stdout line is not JSON ({e}): {line:?}; stderr:\n{}",
                self.stderr()
            )
        });
        self.stdout_seen.push(line);
        value
    }

    /// initialize, then notifications/initialized.
    pub async fn open(&mut self) {
        self.send(&initialize(1));
        let answer = self.next().await;
        assert_eq!(answer["id"], 1, "{answer}");
        assert!(answer.get("result").is_some(), "{answer}");
        self.send(&initialized());
    }

    /// Closes stdin: nothing more comes on stdout (`why` says what that means) and the proxy
    /// exits 0.
    pub async fn closed_cleanly(self, why: &str) -> Proxy {
        let (rest, status, proxy) = self.close().await;
        assert_eq!(rest, Vec::<Value>::new(), "{why}");
        assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
        proxy
    }

    /// The URL a proxy started with `--listen 127.0.0.1:0` logs, once it logged it; panics
    /// after [`LINE_TIMEOUT`].
    pub async fn listen_url(&self) -> String {
        let deadline = Instant::now() + LINE_TIMEOUT;
        loop {
            let stderr = self.stderr();
            if let Some(at) = stderr.find("listening on http://") {
                let rest = &stderr[at + "listening on ".len()..];
                if let Some(end) = rest.find(char::is_whitespace) {
                    return rest[..end].to_owned();
                }
            }
            assert!(
                Instant::now() < deadline,
                "the proxy did not log its URL; stderr:\n{stderr}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes stdin; returns the lines written after that, and the exit status.
    pub async fn close(mut self) -> (Vec<Value>, ExitStatus, Proxy) {
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
        let status = self.exited_by(deadline, "stdin closed").await;
        (rest, status, self)
    }

    /// The proxy's exit status once it exited; panics after [`EXIT_TIMEOUT`] (`after` says
    /// what should have ended it).
    pub async fn exited(&mut self, after: &str) -> ExitStatus {
        self.exited_by(Instant::now() + EXIT_TIMEOUT, after).await
    }

    /// The proxy's exit status once it exited; panics at `deadline`.
    pub async fn exited_by(&mut self, deadline: Instant, after: &str) -> ExitStatus {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the proxy did not exit {EXIT_TIMEOUT:?} after {after}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends the proxy SIGTERM.
    #[cfg(unix)]
    pub fn sigterm(&self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
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
/// A client of the proxy: a request in, its answer out.
pub trait Client {
    async fn ask(&mut self, request: Value) -> Value;
}

/// Over stdio: a line in, a line out.
impl Client for Proxy {
    async fn ask(&mut self, request: Value) -> Value {
        self.send(&request);
        let answer = self.next().await;
        assert_eq!(answer["id"], request["id"], "{answer}\n{}", self.stderr());
        answer
    }
}

pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
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

/// AgentCore's refusal `error`, in its HTTP form, as the emulator's fault.
pub fn http_refusal(error: PlatformError) -> Fault {
    Fault::Platform {
        error,
        form: PlatformForm::Http,
    }
}

/// Runs `command` (the proxy's, from [`command`]) to its end with nothing on stdin; it must
/// exit with `code`: what it wrote on stdout, and on stderr.
pub fn run(mut command: Command, code: i32) -> (Vec<u8>, String) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("the proxy runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let args: Vec<_> = command.get_args().collect();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: stdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    (output.stdout, stderr)
}

/// The emulator's runtime: `--runtime-arn`, `args`, then `--endpoint` unless `args` name one.
pub fn runtime_args(emulator: &Emulator, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "--runtime-arn".to_owned(),
        emulator.runtime_arn().to_owned(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    if !args.contains(&"--endpoint") {
        all.extend(["--endpoint".to_owned(), emulator.endpoint()]);
    }
    all
}

/// The emulator's credentials, as the proxy's environment.
pub fn credentials_env(emulator: &Emulator) -> Vec<(&'static str, String)> {
    let credentials = emulator.credentials();
    vec![
        ("AWS_ACCESS_KEY_ID", credentials.access_key_id().to_owned()),
        (
            "AWS_SECRET_ACCESS_KEY",
            credentials.secret_access_key().to_owned(),
        ),
        (
            "AWS_SESSION_TOKEN",
            credentials.session_token().unwrap().to_owned(),
        ),
    ]
}

/// AWS credentials of a test's own, for an in-test server that checks SigV4 signatures.
pub struct SigningKey {
    pub key: &'static str,
    pub secret: &'static str,
    pub session_token: Option<&'static str>,
}

impl SigningKey {
    /// A verifier of signatures by this key for `region` and `service`.
    pub fn verifier(&self, region: &str, service: &str) -> SignatureVerifier {
        let credentials = aws_credential_types::Credentials::new(
            self.key,
            self.secret,
            self.session_token.map(str::to_owned),
            None,
            "t",
        );
        SignatureVerifier::new(region, service).with_credentials(credentials)
    }

    /// The key as the proxy's environment.
    pub fn env(&self) -> Vec<(&'static str, &'static str)> {
        let mut env = vec![
            ("AWS_ACCESS_KEY_ID", self.key),
            ("AWS_SECRET_ACCESS_KEY", self.secret),
        ];
        env.extend(self.session_token.map(|token| ("AWS_SESSION_TOKEN", token)));
        env
    }
}

/// `args`, then `--header` with each of `headers`.
pub fn header_args(args: &[&str], headers: &[impl AsRef<str>]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    for header in headers {
        all.extend(["--header".to_owned(), header.as_ref().to_owned()]);
    }
    all
}

/// Variables as [`command`] takes them.
pub fn pairs<'a>(env: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    env.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

/// Arguments as [`command`] takes them.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub fn initialize(id: u64) -> Value {
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

pub fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

pub fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// MCP's revision without `initialize`, whose requests name their version in `_meta`.
pub const MODERN: &str = "2026-07-28";

/// A request of [`MODERN`]: its version and the client's capabilities in `_meta` (with the
/// tasks extension when `tasks`).
pub fn modern(id: u64, method: &str, mut params: Value, tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    request(id, method, params)
}

/// Moves `emulator`'s jobs clock ([`Emulator::advance_jobs`]) 80 s every 100 ms of wall time
/// while it lives: a `long_job` of 40 minutes ends in 3 s, for a client in real time.
pub struct JobsClock(tokio::task::JoinHandle<()>);

impl JobsClock {
    pub fn start(emulator: &Arc<Emulator>) -> JobsClock {
        let emulator = emulator.clone();
        JobsClock(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                emulator.advance_jobs(Duration::from_secs(80));
            }
        }))
    }
}

impl Drop for JobsClock {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Each of these tool calls ran exactly once, and nothing else ran.
pub fn ran_once_each(audit: &Audit, calls: &[(&str, u64)]) {
    let expected: std::collections::HashMap<(String, String), u64> = calls
        .iter()
        .map(|(tool, id)| (((*tool).to_owned(), id.to_string()), 1))
        .collect();
    assert_eq!(audit.executions_by_id, expected, "{audit:?}");
}

/// The tools' names in a `tools/list` answer.
pub fn tool_names(answer: &Value) -> Vec<&str> {
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tools/list answer: {answer}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

pub fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
}

/// A home whose AWS configuration has the profile `work`, of the SSO session `check-sso` whose
/// cached token expired in 2020; removed when dropped.
pub struct ExpiredSso {
    pub dir: TempDir,
    /// The configuration file.
    pub config: String,
    pub home: String,
}

impl ExpiredSso {
    pub fn new(name: &str) -> ExpiredSso {
        let dir = TempDir::new(name);
        std::fs::create_dir_all(dir.0.join(".aws/sso/cache")).unwrap();
        // The cache file of an sso-session is named by the SHA-1 of the session's name.
        dir.write(
            ".aws/sso/cache/eb14ee413f71370f02c4d13f6204a61ec4e69bb2.json",
            r#"{"accessToken": "expired-sso-access-token", "expiresAt": "2020-01-01T00:00:00Z",
            "region": "us-east-1", "startUrl": "https://example.awsapps.com/start"}"#,
        );
        let config = dir.write(
            "config",
            "[profile work]\nsso_session = check-sso\nsso_account_id = 123456789012\n\
             sso_role_name = Dev\nregion = us-east-1\n\n[sso-session check-sso]\n\
             sso_start_url = https://example.awsapps.com/start\nsso_region = us-east-1\n",
        );
        let home = dir.0.to_str().unwrap().to_owned();
        ExpiredSso { dir, config, home }
    }

    /// `HOME` and `AWS_CONFIG_FILE`, for the proxy's environment.
    pub fn env(&self) -> [(&str, &str); 2] {
        [
            ("AWS_CONFIG_FILE", self.config.as_str()),
            ("HOME", self.home.as_str()),
        ]
    }
}

impl Proxy {
    /// Starts the proxy for `emulator` as [`Proxy::start`] does, with `env` set and no `OTEL_*`
    /// variable of the tests' own environment: what turns OpenTelemetry export on is `env`'s
    /// alone.
    pub fn start_with_otel(emulator: &Emulator, args: &[&str], env: &[(&str, &str)]) -> Proxy {
        let mut command = command(&strs(&runtime_args(emulator, args)), &[]);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command
            .envs(credentials_env(emulator))
            .envs(env.iter().copied());
        Self::spawn(command)
    }

    /// Runs `command` (the proxy's, from [`command`]): its stdin kept to write to, its stdout
    /// read line by line, its stderr collected.
    pub fn spawn(mut command: Command) -> Proxy {
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
}
