//! What the proxy adds to a call, as a user runs it: one MCP 2026-07-28 `tools/call` (`add`)
//! written on the proxy's stdin and its answer read from its stdout, the proxy (this package's
//! binary, built in the bench profile) signing it to a runtime on loopback — against the same
//! call sent by a hand-written client: hyper-util's client, the request signed with
//! `aws_sigv4::http_request::sign` as the SDK signs it, the answer read whole.
//!
//! The runtime is the emulator (no provisioning, no faults), in this process; both ways reach
//! it over the same loopback, one call at a time. The two ways run interleaved in blocks of 20
//! calls, 1,000 calls each after a warm-up, so that the machine's drift falls on both; the bench
//! prints each way's p50 and p99, and the proxy's added time at each (its quantile less the
//! hand-written client's).
//!
//! Run: `cargo bench -p agentcore-mcp-proxy --bench stdio_call` (`CALLS=N` for another count).
//! Nothing is asserted about time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";
const BLOCK: usize = 20;

fn main() {
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let emulator = runtime
        .block_on(Emulator::start(EmulatorConfig::default()))
        .unwrap();
    let mut proxy = ProxyProcess::start(&emulator);
    let direct = Direct::new(&emulator);
    let (mut through_proxy, mut hand_signed) = (Vec::new(), Vec::new());
    // A warm-up: the runtime session started, connections open, both ways.
    for id in 0..BLOCK as u64 {
        proxy.call(id);
        runtime.block_on(direct.call(id));
    }
    let mut id = 1_000;
    while through_proxy.len() < calls {
        for _ in 0..BLOCK {
            id += 1;
            through_proxy.push(proxy.call(id));
        }
        for _ in 0..BLOCK {
            id += 1;
            hand_signed.push(runtime.block_on(direct.call(id)));
        }
    }
    report(&mut through_proxy, &mut hand_signed);
}

/// Prints each way's p50 and p99 and the proxy's added time at each.
fn report(through_proxy: &mut [Duration], hand_signed: &mut [Duration]) {
    let quantile = |times: &mut [Duration], q: f64| {
        times.sort_unstable();
        times[((times.len() - 1) as f64 * q).round() as usize]
    };
    println!("stdio_call: {} calls each way", through_proxy.len());
    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
        let proxied = quantile(through_proxy, q);
        let direct = quantile(hand_signed, q);
        println!(
            "  {name}: through the proxy {:>8.1} µs, hand-signed hyper {:>8.1} µs, the proxy adds {:>8.1} µs",
            micros(proxied),
            micros(direct),
            micros(proxied.saturating_sub(direct)),
        );
    }
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// A `tools/call` of `add` as a client of 2026-07-28 writes it.
fn tools_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 2, "b": 3},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The proxy as a desktop client runs it: over stdio, to the emulator's runtime.
struct ProxyProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl ProxyProcess {
    fn start(emulator: &Emulator) -> Self {
        let credentials = emulator.credentials();
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"));
        command
            .args(["--runtime-arn", emulator.runtime_arn()])
            .args(["--endpoint", &emulator.endpoint()])
            .env_clear()
            .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
            .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
            .env(
                "AWS_SESSION_TOKEN",
                credentials.session_token().unwrap_or_default(),
            )
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("the proxy starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// One call, line in and line out: how long it took.
    fn call(&mut self, id: u64) -> Duration {
        let line = format!("{}\n", tools_call(id));
        let started = Instant::now();
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        let took = started.elapsed();
        let answer: Value = serde_json::from_str(&answer).expect("one JSON line");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer}");
        took
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The hand-written client: hyper-util's, each request signed with `aws_sigv4` by hand.
struct Direct {
    client: Client<HttpConnector, Full<Bytes>>,
    url: http::Uri,
    credentials: Credentials,
    runtime_session: String,
}

impl Direct {
    fn new(emulator: &Emulator) -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
            url: emulator.invocations_url().parse().unwrap(),
            credentials: emulator.credentials(),
            runtime_session: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// One call, signed, sent and read whole: how long it took.
    async fn call(&self, id: u64) -> Duration {
        let started = Instant::now();
        let request = self.signed(&tools_call(id));
        let answer = self.client.request(request).await.unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let took = started.elapsed();
        let answer: Value = serde_json::from_slice(&body).expect("a JSON answer");
        assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer}");
        took
    }

    fn signed(&self, message: &Value) -> http::Request<Full<Bytes>> {
        let body = Bytes::from(message.to_string());
        let mut request = http::Request::post(self.url.clone())
            .header("host", self.url.authority().unwrap().as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "add")
            .header(
                "x-amzn-bedrock-agentcore-runtime-session-id",
                &self.runtime_session,
            )
            .body(Full::new(body.clone()))
            .unwrap();
        let identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("bedrock-agentcore")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()));
        let uri = request.uri().to_string();
        let signable =
            SignableRequest::new("POST", &uri, headers, SignableBody::Bytes(&body)).unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        instructions.apply_to_request_http1x(&mut request);
        request
    }
}
