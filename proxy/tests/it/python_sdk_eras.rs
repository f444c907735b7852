//! The official Python MCP SDK across MCP's eras through the proxy's bridge, over stdio and over
//! `--listen`, each pairing through an elicitation round trip: the tools listed, `add` called,
//! then `confirm`, which asks the user first.
//!
//! - A client of the `initialize` era — the SDK 1.30 client (`client_v1.py`, 2025-11-25) and the
//!   2.3 client pinned to `legacy` (`client.py`) — at a runtime that speaks only 2026-07-28:
//!   the emulator's `confirm` answers an `InputRequiredResult`, which the bridge puts to the
//!   client as 2025 servers ask (an `elicitation/create` request on the call's stream), then
//!   sends the call again with the client's answer.
//! - The 2.3 client pinned to 2026-07-28 at the SDK 1.30's own server (`server_v1.py`, which
//!   speaks only the `initialize` era), through `--url` with `--bridge-modern-clients`: the
//!   server's `confirm` asks with an `elicitation/create` request of its own on the call's
//!   stream, which the bridge turns into an `InputRequiredResult` round trip for the client.
//!
//! The venvs, the clients' lines and the emulator's audit are read as `python_sdk` reads them.

use crate::common;
use crate::python_sdk::{
    ALL_TOOLS, MODERN, TOKEN, called, confirmed, connected, expect, finished,
    initialized_list_and_add, invocations_beside_the_listen, listed, modern_only, over_http,
    over_stdio, python_command, rows, runtime_sessions, sdk_1_command, server_at, through_proxy,
};

use std::process::Command;
use std::time::Duration;

use agentcore_tower_emulator::Emulator;
use serde_json::{Value, json};

use common::{Proxy, start_emulator};

/// The steps of every pairing: the tools, `add`, then `confirm` with its one elicitation.
const STEPS: [&str; 3] = [
    "list",
    r#"call:add:{"a":2,"b":3}"#,
    r#"mrtr:confirm:{"action":"deploy"}"#,
];

/// How the client reaches the proxy.
#[derive(Clone, Copy, Debug)]
enum Over {
    /// The client runs the proxy and talks to it over stdio.
    Stdio,
    /// The proxy serves `--listen 127.0.0.1:0` (with a token file); the client talks to it
    /// over Streamable HTTP.
    Listen,
}

/// `--listen 127.0.0.1:0` with a token file of [`TOKEN`] in `dir`, then `args`.
fn listen_args(dir: &common::TempDir, args: &[&str]) -> Vec<String> {
    let token_file = dir.write("token", TOKEN);
    let mut all = vec!["--listen-token-file".to_owned(), token_file];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    common::listen_args(&common::strs(&all))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Clients of the `initialize` era at a runtime that speaks only 2026-07-28.

/// A client of the `initialize` era.
#[derive(Clone, Copy, Debug)]
enum Client2025 {
    /// The SDK 1.30's client, `client_v1.py`.
    Sdk1,
    /// The SDK 2.3's client pinned to `legacy`, `client.py`.
    Sdk2Legacy,
}

impl Client2025 {
    /// The client's command, before its connection's arguments and its steps.
    fn command(self) -> Command {
        match self {
            Client2025::Sdk1 => sdk_1_command("client_v1.py"),
            Client2025::Sdk2Legacy => {
                let mut command = python_command("client.py");
                command.args(["--mode", "legacy"]);
                command
            }
        }
    }

    /// The id of the client's first request (`initialize`): the SDK 1.x numbers its requests
    /// from 0, the 2.x from 1.
    fn first_id(self) -> u64 {
        match self {
            Client2025::Sdk1 => 0,
            Client2025::Sdk2Legacy => 1,
        }
    }
}

/// `client` running [`STEPS`] through the proxy `over` to `emulator`'s runtime: the client, and
/// the proxy when it is not the client's child (kept running until dropped).
async fn to_modern_only_runtime(
    client: Client2025,
    over: Over,
    emulator: &Emulator,
    dir: &common::TempDir,
) -> (Proxy, Option<Proxy>) {
    let mut command = client.command();
    match over {
        Over::Stdio => {
            command.args(STEPS);
            let args = common::runtime_args(emulator, &[]);
            let env = common::credentials_env(emulator);
            let client = through_proxy(command, &common::strs(&args), &common::pairs(&env));
            (client, None)
        }
        Over::Listen => {
            let args = listen_args(dir, &[]);
            let proxy = Proxy::start(emulator, &common::strs(&args));
            let url = proxy.listen_url().await;
            command.args(["--url", &url, "--token", TOKEN]).args(STEPS);
            (Proxy::spawn(command), Some(proxy))
        }
    }
}

/// `client` through the proxy `over` to a modern-only runtime: its lines (the seven tools of
/// 2026-07-28, `add`'s 5, `confirm` confirmed after one elicitation), and what the runtime saw:
/// the client's refused `initialize`, the bridge's one `server/discover`, the list, `add`, and
/// `confirm` twice (its `InputRequiredResult`, then the call again with the user's answer),
/// each `confirm` and `add` run once, for the client's own request ids; beside them one
/// `subscriptions/listen` (the server's stream the stdio proxy opens for its client, or the
/// client's GET of it over `--listen`); no MCP session, one runtime session (stopped at the
/// client's DELETE over `--listen`).
async fn bridged_elicitation(client: Client2025, over: Over) {
    let emulator = start_emulator(modern_only()).await;
    // Of this test's own: the tests of a process run at once.
    let dir = common::TempDir::new(&format!("python-sdk-eras-{client:?}-{over:?}"));
    let (mut run, proxy) = to_modern_only_runtime(client, over, &emulator, &dir).await;
    initialized_list_and_add(&mut run, &ALL_TOOLS).await;
    expect(&mut run, confirmed("deploy")).await;
    finished(run).await;

    let audit = emulator.audit();
    // Over stdio the proxy's log is in the client's stderr.
    let proxy_log = proxy.as_ref().map(Proxy::stderr).unwrap_or_default();
    let context = format!("{audit:?}\nproxy stderr:\n{proxy_log}");
    // The stream, sent beside the client's requests: once, wherever it falls among them.
    assert_eq!(audit.listens, 1, "{context}");
    assert_eq!(
        invocations_beside_the_listen(&audit, &context),
        rows(&[
            ("initialize", None),
            ("server/discover", None),
            ("tools/list", None),
            ("tools/call", Some("add")),
            ("tools/call", Some("confirm")),
            ("tools/call", Some("confirm")),
        ]),
        "{context}"
    );
    assert!(
        audit.received[1..]
            .iter()
            .all(|r| r.mcp_method == r.method && r.mcp_session_id.is_none()),
        "{context}"
    );
    assert_eq!(audit.inputs_required, 1, "{context}");
    // initialize, tools/list, then add's and confirm's calls.
    let first = client.first_id();
    common::ran_once_each(&audit, &[("add", first + 2), ("confirm", first + 3)]);
    assert_eq!(audit.mcp_sessions_started, 0, "{context}");
    assert_eq!(audit.header_mismatches, 0, "{context}");
    assert_eq!(audit.signature_failures, 0, "{context}");
    assert_eq!(runtime_sessions(&audit).len(), 1, "{context}");
    assert_eq!(audit.sessions_started, 1, "{context}");
    if let Over::Listen = over {
        assert_eq!(audit.sessions_stopped, 1, "at the DELETE: {context}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_1_x_over_stdio_answers_a_modern_only_runtimes_elicitation() {
    bridged_elicitation(Client2025::Sdk1, Over::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_1_x_over_listen_answers_a_modern_only_runtimes_elicitation() {
    bridged_elicitation(Client2025::Sdk1, Over::Listen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_2_x_in_legacy_mode_over_stdio_answers_a_modern_only_runtimes_elicitation() {
    bridged_elicitation(Client2025::Sdk2Legacy, Over::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_2_x_in_legacy_mode_over_listen_answers_a_modern_only_runtimes_elicitation() {
    bridged_elicitation(Client2025::Sdk2Legacy, Over::Listen).await;
}

// ---------------------------------------------------------------------------------------------
// The 2.3 client pinned to 2026-07-28 at the SDK 1.30's server, of the `initialize` era only.
//
// What the bridge meets there: the pinned client's first request (no MCP session) is refused
// with HTTP 400 `{"id": "server-error", "error": {"code": -32600, "message": "Bad Request:
// Missing session ID"}}` — an id that is neither the request's nor null. Then `confirm`'s
// question comes on the call's event stream as `{"method": "elicitation/create", "id": 0,
// "params": {"mode": "form", "message": "Confirm deploy?", "requestedSchema": …}}`; passed on
// as it is, the pinned client answers it `{"id": 0, "error": {"code": -32601, "message":
// "Method not found", "data": "elicitation/create"}}` (2026-07-28 has no requests of the
// server's), which must not reach the server: the bridge asks with an `InputRequiredResult`,
// and the client sends the call again under a new id with `inputResponses` (keyed as the
// bridge's `inputRequests` were) and the `requestState` as it was given.

/// What `server_v1.py` printed for one HTTP request.
fn seen(http: &str, method: Option<&str>, response: Option<&str>, status: u16) -> Value {
    let (version, session) = match method {
        // The client's first request, as it sent it; the server refuses it before reading it
        // (no MCP session: "Bad Request: Missing session ID").
        Some("tools/list") if status == 400 => (Some(MODERN), false),
        Some("initialize") => (None, false),
        _ => (Some("2025-11-25"), true),
    };
    json!({"seen": {"httpMethod": http, "method": method, "response": response,
        "status": status, "protocolVersion": version, "session": session}})
}

/// The client pinned to 2026-07-28 running [`STEPS`] through the proxy `over`, with `--url` and
/// `--bridge-modern-clients`, to `server_v1.py`: its lines (`add` and `confirm` listed, 5,
/// `confirm` confirmed after one elicitation), and what the server saw: the client's first
/// request refused, the bridge's one `initialize` (one MCP session, in which every later
/// request went), the list, `add`, `confirm` once (the server's elicitation answered once,
/// accepted), and nothing after the MCP session's end.
async fn pinned_at_the_sdk_1_x_server(over: Over) {
    let (mut server, url) = server_at(sdk_1_command("server_v1.py")).await;
    let dir = common::TempDir::new(&format!("python-sdk-eras-pinned-{over:?}"));
    let args = [
        "--url",
        &url,
        "--bearer-token-env",
        "PY_SDK_TOKEN",
        "--bridge-modern-clients",
    ];
    let env = [("PY_SDK_TOKEN", TOKEN)];
    let (mut client, proxy) = match over {
        Over::Stdio => (over_stdio(MODERN, &STEPS, &args, &env), None),
        Over::Listen => {
            let args = listen_args(&dir, &args);
            let proxy = Proxy::start_with(&common::strs(&args), &env);
            let url = proxy.listen_url().await;
            (over_http(MODERN, &STEPS, &url, TOKEN), Some(proxy))
        }
    };
    // A pinned client adopts the version without asking: no server/discover, no server name.
    expect(&mut client, connected(MODERN, "adopted", None)).await;
    expect(&mut client, listed(&["add", "confirm"])).await;
    expect(&mut client, called("add", "5")).await;
    expect(&mut client, confirmed("deploy")).await;
    finished(client).await;
    // The stdio proxy ends with its client; the one of --listen, here.
    let proxy_log = match proxy {
        Some(proxy) => {
            let log = proxy.stderr();
            drop(proxy);
            log
        }
        None => String::new(),
    };

    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut got = Vec::new();
    while let Ok(line) = server.lines.try_recv() {
        got.push(server.parse(line));
    }
    let context = format!(
        "{got:#?}\nserver stderr:\n{}\nproxy stderr:\n{proxy_log}",
        server.stderr()
    );
    // What `confirm` heard, once; printed as the server's task runs, beside the HTTP lines.
    let (elicited, mut requests): (Vec<Value>, Vec<Value>) = got
        .into_iter()
        .partition(|line| line.get("elicited").is_some());
    assert_eq!(
        elicited,
        [json!({"elicited": {"action": "accept", "confirmed": true}})],
        "{context}"
    );
    // A GET stream the bridge may open for the server's own messages is not part of this.
    requests.retain(|line| line["seen"]["httpMethod"] != "GET");
    let expected = [
        seen("POST", Some("tools/list"), None, 400),
        seen("POST", Some("initialize"), None, 200),
        seen("POST", Some("notifications/initialized"), None, 202),
        seen("POST", Some("tools/list"), None, 200),
        seen("POST", Some("tools/call"), None, 200),
        seen("POST", Some("tools/call"), None, 200),
        seen("POST", None, Some("result"), 202),
    ];
    let (head, rest) = requests.split_at(expected.len().min(requests.len()));
    assert_eq!(head, expected, "{context}");
    // Then at most the end of the MCP session.
    assert!(
        rest.is_empty() || rest == [seen("DELETE", None, None, 200)],
        "{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_over_stdio_answers_the_sdk_1_x_servers_elicitation() {
    pinned_at_the_sdk_1_x_server(Over::Stdio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_over_listen_answers_the_sdk_1_x_servers_elicitation() {
    pinned_at_the_sdk_1_x_server(Over::Listen).await;
}
