//! The official Python MCP SDK across MCP's eras through the proxy's bridge, over stdio and over
//! `--listen`, each pairing through an elicitation round trip: the tools listed, `add` called,
//! then `confirm`, which asks the user first.
//!
//! - A client of the `initialize` era — the SDK 1.30 client (`client_v1.py`, 2025-11-25) and the
//!   2.3 client pinned to `legacy` (`client.py`) — at a runtime that speaks only 2026-07-28:
//!   the emulator's `confirm` answers an `InputRequiredResult`, which the bridge puts to the
//!   client as 2025 servers ask (an `elicitation/create` request on the call's stream), then
//!   sends the call again with the client's answer.
//!
//! The venvs, the clients' lines and the emulator's audit are read as `python_sdk` reads them.

use crate::common;
use crate::python_sdk::{
    ALL_TOOLS, EMULATOR, TOKEN, called, confirmed, connected, expect, finished, invocations,
    listed, modern_only, python_command, rows, runtime_sessions, sdk_1_command, through_proxy,
};

use std::process::Command;

use agentcore_tower::emulator::Emulator;
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
    expect(
        &mut run,
        connected("2025-11-25", "initialize", Some(EMULATOR)),
    )
    .await;
    expect(&mut run, listed(&ALL_TOOLS)).await;
    expect(&mut run, called("add", "5")).await;
    expect(&mut run, confirmed("deploy")).await;
    finished(run).await;

    let audit = emulator.audit();
    // Over stdio the proxy's log is in the client's stderr.
    let proxy_log = proxy.as_ref().map(Proxy::stderr).unwrap_or_default();
    let context = format!("{audit:?}\nproxy stderr:\n{proxy_log}");
    // The stream, sent beside the client's requests: once, wherever it falls among them.
    let listen = ("subscriptions/listen".to_owned(), None);
    let mut seen = invocations(&audit);
    assert_eq!(
        seen.iter().filter(|row| **row == listen).count(),
        1,
        "{context}"
    );
    assert_eq!(audit.listens, 1, "{context}");
    seen.retain(|row| *row != listen);
    assert_eq!(
        seen,
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
