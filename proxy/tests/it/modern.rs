//! MCP 2026-07-28 over stdio, to an MCP URL: the proxy writes what an HTTP client of the
//! revision writes (the version from `_meta`, `Mcp-Method`, `Mcp-Name`, the `Mcp-Param-*` its
//! listing asks for), holds `subscriptions/listen` open past every limit, closes a cancelled
//! request's stream, and answers what is not a message of the client's era without sending it.
//! The server is a small 2026-07-28 one written here, which checks the headers against the
//! body as the revision requires (`agentcore_tower::protocol::check_request_headers`).

use crate::common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentcore_tower::protocol;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use common::{Proxy, Serving, read_request, serve_loopback};

const TOKEN: &str = "modern-test-token-5e6f";
const VERSION: &str = "2026-07-28";

/// One POST the server got: its JSON-RPC method and the standard headers.
#[derive(Clone, Debug)]
struct Seen {
    method: Option<String>,
    version: Option<String>,
    mcp_method: Option<String>,
    mcp_name: Option<String>,
    city: Option<String>,
    status: u16,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// The open `subscriptions/listen` streams.
    listeners: Vec<http_body_util::channel::Sender<Bytes>>,
    /// The header the `weather` tool's listing names (a later listing may rename it).
    city_header: String,
}

struct Server {
    url: String,
    state: Arc<Mutex<State>>,
    _task: Serving,
}

type Body = BoxBody<Bytes, Infallible>;

fn weather_schema(header: &str) -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string", "x-mcp-header": header}}})
}

impl Server {
    async fn start() -> Server {
        let state = Arc::new(Mutex::new(State {
            city_header: "City".into(),
            ..State::default()
        }));
        let shared = state.clone();
        let (addr, task) = serve_loopback(move |request| {
            let state = shared.clone();
            async move { serve(&state, request).await }
        })
        .await;
        let url = format!("http://{addr}/mcp");
        Server {
            url,
            state,
            _task: task,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Sends a notification on every open listen stream: how many took it.
    fn notify(&self, notification: &Value) -> usize {
        let mut state = self.state.lock().unwrap();
        let event = Bytes::from(format!("event: message\ndata: {notification}\n\n"));
        state.listeners.retain_mut(|sender| {
            sender
                .try_send(hyper::body::Frame::data(event.clone()))
                .is_ok()
        });
        state.listeners.len()
    }
}

fn json_answer(status: u16, message: &Value) -> http::Response<Body> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(message.to_string())).boxed())
        .unwrap()
}

async fn serve(
    state: &Mutex<State>,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<Body> {
    let (parts, body) = read_request(request).await;
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(protocol::decode_header_value)
    };
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = message["method"].as_str().map(str::to_owned);
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let (schema, city_header) = {
        let state = state.lock().unwrap();
        (
            weather_schema(&state.city_header),
            state.city_header.clone(),
        )
    };
    let tool_schema =
        (message.pointer("/params/name") == Some(&json!("weather"))).then_some(&schema);
    let answer = if parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {TOKEN}"))
    {
        json_answer(401, &json!({}))
    } else if let Err(why) = protocol::check_request_headers(&parts.headers, &message, tool_schema)
    {
        json_answer(
            400,
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32020, "message": format!("Header mismatch: {why}")}}),
        )
    } else {
        let result = |result: Value| {
            json_answer(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
        };
        match method.as_deref() {
            Some("server/discover") => result(json!({
                "resultType": "complete", "supportedVersions": [VERSION],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "modern-test", "version": "1"}})),
            Some("tools/list") => result(
                json!({"resultType": "complete", "cacheScope": "public", "ttlMs": 60000,
                "tools": [{"name": "weather", "inputSchema": weather_schema(&city_header)}]}),
            ),
            Some("tools/call") => result(json!({"resultType": "complete",
                "content": [{"type": "text", "text": format!("sunny in {}", message["params"]["arguments"]["city"])}]})),
            Some("subscriptions/listen") => {
                let (mut sender, channel) = http_body_util::channel::Channel::new(8);
                let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {}});
                sender
                    .send_data(Bytes::from(format!("event: message\ndata: {ack}\n\n")))
                    .await
                    .unwrap();
                state.lock().unwrap().listeners.push(sender);
                http::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(channel.boxed())
                    .unwrap()
            }
            _ => json_answer(
                404,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            ),
        }
    };
    state.lock().unwrap().seen.push(Seen {
        method,
        version: header("mcp-protocol-version"),
        mcp_method: header("mcp-method"),
        mcp_name: header("mcp-name"),
        city: header("mcp-param-city").or_else(|| header("mcp-param-town")),
        status: answer.status().as_u16(),
    });
    answer
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": VERSION,
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}})
}

fn request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Sends `subscriptions/listen` (id 1) and waits for its acknowledgement.
async fn listen(proxy: &mut Proxy) {
    proxy.send(&request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    let ack = proxy.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
}

fn start_proxy(server: &Server, extra: &[&str]) -> Proxy {
    Proxy::for_url(&server.url, TOKEN, extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_over_stdio_gets_the_revisions_headers_written_for_it() {
    let server = Server::start().await;
    let mut proxy = start_proxy(&server, &[]);
    proxy.send(&request(1, "server/discover", json!({})));
    let discover = proxy.next().await;
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!([VERSION]),
        "{discover}"
    );
    proxy.send(&request(2, "tools/list", json!({})));
    let list = proxy.next().await;
    assert_eq!(
        list["result"]["cacheScope"], "public",
        "arrives as sent: {list}"
    );
    assert_eq!(list["result"]["ttlMs"], 60000);
    proxy.send(&request(
        3,
        "tools/call",
        json!({"name": "weather", "arguments": {"city": "Zürich"}}),
    ));
    let call = proxy.next().await;
    assert_eq!(
        call["result"]["content"][0]["text"], "sunny in \"Zürich\"",
        "{call}"
    );

    // The server renames the header: the stale listing's call is refused (nothing ran), the
    // proxy lists again and sends the call once more.
    server.state.lock().unwrap().city_header = "Town".into();
    proxy.send(&request(
        4,
        "tools/call",
        json!({"name": "weather", "arguments": {"city": "Bern"}}),
    ));
    let call = proxy.next().await;
    assert_eq!(call["id"], 4);
    assert_eq!(
        call["result"]["content"][0]["text"], "sunny in \"Bern\"",
        "{call}"
    );

    let proxy = proxy.closed_cleanly("nothing more").await;
    let seen = server.seen();
    let rows: Vec<_> = seen
        .iter()
        .map(|s| {
            (
                s.method.as_deref(),
                s.mcp_method.as_deref(),
                s.mcp_name.as_deref(),
                s.city.as_deref(),
                s.status,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                Some("server/discover"),
                Some("server/discover"),
                None,
                None,
                200
            ),
            (Some("tools/list"), Some("tools/list"), None, None, 200),
            (
                Some("tools/call"),
                Some("tools/call"),
                Some("weather"),
                Some("Zürich"),
                200
            ),
            (
                Some("tools/call"),
                Some("tools/call"),
                Some("weather"),
                Some("Bern"),
                400
            ),
            (Some("tools/list"), Some("tools/list"), None, None, 200),
            (
                Some("tools/call"),
                Some("tools/call"),
                Some("weather"),
                Some("Bern"),
                200
            ),
        ],
        "stderr:\n{}",
        proxy.stderr()
    );
    assert!(seen.iter().all(|s| s.version.as_deref() == Some(VERSION)));
    let lines = proxy.stdout_seen.join("\n");
    assert!(
        !lines.contains("agentcore-mcp-proxy:tools/list"),
        "the proxy's own listing reaches no client"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_a_message_of_the_clients_era_is_answered_and_never_sent() {
    let server = Server::start().await;
    let mut proxy = start_proxy(&server, &[]);
    let cases: [(&str, Value); 5] = [
        (r#"[]"#, Value::Null),
        (r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#, json!(7)),
        (r#"{"jsonrpc":"1.0","id":8,"method":"ping"}"#, json!(8)),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":9}"#, json!(9)),
    ];
    for (line, id) in cases {
        proxy.send_raw(line);
        let answer = proxy.next().await;
        assert_eq!(answer["id"], id, "{line}: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "{line}: {answer}");
    }
    let proxy = proxy.closed_cleanly("nothing more").await;
    assert!(
        server.seen().is_empty(),
        "nothing was sent: {:?}",
        server.seen()
    );
    assert_eq!(
        proxy.stdout_seen.len(),
        5,
        "one answer each, the batch's too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_outlives_the_timeouts_and_a_cancel_closes_it() {
    let server = Server::start().await;
    let mut proxy = start_proxy(&server, &["--timeout", "1s", "--idle-timeout", "1s"]);
    listen(&mut proxy).await;
    // Past both limits, the stream still carries what the server sends.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(server.notify(&changed), 1, "the stream is open");
    assert_eq!(proxy.next().await, changed);
    // The client cancels: the proxy closes the stream, sends nothing, answers nothing.
    proxy.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    let mut open = 1;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        open = server.notify(&changed);
        if open == 0 {
            break;
        }
    }
    assert_eq!(open, 0, "the stream was closed");
    let proxy = proxy.closed_cleanly("nothing more").await;
    let methods: Vec<_> = server.seen().into_iter().map(|s| s.method).collect();
    assert_eq!(
        methods,
        [Some("subscriptions/listen".to_owned())],
        "the cancel is not posted"
    );
    assert_eq!(
        proxy.stdout_seen.len(),
        2,
        "no error for the cancelled request: {:?}",
        proxy.stdout_seen
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_the_server_ends_is_issued_again() {
    let server = Server::start().await;
    let mut proxy = start_proxy(&server, &[]);
    listen(&mut proxy).await;
    // The server ends the stream without a final result (a restart): no resumption in the
    // revision, so the proxy issues the same request again, and the client keeps listening.
    server.state.lock().unwrap().listeners.clear();
    let again = proxy.next_within(Duration::from_secs(10)).await;
    assert_eq!(
        again["method"], "notifications/subscriptions/acknowledged",
        "{again}"
    );
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(server.notify(&changed), 1, "the new stream is open");
    assert_eq!(proxy.next().await, changed);
    let proxy = proxy.closed_cleanly("nothing more").await;
    let listens = server
        .seen()
        .into_iter()
        .filter(|s| s.method.as_deref() == Some("subscriptions/listen"))
        .count();
    assert_eq!(listens, 2, "stderr:\n{}", proxy.stderr());
    assert_eq!(
        proxy.stdout_seen.len(),
        3,
        "no error for the held request: {:?}",
        proxy.stdout_seen
    );
}
