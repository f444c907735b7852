//! The proxy's own requests over stdio: the tools listed again (nothing reaches the client) when
//! a 2026-07-28 call's `Mcp-Param-*` headers met a HeaderMismatch from a stale listing.

use bytes::Bytes;
use http::Method;
use serde_json::Value;
use tower::ServiceExt;
use tracing::warn;

use super::Proxy;
use crate::answers::{Call, next_frame};
use crate::sse::SseParser;

/// How many pages the proxy's own listing reads, at most.
const MAX_LIST_PAGES: usize = 100;

/// MCP 2026-07-28's HeaderMismatch: the headers disagreed with the body; nothing ran.
const HEADER_MISMATCH: i64 = -32020;

/// Whether a body is one JSON-RPC error with the code HeaderMismatch.
pub(super) fn is_header_mismatch(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|m| m.pointer("/error/code").and_then(Value::as_i64))
        == Some(HEADER_MISMATCH)
}

impl Proxy {
    /// Lists the tools again, for the proxy alone (nothing reaches the client), to learn the
    /// `x-mcp-header` annotations as they are now: every page, with the `_meta` of the
    /// client's `message` (its version and capabilities).
    pub(super) async fn list_again(&self, message: &Value) {
        let meta = message.pointer("/params/_meta").cloned();
        let mut cursor: Option<Value> = None;
        for page in 1..=MAX_LIST_PAGES {
            let mut params = serde_json::json!({});
            if let Some(meta) = &meta {
                params["_meta"] = meta.clone();
            }
            if let Some(cursor) = cursor.take() {
                params["cursor"] = cursor;
            }
            let id = Value::from(format!("agentcore-mcp-proxy:tools/list:{page}"));
            let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
            let Some(answer) = self.own_call(&request).await else {
                return;
            };
            let Some(result) = answer.get("result") else {
                return;
            };
            self.tools.learn_params(result);
            match result.get("nextCursor") {
                Some(next) if !next.is_null() => cursor = Some(next.clone()),
                _ => return,
            }
        }
    }

    /// Sends a request of the proxy's own and reads its answer (JSON, or the event of an
    /// event stream that answers it): `None` when none came.
    async fn own_call(&self, request: &Value) -> Option<Value> {
        let body = Bytes::from(request.to_string());
        let response = match self
            .stack
            .clone()
            .oneshot(self.request(Method::POST, body, Some(request)))
            .await
        {
            Ok(response) => response,
            Err(error) => {
                warn!("{}", self.upstream.describe_failure(error.as_ref()).0);
                return None;
            }
        };
        let (parts, mut body) = response.into_parts();
        let call = Call::of(&parts.extensions, &self.upstream);
        let id = request.get("id");
        let mut answer = None;
        let mut events = SseParser::default();
        let mut whole = Vec::new();
        while let Ok(Some(frame)) = next_frame(&mut body, &call).await {
            if let Some(data) = frame.data_ref() {
                whole.extend_from_slice(data);
                events.feed(data, |event| {
                    if let Some(message) = event
                        .message()
                        .and_then(|data| self.upstream.parse_server_message(data))
                        && message.get("id") == id
                    {
                        answer = Some(message);
                    }
                });
                if answer.is_some() {
                    return answer;
                }
            }
        }
        self.upstream
            .parse_server_message(whole.trim_ascii())
            .filter(|m| m.get("id") == id)
    }
}
