//! The emulator's MCP server as a server of both eras (the default), of the `initialize` era
//! only (`newest_protocol_version("2025-11-25")`) and of 2026-07-28 only
//! (`oldest_protocol_version("2026-07-28")`): the exact answer each gives a client of each
//! era, raw (through the emulator's own signer, no other layer), and that nothing runs and no
//! MCP session opens where a request is refused.

use crate::common::{Raw, http_client, mcp_post};
use crate::emulator::start;

use agentcore_tower_emulator::{Emulator, EmulatorConfig};
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};

/// The runtime session every request of these tests names.
const RUNTIME_SESSION: &str = "eras-runtime-session-0000000000000001";

/// The versions a server of both eras speaks.
pub(crate) const EVERY_VERSION: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The tools a 2025 client is shown, and a 2026-07-28 client.
const TOOLS_2025: [&str; 3] = ["add", "echo", "counter"];
const TOOLS_2026: [&str; 7] = [
    "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job",
];

/// The 400 of a 2025 server (the TypeScript SDK's words) to a 2026-07-28 client.
const UNSPOKEN_2026: &str = "Bad Request: Unsupported protocol version: 2026-07-28 (supported versions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)";

/// The three servers.
#[derive(Clone, Copy, Debug)]
enum Server {
    Both,
    LegacyOnly,
    ModernOnly,
}

impl Server {
    const ALL: [Server; 3] = [Server::Both, Server::LegacyOnly, Server::ModernOnly];

    fn config(self) -> EmulatorConfig {
        let config = EmulatorConfig::default();
        match self {
            Server::Both => config,
            Server::LegacyOnly => config.newest_protocol_version("2025-11-25"),
            Server::ModernOnly => config.oldest_protocol_version("2026-07-28"),
        }
    }
}

/// The door a request goes through.
#[derive(Clone, Copy)]
enum Door {
    Runtime,
    Gateway,
}

/// One POST of `body` through `door`, signed by the emulator's signer for it (the runtime's
/// writes a 2026-07-28 request's standard headers from its `_meta`), with `headers` of its
/// own.
async fn send(
    emulator: &Emulator,
    door: Door,
    headers: &[(&'static str, &str)],
    body: &Value,
) -> Raw {
    let url = match door {
        Door::Runtime => "http://agentcore.invalid/mcp".to_owned(),
        Door::Gateway => emulator.gateway_url(),
    };
    let mut request = mcp_post(&url, None, body.to_string());
    for (name, value) in headers {
        let value = http::HeaderValue::from_str(value).unwrap();
        request.headers_mut().insert(*name, value);
    }
    let answer = match door {
        Door::Runtime => {
            let signer = emulator.signer().runtime_session_id(RUNTIME_SESSION);
            let stack = ServiceBuilder::new().layer(signer.build().unwrap());
            stack.service(http_client()).oneshot(request).await
        }
        Door::Gateway => {
            let signer = emulator.endpoint_signer().build().unwrap();
            let stack = ServiceBuilder::new().layer(signer);
            stack.service(http_client()).oneshot(request).await
        }
    };
    Raw::read(answer.unwrap()).await
}

/// One POST to the runtime ([`send`]).
async fn post(emulator: &Emulator, headers: &[(&'static str, &str)], body: &Value) -> Raw {
    send(emulator, Door::Runtime, headers, body).await
}

/// The standard headers of a 2026-07-28 `tools/list`, which a client of the gateway writes
/// itself (`McpEndpointLayer` leaves them to it).
const MODERN_LIST: [(&str, &str); 2] = [
    ("mcp-protocol-version", "2026-07-28"),
    ("mcp-method", "tools/list"),
];

/// One POST to the gateway ([`send`]).
async fn gateway_post(emulator: &Emulator, headers: &[(&'static str, &str)], body: &Value) -> Raw {
    send(emulator, Door::Gateway, headers, body).await
}

fn initialize(id: u64, version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

/// A request of the `initialize` era (no `_meta` version).
fn legacy(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A request of 2026-07-28: its version and capabilities in `_meta`.
fn modern(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    legacy(id, method, params)
}

/// What tells one answer from another: its status, whether it opened an MCP session, its id,
/// and its error whole or the telling fields of its result (versions, tool names).
fn summary(answer: &Raw) -> Value {
    let json = answer.json();
    let mut summary = json!({
        "status": answer.status.as_u16(),
        "session": answer.header("mcp-session-id").is_some(),
        "id": json["id"],
    });
    if let Some(error) = json.get("error") {
        summary["error"] = error.clone();
    }
    if let Some(result) = json.get("result") {
        let mut picked = json!({});
        for key in ["protocolVersion", "supportedVersions", "resultType"] {
            if let Some(value) = result.get(key) {
                picked[key] = value.clone();
            }
        }
        if let Some(tools) = result.get("tools").and_then(Value::as_array) {
            picked["tools"] = tools.iter().map(|tool| tool["name"].clone()).collect();
        }
        summary["result"] = picked;
    }
    summary
}

fn ok(id: u64, session: bool, result: Value) -> Value {
    json!({"status": 200, "session": session, "id": id, "result": result})
}

fn refused(status: u16, id: Value, error: Value) -> Value {
    json!({"status": status, "session": false, "id": id, "error": error})
}

/// The -32022 of a modern-only server to `initialize` asking for `requested`.
fn initialize_refused(id: u64, requested: &str) -> Value {
    refused(
        400,
        json!(id),
        json!({"code": -32022, "message": "Unsupported protocol version",
            "data": {"requested": requested, "supported": ["2026-07-28"]}}),
    )
}

/// A modern-only server's 400 to a request with a 2025 header and no `_meta` version.
fn no_meta_version(id: u64) -> Value {
    refused(
        400,
        json!(id),
        json!({"code": -32602, "message": "Invalid params: request requires protocolVersion in request _meta"}),
    )
}

/// A modern-only server's 400 to a request with neither a header nor a `_meta` version.
fn no_header(id: u64) -> Value {
    refused(
        400,
        json!(id),
        json!({"code": -32020, "message":
            "Missing MCP-Protocol-Version header for request requiring per-request protocol metadata"}),
    )
}

/// A 2025 server's 400 to a request of 2026-07-28.
fn unspoken_2026() -> Value {
    refused(
        400,
        Value::Null,
        json!({"code": -32000, "message": UNSPOKEN_2026}),
    )
}

/// A 2025 client's `initialize` (id 1): the answer, and the session the client names from then
/// on (where none opens, a stale one of its own).
async fn open_2025(emulator: &Emulator) -> (Raw, String) {
    let opened = post(emulator, &[], &initialize(1, "2025-11-25")).await;
    let session = opened.header("mcp-session-id").unwrap_or("never-issued");
    let session = session.to_owned();
    (opened, session)
}

/// The headers of a 2025-11-25 request in `session`.
fn headers_2025(session: &str) -> [(&'static str, &str); 2] {
    [
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", session),
    ]
}

#[tokio::test]
async fn a_2025_client_meets_each_server() {
    for server in Server::ALL {
        let emulator = start(server.config()).await;
        let (opened, session) = open_2025(&emulator).await;
        let in_session = headers_2025(&session);
        let list = legacy(2, "tools/list", json!({}));
        let answers = [
            summary(&opened),
            summary(&post(&emulator, &in_session, &list).await),
            // A 2025-03-26 client writes no version header.
            summary(&post(&emulator, &in_session[1..], &list).await),
            summary(&post(&emulator, &[], &legacy(4, "server/discover", json!({}))).await),
        ];
        let tools = json!({"tools": TOOLS_2025});
        let unknown = json!({"code": -32601, "message": "Method not found: server/discover"});
        let expected = match server {
            Server::Both | Server::LegacyOnly => [
                ok(1, true, json!({"protocolVersion": "2025-11-25"})),
                ok(2, false, tools.clone()),
                ok(2, false, tools),
                json!({"status": 200, "session": false, "id": 4, "error": unknown}),
            ],
            Server::ModernOnly => [
                initialize_refused(1, "2025-11-25"),
                no_meta_version(2),
                no_header(2),
                no_header(4),
            ],
        };
        assert_eq!(answers, expected, "{server:?}");
        assert_one_mcp_session_unless_modern_only(&emulator, server);
    }
}

/// `server` opened one MCP session (its `initialize` answered), unless it speaks only
/// 2026-07-28.
fn assert_one_mcp_session_unless_modern_only(emulator: &Emulator, server: Server) {
    let sessions = u64::from(!matches!(server, Server::ModernOnly));
    assert_eq!(
        emulator.audit().mcp_sessions_started,
        sessions,
        "{server:?}"
    );
}

#[tokio::test]
async fn a_2026_client_meets_each_server() {
    for server in Server::ALL {
        let emulator = start(server.config()).await;
        let answers = [
            summary(&post(&emulator, &[], &modern(1, "server/discover", json!({}))).await),
            summary(&post(&emulator, &[], &modern(2, "tools/list", json!({}))).await),
            // Were it to fall back to the handshake, asking for its own version.
            summary(&post(&emulator, &[], &initialize(3, "2026-07-28")).await),
        ];
        let discovered = |versions: &[&str]| {
            ok(
                1,
                false,
                json!({"resultType": "complete", "supportedVersions": versions}),
            )
        };
        let listed = ok(
            2,
            false,
            json!({"resultType": "complete", "tools": TOOLS_2026}),
        );
        let negotiated_down = ok(3, true, json!({"protocolVersion": "2025-11-25"}));
        let expected = match server {
            Server::Both => [discovered(&EVERY_VERSION), listed, negotiated_down],
            Server::LegacyOnly => [unspoken_2026(), unspoken_2026(), negotiated_down],
            Server::ModernOnly => [
                discovered(&["2026-07-28"]),
                listed,
                initialize_refused(3, "2026-07-28"),
            ],
        };
        assert_eq!(answers, expected, "{server:?}");
        assert_one_mcp_session_unless_modern_only(&emulator, server);
    }
}

#[tokio::test]
async fn nothing_runs_where_a_call_is_refused() {
    let counter = || json!({"name": "counter", "arguments": {}});
    for server in Server::ALL {
        let emulator = start(server.config()).await;
        let (_, session) = open_2025(&emulator).await;
        let in_session = headers_2025(&session);
        let old = post(&emulator, &in_session, &legacy(2, "tools/call", counter())).await;
        let new = post(&emulator, &[], &modern(3, "tools/call", counter())).await;
        let ran = |answer: &Raw| answer.json()["result"]["content"][0]["text"].clone();
        let (old_expected, new_expected) = match server {
            Server::Both => (json!("1"), json!("2")),
            Server::LegacyOnly => (json!("1"), Value::Null),
            Server::ModernOnly => (Value::Null, json!("1")),
        };
        assert_eq!(
            (ran(&old), ran(&new)),
            (old_expected, new_expected),
            "{server:?}"
        );
        match server {
            Server::Both => {}
            Server::LegacyOnly => assert_eq!(summary(&new), unspoken_2026()),
            Server::ModernOnly => assert_eq!(summary(&old), no_meta_version(2)),
        }
        let runs = if matches!(server, Server::Both) { 2 } else { 1 };
        assert_eq!(
            emulator.audit().executions_of("counter"),
            runs,
            "{server:?}"
        );
        assert_eq!(emulator.counter(), runs, "{server:?}");
    }
}

#[tokio::test]
async fn a_gateway_of_one_era_answers_as_the_runtime_and_checks_sessions_only_in_the_initialize_era()
 {
    // Modern-only: `initialize` opens no gateway session, and a request carrying one is
    // refused for its era, not for its session.
    let modern_only = start(Server::ModernOnly.config().gateway(true)).await;
    let opened = gateway_post(&modern_only, &[], &initialize(1, "2025-06-18")).await;
    assert_eq!(summary(&opened), initialize_refused(1, "2025-06-18"));
    let in_session = [
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "stale"),
    ];
    let list = legacy(2, "tools/list", json!({}));
    let answer = gateway_post(&modern_only, &in_session, &list).await;
    assert_eq!(summary(&answer), no_meta_version(2));
    let answer = gateway_post(
        &modern_only,
        &MODERN_LIST,
        &modern(3, "tools/list", json!({})),
    )
    .await;
    assert_eq!(
        summary(&answer),
        ok(
            3,
            false,
            json!({"resultType": "complete", "tools": TOOLS_2026})
        )
    );
    let audit = modern_only.audit();
    assert_eq!(
        (audit.mcp_sessions_started, audit.mcp_session_refusals),
        (0, 0)
    );

    // Legacy-only: a 2026-07-28 request has no session, which the gateway checks first, as the
    // TypeScript SDK's transport checks the session before the version.
    let legacy_only = start(Server::LegacyOnly.config().gateway(true)).await;
    let answer = gateway_post(
        &legacy_only,
        &MODERN_LIST,
        &modern(1, "tools/list", json!({})),
    )
    .await;
    let missing = json!({"code": -32000, "message": "Missing required Mcp-Session-Id header"});
    assert_eq!(summary(&answer), refused(400, json!(1), missing));
    let opened = gateway_post(&legacy_only, &[], &initialize(2, "2025-11-25")).await;
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let [version, method] = MODERN_LIST;
    let in_session = [version, method, ("mcp-session-id", session.as_str())];
    let answer = gateway_post(
        &legacy_only,
        &in_session,
        &modern(3, "tools/list", json!({})),
    )
    .await;
    assert_eq!(summary(&answer), unspoken_2026());
}
