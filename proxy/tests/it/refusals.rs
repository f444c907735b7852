//! AgentCore's refusals through the proxy, over stdio and `--listen`: a burst's cold start and
//! throttle waited out with the defaults; a refusal finally delivered says what it is in either
//! of its forms; `--header` within a Gateway's limits, and a `--listen` client's header that
//! disagrees with it refused.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentcore_tower::contract::{PlatformError, SESSION_BUSY_MESSAGE, THROTTLED_MESSAGE};
use agentcore_tower_emulator::{
    Audit, BusyForm, Emulator, EmulatorConfig, Fault, PlatformForm, RetryAfter,
};
use http::StatusCode;
use serde_json::{Value, json};

use common::{
    HttpClient, Proxy, call, command, header_args, initialize, initialized, listen_args, request,
    run, start_emulator, strs,
};

/// How long the burst's `initialize` may take: the 12 s cold start, the 1 s throttle, and room.
const BURST_ANSWER: Duration = Duration::from_secs(40);
/// How long any other answer may take.
const ANSWER: Duration = Duration::from_secs(15);

/// An MCP client of the proxy: over stdio, or an HTTP client of `--listen`.
trait Client {
    /// Sends a request; its answer, within `limit`.
    async fn ask(&mut self, request: Value, limit: Duration) -> Value;
    /// Sends a notification.
    async fn tell(&mut self, notification: Value);
}

impl Client for Proxy {
    async fn ask(&mut self, request: Value, limit: Duration) -> Value {
        self.send(&request);
        let answer = self.next_within(limit).await;
        assert_eq!(answer["id"], request["id"], "{answer}");
        answer
    }

    async fn tell(&mut self, notification: Value) {
        self.send(&notification);
    }
}

/// An HTTP client of `--listen` on MCP 2025-06-18: the MCP session's id and the negotiated
/// version on every request after `initialize` ([`HttpClient::exchange`]).
impl Client for HttpClient {
    async fn ask(&mut self, request: Value, limit: Duration) -> Value {
        let (status, answer) = post(self, &request, &[], limit).await;
        // A JSON-RPC answer, an error too, comes in an HTTP 200.
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["id"], request["id"], "{answer}");
        answer
    }

    async fn tell(&mut self, notification: Value) {
        let (status, answer) = post(self, &notification, &[], ANSWER).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    }
}

/// POSTs `message` with `headers` besides the client's own ([`HttpClient::exchange`]): the
/// status and the answer (a JSON body, or the last message of an SSE stream; `Null` for none).
async fn post(
    client: &mut HttpClient,
    message: &Value,
    headers: &[(&str, &str)],
    limit: Duration,
) -> (StatusCode, Value) {
    let answer = client.exchange(message, headers, limit).await;
    let status = StatusCode::from_u16(answer.status).unwrap();
    (status, answer.last_message())
}

/// A client of the proxy's `--listen` URL.
async fn http_of(proxy: &Proxy) -> HttpClient {
    HttpClient::new(&proxy.listen_url().await, None)
}

/// The runtime session ids the emulator's requests named.
fn runtime_sessions(audit: &Audit) -> BTreeSet<Option<String>> {
    audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The burst: a cold start's 12 s of 409s, then one 429

/// A runtime of MCP 2025-11-25 whose new sessions provision for 12 s, refused with HTTP 409
/// `RetryableConflictException`, and whose first request after that is throttled once
/// (`Retry-After: 1`): a burst of clients starting at once.
async fn burst_runtime() -> Emulator {
    let emulator = start_emulator(
        EmulatorConfig::default()
            .newest_protocol_version("2025-11-25")
            .provisioning(Duration::from_secs(12))
            .busy_form(BusyForm::Conflict409),
    )
    .await;
    // Provisioning is answered before a request's faults: the first request to get through
    // meets this.
    emulator.push_request_fault(Fault::Throttle {
        retry_after: Some(RetryAfter::Seconds(1)),
    });
    emulator
}

/// `initialize` through the burst, then `tools/list` and one `add`: each answered with a
/// result; the cold start and the throttle waited out, the tool run once, one runtime session.
async fn through_the_burst(client: &mut impl Client, emulator: &Emulator, over: &str) {
    let started = Instant::now();
    let answer = client.ask(initialize(1), BURST_ANSWER).await;
    let waited = started.elapsed();
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "agentcore-tower-emulator",
        "{over}: {answer}"
    );
    // It was the cold start that was waited out.
    assert!(waited >= Duration::from_secs(12), "{over}: {waited:?}");
    client.tell(initialized()).await;
    let listed = client
        .ask(request(2, "tools/list", json!({})), ANSWER)
        .await;
    let tools = listed["result"]["tools"].as_array().expect("a tool list");
    assert!(tools.iter().any(|t| t["name"] == "add"), "{over}: {listed}");
    let added = client
        .ask(call(3, "add", json!({"a": 2, "b": 3})), ANSWER)
        .await;
    assert_eq!(
        added["result"]["content"][0]["text"], "5",
        "{over}: {added}"
    );

    let audit = emulator.audit();
    assert!(audit.busy_refusals >= 8, "{over}: {audit:?}");
    assert_eq!(audit.throttled, 1, "{over}: {audit:?}");
    assert_eq!(audit.executions_of("add"), 1, "{over}: {audit:?}");
    assert_eq!(audit.sessions_started, 1, "{over}: {audit:?}");
    assert_eq!(audit.microvms_started, 1, "{over}: {audit:?}");
    let sessions = runtime_sessions(&audit);
    assert_eq!(
        sessions.len(),
        1,
        "{over}: one runtime session: {sessions:?}"
    );
    assert!(!sessions.contains(&None), "{over}: {sessions:?}");
}

/// The burst, with the stack's and the proxy's defaults, over stdio and `--listen` at
/// once (each against its own runtime).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_409s_then_a_429_is_waited_out_with_the_defaults_over_stdio_and_listen() {
    let stdio = async {
        let emulator = burst_runtime().await;
        let mut proxy = Proxy::start(&emulator, &[]);
        through_the_burst(&mut proxy, &emulator, "stdio").await;
        proxy.closed_cleanly("nothing more after the answers").await;
    };
    let listen = async {
        let emulator = burst_runtime().await;
        let proxy = Proxy::start(&emulator, &["--listen", "127.0.0.1:0"]);
        let mut client = http_of(&proxy).await;
        through_the_burst(&mut client, &emulator, "--listen").await;
    };
    tokio::join!(stdio, listen);
}

// ---------------------------------------------------------------------------------------------
// A refusal finally delivered says what it is, in either form

/// How one refusal reached the client, over one transport.
struct Delivered {
    form: PlatformForm,
    over: &'static str,
    error: Value,
}

/// What both forms of a refusal must say alike: its kind, its exception, the advice, and the
/// record of the call's attempts (`attempts` of them, when given).
fn assert_said_alike(
    delivered: &[Delivered],
    kind: &str,
    error_type: &str,
    attempts: Option<usize>,
) {
    let advice = &delivered[0].error["data"]["advice"];
    assert!(advice.is_string(), "{}", delivered[0].error);
    for Delivered { form, over, error } in delivered {
        let data = &error["data"];
        assert_eq!(data["kind"], kind, "{form:?} over {over}: {error}");
        assert_eq!(
            data["errorType"], error_type,
            "{form:?} over {over}: {error}"
        );
        assert_eq!(&data["advice"], advice, "{form:?} over {over}: {error}");
        let record = data["attempts"]
            .as_array()
            .unwrap_or_else(|| panic!("{form:?} over {over}: no attempt record: {error}"));
        assert!(record.len() >= 2, "{form:?} over {over}: {error}");
        assert!(
            record
                .iter()
                .all(|line| line.as_str().is_some_and(|l| l.starts_with('#'))),
            "{form:?} over {over}: {error}"
        );
        if let Some(attempts) = attempts {
            assert_eq!(record.len(), attempts, "{form:?} over {over}: {error}");
        }
    }
}

/// What a refusal's `form` leaves on the `error` delivered: in the JSON-RPC form, the runtime's
/// code and message (`jsonrpc`), as they came, in an HTTP 200; in the HTTP form, its status.
fn assert_form(error: &Value, form: PlatformForm, jsonrpc: (i64, &str), http_status: u16) {
    if form == PlatformForm::JsonRpc {
        let (code, message) = jsonrpc;
        assert_eq!(error["code"], code, "{error}");
        assert_eq!(error["message"], message, "{error}");
        assert_eq!(error["data"]["httpStatus"], 200, "{error}");
    } else {
        assert_eq!(error["data"]["httpStatus"], http_status, "{error}");
    }
}

/// Runs `one` for each form, over stdio and `--listen` (`true`), all at once.
async fn each_form_and_transport<F, Fut>(one: F) -> Vec<Delivered>
where
    F: Fn(PlatformForm, bool) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let (a, b, c, d) = tokio::join!(
        one(PlatformForm::JsonRpc, false),
        one(PlatformForm::Http, false),
        one(PlatformForm::JsonRpc, true),
        one(PlatformForm::Http, true),
    );
    [
        (PlatformForm::JsonRpc, "stdio", a),
        (PlatformForm::Http, "stdio", b),
        (PlatformForm::JsonRpc, "--listen", c),
        (PlatformForm::Http, "--listen", d),
    ]
    .into_iter()
    .map(|(form, over, error)| Delivered { form, over, error })
    .collect()
}

/// A runtime that is still provisioning when `--timeout 3s` (the call's one ceiling) ends the
/// waits: `initialize` is answered with the session-busy refusal, in the form the runtime
/// used — HTTP 200 with -32005, or HTTP 409 — and both say `session_busy`, with the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_busy_refusal_delivered_says_session_busy_in_either_form() {
    let delivered = each_form_and_transport(|form, listen| async move {
        let busy = match form {
            PlatformForm::JsonRpc => BusyForm::JsonRpc200,
            _ => BusyForm::Conflict409,
        };
        let emulator = start_emulator(
            EmulatorConfig::default()
                .provisioning(Duration::from_secs(600))
                .busy_form(busy),
        )
        .await;
        let started = Instant::now();
        let answer = if listen {
            let proxy = Proxy::start(&emulator, &["--timeout", "3s", "--listen", "127.0.0.1:0"]);
            http_of(&proxy).await.ask(initialize(1), ANSWER).await
        } else {
            let mut proxy = Proxy::start(&emulator, &["--timeout", "3s"]);
            proxy.ask(initialize(1), ANSWER).await
        };
        // Delivered within the ceiling, not cut by it.
        assert!(started.elapsed() < Duration::from_secs(6), "{answer}");
        let error = answer["error"].clone();
        assert!(
            !error["message"].as_str().unwrap().contains("--timeout"),
            "{error}"
        );
        assert_form(&error, form, (-32005, SESSION_BUSY_MESSAGE), 409);
        let audit = emulator.audit();
        assert_eq!(
            audit.busy_refusals as usize,
            error["data"]["attempts"].as_array().map_or(0, Vec::len),
            "each attempt recorded: {error}"
        );
        error
    })
    .await;
    assert_said_alike(
        &delivered,
        "session_busy",
        "RetryableConflictException",
        None,
    );
}

/// A `tools/call` throttled on each of its three attempts (the throttle's allowance), in either
/// form — HTTP 200 with -32003, or HTTP 429 — is answered with `throttled` and the record of
/// the three; the tool never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_delivered_says_throttled_in_either_form() {
    let delivered = each_form_and_transport(|form, listen| async move {
        let emulator = start_emulator(EmulatorConfig::default()).await;
        let throttled = Fault::Platform {
            error: PlatformError::Throttling,
            form,
        };
        let add = call(2, "add", json!({"a": 1, "b": 2}));
        let answer = if listen {
            let proxy = Proxy::start(&emulator, &["--listen", "127.0.0.1:0"]);
            let mut client = http_of(&proxy).await;
            client.ask(initialize(1), ANSWER).await;
            client.tell(initialized()).await;
            for _ in 0..3 {
                emulator.push_fault(throttled);
            }
            client.ask(add, ANSWER).await
        } else {
            let mut proxy = Proxy::start(&emulator, &[]);
            proxy.open().await;
            for _ in 0..3 {
                emulator.push_fault(throttled);
            }
            proxy.ask(add, ANSWER).await
        };
        let error = answer["error"].clone();
        assert_form(&error, form, (-32003, THROTTLED_MESSAGE), 429);
        let audit = emulator.audit();
        assert_eq!(audit.throttled, 3, "{audit:?}");
        assert_eq!(audit.executions_of("add"), 0, "{audit:?}");
        error
    })
    .await;
    assert_said_alike(&delivered, "throttled", "ThrottlingException", Some(3));
}

// ---------------------------------------------------------------------------------------------
// --header: a Gateway's limits, and a --listen client's header of the same name

const GATEWAY: &str = "https://gw-1.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";
const SECRET: &str = "s3cr3t-value";

/// `--header` for a Gateway is counted against AgentCore's limits at start (exit 2, naming the
/// rule, never a value); `last-event-id` is the transport's at any MCP URL; a plain `--url`
/// is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_for_a_gateway_are_held_to_agentcores_limits_at_start() {
    let gateway = |headers: Vec<String>| header_args(&["--gateway-url", GATEWAY], &headers);
    let many: Vec<String> = (0..21).map(|n| format!("x-tenant-{n}={SECRET}")).collect();
    let cases = [
        (
            gateway(many.clone()),
            "--header is given 21 times; a gateway passes at most 20 custom headers".to_owned(),
        ),
        (
            gateway(vec![format!("x-tenant={SECRET}{}", "s".repeat(4097))]),
            format!(
                "--header x-tenant: the value is {} bytes; AgentCore passes at most 4096 (4 KB)",
                SECRET.len() + 4097
            ),
        ),
        (
            gateway(vec![format!("x-{}={SECRET}", "n".repeat(99))]),
            format!(
                "--header x-{}: the name is 101 characters; a gateway target's header allowlist \
                 takes names of at most 100",
                "n".repeat(99)
            ),
        ),
        (
            gateway(vec![format!("Last-Event-ID={SECRET}")]),
            "--header last-event-id is reserved (the MCP transport sets it to resume a stream): \
             --gateway-url refuses it"
                .to_owned(),
        ),
    ];
    for (args, expected) in cases {
        let (_, stderr) = run(command(&strs(&args), &[]), 2);
        assert!(stderr.contains(&expected), "{expected}\n{stderr}");
        assert!(!stderr.contains(SECRET), "{stderr}");
    }

    // Any other MCP URL: no such count (its limits are its own).
    let args = header_args(
        &["--url", "http://127.0.0.1:9/mcp", "--bearer-token-env", "T"],
        &many,
    );
    let proxy = Proxy::start_with(&strs(&args), &[("T", "a-bearer-token-of-the-test")]);
    proxy.closed_cleanly("nothing was asked").await;
}

/// At the limits, a Gateway is sent every header: 20 of them, each value 4 KB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_headers_of_4_kb_reach_a_gateway() {
    let emulator = start_emulator(EmulatorConfig::default().gateway(true)).await;
    let url = emulator.gateway_url();
    let headers: Vec<String> = (0..20)
        .map(|n| format!("x-tenant-{n}={}", "v".repeat(4096)))
        .collect();
    let args = header_args(&["--gateway-url", &url, "--region", "us-east-1"], &headers);
    let mut proxy = Proxy::start_signed(&emulator, &strs(&args), &[]);
    let answer = proxy.ask(initialize(1), ANSWER).await;
    assert!(answer.get("result").is_some(), "{answer}");
    proxy.closed_cleanly("nothing more").await;
    assert_eq!(emulator.audit().signature_failures, 0);
}

/// A `--listen` client's header that `--header` also sets, with another value, is refused:
/// HTTP 400 with a JSON-RPC error naming the header (never a value), nothing sent. The same
/// value passes, and a request without it is sent with `--header`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_clients_header_that_disagrees_with_header_is_refused() {
    const OURS: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const THEIRS: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let emulator = start_emulator(EmulatorConfig::default().gateway(true)).await;
    let url = emulator.gateway_url();
    let header = format!("traceparent={OURS}");
    let args = listen_args(&["--gateway-url", &url, "--region", "us-east-1"]);
    let args = header_args(&args, &[header]);
    let proxy = Proxy::start_signed(&emulator, &strs(&args), &[]);
    let mut client = http_of(&proxy).await;

    let opening = initialize(1);
    let (status, answer) = post(&mut client, &opening, &[("traceparent", THEIRS)], ANSWER).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "the request's traceparent header is not the one the proxy sets on \
                          every request (--header traceparent)"
        ),
        "{answer}"
    );
    assert!(
        !message.contains(OURS) && !message.contains(THEIRS),
        "{answer}"
    );
    assert_eq!(emulator.audit().requests, 0, "nothing sent");

    // The same value: no conflict.
    let (status, answer) = post(&mut client, &opening, &[("traceparent", OURS)], ANSWER).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    // None: `--header`'s.
    client.tell(initialized()).await;
    let seen: Vec<_> = emulator
        .audit()
        .received
        .iter()
        .map(|r| r.traceparent.clone())
        .collect();
    assert_eq!(seen, [Some(OURS.to_owned()), Some(OURS.to_owned())]);
    let stderr = proxy.stderr();
    assert!(!stderr.contains(THEIRS), "{stderr}");
}
