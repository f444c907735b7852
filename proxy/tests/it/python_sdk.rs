//! The official Python MCP SDK (PyPI `mcp` 2.3.0) through the proxy, the way its users run it:
//! its client over stdio, in auto mode (`server/discover`, falling back to `initialize`) and
//! pinned to 2026-07-28, against the emulator of either era and, through `--url`, against the
//! SDK's own 2026-07-28 server; and its Streamable HTTP client against `--listen`. And clients of
//! the `initialize` era — the SDK 1.x (`mcp` 1.30.0, the newest 1.x, which speaks 2025-11-25 and
//! earlier only) and the 2.3.0 client in its `legacy` mode — over stdio at a runtime that
//! speaks only 2026-07-28, which the proxy's bridge (`ProtocolBridgeLayer`) lets them use.
//!
//! The clients are `proxy/tests/python_sdk/client.py` (2.x) and `client_v1.py` (1.x): each runs
//! the steps it is given and prints one JSON line per step (the negotiated version, the tools,
//! each result), which the tests compare whole. The server is `proxy/tests/python_sdk/server.py`,
//! which prints a line for each request it got. Every pairing of the eras through an elicitation
//! round trip, over stdio and `--listen` (with the SDK 1.x's server, `server_v1.py`), is in
//! `python_sdk_eras`, which shares what is here.
//!
//! Each SDK's Python is a variable when set (`AGENTCORE_PYTHON`: an interpreter with
//! `mcp==2.3.0` installed; `AGENTCORE_PYTHON_SDK_1`: one with `mcp==1.30.0`), else a venv made
//! once (`python3 -m venv`, then `pip install -r` its requirements from PyPI), under a file lock
//! so that test processes running at once make it once, and kept for later runs while the
//! requirements stay the same: `target/python-sdk` from
//! `proxy/tests/python_sdk/requirements.txt`, `target/python-sdk-1` from
//! `proxy/tests/python_sdk/requirements-1.x.txt`.

use crate::common;

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use agentcore_tower_emulator::{Audit, Emulator, EmulatorConfig};
use serde_json::{Value, json};

use common::{Proxy, start_emulator};

/// The SDK release the tests are written against.
const MCP_VERSION: &str = "2.3.0";
/// The newest release of the SDK 1.x, which speaks the `initialize` era only.
const MCP_1_VERSION: &str = "1.30.0";
pub(crate) const MODERN: &str = "2026-07-28";
pub(crate) const EMULATOR: &str = "agentcore-tower-emulator";
/// The bearer token: of `--url` (the Python server takes any) and of `--listen`.
pub(crate) const TOKEN: &str = "python-sdk-test-token";

// ---------------------------------------------------------------------------------------------
// The Python, its venv, the client and the server.

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_sdk")
}

/// A release of the SDK the tests run: its pinned requirements, its venv, and the variable
/// naming a Python that has it instead.
struct Sdk {
    version: &'static str,
    /// Of `proxy/tests/python_sdk/`.
    requirements: &'static str,
    /// Of the target directory.
    venv: &'static str,
    /// A Python with `mcp==version` installed, used instead of the venv.
    env: &'static str,
    python: OnceLock<PathBuf>,
}

/// The SDK 2.x, of both eras.
static SDK: Sdk = Sdk {
    version: MCP_VERSION,
    requirements: "requirements.txt",
    venv: "python-sdk",
    env: "AGENTCORE_PYTHON",
    python: OnceLock::new(),
};

/// The SDK 1.x, of the `initialize` era only.
static SDK_1: Sdk = Sdk {
    version: MCP_1_VERSION,
    requirements: "requirements-1.x.txt",
    venv: "python-sdk-1",
    env: "AGENTCORE_PYTHON_SDK_1",
    python: OnceLock::new(),
};

impl Sdk {
    /// A Python with the SDK, found or made once per test process (tests asking meanwhile
    /// wait).
    fn python(&'static self) -> &'static Path {
        self.python
            .get_or_init(|| match std::env::var_os(self.env) {
                Some(python) => {
                    let python = PathBuf::from(python);
                    self.assert_has_sdk(&python, self.env);
                    python
                }
                None => self.venv(),
            })
    }

    /// `target/<venv>`, made (or made again, when the requirements changed) under a file
    /// lock, so that test processes running at once make it once.
    fn venv(&self) -> PathBuf {
        let (version, env) = (self.version, self.env);
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("CARGO_TARGET_TMPDIR is in the target directory");
        let dir = target.join(self.venv);
        let python = if cfg!(windows) {
            dir.join("Scripts").join("python.exe")
        } else {
            dir.join("bin").join("python")
        };
        let requirements = sdk_dir().join(self.requirements);
        let wanted = std::fs::read_to_string(&requirements).unwrap();
        // What the venv holds: the requirements it was made from, written once pip succeeded.
        let marker = dir.join("installed-requirements.txt");
        std::fs::create_dir_all(target).unwrap();
        let lock = File::create(target.join(format!("{}.lock", self.venv))).unwrap();
        lock.lock().expect("the lock of the venv");
        if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
            return python;
        }
        let _ = std::fs::remove_dir_all(&dir);
        let made = Command::new(if cfg!(windows) { "python" } else { "python3" })
            .args(["-m", "venv"])
            .arg(&dir)
            .output();
        match made {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "`python3 -m venv {}` failed: these tests need CPython 3.10+ with venv (Debian, \
                 Ubuntu: the python3-venv package), or {env} naming a Python with \
                 mcp=={version} installed.\n{}{}",
                dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => panic!(
                "python3 could not be run ({e}): these tests need CPython 3.10+ on PATH, or \
                 {env} naming a Python with mcp=={version} installed"
            ),
        }
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--quiet",
                "-r",
            ])
            .arg(&requirements)
            .output()
            .expect("the venv's python runs");
        assert!(
            out.status.success(),
            "pip could not install the Python MCP SDK ({}) into {}: it needs PyPI, or the index \
             PIP_INDEX_URL names; or set {env} to a Python with mcp=={version} installed. pip \
             said:\n{}{}",
            requirements.display(),
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.assert_has_sdk(&python, "the venv");
        std::fs::write(&marker, &wanted).unwrap();
        python
    }

    fn assert_has_sdk(&self, python: &Path, what: &str) {
        let out = Command::new(python)
            .args([
                "-c",
                "import importlib.metadata as m; print(m.version('mcp'))",
            ])
            .output()
            .unwrap_or_else(|e| panic!("{what}: {} does not run: {e}", python.display()));
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && version == self.version,
            "{what}: {} must have mcp=={} installed; it has {version:?}: {}",
            python.display(),
            self.version,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The Python running `script` of `proxy/tests/python_sdk/`.
    fn command(&'static self, script: &str) -> Command {
        let mut command = Command::new(self.python());
        command
            .arg(sdk_dir().join(script))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1");
        command
    }
}

/// The SDK 2.x's Python running `script` of `proxy/tests/python_sdk/`.
pub(crate) fn python_command(script: &str) -> Command {
    SDK.command(script)
}

/// The SDK 1.x's Python running `script` of `proxy/tests/python_sdk/`.
pub(crate) fn sdk_1_command(script: &str) -> Command {
    SDK_1.command(script)
}

/// The Python client over stdio, running the proxy with `proxy_args` and `env` as the other
/// tests run it (no AWS configuration of the machine's): `common::Proxy` is any child process
/// with its stdout read line by line, here the client's.
pub(crate) fn over_stdio(
    mode: &str,
    steps: &[&str],
    proxy_args: &[&str],
    env: &[(&str, &str)],
) -> Proxy {
    let mut command = python_command("client.py");
    command.args(["--mode", mode]).args(steps);
    through_proxy(command, proxy_args, env)
}

/// `command`, a client of `proxy/tests/python_sdk/` given its steps, over stdio to the proxy
/// run with `proxy_args` and `env`.
pub(crate) fn through_proxy(
    mut command: Command,
    proxy_args: &[&str],
    env: &[(&str, &str)],
) -> Proxy {
    let proxy = common::command(proxy_args, env);
    command.arg("--");
    command.arg(proxy.get_program()).args(proxy.get_args());
    // The client hands its environment to the proxy.
    for (name, value) in proxy.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    Proxy::spawn(command)
}

/// The Python client over Streamable HTTP to `url`, with a bearer token.
pub(crate) fn over_http(mode: &str, steps: &[&str], url: &str, token: &str) -> Proxy {
    let mut command = python_command("client.py");
    command
        .args(["--mode", mode, "--url", url, "--token", token])
        .args(steps);
    Proxy::spawn(command)
}

/// The Python client over stdio through the proxy to the emulator's runtime.
pub(crate) fn to_runtime(emulator: &Emulator, mode: &str, steps: &[&str]) -> Proxy {
    let args = common::runtime_args(emulator, &[]);
    let env = common::credentials_env(emulator);
    over_stdio(mode, steps, &common::strs(&args), &common::pairs(&env))
}

/// The client's next line, which must be `expected`.
pub(crate) async fn expect(client: &mut Proxy, expected: Value) {
    let line = client.next().await;
    assert_eq!(line, expected, "stderr:\n{}", client.stderr());
}

/// The client's last line was written: it exits 0 with nothing more.
pub(crate) async fn finished(client: Proxy) {
    let (rest, status, client) = client.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "stderr:\n{}", client.stderr());
    assert_eq!(status.code(), Some(0), "stderr:\n{}", client.stderr());
}

pub(crate) fn connected(version: &str, handshake: &str, server: Option<&str>) -> Value {
    json!({"step": "connect", "protocolVersion": version, "handshake": handshake, "serverName": server})
}

pub(crate) fn listed(tools: &[&str]) -> Value {
    json!({"step": "list", "tools": tools})
}

pub(crate) fn called(tool: &str, text: &str) -> Value {
    json!({"step": "call", "tool": tool, "isError": false, "text": [text]})
}

/// `confirm` answered after one elicitation, accepted.
pub(crate) fn confirmed(action: &str) -> Value {
    json!({"step": "mrtr", "tool": "confirm", "isError": false,
           "text": [format!("confirmed: {action}")],
           "elicitations": [{"mode": "form", "message": format!("Confirm {action}?")}]})
}

fn listening() -> Value {
    json!({"step": "listen", "honored": {"toolsListChanged": true}})
}

fn event() -> Value {
    json!({"step": "event", "event": "ToolsListChanged"})
}

fn list_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

/// Every tool the emulator lists to a 2026-07-28 client.
pub(crate) const ALL_TOOLS: [&str; 7] = [
    "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job",
];
const STEPS: [&str; 4] = [
    "list",
    r#"call:add:{"a":2,"b":3}"#,
    r#"mrtr:confirm:{"action":"deploy"}"#,
    "listen",
];

// ---------------------------------------------------------------------------------------------
// What the emulator saw.

/// The runtime's invocations: each JSON-RPC method, with the tool a call named.
pub(crate) fn invocations(audit: &Audit) -> Vec<(String, Option<String>)> {
    audit
        .received
        .iter()
        .filter(|r| r.operation.as_deref() == Some("invocations"))
        .map(|r| (r.method.clone().unwrap_or_default(), r.mcp_name.clone()))
        .collect()
}

/// `before`, then what a runtime of the `initialize` era sees of a session opened by
/// `initialize` that runs [`LIST_AND_ADD`], as [`rows`].
fn initialized_rows(before: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    let session = [
        ("initialize", None),
        ("notifications/initialized", None),
        ("tools/list", None),
        ("tools/call", Some("add")),
    ];
    rows(&[before, &session].concat())
}

pub(crate) fn rows(rows: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    rows.iter()
        .map(|(m, n)| ((*m).to_owned(), n.map(str::to_owned)))
        .collect()
}

/// The runtime sessions the requests arrived on.
pub(crate) fn runtime_sessions(audit: &Audit) -> HashSet<String> {
    audit
        .received
        .iter()
        .map(|r| r.runtime_session_id.clone().unwrap_or_default())
        .collect()
}

/// A 2026-07-28 client's run of [`STEPS`]: one runtime session, no MCP session, `add` and
/// `confirm` each run once (the first leg of `confirm` runs nothing), one listen stream.
fn assert_modern_run(audit: &Audit) {
    assert_eq!(runtime_sessions(audit).len(), 1, "{:?}", audit.received);
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
    assert_eq!(audit.mcp_sessions_started, 0, "no initialize: {audit:?}");
    assert!(
        audit.received.iter().all(|r| r.mcp_session_id.is_none()),
        "{:?}",
        audit.received
    );
    assert_eq!(audit.executions_of("add"), 1, "{audit:?}");
    assert_eq!(audit.executions_of("confirm"), 1, "{audit:?}");
    assert_eq!(audit.executions.len(), 2, "nothing else ran: {audit:?}");
    assert!(
        audit.executions_by_id.values().all(|n| *n == 1),
        "nothing ran twice: {audit:?}"
    );
    assert_eq!(audit.inputs_required, 1, "{audit:?}");
    assert_eq!(audit.listens, 1, "{audit:?}");
    assert_eq!(audit.header_mismatches, 0, "{audit:?}");
    assert_eq!(audit.signature_failures, 0, "{audit:?}");
}

/// The runtime's invocations for [`STEPS`], after what the connection sent first.
fn modern_invocations(first: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    let mut all = first.to_vec();
    all.extend([
        ("tools/list", None),
        ("tools/call", Some("add")),
        ("tools/call", Some("confirm")),
        ("tools/call", Some("confirm")),
        ("subscriptions/listen", None),
    ]);
    rows(&all)
}

/// What the runtime saw of a 2026-07-28 client's run of [`STEPS`] after what it sent first
/// ([`modern_invocations`], [`assert_modern_run`]); `context` follows the audit in a failure.
fn assert_modern_steps(audit: &Audit, first: &[(&str, Option<&str>)], context: &str) {
    assert_eq!(
        invocations(audit),
        modern_invocations(first),
        "{audit:?}{context}"
    );
    assert_modern_run(audit);
}

/// Runs [`STEPS`] to their end: the list, the call, the MRTR round trip, then a notification
/// pushed once the listen stream is acknowledged.
async fn run_steps(client: &mut Proxy, emulator: &Emulator) {
    expect(client, listed(&ALL_TOOLS)).await;
    expect(client, called("add", "5")).await;
    expect(client, confirmed("deploy")).await;
    expect(client, listening()).await;
    assert_eq!(
        emulator.notify_listeners(list_changed()),
        1,
        "the client's stream is open"
    );
    expect(client, event()).await;
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_mode_over_stdio_lands_on_2026_07_28_at_a_runtime() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut client = to_runtime(&emulator, "auto", &STEPS);
    expect(&mut client, connected(MODERN, "discover", Some(EMULATOR))).await;
    run_steps(&mut client, &emulator).await;
    finished(client).await;
    assert_modern_steps(&emulator.audit(), &[("server/discover", None)], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_over_stdio_at_a_runtime() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut client = to_runtime(&emulator, MODERN, &STEPS);
    // A pinned client adopts the version without asking: no server/discover, no server name.
    expect(&mut client, connected(MODERN, "adopted", None)).await;
    run_steps(&mut client, &emulator).await;
    finished(client).await;
    assert_modern_steps(&emulator.audit(), &[], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_mode_falls_back_to_initialize_at_a_2025_11_25_runtime() {
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = start_emulator(config).await;
    let mut client = to_runtime(&emulator, "auto", &["list", r#"call:add:{"a":2,"b":3}"#]);
    initialized_list_and_add(&mut client, &["add", "echo", "counter"]).await;
    finished(client).await;
    let audit = emulator.audit();
    assert_eq!(
        invocations(&audit),
        initialized_rows(&[("server/discover", None)]),
        "{audit:?}"
    );
    assert_eq!(runtime_sessions(&audit).len(), 1, "{:?}", audit.received);
    assert_eq!(audit.mcp_sessions_started, 1, "{audit:?}");
    assert_eq!(audit.executions_of("add"), 1, "{audit:?}");
    assert_eq!(audit.executions.len(), 1, "{audit:?}");
}

/// A client pinned to 2026-07-28 runs `list` then `add` at a runtime of the initialize era:
/// its first request's answer.
async fn pinned_at_a_2025_runtime(emulator: &Emulator) -> Value {
    let mut client = to_runtime(emulator, MODERN, &["list", r#"call:add:{"a":2,"b":3}"#]);
    expect(&mut client, connected(MODERN, "adopted", None)).await;
    let refused = client.next().await;
    let (rest, status, client) = client.close().await;
    assert_eq!(rest, Vec::<Value>::new(), "stderr:\n{}", client.stderr());
    assert_eq!(status.code(), Some(1), "stderr:\n{}", client.stderr());
    refused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_at_a_2025_11_25_runtime_is_refused_and_nothing_runs() {
    // A pinned client never probes: it adopts 2026-07-28 and sends its first request with it.
    // A server of the initialize era refuses a version newer than it speaks (HTTP 400, the
    // MCP TypeScript SDK's -32000 "Unsupported protocol version"), and the client gets an error
    // for that request; it does not fall back (only auto mode does), so the run ends there
    // with nothing run and nothing more sent.
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = start_emulator(config).await;
    let refused = pinned_at_a_2025_runtime(&emulator).await;
    assert_eq!(refused["step"], "list", "{refused}");
    assert_eq!(refused["error"]["type"], "MCPError", "{refused}");
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let audit = emulator.audit();
    assert_eq!(
        invocations(&audit),
        rows(&[("tools/list", None)]),
        "{audit:?}"
    );
    assert!(audit.executions.is_empty(), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_at_a_2025_11_25_runtime_hears_the_servers_reason() {
    // The server's 400 carries `{"id": null, "error": {"code": -32000, "message": "Bad
    // Request: Unsupported protocol version: 2026-07-28 (supported versions: …)"}}`: the id is
    // null because the server refused the request before reading it, and the POST held one
    // request, so the error is that request's. The Python SDK's own HTTP client gives it the
    // request's id (mcp/client/streamable_http.py: "use this request's id so correlation
    // works"); over stdio the proxy is the HTTP client and should do the same, so the user
    // reads why.
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = start_emulator(config).await;
    let refused = pinned_at_a_2025_runtime(&emulator).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Unsupported protocol version: 2026-07-28"),
        "{refused}"
    );
    // Both versions named, and the way to bridge them.
    assert!(
        message.starts_with(
            "the client speaks MCP 2026-07-28, and the server only the initialize era (up to \
             2025-11-25): "
        ) && message.ends_with("(the proxy's --bridge-modern-clients)"),
        "{refused}"
    );
}

/// `proxy/tests/python_sdk/server.py` running, and the URL it printed.
async fn python_server() -> (Proxy, String) {
    server_at(python_command("server.py")).await
}

/// `command`, a server of `proxy/tests/python_sdk/`, running, and the URL it printed first.
pub(crate) async fn server_at(command: Command) -> (Proxy, String) {
    let mut server = Proxy::spawn(command);
    let line = server.next().await;
    let url = line["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no URL: {line}"))
        .to_owned();
    (server, url)
}

fn seen(method: &str, name: Option<&str>, city: Option<&str>) -> Value {
    json!({"seen": {"httpMethod": "POST", "method": method, "status": 200,
        "protocolVersion": MODERN, "mcpMethod": method, "mcpName": name, "paramCity": city,
        "sessionId": null}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_mode_over_stdio_to_the_python_sdks_server_through_url() {
    let (mut server, url) = python_server().await;
    let mut client = over_stdio(
        "auto",
        &[
            "list",
            r#"call:add:{"a":2,"b":3}"#,
            r#"call:weather:{"city":"Zürich"}"#,
            r#"mrtr:confirm:{"action":"deploy"}"#,
            "listen:notify",
        ],
        &["--url", &url, "--bearer-token-env", "PY_SDK_TOKEN"],
        &[("PY_SDK_TOKEN", TOKEN)],
    );
    expect(
        &mut client,
        connected(MODERN, "discover", Some("python-sdk-test-server")),
    )
    .await;
    expect(
        &mut client,
        listed(&["add", "weather", "confirm", "notify"]),
    )
    .await;
    expect(&mut client, called("add", "5")).await;
    expect(&mut client, called("weather", "Sunny in Zürich")).await;
    expect(&mut client, confirmed("deploy")).await;
    expect(&mut client, listening()).await;
    // `notify`, called while the stream is open, makes the server send on it.
    expect(&mut client, event()).await;
    finished(client).await;

    // Each request as the SDK's server checks it: the revision's headers, the version in each
    // (none is an MCP session's), the city in Mcp-Param-City as the revision encodes it.
    let expected = [
        seen("server/discover", None, None),
        seen("tools/list", None, None),
        seen("tools/call", Some("add"), None),
        seen(
            "tools/call",
            Some("weather"),
            Some("=?base64?WsO8cmljaA==?="),
        ),
        seen("tools/call", Some("confirm"), None),
        seen("tools/call", Some("confirm"), None),
        seen("subscriptions/listen", None, None),
        seen("tools/call", Some("notify"), None),
    ];
    let mut got = Vec::new();
    for _ in 0..expected.len() {
        got.push(server.next().await);
    }
    assert_eq!(got, expected, "stderr:\n{}", server.stderr());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        server.lines.try_recv().is_err(),
        "nothing more was sent (no DELETE, no GET)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_mode_over_http_through_listen_lands_on_2026_07_28() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let dir = common::TempDir::new("python-sdk-listen");
    let token_file = dir.write("token", TOKEN);
    let args = common::listen_args(&["--listen-token-file", &token_file]);
    let proxy = Proxy::start(&emulator, &args);
    let url = proxy.listen_url().await;

    let mut client = over_http("auto", &STEPS, &url, TOKEN);
    expect(&mut client, connected(MODERN, "discover", Some(EMULATOR))).await;
    run_steps(&mut client, &emulator).await;
    finished(client).await;
    // Clients without an MCP session share the listener's runtime session.
    let stderr = format!("\nproxy stderr:\n{}", proxy.stderr());
    assert_modern_steps(&emulator.audit(), &[("server/discover", None)], &stderr);
}

/// The SDK's client (which has no Tasks support) calls `long_job`, which the emulator runs
/// only as a task, in `mode`, through the stdio proxy: the job's 40 minutes pass on the jobs
/// clock in 3 s of wall time, the client gets its result, and the job ran once. The runtime's
/// invocations.
async fn long_job_through_stdio(mode: &str, version: &str, handshake: &str) -> Audit {
    let expected = called("long_job", "long_job done after 2400 s");
    job_through_stdio(mode, version, handshake, "call:long_job", expected).await
}

/// `long_job` called with `step` (`call:` or `mrtr:`, its arguments), answered with
/// `expected`; the checks of [`long_job_through_stdio`].
async fn job_through_stdio(
    mode: &str,
    version: &str,
    handshake: &str,
    step: &str,
    expected: Value,
) -> Audit {
    let config = EmulatorConfig::default().task_poll_interval(Duration::from_millis(100));
    let emulator = std::sync::Arc::new(start_emulator(config).await);
    let _clock = common::JobsClock::start(&emulator);
    let mut client = to_runtime(&emulator, mode, &[step]);
    expect(&mut client, connected(version, handshake, Some(EMULATOR))).await;
    expect(&mut client, expected).await;
    finished(client).await;
    let audit = emulator.audit();
    let call = audit
        .received
        .iter()
        .find(|r| r.method.as_deref() == Some("tools/call"))
        .and_then(|r| r.id.clone())
        .expect("a tools/call");
    let once = [(("long_job".to_owned(), call), 1)].into();
    assert_eq!(audit.executions_by_id, once, "{audit:?}");
    assert_eq!(audit.tasks_created, 1, "{audit:?}");
    let task = &audit.created_tasks[0];
    assert!(!audit.task_requests.is_empty());
    assert!(
        audit
            .task_requests
            .iter()
            .all(|r| r.method.starts_with("tasks/")
                && r.found
                && r.task_id == task.task_id
                && r.runtime_session_id == task.runtime_session_id),
        "{audit:?}"
    );
    assert_eq!(runtime_sessions(&audit).len(), 1, "{:?}", audit.received);
    audit
}

/// `long_job` asking half-way, as the SDK's client answers: the question put to it, its
/// answer (go on) sent with `tasks/update`, the job done.
async fn long_job_that_asks(mode: &str, version: &str, handshake: &str) {
    let expected = json!({"step": "mrtr", "tool": "long_job", "isError": false,
        "text": ["long_job done after 2400 s"],
        "elicitations": [{"mode": "form", "message": "long_job is half done: go on?"}]});
    let step = r#"mrtr:long_job:{"ask":true}"#;
    let audit = job_through_stdio(mode, version, handshake, step, expected).await;
    let updates = audit
        .task_requests
        .iter()
        .filter(|r| r.method == "tasks/update");
    assert_eq!(updates.count(), 1, "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_asks_is_answered_by_the_sdk_in_auto_mode() {
    long_job_that_asks("auto", MODERN, "discover").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_asks_is_answered_by_the_sdk_in_a_2025_session() {
    long_job_that_asks("legacy", "2025-11-25", "initialize").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_job_of_40_minutes_completes_for_the_sdk_in_auto_mode() {
    let audit = long_job_through_stdio("auto", MODERN, "discover").await;
    // `server/discover` said the runtime offers tasks: the call declares them from the first.
    let polls = audit.task_requests.len();
    let mut expected = vec![("server/discover", None), ("tools/call", Some("long_job"))];
    let task = audit.created_tasks[0].task_id.clone();
    expected.extend(std::iter::repeat_n(
        ("tasks/get", Some(task.as_str())),
        polls,
    ));
    // The SDK lists the tools once it has a result, for the tool's output schema.
    expected.push(("tools/list", None));
    assert_eq!(invocations(&audit), rows(&expected), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_job_of_40_minutes_completes_for_the_sdk_in_a_2025_session() {
    let audit = long_job_through_stdio("legacy", "2025-11-25", "initialize").await;
    // Sent once, declaring the extension (the proxy declares it from the first call).
    let methods: Vec<String> = invocations(&audit).into_iter().map(|(m, _)| m).collect();
    let mut expected = vec!["initialize", "notifications/initialized", "tools/call"];
    expected.extend(std::iter::repeat_n("tasks/get", audit.task_requests.len()));
    // The SDK lists the tools once it has a result, for the tool's output schema.
    expected.push("tools/list");
    assert_eq!(methods, expected, "{audit:?}");
}

// ---------------------------------------------------------------------------------------------
// Clients of the `initialize` era at a runtime that speaks only 2026-07-28: the proxy's bridge.

/// A runtime whose MCP server speaks only 2026-07-28.
pub(crate) fn modern_only() -> EmulatorConfig {
    EmulatorConfig::default().oldest_protocol_version(MODERN)
}

/// The steps of the bridged clients: the tools, then `add` (which must run once).
const LIST_AND_ADD: [&str; 2] = ["list", r#"call:add:{"a":2,"b":3}"#];

/// The SDK 1.x's client (`client_v1.py`) running `steps` over stdio through the proxy to the
/// emulator's runtime.
fn sdk_1_to_runtime(emulator: &Emulator, steps: &[&str]) -> Proxy {
    let args = common::runtime_args(emulator, &[]);
    let env = common::credentials_env(emulator);
    let mut command = sdk_1_command("client_v1.py");
    command.args(steps);
    through_proxy(command, &common::strs(&args), &common::pairs(&env))
}

/// A client of 2025-11-25 connected by `initialize` and ran [`LIST_AND_ADD`]: `tools` listed,
/// `add` answered.
pub(crate) async fn initialized_list_and_add(client: &mut Proxy, tools: &[&str]) {
    expect(
        client,
        connected("2025-11-25", "initialize", Some(EMULATOR)),
    )
    .await;
    expect(client, listed(tools)).await;
    expect(client, called("add", "5")).await;
}

/// What `audit` saw beside the server's stream the stdio proxy opens for its client (or the
/// client's GET of it over `--listen`), carried on one `subscriptions/listen` sent beside the
/// client's requests, wherever it falls among them.
pub(crate) fn invocations_beside_the_listen(
    audit: &Audit,
    context: &str,
) -> Vec<(String, Option<String>)> {
    let listen = ("subscriptions/listen".to_owned(), None);
    let mut seen = invocations(audit);
    let listens = seen.iter().filter(|row| **row == listen).count();
    assert_eq!(listens, 1, "{context}");
    seen.retain(|row| *row != listen);
    seen
}

/// What a modern-only runtime saw of a bridged client's run of [`LIST_AND_ADD`]: its refused
/// `initialize`, the bridge's one `server/discover`, then the client's requests as 2026-07-28
/// writes them (no MCP session, none of its notifications); `add` ran once, for the client's
/// request `call_id`; one runtime session.
fn assert_bridged_run(audit: &Audit, call_id: u64) {
    assert_eq!(
        invocations_beside_the_listen(audit, &format!("{audit:?}")),
        rows(&[
            ("initialize", None),
            ("server/discover", None),
            ("tools/list", None),
            ("tools/call", Some("add")),
        ]),
        "{audit:?}"
    );
    assert!(
        audit.received[1..]
            .iter()
            .all(|r| r.mcp_method == r.method && r.mcp_session_id.is_none()),
        "{:?}",
        audit.received
    );
    assert_eq!(audit.mcp_sessions_started, 0, "{audit:?}");
    assert_eq!(audit.header_mismatches, 0, "{audit:?}");
    assert_eq!(runtime_sessions(audit).len(), 1, "{:?}", audit.received);
    assert_eq!(audit.sessions_started, 1, "{audit:?}");
    common::ran_once_each(audit, &[("add", call_id)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_1_x_over_stdio_is_bridged_at_a_modern_only_runtime() {
    let emulator = start_emulator(modern_only()).await;
    let mut client = sdk_1_to_runtime(&emulator, &LIST_AND_ADD);
    initialized_list_and_add(&mut client, &ALL_TOOLS).await;
    finished(client).await;
    // The SDK numbers its requests from 0: initialize, tools/list, tools/call.
    assert_bridged_run(&emulator.audit(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_1_x_over_stdio_goes_as_it_is_at_a_runtime_of_both_eras() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let mut client = sdk_1_to_runtime(&emulator, &LIST_AND_ADD);
    initialized_list_and_add(&mut client, &["add", "echo", "counter"]).await;
    finished(client).await;
    let audit = emulator.audit();
    assert_eq!(
        invocations(&audit),
        initialized_rows(&[]),
        "no server/discover: {audit:?}"
    );
    assert_eq!(audit.mcp_sessions_started, 1, "{audit:?}");
    common::ran_once_each(&audit, &[("add", 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_2_x_in_legacy_mode_over_stdio_is_bridged_at_a_modern_only_runtime() {
    let emulator = start_emulator(modern_only()).await;
    let mut client = to_runtime(&emulator, "legacy", &LIST_AND_ADD);
    initialized_list_and_add(&mut client, &ALL_TOOLS).await;
    finished(client).await;
    // The SDK 2.x numbers its requests from 1: initialize, tools/list, tools/call.
    assert_bridged_run(&emulator.audit(), 3);
}

// ---------------------------------------------------------------------------------------------
// A client pinned to 2026-07-28 at a runtime of the `initialize` era: the proxy's bridge, when
// `--bridge-modern-clients` asks for it.

/// The SDK pinned to 2026-07-28 sends no `server/discover`: its first request, refused by the
/// runtime (nothing runs), tells the bridge the runtime's era; the bridge opens one MCP session
/// and sends it, and each later request, there. The tools of the `initialize` era are listed
/// and `add` runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_to_2026_07_28_at_a_2025_11_25_runtime_is_bridged_with_bridge_modern_clients() {
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = start_emulator(config).await;
    let args = common::runtime_args(&emulator, &["--bridge-modern-clients"]);
    let env = common::credentials_env(&emulator);
    let mut client = over_stdio(
        MODERN,
        &LIST_AND_ADD,
        &common::strs(&args),
        &common::pairs(&env),
    );
    expect(&mut client, connected(MODERN, "adopted", None)).await;
    expect(&mut client, listed(&["add", "echo", "counter"])).await;
    expect(&mut client, called("add", "5")).await;
    finished(client).await;

    let audit = emulator.audit();
    assert_eq!(
        invocations(&audit),
        initialized_rows(&[("tools/list", None)]),
        "{audit:?}"
    );
    assert_eq!(audit.mcp_sessions_started, 1, "{audit:?}");
    assert_eq!(audit.received[0].mcp_session_id, None, "{audit:?}");
    let session = &audit.received[2].mcp_session_id;
    assert!(session.is_some(), "{audit:?}");
    assert!(
        audit.received[2..]
            .iter()
            .all(|r| &r.mcp_session_id == session),
        "{audit:?}"
    );
    assert_eq!(runtime_sessions(&audit).len(), 1, "{:?}", audit.received);
    // The SDK 2.x numbers its requests from 1: tools/list, tools/call.
    common::ran_once_each(&audit, &[("add", 2)]);
}
