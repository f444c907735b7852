//! MCP 2026-07-28 clients through the library's doors, end to end against the emulator:
//! * rmcp's `ClientLifecycleMode::Auto` over the recommended stack, with hyper-util's client and
//!   with reqwest beneath it: against a 2026-07-28 server (`server/discover`, no `initialize`)
//!   and against a 2025-era one (the probe refused, `initialize` at 2025-11-25);
//! * rmcp pinned to `initialize` (2025-11-25, 2025-06-18) against a 2026-07-28 server;
//! * a home-grown client, plain `tower::Service` calls whose bodies carry `_meta` and whose
//!   `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` it writes itself:
//!   discovery, a listing, calls, the multi round-trip `confirm`, and header mismatches.

use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::audit::one_runtime_session;
use crate::common::{Answerer, BoxError, answer_or_forward, http_client};
use crate::records::{Records, add, exchanges, serve_client, session_exchanges, tap_into, text_of};
use agentcore_tower::protocol::{self, ParamHeaders};
use agentcore_tower::rmcp::TowerClient;
use agentcore_tower::{AttemptRecord, ReplayGuardLayer, recommended_layers, record::Outcome};
use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig};
use bytes::Bytes;
use futures_util::FutureExt as _;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tower::{Service, ServiceExt as _};

type Client = RunningService<RoleClient, ClientConfig>;
/// Every exchange the tap saw, with its attempt record.
/// Every request the HTTP client beneath the signer was handed, in order.
type Wire = Arc<Mutex<Vec<Sent>>>;

const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const TOOLS_2026: [&str; 7] = [
    "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job",
];
const TOOLS_2025: [&str; 3] = ["add", "echo", "counter"];

// ---------------------------------------------------------------------------------------------
// rmcp over the stack
// ---------------------------------------------------------------------------------------------

/// How the rmcp client opens its connection.
#[derive(Clone, Debug)]
enum Lifecycle {
    /// `server/discover` at 2026-07-28, falling back to `initialize` at 2025-11-25.
    Auto,
    /// `initialize` at this version, as rmcp's `serve` does.
    Initialize(ProtocolVersion),
}

/// One request as the HTTP client beneath the signer got it: signed, the MCP headers as they
/// go out.
#[derive(Clone, Debug)]
struct Sent {
    http_method: http::Method,
    headers: http::HeaderMap,
    body: Value,
}

impl Sent {
    fn of(request: &Request<Full<Bytes>>) -> Self {
        let body = request
            .body()
            .clone()
            .collect()
            .now_or_never()
            .and_then(Result::ok)
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Self {
            http_method: request.method().clone(),
            headers: request.headers().clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("a visible ASCII header"))
    }

    fn protocol_version(&self) -> Option<&str> {
        self.header("mcp-protocol-version")
    }

    fn method(&self) -> Option<&str> {
        self.body.get("method").and_then(Value::as_str)
    }
}

/// `http`, noting every request it is handed in `wire`.
fn tapped<H, B>(
    http: H,
    wire: Wire,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<B>,
    Error = H::Error,
    Future = impl Future<Output = Result<Response<B>, H::Error>> + Send,
> + Clone
+ Send
+ Sync
+ 'static
where
    H: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + Sync + 'static,
    H::Future: Send,
    B: 'static,
{
    tower::service_fn(move |request: Request<Full<Bytes>>| {
        wire.lock().unwrap().push(Sent::of(&request));
        http.clone().oneshot(request)
    })
}

fn config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("modern-clients-test", "0"),
    )
}

/// rmcp's client over `RecordTap` → ReplayGuard → Throttle → SessionBusy → SigV4 → `$http`
/// (its requests noted in a [`Wire`]), connected to `$emulator`'s runtime as `$lifecycle` says:
/// `(client, records, wire)`. A macro, so `$http` may be hyper-util's client or reqwest's
/// without spelling out the stack's bounds. With a `$signer` and a `$uri`, through another
/// door: `McpEndpointLayer` to an MCP URL.
macro_rules! connect {
    ($emulator:expr, $http:expr, $lifecycle:expr) => {
        connect!(
            $emulator.signer().build()?,
            "http://agentcore.invalid/mcp",
            $http,
            $lifecycle
        )
    };
    ($signer:expr, $uri:expr, $http:expr, $lifecycle:expr) => {{
        let records = Records::default();
        let wire = Wire::default();
        let stack = tower::ServiceBuilder::new()
            .layer(tap_into(&records))
            .layer(recommended_layers(
                ReplayGuardLayer::new().idempotent_tools(["add"]),
                $signer,
            ))
            .service(tapped($http, wire.clone()));
        let transport = TowerClient::new(stack).into_transport($uri);
        let pinned = match $lifecycle {
            Lifecycle::Auto => None,
            Lifecycle::Initialize(version) => Some(version),
        };
        let client: Client = serve_client(config(), transport, pinned).await?;
        (client, records, wire)
    }};
}

fn reqwest_client() -> agentcore_tower::reqwest::ReqwestService {
    agentcore_tower::reqwest::ReqwestService::with_client(|builder| builder.no_proxy())
        .expect("a reqwest client")
}

fn status(code: u16) -> Outcome {
    Outcome::Response {
        status: StatusCode::from_u16(code).expect("a status"),
        error_type: agentcore_tower::record::ErrorType::Absent,
    }
}

/// The record of the one exchange for `rpc_method`.
fn record_of(records: &Records, rpc_method: &str) -> AttemptRecord {
    let records = records.lock().unwrap();
    let matching: Vec<&AttemptRecord> = records
        .iter()
        .filter(|(e, _)| e.rpc_method.as_deref() == Some(rpc_method))
        .map(|(_, r)| r)
        .collect();
    assert_eq!(matching.len(), 1, "{rpc_method}: {records:?}");
    matching[0].clone()
}

/// Every POST's record but those named in `except`: one attempt, its answer 200 (202 for a
/// notification), delivered as it came.
fn each_post_answered_at_once(records: &Records, except: &[&str]) {
    for (exchange, record) in records.lock().unwrap().iter() {
        if exchange.http_method != http::Method::POST
            || except.contains(&exchange.rpc_method.as_deref().unwrap_or_default())
        {
            continue;
        }
        let expected = if exchange.request_id.is_some() {
            200
        } else {
            202
        };
        let attempts = record.attempts();
        assert_eq!(attempts.len(), 1, "{exchange}: {record}");
        assert_eq!(
            attempts[0].outcome(),
            &status(expected),
            "{exchange}: {record}"
        );
        assert!(!attempts[0].was_sent_again(), "{exchange}: {record}");
    }
}

/// The JSON-RPC methods the emulator received, in order.
fn methods(audit: &Audit) -> Vec<&str> {
    audit
        .received
        .iter()
        .map(|r| r.method.as_deref().unwrap_or("-"))
        .collect()
}

/// The version a request's `_meta` names.
fn meta_version(sent: &Sent) -> Option<&str> {
    protocol::version_in_meta(&sent.body)
}

/// Checks that `client` is connected at `version`, lists the tools, which must be `tools` by
/// name, calls `add(2, 3)`, which must answer `5` and no error, and ends the client: what each
/// connection of the negotiation tests does once connected.
async fn list_add_and_end(
    client: Client,
    version: &ProtocolVersion,
    tools: &[&str],
) -> Result<(), BoxError> {
    let server = client.peer_info().expect("connected");
    assert_eq!(&server.protocol_version, version);
    let listed = client.list_all_tools().await?;
    let names: Vec<&str> = listed.iter().map(|t| &*t.name).collect();
    assert_eq!(names, tools, "{version}");
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"], "{version}");
    assert_eq!(result.is_error, Some(false), "{version}");
    client.cancel().await?;
    Ok(())
}

/// rmcp in auto mode against a 2026-07-28 server: `server/discover`, no `initialize`, no MCP
/// session, the revision's `_meta` and headers on every POST, one runtime session.
async fn auto_meets_a_2026_server(
    emulator: &Emulator,
    client: Client,
    records: Records,
    wire: Wire,
) -> Result<(), BoxError> {
    let server = client.peer_info().expect("discovered");
    assert_eq!(server.protocol_version.as_str(), "2026-07-28");
    assert_eq!(
        server.server_info.as_ref().map(|i| i.name.as_str()),
        Some("agentcore-tower-emulator")
    );
    list_add_and_end(client, &ProtocolVersion::V_2026_07_28, &TOOLS_2026).await?;

    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        ["server/discover", "tools/list", "tools/call"]
    );
    assert_eq!(
        audit.mcp_sessions_started, 0,
        "no initialize, no MCP session"
    );
    for received in &audit.received {
        assert_eq!(received.http_method, "POST");
        assert_eq!(received.mcp_session_id, None, "{received:?}");
        assert_eq!(received.mcp_method, received.method, "{received:?}");
    }
    assert_eq!(audit.received[2].mcp_name.as_deref(), Some("add"));
    one_runtime_session(&audit, 1);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    assert_eq!(audit.header_mismatches, 0);
    assert_eq!(audit.busy_refusals + audit.throttled, 0);

    // Every POST carried the version in `_meta` and in its header, and the capabilities; rmcp
    // sent no GET and no DELETE (no MCP session to stream or end).
    let wire = wire.lock().unwrap();
    assert_eq!(wire.len(), 3, "{wire:?}");
    for sent in wire.iter() {
        assert_eq!(sent.http_method, http::Method::POST);
        assert_eq!(sent.protocol_version(), Some("2026-07-28"));
        assert_eq!(sent.header("mcp-method"), sent.method(), "{sent:?}");
        assert_eq!(meta_version(sent), Some("2026-07-28"), "{sent:?}");
        assert!(
            sent.body["params"]["_meta"][CLIENT_CAPABILITIES].is_object(),
            "{sent:?}"
        );
    }
    assert_eq!(
        exchanges(&records),
        [
            "POST server/discover",
            "POST tools/call add",
            "POST tools/list"
        ]
    );
    each_post_answered_at_once(&records, &[]);
    Ok(())
}

#[tokio::test]
async fn rmcp_auto_negotiates_2026_07_28_over_the_stack() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records, wire) = connect!(emulator, http_client(), Lifecycle::Auto);
    auto_meets_a_2026_server(&emulator, client, records, wire).await
}

#[tokio::test]
async fn rmcp_auto_negotiates_2026_07_28_over_the_reqwest_stack() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records, wire) = connect!(emulator, reqwest_client(), Lifecycle::Auto);
    auto_meets_a_2026_server(&emulator, client, records, wire).await
}

/// rmcp in auto mode against a 2025-era server: the probe is answered 400 (the version in its
/// header is too new for the server), delivered as it came and not sent again; rmcp falls back
/// to `initialize` at 2025-11-25, and the connection goes on in that era, in one MCP session
/// and one runtime session.
async fn auto_falls_back_on_a_2025_server(
    emulator: &Emulator,
    client: Client,
    records: Records,
    wire: Wire,
) -> Result<(), BoxError> {
    list_add_and_end(client, &ProtocolVersion::V_2025_11_25, &TOOLS_2025).await?;

    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
        ]
    );
    assert_eq!(audit.mcp_sessions_started, 1);
    let session = audit.received[2].mcp_session_id.clone();
    assert!(session.is_some());
    assert_eq!(audit.received[0].mcp_session_id, None);
    assert_eq!(audit.received[1].mcp_session_id, None);
    for received in &audit.received[2..] {
        assert_eq!(received.mcp_session_id, session, "{received:?}");
    }
    one_runtime_session(&audit, 1);
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);

    // The probe at 2026-07-28 (header and `_meta`); `initialize` asking 2025-11-25 with no
    // version header; every later POST with the negotiated version's header and no `_meta`
    // version.
    let wire = wire.lock().unwrap();
    let posts: Vec<&Sent> = wire
        .iter()
        .filter(|s| s.http_method == http::Method::POST)
        .collect();
    assert_eq!(posts.len(), 5, "{wire:?}");
    assert_eq!(posts[0].method(), Some("server/discover"));
    assert_eq!(posts[0].protocol_version(), Some("2026-07-28"));
    assert_eq!(meta_version(posts[0]), Some("2026-07-28"));
    assert_eq!(posts[1].method(), Some("initialize"));
    assert_eq!(posts[1].body["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(posts[1].protocol_version(), None);
    for sent in &posts[2..] {
        assert_eq!(sent.protocol_version(), Some("2025-11-25"), "{sent:?}");
        assert_eq!(meta_version(sent), None, "{sent:?}");
    }

    // The probe's 400: one attempt, delivered as it came.
    let discover = record_of(&records, "server/discover");
    assert_eq!(
        discover.to_string(),
        "#1 HTTP 400 -> replay_guard: delivered; effect unknown"
    );
    each_post_answered_at_once(&records, &["server/discover"]);
    // The MCP session's GET and DELETE, answered 405 by the signer itself.
    assert_eq!(
        exchanges(&records),
        session_exchanges(&[
            "POST server/discover",
            "POST tools/call add",
            "POST tools/list"
        ])
    );
    Ok(())
}

#[tokio::test]
async fn rmcp_auto_falls_back_to_initialize_on_a_2025_server_over_the_stack() -> Result<(), BoxError>
{
    let emulator =
        Emulator::start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await?;
    let (client, records, wire) = connect!(emulator, http_client(), Lifecycle::Auto);
    auto_falls_back_on_a_2025_server(&emulator, client, records, wire).await
}

#[tokio::test]
async fn rmcp_auto_falls_back_to_initialize_on_a_2025_server_over_the_reqwest_stack()
-> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await?;
    let (client, records, wire) = connect!(emulator, reqwest_client(), Lifecycle::Auto);
    auto_falls_back_on_a_2025_server(&emulator, client, records, wire).await
}

/// What a 2025-era server answers itself, in front of the emulator ([`answer_or_forward`]): it
/// refuses `server/discover` with HTTP 400 and `body` (of `content_type`), the way some servers
/// of that era do, without the request's id; every other request goes to the emulator.
fn refusing_discover(content_type: &'static str, body: &'static str) -> impl Answerer {
    move |request: &Request<Full<Bytes>>| {
        (Sent::of(request).method() == Some("server/discover")).then(|| {
            Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .header("content-type", content_type)
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .expect("a response")
        })
    }
}

/// rmcp's own HTTP clients turn any 4xx to a sessionless `server/discover` (but 401/403) into a
/// JSON-RPC error with the probe's id (`legacy_discover_response`, private to rmcp), so that
/// auto mode falls back to `initialize`: a plain-text 400, or a JSON-RPC error with an id of its
/// own (the Python SDK's HTTP transport writes `"server-error"`, rmcp notes). `TowerClient`
/// hands rmcp the first as `UnexpectedServerResponse` and the second uncorrelated, so rmcp
/// gives up instead of falling back (`agentcore_tower::rmcp`, "Not covered").
async fn auto_falls_back_after_a_refusal(
    content_type: &'static str,
    body: &'static str,
) -> Result<(), BoxError> {
    let emulator =
        Emulator::start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await?;
    let (client, records, _wire) = connect!(
        emulator,
        answer_or_forward(refusing_discover(content_type, body)),
        Lifecycle::Auto
    );
    let server = client.peer_info().expect("initialised");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2025_11_25);
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    client.cancel().await?;
    assert_eq!(
        record_of(&records, "server/discover").to_string(),
        "#1 HTTP 400 -> replay_guard: delivered; effect unknown"
    );
    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        ["initialize", "notifications/initialized", "tools/call"]
    );
    assert_eq!(audit.executions_of("add"), 1);
    Ok(())
}

#[tokio::test]
async fn rmcp_auto_falls_back_after_a_plain_text_400_to_its_probe() -> Result<(), BoxError> {
    auto_falls_back_after_a_refusal("text/plain", "Bad Request: Unsupported protocol version").await
}

#[tokio::test]
async fn rmcp_auto_falls_back_after_a_400_with_an_id_of_its_own() -> Result<(), BoxError> {
    auto_falls_back_after_a_refusal(
        "application/json",
        r#"{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad Request: Unsupported protocol version"}}"#,
    )
    .await
}

/// The reverse: rmcp of the `initialize` era (pinned to 2025-11-25, then 2025-06-18) against a
/// 2026-07-28 server, which speaks every earlier version too.
#[tokio::test]
async fn rmcp_pinned_to_initialize_works_with_a_2026_server() -> Result<(), BoxError> {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18] {
        let emulator = Emulator::start(EmulatorConfig::default()).await?;
        let (client, records, wire) = connect!(
            emulator,
            http_client(),
            Lifecycle::Initialize(version.clone())
        );
        list_add_and_end(client, &version, &TOOLS_2025).await?;

        let audit = emulator.audit();
        assert_eq!(
            methods(&audit),
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call",
            ]
        );
        assert_eq!(audit.mcp_sessions_started, 1);
        assert!(
            audit.received[1..]
                .iter()
                .all(|r| r.mcp_session_id.is_some())
        );
        one_runtime_session(&audit, 1);
        assert_eq!(audit.executions_of("add"), 1);
        assert_eq!(audit.executions.values().sum::<u64>(), 1);
        assert_eq!(audit.header_mismatches, 0);
        let wire = wire.lock().unwrap();
        for sent in wire.iter().filter(|s| s.http_method == http::Method::POST) {
            assert_eq!(meta_version(sent), None, "{sent:?}");
            let expected = (sent.method() != Some("initialize")).then(|| version.as_str());
            assert_eq!(sent.protocol_version(), expected, "{sent:?}");
        }
        each_post_answered_at_once(&records, &[]);
    }
    Ok(())
}

/// The tools/call of `weather` in Zürich.
fn weather_in_zurich() -> CallToolRequestParams {
    CallToolRequestParams::new("weather").with_arguments(
        json!({"city": "Zürich"})
            .as_object()
            .expect("an object")
            .clone(),
    )
}

/// rmcp writes `Mcp-Param-City` for `weather` (its listing marks `city` `x-mcp-header`);
/// `InvokeAgentRuntime` models no such header and the signer drops it, so the server behind
/// the runtime answers -32020 (README, "Protocol versions, door by door"): rmcp gets the
/// error, the stack sent the call once, nothing ran.
#[tokio::test]
async fn rmcp_auto_meets_the_runtime_doors_missing_param_headers_once() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let (client, records, wire) = connect!(emulator, http_client(), Lifecycle::Auto);
    assert_eq!(client.list_all_tools().await?.len(), TOOLS_2026.len());
    let error = client
        .call_tool(weather_in_zurich())
        .await
        .expect_err("refused");
    match &error {
        rmcp::ServiceError::McpError(data) => {
            assert_eq!(data.code.0, -32020, "{error}");
            assert_eq!(
                data.message,
                "mcp-param-city is missing (the body says `Zürich`)"
            );
        }
        other => panic!("not the server's error: {other}"),
    }
    client.cancel().await?;

    let call = wire.lock().unwrap().last().cloned().expect("the call");
    assert_eq!(call.header("mcp-param-city"), None, "dropped by the signer");
    assert_eq!(
        record_of(&records, "tools/call").to_string(),
        "#1 HTTP 400 -> replay_guard: delivered; effect unknown"
    );
    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        ["server/discover", "tools/list", "tools/call"]
    );
    assert_eq!(audit.header_mismatches, 1);
    assert!(audit.executions.is_empty(), "nothing ran");
    Ok(())
}

/// Through the URL door (`McpEndpointLayer`, here to the emulator's Gateway), the request goes
/// as rmcp wrote it: `Mcp-Param-City` arrives, signed, and `weather` runs.
#[tokio::test]
async fn rmcp_auto_through_the_url_door_keeps_its_param_headers() -> Result<(), BoxError> {
    let emulator = Emulator::start(EmulatorConfig::default().gateway(true)).await?;
    let (client, records, wire) = connect!(
        emulator.endpoint_signer().build()?,
        emulator.gateway_url(),
        http_client(),
        Lifecycle::Auto
    );
    let server = client.peer_info().expect("discovered");
    assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(client.list_all_tools().await?.len(), TOOLS_2026.len());
    let result = client.call_tool(weather_in_zurich()).await?;
    assert_eq!(text_of(&result), ["Sunny in Zürich"]);
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(text_of(&result), ["5"]);
    client.cancel().await?;

    let wire = wire.lock().unwrap();
    let weather = wire
        .iter()
        .find(|s| s.body["params"]["name"] == "weather")
        .expect("the weather call");
    assert_eq!(
        weather.header("mcp-param-city"),
        Some("=?base64?WsO8cmljaA==?=")
    );
    let signed = weather.header("authorization").expect("signed");
    assert!(signed.contains("mcp-param-city"), "{signed}");
    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        ["server/discover", "tools/list", "tools/call", "tools/call"]
    );
    assert!(
        audit
            .received
            .iter()
            .all(|r| r.signed && r.mcp_session_id.is_none())
    );
    assert_eq!(audit.mcp_sessions_started, 0);
    assert_eq!(audit.header_mismatches, 0);
    assert_eq!(audit.executions_of("weather"), 1);
    assert_eq!(audit.executions_of("add"), 1);
    each_post_answered_at_once(&records, &[]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A home-grown client: plain tower calls, the revision's `_meta` and headers written by hand
// ---------------------------------------------------------------------------------------------

/// An emulated runtime with its defaults, and the recommended stack over hyper-util's client
/// for it, used as a plain service.
async fn plain_stack() -> Result<
    (
        Emulator,
        impl Service<
            Request<Full<Bytes>>,
            Response = Response<impl Body<Data = Bytes, Error: Into<BoxError>>>,
            Error = agentcore_tower::Error,
        >,
    ),
    BoxError,
> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let stack = tower::ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            emulator.signer().build()?,
        ))
        .service(http_client());
    Ok((emulator, stack))
}

/// A 2026-07-28 request: `params` with the version, the capabilities and the client in its
/// `_meta`.
fn message(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        protocol::PROTOCOL_VERSION_META: protocol::LATEST,
        CLIENT_CAPABILITIES: {},
        "io.modelcontextprotocol/clientInfo": {"name": "home-grown", "version": "0"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A 2026-07-28 `tools/call` of `name` with `arguments`.
fn call_of(id: u64, name: &str, arguments: Value) -> Value {
    message(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// The POST of `message` as a 2026-07-28 client writes it: `MCP-Protocol-Version` from its
/// `_meta`, then `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` the listing asked for.
fn post_of(message: &Value, params: &ParamHeaders) -> Request<Full<Bytes>> {
    let version = protocol::version_in_meta(message).expect("a version in _meta");
    let mut request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .body(Full::new(Bytes::from(message.to_string())))
        .expect("a valid request");
    request
        .headers_mut()
        .extend(protocol::request_headers(message, Some(params)));
    request
}

/// What the stack answered one POST.
struct Answer {
    status: StatusCode,
    body: Value,
    record: AttemptRecord,
}

async fn send<S, B>(stack: &mut S, request: Request<Full<Bytes>>) -> Result<Answer, BoxError>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = agentcore_tower::Error>,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let response = stack.ready().await?.call(request).await?;
    let record = AttemptRecord::of_response(&response)
        .cloned()
        .expect("every answer carries its record");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
    assert_eq!(
        parts.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..]),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    Ok(Answer {
        status: parts.status,
        body: serde_json::from_slice(&bytes)?,
        record,
    })
}

/// The record of a call sent once and answered `code`, delivered as it came.
fn sent_once(record: &AttemptRecord, code: u16) {
    assert_eq!(
        record.to_string(),
        format!("#1 HTTP {code} -> replay_guard: delivered; effect unknown")
    );
    let attempts = record.attempts();
    assert_eq!(attempts[0].outcome(), &status(code));
    assert!(!attempts[0].was_sent_again());
}

/// How often the emulator received the JSON-RPC request with `id`.
fn received_id(audit: &Audit, id: u64) -> usize {
    let id = id.to_string();
    audit
        .received
        .iter()
        .filter(|r| r.id.as_deref() == Some(id.as_str()))
        .count()
}

fn tool_text(answer: &Answer) -> &str {
    answer.body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool's text: {}", answer.body))
}

#[tokio::test]
async fn a_home_grown_client_discovers_lists_and_calls() -> Result<(), BoxError> {
    let (emulator, mut stack) = plain_stack().await?;
    let mut params = ParamHeaders::default();

    let discover = send(
        &mut stack,
        post_of(&message(1, "server/discover", json!({})), &params),
    )
    .await?;
    assert_eq!(discover.status, StatusCode::OK);
    let result = &discover.body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["supportedVersions"],
        json!(protocol::KNOWN_VERSIONS),
        "every version, 2026-07-28 the newest"
    );
    sent_once(&discover.record, 200);

    let list = send(
        &mut stack,
        post_of(&message(2, "tools/list", json!({})), &params),
    )
    .await?;
    assert_eq!(list.status, StatusCode::OK);
    let names: Vec<&str> = list.body["result"]["tools"]
        .as_array()
        .expect("a list of tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, TOOLS_2026);
    assert_eq!(list.body["result"]["resultType"], "complete");
    params.learn(&list.body["result"]);
    assert!(params.annotates("weather"));
    sent_once(&list.record, 200);

    let call = call_of(3, "add", json!({"a": 2, "b": 3}));
    let sum = send(&mut stack, post_of(&call, &params)).await?;
    assert_eq!(sum.status, StatusCode::OK);
    assert_eq!(tool_text(&sum), "5");
    assert_eq!(sum.body["result"]["isError"], false);
    assert_eq!(sum.body["result"]["resultType"], "complete");
    sent_once(&sum.record, 200);

    // `city` is annotated `x-mcp-header: City`: the client writes `Mcp-Param-City` (Base64 in
    // the revision's form, not being plain ASCII). `InvokeAgentRuntime` models no such header,
    // so the signer drops it (README, "Protocol versions, door by door"): the server behind
    // the runtime finds it missing and answers -32020, delivered as it came; nothing ran.
    let call = call_of(4, "weather", json!({"city": "Zürich"}));
    let request = post_of(&call, &params);
    assert_eq!(
        request.headers()["mcp-param-city"],
        "=?base64?WsO8cmljaA==?="
    );
    let weather = send(&mut stack, request).await?;
    assert_eq!(weather.status, StatusCode::BAD_REQUEST);
    assert_eq!(weather.body["error"]["code"], -32020);
    assert_eq!(
        weather.body["error"]["message"],
        "mcp-param-city is missing (the body says `Zürich`)"
    );
    sent_once(&weather.record, 400);

    let audit = emulator.audit();
    assert_eq!(
        methods(&audit),
        ["server/discover", "tools/list", "tools/call", "tools/call"]
    );
    assert_eq!(
        audit
            .received
            .iter()
            .map(|r| (r.mcp_method.as_deref(), r.mcp_name.as_deref()))
            .collect::<Vec<_>>(),
        [
            (Some("server/discover"), None),
            (Some("tools/list"), None),
            (Some("tools/call"), Some("add")),
            (Some("tools/call"), Some("weather")),
        ]
    );
    assert!(audit.received.iter().all(|r| r.mcp_session_id.is_none()));
    assert_eq!(audit.mcp_sessions_started, 0);
    one_runtime_session(&audit, 1);
    assert_eq!(audit.header_mismatches, 1);
    assert_eq!(audit.requests, 4, "the -32020 was not sent again");
    assert_eq!(audit.executions_of("add"), 1);
    assert_eq!(audit.executions_of("weather"), 0);
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    Ok(())
}

/// MCP 2026-07-28's multi round-trip request: the first `confirm` is answered with an
/// `InputRequiredResult` (nothing runs); the client answers the elicitation and sends the
/// request again with `inputResponses` and the echoed `requestState`, under a new id. That
/// second request is the client's new call with a record of its own — one attempt each, no
/// replay by the stack — and the tool runs once.
#[tokio::test]
async fn a_home_grown_client_completes_the_confirm_round_trip() -> Result<(), BoxError> {
    let (emulator, mut stack) = plain_stack().await?;
    let params = ParamHeaders::default();
    let arguments = json!({"action": "deploy"});

    let first = call_of(10, "confirm", arguments.clone());
    let asked = send(&mut stack, post_of(&first, &params)).await?;
    assert_eq!(asked.status, StatusCode::OK);
    let result = &asked.body["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let elicitation = &result["inputRequests"]["confirm"];
    assert_eq!(elicitation["method"], "elicitation/create");
    assert_eq!(elicitation["params"]["message"], "Confirm deploy?");
    let request_state = result["requestState"]
        .as_str()
        .expect("an opaque requestState")
        .to_owned();
    sent_once(&asked.record, 200);
    assert_eq!(emulator.audit().executions_of("confirm"), 0, "nothing ran");
    assert_eq!(emulator.audit().inputs_required, 1);

    let again = message(
        11,
        "tools/call",
        json!({
            "name": "confirm",
            "arguments": arguments,
            "inputResponses": {"confirm": {"action": "accept", "content": {"confirmed": true}}},
            "requestState": request_state,
        }),
    );
    let done = send(&mut stack, post_of(&again, &params)).await?;
    assert_eq!(done.status, StatusCode::OK);
    assert_eq!(done.body["result"]["resultType"], "complete");
    assert_eq!(tool_text(&done), "confirmed: deploy");
    sent_once(&done.record, 200);

    let audit = emulator.audit();
    assert_eq!(methods(&audit), ["tools/call", "tools/call"]);
    assert_eq!((received_id(&audit, 10), received_id(&audit, 11)), (1, 1));
    assert_eq!(audit.executions_of("confirm"), 1);
    assert_eq!(
        audit
            .executions_by_id
            .get(&("confirm".to_owned(), "11".to_owned())),
        Some(&1),
        "the second leg ran, once"
    );
    assert_eq!(audit.executions.values().sum::<u64>(), 1);
    assert_eq!(audit.inputs_required, 1);
    one_runtime_session(&audit, 1);
    Ok(())
}

/// A header that disagrees with the body — an `Mcp-Name` naming another tool, an
/// `MCP-Protocol-Version` other than `_meta`'s — is refused by the server with HTTP 400 and
/// -32020 `HeaderMismatch` before anything runs; the stack delivers it at once, not sent again
/// (even for `add`, declared idempotent), one attempt in the record.
#[tokio::test]
async fn a_header_mismatch_is_delivered_once_and_nothing_runs() -> Result<(), BoxError> {
    let (emulator, mut stack) = plain_stack().await?;
    let params = ParamHeaders::default();
    let add = |id| call_of(id, "add", json!({"a": 2, "b": 3}));

    let mut wrong_name = post_of(&add(20), &params);
    wrong_name
        .headers_mut()
        .insert("mcp-name", http::HeaderValue::from_static("echo"));
    let mut wrong_version = post_of(&add(21), &params);
    wrong_version.headers_mut().insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static("2025-11-25"),
    );
    for (id, request, reason) in [
        (
            20,
            wrong_name,
            "mcp-name `echo` does not match the body's `add`",
        ),
        (
            21,
            wrong_version,
            "mcp-protocol-version `2025-11-25` does not match the body's `2026-07-28`",
        ),
    ] {
        let refused = send(&mut stack, request).await?;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.body["id"], id);
        assert_eq!(refused.body["error"]["code"], -32020, "{}", refused.body);
        assert_eq!(refused.body["error"]["message"], reason);
        sent_once(&refused.record, 400);
    }

    let audit = emulator.audit();
    assert_eq!(audit.header_mismatches, 2);
    assert_eq!((received_id(&audit, 20), received_id(&audit, 21)), (1, 1));
    assert_eq!(audit.requests, 2, "neither was sent again");
    assert_eq!(audit.executions_of("add"), 0, "nothing ran");
    assert!(audit.executions.is_empty());

    // The same call with the right headers runs.
    let sum = send(&mut stack, post_of(&add(22), &params)).await?;
    assert_eq!(tool_text(&sum), "5");
    sent_once(&sum.record, 200);
    assert_eq!(emulator.audit().executions_of("add"), 1);
    one_runtime_session(&emulator.audit(), 1);
    Ok(())
}
