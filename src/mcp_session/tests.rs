//! The layer's metric: how long each MCP session lived, from `initialize` to its end.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer, Service, ServiceExt};

use super::McpSessionRecoveryLayer;
use crate::telemetry::Metrics;
use crate::telemetry::test_meter::{TestMeter, point};

/// A stateful MCP server: `initialize` opens `session-N`; a request of a session it does
/// not know is answered 404; DELETE ends a session; once it knows `closed`, `initialize` is
/// answered 503.
fn server(
    known: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<Full<Bytes>>| {
        let known = known.clone();
        async move {
            let session = request
                .headers()
                .get("mcp-session-id")
                .map(|v| v.to_str().unwrap().to_owned());
            let body = http_body_util::BodyExt::collect(request.into_body())
                .await
                .unwrap()
                .to_bytes();
            let mut known = known.lock().unwrap();
            let answer = Response::builder().header("content-type", "application/json");
            let initialize = body.windows(12).any(|w| w == b"\"initialize\"");
            let answer = if initialize && known.iter().any(|id| id == "closed") {
                // Opens no session any more.
                answer.status(StatusCode::SERVICE_UNAVAILABLE).body("")
            } else if initialize {
                let id = format!("session-{}", known.len() + 1);
                known.push(id.clone());
                answer
                    .header("mcp-session-id", id)
                    .body(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#)
            } else if !session.is_some_and(|id| known.contains(&id)) {
                answer.status(StatusCode::NOT_FOUND).body("")
            } else if body.is_empty() {
                // A DELETE.
                answer.status(StatusCode::OK).body("")
            } else {
                answer.status(StatusCode::ACCEPTED).body("")
            };
            Ok::<_, Infallible>(
                answer
                    .unwrap()
                    .map(|b| Full::new(Bytes::from_static(b.as_bytes()))),
            )
        }
    })
}

fn post(method: http::Method, session: Option<&str>, body: &'static str) -> Request<Full<Bytes>> {
    let mut request = Request::builder()
        .method(method)
        .uri("https://mcp.example:8443/mcp")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

#[tokio::test]
async fn a_sessions_duration_from_initialize_to_delete_or_loss() {
    let meter = TestMeter::default();
    let metrics = Metrics::new(&meter.meter());
    let known = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let layer = McpSessionRecoveryLayer::new().metrics(metrics);
    let client = layer.layer(server(known.clone()));
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let call = |request| client.clone().oneshot(request);
    for session in ["session-1", "session-2"] {
        let opened = call(post(http::Method::POST, None, initialize))
            .await
            .unwrap();
        assert_eq!(opened.headers()["mcp-session-id"], session);
        call(post(http::Method::POST, Some(session), initialized))
            .await
            .unwrap();
    }
    // The first ends with the client's DELETE.
    let deleted = call(post(http::Method::DELETE, Some("session-1"), ""))
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    // The server forgets the second, and cannot open it again: `initialize` fails too.
    *known.lock().unwrap() = vec!["closed".to_owned()];
    let lost = call(post(http::Method::POST, Some("session-2"), initialized))
        .await
        .unwrap();
    assert_eq!(lost.status(), StatusCode::NOT_FOUND);
    let points: Vec<_> = meter
        .read()
        .into_iter()
        .filter(|((name, ..), _)| name == "mcp.client.session.duration")
        .collect();
    let bounds = "[0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]";
    let common = [
        "server.address=mcp.example",
        "server.port=8443",
        "mcp.protocol.version=2025-06-18",
    ];
    let mut lost_point = common.to_vec();
    lost_point.push("error.type=session_lost");
    assert_eq!(
        points,
        vec![
            // (Sorted by attributes: `error.type` first.)
            (
                point("mcp.client.session.duration", "s", &lost_point),
                format!("count 1 bounds {bounds}")
            ),
            (
                point("mcp.client.session.duration", "s", &common),
                format!("count 1 bounds {bounds}")
            ),
        ]
    );
}
