//! The emulator's HTTP side: routing, the doors (SigV4, bearer tokens), runtime sessions,
//! gateway MCP sessions, faults.

mod answer;
mod auth;
mod faults;
mod gateway;
mod runtime;

use std::fmt;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use super::{Received, State};
use answer::{AnswerBody, aws_error};
use auth::{Auth, METADATA_OPERATION, scheme};
use gateway::gateway;
use http_body_util::{BodyExt, Limited};
use runtime::runtime;

const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
use agentcore_tower::invoke::RUNTIME_CUSTOM_PREFIX;

/// Accepts connections until the task is aborted; aborting it ends every connection too.
pub(crate) async fn accept_loop(listener: tokio::net::TcpListener, state: Arc<State>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request| handle(request, state.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Returned by a handler to drop the connection without an answer.
#[derive(Debug)]
pub(crate) struct DropConnection;

impl fmt::Display for DropConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the emulator dropped the connection on purpose")
    }
}

impl std::error::Error for DropConnection {}

type Answer = Result<Response<AnswerBody>, DropConnection>;

async fn handle(request: Request<Incoming>, state: Arc<State>) -> Answer {
    state.record(|a| a.requests += 1);
    let (parts, body) = request.into_parts();
    let limited = Limited::new(body, agentcore_tower::invoke::MAX_PAYLOAD_BYTES);
    let Ok(body) = limited.collect().await.map(|whole| whole.to_bytes()) else {
        return Ok(aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The request body could not be read.",
        ));
    };
    if state.config.gateway {
        gateway(&parts, &body, &state).await
    } else {
        runtime(&parts, &body, &state).await
    }
}

/// Keeps in the audit a request for the protected-resource metadata, which is never checked.
fn record_metadata_request(state: &State, parts: &http::request::Parts, body: &[u8]) {
    record_received(
        state,
        parts,
        body,
        Some(METADATA_OPERATION),
        &Auth::Unchecked,
    );
}

/// Keeps in the audit what it keeps of a request (never a token): the `operation` its path
/// names, the verdict on its `auth`, and the custom headers the runtime passes (those of its
/// allowlist; none at a gateway).
fn record_received(
    state: &State,
    parts: &http::request::Parts,
    body: &[u8],
    operation: Option<&str>,
    auth: &Auth,
) {
    let allowlist = if state.config.gateway {
        Some(&[][..])
    } else {
        state.config.header_allowlist.as_deref()
    };
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let text = |pointer: &str| {
        value
            .as_ref()
            .and_then(|v| v.pointer(pointer))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let allowed = |name: &str| {
        name.starts_with(RUNTIME_CUSTOM_PREFIX)
            && allowlist.is_none_or(|list| list.iter().any(|allowed| allowed == name))
    };
    let custom_headers = parts
        .headers
        .iter()
        .filter(|(name, _)| allowed(name.as_str()))
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let received = Received {
        custom_headers,
        operation: operation.map(str::to_owned),
        http_method: parts.method.to_string(),
        authorization: scheme(parts),
        signed: matches!(auth, Auth::Signed(_)),
        bearer_accepted: matches!(auth, Auth::Bearer(_)),
        runtime_session_id: header(RUNTIME_SESSION_ID),
        mcp_session_id: header("mcp-session-id"),
        mcp_method: header("mcp-method"),
        mcp_name: header("mcp-name"),
        method: text("/method"),
        id: value
            .as_ref()
            .and_then(|v| v.get("id"))
            .map(Value::to_string),
        client_token: text("/clientToken"),
        traceparent: header("traceparent"),
        amzn_trace_id: header("x-amzn-trace-id"),
        meta_traceparent: text("/params/_meta/traceparent"),
    };
    state.record(|a| a.received.push(received));
}
