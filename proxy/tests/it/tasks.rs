//! Jobs longer than an answer may take, through the proxy, for clients that never declare MCP's
//! tasks extension: the emulator's `long_job` runs only as a task, and the proxy (its task
//! layer, on by default, declaring the extension from the first call) answers the client's own `tools/call` with the job's result, over stdio
//! and over `--listen`, in both eras. The emulator runs in real time with a 100 ms poll
//! interval, and its jobs clock moves 80 s every 100 ms ([`JobsClock`](common::JobsClock)): a "40-minute" job ends
//! in about 3 s, longer than `--timeout 2s`, which bounds each request and never the job. A job
//! that asks half-way (`{"ask": true}`) is answered over `--listen` in each era's way (a
//! 2026-07-28 round trip with `requestState`; a 2025 request on the call's stream, answered by
//! a POST). A client's cancel cancels the task: a `notifications/cancelled` in either era over
//! stdio, a 2026-07-28 stream closed over `--listen`. A client that declares the extension
//! itself gets the server's task and polls it itself; `--no-tasks` is the proxy without the
//! layer.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentcore_tower::protocol;
use agentcore_tower_emulator::{Audit, CreatedTask, Emulator, EmulatorConfig};
use serde_json::{Value, json};

use common::{
    HttpClient, JobsClock, LINE_TIMEOUT, Listening, MODERN, Proxy, modern, ran_once_each, request,
    start_emulator,
};

const TIMEOUT: &str = "2s";
const CALL_ID: u64 = 7;
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The emulator, its tasks polled every 100 ms.
async fn emulator() -> Arc<Emulator> {
    let config = EmulatorConfig::default().task_poll_interval(Duration::from_millis(100));
    Arc::new(start_emulator(config).await)
}

/// Two tests of `$run`: `$modern` runs it for a 2026-07-28 client, `$legacy` in a 2025 session.
macro_rules! in_each_era {
    ($run:ident: $modern:ident, $legacy:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $modern() {
            $run(Era::Modern).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $legacy() {
            $run(Era::Legacy).await;
        }
    };
}

/// The protocol era of a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    /// MCP 2026-07-28: the version and the capabilities (no extension) in every request.
    Modern,
    /// A 2025-11-25 session opened with `initialize`.
    Legacy,
}

fn initialize_2025_11_25() -> Value {
    request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "tasks-e2e", "version": "1"}}),
    )
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// The client's `tools/call` of `long_job` (40 minutes), declaring no extension, with a
/// progress token.
fn long_job(era: Era, token: &str) -> Value {
    long_job_with(era, token, json!({}))
}

/// [`long_job`] with `arguments`.
fn long_job_with(era: Era, token: &str, arguments: Value) -> Value {
    let params = json!({"name": "long_job", "arguments": arguments});
    let mut call = match era {
        Era::Modern => modern(CALL_ID, "tools/call", params, false),
        Era::Legacy => request(CALL_ID, "tools/call", params),
    };
    call["params"]["_meta"]["progressToken"] = json!(token);
    call
}

/// The client's answer to a 40-minute `long_job`: a 2026-07-28 result carries its
/// `resultType`.
fn done_after_40_minutes(era: Era) -> Value {
    let mut answer = json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {
        "content": [{"type": "text", "text": "long_job done after 2400 s"}], "isError": false}});
    if era == Era::Modern {
        answer["result"]["resultType"] = json!("complete");
    }
    answer
}

/// The one task `long_job` ran as, once, for the client's call, and the task's runtime
/// session: every task request the emulator received was for that task, on that session, and
/// found it.
fn the_one_task(audit: &Audit) -> (&CreatedTask, &str) {
    ran_once_each(audit, &[("long_job", CALL_ID)]);
    assert_eq!(audit.tasks_created, 1, "{audit:?}");
    let task = &audit.created_tasks[0];
    let session = task
        .runtime_session_id
        .as_deref()
        .expect("a runtime session");
    for request in &audit.task_requests {
        assert_eq!(request.task_id, task.task_id, "{request:?}");
        assert_eq!(
            request.runtime_session_id.as_deref(),
            Some(session),
            "{request:?}"
        );
        assert!(request.found, "{request:?}");
    }
    (task, session)
}

/// How many `tools/call` the emulator received.
fn tools_calls(audit: &Audit) -> usize {
    audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .count()
}

/// What the emulator saw of one client's `long_job`: the call sent once, declaring the
/// extension (the proxy declares it from the first call), the job run once as one task, every poll on the task's runtime
/// session (in the client's MCP session, if any) finding it, the last one done. The task's id
/// and how many polls there were.
fn ran_once_polled_where_it_lives(audit: &Audit) -> (String, usize) {
    let (task, session) = the_one_task(audit);
    // One call made the task: it declared the extension (`long_job` answers -32021 otherwise).
    let calls = tools_calls(audit);
    assert_eq!(calls, 1, "declared from the first: {:?}", audit.received);
    assert!(!audit.task_requests.is_empty());
    for poll in &audit.task_requests {
        assert_eq!(poll.method, "tasks/get", "{poll:?}");
    }
    // Every request of the client in one runtime session and, in a session of the initialize
    // era, in its MCP session (in none in 2026-07-28).
    let mcp_sessions: std::collections::HashSet<_> = audit
        .received
        .iter()
        .inspect(|r| assert_eq!(r.runtime_session_id.as_deref(), Some(session), "{r:?}"))
        .filter(|r| r.method.as_deref() != Some("initialize"))
        .map(|r| r.mcp_session_id.clone())
        .collect();
    assert_eq!(mcp_sessions.len(), 1, "{mcp_sessions:?}");
    assert_eq!(audit.sessions_started, 1);
    assert_eq!(audit.header_mismatches, 0);
    (task.task_id.clone(), audit.task_requests.len())
}

/// One `notifications/progress` for `token` after each poll that found the task working (all
/// but the last), counting up from 1.
fn assert_progress(progress: &[Value], token: &str, task: &str, polls: usize) {
    let expected: Vec<Value> = (1..polls)
        .map(|n| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": token, "progress": n, "message": format!("task {task} is working")}})
        })
        .collect();
    assert_eq!(progress, expected);
}

/// `message` is a `notifications/progress` for `token`.
#[track_caller]
fn assert_progress_of(message: &Value, token: &str) {
    assert_eq!(message["method"], "notifications/progress", "{message}");
    assert_eq!(message["params"]["progressToken"], token, "{message}");
}

/// The emulator (its jobs clock running) and the proxy over stdio with `--timeout 2s`.
async fn over_stdio_with_jobs() -> (Arc<Emulator>, JobsClock, Proxy) {
    let emulator = emulator().await;
    let clock = JobsClock::start(&emulator);
    let proxy = Proxy::start(&emulator, &["--timeout", TIMEOUT]);
    (emulator, clock, proxy)
}

/// A 2025-11-25 session opened over stdio: `initialize` answered in that version, then
/// `notifications/initialized`.
async fn open_2025_session(proxy: &mut Proxy) {
    proxy.send(&initialize_2025_11_25());
    let answer = proxy.next().await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
    proxy.send(&initialized());
}

/// Reads the proxy's stdout up to the answer to `id`: the answer, and the notifications before
/// it.
async fn answer_after_notifications(proxy: &mut Proxy, id: u64) -> (Value, Vec<Value>) {
    let mut notifications = Vec::new();
    loop {
        let message = proxy.next().await;
        if message.get("method").is_some() {
            notifications.push(message);
        } else {
            assert_eq!(message["id"], id, "{message}");
            return (message, notifications);
        }
    }
}

async fn over_stdio(era: Era) {
    let (emulator, _clock, mut proxy) = over_stdio_with_jobs().await;
    if era == Era::Legacy {
        open_2025_session(&mut proxy).await;
    }
    let started = Instant::now();
    proxy.send(&long_job(era, "job-1"));
    let (answer, progress) = answer_after_notifications(&mut proxy, CALL_ID).await;
    assert_eq!(answer, done_after_40_minutes(era), "{era:?}");
    // Longer than --timeout: it bounded the requests, never the job.
    assert!(started.elapsed() > Duration::from_secs(2), "{era:?}");
    let proxy = proxy.closed_cleanly("nothing after the answer").await;
    let (task, polls) = ran_once_polled_where_it_lives(&emulator.audit());
    assert_progress(&progress, "job-1", &task, polls);
    assert!(
        proxy
            .stderr()
            .contains("the call became a task; polling it"),
        "{}",
        proxy.stderr()
    );
}

in_each_era!(
    over_stdio:
    over_stdio_a_40_minute_job_completes_for_a_2026_client_that_never_declared_tasks,
    over_stdio_a_40_minute_job_completes_in_a_2025_session_that_never_declared_tasks
);

/// The emulator (its jobs clock running), the proxy over `--listen` with `--timeout 2s`, and a
/// client of it in `era`.
async fn over_listen_with_jobs(era: Era) -> (Arc<Emulator>, JobsClock, Listening, HttpClient) {
    let emulator = emulator().await;
    let clock = JobsClock::start(&emulator);
    let listening = Listening::start(&emulator, &["--timeout", TIMEOUT]).await;
    let client = listen_client(&listening, era).await;
    (emulator, clock, listening, client)
}

/// A client of `--listen` in `era`: a 2025 session opened, or the 2026-07-28 version named.
async fn listen_client(listening: &Listening, era: Era) -> HttpClient {
    let mut client = HttpClient::new(&listening.url, None);
    match era {
        Era::Modern => client.protocol_version = Some(MODERN.into()),
        Era::Legacy => {
            let answer = client
                .exchange(&initialize_2025_11_25(), &[], LINE_TIMEOUT)
                .await;
            assert_eq!(answer.status, 200, "{answer:?}");
            assert_eq!(client.protocol_version.as_deref(), Some("2025-11-25"));
            assert_eq!(client.post(&initialized()).await.status, 202);
        }
    }
    client
}

/// The standard headers of a 2026-07-28 request (`Mcp-Method`, `Mcp-Name`); none for a 2025
/// one.
fn standard_headers(era: Era, message: &Value) -> Vec<(String, String)> {
    match era {
        Era::Modern => protocol::request_headers(message, None)
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect(),
        Era::Legacy => vec![],
    }
}

fn as_strs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

async fn over_listen(era: Era) {
    let (emulator, _clock, listening, client) = over_listen_with_jobs(era).await;
    let call = long_job(era, "job-2");
    let headers = standard_headers(era, &call);
    let started = Instant::now();
    let answer = client.send("POST", Some(&call), &as_strs(&headers)).await;
    assert!(started.elapsed() > Duration::from_secs(2), "{era:?}");
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut events = answer.events();
    let last = events.pop().unwrap();
    assert_eq!(last, done_after_40_minutes(era), "{era:?}");
    let (task, polls) = ran_once_polled_where_it_lives(&emulator.audit());
    assert_progress(&events, "job-2", &task, polls);
    listening.terminated_cleanly().await;
}

in_each_era!(
    over_listen:
    over_listen_a_40_minute_job_completes_for_a_2026_client_that_never_declared_tasks,
    over_listen_a_40_minute_job_completes_in_a_2025_session_that_never_declared_tasks
);

/// Waits (at most `limit`) for the emulator to receive `tasks/cancel`: it was the last task
/// request, for the one task `long_job` created, on the task's runtime session, and found it.
/// The task.
async fn task_cancelled_within(emulator: &Emulator, limit: Duration, proxy: &Proxy) -> CreatedTask {
    let deadline = Instant::now() + limit;
    while !emulator
        .audit()
        .task_requests
        .iter()
        .any(|r| r.method == "tasks/cancel")
    {
        assert!(
            Instant::now() < deadline,
            "no tasks/cancel within {limit:?}: {}",
            proxy.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let audit = emulator.audit();
    ran_once_each(&audit, &[("long_job", CALL_ID)]);
    assert_eq!(audit.tasks_created, 1, "{audit:?}");
    let task = audit.created_tasks[0].clone();
    let cancels: Vec<_> = audit
        .task_requests
        .iter()
        .filter(|r| r.method == "tasks/cancel")
        .collect();
    assert_eq!(cancels.len(), 1, "{:?}", audit.task_requests);
    let cancel = audit.task_requests.last().unwrap();
    assert_eq!(cancel.method, "tasks/cancel");
    assert_eq!(cancel.task_id, task.task_id);
    assert_eq!(cancel.runtime_session_id, task.runtime_session_id);
    assert!(cancel.found, "the emulator held it: {cancel:?}");
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_clients_cancel_cancels_the_task_on_the_emulator() {
    let (emulator, _clock, mut proxy) = over_stdio_with_jobs().await;
    proxy.send(&long_job(Era::Modern, "job-3"));
    // The task works: its first progress reached the client.
    let first = proxy.next().await;
    assert_progress_of(&first, "job-3");
    proxy.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": CALL_ID, "reason": "the user gave up"}}),
    );
    let task = task_cancelled_within(&emulator, LINE_TIMEOUT, &proxy).await;
    // The emulator holds it cancelled, as a client that declares the extension reads it.
    let get = modern(8, "tasks/get", json!({"taskId": task.task_id}), true);
    proxy.send(&get);
    let (answer, _) = answer_after_notifications(&mut proxy, 8).await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
    let (_, status, proxy) = proxy.close().await;
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());
    never_answered(&proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tasks_the_refusal_reaches_the_client_as_it_came() {
    let refused = json!({"code": -32021, "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}});
    for era in [Era::Modern, Era::Legacy] {
        let emulator = emulator().await;
        let mut proxy = Proxy::start(&emulator, &["--timeout", TIMEOUT, "--no-tasks"]);
        if era == Era::Legacy {
            open_2025_session(&mut proxy).await;
        }
        proxy.send(&long_job(era, "job-4"));
        let answer = proxy.next().await;
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": CALL_ID, "error": refused}),
            "{era:?}"
        );
        proxy.closed_cleanly("nothing more").await;
        let audit = emulator.audit();
        assert!(audit.executions.is_empty(), "{audit:?}");
        assert_eq!(audit.tasks_created, 0);
        assert!(audit.task_requests.is_empty());
        let calls = tools_calls(&audit);
        assert_eq!(calls, 1, "sent once, as the client wrote it");
    }
}

/// `long_job`'s one request for input, half-way (the emulator's `inputRequests["approve-1"]`).
fn approve_request() -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form",
        "message": "long_job is half done: go on?",
        "requestedSchema": {"type": "object", "properties": {"proceed": {"type": "boolean"}},
            "required": ["proceed"]}}})
}

/// The user's answer: go on.
fn go_on() -> Value {
    json!({"action": "accept", "content": {"proceed": true}})
}

/// An answer of `--listen` whose event stream is read as it comes.
struct EventStream {
    body: hyper::body::Incoming,
    /// What came and is not a whole event yet.
    pending: String,
}

impl EventStream {
    /// POSTs `message` with the client's headers and `extra`: the answer must be an event
    /// stream (HTTP 200), left to read.
    async fn post(client: &HttpClient, message: &Value, extra: &[(&str, &str)]) -> EventStream {
        let mut request = http::Request::post(&client.url);
        for (name, value) in client.headers(extra) {
            request = request.header(name, value);
        }
        let request = request
            .body(http_body_util::Full::new(bytes::Bytes::from(
                message.to_string(),
            )))
            .unwrap();
        let answer = tokio::time::timeout(LINE_TIMEOUT, client.client.request(request))
            .await
            .expect("an answer in time")
            .expect("the endpoint answers");
        assert_eq!(answer.status(), 200, "{answer:?}");
        assert_eq!(
            answer.headers()["content-type"],
            "text/event-stream",
            "{answer:?}"
        );
        EventStream {
            body: answer.into_body(),
            pending: String::new(),
        }
    }

    /// The next event's message (comments are skipped); `None` once the stream ended. Panics
    /// after [`LINE_TIMEOUT`] without one.
    async fn next(&mut self) -> Option<Value> {
        use http_body_util::BodyExt;
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let event: String = self.pending.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(&data.join("\n")).unwrap());
            }
            let frame = tokio::time::timeout(LINE_TIMEOUT, self.body.frame())
                .await
                .unwrap_or_else(|_| panic!("no event within {LINE_TIMEOUT:?}: {:?}", self.pending));
            let Some(frame) = frame else {
                assert_eq!(self.pending.trim(), "", "a partial event at the end");
                return None;
            };
            if let Ok(data) = frame.unwrap().into_data() {
                self.pending.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    }

    /// The messages up to the end of the stream.
    async fn rest(mut self) -> Vec<Value> {
        let mut messages = Vec::new();
        while let Some(message) = self.next().await {
            messages.push(message);
        }
        messages
    }
}

/// Each of `messages` is a `notifications/progress` for `token`.
fn all_progress(messages: &[Value], token: &str) {
    for message in messages {
        assert_eq!(message["method"], "notifications/progress", "{messages:?}");
        assert_eq!(message["params"]["progressToken"], token, "{messages:?}");
    }
}

/// What the emulator saw of a `long_job` that asked once and was answered: one execution, one
/// task, every task request on the task's runtime session and finding it, exactly one
/// `tasks/update` (between polls), `tools/call` received once (a 2026-07-28 client's second
/// call never reached it). The task's id.
fn asked_once_answered_once(audit: &Audit) -> String {
    let (task, _) = the_one_task(audit);
    let methods: Vec<&str> = audit
        .task_requests
        .iter()
        .map(|r| r.method.as_str())
        .collect();
    let updates = methods.iter().filter(|m| **m == "tasks/update").count();
    assert_eq!(updates, 1, "{methods:?}");
    assert!(
        methods
            .iter()
            .all(|m| *m == "tasks/update" || *m == "tasks/get"),
        "{methods:?}"
    );
    assert_eq!(methods.first(), Some(&"tasks/get"), "{methods:?}");
    assert_eq!(methods.last(), Some(&"tasks/get"), "{methods:?}");
    let calls = tools_calls(audit);
    assert_eq!(calls, 1, "{:?}", audit.received);
    // No response of the client's to a request the proxy put to it reached the emulator.
    let ids: Vec<&str> = audit
        .received
        .iter()
        .filter_map(|r| r.id.as_deref())
        .collect();
    assert!(
        ids.iter()
            .all(|id| !id.contains("agentcore-tower/tasks/input/")),
        "{ids:?}"
    );
    assert_eq!(audit.header_mismatches, 0);
    task.task_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_2026_client_answers_the_jobs_question_in_a_round_trip() {
    let (emulator, _clock, listening, client) = over_listen_with_jobs(Era::Modern).await;
    let call = long_job_with(Era::Modern, "job-5", json!({"ask": true}));
    let headers = standard_headers(Era::Modern, &call);
    let mut first = EventStream::post(&client, &call, &as_strs(&headers))
        .await
        .rest()
        .await;
    // Half-way, the job's question, as the revision's round trip: a state to call again with.
    let asked = first.pop().unwrap();
    all_progress(&first, "job-5");
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {asked}"))
        .to_owned();
    assert_eq!(
        asked,
        json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {"resultType": "input_required",
            "inputRequests": {"approve-1": approve_request()}, "requestState": state}})
    );
    let again = modern(
        8,
        "tools/call",
        json!({"name": "long_job", "arguments": {"ask": true},
            "inputResponses": {"approve-1": go_on()}, "requestState": state}),
        false,
    );
    let headers = standard_headers(Era::Modern, &again);
    let answer = client.send("POST", Some(&again), &as_strs(&headers)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut done = done_after_40_minutes(Era::Modern);
    done["id"] = json!(8);
    assert_eq!(answer.last_message(), done, "{answer:?}");
    asked_once_answered_once(&emulator.audit());
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_2025_session_is_asked_on_the_calls_stream_and_answers_with_a_post() {
    let (emulator, _clock, listening, client) = over_listen_with_jobs(Era::Legacy).await;
    let call = long_job_with(Era::Legacy, "job-6", json!({"ask": true}));
    let mut stream = EventStream::post(&client, &call, &[]).await;
    // Progress while the job works, then the server's request, under an id of the proxy's.
    let mut before = Vec::new();
    let asked = loop {
        let message = stream.next().await.expect("the question before the end");
        if message["method"] == "elicitation/create" {
            break message;
        }
        before.push(message);
    };
    all_progress(&before, "job-6");
    assert!(!before.is_empty(), "the job worked before it asked");
    assert_eq!(asked["params"], approve_request()["params"], "{asked}");
    let id = asked["id"].as_str().unwrap_or_else(|| panic!("{asked}"));
    assert!(id.starts_with("agentcore-tower/tasks/input/"), "{id}");
    // The client's response, POSTed in its session, is taken (202), and the job goes on.
    let taken = client
        .post(&json!({"jsonrpc": "2.0", "id": id, "result": go_on()}))
        .await;
    assert_eq!(taken.status, 202, "{taken:?}");
    assert!(taken.body.is_empty(), "{taken:?}");
    let mut after = stream.rest().await;
    assert_eq!(after.pop(), Some(done_after_40_minutes(Era::Legacy)));
    all_progress(&after, "job-6");
    assert!(!after.is_empty(), "the job worked after the answer");
    asked_once_answered_once(&emulator.audit());
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_2025_clients_cancel_cancels_the_task_and_the_call_is_never_answered() {
    let (emulator, _clock, mut proxy) = over_stdio_with_jobs().await;
    open_2025_session(&mut proxy).await;
    proxy.send(&long_job(Era::Legacy, "job-7"));
    // The task works: its first progress reached the client.
    let first = proxy.next().await;
    assert_progress_of(&first, "job-7");
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": CALL_ID, "reason": "the user gave up"}});
    proxy.send(&cancelled);
    let task = task_cancelled_within(&emulator, LINE_TIMEOUT, &proxy).await;
    // The notification went on to the server too, in the client's session.
    let audit = emulator.audit();
    let passed: Vec<_> = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("notifications/cancelled"))
        .collect();
    assert_eq!(passed.len(), 1, "{:?}", audit.received);
    assert_eq!(passed[0].runtime_session_id, task.runtime_session_id);
    // The emulator holds it cancelled, as a client that declares the extension reads it; what
    // came before that answer is the call's progress, never its answer.
    let mut get = request(8, "tasks/get", json!({"taskId": task.task_id}));
    get["params"]["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities":
        {"extensions": {TASKS: {}}}});
    proxy.send(&get);
    let (answer, before) = answer_after_notifications(&mut proxy, 8).await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
    all_progress(&before, "job-7");
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "nothing after stdin closed");
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());
    never_answered(&proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_2025_clients_cancel_cancels_the_task_and_the_call_is_never_answered() {
    let (emulator, _clock, listening, client) = over_listen_with_jobs(Era::Legacy).await;
    let mut stream = EventStream::post(&client, &long_job(Era::Legacy, "job-9"), &[]).await;
    let first = stream.next().await.expect("an event");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": CALL_ID, "reason": "the user gave up"}});
    assert_eq!(client.post(&cancelled).await.status, 202);
    task_cancelled_within(&emulator, LINE_TIMEOUT, &listening.proxy).await;
    // The call's stream ends with its progress only: no answer, not even an error.
    let rest = stream.rest().await;
    all_progress(&rest, "job-9");
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_listen_a_2026_client_that_drops_the_stream_has_the_task_cancelled() {
    let (emulator, _clock, listening, client) = over_listen_with_jobs(Era::Modern).await;
    let call = long_job(Era::Modern, "job-8");
    let headers = standard_headers(Era::Modern, &call);
    let mut stream = EventStream::post(&client, &call, &as_strs(&headers)).await;
    let first = stream.next().await.expect("an event");
    assert_progress_of(&first, "job-8");
    // The client goes away: the revision's cancel.
    drop(stream);
    task_cancelled_within(&emulator, Duration::from_secs(3), &listening.proxy).await;
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_client_that_declares_tasks_gets_the_servers_task_and_polls_it_itself() {
    let (emulator, _clock, mut proxy) = over_stdio_with_jobs().await;
    let call = modern(
        CALL_ID,
        "tools/call",
        json!({"name": "long_job", "arguments": {}}),
        true,
    );
    proxy.send(&call);
    let handle = proxy.next().await;
    let task = emulator.audit().created_tasks[0].task_id.clone();
    let result = &handle["result"];
    let created = result["createdAt"].clone();
    assert!(created.is_string(), "{handle}");
    assert_eq!(
        handle,
        json!({"jsonrpc": "2.0", "id": CALL_ID, "result": {"resultType": "task",
            "taskId": task, "status": "working", "createdAt": created,
            "lastUpdatedAt": created, "ttlMs": 3_600_000, "pollIntervalMs": 100}})
    );
    // The client polls; each poll and its answer pass as they are.
    let mut polls = 0;
    let last = loop {
        polls += 1;
        let id = 100 + polls;
        proxy.send(&modern(id, "tasks/get", json!({"taskId": task}), true));
        let answer = proxy.next().await;
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["taskId"], task, "{answer}");
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        match answer["result"]["status"].as_str() {
            Some("working") => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => break answer,
        }
    };
    assert_eq!(last["result"]["status"], "completed", "{last}");
    assert_eq!(
        last["result"]["result"],
        json!({"content": [{"type": "text", "text": "long_job done after 2400 s"}],
            "isError": false}),
        "{last}"
    );
    let proxy = proxy.closed_cleanly("nothing after the last poll").await;
    // The proxy polled nothing of its own: the task requests are exactly the client's.
    let audit = emulator.audit();
    ran_once_each(&audit, &[("long_job", CALL_ID)]);
    assert_eq!(audit.tasks_created, 1);
    let session = audit.created_tasks[0].runtime_session_id.clone();
    assert_eq!(
        audit.task_requests.len(),
        polls as usize,
        "{:?}",
        audit.task_requests
    );
    for poll in &audit.task_requests {
        assert_eq!(poll.method, "tasks/get", "{poll:?}");
        assert_eq!(poll.task_id, task, "{poll:?}");
        assert_eq!(poll.runtime_session_id, session, "{poll:?}");
        assert!(poll.found, "{poll:?}");
    }
    let calls = tools_calls(&audit);
    assert_eq!(calls, 1, "{:?}", audit.received);
    assert!(
        !proxy.stderr().contains("the call became a task"),
        "{}",
        proxy.stderr()
    );
}

/// No line the proxy wrote answers the client's call (it cancelled it).
fn never_answered(proxy: &Proxy) {
    let answered = proxy.stdout_seen.iter().any(|line| {
        let message: Value = serde_json::from_str(line).unwrap();
        message["id"] == CALL_ID && message.get("method").is_none()
    });
    assert!(
        !answered,
        "no answer to the cancelled call: {:?}",
        proxy.stdout_seen
    );
}
