//! `ProtocolBridgeLayer` end to end: a client of MCP 2025-11-25 (its `initialize`, its session,
//! its requests written by hand) over the bridge, `McpSessionRecoveryLayer` and the recommended
//! stack, against the emulator of each era. At a server that speaks only 2026-07-28 the client
//! is bridged: its `initialize` refused, answered from the bridge's one `server/discover`, its
//! requests sent as 2026-07-28 writes them, `ping`, notifications, GET and DELETE answered by
//! the bridge. Where the eras match nothing changes. A refusal of AgentCore's own is never taken
//! for another era. And the task layer above the bridge, and rmcp's client of the `initialize`
//! era over it.

use crate::audit::one_runtime_session;
use crate::common::stack::{Answered, Stack, read_whole, send_through};
use crate::common::{http_client, mcp_post};
use crate::emulator::start;

use std::time::Duration;

use agentcore_tower::bridge::ProtocolBridgeLayer;
use agentcore_tower::emulator::{Audit, Emulator, EmulatorConfig, Fault};
use agentcore_tower::tasks::TaskPollingLayer;
use agentcore_tower::{McpSessionRecoveryLayer, ReplayGuardLayer, recommended_layers};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::ServiceBuilder;

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
    match door {
        Door::Runtime => read_whole(
            ServiceBuilder::new()
                .layer(bridge.clone())
                .layer(McpSessionRecoveryLayer::new())
                .layer(recommended_layers(
                    guard,
                    emulator.signer().build().unwrap(),
                ))
                .service(http_client()),
        ),
        Door::Gateway => read_whole(
            ServiceBuilder::new()
                .layer(bridge.clone())
                .layer(McpSessionRecoveryLayer::new())
                .layer(recommended_layers(
                    guard,
                    emulator.endpoint_signer().build().unwrap(),
                ))
                .service(http_client()),
        ),
    }
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

/// A client of 2025-11-25, written by hand: raw POSTs, its session's id and version on each
/// request after `initialize`.
struct Client {
    stack: Stack,
    url: String,
    session: Option<String>,
}

impl Client {
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
        answer.json["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("not a listing: {answer:?}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn call(&self, id: u64, tool: &str, arguments: Value) -> Answered {
        let params = json!({"name": tool, "arguments": arguments});
        self.post(&request(id, "tools/call", params)).await
    }
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
    let emulator = start(modern_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let mut client = Client::new(
        stack(&emulator, Door::Runtime, &bridge),
        Door::Runtime,
        &emulator,
    );
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
    // No stream of the server's own is offered.
    let stream = client.send(Method::GET, None).await;
    assert_eq!(stream.status, StatusCode::METHOD_NOT_ALLOWED, "{stream:?}");
    assert_eq!(stream.json, Value::Null);

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
    let emulator = start(modern_only().gateway(true)).await;
    let bridge = ProtocolBridgeLayer::new();
    let mut client = Client::new(
        stack(&emulator, Door::Gateway, &bridge),
        Door::Gateway,
        &emulator,
    );
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
    let emulator = start(modern_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let mut client = Client::new(
        stack(&emulator, Door::Runtime, &bridge),
        Door::Runtime,
        &emulator,
    );
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
    let emulator = start(modern_only()).await;
    let bridge = ProtocolBridgeLayer::new();
    let mut first = Client::new(
        stack(&emulator, Door::Runtime, &bridge),
        Door::Runtime,
        &emulator,
    );
    let mut second = Client::new(
        stack(&emulator, Door::Runtime, &bridge),
        Door::Runtime,
        &emulator,
    );
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
        let emulator = start(config).await;
        let bridge = ProtocolBridgeLayer::new();
        let mut client = Client::new(
            stack(&emulator, Door::Runtime, &bridge),
            Door::Runtime,
            &emulator,
        );
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
    let emulator = start(modern_only()).await;
    for _ in 0..3 {
        emulator.push_request_fault(Fault::Throttle { retry_after: None });
    }
    let bridge = ProtocolBridgeLayer::new();
    let mut client = Client::new(
        stack(&emulator, Door::Runtime, &bridge),
        Door::Runtime,
        &emulator,
    );
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
    assert_eq!(received(&audit), expected, "{:?}", audit.received);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    assert_eq!(audit.header_mismatches, 0);
    one_runtime_session(&audit, 1);
    Ok(())
}
