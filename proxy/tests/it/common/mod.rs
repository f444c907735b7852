//! What the proxy's tests share: the built binary run as a child process (JSON-RPC lines in on
//! stdin, one JSON line per answer out on stdout), the messages a client sends, a scratch
//! directory.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentcore_tower::emulator::Emulator;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long any one stdout line may take.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the proxy may take to exit once stdin is closed.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// A well-formed runtime ARN, for arguments that are refused before anything is sent.
pub const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123";

/// The proxy's binary, which cargo builds for this crate's tests.
pub fn proxy_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"))
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
    /// Starts the proxy for `emulator`, with the emulator's credentials and endpoint, no real AWS
    /// configuration, and `args` after `--runtime-arn`.
    pub fn start(emulator: &Emulator, args: &[&str]) -> Proxy {
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
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Proxy {
        Self::spawn(command(args, env))
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
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

    /// The next stdout line, which must be one JSON value; panics after [`LINE_TIMEOUT`].
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

    /// Closes stdin; returns the lines written after that, and the exit status.
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

pub fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
}

/// A directory of its own under the temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "agentcore-mcp-proxy-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A token command: a script that counts its runs in the file `runs` and prints
    /// `tokens[run - 1]` (the last one for every later run).
    pub fn token_command(&self, tokens: &[&str]) -> String {
        let script = self.0.join("token.sh");
        let runs = self.0.join("runs");
        let mut text = format!(
            "n=$(cat '{runs}' 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > '{runs}'\ncase $n in\n",
            runs = runs.display()
        );
        for (i, token) in tokens.iter().enumerate() {
            let pattern = if i + 1 == tokens.len() {
                "*".to_owned()
            } else {
                (i + 1).to_string()
            };
            text.push_str(&format!("  {pattern}) echo '{token}' ;;\n"));
        }
        text.push_str("esac\n");
        std::fs::write(&script, text).unwrap();
        format!("sh '{}'", script.display())
    }

    /// Writes `text` to the file `name` in it: its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    pub fn runs(&self) -> u32 {
        std::fs::read_to_string(self.0.join("runs"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Proxy {
    /// Starts the proxy for `emulator` as [`Proxy::start`] does, with `env` set and no `OTEL_*`
    /// variable of the tests' own environment: what turns OpenTelemetry export on is `env`'s
    /// alone.
    pub fn start_with_otel(emulator: &Emulator, args: &[&str], env: &[(&str, &str)]) -> Proxy {
        let credentials = emulator.credentials();
        let endpoint = emulator.endpoint();
        let mut all = vec!["--runtime-arn", emulator.runtime_arn()];
        all.extend_from_slice(args);
        if !args.contains(&"--endpoint") {
            all.extend_from_slice(&["--endpoint", &endpoint]);
        }
        let mut command = command(&all, &[]);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command
            .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
            .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
            .env("AWS_SESSION_TOKEN", credentials.session_token().unwrap());
        for (name, value) in env {
            command.env(name, value);
        }
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

/// Serves HTTP/1 on 127.0.0.1 (a free port), each request answered by `handle`, until the
/// task is aborted: the base URL (`http://127.0.0.1:PORT`) and the task. The in-test servers
/// (an MCP server, a collector) share it.
pub async fn serve_loopback<H, F, B>(handle: H) -> (String, tokio::task::JoinHandle<()>)
where
    H: Fn(http::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = http::Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answer = handle(request);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (base, task)
}
