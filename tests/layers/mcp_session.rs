//! `McpSessionRecoveryLayer` alone, over an in-memory stateful MCP server: an expired session
//! is opened again once, the request that met the 404 re-sent once, and every 404 that is not
//! an expiry of the session the layer knows is delivered as it came.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agentcore_tower::record::Verdict;
use agentcore_tower::rule::{Assumption, By, Failure, Permission, ReplayRule, SharedReplayRule};
use agentcore_tower::{AttemptRecord, McpSessionRecoveryLayer};
use bytes::Bytes;
use common::{mcp_post, verdict_on};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::{Layer, Service, ServiceExt};

/// A stateful MCP server: issues session ids, forgets them on demand, answers an unknown id
/// with MCP's 404.
#[derive(Default)]
struct State {
    known: HashSet<String>,
    opened: u32,
    /// The JSON-RPC method and the session id of every request, in order.
    seen: Vec<(String, Option<String>)>,
    executions: HashMap<String, u32>,
    /// Answer every request with the platform's 404 (an unknown runtime).
    platform_404: bool,
    /// Refuse every `initialize` from now on.
    refuse_initialize: bool,
    /// How long an `initialize` takes.
    initialize_takes: Duration,
    /// Whether each `initialize` carried a call budget and a retry budget.
    initialize_budgets: Vec<(bool, bool)>,
}

#[derive(Clone, Default)]
struct Server(Arc<Mutex<State>>);

impl Server {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    fn forget_sessions(&self) {
        self.state().known.clear();
    }

    fn initializes(&self) -> usize {
        self.state()
            .seen
            .iter()
            .filter(|(m, _)| m == "initialize")
            .count()
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.state().seen.clone()
    }

    fn executions(&self, tool: &str) -> u32 {
        self.state().executions.get(tool).copied().unwrap_or(0)
    }
}

fn answer(status: StatusCode, headers: &[(&str, &str)], body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    response
}

impl Service<Request<Full<Bytes>>> for Server {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let server = self.clone();
        Box::pin(async move {
            let session = request
                .headers()
                .get("mcp-session-id")
                .map(|v| v.to_str().unwrap().to_owned());
            let http_method = request.method().clone();
            let extensions = request.extensions().clone();
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let method = if http_method == http::Method::DELETE {
                "DELETE".to_owned()
            } else {
                message["method"].as_str().unwrap_or("").to_owned()
            };
            let id = message["id"].clone();
            let takes = {
                let mut state = server.state();
                state.seen.push((method.clone(), session.clone()));
                if state.platform_404 {
                    return Ok(answer(
                        StatusCode::NOT_FOUND,
                        &[
                            ("content-type", "application/json"),
                            (
                                "x-amzn-errortype",
                                "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                            ),
                        ],
                        json!({"message": "No runtime with this ARN."}).to_string(),
                    ));
                }
                state.initialize_takes
            };
            if method == "initialize" {
                tokio::time::sleep(takes).await;
                let mut state = server.state();
                state.initialize_budgets.push((
                    extensions.get::<agentcore_tower::CallBudget>().is_some(),
                    extensions.get::<agentcore_tower::RetryBudget>().is_some(),
                ));
                if state.refuse_initialize {
                    return Ok(answer(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &[("content-type", "application/json")],
                        json!({"jsonrpc":"2.0","id":id,"error":{"code":-32603,"message":"down"}})
                            .to_string(),
                    ));
                }
                state.opened += 1;
                let new = format!("session-{}", state.opened);
                state.known.insert(new.clone());
                return Ok(answer(
                    StatusCode::OK,
                    &[
                        ("content-type", "text/event-stream"),
                        ("mcp-session-id", &new),
                    ],
                    format!(
                        "event: message\ndata: {}\n\n",
                        json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":"2025-06-18"}})
                    ),
                ));
            }
            let mut state = server.state();
            let Some(session) = session.filter(|s| state.known.contains(s)) else {
                return Ok(answer(
                    StatusCode::NOT_FOUND,
                    &[("content-type", "application/json")],
                    json!({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}).to_string(),
                ));
            };
            if method == "DELETE" {
                state.known.remove(&session);
                return Ok(answer(StatusCode::OK, &[], String::new()));
            }
            if method.starts_with("notifications/") {
                return Ok(answer(StatusCode::ACCEPTED, &[], String::new()));
            }
            if method == "tools/call" {
                let tool = message["params"]["name"].as_str().unwrap_or("").to_owned();
                *state.executions.entry(tool).or_default() += 1;
            }
            Ok(answer(
                StatusCode::OK,
                &[
                    ("content-type", "application/json"),
                    ("mcp-session-id", &session),
                ],
                json!({"jsonrpc":"2.0","id":id,"result":{}}).to_string(),
            ))
        })
    }
}

fn post(session: Option<&str>, body: Value) -> Request<Full<Bytes>> {
    mcp_post("https://mcp.example/mcp", session, body.to_string())
}

fn initialize() -> Request<Full<Bytes>> {
    post(
        None,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    )
}

fn tool(session: &str, id: u64, name: &str) -> Request<Full<Bytes>> {
    post(
        Some(session),
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{}}}),
    )
}

type Client = agentcore_tower::mcp_session::McpSessionRecovery<Server>;

/// One request through the client, once it is ready.
async fn send<S>(client: &mut S, request: Request<Full<Bytes>>) -> S::Response
where
    S: Service<Request<Full<Bytes>>>,
    S::Error: std::fmt::Debug,
{
    client.ready().await.unwrap().call(request).await.unwrap()
}

/// A client with an open session (`session-1`), its `notifications/initialized` sent.
async fn opened(layer: McpSessionRecoveryLayer) -> (Client, Server) {
    let server = Server::default();
    let mut client = layer.layer(server.clone());
    let answer = send(&mut client, initialize()).await;
    assert_eq!(answer.headers()["mcp-session-id"], "session-1");
    let answer = send(
        &mut client,
        post(
            Some("session-1"),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        ),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::ACCEPTED);
    (client, server)
}

/// A client with an open session (`session-1`), which the server has since forgotten.
async fn forgotten() -> (Client, Server) {
    let (client, server) = opened(McpSessionRecoveryLayer::new()).await;
    server.forget_sessions();
    (client, server)
}

/// The client's DELETE of `session`.
fn delete(session: &str) -> Request<Full<Bytes>> {
    Request::delete("https://mcp.example/mcp")
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// A `tools/call` of `counter` in `session-1`, carrying `extension` (a budget, a rule).
fn counter_with<T: Clone + Send + Sync + 'static>(extension: T) -> Request<Full<Bytes>> {
    let mut request = tool("session-1", 1, "counter");
    request.extensions_mut().insert(extension);
    request
}

fn owned(seen: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    seen.iter()
        .map(|(m, s)| ((*m).to_owned(), s.map(str::to_owned)))
        .collect()
}

#[tokio::test]
async fn an_expired_session_is_opened_again_and_the_call_sent_once_more() {
    let (mut client, server) = forgotten().await;

    let answer = send(&mut client, tool("session-1", 1, "counter")).await;
    assert_eq!(answer.status(), StatusCode::OK);
    // The answer names the id the client holds, not the server's new one.
    assert_eq!(answer.headers()["mcp-session-id"], "session-1");
    let record = AttemptRecord::of_response(&answer).unwrap().clone();
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 2, "{record}");
    assert_eq!(
        attempts[0].decisions()[0].verdict(),
        &Verdict::SentAgain {
            cause: "MCP session expired (HTTP 404)",
            wait: Duration::ZERO,
            retry_after: None
        }
    );
    assert_eq!(
        attempts[0].decisions()[0].permission(),
        Some(&Permission::new(
            By::Adapter,
            Assumption::RefusedBeforeExecution
        ))
    );
    assert_eq!(attempts[1].decisions()[0].verdict(), &Verdict::Delivered);
    assert_eq!(server.executions("counter"), 1);

    // Later requests carry the new id, whatever the client holds.
    send(&mut client, tool("session-1", 2, "counter")).await;
    assert_eq!(
        server.seen(),
        owned(&[
            ("initialize", None),
            ("notifications/initialized", Some("session-1")),
            ("tools/call", Some("session-1")),
            ("initialize", None),
            ("notifications/initialized", Some("session-2")),
            ("tools/call", Some("session-2")),
            ("tools/call", Some("session-2")),
        ])
    );
    assert_eq!(server.executions("counter"), 2);

    // It expires again later: recovered again, from the new id.
    server.forget_sessions();
    let answer = send(&mut client, tool("session-1", 3, "counter")).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(server.initializes(), 3);
    assert_eq!(
        server.seen().last().unwrap(),
        &("tools/call".to_owned(), Some("session-3".to_owned()))
    );
}

#[tokio::test(start_paused = true)]
async fn fifty_requests_meeting_one_expiry_share_one_initialize() {
    let (client, server) = forgotten().await;
    server.state().initialize_takes = Duration::from_secs(2);
    let calls = (0..50).map(|i| {
        let client = client.clone();
        tokio::spawn(client.oneshot(tool("session-1", 100 + i, "add")))
    });
    let answers = futures_util::future::join_all(calls).await;
    for answer in answers {
        let answer = answer.unwrap().unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(AttemptRecord::of_response(&answer).unwrap().len(), 2);
    }
    assert_eq!(server.initializes(), 2, "one re-initialize for all 50");
    assert_eq!(server.executions("add"), 50);
}

#[tokio::test]
async fn a_platform_404_is_delivered_at_once() {
    let (mut client, server) = opened(McpSessionRecoveryLayer::new()).await;
    server.state().platform_404 = true;
    let answer = send(&mut client, tool("session-1", 1, "counter")).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        agentcore_tower::record::aws_error_type(answer.headers()),
        Some("ResourceNotFoundException")
    );
    let record = AttemptRecord::of_response(&answer).unwrap();
    assert_eq!(record.len(), 1);
    assert_eq!(server.initializes(), 1, "no re-initialize");
}

#[tokio::test]
async fn a_404_without_a_session_or_with_an_unknown_one_is_delivered() {
    let (mut client, server) = forgotten().await;
    // Another session's id, which this layer never saw opened.
    let answer = send(&mut client, tool("session-elsewhere", 1, "counter")).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(AttemptRecord::of_response(&answer).unwrap().len(), 1);
    // No id at all.
    let answer = send(
        &mut client,
        post(None, json!({"jsonrpc":"2.0","id":2,"method":"tools/list"})),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(AttemptRecord::of_response(&answer).unwrap().len(), 1);
    assert_eq!(server.initializes(), 1);
    assert_eq!(server.executions("counter"), 0);
}

#[tokio::test]
async fn a_404_right_after_a_recovery_is_delivered_without_a_loop() {
    let (client, server) = forgotten().await;
    // A server that forgets every session it opens at once.
    let forgetful = tower::service_fn({
        let server = server.clone();
        move |request: Request<Full<Bytes>>| {
            let mut server = server.clone();
            async move {
                let answer = server.call(request).await;
                server.forget_sessions();
                answer
            }
        }
    });
    let layer = McpSessionRecoveryLayer::new();
    let mut client2 = layer.layer(forgetful);
    // Open a session through the forgetful server's layer.
    let opened = send(&mut client2, initialize()).await;
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer = send(&mut client2, tool(&id, 1, "counter")).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    let record = AttemptRecord::of_response(&answer).unwrap().clone();
    assert_eq!(record.len(), 2, "{record}");
    assert_eq!(
        record.attempts()[1].decisions()[0].verdict(),
        &Verdict::Delivered
    );
    assert_eq!(
        server.initializes(),
        3,
        "the first two sessions, one re-open"
    );
    assert_eq!(server.executions("counter"), 0);
    drop(client);
}

#[tokio::test]
async fn a_rule_that_forbids_it_is_obeyed() {
    #[derive(Debug)]
    struct Never;
    impl ReplayRule for Never {
        fn permission(&self, _: &Failure) -> Result<Permission, String> {
            Err("never".into())
        }
    }
    let (mut client, server) = forgotten().await;
    let answer = send(&mut client, counter_with(SharedReplayRule::new(Never))).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        verdict_on(&answer, 0),
        Verdict::Forbidden {
            cause: "MCP session expired (HTTP 404)",
            reason: "never".into()
        }
    );
    assert_eq!(server.initializes(), 1);
}

#[tokio::test(start_paused = true)]
async fn when_the_new_session_cannot_be_opened_the_404_is_delivered_and_tried_once() {
    let (client, server) = forgotten().await;
    {
        let mut state = server.state();
        state.refuse_initialize = true;
        state.initialize_takes = Duration::from_secs(1);
    }
    let calls = (0..5).map(|i| {
        let client = client.clone();
        tokio::spawn(client.oneshot(tool("session-1", 10 + i, "counter")))
    });
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap().unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND);
        let record = AttemptRecord::of_response(&answer).unwrap();
        assert_eq!(record.len(), 1);
        assert!(
            matches!(
                record.attempts()[0].decisions()[0].verdict(),
                Verdict::NotRenewed { .. }
            ),
            "{record}"
        );
    }
    assert_eq!(
        server.initializes(),
        2,
        "one failed re-initialize for the five"
    );
    assert_eq!(server.executions("counter"), 0);

    // A later call tries again, and succeeds once the server takes it.
    server.state().refuse_initialize = false;
    let answer = client
        .oneshot(tool("session-1", 20, "counter"))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(server.initializes(), 3);
    assert_eq!(server.executions("counter"), 1);
}

#[tokio::test]
async fn a_deleted_session_is_forgotten() {
    let layer = McpSessionRecoveryLayer::new();
    let (mut client, server) = opened(layer.clone()).await;
    assert_eq!(layer.sessions(), 1);
    let answer = send(&mut client, delete("session-1")).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(layer.sessions(), 0);
    let answer = send(&mut client, tool("session-1", 1, "counter")).await;
    assert_eq!(
        answer.status(),
        StatusCode::NOT_FOUND,
        "ended by the client: not re-opened"
    );
    assert_eq!(server.initializes(), 1);
}

#[tokio::test]
async fn a_delete_that_meets_the_expiry_forgets_the_session_without_opening_one() {
    let layer = McpSessionRecoveryLayer::new();
    let (mut client, server) = opened(layer.clone()).await;
    server.forget_sessions();
    let answer = send(&mut client, delete("session-1")).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(AttemptRecord::of_response(&answer).unwrap().len(), 1);
    assert_eq!(layer.sessions(), 0);
    assert_eq!(server.initializes(), 1);
}

#[tokio::test]
async fn the_new_session_is_opened_within_the_calls_limits_and_budget() {
    let (mut client, server) = forgotten().await;
    let budget = agentcore_tower::CallBudget::new().max_total_wait(Duration::from_secs(5));
    let answer = send(&mut client, counter_with(budget)).await;
    assert_eq!(answer.status(), StatusCode::OK);
    // The first initialize was the client's own (no budget of the app's); the re-opening one
    // carries the call's limits and its retry budget.
    assert_eq!(
        server.state().initialize_budgets,
        [(false, false), (true, true)]
    );
}

#[tokio::test(start_paused = true)]
async fn past_the_calls_deadline_the_404_is_delivered() {
    let (mut client, server) = forgotten().await;
    let budget = agentcore_tower::CallBudget::new().deadline(tokio::time::Instant::now());
    let answer = send(&mut client, counter_with(budget)).await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    let record = AttemptRecord::of_response(&answer).unwrap();
    assert!(
        matches!(
            record.attempts()[0].decisions()[0].verdict(),
            Verdict::WaitCeiling { .. }
        ),
        "{record}"
    );
    assert_eq!(server.initializes(), 1);
}
