//! `ProtocolBridgeLayer` end to end: a client of MCP 2025-11-25 (its `initialize`, its session,
//! its requests written by hand) over the bridge, `McpSessionRecoveryLayer` and the recommended
//! stack, against the emulator of each era. At a server that speaks only 2026-07-28 the client
//! is bridged: its `initialize` refused, answered from the bridge's one `server/discover`, its
//! requests sent as 2026-07-28 writes them, `ping`, notifications and DELETE answered by the
//! bridge, its GET of the server's stream carried on a `subscriptions/listen`. Where the eras
//! match nothing changes. A refusal of AgentCore's own is never taken for another era. And the
//! task layer above the bridge, and rmcp's client of the `initialize` era over it.
//!
//! The other direction: a client pinned to 2026-07-28 (written by hand) over the bridge with
//! `bridge_modern_clients()`, against a server of the `initialize` era answering JSON or event
//! streams: its refused `server/discover` answered from the MCP session the bridge opens
//! (what the bridge hands down is recorded below it), its requests sent in that session with
//! the negotiated version and none of the revision's `_meta`, their results given
//! `resultType`; a second client in the same session; off by default; nothing changes at a
//! server of both eras.

use crate::audit::one_runtime_session;
use crate::common::stack::{Answered, Stack, read_whole, send_through};
use crate::common::{http_client, mcp_post};
use crate::emulator::start;
use crate::emulator_eras::EVERY_VERSION;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::bridge::ProtocolBridgeLayer;
use agentcore_tower::invoke::SigV4InvokeLayer;
use agentcore_tower::tasks::TaskPollingLayer;
use agentcore_tower::{McpSessionRecoveryLayer, ReplayGuardLayer, recommended_layers};
use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig, Fault};
use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::util::Either;
use tower::{ServiceBuilder, ServiceExt};

/// The URL a runtime's requests are written for (the signer decides where they go).
const RUNTIME_URL: &str = "http://agentcore.invalid/mcp";
/// The id of the bridge's own `server/discover`.
const DISCOVER_ID: &str = "agentcore-tower/bridge/discover";
/// What the client says of itself.
const CLIENT: &str = "bridge-e2e";

const TOOLS_2025: [&str; 3] = ["add", "echo", "counter"];
const TOOLS_2026: [&str; 7] = [
    "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job",
];

/// The three servers: of both eras (the default), of the `initialize` era only, of 2026-07-28
/// only.
fn both() -> EmulatorConfig {
    EmulatorConfig::default()
}

fn legacy_only() -> EmulatorConfig {
    EmulatorConfig::default().newest_protocol_version("2025-11-25")
}

fn modern_only() -> EmulatorConfig {
    EmulatorConfig::default().oldest_protocol_version("2026-07-28")
}

/// Where the client's stack sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Door {
    /// `SigV4InvokeLayer`: `InvokeAgentRuntime`.
    Runtime,
    /// `McpEndpointLayer` to the emulator's Gateway: requests (their `Mcp-Param-*` headers
    /// too) go as they are.
    Gateway,
}

/// The bridge over `McpSessionRecoveryLayer`, the recommended layers and `door`'s signer, over
/// hyper-util's client: answers read whole.
fn stack(emulator: &Emulator, door: Door, bridge: &ProtocolBridgeLayer) -> Stack {
    let guard = ReplayGuardLayer::new();
    let signed = match door {
        Door::Runtime => Either::Left(recommended_layers(
            guard,
            emulator.signer().build().unwrap(),
        )),
        Door::Gateway => Either::Right(recommended_layers(
            guard,
            emulator.endpoint_signer().build().unwrap(),
        )),
    };
    read_whole(
        ServiceBuilder::new()
            .layer(bridge.clone())
            .layer(McpSessionRecoveryLayer::new())
            .layer(signed)
            .service(http_client()),
    )
}

/// `TaskPollingLayer` above the runtime's [`stack`].
fn stack_with_tasks(emulator: &Emulator, bridge: &ProtocolBridgeLayer) -> Stack {
    read_whole(
        ServiceBuilder::new()
            .layer(TaskPollingLayer::new())
            .layer(bridge.clone())
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(
                ReplayGuardLayer::new(),
                emulator.signer().build().unwrap(),
            ))
            .service(http_client()),
    )
}

/// An emulator started with `config`, a bridge, and a client over it at `door`.
async fn bridged(config: EmulatorConfig, door: Door) -> (Emulator, ProtocolBridgeLayer, Client) {
    let emulator = start(config).await;
    let bridge = ProtocolBridgeLayer::new();
    let client = Client::at(&emulator, door, &bridge);
    (emulator, bridge, client)
}

/// A client of 2025-11-25, written by hand: raw POSTs, its session's id and version on each
/// request after `initialize`.
struct Client {
    stack: Stack,
    url: String,
    session: Option<String>,
}

impl Client {
    /// A client over the bridge and `door`'s stack to `emulator`.
    fn at(emulator: &Emulator, door: Door, bridge: &ProtocolBridgeLayer) -> Client {
        Client::new(stack(emulator, door, bridge), door, emulator)
    }

    fn new(stack: Stack, door: Door, emulator: &Emulator) -> Client {
        let url = match door {
            Door::Runtime => RUNTIME_URL.to_owned(),
            Door::Gateway => emulator.gateway_url(),
        };
        Client {
            stack,
            url,
            session: None,
        }
    }

    /// A request of the client's: `method`, `message` as its body (none for GET and DELETE),
    /// its session's headers once it has one.
    fn request(&self, method: Method, message: Option<&Value>) -> Request<Full<Bytes>> {
        let body = message.map(Value::to_string).unwrap_or_default();
        let mut request = mcp_post(&self.url, self.session.as_deref(), body);
        *request.method_mut() = method;
        if self.session.is_some() {
            request.headers_mut().insert(
                "mcp-protocol-version",
                HeaderValue::from_static("2025-11-25"),
            );
        }
        request
    }

    async fn send(&self, method: Method, message: Option<&Value>) -> Answered {
        send_through(&self.stack, self.request(method, message)).await
    }

    async fn post(&self, message: &Value) -> Answered {
        self.send(Method::POST, Some(message)).await
    }

    /// `initialize` at 2025-11-25: the answer, whose session the client keeps.
    async fn initialize(&mut self) -> Answered {
        let answer = self.post(&initialize(0)).await;
        self.session = answer.session.clone();
        answer
    }

    /// `initialize`, then `notifications/initialized`, which must be answered 202.
    async fn open(&mut self) -> Answered {
        let answer = self.initialize().await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let accepted = self.post(&initialized).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{accepted:?}");
        assert_eq!(accepted.json, Value::Null);
        answer
    }

    /// `tools/list`: the tools' names.
    async fn tool_names(&self, id: u64) -> Vec<String> {
        let answer = self.post(&request(id, "tools/list", json!({}))).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        listed_names(&answer.json, &answer)
    }

    async fn call(&self, id: u64, tool: &str, arguments: Value) -> Answered {
        let params = json!({"name": tool, "arguments": arguments});
        self.post(&request(id, "tools/call", params)).await
    }
}

/// The tools' names in `listing`, a `tools/list` answer (`answer` says what came, if it is not).
fn listed_names(listing: &Value, answer: &impl std::fmt::Debug) -> Vec<String> {
    listing["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a listing: {answer:?}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize(id: u64) -> Value {
    request(
        id,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": CLIENT, "version": "1"}}),
    )
}

/// A tool's result as a server of `era` answers it: 2026-07-28 names its `resultType`, which
/// the bridge passes on as it came.
fn tool_result(id: u64, text: &str, modern: bool) -> Value {
    let mut answer = json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}], "isError": false}});
    if modern {
        answer["result"]["resultType"] = json!("complete");
    }
    answer
}

/// What the emulator received: each request's JSON-RPC method, `Mcp-Method`, `Mcp-Name` and
/// whether it named an MCP session.
fn received(audit: &Audit) -> Vec<(String, Option<String>, Option<String>, bool)> {
    audit
        .received
        .iter()
        .map(|r| {
            (
                r.method.clone().unwrap_or_default(),
                r.mcp_method.clone(),
                r.mcp_name.clone(),
                r.mcp_session_id.is_some(),
            )
        })
        .collect()
}

/// A row of [`received`].
fn row(
    method: &str,
    mcp_method: Option<&str>,
    name: Option<&str>,
    session: bool,
) -> (String, Option<String>, Option<String>, bool) {
    (
        method.to_owned(),
        mcp_method.map(str::to_owned),
        name.map(str::to_owned),
        session,
    )
}

/// A 2026-07-28 request of the bridge's, as the emulator saw it: its `Mcp-Method` and
/// `Mcp-Name`, no MCP session.
fn modern(method: &str, name: Option<&str>) -> (String, Option<String>, Option<String>, bool) {
    row(method, Some(method), name, false)
}

/// The refused `initialize`, then the bridge's `server/discover`, as the emulator received
/// them.
fn refused_then_discovered() -> Vec<(String, Option<String>, Option<String>, bool)> {
    vec![
        row("initialize", None, None, false),
        modern("server/discover", None),
    ]
}

/// The client's `initialize` answered by the bridge from the emulator's discovery.
fn assert_bridged_initialize(answer: &Answered, bridge: &ProtocolBridgeLayer) {
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json,
        json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true},
                "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "serverInfo": {"name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")}}}),
        "{answer:?}"
    );
    let session = answer.session.as_deref().expect("an Mcp-Session-Id");
    assert_eq!(session.len(), 32, "the bridge's own: {session}");
    assert!(bridge.bridges());
}

#[tokio::test(start_paused = true)]
async fn a_2025_client_at_a_modern_only_runtime_is_bridged_end_to_end() {
    let (emulator, bridge, mut client) = bridged(modern_only(), Door::Runtime).await;
    assert!(!bridge.bridges(), "not known before the first initialize");

    let opened = client.open().await;
    assert_bridged_initialize(&opened, &bridge);
    assert_eq!(bridge.sessions(), 1);
    // `notifications/initialized` never reached the emulator.
    assert_eq!(received(&emulator.audit()), refused_then_discovered());

    assert_eq!(client.tool_names(1).await, TOOLS_2026);
    let added = client.call(2, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(added.status, StatusCode::OK, "{added:?}");
    assert_eq!(added.json, tool_result(2, "5", true));

    // The revision has no `ping`: the bridge answers it.
    let pong = client.post(&request(3, "ping", json!({}))).await;
    assert_eq!(pong.status, StatusCode::OK);
    assert_eq!(pong.json, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));

    let audit = emulator.audit();
    let mut expected = refused_then_discovered();
    expected.extend([
        modern("tools/list", None),
        modern("tools/call", Some("add")),
    ]);
    assert_eq!(received(&audit), expected, "{:?}", audit.received);
    assert_eq!(audit.received[1].id, Some(format!("{DISCOVER_ID:?}")));
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(
        audit.executions.values().sum::<u64>(),
        1,
        "nothing else ran"
    );
    assert_eq!(audit.mcp_sessions_started, 0);
    assert_eq!(audit.header_mismatches, 0);
    one_runtime_session(&audit, 1);

    // The DELETE ends the session at the bridge: nothing is sent.
    let ended = client.send(Method::DELETE, None).await;
    assert_eq!(ended.status, StatusCode::OK, "{ended:?}");
    assert_eq!(bridge.sessions(), 0);
    assert_eq!(emulator.audit().received.len(), 4);
    // The session is unknown to the bridge now: its next request goes as the client wrote it,
    // and the modern-only server refuses it; nothing runs.
    let late = client.call(4, "add", json!({"a": 1, "b": 1})).await;
    assert_eq!(late.status, StatusCode::BAD_REQUEST, "{late:?}");
    assert_eq!(
        late.json,
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602,
            "message": "Invalid params: request requires protocolVersion in request _meta"}})
    );
    let audit = emulator.audit();
    assert_eq!(
        received(&audit)[4],
        row("tools/call", Some("tools/call"), Some("add"), true)
    );
    assert_eq!(audit.executions_of("add"), 1);
}

/// Through the URL door, the bridge writes `weather`'s `Mcp-Param-City` from the listing it
/// learned, and the emulator, which checks it against the body, runs the call.
#[tokio::test(start_paused = true)]
async fn a_bridged_call_carries_the_param_headers_the_listing_annotates() {
    let (emulator, bridge, mut client) = bridged(modern_only().gateway(true), Door::Gateway).await;
    assert_bridged_initialize(&client.open().await, &bridge);
    assert_eq!(client.tool_names(1).await, TOOLS_2026);
    let weather = client.call(2, "weather", json!({"city": "Zürich"})).await;
    assert_eq!(weather.status, StatusCode::OK, "{weather:?}");
    assert_eq!(weather.json, tool_result(2, "Sunny in Zürich", true));
    let added = client.call(3, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(added.json, tool_result(3, "5", true));

    let audit = emulator.audit();
    let mut expected = refused_then_discovered();
    expected.extend([
        modern("tools/list", None),
        modern("tools/call", Some("weather")),
        modern("tools/call", Some("add")),
    ]);
    assert_eq!(received(&audit), expected, "{:?}", audit.received);
    assert_eq!(audit.header_mismatches, 0);
    assert_eq!(audit.executions_of("weather"), 1);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.mcp_sessions_started, 0);
}

/// At the runtime door the same call is refused: `InvokeAgentRuntime` models no `Mcp-Param-*`
/// header (README, "Protocol versions, door by door"), so the emulator's check fails; the
/// refusal reaches the client as it came, and nothing ran.
#[tokio::test(start_paused = true)]
async fn a_bridged_call_needing_a_param_header_is_refused_at_the_runtime_door() {
    let (emulator, _bridge, mut client) = bridged(modern_only(), Door::Runtime).await;
    client.open().await;
    assert_eq!(client.tool_names(1).await, TOOLS_2026);
    let weather = client.call(2, "weather", json!({"city": "Zürich"})).await;
    assert_eq!(weather.status, StatusCode::BAD_REQUEST, "{weather:?}");
    assert_eq!(weather.json["error"]["code"], -32020, "{weather:?}");
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("weather"), 0);
    assert_eq!(audit.header_mismatches, 1);
}

/// Each client's `initialize` is sent, and refused: the runtime session it went to is the
/// bridged session's, which each of its requests names.
#[tokio::test(start_paused = true)]
async fn a_second_client_is_bridged_in_the_runtime_session_its_initialize_went_to() {
    let (emulator, bridge, mut first) = bridged(modern_only(), Door::Runtime).await;
    let mut second = Client::at(&emulator, Door::Runtime, &bridge);
    let one = first.open().await;
    let two = second.open().await;
    assert_bridged_initialize(&two, &bridge);
    assert_ne!(one.session, two.session, "a session each");
    assert_eq!(bridge.sessions(), 2);
    assert_eq!(
        second.call(1, "add", json!({"a": 4, "b": 5})).await.json,
        tool_result(1, "9", true)
    );

    // Each client's initialize refused and its discovery; then the second client's call, in
    // the runtime session of the second initialize.
    let audit = emulator.audit();
    let mut expected = refused_then_discovered();
    expected.extend(refused_then_discovered());
    expected.push(modern("tools/call", Some("add")));
    assert_eq!(received(&audit), expected, "{:?}", audit.received);
    let sessions: Vec<_> = audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone())
        .collect();
    assert_ne!(sessions[0], sessions[2], "a runtime session each");
    assert_eq!(
        sessions[2..],
        [
            sessions[2].clone(),
            sessions[2].clone(),
            sessions[2].clone()
        ]
    );
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.header_mismatches, 0);
}

/// Where the eras match, the bridge is not there: at a server of both eras and at one of the
/// `initialize` era only, the client's session is the emulator's own and no `server/discover`
/// is sent.
#[tokio::test(start_paused = true)]
async fn nothing_changes_where_the_server_speaks_the_clients_era() {
    for (name, config) in [("both", both()), ("legacy only", legacy_only())] {
        let (emulator, bridge, mut client) = bridged(config, Door::Runtime).await;
        let opened = client.open().await;
        assert_eq!(
            opened.json["result"]["protocolVersion"], "2025-11-25",
            "{name}"
        );
        assert_eq!(client.tool_names(1).await, TOOLS_2025, "{name}");
        let added = client.call(2, "add", json!({"a": 2, "b": 3})).await;
        assert_eq!(added.json, tool_result(2, "5", false), "{name}");
        let pong = client.post(&request(3, "ping", json!({}))).await;
        assert_eq!(pong.json, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));

        assert_eq!(bridge.sessions(), 0, "{name}");
        assert!(!bridge.bridges(), "{name}");
        let audit = emulator.audit();
        assert_eq!(
            received(&audit),
            [
                row("initialize", None, None, false),
                row("notifications/initialized", None, None, true),
                row("tools/list", None, None, true),
                row("tools/call", Some("tools/call"), Some("add"), true),
                row("ping", None, None, true),
            ],
            "{name}: {:?}",
            audit.received
        );
        // The client's session is the one the emulator opened.
        assert_eq!(audit.mcp_sessions_started, 1, "{name}");
        assert!(
            audit
                .received
                .iter()
                .skip(1)
                .all(|r| r.mcp_session_id == opened.session),
            "{name}: {:?}",
            audit.received
        );
        assert_eq!(audit.executions_of("add"), 1, "{name}");
        one_runtime_session(&audit, 1);
    }
}

/// A throttle AgentCore answers to every attempt of the client's `initialize`, delivered by the
/// stack after its three: the bridge delivers it as it came and asks no `server/discover`.
#[tokio::test(start_paused = true)]
async fn a_throttled_initialize_is_never_bridged() {
    let (emulator, bridge, mut client) = bridged(modern_only(), Door::Runtime).await;
    for _ in 0..3 {
        emulator.push_request_fault(Fault::Throttle { retry_after: None });
    }
    let answer = client.initialize().await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{answer:?}");
    assert_eq!(answer.session, None);
    assert_eq!(answer.record.len(), 3, "{}", answer.record);
    assert_eq!(emulator.audit().throttled, 3);
    assert_never_bridged(&emulator, &bridge, 3);
}

/// AgentCore's session-busy refusal, delivered by a stack that does not retry it (the bridge
/// right over the signer): the same.
#[tokio::test(start_paused = true)]
async fn a_session_busy_initialize_is_never_bridged() {
    let emulator = start(modern_only()).await;
    emulator.push_request_fault(Fault::Busy);
    let bridge = ProtocolBridgeLayer::new();
    let stack = read_whole(
        ServiceBuilder::new()
            .layer(bridge.clone())
            .layer(emulator.signer().build().unwrap())
            .service(http_client()),
    );
    let mut client = Client::new(stack, Door::Runtime, &emulator);
    let answer = client.initialize().await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.json["error"]["code"], -32005, "{answer:?}");
    assert_eq!(emulator.audit().busy_refusals, 1);
    assert_never_bridged(&emulator, &bridge, 1);
}

/// The emulator received `initializes` `initialize`s and nothing else; the bridge opened
/// nothing.
fn assert_never_bridged(emulator: &Emulator, bridge: &ProtocolBridgeLayer, initializes: usize) {
    let audit = emulator.audit();
    assert_eq!(
        received(&audit),
        vec![row("initialize", None, None, false); initializes],
        "no server/discover: {:?}",
        audit.received
    );
    assert!(audit.executions.is_empty());
    assert!(!bridge.bridges());
    assert_eq!(bridge.sessions(), 0);
}

/// `TaskPollingLayer` above the bridge: a 2025 client's call of `long_job`, a tool that runs
/// only as a task, is answered with its result after 40 minutes; the job ran once, and every
/// request reached the emulator as 2026-07-28 writes it.
#[tokio::test(start_paused = true)]
async fn a_task_only_tool_completes_for_a_bridged_client_through_the_task_layer() {
    const JOB: Duration = Duration::from_secs(40 * 60);
    let emulator = start(modern_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let mut client = Client::new(
        stack_with_tasks(&emulator, &bridge),
        Door::Runtime,
        &emulator,
    );
    assert_bridged_initialize(&client.open().await, &bridge);
    let started = Instant::now();
    // A client that reads JSON only: the task layer answers it once the job ended.
    let call = request(
        7,
        "tools/call",
        json!({"name": "long_job", "arguments": {}}),
    );
    let mut call = client.request(Method::POST, Some(&call));
    call.headers_mut().insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    let answer = send_through(&client.stack, call).await;
    assert_eq!(started.elapsed(), JOB);
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json,
        // The task layer writes the result for the client's era: no `resultType`.
        tool_result(7, "long_job done after 2400 s", false)
    );

    let audit = emulator.audit();
    assert_eq!(audit.tasks_created, 1);
    assert_eq!(
        audit.executions_by_id,
        [(("long_job".to_owned(), "7".to_owned()), 1)].into(),
        "nothing else ran"
    );
    let task = audit.created_tasks[0].task_id.clone();
    // The call refused for want of the tasks extension, sent again declaring it, then a poll
    // every 5 s, each named by the task.
    let mut expected = refused_then_discovered();
    expected.push(modern("tools/call", Some("long_job")));
    expected.push(modern("tools/call", Some("long_job")));
    expected.extend(vec![modern("tasks/get", Some(&task)); 480]);
    assert_eq!(received(&audit), expected);
    assert!(audit.task_requests.iter().all(|r| r.found));
    assert_eq!(audit.header_mismatches, 0);
    one_runtime_session(&audit, 1);
}

/// rmcp's client pinned to `initialize` (2025-11-25) over the bridge and the stack at a
/// modern-only runtime: it connects, lists the tools of 2026-07-28 and calls `add` once.
#[cfg(feature = "rmcp")]
#[tokio::test]
async fn rmcps_initialize_lifecycle_connects_through_the_bridge()
-> Result<(), crate::common::BoxError> {
    use crate::records::{add, serve_client, text_of};
    use agentcore_tower::rmcp::TowerClient;
    use rmcp::model::{ClientConfig, ProtocolVersion};

    let emulator = start(modern_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let service = ServiceBuilder::new()
        .layer(bridge.clone())
        .layer(McpSessionRecoveryLayer::new())
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build()?,
        ))
        .service(http_client());
    let transport = TowerClient::new(service).into_transport(RUNTIME_URL);
    let pinned = Some(ProtocolVersion::V_2025_11_25);
    let client = serve_client(ClientConfig::default(), transport, pinned).await?;
    let server = client.peer_info().expect("initialized");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2025_11_25);
    let info = server
        .server_info
        .as_ref()
        .expect("the server's information");
    assert_eq!(info.name, "agentcore-tower-emulator");
    let names: Vec<String> = client
        .list_all_tools()
        .await?
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, TOOLS_2026);
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    client.cancel().await?;
    assert!(bridge.bridges());

    let audit = emulator.audit();
    let mut expected = refused_then_discovered();
    expected.extend([
        modern("tools/list", None),
        modern("tools/call", Some("add")),
    ]);
    // rmcp opens the server's stream once its session is open, beside its requests: the bridge
    // carries it on one `subscriptions/listen`.
    let listen = modern("subscriptions/listen", None);
    let mut seen = received(&audit);
    let listens = seen.iter().filter(|row| **row == listen).count();
    assert_eq!(listens, 1, "{:?}", audit.received);
    seen.retain(|row| *row != listen);
    assert_eq!(seen, expected, "{:?}", audit.received);
    assert_eq!(audit.listens, 1);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    assert_eq!(audit.header_mismatches, 0);
    one_runtime_session(&audit, 1);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The other direction: a client pinned to MCP 2026-07-28 (its requests written by hand) at a
// server of the `initialize` era, bridged when `bridge_modern_clients()` asks for it: its
// `server/discover`, refused, answered from the one MCP session the bridge opens; its requests
// sent in that session, its answers' results given `resultType`.

/// What the client of 2026-07-28 says of itself.
const MODERN_CLIENT: &str = "bridge-e2e-2026";
/// The id of the bridge's own `initialize`.
const INITIALIZE_ID: &str = "agentcore-tower/bridge/initialize";
/// The 400 a server of the `initialize` era answers a request of 2026-07-28 (the MCP
/// TypeScript SDK's words).
const UNSPOKEN_2026: &str = "Bad Request: Unsupported protocol version: 2026-07-28 (supported versions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)";

/// What the bridge handed to the layers below it, in order: each request's headers and body.
#[derive(Clone, Default)]
struct Below(Arc<Mutex<Vec<(http::HeaderMap, Value)>>>);

/// A request as it left the bridge: its `MCP-Protocol-Version`, `Mcp-Session-Id`, `Mcp-Method`
/// and `Mcp-Name`, and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Handed {
    version: Option<String>,
    session: Option<String>,
    mcp_method: Option<String>,
    mcp_name: Option<String>,
    body: Value,
}

impl Below {
    fn record(&self, request: &Request<Full<Bytes>>) {
        let bytes = request
            .body()
            .clone()
            .collect()
            .now_or_never()
            .expect("a body in memory")
            .unwrap()
            .to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        self.0
            .lock()
            .unwrap()
            .push((request.headers().clone(), body));
    }

    fn handed(&self) -> Vec<Handed> {
        let header = |headers: &http::HeaderMap, name: &str| {
            headers.get(name).map(|v| v.to_str().unwrap().to_owned())
        };
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(headers, body)| Handed {
                version: header(headers, "mcp-protocol-version"),
                session: header(headers, "mcp-session-id"),
                mcp_method: header(headers, "mcp-method"),
                mcp_name: header(headers, "mcp-name"),
                body: body.clone(),
            })
            .collect()
    }
}

/// `bridge` over a recorder of what it hands down ([`Below`]), `McpSessionRecoveryLayer`, the
/// recommended layers and `signer`, over hyper-util's client: answers read whole.
fn stack_below(bridge: &ProtocolBridgeLayer, signer: &SigV4InvokeLayer, below: &Below) -> Stack {
    let below = below.clone();
    read_whole(
        ServiceBuilder::new()
            .layer(bridge.clone())
            .map_request(move |request: Request<Full<Bytes>>| {
                below.record(&request);
                request
            })
            .layer(McpSessionRecoveryLayer::new())
            .layer(recommended_layers(ReplayGuardLayer::new(), signer.clone()))
            .service(http_client()),
    )
}

/// A request of a client pinned to 2026-07-28: its version, information and capabilities in
/// `_meta`.
fn modern_request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": MODERN_CLIENT, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    request(id, method, params)
}

/// An answer as the client of 2026-07-28 reads it: a JSON body, or the one message of an
/// event stream.
#[derive(Debug)]
struct ModernAnswer {
    status: StatusCode,
    /// Whether it came as an event stream.
    stream: bool,
    json: Value,
    /// Its `Content-Length`, when it has one.
    content_length: Option<usize>,
    /// How long its body was.
    length: usize,
}

/// A client pinned to 2026-07-28, written by hand: each POST with the version header and the
/// standard headers of its body, no MCP session.
struct ModernClient {
    stack: Stack,
}

impl ModernClient {
    /// A client over `bridge` and the emulator's stack, nothing recorded below.
    fn over(bridge: &ProtocolBridgeLayer, emulator: &Emulator) -> ModernClient {
        let signer = emulator.signer().build().unwrap();
        ModernClient {
            stack: stack_below(bridge, &signer, &Below::default()),
        }
    }

    fn post_request(message: &Value) -> Request<Full<Bytes>> {
        let mut request = mcp_post(RUNTIME_URL, None, message.to_string());
        request.headers_mut().insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        request
            .headers_mut()
            .extend(agentcore_tower::protocol::request_headers(message, None));
        request
    }

    /// `server/discover` (id 1), then `tools/list` (id 2), as sent raw: their answers.
    async fn discover_and_list(&self) -> (ModernAnswer, ModernAnswer) {
        let discovered = self
            .post(&modern_request(1, "server/discover", json!({})))
            .await;
        let listed = self.post(&modern_request(2, "tools/list", json!({}))).await;
        (discovered, listed)
    }

    async fn post(&self, message: &Value) -> ModernAnswer {
        let answer = self
            .stack
            .clone()
            .oneshot(Self::post_request(message))
            .await
            .unwrap();
        let (parts, bytes) = answer.into_parts();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let stream = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        let json = if stream {
            let messages: Vec<Value> = text
                .split("\n\n")
                .filter_map(|event| {
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                        .collect();
                    (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).unwrap())
                })
                .collect();
            assert_eq!(messages.len(), 1, "one message: {text:?}");
            messages[0].clone()
        } else if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
        };
        ModernAnswer {
            status: parts.status,
            stream,
            json,
            content_length: parts
                .headers
                .get(http::header::CONTENT_LENGTH)
                .map(|v| v.to_str().unwrap().parse().unwrap()),
            length: bytes.len(),
        }
    }

    /// `tools/list`: the tools' names; the result must carry `resultType: "complete"`.
    async fn tool_names(&self, id: u64) -> Vec<String> {
        let answer = self
            .post(&modern_request(id, "tools/list", json!({})))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.json["id"], id, "{answer:?}");
        assert_eq!(
            answer.json["result"]["resultType"], "complete",
            "{answer:?}"
        );
        listed_names(&answer.json, &answer)
    }

    async fn call(&self, id: u64, tool: &str, arguments: Value) -> ModernAnswer {
        let params = json!({"name": tool, "arguments": arguments});
        self.post(&modern_request(id, "tools/call", params)).await
    }
}

/// The discovery the bridge answers from its session with the emulator of the `initialize`
/// era: the revision, the capabilities and `serverInfo` the emulator's `initialize` gave, no
/// instructions (its caching hints are [`a_bridged_cacheable_result_carries_its_caching_hints`]'s).
fn assert_discovered_from_initialize(answer: &ModernAnswer, id: u64) {
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.json["jsonrpc"], "2.0", "{answer:?}");
    assert_eq!(answer.json["id"], id, "{answer:?}");
    let result = &answer.json["result"];
    assert_eq!(result["resultType"], "complete", "{answer:?}");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28"]),
        "{answer:?}"
    );
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": false}}),
        "{answer:?}"
    );
    assert_eq!(
        result["_meta"],
        json!({"io.modelcontextprotocol/serverInfo":
            {"name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")}}),
        "{answer:?}"
    );
    assert_eq!(result.get("instructions"), None, "{answer:?}");
}

/// The emulator's refusal of a request of 2026-07-28, as a server of the `initialize` era
/// answers it.
fn unspoken_2026() -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": UNSPOKEN_2026}})
}

/// A request the bridge handed down in its session `session` at the negotiated version: the
/// body as a client of the `initialize` era writes it, no standard header of 2026-07-28.
fn in_session(session: &str, body: Value) -> Handed {
    Handed {
        version: Some("2025-11-25".to_owned()),
        session: Some(session.to_owned()),
        mcp_method: None,
        mcp_name: None,
        body,
    }
}

/// A request of the client's, handed down as it wrote it.
fn as_written(message: &Value) -> Handed {
    let request = ModernClient::post_request(message);
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    Handed {
        version: header("mcp-protocol-version"),
        session: None,
        mcp_method: header("mcp-method"),
        mcp_name: header("mcp-name"),
        body: message.clone(),
    }
}

/// A client pinned to 2026-07-28 at an emulator of the `initialize` era answering JSON or
/// (`sse`) event streams, bridged: discovery, listing, `add` once; then a second client over
/// the same layer, in the same MCP session.
async fn a_2026_client_at_a_legacy_only_runtime_is_bridged(sse: bool) {
    let emulator = start(legacy_only().sse(sse)).await;
    let bridge = ProtocolBridgeLayer::new().bridge_modern_clients();
    let signer = emulator.signer().build().unwrap();
    let below = Below::default();
    let client = ModernClient {
        stack: stack_below(&bridge, &signer, &below),
    };
    assert!(!bridge.bridges(), "not known before the first discovery");

    let discover = modern_request(1, "server/discover", json!({}));
    let discovered = client.post(&discover).await;
    assert!(!discovered.stream, "the bridge's own answer is JSON");
    assert_discovered_from_initialize(&discovered, 1);
    assert!(bridge.bridges());
    assert_eq!(bridge.sessions(), 0, "no session of a 2025 client's");

    assert_eq!(client.tool_names(2).await, TOOLS_2025);
    let added = client.call(3, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(added.status, StatusCode::OK, "{added:?}");
    assert_eq!(added.stream, sse, "{added:?}");
    assert_eq!(added.json, tool_result(3, "5", true));

    // The emulator: the client's discovery refused, the bridge's `initialize` and
    // `notifications/initialized`, then each request in the one MCP session it opened.
    let audit = emulator.audit();
    assert_eq!(
        received(&audit),
        [
            modern("server/discover", None),
            row("initialize", None, None, false),
            row("notifications/initialized", None, None, true),
            row("tools/list", None, None, true),
            row("tools/call", Some("tools/call"), Some("add"), true),
        ],
        "{:?}",
        audit.received
    );
    assert_eq!(audit.received[1].id, Some(format!("{INITIALIZE_ID:?}")));
    assert_eq!(audit.mcp_sessions_started, 1);
    let session = audit.received[2].mcp_session_id.clone().unwrap();
    assert!(
        audit.received[2..]
            .iter()
            .all(|r| r.mcp_session_id.as_deref() == Some(session.as_str())),
        "{:?}",
        audit.received
    );
    assert_eq!(
        audit.executions_by_id,
        [(("add".to_owned(), "3".to_owned()), 1)].into(),
        "add ran once, nothing else ran"
    );
    assert_eq!(audit.header_mismatches, 0);
    one_runtime_session(&audit, 1);

    // What the bridge handed down: the client's discovery as written, then its session, the
    // negotiated version on each request and nothing of the revision's `_meta` in any body.
    let mut expected = vec![
        as_written(&discover),
        Handed {
            version: None,
            session: None,
            mcp_method: None,
            mcp_name: None,
            body: json!({"jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": MODERN_CLIENT, "version": "1"}}}),
        },
        in_session(
            &session,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        in_session(&session, request(2, "tools/list", json!({}))),
        in_session(
            &session,
            request(
                3,
                "tools/call",
                json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
            ),
        ),
    ];
    assert_eq!(below.handed(), expected);

    // A second client over the same layer: its discovery is answered from the same session,
    // and nothing is sent for it; its call goes in that session.
    let second = ModernClient {
        stack: stack_below(&bridge, &signer, &below),
    };
    let again = second
        .post(&modern_request(1, "server/discover", json!({})))
        .await;
    assert_discovered_from_initialize(&again, 1);
    assert_eq!(emulator.audit().received.len(), 5, "nothing sent");
    let added = second.call(4, "add", json!({"a": 4, "b": 5})).await;
    assert_eq!(added.json, tool_result(4, "9", true));

    let audit = emulator.audit();
    assert_eq!(audit.received.len(), 6, "{:?}", audit.received);
    assert_eq!(
        received(&audit)[5],
        row("tools/call", Some("tools/call"), Some("add"), true)
    );
    assert_eq!(audit.received[5].mcp_session_id, Some(session.clone()));
    assert_eq!(audit.mcp_sessions_started, 1, "no second initialize");
    assert_eq!(audit.executions_of("add"), 2);
    assert_eq!(
        audit.executions_by_id[&("add".to_owned(), "4".to_owned())],
        1
    );
    one_runtime_session(&audit, 1);
    expected.push(in_session(
        &session,
        request(
            4,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 4, "b": 5}}),
        ),
    ));
    assert_eq!(below.handed(), expected);
}

#[tokio::test(start_paused = true)]
async fn a_2026_client_at_a_legacy_only_runtime_is_bridged_with_json_answers() {
    a_2026_client_at_a_legacy_only_runtime_is_bridged(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_2026_client_at_a_legacy_only_runtime_is_bridged_with_event_streams() {
    a_2026_client_at_a_legacy_only_runtime_is_bridged(true).await;
}

/// Off by default: the client's discovery gets the emulator's refusal (its code and its words),
/// and the bridge sends nothing of its own.
#[tokio::test(start_paused = true)]
async fn without_bridge_modern_clients_a_2026_clients_discovery_gets_the_servers_refusal() {
    let emulator = start(legacy_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let below = Below::default();
    let client = ModernClient {
        stack: stack_below(&bridge, &emulator.signer().build().unwrap(), &below),
    };
    let discover = modern_request(1, "server/discover", json!({}));
    let refused = client.post(&discover).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{refused:?}");
    // The server's refusal: its code, its words.
    let server = &unspoken_2026()["error"];
    assert_eq!(refused.json["error"]["code"], server["code"], "{refused:?}");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains(UNSPOKEN_2026), "{refused:?}");
    assert!(!bridge.bridges());

    let audit = emulator.audit();
    assert_eq!(
        received(&audit),
        [modern("server/discover", None)],
        "{:?}",
        audit.received
    );
    assert_eq!(audit.mcp_sessions_started, 0);
    assert!(audit.executions.is_empty());
    assert_eq!(below.handed(), [as_written(&discover)]);
}

/// At a server of both eras the bridge is not there: the discovery is the server's, and each
/// request goes as the client wrote it; no `initialize` is sent.
#[tokio::test(start_paused = true)]
async fn with_bridge_modern_clients_nothing_changes_at_a_server_of_both_eras() {
    let emulator = start(both()).await;
    let bridge = ProtocolBridgeLayer::new().bridge_modern_clients();
    let below = Below::default();
    let client = ModernClient {
        stack: stack_below(&bridge, &emulator.signer().build().unwrap(), &below),
    };
    let discover = modern_request(1, "server/discover", json!({}));
    let discovered = client.post(&discover).await;
    assert_eq!(discovered.status, StatusCode::OK, "{discovered:?}");
    assert_eq!(discovered.json["result"]["resultType"], "complete");
    assert_eq!(
        discovered.json["result"]["supportedVersions"],
        json!(EVERY_VERSION),
        "the server's own: {discovered:?}"
    );
    assert_eq!(client.tool_names(2).await, TOOLS_2026);
    let added = client.call(3, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(added.json, tool_result(3, "5", true));
    assert!(!bridge.bridges());

    let audit = emulator.audit();
    assert_eq!(
        received(&audit),
        [
            modern("server/discover", None),
            modern("tools/list", None),
            modern("tools/call", Some("add")),
        ],
        "{:?}",
        audit.received
    );
    assert_eq!(audit.mcp_sessions_started, 0, "no initialize");
    assert_eq!(
        audit.executions_by_id,
        [(("add".to_owned(), "3".to_owned()), 1)].into()
    );
    one_runtime_session(&audit, 1);
    let call = modern_request(
        3,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    assert_eq!(
        below.handed(),
        [
            as_written(&discover),
            as_written(&modern_request(2, "tools/list", json!({}))),
            as_written(&call),
        ]
    );
}

/// An answer's `Content-Length`, when it has one, is its length.
fn assert_exact_length(answer: &ModernAnswer, sse: bool) {
    assert!(
        answer.content_length.is_none_or(|n| n == answer.length),
        "sse {sse}: Content-Length {:?}, {} bytes",
        answer.content_length,
        answer.length
    );
}

/// A JSON answer and an event stream the bridge gives `resultType` grow by its bytes: the
/// answer must not keep the server's `Content-Length`, which a server relaying it (hyper's,
/// the proxy's `--listen`) would send, cutting the body short.
#[tokio::test(start_paused = true)]
async fn a_typed_answer_keeps_no_content_length_of_the_servers() {
    for sse in [false, true] {
        let emulator = start(legacy_only().sse(sse)).await;
        let bridge = ProtocolBridgeLayer::new().bridge_modern_clients();
        let client = ModernClient::over(&bridge, &emulator);
        let (discovered, listed) = client.discover_and_list().await;
        assert_exact_length(&discovered, sse);
        assert_eq!(listed.json["result"]["resultType"], "complete");
        assert_exact_length(&listed, sse);
        let added = client.call(3, "add", json!({"a": 2, "b": 3})).await;
        assert_eq!(added.json, tool_result(3, "5", true));
        assert_exact_length(&added, sse);
    }
}

/// MCP 2026-07-28 requires `ttlMs` and `cacheScope` of a cacheable result (`server/discover`,
/// `tools/list`, the other lists, `resources/read`): the Python SDK 2.3's client refuses a
/// `ListToolsResult` without them (a pydantic `ValidationError`). A server of the `initialize`
/// era writes neither, so the bridge must: `ttlMs: 0` and `cacheScope: "private"` (stale at
/// once, for this client only), the defaults rmcp and the Python SDK's servers write.
#[tokio::test(start_paused = true)]
async fn a_bridged_cacheable_result_carries_its_caching_hints() {
    for sse in [false, true] {
        let emulator = start(legacy_only().sse(sse)).await;
        let bridge = ProtocolBridgeLayer::new().bridge_modern_clients();
        let client = ModernClient::over(&bridge, &emulator);
        let (discovered, listed) = client.discover_and_list().await;
        assert_discovered_from_initialize(&discovered, 1);
        for answer in [&discovered, &listed] {
            let result = &answer.json["result"];
            assert_eq!(result["ttlMs"], 0, "sse {sse}: {answer:?}");
            assert_eq!(result["cacheScope"], "private", "sse {sse}: {answer:?}");
        }
        // A result that is not cacheable gets none.
        let added = client.call(3, "add", json!({"a": 2, "b": 3})).await;
        assert_eq!(added.json, tool_result(3, "5", true));
    }
}

/// The data of each event of an event stream, as JSON.
fn stream_messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// A 2025 client bridged to a modern-only runtime, its session open, and the same stack with
/// its answers as they come (not read whole), for streams that stay open.
async fn bridged_with_raw_answers() -> (
    Emulator,
    Client,
    impl tower::Service<
        Request<Full<Bytes>>,
        Response = http::Response<impl http_body::Body<Data = Bytes, Error = impl std::fmt::Debug>>,
        Error = impl std::fmt::Debug,
    > + Clone,
) {
    let (emulator, bridge, mut client) = bridged(modern_only(), Door::Runtime).await;
    client.open().await;
    let raw = ServiceBuilder::new()
        .layer(bridge.clone())
        .layer(McpSessionRecoveryLayer::new())
        .layer(recommended_layers(
            ReplayGuardLayer::new(),
            emulator.signer().build().unwrap(),
        ))
        .service(http_client());
    (emulator, client, raw)
}

/// A server of 2026-07-28 that asks the user (an `InputRequiredResult`) is heard by a bridged
/// 2025 client as 2025 servers ask: a request on its call's stream; its response, POSTed in its
/// session, is taken by the bridge and sent back with the call's `requestState`.
#[tokio::test(start_paused = true)]
async fn a_bridged_client_is_asked_on_its_calls_stream_when_the_server_needs_input() {
    // The bridge's answers as they come (the call's stream stays open while the client is
    // asked); the session's requests name the runtime session of its `initialize`.
    let (emulator, client, raw) = bridged_with_raw_answers().await;
    let params = json!({"name": "confirm", "arguments": {"action": "ship"}});
    let call = client.request(Method::POST, Some(&request(5, "tools/call", params)));
    let answer = raw.clone().oneshot(call).await.unwrap();
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut body = answer.into_body();
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let asked = stream_messages(std::str::from_utf8(&frame).unwrap()).remove(0);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["mode"], "form", "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("agentcore-tower/bridge/input/"), "{id}");
    // The client's response, POSTed in its session: taken by the bridge, never sent on.
    let response = json!({"jsonrpc": "2.0", "id": id,
        "result": {"action": "accept", "content": {"confirmed": true}}});
    let taken = client.post(&response).await;
    assert_eq!(taken.status, StatusCode::ACCEPTED, "{taken:?}");
    let (rest, _) = crate::common::read_all(body).await;
    let messages = stream_messages(std::str::from_utf8(&rest).unwrap());
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], 5);
    assert_eq!(
        messages[0]["result"]["content"][0]["text"],
        "confirmed: ship"
    );
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("confirm"), 1, "{audit:?}");
    let calls = audit
        .received
        .iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .count();
    assert_eq!(calls, 2, "asked, then sent again with the answer");
    assert!(
        audit
            .received
            .iter()
            .all(|r| r.id.as_deref() != Some(&format!("{id:?}")))
    );
}

/// A bridged client that opens the server's stream (a GET in its session) hears what the
/// server tells unasked: the bridge opens a `subscriptions/listen` in the client's name, in the
/// runtime session of its `initialize`, and passes each notification on, less the listen's
/// acknowledgement; the stream ends when the server ends the listen.
#[tokio::test(start_paused = true)]
async fn a_bridged_client_that_opens_the_servers_stream_hears_its_notifications() {
    let (emulator, client, raw) = bridged_with_raw_answers().await;
    let mut get = client.request(Method::GET, None);
    get.headers_mut()
        .insert("accept", HeaderValue::from_static("text/event-stream"));
    let answer = raw.oneshot(get).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut body = answer.into_body();

    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(emulator.notify_listeners(changed), 1, "one listen open");
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let heard = stream_messages(std::str::from_utf8(&frame).unwrap());
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0]["method"], "notifications/tools/list_changed");
    assert_eq!(emulator.end_listens(), 1);
    let (rest, _) = crate::common::read_all(body).await;
    assert!(rest.is_empty(), "nothing after the listen ends: {rest:?}");

    let audit = emulator.audit();
    assert_eq!(audit.listens, 1);
    let mut expected = refused_then_discovered();
    expected.push(modern("subscriptions/listen", None));
    assert_eq!(received(&audit), expected, "{:?}", audit.received);
    assert!(
        audit.received[2]
            .id
            .as_deref()
            .is_some_and(|id| id.starts_with("\"agentcore-tower/bridge/listen/")),
        "{:?}",
        audit.received
    );
    one_runtime_session(&audit, 1);
    assert!(audit.executions.is_empty());
}
