//! A real SDK at both ends: rmcp 3.x's Streamable HTTP server (stateless, JSON answers), which
//! speaks MCP 2026-07-28, on a loopback hyper server, reached through the library's URL door
//! (`McpEndpointLayer`, SigV4 for `execute-api`, under the recommended layers) by rmcp's client:
//! in `ClientLifecycleMode::Auto` (it negotiates 2026-07-28), pinned to `initialize` (the
//! 2025-era client against the same server), and a hand-written request whose `Mcp-Name`
//! disagrees with its body (rmcp's server refuses it with 400 and -32020 before its handler
//! runs).
//!
//! rmcp's server features stay out of the root crate's dev-dependencies (its quick start builds
//! 100 crates); they are this crate's.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::rmcp::TowerClient;
use agentcore_tower::{AttemptRecord, ReplayGuardLayer, protocol, recommended_layers};
use aws_credential_types::Credentials;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleClient, RoleServer};
use serde_json::{Value, json};
use tower::{Service, ServiceExt};

use crate::records::{Records, add, exchanges, serve_client, tap_into, text_of};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Client = RunningService<RoleClient, ClientConfig>;

const REGION: &str = "us-west-2";
const SIGNING_NAME: &str = "execute-api";

// ---------------------------------------------------------------------------------------------
// The server: rmcp's, with one tool
// ---------------------------------------------------------------------------------------------

/// What the server's handler saw: each method it handled, with the protocol version of the
/// request as rmcp's server resolved it, and each run of `add`.
#[derive(Clone, Default)]
struct Handled(Arc<Mutex<Vec<Note>>>);

/// A method the handler handled, with its request's protocol version.
type Note = (String, Option<String>);

impl Handled {
    fn note(&self, method: &str, context: &RequestContext<RoleServer>) {
        let version = context.protocol_version().map(|v| v.as_str().to_owned());
        self.0.lock().unwrap().push((method.to_owned(), version));
    }

    fn all(&self) -> Vec<Note> {
        self.0.lock().unwrap().clone()
    }
}

/// An rmcp server handler with one tool, `add`.
#[derive(Clone)]
struct Calc {
    handled: Handled,
    /// The newest version it speaks: every one rmcp knows when `None`.
    newest: Option<ProtocolVersion>,
}

impl ServerHandler for Calc {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match &self.newest {
            Some(newest) => Cow::Borrowed(ProtocolVersion::known_up_to(newest)),
            None => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-calc", "1"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.handled.note("tools/list", &context);
        let schema = json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"]});
        let Value::Object(schema) = schema else {
            unreachable!("an object")
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "add",
            "Adds two numbers.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.handled.note("tools/call", &context);
        let arguments = request.arguments.unwrap_or_default();
        let number = |key: &str| arguments.get(key).and_then(Value::as_f64);
        match (request.name.as_ref(), number("a"), number("b")) {
            ("add", Some(a), Some(b)) => {
                Ok(CallToolResult::success(vec![ContentBlock::text(format!("{}", a + b))]).into())
            }
            (name, ..) => Err(ErrorData::invalid_params(
                Cow::Owned(format!("no such call: {name}")),
                None,
            )),
        }
    }
}

/// One request the server received, and the head of its answer.
#[derive(Clone, Debug)]
struct Seen {
    method: http::Method,
    headers: http::HeaderMap,
    status: StatusCode,
    content_type: Option<String>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("ASCII"))
    }
}

/// rmcp's stateless Streamable HTTP server on 127.0.0.1 (hyper's HTTP/1 server, an ephemeral
/// port), noting every request it receives; it stops when dropped.
struct RmcpServer {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    handled: Handled,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for RmcpServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl RmcpServer {
    async fn start() -> Result<Self, BoxError> {
        Self::start_speaking(None).await
    }

    /// A server of an earlier era: the versions up to `newest` only.
    async fn start_speaking(newest: Option<ProtocolVersion>) -> Result<Self, BoxError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let handled = Handled::default();
        let calc = Calc {
            handled: handled.clone(),
            newest,
        };
        let mcp = StreamableHttpService::new(
            move || Ok(calc.clone()),
            Arc::new(NeverSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_legacy_session_mode(false)
                .with_json_response(true),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let front = tower::service_fn(move |request: Request<hyper::body::Incoming>| {
            let (mcp, log) = (mcp.clone(), log.clone());
            let (method, headers) = (request.method().clone(), request.headers().clone());
            async move {
                let response = mcp.oneshot(request).await?;
                log.lock().unwrap().push(Seen {
                    method,
                    headers,
                    status: response.status(),
                    content_type: response
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned),
                });
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let service = hyper_util::service::TowerToHyperService::new(front.clone());
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
                );
            }
        });
        Ok(Self {
            url,
            seen,
            handled,
            accept,
        })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The client side: the recommended layers over the URL door
// ---------------------------------------------------------------------------------------------

fn credentials() -> Credentials {
    Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "test",
    )
}

fn signer(server: &RmcpServer) -> Result<McpEndpointLayer, BoxError> {
    Ok(McpEndpointLayer::sigv4(credentials())
        .region(REGION)
        .signing_name(SIGNING_NAME)
        .origin(server.url.clone())
        .build()?)
}

fn hyper_client() -> hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
> {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// rmcp's client over `RecordTap` → the recommended layers (the URL door's signer innermost) →
/// hyper-util, connected to `server`: in auto mode, or pinned to `initialize` at a version.
async fn connect(
    server: &RmcpServer,
    pinned: Option<ProtocolVersion>,
) -> Result<(Client, Records), BoxError> {
    let records = Records::default();
    let client = connect_recorded(server, pinned, records.clone()).await?;
    Ok((client, records))
}

/// The same, the records going to `records` from the first request on.
async fn connect_recorded(
    server: &RmcpServer,
    pinned: Option<ProtocolVersion>,
    records: Records,
) -> Result<Client, BoxError> {
    let stack = tower::ServiceBuilder::new()
        .layer(tap_into(&records))
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer(server)?,
        ))
        .service(hyper_client());
    let transport = TowerClient::new(stack).into_transport(server.url.clone());
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("rmcp-server-test", "0"),
    );
    let client = serve_client(config, transport, pinned).await?;
    Ok(client)
}

async fn add_2_and_3(client: &Client) -> Result<Vec<String>, BoxError> {
    let result = client.call_tool(add(2, 3)).await?;
    assert_eq!(result.is_error, Some(false));
    Ok(text_of(&result).into_iter().map(str::to_owned).collect())
}

/// Every POST sent once, answered 200 (202 for a notification), delivered as it came.
fn each_post_answered_at_once(records: &Records) {
    for (exchange, record) in records.lock().unwrap().iter() {
        if exchange.http_method != http::Method::POST {
            continue;
        }
        let code = if exchange.request_id.is_some() {
            200
        } else {
            202
        };
        assert_eq!(
            record.to_string(),
            format!("#1 HTTP {code} -> replay_guard: delivered; effect unknown"),
            "{exchange}"
        );
    }
}

/// A request signed by the URL door: SigV4 for `execute-api` in the region, its MCP headers
/// among those signed.
fn signed_for_the_door(seen: &Seen, mcp_headers: &[&str]) {
    let authorization = seen.header("authorization").expect("signed");
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
        "{authorization}"
    );
    assert!(
        authorization.contains(&format!("/{REGION}/{SIGNING_NAME}/aws4_request")),
        "{authorization}"
    );
    let signed = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .expect("a SignedHeaders list");
    for name in mcp_headers {
        assert!(signed.split(';').any(|h| h == *name), "{name} in {signed}");
    }
    assert!(seen.header("x-amz-date").is_some());
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// rmcp's auto client and rmcp's server negotiate 2026-07-28 through the URL door: one
/// `server/discover`, no `initialize`, no MCP session, no GET or DELETE; every POST carries the
/// revision's headers, signed; the server's handler sees each request at 2026-07-28; `add` runs
/// once.
#[tokio::test]
async fn rmcp_auto_and_an_rmcp_server_speak_2026_07_28_through_the_url_door() -> Result<(), BoxError>
{
    let server = RmcpServer::start().await?;
    let (client, records) = connect(&server, None).await?;
    let peer = client.peer_info().expect("discovered");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(peer.protocol_version.as_str(), protocol::LATEST);
    assert_eq!(
        peer.server_info.as_ref().map(|i| i.name.as_str()),
        Some("rmcp-calc")
    );

    let tools = client.list_all_tools().await?;
    assert_eq!(tools.iter().map(|t| &*t.name).collect::<Vec<_>>(), ["add"]);
    assert_eq!(add_2_and_3(&client).await?, ["5"]);
    client.cancel().await?;

    let seen = server.seen();
    let methods: Vec<Option<&str>> = seen.iter().map(|s| s.header("mcp-method")).collect();
    assert_eq!(
        methods,
        [
            Some("server/discover"),
            Some("tools/list"),
            Some("tools/call")
        ]
    );
    for request in &seen {
        assert_eq!(request.method, http::Method::POST);
        assert_eq!(request.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(request.header("mcp-session-id"), None);
        assert_eq!(request.status, StatusCode::OK);
        assert_eq!(request.content_type.as_deref(), Some("application/json"));
        signed_for_the_door(request, &["mcp-method", "mcp-protocol-version"]);
    }
    assert_eq!(seen[2].header("mcp-name"), Some("add"));
    signed_for_the_door(&seen[2], &["mcp-name"]);
    assert_eq!(
        server.handled.all(),
        [
            ("tools/list".to_owned(), Some("2026-07-28".to_owned())),
            ("tools/call".to_owned(), Some("2026-07-28".to_owned())),
        ]
    );

    assert_eq!(
        exchanges(&records),
        [
            "POST server/discover",
            "POST tools/call add",
            "POST tools/list"
        ]
    );
    each_post_answered_at_once(&records);
    Ok(())
}

/// The reverse through the same door: rmcp's client of the `initialize` era (2025-11-25)
/// against the same 2026-07-28 server, which answers it statelessly in that era.
#[tokio::test]
async fn an_initialize_era_rmcp_client_works_with_the_same_server() -> Result<(), BoxError> {
    let server = RmcpServer::start().await?;
    let (client, records) = connect(&server, Some(ProtocolVersion::V_2025_11_25)).await?;
    let peer = client.peer_info().expect("initialised");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2025_11_25);
    assert_eq!(client.list_all_tools().await?.len(), 1);
    assert_eq!(add_2_and_3(&client).await?, ["5"]);
    client.cancel().await?;

    let seen = server.seen();
    assert!(
        seen.iter().all(|s| s.method == http::Method::POST),
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s.header("mcp-session-id").is_none()));
    // `initialize` names its version in the body; every later POST in the header.
    assert_eq!(seen[0].header("mcp-protocol-version"), None);
    for request in &seen[1..] {
        assert_eq!(request.header("mcp-protocol-version"), Some("2025-11-25"));
    }
    assert_eq!(
        seen.len(),
        4,
        "initialize, initialized, tools/list, tools/call"
    );
    let calls = server.handled.all();
    assert_eq!(
        calls.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["tools/list", "tools/call"]
    );
    each_post_answered_at_once(&records);
    Ok(())
}

/// A hand-written 2026-07-28 `tools/call` whose `Mcp-Name` names another tool: rmcp's server
/// answers 400 with -32020 `HeaderMismatch` before its handler runs; the stack delivers it at
/// once (one attempt, not sent again, though `add` is declared idempotent).
#[tokio::test]
async fn an_rmcp_server_refuses_a_header_mismatch_and_the_stack_does_not_resend()
-> Result<(), BoxError> {
    let server = RmcpServer::start().await?;
    let mut stack = tower::ServiceBuilder::new()
        .layer(recommended_layers(
            ReplayGuardLayer::new().idempotent_tools(["add"]),
            signer(&server)?,
        ))
        .service(hyper_client());
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
    "name": "add", "arguments": {"a": 2, "b": 3},
    "_meta": {
        protocol::PROTOCOL_VERSION_META: protocol::LATEST,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "home-grown", "version": "0"},
    }}});
    let post = |name: &'static str| {
        let mut request = Request::post(server.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", protocol::LATEST)
            .body(Full::new(Bytes::from(message.to_string())))
            .expect("a request");
        request
            .headers_mut()
            .extend(protocol::request_headers(&message, None));
        request
            .headers_mut()
            .insert("mcp-name", http::HeaderValue::from_static(name));
        request
    };

    let response = ServiceExt::<Request<Full<Bytes>>>::ready(&mut stack)
        .await?
        .call(post("echo"))
        .await?;
    let record = AttemptRecord::of_response(&response)
        .cloned()
        .expect("a record");
    let status = response.status();
    let body: Value = serde_json::from_slice(&response.into_body().collect().await?.to_bytes())?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
    assert_eq!(
        record.to_string(),
        "#1 HTTP 400 -> replay_guard: delivered; effect unknown"
    );
    assert_eq!(server.seen().len(), 1, "not sent again");
    assert!(server.handled.all().is_empty(), "nothing ran");

    // The same request with the right name runs.
    let response = ServiceExt::<Request<Full<Bytes>>>::ready(&mut stack)
        .await?
        .call(post("add"))
        .await?;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_slice(&response.into_body().collect().await?.to_bytes())?;
    assert_eq!(body["result"]["content"][0]["text"], "5", "{body}");
    assert_eq!(server.handled.all().len(), 1);
    Ok(())
}

/// rmcp's auto client against rmcp's server of the `initialize` era (its versions up to
/// 2025-11-25): the server refuses the probe with 400 and -32022 naming the versions it
/// speaks, and rmcp 3.11's client gives up with `NoCompatibleProtocolVersion` instead of
/// falling back to `initialize` (`discover_startup` treats -32022 as version negotiation only;
/// the Python SDK falls back when the list holds versions of the `initialize` era). rmcp's
/// behaviour, not the library's: the stack delivered the refusal once, as it came. Pinning the
/// client to `initialize` (above) is what works with such a server.
#[tokio::test]
async fn rmcp_auto_does_not_fall_back_from_a_2025_rmcp_servers_32022() -> Result<(), BoxError> {
    let server = RmcpServer::start_speaking(Some(ProtocolVersion::V_2025_11_25)).await?;
    let records = Records::default();
    let error = match connect_recorded(&server, None, records.clone()).await {
        Ok(_) => panic!("rmcp 3.11's auto client now falls back: pin no longer needed"),
        Err(error) => error,
    };
    assert!(
        matches!(
            error.downcast_ref::<rmcp::service::ClientInitializeError>(),
            Some(rmcp::service::ClientInitializeError::NoCompatibleProtocolVersion {
                server_supported,
                ..
            }) if server_supported.last() == Some(&ProtocolVersion::V_2025_11_25)
        ),
        "{error:?}"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "the probe alone: {seen:?}");
    assert_eq!(seen[0].header("mcp-method"), Some("server/discover"));
    assert_eq!(seen[0].status, StatusCode::BAD_REQUEST);
    let records = records.lock().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].1.to_string(),
        "#1 HTTP 400 -> replay_guard: delivered; effect unknown"
    );
    Ok(())
}
