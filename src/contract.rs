//! AgentCore Runtime's error table, in both of its forms: what each platform error means for a
//! re-send, and how to tell one from an answer — the one classifier every layer uses, public for
//! custom MCP clients.
//!
//! The runtime maps its exceptions onto JSON-RPC errors inside an **HTTP 200** on an MCP runtime
//! — "Most errors are carried in the JSON-RPC `error` object with an HTTP 200 status code"
//! (developer guide, "MCP protocol contract", "Error handling") — and onto HTTP statuses with
//! `x-amzn-errortype` in the `InvokeAgentRuntime` API reference. The table as read on
//! 2026-12-01 (the page's codes, exceptions, statuses and messages; the last column is this
//! crate's reading — the page gives retry guidance only for `RetryableConflictException`,
//! "retry with short exponential backoff"):
//!
//! | JSON-RPC | message | HTTP form (API reference) | [`PlatformError`] | for a re-send ([`Meaning`]) |
//! |---|---|---|---|---|
//! | -32001 (HTTP 401) | "Authentication error - Invalid credentials" | 401 `UnauthorizedException` | `Unauthorized` | final |
//! | -32002 (HTTP 403) | "Authorization error - Insufficient permissions" | 403 `AccessDeniedException` | `AccessDenied` | final |
//! | -32003 | "Rate limit exceeded - Too many requests" | 429 `ThrottlingException` | `Throttling` | refused before execution: wait, re-send |
//! | -32003 (the same reply: the two cannot be told apart) | the same | 402 `ServiceQuotaExceededException` | `ServiceQuotaExceeded` | JSON-RPC form: as throttling; HTTP form: final |
//! | -32004 | "Resource not found - Requested resource does not exist" | 404 `ResourceNotFoundException` | `ResourceNotFound` | final |
//! | -32005 | "Resource conflict - Resource already exists" | 409 `ConflictException` | `Conflict` | final |
//! | -32005 | "Session operation in progress, please retry" | 409 `RetryableConflictException` | `RetryableConflict` | refused before execution: short backoff, re-send |
//! | -32006 | "Validation error - Invalid request data" | 400 `ValidationException` | `Validation` | final |
//! | -32010 | "Tool execution error - Please check your CloudWatch logs for more information" | 424 `RuntimeClientError` | `RuntimeClientError` | may have run (the tool's own code failed): re-send only what is declared replayable |
//! | -32011 (HTTP 406) | "Accept Header Error - MCP protocol requires Accept header: application/json, text/event-stream" | — | `RequestUnacceptable` | final; the signer sends that `Accept` when the app sends none |
//! | -32603 | "Internal error - Server error" (any other exception) | 500 `InternalServerException`, any 5xx | `Internal` | JSON-RPC form: final (the outcome is unknown); HTTP form: may have run |
//!
//! **How exactly each form is matched.** The JSON-RPC form is ONE JSON-RPC 2.0 response object
//! (`"jsonrpc": "2.0"`, an `id`, an `error`, no `result`) whose integer `error.code` is the
//! table's. Where the table gives the retry-relevant message — -32003, and both -32005s —
//! `error.message` must be that text exactly: an MCP server behind the runtime may use the
//! same codes (the JSON-RPC range -32000 to -32099 is the server's own), and only the
//! platform's exact reply is taken for a refusal. A batch, an SSE stream, a non-JSON body, or
//! another message is no platform error. The HTTP form is matched by `x-amzn-errortype` (the
//! part before any `:`), never by the status alone — except where the table gives a status
//! without a type: 406, and a 429, 401, 403 or 5xx without `x-amzn-errortype`.
//!
//! ```
//! use agentcore_tower::contract::{Meaning, PlatformError, classify_json_rpc};
//! use serde_json::json;
//!
//! let reply = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32003, "message": "Rate limit exceeded - Too many requests"}});
//! let class = classify_json_rpc(&reply).unwrap();
//! assert_eq!(class.error(), PlatformError::Throttling);
//! assert_eq!(class.meaning(), Meaning::RefusedBeforeExecution);
//! // The same code from the MCP server itself, with its own message: not the platform's.
//! let own = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32003, "message": "quota"}});
//! assert_eq!(classify_json_rpc(&own), None);
//! ```

use std::fmt;

use http::{HeaderMap, HeaderName, StatusCode};
use serde_json::Value;

use crate::jsonrpc::first_significant_byte;

/// The message of the throttling reply (-32003) — also ServiceQuotaExceeded's: the two share it.
pub const THROTTLED_MESSAGE: &str = "Rate limit exceeded - Too many requests";

/// The message of the session-busy reply (-32005, `RetryableConflictException`).
pub const SESSION_BUSY_MESSAGE: &str = "Session operation in progress, please retry";

/// The message of `ConflictException`'s reply: the same code as session busy, not retryable.
pub const CONFLICT_MESSAGE: &str = "Resource conflict - Resource already exists";

/// What the contract requires of a request's `Accept` header.
pub const REQUIRED_ACCEPT: &str = "application/json, text/event-stream";

/// `Mcp-Session-Id`, as a header name (a constant: looking a header up by a `&str` parses the
/// name every time).
pub(crate) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// `MCP-Protocol-Version`, as a header name.
pub(crate) const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// An error of the runtime's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PlatformError {
    /// -32001 / 401: not authenticated (an OAuth runtime without a valid token).
    Unauthorized,
    /// -32002 / 403: not allowed.
    AccessDenied,
    /// -32003 / 429: throttled. In the JSON-RPC form, also ServiceQuotaExceeded.
    Throttling,
    /// 402 `ServiceQuotaExceededException` (its JSON-RPC form is -32003, as throttling's).
    ServiceQuotaExceeded,
    /// -32004 / 404: no such runtime, endpoint or session.
    ResourceNotFound,
    /// -32005 "Resource conflict - Resource already exists" / 409 `ConflictException`.
    Conflict,
    /// -32005 "Session operation in progress, please retry" / 409 `RetryableConflictException`:
    /// the session is being provisioned or torn down.
    RetryableConflict,
    /// -32006 / 400: the request is invalid.
    Validation,
    /// -32010 / 424: the runtime's code failed — the tool may have run.
    RuntimeClientError,
    /// -32011 / 406: the request's `Accept` header is not [`REQUIRED_ACCEPT`].
    RequestUnacceptable,
    /// -32603 / 500 (any 5xx): any other failure.
    Internal,
}

impl PlatformError {
    /// The exception's name, as the API reference gives it.
    pub const fn exception(self) -> &'static str {
        match self {
            PlatformError::Unauthorized => "UnauthorizedException",
            PlatformError::AccessDenied => "AccessDeniedException",
            PlatformError::Throttling => "ThrottlingException",
            PlatformError::ServiceQuotaExceeded => "ServiceQuotaExceededException",
            PlatformError::ResourceNotFound => "ResourceNotFoundException",
            PlatformError::Conflict => "ConflictException",
            PlatformError::RetryableConflict => "RetryableConflictException",
            PlatformError::Validation => "ValidationException",
            PlatformError::RuntimeClientError => "RuntimeClientError",
            PlatformError::RequestUnacceptable => "McpRequestUnacceptableException",
            PlatformError::Internal => "InternalServerException",
        }
    }

    /// Its JSON-RPC code in the MCP contract.
    pub const fn json_rpc_code(self) -> i64 {
        match self {
            PlatformError::Unauthorized => -32001,
            PlatformError::AccessDenied => -32002,
            PlatformError::Throttling | PlatformError::ServiceQuotaExceeded => -32003,
            PlatformError::ResourceNotFound => -32004,
            PlatformError::Conflict | PlatformError::RetryableConflict => -32005,
            PlatformError::Validation => -32006,
            PlatformError::RuntimeClientError => -32010,
            PlatformError::RequestUnacceptable => -32011,
            PlatformError::Internal => -32603,
        }
    }
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.exception())
    }
}

/// The form an answer carried a platform error in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Form {
    /// An HTTP 200 whose JSON-RPC error has this code.
    JsonRpc(i64),
    /// An HTTP status (with `x-amzn-errortype`, where it names one).
    Http(StatusCode),
}

/// What an answer says a re-send would meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Meaning {
    /// The platform refused before running anything: wait and send again.
    RefusedBeforeExecution,
    /// The request may have run: send again only what is declared replayable.
    MayHaveRun,
    /// Sending again would meet the same answer: deliver it.
    Final,
}

/// A platform error as one answer carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Classified {
    error: PlatformError,
    form: Form,
}

impl Classified {
    /// Which error of the table.
    pub fn error(&self) -> PlatformError {
        self.error
    }

    /// In which form.
    pub fn form(&self) -> Form {
        self.form
    }

    /// What it means for a re-send, in this form.
    pub fn meaning(&self) -> Meaning {
        match (self.error, self.form) {
            (PlatformError::Throttling | PlatformError::RetryableConflict, _) => {
                Meaning::RefusedBeforeExecution
            }
            // The JSON-RPC form of ServiceQuotaExceeded is throttling's reply.
            (PlatformError::ServiceQuotaExceeded, Form::JsonRpc(_)) => {
                Meaning::RefusedBeforeExecution
            }
            (PlatformError::RuntimeClientError, _) | (PlatformError::Internal, Form::Http(_)) => {
                Meaning::MayHaveRun
            }
            _ => Meaning::Final,
        }
    }
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.form {
            Form::JsonRpc(code) => write!(f, "JSON-RPC {code} {}", self.error)?,
            Form::Http(status) => write!(f, "HTTP {} {}", status.as_u16(), self.error)?,
        }
        match self.error {
            PlatformError::Throttling if matches!(self.form, Form::JsonRpc(_)) => {
                f.write_str(" (or ServiceQuotaExceededException: they share the reply)")
            }
            PlatformError::RequestUnacceptable => {
                write!(f, " (the Accept header must be `{REQUIRED_ACCEPT}`)")
            }
            _ => Ok(()),
        }
    }
}

/// AWS's error type header: `x-amzn-errortype`.
pub(crate) const AWS_ERROR_TYPE: HeaderName = HeaderName::from_static("x-amzn-errortype");

/// What a response's `x-amzn-errortype` says, read as
/// [`aws_error_type`](crate::record::aws_error_type) describes.
pub(crate) enum ErrorTypeHeader<'a> {
    Absent,
    Named(&'a str),
    Unrecognised,
}

impl<'a> ErrorTypeHeader<'a> {
    pub(crate) fn read(headers: &'a HeaderMap) -> Self {
        let Some(value) = headers.get(AWS_ERROR_TYPE) else {
            return ErrorTypeHeader::Absent;
        };
        let name = value
            .to_str()
            .ok()
            .and_then(|v| v.split(':').next())
            .and_then(|v| v.rsplit('#').next())
            .map(str::trim)
            .filter(|name| {
                name.len() <= 128
                    && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
        match name {
            Some(name) => ErrorTypeHeader::Named(name),
            None => ErrorTypeHeader::Unrecognised,
        }
    }

    /// The name, when it is one.
    pub(crate) fn name(&self) -> Option<&'a str> {
        match *self {
            ErrorTypeHeader::Named(name) => Some(name),
            ErrorTypeHeader::Absent | ErrorTypeHeader::Unrecognised => None,
        }
    }
}

/// The platform error a response head carries in the HTTP form, if any (see the module docs).
pub fn classify_head(status: StatusCode, headers: &HeaderMap) -> Option<Classified> {
    let named = match ErrorTypeHeader::read(headers).name() {
        Some("UnauthorizedException") => Some(PlatformError::Unauthorized),
        Some("AccessDeniedException") => Some(PlatformError::AccessDenied),
        Some("ThrottlingException") => Some(PlatformError::Throttling),
        Some("ServiceQuotaExceededException") => Some(PlatformError::ServiceQuotaExceeded),
        Some("ResourceNotFoundException") => Some(PlatformError::ResourceNotFound),
        Some("ConflictException") => Some(PlatformError::Conflict),
        Some("RetryableConflictException") => Some(PlatformError::RetryableConflict),
        Some("ValidationException") => Some(PlatformError::Validation),
        Some("RuntimeClientError") => Some(PlatformError::RuntimeClientError),
        Some("InternalServerException") => Some(PlatformError::Internal),
        _ => None,
    };
    let typed = headers.contains_key(AWS_ERROR_TYPE);
    let error = match (named, status.as_u16()) {
        // A type that belongs to another status is not this table's.
        (Some(error), code) if expected_status(error).is_none_or(|s| s == code) => Some(error),
        (Some(_), _) => None,
        (None, 406) => Some(PlatformError::RequestUnacceptable),
        (None, 429) if !typed => Some(PlatformError::Throttling),
        (None, 401) if !typed => Some(PlatformError::Unauthorized),
        (None, 403) if !typed => Some(PlatformError::AccessDenied),
        (None, 500..=599) => Some(PlatformError::Internal),
        _ => None,
    }?;
    Some(Classified {
        error,
        form: Form::Http(status),
    })
}

/// The status the API reference gives an exception (`None`: any 5xx, for `Internal`).
fn expected_status(error: PlatformError) -> Option<u16> {
    Some(match error {
        PlatformError::Unauthorized => 401,
        PlatformError::AccessDenied => 403,
        PlatformError::Throttling => 429,
        PlatformError::ServiceQuotaExceeded => 402,
        PlatformError::ResourceNotFound => 404,
        PlatformError::Conflict | PlatformError::RetryableConflict => 409,
        PlatformError::Validation => 400,
        PlatformError::RuntimeClientError => 424,
        PlatformError::RequestUnacceptable => 406,
        PlatformError::Internal => return None,
    })
}

/// The platform error a parsed JSON value carries in the JSON-RPC form, if any (see the module
/// docs: ONE response object; for -32003 and -32005 the exact message).
pub fn classify_json_rpc(value: &Value) -> Option<Classified> {
    let reply = value.as_object()?;
    let is_response = reply.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && matches!(
            reply.get("id"),
            Some(Value::String(_) | Value::Number(_) | Value::Null)
        )
        && !reply.contains_key("result");
    if !is_response {
        return None;
    }
    let error = reply.get("error")?.as_object()?;
    let code = error.get("code")?.as_i64()?;
    let message = error.get("message").and_then(Value::as_str);
    let error = match (code, message) {
        (-32001, _) => PlatformError::Unauthorized,
        (-32002, _) => PlatformError::AccessDenied,
        (-32003, Some(THROTTLED_MESSAGE)) => PlatformError::Throttling,
        (-32004, _) => PlatformError::ResourceNotFound,
        (-32005, Some(SESSION_BUSY_MESSAGE)) => PlatformError::RetryableConflict,
        (-32005, Some(CONFLICT_MESSAGE)) => PlatformError::Conflict,
        (-32006, _) => PlatformError::Validation,
        (-32010, _) => PlatformError::RuntimeClientError,
        (-32011, _) => PlatformError::RequestUnacceptable,
        (-32603, _) => PlatformError::Internal,
        _ => return None,
    };
    Some(Classified {
        error,
        form: Form::JsonRpc(code),
    })
}

/// The platform error a complete JSON body carries in the JSON-RPC form (see
/// [`classify_json_rpc`]). Bytes without `-32` never reach the JSON parser: a number cannot be
/// escaped, so no code of the table can be in them.
pub fn classify_json(bytes: &[u8]) -> Option<Classified> {
    // Built once: `memmem::find` would build its searcher again for every answer.
    static MINUS_32: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"-32"));
    if first_significant_byte(bytes) != Some(b'{') || MINUS_32.find(bytes).is_none() {
        return None;
    }
    #[cfg(test)]
    tests::JSON_PARSES.with(|n| n.set(n.get() + 1));
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| classify_json_rpc(&v))
}

/// The platform error an answer carries, in either form: its head, then — for an HTTP 200 —
/// its whole body when you have it (`body`: the complete bytes of an `application/json`
/// answer). For a custom MCP client that reads answers itself.
///
/// ```
/// use agentcore_tower::contract::{PlatformError, classify};
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-amzn-errortype", "RuntimeClientError".parse().unwrap());
/// let class = classify(http::StatusCode::FAILED_DEPENDENCY, &headers, None).unwrap();
/// assert_eq!(class.error(), PlatformError::RuntimeClientError);
/// ```
pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: Option<&[u8]>,
) -> Option<Classified> {
    if status == StatusCode::OK {
        return body.and_then(classify_json);
    }
    classify_head(status, headers)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    thread_local! {
        pub(crate) static JSON_PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn head(status: u16, error_type: Option<&str>) -> Option<PlatformError> {
        let mut h = HeaderMap::new();
        if let Some(t) = error_type {
            h.insert("x-amzn-errortype", t.parse().unwrap());
        }
        classify_head(StatusCode::from_u16(status).unwrap(), &h).map(|c| c.error())
    }

    #[test]
    fn the_http_form() {
        use PlatformError::*;
        assert_eq!(head(429, Some("ThrottlingException:ns")), Some(Throttling));
        assert_eq!(head(429, None), Some(Throttling));
        assert_eq!(
            head(402, Some("ServiceQuotaExceededException")),
            Some(ServiceQuotaExceeded)
        );
        assert_eq!(
            head(409, Some("RetryableConflictException")),
            Some(RetryableConflict)
        );
        assert_eq!(head(409, Some("ConflictException")), Some(Conflict));
        assert_eq!(head(409, None), None, "never by the status alone");
        assert_eq!(
            head(424, Some("RuntimeClientError")),
            Some(RuntimeClientError)
        );
        assert_eq!(head(406, None), Some(RequestUnacceptable));
        assert_eq!(head(503, None), Some(Internal));
        assert_eq!(head(500, Some("InternalServerException")), Some(Internal));
        assert_eq!(
            head(200, Some("ThrottlingException")),
            None,
            "a type of another status"
        );
        assert_eq!(head(403, Some("ExpiredTokenException")), None);
        assert_eq!(head(403, None), Some(AccessDenied));
        assert_eq!(head(200, None), None);
    }

    #[test]
    fn the_json_rpc_form_and_its_meaning() {
        let reply = |code: i64, message: &str| {
            classify_json_rpc(
                &json!({"jsonrpc":"2.0","id":1,"error":{"code":code,"message":message}}),
            )
        };
        let t = reply(-32003, THROTTLED_MESSAGE).unwrap();
        assert_eq!(
            (t.error(), t.meaning()),
            (PlatformError::Throttling, Meaning::RefusedBeforeExecution)
        );
        assert_eq!(
            t.to_string(),
            "JSON-RPC -32003 ThrottlingException (or ServiceQuotaExceededException: they share the reply)"
        );
        assert_eq!(
            reply(-32003, "Rate limit exceeded"),
            None,
            "the message is part of it"
        );
        assert_eq!(
            reply(-32005, CONFLICT_MESSAGE).unwrap().meaning(),
            Meaning::Final
        );
        let r = reply(-32010, "Tool execution error: boom").unwrap();
        assert_eq!(
            (r.error(), r.meaning()),
            (PlatformError::RuntimeClientError, Meaning::MayHaveRun)
        );
        assert_eq!(
            reply(-32603, "Internal error").unwrap().meaning(),
            Meaning::Final
        );
        assert_eq!(
            reply(-32011, "x").unwrap().to_string(),
            "JSON-RPC -32011 McpRequestUnacceptableException (the Accept header must be `application/json, text/event-stream`)"
        );
        assert_eq!(reply(-32000, "x"), None);
        // A batch, a result beside the error, a float code: no.
        let batch =
            json!([{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":THROTTLED_MESSAGE}}]);
        assert_eq!(classify_json_rpc(&batch), None);
        let both =
            json!({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":-32010,"message":"x"}});
        assert_eq!(classify_json_rpc(&both), None);
        let float = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32010.0,"message":"x"}});
        assert_eq!(classify_json_rpc(&float), None);
    }

    #[test]
    fn an_ordinary_answer_never_reaches_the_parser() {
        let before = JSON_PARSES.with(|n| n.get());
        assert_eq!(
            classify_json(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            None
        );
        assert_eq!(classify_json(b"not json"), None);
        assert_eq!(
            classify_json(br#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32005}}]"#),
            None
        );
        assert_eq!(JSON_PARSES.with(|n| n.get()), before);
        let busy = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;
        assert_eq!(
            classify_json(busy).map(|c| c.error()),
            Some(PlatformError::RetryableConflict)
        );
        assert_eq!(JSON_PARSES.with(|n| n.get()), before + 1);
    }
}
