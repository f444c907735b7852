//! A client of MCP's `initialize` era (2025-06-18, written by hand) through the proxy, over stdio
//! and over `--listen`, to a runtime whose MCP server speaks only 2026-07-28: the proxy's stack
//! bridges it (its `initialize` refused, answered from one `server/discover`; its requests sent
//! as 2026-07-28 writes them), and each call runs once. At a server of both eras the same client
//! goes as it is: its `initialize` is the server's, and no `server/discover` is sent. And the
//! other direction, with `--bridge-modern-clients`: a client pinned to 2026-07-28 (raw JSON
//! lines) at a runtime of the `initialize` era, its refused `server/discover` answered from the
//! one MCP session the proxy's bridge opens, its requests sent in that session.

use crate::common;

use std::collections::HashSet;

use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig};
use serde_json::{Value, json};

use common::{
    Client, HttpClient, Listening, Proxy, call, initialize, initialized, modern, ran_once_each,
    request, start_emulator, text_of, tool_names,
};

/// The version the client asks for, and is answered with by either server.
const CLIENT_VERSION: &str = "2025-06-18";
const EMULATOR: &str = "agentcore-tower-emulator";
const TOOLS_2025: [&str; 3] = ["add", "echo", "counter"];
const TOOLS_2026: [&str; 7] = [
    "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job",
];

/// The bridged client's GET: a `subscriptions/listen`'s stream.
#[cfg(unix)]
const BRIDGED_STREAM: (u16, Option<&str>) = (200, Some("text/event-stream"));

fn modern_only() -> EmulatorConfig {
    EmulatorConfig::default().oldest_protocol_version("2026-07-28")
}

/// Over `--listen`, in the session `initialize` opened.
impl Client for HttpClient {
    async fn ask(&mut self, request: Value) -> Value {
        let answer = self.post(&request).await;
        assert_eq!(answer.status, 200, "{request}: {answer:?}");
        let answer = answer.message();
        assert_eq!(answer["id"], request["id"], "{answer}");
        answer
    }
}

/// The session's steps after `initialize`: the tools (`tools`), `add` (once), a ping.
async fn list_add_ping(client: &mut impl Client, tools: &[&str]) {
    let listed = client.ask(request(2, "tools/list", json!({}))).await;
    assert_eq!(tool_names(&listed), tools, "{listed}");
    let added = client.ask(call(3, "add", json!({"a": 2, "b": 3}))).await;
    assert_eq!(text_of(&added), "5", "{added}");
    assert_eq!(added["result"]["isError"], false, "{added}");
    let pong = client.ask(request(4, "ping", json!({}))).await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 4, "result": {}}));
}

/// The `initialize` answer: the client's version and the emulator's name.
fn assert_initialized(answer: &Value) {
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], CLIENT_VERSION,
        "{answer}"
    );
    assert_eq!(answer["result"]["serverInfo"]["name"], EMULATOR, "{answer}");
}

/// The runtime's invocations: each JSON-RPC method, whether it named an MCP session, and its
/// `Mcp-Method`.
fn invocations(audit: &Audit) -> Vec<(String, bool, Option<String>)> {
    audit
        .received
        .iter()
        .filter(|r| r.operation.as_deref() == Some("invocations"))
        .map(|r| {
            (
                r.method.clone().unwrap_or_default(),
                r.mcp_session_id.is_some(),
                r.mcp_method.clone(),
            )
        })
        .collect()
}

fn rows(rows: &[(&str, bool, Option<&str>)]) -> Vec<(String, bool, Option<String>)> {
    rows.iter()
        .map(|(method, session, mcp)| ((*method).to_owned(), *session, mcp.map(str::to_owned)))
        .collect()
}

/// What a modern-only runtime saw of a bridged client: the refused `initialize`, one
/// discovery, then 2026-07-28 requests in no MCP session; `add` ran once; one runtime session.
///
/// The server's stream the client opened (the stdio proxy opens it for its client) is carried
/// on one `subscriptions/listen`, sent beside the client's requests.
fn assert_bridged(audit: &Audit) {
    let listen = rows(&[("subscriptions/listen", false, Some("subscriptions/listen"))]);
    let mut seen = invocations(audit);
    assert_eq!(
        seen.iter().filter(|row| **row == listen[0]).count(),
        1,
        "{:?}",
        audit.received
    );
    seen.retain(|row| *row != listen[0]);
    assert_eq!(audit.listens, 1, "{audit:?}");
    assert_eq!(
        seen,
        rows(&[
            ("initialize", false, None),
            ("server/discover", false, Some("server/discover")),
            ("tools/list", false, Some("tools/list")),
            ("tools/call", false, Some("tools/call")),
        ]),
        "{:?}",
        audit.received
    );
    let call = audit
        .received
        .iter()
        .find(|r| r.method.as_deref() == Some("tools/call"));
    assert_eq!(call.and_then(|r| r.mcp_name.as_deref()), Some("add"));
    assert_eq!(audit.mcp_sessions_started, 0, "{audit:?}");
    assert_eq!(audit.header_mismatches, 0, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    ran_once_each(audit, &[("add", 3)]);
}

/// What a runtime of both eras saw: the client's own session, no `server/discover`.
fn assert_as_it_is(audit: &Audit) {
    assert_eq!(
        invocations(audit),
        rows(&[
            ("initialize", false, None),
            ("notifications/initialized", true, None),
            ("tools/list", true, None),
            ("tools/call", true, Some("tools/call")),
            ("ping", true, None),
        ]),
        "{:?}",
        audit.received
    );
    assert_eq!(audit.mcp_sessions_started, 1, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    ran_once_each(audit, &[("add", 3)]);
}

/// Every request reached one runtime session, the only one started.
fn assert_one_runtime_session(audit: &Audit) {
    let sessions: HashSet<_> = audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone())
        .collect();
    assert_eq!(sessions.len(), 1, "{:?}", audit.received);
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
}

/// A session over stdio against `emulator`, listing `tools`; the proxy exits 0 with nothing
/// more written.
async fn over_stdio(emulator: &Emulator, tools: &[&str]) {
    let mut proxy = Proxy::start(emulator, &[]);
    let opened = proxy.ask(initialize(1)).await;
    assert_initialized(&opened);
    proxy.send(&initialized());
    list_add_ping(&mut proxy, tools).await;
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "{}", proxy.stderr());
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());
}

/// The client's GET of the server's stream: its status and `Content-Type` (the body dropped
/// unread, which closes the stream).
#[cfg(unix)]
async fn open_stream(client: &HttpClient) -> (u16, Option<String>) {
    let mut request = http::Request::get(&client.url);
    for (name, value) in client.headers(&[("accept", "text/event-stream")]) {
        request = request.header(name, value);
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let answer = tokio::time::timeout(client.timeout, client.client.request(request))
        .await
        .expect("an answer in time")
        .expect("the endpoint answers");
    let kind = answer
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (answer.status().as_u16(), kind)
}

/// A session over `--listen` against `emulator`, listing `tools`, opening the server's stream
/// (`stream`: its status and `Content-Type`), ended with DELETE.
#[cfg(unix)]
async fn over_listen(emulator: &Emulator, tools: &[&str], stream: (u16, Option<&str>)) {
    let listening = Listening::start(emulator, &[]).await;
    let mut client = HttpClient::new(&listening.url, None);
    let opened = client.open().await;
    assert_initialized(&opened);
    list_add_ping(&mut client, tools).await;
    let (status, kind) = open_stream(&client).await;
    assert_eq!((status, kind.as_deref()), stream);
    let ended = client.send("DELETE", None, &[]).await;
    assert!(matches!(ended.status, 200 | 204), "{ended:?}");
    listening.terminated_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_over_stdio_is_bridged_at_a_modern_only_runtime() {
    let emulator = start_emulator(modern_only()).await;
    over_stdio(&emulator, &TOOLS_2026).await;
    let audit = emulator.audit();
    assert_bridged(&audit);
    assert_one_runtime_session(&audit);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_over_listen_is_bridged_at_a_modern_only_runtime() {
    let emulator = start_emulator(modern_only()).await;
    over_listen(&emulator, &TOOLS_2026, BRIDGED_STREAM).await;
    let audit = emulator.audit();
    assert_bridged(&audit);
    // The bridged requests (no MCP session on the wire) share one runtime session.
    let bridged: HashSet<_> = audit.received[1..]
        .iter()
        .map(|r| r.runtime_session_id.clone())
        .collect();
    assert_eq!(bridged.len(), 1, "{:?}", audit.received);
}

/// Over `--listen` each MCP session has a runtime session of its own, stopped at its DELETE.
/// A bridged client's should be the same: one runtime session, where its refused `initialize`
/// went, stopped when the client ends its session.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_client_over_listen_has_one_runtime_session_stopped_at_its_delete() {
    let emulator = start_emulator(modern_only()).await;
    over_listen(&emulator, &TOOLS_2026, BRIDGED_STREAM).await;
    let audit = emulator.audit();
    assert_bridged(&audit);
    assert_one_runtime_session(&audit);
    assert_eq!(audit.sessions_stopped, 1, "{audit:?}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_at_a_runtime_of_both_eras_is_not_bridged() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    over_stdio(&emulator, &TOOLS_2025).await;
    let audit = emulator.audit();
    assert_as_it_is(&audit);
    assert_one_runtime_session(&audit);

    let emulator = start_emulator(EmulatorConfig::default()).await;
    over_listen(&emulator, &TOOLS_2025, (405, None)).await;
    let audit = emulator.audit();
    assert_as_it_is(&audit);
    assert_one_runtime_session(&audit);
    assert_eq!(
        audit.sessions_stopped, 1,
        "stopped at the DELETE: {audit:?}"
    );
}

/// A runtime whose MCP server speaks only the `initialize` era.
fn legacy_only() -> EmulatorConfig {
    EmulatorConfig::default().newest_protocol_version("2025-11-25")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_over_stdio_is_bridged_at_a_legacy_only_runtime_with_bridge_modern_clients() {
    let emulator = start_emulator(legacy_only()).await;
    let mut proxy = Proxy::start(&emulator, &["--bridge-modern-clients"]);
    let discovered = proxy
        .ask(modern(1, "server/discover", json!({}), false))
        .await;
    // From the bridge's initialize: the revision, the emulator's capabilities and information.
    let result = &discovered["result"];
    assert_eq!(result["resultType"], "complete", "{discovered}");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28"]),
        "{discovered}"
    );
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": false}}),
        "{discovered}"
    );
    assert_eq!(
        result["_meta"],
        json!({"io.modelcontextprotocol/serverInfo":
            {"name": EMULATOR, "version": env!("CARGO_PKG_VERSION")}}),
        "{discovered}\n{}",
        proxy.stderr()
    );
    let listed = proxy.ask(modern(2, "tools/list", json!({}), false)).await;
    assert_eq!(tool_names(&listed), TOOLS_2025, "{listed}");
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    let params = json!({"name": "add", "arguments": {"a": 2, "b": 3}});
    let added = proxy.ask(modern(3, "tools/call", params, false)).await;
    assert_eq!(
        added,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete",
            "content": [{"type": "text", "text": "5"}], "isError": false}})
    );
    let (rest, status, proxy) = proxy.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "{}", proxy.stderr());
    assert_eq!(status.code(), Some(0), "{}", proxy.stderr());

    // The client's discovery refused, the bridge's initialize and notifications/initialized,
    // then each request in the one MCP session it opened; add ran once.
    let audit = emulator.audit();
    assert_eq!(
        invocations(&audit),
        rows(&[
            ("server/discover", false, Some("server/discover")),
            ("initialize", false, None),
            ("notifications/initialized", true, None),
            ("tools/list", true, None),
            ("tools/call", true, Some("tools/call")),
        ]),
        "{:?}",
        audit.received
    );
    assert_eq!(audit.mcp_sessions_started, 1, "{audit:?}");
    let session = &audit.received[2].mcp_session_id;
    assert!(
        audit.received[2..]
            .iter()
            .all(|r| &r.mcp_session_id == session),
        "{:?}",
        audit.received
    );
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
    ran_once_each(&audit, &[("add", 3)]);
    assert_one_runtime_session(&audit);
}
