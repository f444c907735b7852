//! The requests the layer makes about a task (`tasks/get`, `tasks/update`, `tasks/cancel`),
//! each a call of its own through the layers below, and how their answers are read.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use http_body::Body;
use serde_json::{Map, Value};

use super::wire;
use crate::replay::ReplayOverride;
use crate::sends::Sends;

/// What every request about one task is made from: the client's request, its head and `_meta`.
#[derive(Clone)]
pub(super) struct Template {
    pub(super) uri: Uri,
    pub(super) headers: HeaderMap,
    pub(super) meta: Map<String, Value>,
}

impl Template {
    /// A request of the extension about `task`, with the client's headers (its session, its
    /// version, its credentials), the standard headers of the method (`Mcp-Method`, and
    /// `Mcp-Name` the task id, so that it is routed where the task is held), and the runtime
    /// session the task was created in.
    pub(super) fn request<ReqB: From<Bytes>>(
        &self,
        method: &str,
        id: &str,
        task: &str,
        extra: Option<(&str, Value)>,
    ) -> Request<ReqB> {
        let message = wire::task_request(method, id, task, &self.meta, extra);
        let bytes = Bytes::from(serde_json::to_vec(&message).unwrap_or_default());
        let mut request = Request::new(ReqB::from(bytes));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.clone_from(&self.headers);
        let mut names = crate::protocol::request_headers(&message, None);
        for name in ["mcp-method", "mcp-name"] {
            if let Some(value) = names.remove(name) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        if method == "tasks/get" {
            // A read: sent again after any failure, whatever the app declared of the tool.
            request.extensions_mut().insert(ReplayOverride::Replayable);
        }
        request
    }
}

/// Sends `tasks/cancel` for `task` and reads its answer (whatever it says: cancelling is
/// cooperative, and the layer gives the client its own answer).
pub(super) async fn cancel<S: Sends<ReqB, ResB>, ReqB: From<Bytes>, ResB: Body<Data = Bytes>>(
    service: &mut S,
    template: &Template,
    task: &str,
    timeout: Duration,
) {
    let id = "agentcore-tower/tasks/cancel";
    let request = template.request("tasks/cancel", id, task, None);
    if let Err(why) = crate::exchange::ask(service, request, id, timeout).await {
        tracing::debug!(task, reason = %why, "tasks/cancel failed");
    }
}

/// The header of the runtime session an answer came from, kept for the task's requests.
pub(super) fn pin_runtime_session(headers: &mut HeaderMap, answer: &HeaderMap) {
    let name = HeaderName::from_static(crate::invoke::RUNTIME_SESSION_ID);
    if let Some(session) = answer.get(&name).filter(|v| !v.is_empty()) {
        headers.insert(name, HeaderValue::clone(session));
    }
}
