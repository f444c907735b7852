//! Stacks whose answers are read whole, with the record the crate's layers attach to each, for
//! the tests that follow a call through the whole stack and its re-sends.

use agentcore_tower::AttemptRecord;
use agentcore_tower::record::Verdict;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use serde_json::Value;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

use super::{BoxError, read_all};

/// A stack whose answers are read whole (their extensions, and so their record, kept).
pub type Stack = BoxCloneSyncService<Request<Full<Bytes>>, Response<Bytes>, BoxError>;

/// `service`, its answers read whole.
pub fn read_whole<S, B>(service: S) -> Stack
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::fmt::Debug,
{
    BoxCloneSyncService::new(service.map_err(Into::into).and_then(
        |response: Response<B>| async move {
            let (parts, body) = response.into_parts();
            let (bytes, _) = read_all(body).await;
            Ok::<_, BoxError>(Response::from_parts(parts, bytes))
        },
    ))
}

/// An answer through a stack, read whole, with its record.
#[derive(Debug)]
pub struct Answered {
    pub status: StatusCode,
    /// Its `Mcp-Session-Id`.
    pub session: Option<String>,
    /// Its body as JSON (`Null` when empty).
    pub json: Value,
    pub record: AttemptRecord,
}

impl Answered {
    /// The text of a `tools/call` result.
    pub fn text(&self) -> &str {
        self.json["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no tool result: {self:?}\n{}", self.record))
    }
}

/// Sends `request` through `stack`: the answer, which must carry a record.
pub async fn send_through(stack: &Stack, request: Request<Full<Bytes>>) -> Answered {
    let answer = stack.clone().oneshot(request).await.unwrap();
    let record = AttemptRecord::of_response(&answer)
        .expect("a record")
        .clone();
    let (parts, bytes) = answer.into_parts();
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&bytes)))
    };
    Answered {
        status: parts.status,
        session: parts
            .headers
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned()),
        json,
        record,
    }
}

/// Each re-send of a record: the layer that sent it again, and why.
pub fn resends(record: &AttemptRecord) -> Vec<(&'static str, &'static str)> {
    record
        .attempts()
        .iter()
        .flat_map(|a| a.decisions().to_vec())
        .filter_map(|d| match d.verdict() {
            Verdict::SentAgain { cause, .. } => Some((d.layer(), *cause)),
            _ => None,
        })
        .collect()
}
