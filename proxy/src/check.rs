//! `agentcore-mcp-proxy check`: where the credentials come from, the region and the target,
//! then `initialize` and `tools/list` through the stack the proxy uses, each tool with its
//! replay status and each request with its attempt record. Human-readable, on stdout, without
//! a secret; exit 0 only when all is well.

use std::process::ExitCode;

use agentcore_tower::AttemptRecord;
use aws_credential_types::provider::ProvideCredentials;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::ServiceExt;

use agentcore_tower::protocol;

use crate::answers::{Upstream, read_small_answer};
use crate::call::ResBody;
use crate::cli::{Args, Door, TokenSource, shown};
use crate::stack::{self, Mode, StartError};
use crate::tools::replay_status;

/// The MCP protocol version `check` asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// Runs the check: what it prints, and whether all was well.
pub async fn run(args: Args, telemetry: stack::Telemetry) -> ExitCode {
    match &args.door {
        Door::Runtime(arn) => println!("target:      runtime {arn}"),
        Door::Gateway(url) => println!("target:      gateway {}", shown(url)),
        Door::Url(url) => println!("target:      MCP URL {}", shown(url)),
    }
    if !credentials(&args).await {
        return ExitCode::FAILURE;
    }
    let mode = Mode {
        per_mcp_session: false,
        stop_session_on_delete: false,
    };
    let built = match stack::build(&args, mode, &telemetry).await {
        Ok(built) => built,
        Err(StartError::Usage(message) | StartError::Failed(message)) => {
            println!("error:       {message}");
            return ExitCode::FAILURE;
        }
    };
    println!("region:      {}", built.region.as_deref().unwrap_or("-"));
    println!("endpoint:    {}", shown(&built.uri));
    let mut session = Session {
        stack: built.stack,
        uri: built.uri,
        upstream: built.upstream,
        id: None,
        version: None,
    };
    // The current revision first (`server/discover`), as a 2026-07-28 client probes; an
    // older server is met with `initialize`.
    let modern = match session.discover().await {
        Discovery::Modern(result) => {
            let info = result
                .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
                .or_else(|| result.get("serverInfo"))
                .cloned()
                .unwrap_or(Value::Null);
            print_server(&info);
            println!(
                "protocol:    {} (server/discover; no initialize)",
                protocol::LATEST
            );
            println!("era:         {}", era_of(&result));
            session.version = Some(HeaderValue::from_static(protocol::LATEST));
            true
        }
        Discovery::Legacy => false,
        Discovery::Failed => return ExitCode::FAILURE,
    };
    if !modern && !session.initialize().await {
        return ExitCode::FAILURE;
    }
    let Some(tools) = session.tools(modern).await else {
        return ExitCode::FAILURE;
    };
    println!("tools:       {}", tools.len());
    for tool in &tools {
        println!(
            "  {}: {}",
            tool["name"].as_str().unwrap_or("(unnamed)"),
            replay_status(&args, tool)
        );
    }
    println!("ok");
    ExitCode::SUCCESS
}

/// What `server/discover` found.
enum Discovery {
    /// The server speaks 2026-07-28: its result.
    Modern(Value),
    /// The server does not know it (an older one): `initialize` is next.
    Legacy,
    /// The request failed for a reason `initialize` would meet too (said already).
    Failed,
}

/// The `_meta` of each request of a 2026-07-28 client: its version and who it is.
fn client_meta() -> Value {
    json!({
        protocol::PROTOCOL_VERSION_META: protocol::LATEST,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "agentcore-mcp-proxy check", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn print_server(info: &Value) {
    println!(
        "server:      {} {}",
        info["name"].as_str().unwrap_or("(unnamed)"),
        info["version"].as_str().unwrap_or("")
    );
}

/// Says where the credentials come from, resolving them for SigV4: whether they resolved.
async fn credentials(args: &Args) -> bool {
    match &args.tokens {
        Some(TokenSource::Env(name)) => {
            println!("credentials: bearer token from ${name} (--bearer-token-env)");
            return true;
        }
        Some(TokenSource::Command(_)) => {
            println!("credentials: bearer token from --bearer-token-command");
            return true;
        }
        None => {}
    }
    let mut loader = stack::aws_config_loader(args);
    if let Some(region) = &args.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    let config = loader.load().await;
    let profile = args
        .profile
        .clone()
        .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()));
    let in_profile = profile
        .as_deref()
        .map(|p| format!(", profile {p}"))
        .unwrap_or_default();
    let Some(provider) = config.credentials_provider() else {
        println!("credentials: none: the AWS configuration has no credentials provider");
        return false;
    };
    match provider.provide_credentials().await {
        Ok(credentials) => {
            // aws-config's chain names the provider that answered: EnvironmentVariable,
            // ProfileFile, SSO, CredentialProcess, ECSContainer, IMDSv2, …
            let expiry = credentials
                .expiry()
                .map(|e| format!(", expire {}", expiry_text(e)))
                .unwrap_or_default();
            println!(
                "credentials: SigV4, from {}{in_profile}{expiry}",
                provider_name(&credentials)
            );
            true
        }
        Err(error) => {
            let text = crate::answers::chain(&error);
            println!("credentials: SigV4, cannot be resolved{in_profile}: {text}");
            let lower = text.to_ascii_lowercase();
            if lower.contains("sso") && (lower.contains("expired") || lower.contains("token")) {
                let name = profile.as_deref().unwrap_or("NAME");
                println!("advice:      run `aws sso login --profile {name}`");
            }
            false
        }
    }
}

/// The name of the provider that gave `credentials`: `Credentials` has no getter for it, but
/// its `Debug` (secret redacted) starts with it; only that field is read.
fn provider_name(credentials: &aws_credential_types::Credentials) -> String {
    let debug = format!("{credentials:?}");
    debug
        .split_once("provider_name: \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or_else(
            || "an unnamed provider".to_owned(),
            |(name, _)| name.to_owned(),
        )
}

/// An expiry as seconds from now.
fn expiry_text(expiry: std::time::SystemTime) -> String {
    match expiry.duration_since(std::time::SystemTime::now()) {
        Ok(left) => format!("in {}s", left.as_secs()),
        Err(_) => "already (expired)".to_owned(),
    }
}

struct Session {
    stack: stack::Stack,
    uri: http::Uri,
    /// The server, as the proxy's messages speak of it.
    upstream: Upstream,
    id: Option<HeaderValue>,
    version: Option<HeaderValue>,
}

impl Session {
    fn request(&self, message: &Value) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(Bytes::from(message.to_string())));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(id) = &self.id {
            headers.insert("mcp-session-id", id.clone());
        }
        if let Some(version) = &self.version {
            headers.insert("mcp-protocol-version", version.clone());
        }
        if let Some(version) = protocol::version_in_meta(message)
            && let Ok(value) = HeaderValue::from_str(version)
        {
            headers.insert("mcp-protocol-version", value);
            headers.extend(protocol::request_headers(message, None));
        }
        request
    }

    /// `initialize` (at [`PROTOCOL_VERSION`]) and `notifications/initialized`, what the server
    /// said printed: whether it answered.
    async fn initialize(&mut self) -> bool {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "agentcore-mcp-proxy check", "version": env!("CARGO_PKG_VERSION")},
        }});
        let Some(result) = self.call("initialize", &initialize).await else {
            return false;
        };
        print_server(&result["serverInfo"]);
        println!(
            "protocol:    {} (initialize)",
            result["protocolVersion"].as_str().unwrap_or("(none)")
        );
        println!(
            "era:         initialize only (no server/discover): a client pinned to {} \
             needs --bridge-modern-clients",
            protocol::LATEST
        );
        self.version = result["protocolVersion"]
            .as_str()
            .and_then(|v| HeaderValue::from_str(v).ok());
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.notify(&initialized).await;
        true
    }

    /// The server's tools, every page of `tools/list` (at most 100), each request with the
    /// `_meta` of a 2026-07-28 client when `modern`: `None` when a page did not come.
    async fn tools(&mut self, modern: bool) -> Option<Vec<Value>> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 2..102 {
            let mut params = json!({});
            if let Some(cursor) = &cursor {
                params["cursor"] = json!(cursor);
            }
            if modern {
                params["_meta"] = client_meta();
            }
            let list =
                json!({"jsonrpc": "2.0", "id": page, "method": "tools/list", "params": params});
            let result = self.call("tools/list", &list).await?;
            tools.extend(result["tools"].as_array().cloned().unwrap_or_default());
            cursor = result["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Some(tools)
    }

    /// Probes with `server/discover` at the current revision. Met as an older server meets it
    /// — HTTP 400, 404 or 405 that is no AWS error, or a JSON-RPC error — it is
    /// [`Discovery::Legacy`]; a failure `initialize` would meet too (credentials, access,
    /// throttling, the network) is said as `initialize`'s would be.
    async fn discover(&mut self) -> Discovery {
        let message = json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover",
            "params": {"_meta": client_meta()}});
        let Some(response) = self.send("server/discover", &message).await else {
            return Discovery::Failed;
        };
        let (status, headers, body) = read_small_answer(response).await;
        let older =
            matches!(status.as_u16(), 400 | 404 | 405) && !headers.contains_key("x-amzn-errortype");
        let answer = status
            .is_success()
            .then(|| answer_of_quietly(&body))
            .flatten();
        match answer {
            Some(answer) if answer.get("result").is_some() => {
                println!("server/discover: HTTP {}", status.as_u16());
                Discovery::Modern(answer["result"].clone())
            }
            Some(_) => {
                println!("server/discover: not known (a JSON-RPC error): an older server");
                Discovery::Legacy
            }
            None if older => {
                println!(
                    "server/discover: not known (HTTP {}): an older server",
                    status.as_u16()
                );
                Discovery::Legacy
            }
            None => {
                println!("server/discover: HTTP {}", status.as_u16());
                let (text, data) = self.upstream.describe_status(status, &headers, &body);
                println!("error:       {text}");
                if let Some(kind) = data["kind"].as_str() {
                    println!("kind:        {kind}");
                }
                Discovery::Failed
            }
        }
    }

    /// Sends a notification; a failure is only shown.
    async fn notify(&mut self, message: &Value) {
        let request = self.request(message);
        match self.stack.clone().oneshot(request).await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => println!(
                "warning:     notifications/initialized answered HTTP {}",
                response.status().as_u16()
            ),
            Err(error) => println!(
                "warning:     notifications/initialized failed: {}",
                self.upstream.describe_failure(error.as_ref()).0
            ),
        }
    }

    /// Sends one request (`method`): its answer, or `None` after printing why the stack gave
    /// none.
    async fn send(&self, method: &str, message: &Value) -> Option<http::Response<ResBody>> {
        match self.stack.clone().oneshot(self.request(message)).await {
            Ok(response) => Some(response),
            Err(error) => {
                let (text, data) = self.upstream.describe_failure(error.as_ref());
                println!("{method}: failed");
                println!("error:       {text}");
                print_record(data.get("attempts"));
                None
            }
        }
    }

    /// Sends one request: its result, or `None` after printing why there is none.
    async fn call(&mut self, method: &str, message: &Value) -> Option<Value> {
        let response = self.send(method, message).await?;
        let record = AttemptRecord::of_response(&response).cloned();
        let status = response.status();
        let headers = response.headers().clone();
        if let Some(id) = headers.get("mcp-session-id") {
            self.id = Some(id.clone());
        }
        let body = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) => {
                println!("{method}: the answer broke off: {error}");
                return None;
            }
        };
        println!("{method}: HTTP {}", status.as_u16());
        print_record(record.as_ref().map(crate::answers::attempts).as_ref());
        if !status.is_success() {
            let (text, data) = self.upstream.describe_status(status, &headers, &body);
            println!("error:       {text}");
            if let Some(kind) = data["kind"].as_str() {
                println!("kind:        {kind}");
            }
            return None;
        }
        let answer = answer_of(&body)?;
        if let Some(error) = answer.get("error") {
            println!("error:       {method} answered with a JSON-RPC error: {error}");
            return None;
        }
        answer.get("result").cloned().or_else(|| {
            println!("error:       {method}: no result in the answer");
            None
        })
    }
}

fn print_record(attempts: Option<&Value>) {
    for line in attempts.and_then(Value::as_array).into_iter().flatten() {
        println!("  {}", line.as_str().unwrap_or_default());
    }
}

/// The JSON-RPC response in a body: JSON, or the first `data:` of an SSE stream that is one.
fn answer_of(body: &[u8]) -> Option<Value> {
    let found = answer_of_quietly(body);
    if found.is_none() {
        println!("error:       the answer carries no JSON-RPC response");
    }
    found
}

/// [`answer_of`], saying nothing when there is none.
fn answer_of_quietly(body: &[u8]) -> Option<Value> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return Some(value);
    }
    let text = String::from_utf8_lossy(body);
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
}

/// What a `server/discover` result says of the server's era: both, or 2026-07-28 and later
/// only (a client of the `initialize` era is then bridged).
fn era_of(discovered: &Value) -> String {
    let versions: Vec<&str> = discovered
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let legacy = versions
        .iter()
        .filter(|v| !protocol::is_stateless(v))
        .count();
    if legacy > 0 {
        format!("both ({})", versions.join(", "))
    } else {
        format!(
            "{} only: a client of the initialize era is bridged",
            versions.join(", ")
        )
    }
}
