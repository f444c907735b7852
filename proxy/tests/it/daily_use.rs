//! The options for daily use, through the built binary: the call's limits (`--timeout`,
//! `--idle-timeout`), who calls (`--runtime-user-id`, `--profile`), the server's tool
//! annotations (`--trust-tool-annotations`), and which tools a client sees and may call
//! (`--allow-tool`, `--deny-tool`, `--read-only`).
//!
//! Against the emulator where it has what a test needs (a slow tool, a dropped connection, the
//! tools' annotations, SigV4); else against an MCP server played here (an answer stream that
//! stalls or never ends, a paginated `tools/list`, a runtime that records its headers).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, SignatureVerifier};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::common;
use common::*;

/// The proxy in front of the MCP server at `url` with [`TOKEN`], `args` after.
fn for_url(url: &str, args: &[&str]) -> Proxy {
    Proxy::for_url(url, TOKEN, args)
}

// ---------------------------------------------------------------------------------------------
// An MCP server played here.

/// The token the in-test server is sent.
const TOKEN: &str = "daily-use-token-0123456789";
const SESSION: &str = "daily-use-mcp-session-0123456789";

/// One request the in-test server got.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    rpc: Option<String>,
    tool: Option<String>,
    user_id: Option<String>,
    /// `X-Tenant-Key` (a `--header`).
    tenant_key: Option<String>,
}

/// What the in-test server answers to a request (initialize and notifications aside).
enum Reply {
    Json(Value),
    /// An HTTP error without a JSON-RPC body (after the tool ran: it may have).
    Status(u16),
    /// An SSE answer: these events, then what `Then` says.
    Sse(Vec<Value>, Then),
}

/// How an SSE answer goes on after its events.
#[derive(Clone, Copy)]
enum Then {
    End,
    /// Nothing more, and the stream stays open.
    Stall,
    /// A comment line every this often, forever: never idle, never done.
    Tick(Duration),
}

type Handler = dyn Fn(&Value) -> Reply + Send + Sync;

/// An MCP Streamable HTTP server at any path (an MCP URL, or a runtime's invocations):
/// `initialize` opens a session, a notification gets 202, any other request the handler's
/// reply; with a verifier, a request whose SigV4 signature it refuses gets 403.
type Server = Recorder<Seen>;

impl Recorder<Seen> {
    async fn start(handler: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Server {
        Self::start_with(None, handler).await
    }

    async fn start_with(
        verifier: Option<SignatureVerifier>,
        handler: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let handler: Arc<Handler> = Arc::new(handler);
        let shared = Arc::new((verifier, handler));
        Recorder::serve(move |seen, request| {
            let shared = shared.clone();
            async move {
                let (verifier, handler) = &*shared;
                serve(verifier.as_ref(), handler.as_ref(), &seen, request).await
            }
        })
        .await
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The tools called, in order.
    fn calls(&self) -> Vec<String> {
        self.recorded()
            .into_iter()
            .filter(|s| s.rpc.as_deref() == Some("tools/call"))
            .map(|s| s.tool.unwrap_or_default())
            .collect()
    }
}

async fn serve(
    verifier: Option<&SignatureVerifier>,
    handler: &Handler,
    seen: &Mutex<Vec<Seen>>,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<Streamed> {
    let (parts, body) = read_request(request).await;
    let message: Option<Value> = serde_json::from_slice(&body).ok();
    let rpc = message
        .as_ref()
        .and_then(|m| m["method"].as_str())
        .map(str::to_owned);
    seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        rpc: rpc.clone(),
        tool: message
            .as_ref()
            .and_then(|m| m.pointer("/params/name"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        user_id: header_of(&parts.headers, "x-amzn-bedrock-agentcore-runtime-user-id"),
        tenant_key: header_of(&parts.headers, "x-tenant-key"),
    });
    let response = |status: u16, content_type: Option<&str>, body: Streamed| {
        let mut response = http::Response::builder().status(status);
        if let Some(content_type) = content_type {
            response = response.header("content-type", content_type);
        }
        response
            .header("mcp-session-id", SESSION)
            .body(body)
            .unwrap()
    };
    if let Some(verifier) = verifier
        && let Err(e) = verifier.verify(&parts, &body, std::time::SystemTime::now())
    {
        let refusal = json!({"message": format!("{e:?}")}).to_string();
        return response(403, Some("application/json"), Streamed::whole(refusal));
    }
    let Some(message) = message.filter(|_| parts.method == http::Method::POST) else {
        return response(405, None, Streamed::whole(String::new()));
    };
    match (rpc.as_deref(), message.get("id")) {
        (Some("initialize"), Some(id)) => {
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "daily-use", "version": "1"}
            }});
            response(
                200,
                Some("application/json"),
                Streamed::whole(answer.to_string()),
            )
        }
        (_, None) => response(202, None, Streamed::whole(String::new())),
        (_, Some(_)) => match handler(&message) {
            Reply::Status(status) => response(status, None, Streamed::whole(String::new())),
            Reply::Json(answer) => response(
                200,
                Some("application/json"),
                Streamed::whole(answer.to_string()),
            ),
            Reply::Sse(events, then) => {
                let text: String = events
                    .iter()
                    .map(|event| format!("data: {event}\n\n"))
                    .collect();
                response(200, Some("text/event-stream"), Streamed::sse(text, then))
            }
        },
    }
}

/// A response body: its text, then (SSE) an end, a stall, or a comment every tick.
struct Streamed {
    first: Option<Bytes>,
    then: Then,
    tick: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Streamed {
    fn whole(text: String) -> Streamed {
        Streamed {
            first: Some(Bytes::from(text)),
            then: Then::End,
            tick: None,
        }
    }

    fn sse(text: String, then: Then) -> Streamed {
        Streamed {
            first: Some(Bytes::from(text)),
            then,
            tick: None,
        }
    }
}

impl hyper::body::Body for Streamed {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(hyper::body::Frame::data(first))));
        }
        match self.then {
            Then::End => Poll::Ready(None),
            Then::Stall => Poll::Pending,
            Then::Tick(every) => {
                let tick = self
                    .tick
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
                if tick.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                tick.as_mut().reset(tokio::time::Instant::now() + every);
                Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(
                    b": still working\n\n",
                )))))
            }
        }
    }
}

/// A tool result.
fn result(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": false}})
}

// ---------------------------------------------------------------------------------------------
// --timeout and --idle-timeout.

/// The record of a call whose answer came (and was then cut while it was read).
const DELIVERED: &str = "#1 HTTP 200 -> mcp_session: delivered; effect unknown";

/// The record of a call cut while its only attempt was in flight.
fn record_of_a_dropped_call() -> Value {
    json!([
        "#1 sent, no answer yet -> mcp_session: call dropped before it ended (a deadline or cancellation outside); effect unknown"
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_slower_than_the_timeout_is_cut_naming_it_and_one_within_it_is_delivered() {
    let emulator = start_emulator(EmulatorConfig::default()).await;

    // 5 s of work under --timeout 3s: cut at 3 s, the error names the limit and its value.
    let mut proxy = Proxy::start(&emulator, &["--timeout", "3s"]);
    proxy.open().await;
    emulator.push_fault(Fault::Slow(Duration::from_secs(5)));
    let sent = Instant::now();
    proxy.send(&call(2, "add", json!({"a": 1, "b": 2})));
    let answer = proxy.next().await;
    let took = sent.elapsed();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["error"],
        json!({
            "code": -32000,
            "message": "no answer from AgentCore within --timeout 3s (the deadline of the whole call); the request may have run",
            "data": {
                "failure": "timed out",
                "limit": "--timeout",
                "limitMs": 3000,
                "attempts": record_of_a_dropped_call(),
            }
        }),
        "{answer}"
    );
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(4500),
        "cut after {took:?}"
    );
    let (rest, status, _proxy) = proxy.close().await;
    assert_eq!((rest, status.code()), (vec![], Some(0)));

    // 2 s of work under --timeout 5s: delivered.
    let mut proxy = Proxy::start(&emulator, &["--timeout=5s"]);
    proxy.open().await;
    emulator.push_fault(Fault::Slow(Duration::from_secs(2)));
    proxy.send(&call(3, "add", json!({"a": 20, "b": 22})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(text_of(&answer), "42");
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!((rest, status.code()), (vec![], Some(0)));
    assert!(
        proxy
            .stderr()
            .contains("limits of a call timeout=5s idle_timeout=5m"),
        "{}",
        proxy.stderr()
    );
    assert_eq!(emulator.audit().executions_of("add"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_answer_stream_is_cut_at_the_idle_timeout_over_stdio_and_listen() {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "started"}});
    let event = progress.clone();
    // The tool's answer: headers and one event, then nothing, the stream left open.
    let server = Server::start(move |_| Reply::Sse(vec![event.clone()], Then::Stall)).await;

    let mut proxy = for_url(&server.url(), &["--idle-timeout", "1500ms"]);
    proxy.open().await;
    proxy.send(&call(2, "slow", json!({})));
    assert_eq!(proxy.next().await, progress);
    let event_came = Instant::now();
    let answer = proxy.next().await;
    let took = event_came.elapsed();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "the MCP server sent nothing of its answer for --idle-timeout 1500ms; the request may \
         have run"
    );
    let data = &answer["error"]["data"];
    assert_eq!(
        (&data["failure"], &data["limit"], &data["limitMs"]),
        (&json!("timed out"), &json!("--idle-timeout"), &json!(1500)),
        "{answer}"
    );
    assert_eq!(data["attempts"], json!([DELIVERED]), "{answer}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "cut after {took:?}"
    );
    drop(proxy);

    // The same over --listen: the SSE answer ends with an error event for the request.
    let listening = Listening::for_url(&server.url(), TOKEN, &["--idle-timeout", "1500ms"]).await;
    let client = listening.client().await;
    let answer = client.post(&call(3, "slow", json!({}))).await;
    assert_eq!(answer.status, 200);
    let events = answer.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], progress);
    assert_eq!(events[1]["id"], 3);
    assert_eq!(
        events[1]["error"]["message"],
        "the MCP server sent nothing of its answer for --idle-timeout 1500ms; the request may \
         have run"
    );
    assert_eq!(events[1]["error"]["data"]["limit"], "--idle-timeout");
    assert_eq!(events[1]["error"]["data"]["attempts"], json!([DELIVERED]));
    assert_eq!(server.calls(), ["slow", "slow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stream_that_never_ends_is_cut_at_the_timeout_though_never_idle() {
    // A comment every 200 ms: never idle for the default 5 minutes, never done.
    let server =
        Server::start(|_| Reply::Sse(vec![], Then::Tick(Duration::from_millis(200)))).await;
    let mut proxy = for_url(&server.url(), &["--timeout", "2s"]);
    proxy.open().await;
    let sent = Instant::now();
    proxy.send(&call(2, "forever", json!({})));
    let answer = proxy.next().await;
    let took = sent.elapsed();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "the MCP server did not finish its answer within --timeout 2s (the deadline of the \
         whole call); the request may have run"
    );
    assert_eq!(answer["error"]["data"]["limit"], "--timeout");
    assert_eq!(answer["error"]["data"]["limitMs"], 2000);
    assert_eq!(answer["error"]["data"]["attempts"], json!([DELIVERED]));
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "cut after {took:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// --runtime-user-id and --profile.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_user_id_goes_with_every_invocation() {
    let signing = SigningKey {
        key: "AKIDDAILYUSE0001",
        secret: "daily-use-secret-access-key-0a1b2c3d",
        session_token: None,
    };
    let verifier = signing.verifier("us-east-1", "bedrock-agentcore");
    let server = Server::start_with(Some(verifier), |message| {
        Reply::Json(result(&message["id"], "ran"))
    })
    .await;
    let mut proxy = Proxy::start_with(
        &[
            "--runtime-arn",
            ARN,
            "--endpoint",
            &server.base,
            "--runtime-user-id",
            "alice@example.com",
        ],
        &signing.env(),
    );
    proxy.open().await;
    proxy.send(&call(2, "whoami", json!({})));
    let answer = proxy.next().await;
    assert_eq!(text_of(&answer), "ran", "{answer}");
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new());
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());
    let seen: Vec<(String, Option<String>, Option<String>)> = server
        .recorded()
        .into_iter()
        .map(|s| (s.method, s.rpc, s.user_id))
        .collect();
    let user = Some("alice@example.com".to_owned());
    assert_eq!(
        seen,
        [
            ("POST".into(), Some("initialize".into()), user.clone()),
            (
                "POST".into(),
                Some("notifications/initialized".into()),
                user.clone()
            ),
            ("POST".into(), Some("tools/call".into()), user),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_signs_with_the_named_profiles_credentials() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let credentials = emulator.credentials();
    let dir = TempDir::new("profile");
    // The default profile has a key the emulator refuses; `daily` has the emulator's.
    let shared = dir.write(
        "credentials",
        &format!(
            "[default]\naws_access_key_id = AKIDWRONG0000\naws_secret_access_key = wrong-secret\n\n\
             [daily]\naws_access_key_id = {}\naws_secret_access_key = {}\naws_session_token = {}\n",
            credentials.access_key_id(),
            credentials.secret_access_key(),
            credentials.session_token().unwrap()
        ),
    );
    let config = dir.write(
        "config",
        "[default]\nregion = us-east-1\n\n[profile daily]\nregion = us-east-1\n",
    );
    let files = [
        ("AWS_CONFIG_FILE", config.as_str()),
        ("AWS_SHARED_CREDENTIALS_FILE", shared.as_str()),
    ];
    let run = |profile: Option<&str>| match profile {
        Some(profile) => Proxy::start_at(&emulator, &["--profile", profile], &files),
        None => Proxy::start_at(&emulator, &[], &files),
    };

    let mut proxy = run(Some("daily"));
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "agentcore-tower-emulator",
        "{answer}"
    );
    let (_, status, proxy) = proxy.close().await;
    assert_eq!(status.code(), Some(0));
    assert!(proxy.stderr().contains("AWS profile profile=daily"));
    assert_eq!(emulator.audit().signature_failures, 0);

    // Without it, the default profile's key is refused.
    let mut proxy = run(None);
    proxy.send(&initialize(1));
    let answer = proxy.next().await;
    assert_eq!(answer["error"]["data"]["httpStatus"], 403, "{answer}");
    assert_eq!(emulator.audit().signature_failures, 1);
}

#[test]
fn daily_use_options_that_do_not_fit_are_usage_errors() {
    let gateway = "https://gw-1.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--runtime-arn", ARN, "--timeout", "15 minutes"],
            "--timeout 15 minutes: not a DURATION (a whole number and a unit: 1500ms, 90s, 5m, \
             1h, 2d; alone, seconds)",
        ),
        (
            &["--runtime-arn", ARN, "--idle-timeout", "0"],
            "--idle-timeout 0: the duration must be more than zero",
        ),
        (
            &["--gateway-url", gateway, "--runtime-user-id", "alice"],
            "--runtime-user-id applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &[
                "--runtime-arn",
                ARN,
                "--bearer-token-env",
                "T",
                "--profile",
                "dev",
            ],
            "--profile is for SigV4 (the AWS credentials of that profile), and \
             --bearer-token-env sends a bearer token instead: give one of them",
        ),
    ];
    for (args, expected) in cases {
        let (stdout, stderr) = run(command(args, &[("T", TOKEN)]), 2);
        assert!(
            stderr.starts_with(&format!("agentcore-mcp-proxy: {expected}")),
            "{args:?}: {stderr}"
        );
        assert!(stdout.is_empty());
    }
    // Checked by the library's builder, once the AWS configuration is read.
    let args = ["--runtime-arn", ARN, "--runtime-user-id", "tab\there"];
    let (_, stderr) = run(command(&args, &[]), 2);
    assert!(
        stderr.contains(
            "agentcore-mcp-proxy: --runtime-user-id: the runtime user id must be 1 to 1024 \
             visible ASCII characters (got 8)\n"
        ),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// --trust-tool-annotations.

/// `add` (annotated `idempotentHint: true` by the emulator) after a dropped connection, once
/// listed: the number of times it ran, and the answer.
async fn add_after_a_drop(trust: bool, drops: usize) -> (u64, Value, String) {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let args: &[&str] = if trust {
        &["--trust-tool-annotations"]
    } else {
        &[]
    };
    let mut proxy = Proxy::start(&emulator, args);
    proxy.open().await;
    proxy.send(&request(2, "tools/list", json!({})));
    assert_eq!(tool_names(&proxy.next().await), ["add", "echo", "counter"]);
    for _ in 0..drops {
        emulator.push_fault(Fault::DropAfterRun);
    }
    proxy.send(&call(3, "add", json!({"a": 2, "b": 3})));
    let answer = proxy.next().await;
    let (_, _, proxy) = proxy.close().await;
    (
        emulator.audit().executions_of("add"),
        answer,
        proxy.stderr(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_annotation_lets_a_dropped_call_be_sent_again_only_when_trusted() {
    // Not trusted: the server's word is a hint; `add` ran once and is not sent again.
    let (ran, answer, _) = add_after_a_drop(false, 1).await;
    assert_eq!(ran, 1);
    assert_eq!(
        answer["error"]["data"]["attempts"],
        json!([
            "#1 failed: connection dropped -> replay_guard: delivered (connection dropped, but a re-send is forbidden: tools/call `add` is not declared replayable); effect unknown"
        ]),
        "{answer}"
    );

    // Trusted: sent again, answered; it ran twice (which its annotation says is harmless).
    let (ran, answer, _) = add_after_a_drop(true, 1).await;
    assert_eq!(ran, 2);
    assert_eq!(text_of(&answer), "5", "{answer}");

    // The record names the server's annotation as what permitted the re-sends.
    let (ran, answer, _) = add_after_a_drop(true, 3).await;
    assert_eq!(ran, 3);
    let attempts = answer["error"]["data"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{answer}");
    for attempt in &attempts[..2] {
        assert!(
            attempt
                .as_str()
                .unwrap()
                .contains("(by server annotation, assumes idempotent)"),
            "{answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_idempotent_tool_that_is_also_destructive_is_not_sent_again() {
    // Each tool's first call fails with a 500 after it ran; its next call is answered.
    let ran = Arc::new(Mutex::new(std::collections::HashMap::<String, u32>::new()));
    let counts = ran.clone();
    let server = Server::start(move |message| {
        let id = &message["id"];
        match message["method"].as_str() {
            Some("tools/list") => Reply::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "set_flag", "annotations": {"idempotentHint": true}},
                {"name": "purge", "annotations": {"idempotentHint": true, "destructiveHint": true}},
                {"name": "wipe", "annotations": {"idempotentHint": true, "destructiveHint": true}}
            ]}})),
            _ => {
                let name = message["params"]["name"].as_str().unwrap().to_owned();
                let mut ran = counts.lock().unwrap();
                let n = ran.entry(name.clone()).or_default();
                *n += 1;
                if *n == 1 {
                    Reply::Status(500)
                } else {
                    Reply::Json(result(id, &format!("{name} ran")))
                }
            }
        }
    })
    .await;
    let mut proxy = for_url(
        &server.url(),
        &["--trust-tool-annotations", "--idempotent-tool", "wipe"],
    );
    proxy.open().await;
    proxy.send(&request(2, "tools/list", json!({})));
    assert_eq!(
        tool_names(&proxy.next().await),
        ["set_flag", "purge", "wipe"]
    );
    // idempotentHint alone: sent again after the 500.
    proxy.send(&call(3, "set_flag", json!({})));
    assert_eq!(text_of(&proxy.next().await), "set_flag ran");
    // idempotentHint and destructiveHint: not sent again.
    proxy.send(&call(4, "purge", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["error"]["data"]["httpStatus"], 500, "{answer}");
    // The same, named by --idempotent-tool: the command line wins.
    proxy.send(&call(5, "wipe", json!({})));
    assert_eq!(text_of(&proxy.next().await), "wipe ran");
    drop(proxy);
    assert_eq!(
        server.calls(),
        ["set_flag", "set_flag", "purge", "wipe", "wipe"]
    );
}

// ---------------------------------------------------------------------------------------------
// --allow-tool, --deny-tool, --read-only.

/// Two pages of tools: the first as JSON, the second as an SSE answer.
fn paginated(message: &Value) -> Reply {
    let id = &message["id"];
    match message["method"].as_str() {
        Some("tools/list") => match message.pointer("/params/cursor").and_then(Value::as_str) {
            None => Reply::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "get_issue", "annotations": {"readOnlyHint": true}},
                {"name": "delete_issue", "annotations": {"destructiveHint": true}},
                {"name": "list_issues", "annotations": {"readOnlyHint": true}}
            ], "nextCursor": "page-2"}})),
            Some(_) => Reply::Sse(
                vec![json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                    {"name": "get_secret", "annotations": {"readOnlyHint": true}},
                    {"name": "update_issue", "annotations": {"readOnlyHint": false}}
                ]}})],
                Then::End,
            ),
        },
        Some("tools/call") => {
            let name = message["params"]["name"].as_str().unwrap_or_default();
            Reply::Json(result(id, &format!("{name} ran")))
        }
        _ => Reply::Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})),
    }
}

fn page(id: u64, cursor: Option<&str>) -> Value {
    match cursor {
        Some(cursor) => request(id, "tools/list", json!({"cursor": cursor})),
        None => request(id, "tools/list", json!({})),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_deny_filter_every_page_over_stdio_and_refuse_a_hidden_tool_unsent() {
    let server = Server::start(paginated).await;
    let filter = [
        "--allow-tool",
        "get_*",
        "--allow-tool=list_?ssues",
        "--deny-tool",
        "*secret",
    ];
    let mut proxy = for_url(&server.url(), &filter);
    proxy.open().await;
    proxy.send(&page(2, None));
    let first = proxy.next().await;
    assert_eq!(tool_names(&first), ["get_issue", "list_issues"]);
    assert_eq!(first["result"]["nextCursor"], "page-2");
    // The second page holds nothing allowed: empty, and still the last.
    proxy.send(&page(3, Some("page-2")));
    let second = proxy.next().await;
    assert_eq!(
        second,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}})
    );

    // Each hidden tool's call is refused: the message says why, `data` names the rule.
    for (id, tool, why, rule) in [
        (
            4,
            "get_secret",
            "--deny-tool *secret hides it",
            "--deny-tool *secret",
        ),
        (
            5,
            "delete_issue",
            "it matches no --allow-tool pattern (get_*, list_?ssues)",
            "--allow-tool",
        ),
    ] {
        proxy.send(&call(id, tool, json!({})));
        assert_eq!(
            proxy.next().await,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                "message": format!("the tool `{tool}` is not available through this proxy: {why}"),
                "data": {"tool": tool, "rule": rule}}})
        );
    }
    proxy.send(&call(6, "get_issue", json!({})));
    assert_eq!(text_of(&proxy.next().await), "get_issue ran");
    let (rest, status, _proxy) = proxy.close().await;
    assert_eq!((rest, status.code()), (vec![], Some(0)));
    assert_eq!(
        server.calls(),
        ["get_issue"],
        "the hidden tools were never sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_shows_read_only_tools_and_refuses_a_tool_it_has_not_seen_listed() {
    let server = Server::start(paginated).await;
    let mut proxy = for_url(&server.url(), &["--read-only"]);
    proxy.open().await;
    // Not listed yet: its annotations are not known.
    proxy.send(&call(2, "get_issue", json!({})));
    let answer = proxy.next().await;
    assert_eq!(
        answer["error"]["message"],
        "the tool `get_issue` is not available through this proxy: --read-only: it has not been \
         listed (tools/list), so whether it is read-only is not known",
        "{answer}"
    );
    proxy.send(&page(3, None));
    assert_eq!(
        tool_names(&proxy.next().await),
        ["get_issue", "list_issues"]
    );
    proxy.send(&page(4, Some("page-2")));
    assert_eq!(tool_names(&proxy.next().await), ["get_secret"]);
    proxy.send(&call(5, "update_issue", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["rule"], "--read-only");
    proxy.send(&call(6, "get_issue", json!({})));
    assert_eq!(text_of(&proxy.next().await), "get_issue ran");
    drop(proxy);
    assert_eq!(server.calls(), ["get_issue"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_json_and_sse_pages_are_filtered_and_a_hidden_tool_is_refused_unsent() {
    let server = Server::start(paginated).await;
    let listening = Listening::for_url(&server.url(), TOKEN, &["--deny-tool", "*_issue"]).await;
    let client = listening.client().await;
    let first = client.post(&page(2, None)).await;
    assert_eq!(first.status, 200);
    let first = first.json();
    assert_eq!(tool_names(&first), ["list_issues"]);
    assert_eq!(first["result"]["nextCursor"], "page-2");
    let second = client.post(&page(3, Some("page-2"))).await;
    let events = second.events();
    assert_eq!(events.len(), 1);
    assert_eq!(tool_names(&events[0]), ["get_secret"]);
    assert!(events[0]["result"].get("nextCursor").is_none());

    let refused = client.post(&call(4, "update_issue", json!({}))).await;
    assert_eq!(refused.status, 200);
    assert_eq!(
        refused.json()["error"]["message"],
        "the tool `update_issue` is not available through this proxy: --deny-tool *_issue hides it"
    );
    let answer = client.post(&call(5, "get_secret", json!({}))).await;
    assert_eq!(text_of(&answer.json()), "get_secret ran");
    assert_eq!(server.calls(), ["get_secret"]);
}

// ---------------------------------------------------------------------------------------------
// --help.

#[test]
fn help_names_each_daily_option_with_its_default() {
    let (help, _) = run(command(&["--help"], &[]), 0);
    let text = String::from_utf8(help).unwrap();
    for option in [
        "--timeout DURATION",
        "--idle-timeout DURATION",
        "--runtime-user-id ID",
        "--profile NAME",
        "--strict-tool NAME",
        "--trust-tool-annotations",
        "--allow-tool PATTERN",
        "--deny-tool PATTERN",
        "--read-only",
    ] {
        assert!(text.contains(&format!("\n    {option}\n")), "{option}");
    }
    assert!(text.contains("Default: 15m, AgentCore Runtime's limit for a"));
    assert!(text.contains("Default: 5m."));
    assert!(!text.contains("120 s"), "the old fixed deadline");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

// ---------------------------------------------------------------------------------------------
// --header

const CUSTOM: &str = "X-Amzn-Bedrock-AgentCore-Runtime-Custom-Tenant";
const SECRET_VALUE: &str = "tenant-s3cr3t-value";

/// initialize, a `tools/list` (#2) answered, then stdin closed: nothing more comes, and the
/// proxy exits 0.
async fn list_once(mut proxy: Proxy) -> Proxy {
    proxy.open().await;
    proxy.send(&request(2, "tools/list", json!({})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    proxy.closed_cleanly("nothing more").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_reach_the_runtime_signed_and_are_never_logged() {
    // The allowlist names the tenant header only: another custom header is not passed on.
    let emulator =
        start_emulator(EmulatorConfig::default().header_allowlist([CUSTOM.to_ascii_lowercase()]))
            .await;
    let tenant = format!("{CUSTOM}={SECRET_VALUE}");
    let other = "x-amzn-bedrock-agentcore-runtime-custom-other=other-s3cr3t";
    let proxy = list_once(Proxy::start(
        &emulator,
        &["--header", &tenant, "--header", other],
    ))
    .await;
    let audit = emulator.audit();
    assert_eq!(audit.signature_failures, 0);
    let posts: Vec<_> = audit
        .received
        .iter()
        .filter(|r| r.http_method == "POST")
        .collect();
    assert!(!posts.is_empty());
    for received in posts {
        assert!(received.signed, "{received:?}");
        assert_eq!(
            received.custom_headers,
            [(CUSTOM.to_ascii_lowercase(), SECRET_VALUE.to_owned())],
            "{received:?}"
        );
    }
    let stderr = proxy.stderr();
    assert!(
        !stderr.contains(SECRET_VALUE) && !stderr.contains("other-s3cr3t"),
        "{stderr}"
    );
    // The names are logged, so a user sees what is sent.
    assert!(
        stderr.contains("x-amzn-bedrock-agentcore-runtime-custom-tenant"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_reach_an_mcp_url_on_every_request_and_are_never_logged() {
    let server = Server::start(|message| {
        Reply::Json(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}}))
    })
    .await;
    let header = format!("X-Tenant-Key={SECRET_VALUE}");
    let proxy = list_once(for_url(&server.url(), &["--header", &header])).await;
    let seen = server.recorded();
    assert!(seen.len() >= 3, "{seen:?}");
    for request in seen {
        assert_eq!(
            request.tenant_key.as_deref(),
            Some(SECRET_VALUE),
            "{request:?}"
        );
    }
    assert!(!proxy.stderr().contains(SECRET_VALUE), "{}", proxy.stderr());
}

#[test]
fn a_header_outside_the_doors_rules_is_refused_at_start() {
    let arn = ["--runtime-arn", ARN];
    let gateway = [
        "--gateway-url",
        "https://gw-1.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp",
    ];
    let url = [
        "--url",
        "https://example.com/mcp",
        "--bearer-token-env",
        "T",
    ];
    let big = format!("{CUSTOM}={}", "s".repeat(5 * 1024));
    let many: Vec<String> = (0..21)
        .map(|n| format!("{CUSTOM}-{n}={SECRET_VALUE}"))
        .collect();
    let mut cases: Vec<(Vec<String>, String)> = vec![
        (
            header_args(&arn, &[&format!("x-tenant={SECRET_VALUE}")]),
            "--header x-tenant: --runtime-arn passes only X-Amzn-Bedrock-AgentCore-Runtime-\
             Custom-* headers to the runtime (the ones its request-header allowlist names)"
                .into(),
        ),
        (
            header_args(&arn, &[&big]),
            "--header x-amzn-bedrock-agentcore-runtime-custom-tenant: the value is 5120 bytes; \
             AgentCore passes at most 4096 (4 KB)"
                .into(),
        ),
        (
            header_args(&arn, &many),
            "--header is given 21 times; a runtime passes at most 20 custom headers".into(),
        ),
    ];
    for (door, flag) in [(&gateway[..], "--gateway-url"), (&url[..], "--url")] {
        for (name, rule) in [
            ("authorization", "the signature or the bearer token sets it"),
            ("X-Amz-Date", "x-amz-* is SigV4's"),
            ("Mcp-Session-Id", "mcp-* is the MCP transport's"),
            ("connection", "a hop-by-hop header, for one connection only"),
            ("Content-Type", "content-* describes the message body"),
        ] {
            cases.push((
                header_args(door, &[&format!("{name}={SECRET_VALUE}")]),
                format!(
                    "--header {} is reserved ({rule}): {flag} refuses it",
                    name.to_ascii_lowercase()
                ),
            ));
        }
    }
    for (args, expected) in cases {
        let (_, stderr) = run(command(&strs(&args), &[("T", TOKEN)]), 2);
        assert!(stderr.contains(&expected), "{expected}\n{stderr}");
        assert!(!stderr.contains(SECRET_VALUE), "{stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// credential_process and stdin

/// A profile's `credential_process` that reads its standard input must not take the MCP
/// client's messages. aws-config runs it with tokio's `Command::output()`, which leaves stdin
/// inherited: the proxy takes fd 0 for itself and leaves `/dev/null` there, so the process
/// reads nothing and every request is answered. Were stdin inherited, `cat` would swallow the
/// messages written after the first request (and wait for EOF), and this test would time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_process_that_reads_stdin_takes_no_message() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let credentials = emulator.credentials();
    let dir = TempDir::new("credential-process");
    let seen = dir.0.join("stdin-seen");
    let script = dir.write(
        "creds.sh",
        &format!(
            "#!/bin/sh\ncat >> '{}'\nprintf '%s' '{{\"Version\": 1, \"AccessKeyId\": \"{}\", \
             \"SecretAccessKey\": \"{}\", \"SessionToken\": \"{}\"}}'\n",
            seen.display(),
            credentials.access_key_id(),
            credentials.secret_access_key(),
            credentials.session_token().unwrap()
        ),
    );
    let config = dir.write(
        "config",
        &format!("[profile proc]\nregion = us-east-1\ncredential_process = sh {script}\n"),
    );
    let mut proxy = Proxy::start_at(
        &emulator,
        &["--profile", "proc"],
        &[("AWS_CONFIG_FILE", config.as_str())],
    );
    // Everything at once: the credentials are resolved while these wait in the pipe.
    proxy.send(&initialize(1));
    proxy.send(&initialized());
    for id in 2..=5 {
        proxy.send(&call(id, "add", json!({"a": id, "b": 1})));
    }
    // The calls run concurrently once the session is open: each answered, once.
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    let mut ids = Vec::new();
    for _ in 2..=5 {
        let answer = proxy.next().await;
        assert!(answer.get("result").is_some(), "{answer}");
        ids.push(answer["id"].as_u64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, [2, 3, 4, 5]);
    // And one after another, in order.
    for id in 6..=7 {
        proxy.send(&call(id, "add", json!({"a": id, "b": 1})));
        let answer = proxy.next().await;
        assert_eq!(answer["id"], id, "{answer}");
    }
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(
        (rest, status.code()),
        (vec![], Some(0)),
        "{}",
        proxy.stderr()
    );
    assert_eq!(std::fs::read(&seen).unwrap_or_default(), b"");
    assert_eq!(emulator.audit().signature_failures, 0);
}

// ---------------------------------------------------------------------------------------------
// Errors a user can act on: `error.data.kind`

/// The JSON-RPC error that answers one `tools/call` of `add` after `faults` are queued.
async fn error_after(emulator: &Emulator, faults: &[Fault]) -> Value {
    let mut proxy = Proxy::start(emulator, &[]);
    proxy.open().await;
    for fault in faults {
        emulator.push_fault(*fault);
    }
    proxy.send(&call(2, "add", json!({"a": 1, "b": 2})));
    let answer = proxy.next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    answer["error"].clone()
}

/// A JSON-RPC error of the `kind` whose message says `advice`.
fn assert_kind(error: &Value, kind: &str, advice: &str) {
    assert_eq!(error["data"]["kind"], kind, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(advice),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refusal_a_user_acts_on_has_its_own_kind_and_advice() {
    use agentcore_tower::contract::PlatformError;
    use agentcore_tower_emulator::RetryAfter;
    let emulator = start_emulator(EmulatorConfig::default()).await;

    // Expired credentials: re-signed once with fresh ones (the same here), then delivered.
    let expired = [Fault::ExpiredToken; 3];
    let denied = [http_refusal(PlatformError::AccessDenied)];
    for (faults, kind, advice) in [
        (
            &expired[..],
            "expired_credentials",
            "the AWS credentials have expired: refresh them",
        ),
        (
            &denied,
            "access_denied",
            "not allowed bedrock-agentcore:InvokeAgentRuntime",
        ),
    ] {
        assert_kind(&error_after(&emulator, faults).await, kind, advice);
    }

    let invalid = http_refusal(PlatformError::Validation);
    let error = error_after(&emulator, &[invalid]).await;
    assert_eq!(error["data"]["kind"], "refused", "{error}");

    // Throttled on every attempt: delivered after the stack's waits.
    let throttle = Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(0)),
    };
    let error = error_after(&emulator, &[throttle; 64]).await;
    assert_eq!(error["data"]["kind"], "throttled", "{error}");
    assert_eq!(error["data"]["httpStatus"], 429, "{error}");
}

/// The JSON-RPC error that answers `initialize` (#1).
async fn initialize_error(proxy: &mut Proxy) -> Value {
    proxy.send(&initialize(1));
    proxy.next().await["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_runtime_and_the_wrong_door_have_their_own_kinds() {
    // A runtime that takes OAuth tokens, called with SigV4.
    let emulator = start_emulator(EmulatorConfig::default().bearer_tokens([TOKEN])).await;
    let mut proxy = Proxy::start(&emulator, &[]);
    let error = initialize_error(&mut proxy).await;
    assert_kind(
        &error,
        "auth_method_mismatch",
        "give --bearer-token-env VAR or --bearer-token-command CMD",
    );

    // Another runtime's ARN.
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let endpoint = emulator.endpoint();
    let mut proxy = Proxy::start_signed(
        &emulator,
        &["--runtime-arn", NOBODY, "--endpoint", &endpoint],
        &[],
    );
    let error = initialize_error(&mut proxy).await;
    assert_eq!(error["data"]["kind"], "not_found", "{error}");
    assert_eq!(
        error["data"]["errorType"], "ResourceNotFoundException",
        "{error}"
    );
}

/// Credentials that cannot be resolved because the SSO session expired: the call's error says
/// so, with its kind and the login to run for the profile in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sso_session_is_named_with_the_login_to_run() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let sso = ExpiredSso::new("sso");
    let mut proxy = Proxy::start_at(&emulator, &["--profile", "work"], &sso.env());
    let error = initialize_error(&mut proxy).await;
    assert_kind(
        &error,
        "expired_credentials",
        "aws sso login --profile work",
    );
    assert!(!proxy.stderr().contains("expired-sso-access-token"));
}
