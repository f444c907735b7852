//! What both transports share: which requests of a message still wait for an answer, and the
//! JSON-RPC errors that answer them when the stack could not.

use std::sync::Arc;
use std::time::Duration;

use agentcore_tower::AttemptRecord;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::call::{CallDeadline, Limits, ResBody, TimedOut};
use crate::cli::shown_duration;

/// The JSON-RPC error code of a failure on the way to the server.
pub const PROXY_ERROR: i64 = -32000;

/// The server the proxy answers for, as its own answers speak of it, and the bounds of a
/// call they name: built once at start from the command line (`stack::build`), handed to the
/// transports with the stack. Cheap to clone: each [`Call`] holds one.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// What messages call the server: `AgentCore` (a runtime, a gateway) or `the MCP server`
    /// (any other URL).
    pub name: &'static str,
    /// Whether requests carry a bearer token (else a SigV4 signature): a 401 is then its
    /// refusal.
    pub bearer: bool,
    /// The IAM action every call needs (`bedrock-agentcore:InvokeAgentRuntime`, …), named
    /// when it is denied: AgentCore's only.
    pub action: Option<&'static str>,
    /// The AWS profile in use (`--profile`, else `AWS_PROFILE`), named in the advice for
    /// expired credentials.
    pub profile: Option<Arc<str>>,
    /// `--timeout` and `--idle-timeout`.
    pub limits: Limits,
}

/// What went wrong, for `error.data.kind`: each a user acts on differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 403 `ExpiredTokenException`: the AWS credentials expired (refresh them).
    ExpiredCredentials,
    /// 403 "Authorization method mismatch": SigV4 sent to an OAuth runtime, or a token to a
    /// SigV4 one (use the other option).
    AuthMethodMismatch,
    /// 403 `AccessDeniedException`: the identity lacks the permission.
    AccessDenied,
    /// 401: the bearer token was refused (or one is wanted).
    Unauthorized,
    /// 404 `ResourceNotFoundException`: no such runtime, qualifier or endpoint.
    NotFound,
    /// 429 `ThrottlingException`, 402 `ServiceQuotaExceededException`, or HTTP 200 with -32003:
    /// still refused after the stack's waits.
    Throttled,
    /// 409 `RetryableConflictException`, or HTTP 200 with -32005 "Session operation in
    /// progress": the runtime session was still starting (or stopping) when the stack's waits
    /// ended. Nothing ran.
    SessionBusy,
    /// -32010 or 424 `RuntimeClientError` "Runtime initialization time exceeded": the runtime's
    /// container did not become ready in time, after the stack's one re-send. Nothing ran.
    NotReady,
    /// Any other refusal (a 4xx): nothing ran.
    Refused,
    /// A 5xx: the server failed.
    ServerError,
}

impl Kind {
    /// Its `error.data.kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ExpiredCredentials => "expired_credentials",
            Kind::AuthMethodMismatch => "auth_method_mismatch",
            Kind::AccessDenied => "access_denied",
            Kind::Unauthorized => "unauthorized",
            Kind::NotFound => "not_found",
            Kind::Throttled => "throttled",
            Kind::SessionBusy => "session_busy",
            Kind::NotReady => "not_ready",
            Kind::Refused => "refused",
            Kind::ServerError => "server_error",
        }
    }

    /// The kind of a non-2xx answer: the library's classification of the HTTP form
    /// ([`classify_head`](agentcore_tower::contract::classify_head)), with the two 403s it
    /// leaves to the signer told apart: expired credentials (the error type) and the
    /// authorization method mismatch (AgentCore's message).
    pub fn of(status: StatusCode, headers: &http::HeaderMap, detail: Option<&str>) -> Kind {
        use agentcore_tower::contract::PlatformError as E;
        if matches!(
            agentcore_tower::record::aws_error_type(headers),
            Some("ExpiredTokenException" | "ExpiredToken")
        ) {
            return Kind::ExpiredCredentials;
        }
        match agentcore_tower::contract::classify_head(status, headers).map(|c| c.error()) {
            Some(E::AccessDenied) if detail.is_some_and(|d| d.contains(AUTH_METHOD_MISMATCH)) => {
                Kind::AuthMethodMismatch
            }
            // The 424 whose message says the container never became ready: nothing ran.
            Some(E::RuntimeClientError)
                if detail
                    .is_some_and(agentcore_tower::contract::is_initialization_time_exceeded) =>
            {
                Kind::NotReady
            }
            Some(error) => Kind::of_platform(error),
            None if status.is_server_error() => Kind::ServerError,
            None => Kind::Refused,
        }
    }

    /// The kind of an error of the runtime's table, in either form.
    fn of_platform(error: agentcore_tower::contract::PlatformError) -> Kind {
        use agentcore_tower::contract::PlatformError as E;
        match error {
            E::AccessDenied => Kind::AccessDenied,
            E::Unauthorized => Kind::Unauthorized,
            E::ResourceNotFound => Kind::NotFound,
            E::Throttling | E::ServiceQuotaExceeded => Kind::Throttled,
            E::RetryableConflict => Kind::SessionBusy,
            E::InitializationTimedOut => Kind::NotReady,
            // The runtime's code failed: the tool may have run, nothing was refused.
            E::Internal | E::RuntimeClientError => Kind::ServerError,
            _ => Kind::Refused,
        }
    }

    /// What the user can do about it, when the proxy knows (of `upstream`).
    pub fn advice(self, upstream: &Upstream) -> Option<String> {
        Some(match self {
            Kind::ExpiredCredentials => {
                let profile = upstream.profile.as_deref().unwrap_or("NAME");
                format!(
                    "the AWS credentials have expired: refresh them (for an SSO profile: aws sso \
                     login --profile {profile})"
                )
            }
            Kind::AuthMethodMismatch if upstream.bearer => {
                "the runtime takes SigV4 (IAM), not a bearer \
                                                     token: drop --bearer-token-env / \
                                                     --bearer-token-command"
                    .to_owned()
            }
            Kind::AuthMethodMismatch => "the runtime takes OAuth bearer tokens, not SigV4: give \
                                         --bearer-token-env VAR or --bearer-token-command CMD"
                .to_owned(),
            Kind::AccessDenied => {
                let action = upstream.action?;
                format!("the AWS identity in use is not allowed {action} on this resource")
            }
            Kind::NotFound => {
                upstream.action?;
                "check the ARN or URL, --qualifier and --region".to_owned()
            }
            Kind::Throttled => "still throttled after the proxy's waits: try again later, or ask \
                                for a higher quota"
                .to_owned(),
            Kind::SessionBusy => "the runtime session was still starting (or stopping) when the \
                                  proxy's waits ended: nothing ran; send it again in a moment"
                .to_owned(),
            Kind::NotReady => "the runtime's container did not become ready in time, twice: \
                               nothing ran; see the runtime's logs (CloudWatch) for why its \
                               start-up failed or took longer than its initialization limit"
                .to_owned(),
            _ => return None,
        })
    }
}

/// The start of AgentCore's 403 message for a request in the other door's authorization
/// (agentcore-wire.md; the emulator answers it word for word).
pub const AUTH_METHOD_MISMATCH: &str = "Authorization method mismatch";

/// The record's lines, for `error.data.attempts`.
pub fn attempts(record: &AttemptRecord) -> Value {
    json!(record.to_string().lines().collect::<Vec<_>>())
}

/// One call whose answer is being read: when its `--timeout` runs out, and its record.
#[derive(Clone, Debug)]
pub struct Call {
    /// The server and the limits, for what is said of the call.
    upstream: Upstream,
    deadline: Option<Instant>,
    record: Option<AttemptRecord>,
    /// A stream the client holds open for as long as it wants (`subscriptions/listen`): no
    /// limit cuts it.
    held: bool,
}

/// How long a held stream's next frame may take: for ever, in practice (some 136 years; a
/// finite wait that tokio's timer can hold).
const HELD: Duration = Duration::from_secs(u32::MAX as u64);

/// Whether a request is one whose answer the client holds open for as long as it wants:
/// MCP 2026-07-28's `subscriptions/listen`, whose stream carries the server's notifications
/// until the client cancels it (neither `--timeout` nor `--idle-timeout` cut it).
pub fn is_held(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("subscriptions/listen")
}

impl Call {
    /// The call an answer belongs to, as the stack marked it.
    pub fn of(extensions: &http::Extensions, upstream: &Upstream) -> Call {
        Call {
            upstream: upstream.clone(),
            deadline: extensions.get::<CallDeadline>().map(|d| d.0),
            record: AttemptRecord::of_extensions(extensions).cloned(),
            held: false,
        }
    }

    /// The server's own stream: no deadline, only the idle limit (it is opened again when it
    /// stalls).
    pub fn stream(upstream: &Upstream) -> Call {
        Call {
            upstream: upstream.clone(),
            deadline: None,
            record: None,
            held: false,
        }
    }

    /// The call an answer belongs to, held open by the client ([`is_held`]) when `held`.
    pub fn of_held(extensions: &http::Extensions, held: bool, upstream: &Upstream) -> Call {
        let call = Call::of(extensions, upstream);
        if held {
            Call {
                deadline: None,
                held: true,
                ..call
            }
        } else {
            call
        }
    }

    /// The server and the limits the call is said with.
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// How long the next frame may take, and whether the deadline (not the idle limit) is what
    /// ends that wait.
    pub fn next_wait(&self) -> (Duration, bool) {
        if self.held {
            return (HELD, false);
        }
        let idle = self.upstream.limits.idle;
        match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < idle {
                    (left, true)
                } else {
                    (idle, false)
                }
            }
            None => (idle, false),
        }
    }

    /// `error.data` for this call: `extra`'s fields and the record's attempts.
    fn data(&self, extra: Value) -> Value {
        let mut data = extra;
        self.add_attempts(&mut data);
        data
    }

    /// Puts the record's attempts in `data` (an object), when the call has a record.
    pub fn add_attempts(&self, data: &mut Value) {
        if let (Some(record), Value::Object(data)) = (&self.record, data) {
            data.insert("attempts".into(), attempts(record));
        }
    }

    /// A refusal of AgentCore's in the JSON-RPC form that the stack delivered after its waits
    /// — ONE error answer, -32003 "Rate limit exceeded - Too many requests" or -32005 with the
    /// contract's message, in an answer of HTTP `status` — with `error.data` saying what it is,
    /// as the HTTP form's says it: `kind`, `advice`, `errorType` (the exception the API
    /// reference names), `httpStatus` and the call's `attempts`. Its code and message stay as
    /// they came (a client may know them); fields the error's `data` already has are kept.
    /// `None` when `body` is no such answer.
    pub fn refusal_in_json_rpc(&self, status: StatusCode, body: &[u8]) -> Option<Vec<u8>> {
        use agentcore_tower::contract::{Form, PlatformError as E, classify_json};
        let class = classify_json(body)?;
        if !matches!(class.form(), Form::JsonRpc(-32003 | -32005 | -32010))
            || !matches!(
                class.error(),
                E::Throttling | E::RetryableConflict | E::Conflict | E::InitializationTimedOut
            )
        {
            return None;
        }
        let mut message: Value = serde_json::from_slice(body).ok()?;
        let error = message.get_mut("error")?.as_object_mut()?;
        let kind = Kind::of_platform(class.error());
        let mut said = json!({
            "httpStatus": status.as_u16(),
            "kind": kind.as_str(),
            "errorType": class.error().exception(),
        });
        if let Some(advice) = kind.advice(&self.upstream) {
            said["advice"] = json!(advice);
        }
        self.add_attempts(&mut said);
        let data = error.entry("data").or_insert_with(|| json!({}));
        let Value::Object(data) = data else {
            // A server's own `data` that is not an object: left as it came.
            return None;
        };
        if let Value::Object(said) = said {
            for (name, value) in said {
                data.entry(name).or_insert(value);
            }
        }
        Some(message.to_string().into_bytes())
    }

    /// The answer was cut by `--timeout`, or by `--idle-timeout` (`by_deadline` false).
    pub fn cut(&self, by_deadline: bool) -> Broke {
        let limits = self.upstream.limits;
        let upstream = self.upstream.name;
        let (message, limit, value) = if by_deadline {
            (
                format!(
                    "{upstream} did not finish its answer within --timeout {} (the deadline of \
                     the whole call); the request may have run",
                    shown_duration(limits.total)
                ),
                "--timeout",
                limits.total,
            )
        } else {
            (
                format!(
                    "{upstream} sent nothing of its answer for --idle-timeout {}; the request may \
                     have run",
                    shown_duration(limits.idle)
                ),
                "--idle-timeout",
                limits.idle,
            )
        };
        Broke {
            message,
            data: self.data(limit_data(limit, value)),
        }
    }

    /// The answer could not be read to its end, for `message`.
    pub fn broken(&self, message: String) -> Broke {
        Broke {
            message,
            data: self.data(json!({})),
        }
    }

    /// The answer broke off.
    pub fn broke(&self, error: &(dyn std::error::Error + 'static)) -> Broke {
        Broke {
            message: self.upstream.broke(error),
            data: self.data(json!({"failure": "connection dropped"})),
        }
    }
}

/// `error.data` for a call a limit cut.
fn limit_data(limit: &str, value: Duration) -> Value {
    json!({
        "failure": "timed out",
        "limit": limit,
        "limitMs": u64::try_from(value.as_millis()).unwrap_or(u64::MAX),
    })
}

/// An answer that could not be read to its end: the message for the client, and `error.data`.
#[derive(Debug)]
pub struct Broke {
    pub message: String,
    pub data: Value,
}

/// The requests (messages with a method and an id) of one client message or batch that have no
/// answer yet.
#[derive(Debug, Default)]
pub struct OpenRequests {
    ids: Vec<Value>,
    /// The requests the client cancelled, and the MCP session these are in: a cancelled request
    /// is not answered (MCP), not even with an error.
    cancelled: Option<(CancelledRequests, String)>,
}

/// The requests clients of the 2025 revisions cancelled (`notifications/cancelled`), by MCP
/// session and id, until their answer would have been written.
#[derive(Clone, Debug, Default)]
pub struct CancelledRequests(std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl CancelledRequests {
    fn key(session: &str, id: &Value) -> String {
        format!("{session}\u{0}{id}")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client of `session` cancelled request `id`.
    pub fn cancel(&self, session: &str, id: &Value) {
        self.lock().insert(Self::key(session, id));
    }

    /// Whether request `id` of `session` was cancelled (forgotten then).
    fn take(&self, session: &str, id: &Value) -> bool {
        self.lock().remove(&Self::key(session, id))
    }
}

impl OpenRequests {
    pub fn of(message: &Value) -> Self {
        let mut ids = Vec::new();
        let mut add = |m: &Value| {
            if let Value::Object(m) = m
                && m.get("method").is_some_and(Value::is_string)
                && let Some(id) = m.get("id")
            {
                ids.push(id.clone());
            }
        };
        match message {
            Value::Array(batch) => batch.iter().for_each(&mut add),
            one => add(one),
        }
        Self {
            ids,
            cancelled: None,
        }
    }

    /// The same, its requests of MCP `session` left unanswered once `cancelled` names them.
    pub fn in_session(mut self, session: &str, cancelled: &CancelledRequests) -> Self {
        self.cancelled = Some((cancelled.clone(), session.to_owned()));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Marks the requests a server message (or batch) answers.
    pub fn answered_by(&mut self, message: &Value) {
        let mut answered = |m: &Value| {
            if let Value::Object(m) = m
                && !m.contains_key("method")
                && (m.contains_key("result") || m.contains_key("error"))
                && let Some(id) = m.get("id")
            {
                self.ids.retain(|open| open != id);
                if let Some((cancelled, session)) = &self.cancelled {
                    cancelled.take(session, id);
                }
            }
        };
        match message {
            Value::Array(batch) => batch.iter().for_each(&mut answered),
            one => answered(one),
        }
    }

    /// A server's error that names none of the open requests — `"id": null`, or an id of its
    /// own, as middleware that cannot echo the id answers a 4xx — made the answer of the one
    /// request still open, as the SDKs' HTTP clients read it (the Python SDK gives it "this
    /// request's id so correlation works"); over stdio, the proxy is that HTTP client. `None`
    /// when more than one request is open, or the message is no such error.
    pub fn correlated(&self, message: &Value) -> Option<Value> {
        let [id] = self.ids.as_slice() else {
            return None;
        };
        let Value::Object(fields) = message else {
            return None;
        };
        let orphan = !fields.contains_key("method")
            && !fields.contains_key("result")
            && fields.get("error").is_some_and(Value::is_object)
            && fields.get("id") != Some(id);
        orphan.then(|| {
            let mut message = message.clone();
            message["id"] = id.clone();
            message
        })
    }

    /// An error answer for every open request, which are then answered.
    pub fn fail_all(&mut self, message: &str, data: Option<&Value>) -> Vec<Value> {
        let cancelled = self.cancelled.clone();
        self.ids
            .drain(..)
            .filter(|id| {
                !cancelled
                    .as_ref()
                    .is_some_and(|(cancelled, session)| cancelled.take(session, id))
            })
            .map(|id| error_response(&id, PROXY_ERROR, message, data))
            .collect()
    }
}

/// A JSON-RPC error response.
pub fn error_response(id: &Value, code: i64, message: &str, data: Option<&Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// JSON text on one line: JSON holds no raw line break inside a string, so the ones outside
/// are whitespace.
pub fn one_line(data: &[u8]) -> Vec<u8> {
    data.trim_ascii()
        .iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect()
}

/// The next frame of an answer, which must come within `--idle-timeout` (a stream may run
/// long, but not stall) and before the call's `--timeout` runs out.
pub async fn next_frame(
    body: &mut ResBody,
    call: &Call,
) -> Result<Option<Frame<bytes::Bytes>>, Broke> {
    let (wait, by_deadline) = call.next_wait();
    match tokio::time::timeout(wait, body.frame()).await {
        Ok(None) => Ok(None),
        Ok(Some(Ok(frame))) => Ok(Some(frame)),
        Ok(Some(Err(e))) => Err(call.broke(&*e)),
        Err(_) => Err(call.cut(by_deadline)),
    }
}

/// An answer read whole, for what is said of it (a refusal, a probe's answer): its status,
/// head and body — the body empty when it broke off.
pub async fn read_small_answer(
    response: http::Response<ResBody>,
) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    (parts.status, parts.headers, body)
}

/// What ending a session at exit is called in the log.
pub struct Ending {
    /// When it worked ("runtime session stopped").
    pub done: &'static str,
    /// What was being done, before why it did not work ("stopping the runtime session").
    pub doing: &'static str,
    /// Whether a 405 or 404 means only that the server lets the session expire by itself (an
    /// MCP DELETE), logged at debug.
    pub expires_anyway: bool,
}

/// What the proxy's own answers and log lines say of the server.
impl Upstream {
    /// Parses one server message; `None` (with a warning) when it is not JSON.
    pub fn parse_server_message(&self, data: &[u8]) -> Option<Value> {
        let data = data.trim_ascii();
        if data.is_empty() {
            return None;
        }
        match serde_json::from_slice(data) {
            Ok(message) => Some(message),
            Err(e) => {
                tracing::warn!(
                    "{} sent a message that is not JSON ({e}): {}",
                    self.name,
                    preview(data)
                );
                None
            }
        }
    }

    /// The message for an answer that broke off.
    pub fn broke(&self, error: &(dyn std::error::Error + 'static)) -> String {
        format!(
            "the connection broke while {} was answering: {}",
            self.name,
            chain(error)
        )
    }

    /// The message for an answer that did not answer.
    pub fn unanswered(&self, status: StatusCode) -> String {
        format!(
            "{}'s answer (HTTP {}) carried no JSON-RPC response to this request",
            self.name,
            status.as_u16()
        )
    }

    /// The message and `error.data` for a call the stack gave up on.
    pub fn describe_failure(&self, error: &(dyn std::error::Error + 'static)) -> (String, Value) {
        if let Some(timed_out) = error.downcast_ref::<TimedOut>() {
            let mut data = limit_data("--timeout", timed_out.total);
            data["attempts"] = attempts(&timed_out.record);
            return (
                format!(
                    "no answer from {} within --timeout {} (the deadline of the whole call); the \
                     request may have run",
                    self.name,
                    shown_duration(timed_out.total)
                ),
                data,
            );
        }
        let mut data = json!({});
        if let Some(ours) = error.downcast_ref::<agentcore_tower::Error>() {
            data["failure"] = json!(ours.failure_kind().to_string());
            if let Some(record) = ours.record() {
                data["attempts"] = attempts(record);
            }
        }
        let what = match self.name {
            "AgentCore" => "AgentCore request",
            _ => "the request to the MCP server",
        };
        let text = chain(error);
        let mut message = format!("{what} failed: {text}");
        // Credentials that could not be resolved because the SSO session expired: aws-config's
        // words ("the SSO token has expired and cannot be refreshed"). Nothing was sent.
        let lower = text.to_ascii_lowercase();
        if lower.contains("sso") && lower.contains("expired") {
            let kind = Kind::ExpiredCredentials;
            data["kind"] = json!(kind.as_str());
            if let Some(advice) = kind.advice(self) {
                message.push_str(&format!(" — {advice}"));
                data["advice"] = json!(advice);
            }
        }
        (message, data)
    }

    /// The message and `error.data` for a non-2xx answer without a JSON-RPC body.
    pub fn describe_status(
        &self,
        status: StatusCode,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> (String, Value) {
        let error_type = agentcore_tower::record::aws_error_type(headers);
        let detail = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
            v.get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let mut message = format!("{} answered HTTP {status}", self.name);
        if let Some(error_type) = error_type {
            message.push_str(&format!(" ({error_type})"));
        }
        if let Some(detail) = &detail {
            message.push_str(&format!(": {detail}"));
        }
        let kind = Kind::of(status, headers, detail.as_deref());
        let mut data = json!({"httpStatus": status.as_u16(), "kind": kind.as_str()});
        if let Some(advice) = kind.advice(self) {
            message.push_str(&format!(" — {advice}"));
            data["advice"] = json!(advice);
        }
        if let Some(error_type) = error_type {
            data["errorType"] = json!(error_type);
        }
        // A refused bearer token (or a server that wants one): where the OAuth flow that gets one
        // starts.
        if status == StatusCode::UNAUTHORIZED {
            if self.bearer {
                message.push_str(if detail.is_some() { " (" } else { ": " });
                message.push_str("the bearer token was refused");
                if detail.is_some() {
                    message.push(')');
                }
            }
            if let Some(url) = agentcore_tower::auth::BearerChallenge::of(headers)
                .as_ref()
                .and_then(|c| c.resource_metadata())
            {
                data["resourceMetadata"] = json!(url);
            }
        }
        if detail.is_none() && !body.is_empty() {
            data["body"] = json!(preview(body));
        }
        (message, data)
    }

    /// Logs how ending a session at exit went: done, refused (with the answer's status and
    /// message), or failed.
    pub async fn log_ending(
        &self,
        result: Result<http::Response<ResBody>, agentcore_tower::BoxError>,
        ending: &Ending,
    ) {
        let doing = ending.doing;
        match result {
            Ok(response) if response.status().is_success() => tracing::info!("{}", ending.done),
            Ok(response)
                if ending.expires_anyway
                    && matches!(
                        response.status(),
                        StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
                    ) =>
            {
                tracing::debug!(
                    status = response.status().as_u16(),
                    "the server did not end the MCP session (it expires by itself)"
                );
            }
            Ok(response) => {
                let (status, headers, body) = read_small_answer(response).await;
                tracing::warn!(
                    "{doing}: {}",
                    self.describe_status(status, &headers, &body).0
                );
            }
            Err(error) => tracing::warn!("{doing}: {}", self.describe_failure(error.as_ref()).0),
        }
    }
}

/// Whether a body is a JSON-RPC message or batch.
pub fn is_jsonrpc(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => m.contains_key("jsonrpc"),
        Ok(Value::Array(batch)) => {
            !batch.is_empty() && batch.iter().all(|m| m.get("jsonrpc").is_some())
        }
        _ => false,
    }
}

/// An error and its causes, on one line.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        next = cause.source();
    }
    text
}

/// The start of a body, for a message.
pub fn preview(body: &[u8]) -> String {
    const LIMIT: usize = 1024;
    let text = String::from_utf8_lossy(&body[..body.len().min(LIMIT)]);
    if body.len() > LIMIT {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_naming_no_open_request_answers_the_one_open() {
        let refused = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Unsupported protocol version"}});
        let one = OpenRequests::of(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
        assert_eq!(
            one.correlated(&refused),
            Some(
                json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "Bad Request: Unsupported protocol version"}})
            )
        );
        let own = json!({"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "x"}});
        assert_eq!(one.correlated(&own).unwrap()["id"], 7);
        // Its own answer, a result, a request of the server's: left as they are.
        assert_eq!(
            one.correlated(
                &json!({"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}})
            ),
            None
        );
        assert_eq!(
            one.correlated(&json!({"jsonrpc": "2.0", "id": null, "result": {}})),
            None
        );
        assert_eq!(
            one.correlated(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "error": {}})),
            None
        );
        // Two open (a batch): whose it is cannot be told.
        let two = OpenRequests::of(
            &json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]),
        );
        assert_eq!(two.correlated(&refused), None);
    }

    #[test]
    fn requests_stay_open_until_answered() {
        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 9, "result": {}}
        ]);
        let mut open = OpenRequests::of(&batch);
        assert_eq!(open.ids, [json!(1), json!("b")]);
        // A server request with the same id is not an answer.
        open.answered_by(&json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
        open.answered_by(&json!([{"jsonrpc": "2.0", "id": 1, "result": {}}]));
        assert_eq!(open.ids, [json!("b")]);
        let errors = open.fail_all("gone", Some(&json!({"x": 1})));
        assert_eq!(
            errors,
            [
                json!({"jsonrpc": "2.0", "id": "b", "error": {"code": -32000, "message": "gone", "data": {"x": 1}}})
            ]
        );
        assert!(open.is_empty());
    }

    #[test]
    fn a_message_goes_on_one_line() {
        assert_eq!(one_line(b" {\"a\":\r\n 1}\n"), b"{\"a\":   1}");
    }
}
