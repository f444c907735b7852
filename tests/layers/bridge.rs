//! `ProtocolBridgeLayer` with `bridge_modern_clients()` alone, over an in-memory MCP server of
//! the `initialize` era that asks its clients (an `elicitation/create` on a call's event
//! stream, after a `ping` of its own): a client pinned to 2026-07-28 hears the question as an
//! `InputRequiredResult` and sends its call again with the answer, which reaches the server as
//! a 2025 response in the session; a client of other capabilities gets a session of its own;
//! a session the server forgot is opened again.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agentcore_tower::bridge::{BridgeBody, ProtocolBridgeLayer};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tower::{Layer, Service, ServiceExt};

use crate::common::{TestBody, boxed};

/// What the server saw: each message with the session it came in.
#[derive(Default)]
struct State {
    /// The sessions it knows, with the capabilities each `initialize` declared.
    sessions: HashMap<String, Value>,
    opened: usize,
    received: Vec<(Option<String>, Value)>,
    /// Its own requests waiting for the client's response, by id.
    waiting: HashMap<String, oneshot::Sender<Value>>,
    /// The actions `confirm` ran.
    ran: Vec<String>,
}

/// A server of the `initialize` era (2025-11-25 only), stateful, whose tool `confirm` asks the
/// client — a `ping`, then an `elicitation/create` form — on the call's event stream, when the
/// session's client declared elicitation, and runs once the answer is an acceptance.
#[derive(Clone, Default)]
struct LegacyServer(Arc<Mutex<State>>);

impl LegacyServer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// What it received, by method (a response: `response <id>`), with each one's session.
    fn received(&self) -> Vec<(Option<String>, String)> {
        self.state()
            .received
            .iter()
            .map(|(session, message)| {
                let what = match message.get("method").and_then(Value::as_str) {
                    Some(method) => method.to_owned(),
                    None => format!("response {}", message["id"]),
                };
                (session.clone(), what)
            })
            .collect()
    }

    /// Forgets every session, as a server restarting.
    fn forget_sessions(&self) {
        self.state().sessions.clear();
    }

    fn serve(&self, session: Option<String>, message: Value) -> Response<TestBody> {
        self.state()
            .received
            .push((session.clone(), message.clone()));
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        if method == Some("initialize") {
            return self.initialize(&message);
        }
        // Refused as the Python SDK 1.x's server refuses a request outside a session: under an
        // id of its own.
        let Some(session) = session else {
            return json_answer(
                400,
                &json!({"jsonrpc": "2.0", "id": "server-error", "error": {
                "code": -32600, "message": "Bad Request: Missing session ID"}}),
            );
        };
        let Some(capabilities) = self.state().sessions.get(&session).cloned() else {
            return json_answer(
                404,
                &json!({"jsonrpc": "2.0", "id": null, "error": {
                "code": -32001, "message": "Session not found"}}),
            );
        };
        match (method, id) {
            (None, Some(id)) => {
                if let Some(waiting) = self.state().waiting.remove(&id.to_string()) {
                    let _ = waiting.send(message);
                }
                empty(202)
            }
            (Some(_), None) => empty(202),
            (Some("tools/list"), Some(id)) => json_answer(
                200,
                &json!({"jsonrpc": "2.0",
                "id": id, "result": {"tools": [{"name": "confirm", "inputSchema": {"type": "object"}}]}}),
            ),
            (Some("tools/call"), Some(id)) => {
                let asks = capabilities.get("elicitation").is_some();
                self.confirm(id, message["params"]["arguments"]["action"].clone(), asks)
            }
            (_, id) => json_answer(
                200,
                &json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}}),
            ),
        }
    }

    fn initialize(&self, message: &Value) -> Response<TestBody> {
        let mut state = self.state();
        state.opened += 1;
        let session = format!("s-{}", state.opened);
        let capabilities = message["params"]["capabilities"].clone();
        state.sessions.insert(session.clone(), capabilities);
        let mut answer = json_answer(
            200,
            &json!({"jsonrpc": "2.0", "id": message["id"],
            "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy", "version": "1"}}}),
        );
        answer
            .headers_mut()
            .insert("mcp-session-id", session.parse().unwrap());
        answer
    }

    /// `confirm`: an event stream with a progress notification, then (when the client can be
    /// asked) a `ping` and the question, each waited for, then the call's result.
    fn confirm(&self, id: Value, action: Value, asks: bool) -> Response<TestBody> {
        let (sink, events) = mpsc::unbounded_channel::<Value>();
        let server = self.clone();
        tokio::spawn(async move {
            let _ = sink.send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1}}));
            let text = if !asks {
                "not asked".to_owned()
            } else if server
                .ask(
                    &sink,
                    json!({"jsonrpc": "2.0", "id": "p-1", "method": "ping"}),
                )
                .await
                .is_none()
            {
                return;
            } else {
                let question = json!({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create",
                    "params": {"message": format!("Confirm {}?", action.as_str().unwrap_or_default()),
                        "requestedSchema": {"type": "object",
                            "properties": {"confirmed": {"type": "boolean"}}}}});
                let Some(answer) = server.ask(&sink, question).await else {
                    return;
                };
                let result = &answer["result"];
                if result["action"] == "accept" && result["content"]["confirmed"] == true {
                    let action = action.as_str().unwrap_or_default().to_owned();
                    server.state().ran.push(action.clone());
                    format!("confirmed: {action}")
                } else {
                    format!("not confirmed ({})", result["action"])
                }
            };
            let _ = sink.send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": text}], "isError": false}}));
        });
        let stream = futures_util::stream::unfold(events, |mut events| async move {
            let message = events.recv().await?;
            let event = format!("event: message\ndata: {message}\n\n");
            Some((Ok::<_, Infallible>(Frame::data(Bytes::from(event))), events))
        });
        let mut answer = Response::new(boxed(StreamBody::new(stream)));
        answer
            .headers_mut()
            .insert("content-type", "text/event-stream".parse().unwrap());
        answer
    }

    /// Sends one request of its own on the stream and waits (30 s at most) for the response.
    async fn ask(&self, sink: &mpsc::UnboundedSender<Value>, request: Value) -> Option<Value> {
        let (sender, receiver) = oneshot::channel();
        self.state()
            .waiting
            .insert(request["id"].to_string(), sender);
        sink.send(request).ok()?;
        tokio::time::timeout(Duration::from_secs(30), receiver)
            .await
            .ok()?
            .ok()
    }
}

fn json_answer(status: u16, message: &Value) -> Response<TestBody> {
    let mut answer = Response::new(boxed(Full::new(Bytes::from(message.to_string()))));
    *answer.status_mut() = StatusCode::from_u16(status).unwrap();
    answer
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    answer
}

fn empty(status: u16) -> Response<TestBody> {
    let mut answer = Response::new(boxed(Full::new(Bytes::new())));
    *answer.status_mut() = StatusCode::from_u16(status).unwrap();
    answer
}

impl Service<Request<Full<Bytes>>> for LegacyServer {
    type Response = Response<TestBody>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<TestBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let session = request
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = futures_util::FutureExt::now_or_never(request.into_body().collect())
            .expect("a body in memory")
            .unwrap()
            .to_bytes();
        let message = serde_json::from_slice(&body).unwrap_or(Value::Null);
        std::future::ready(Ok(self.serve(session, message)))
    }
}

/// A client pinned to 2026-07-28, its capabilities as given.
struct ModernClient {
    name: &'static str,
    capabilities: Value,
}

/// An answer read whole: its status and its messages (a JSON body's one, or each event's).
#[derive(Debug)]
struct Read {
    status: StatusCode,
    messages: Vec<Value>,
}

impl ModernClient {
    fn message(&self, id: u64, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        });
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    async fn send<S>(&self, service: &mut S, message: &Value) -> Read
    where
        S: Service<Request<Full<Bytes>>, Response = Response<BridgeBody<TestBody>>>,
        S::Error: std::fmt::Debug,
    {
        let mut request = Request::post("https://mcp.example/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .body(Full::new(Bytes::from(message.to_string())))
            .unwrap();
        request
            .headers_mut()
            .extend(agentcore_tower::protocol::request_headers(message, None));
        let answer = service.ready().await.unwrap().call(request).await.unwrap();
        let status = answer.status();
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let messages = match serde_json::from_str::<Value>(&text) {
            Ok(message) => vec![message],
            Err(_) => text
                .split("\n\n")
                .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
                .map(|data| serde_json::from_str(data).unwrap())
                .collect(),
        };
        Read { status, messages }
    }

    async fn call<S>(&self, service: &mut S, id: u64, params: Value) -> Read
    where
        S: Service<Request<Full<Bytes>>, Response = Response<BridgeBody<TestBody>>>,
        S::Error: std::fmt::Debug,
    {
        self.send(service, &self.message(id, "tools/call", params))
            .await
    }
}

/// A client that can be asked (it declares elicitation).
fn asked_client() -> ModernClient {
    ModernClient {
        name: "asked",
        capabilities: json!({"elicitation": {"form": {}}}),
    }
}

fn confirm(action: &str) -> Value {
    json!({"name": "confirm", "arguments": {"action": action}})
}

/// Opens the bridge's session with a discovery (id 1), which must be answered from it.
async fn discover<S>(client: &ModernClient, service: &mut S)
where
    S: Service<Request<Full<Bytes>>, Response = Response<BridgeBody<TestBody>>>,
    S::Error: std::fmt::Debug,
{
    let discovered = client
        .send(service, &client.message(1, "server/discover", json!({})))
        .await;
    assert_eq!(discovered.status, StatusCode::OK, "{discovered:?}");
    assert_eq!(
        discovered.messages[0]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "legacy",
        "{discovered:?}"
    );
}

/// The `InputRequiredResult` of an answer: its one request's key and body, and its state.
fn input_required(read: &Read, id: u64) -> (String, Value, String) {
    let answer = read.messages.last().unwrap();
    assert_eq!(answer["id"], id, "{read:?}");
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{read:?}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{read:?}");
    let (key, request) = requests.iter().next().unwrap();
    let state = result["requestState"].as_str().unwrap().to_owned();
    (key.clone(), request.clone(), state)
}

/// The server, and over it the bridge with `bridge_modern_clients()`: the layer and its service.
fn over_the_bridge() -> (
    LegacyServer,
    ProtocolBridgeLayer,
    agentcore_tower::bridge::ProtocolBridge<LegacyServer>,
) {
    let server = LegacyServer::default();
    let bridge = ProtocolBridgeLayer::new().bridge_modern_clients();
    let service = bridge.layer(server.clone());
    (server, bridge, service)
}

#[tokio::test]
async fn a_2025_servers_question_reaches_a_2026_client_as_a_multi_round_trip_request() {
    let (server, bridge, mut service) = over_the_bridge();
    let client = asked_client();
    discover(&client, &mut service).await;

    // The call: the server's progress as it came, then its question as the call's answer; the
    // server's `ping` answered by the bridge.
    let asked = client.call(&mut service, 2, confirm("deploy")).await;
    assert_eq!(asked.status, StatusCode::OK, "{asked:?}");
    assert_eq!(asked.messages.len(), 2, "{asked:?}");
    assert_eq!(asked.messages[0]["method"], "notifications/progress");
    let (key, request, state) = input_required(&asked, 2);
    assert_eq!(key, "0");
    assert_eq!(
        request,
        json!({"method": "elicitation/create", "params": {"message": "Confirm deploy?",
            "requestedSchema": {"type": "object", "properties": {"confirmed": {"type": "boolean"}}}}})
    );
    assert!(
        state.starts_with("agentcore-tower/bridge/state/"),
        "{state}"
    );
    assert_eq!(bridge.calls_awaiting_input(), 1);
    assert!(server.state().ran.is_empty(), "nothing ran yet");

    // Sent again with the answer: it reaches the server as the response to its question, and
    // the call's result comes back under the new request's id.
    let mut again = confirm("deploy");
    again["inputResponses"] = json!({"0": {"action": "accept", "content": {"confirmed": true}}});
    again["requestState"] = json!(state);
    let answered = client.call(&mut service, 3, again.clone()).await;
    assert_eq!(
        answered.messages,
        [
            json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete",
            "content": [{"type": "text", "text": "confirmed: deploy"}], "isError": false}})
        ],
        "{answered:?}"
    );
    assert_eq!(server.state().ran, ["deploy"]);
    assert_eq!(bridge.calls_awaiting_input(), 0);
    let session = Some("s-1".to_owned());
    let in_session = |what: &str| (session.clone(), what.to_owned());
    assert_eq!(
        server.received(),
        [
            (None, "server/discover".to_owned()),
            (None, "initialize".to_owned()),
            in_session("notifications/initialized"),
            in_session("tools/call"),
            in_session("response \"p-1\""),
            in_session("response 0"),
        ]
    );
    let posted = server.state().received[5].1.clone();
    assert_eq!(
        posted,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"confirmed": true}}})
    );

    // The state is good once: sent a third time, nothing reaches the server and nothing runs.
    let stale = client.call(&mut service, 4, again).await;
    assert_eq!(
        stale.messages,
        [json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602,
            "message": "Invalid or expired requestState"}})]
    );
    assert_eq!(server.received().len(), 6);
    assert_eq!(server.state().ran, ["deploy"]);
}

/// A client that sends its call again without an answer to the server's elicitation declines
/// it: the server hears `cancel`, and nothing runs.
#[tokio::test]
async fn an_elicitation_left_unanswered_is_cancelled_at_the_server() {
    let (server, _, mut service) = over_the_bridge();
    let client = asked_client();
    discover(&client, &mut service).await;
    let asked = client.call(&mut service, 2, confirm("drop")).await;
    let (_, _, state) = input_required(&asked, 2);
    let mut again = confirm("drop");
    again["inputResponses"] = json!({});
    again["requestState"] = json!(state);
    let answered = client.call(&mut service, 3, again).await;
    assert_eq!(
        answered.messages[0]["result"]["content"][0]["text"], "not confirmed (\"cancel\")",
        "{answered:?}"
    );
    assert!(server.state().ran.is_empty());
}

/// A session is what its client declared: a client of other capabilities gets a session of its
/// own (the server asks only a client that can answer), the same client keeps its own.
#[tokio::test]
async fn each_client_has_a_session_of_its_own() {
    let (server, _, mut service) = over_the_bridge();
    let asked = asked_client();
    discover(&asked, &mut service).await;
    let plain = ModernClient {
        name: "plain",
        capabilities: json!({}),
    };
    let not_asked = plain.call(&mut service, 2, confirm("x")).await;
    assert_eq!(
        not_asked.messages.last().unwrap()["result"]["content"][0]["text"],
        "not asked",
        "{not_asked:?}"
    );
    let listed = asked
        .send(&mut service, &asked.message(3, "tools/list", json!({})))
        .await;
    assert_eq!(listed.messages[0]["result"]["resultType"], "complete");
    let received = server.received();
    let sessions: Vec<_> = received
        .iter()
        .filter(|(_, what)| what == "tools/call" || what == "tools/list")
        .map(|(session, what)| (session.clone().unwrap(), what.clone()))
        .collect();
    assert_eq!(
        sessions,
        [
            ("s-2".to_owned(), "tools/call".to_owned()),
            ("s-1".to_owned(), "tools/list".to_owned()),
        ]
    );
    assert_eq!(server.state().opened, 2);
}

/// A session the server no longer knows (404: nothing ran) is opened again for its client, and
/// the request sent in the new one.
#[tokio::test]
async fn a_session_the_server_forgot_is_opened_again() {
    let (server, _, mut service) = over_the_bridge();
    let client = asked_client();
    discover(&client, &mut service).await;
    server.forget_sessions();
    let listed = client
        .send(&mut service, &client.message(2, "tools/list", json!({})))
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{listed:?}");
    assert_eq!(listed.messages[0]["result"]["tools"][0]["name"], "confirm");
    let received = server.received();
    assert_eq!(
        received[3..],
        [
            (Some("s-1".to_owned()), "tools/list".to_owned()),
            (None, "initialize".to_owned()),
            (
                Some("s-2".to_owned()),
                "notifications/initialized".to_owned()
            ),
            (Some("s-2".to_owned()), "tools/list".to_owned()),
        ]
    );
}

/// A client pinned to 2026-07-28 sends no discovery: its first request, refused outside a
/// session as the Python SDK 1.x's server refuses it (HTTP 400 -32600 "Missing session ID",
/// under the server's own id `"server-error"`), ran nothing and tells the bridge the server's
/// era; the bridge opens a session and sends the request again in it.
#[tokio::test]
async fn a_first_request_refused_under_the_servers_own_id_is_sent_again_in_a_session() {
    let (server, _, mut service) = over_the_bridge();
    let client = asked_client();
    let listed = client
        .send(&mut service, &client.message(1, "tools/list", json!({})))
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{listed:?}");
    assert_eq!(listed.messages[0]["id"], 1, "{listed:?}");
    assert_eq!(listed.messages[0]["result"]["tools"][0]["name"], "confirm");
    assert_eq!(
        server.received(),
        [
            (None, "tools/list".to_owned()),
            (None, "initialize".to_owned()),
            (
                Some("s-1".to_owned()),
                "notifications/initialized".to_owned()
            ),
            (Some("s-1".to_owned()), "tools/list".to_owned()),
        ]
    );
}
