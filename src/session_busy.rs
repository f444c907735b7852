//! [`SessionBusyRetryLayer`]: AgentCore Runtime's "session operation in progress" refusal,
//! recognised exactly and re-sent after a short backoff.
//!
//! ```
//! use std::convert::Infallible;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use agentcore_tower::{AttemptRecord, SessionBusyRetryLayer};
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Full};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), agentcore_tower::Error> {
//! // A runtime whose session is still provisioning for the first two requests.
//! let seen = Arc::new(AtomicU32::new(0));
//! let runtime = service_fn({
//!     let seen = seen.clone();
//!     move |_request: Request<Full<Bytes>>| {
//!         let n = seen.fetch_add(1, Ordering::SeqCst);
//!         async move {
//!             let body: &'static [u8] = if n < 2 {
//!                 br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#
//!             } else {
//!                 br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#
//!             };
//!             Ok::<_, Infallible>(
//!                 Response::builder()
//!                     .header("content-type", "application/json")
//!                     .body(Full::new(Bytes::from_static(body)))
//!                     .unwrap(),
//!             )
//!         }
//!     }
//! });
//!
//! let client = ServiceBuilder::new()
//!     .layer(SessionBusyRetryLayer::new())
//!     .service(runtime);
//! let request = Request::post("https://runtime.example/mcp")
//!     .header("content-type", "application/json")
//!     .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)))
//!     .unwrap();
//! let response = client.oneshot(request).await?;
//! let record = AttemptRecord::of_response(&response).unwrap().clone();
//! println!("{record}");
//! // #1 HTTP 200 -> session_busy: session busy (JSON-RPC -32005), sent again after 87ms (by adapter, assumes refused-before-execution); effect unknown
//! // #2 HTTP 200 -> session_busy: session busy (JSON-RPC -32005), sent again after 163ms (by adapter, assumes refused-before-execution); effect unknown
//! // #3 HTTP 200 -> session_busy: delivered; effect unknown
//! assert_eq!(record.len(), 3);
//! let body = response.into_body().collect().await.unwrap().to_bytes();
//! assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
//! # Ok(())
//! # }
//! ```
//!
//! # What it matches — exactly two forms
//! 1. **HTTP 200**, `Content-Type: application/json` (parameters such as `charset` allowed),
//!    whose body is ONE JSON-RPC 2.0 response object (`"jsonrpc": "2.0"`, an `id`, no
//!    `result`) with `error.code` = [`SESSION_BUSY_CODE`] (-32005, an integer) and
//!    `error.message` = [`SESSION_BUSY_MESSAGE`], exactly. This is the AgentCore Runtime MCP
//!    protocol contract's `RetryableConflictException`, returned "when a second operation
//!    targets a session while the service is provisioning or tearing down that session".
//! 2. **HTTP 409** whose `x-amzn-errortype` names [`RETRYABLE_CONFLICT_EXCEPTION`] (the part
//!    before the first `:`; AWS appends `:namespace`): the same refusal as
//!    `InvokeAgentRuntime`'s API reference gives it. The body does not matter.
//!
//! # A runtime that did not initialize in time
//! AgentCore answers a request whose microVM's container did not become ready within its
//! initialization limit with -32010 (HTTP 424 `RuntimeClientError`) "Runtime initialization
//! time exceeded. Please make sure that initialization completes in *N*s." — in either form,
//! matched exactly as [`contract`](crate::contract#-32010-two-errors-under-one-code) says (the
//! HTTP form by its JSON body's `message`, read ahead within the same bound). The container
//! never took the request, so this layer re-sends it as a refusal (`by adapter, assumes
//! refused-before-execution`), after the same short backoff: the platform has already waited
//! the whole window before answering, and the re-send starts a new microVM at once. It is
//! re-sent **once** by default
//! ([`initialization_attempts`](SessionBusyRetryLayer::initialization_attempts), 2 attempts):
//! each attempt can cost the runtime's whole initialization window (30 to 120 s in the
//! reports) and a new microVM; a slow first start is usually up the second time, a container
//! that cannot start never is. The new microVM's own cold start is then waited out as any
//! other, with this layer's whole session-busy allowance: a failed start is a kind of its own
//! ([`Refusal::InitializationTimedOut`]). When the cap is reached, the answer is delivered as
//! it came and the record says `delivered (…, but the cap of 2 attempts was reached)`. Every
//! other -32010 is delivered (the guard re-sends it only for what is declared replayable).
//!
//! # What it never matches (delivered as it came, byte for byte)
//! * `ConflictException`: the same code -32005 with "Resource conflict - Resource already
//!   exists" — not retryable; the message is part of the match for that reason. Any other code
//!   or message (e.g. -32010 "Runtime health check failed or timed out", which may have run).
//! * A batch reply (a JSON array), even one whose every member is a busy error: some members
//!   may be the record of work that ran.
//! * `text/event-stream` responses (never read), non-JSON bodies, invalid JSON, JSON that is
//!   not a JSON-RPC response.
//! * A 409 without the header or with another type; any other status with a busy-looking body.
//!
//! # Reading the body without losing it
//! Only an HTTP 200 `application/json` response is read ahead, and at most
//! [`peek_limit`](SessionBusyRetryLayer::peek_limit) bytes of it (default 4 KiB; a busy reply
//! is about 100 bytes) — nothing at all when its `Content-Length` is larger. Reading stops at
//! the first significant byte that is not `{`. What was read is handed on in front of the rest
//! of the stream ([`PeekedBody`]): the app reads exactly the bytes the server sent, with
//! honest `size_hint` and `is_end_stream`, trailers passed through, and an error met while
//! reading ahead delivered at the same point (after the bytes before it) — never swallowed,
//! never turned into a retry. A body in which the digits `32005` do not occur never reaches a
//! JSON parser, so an ordinary answer pays only the read-ahead.
//!
//! The response body must be `Body<Data = Bytes> + Unpin`: hyper's `Incoming`, reqwest's body
//! and the boxed bodies of http-body-util are.
//!
//! # Re-sending
//! | setting | default | why |
//! |---|---|---|
//! | [`max_total_wait`](SessionBusyRetryLayer::max_total_wait) | 45 s | a cold start is waited out by time: users report new runtime sessions provisioning for up to ~12.6 s, and a microVM may take up to 15 s to terminate after its idle timeout or lifetime before the next one starts: 45 s covers a 15 s termination followed by a 12.6 s cold start with room to spare (the two, and a last wait of up to 2 s, passed the 30 s this once was), and stays inside the call's ceiling in time ([`CallBudget`](crate::CallBudget), 90 s) and the proxy's `--timeout` |
//! | [`max_delay`](SessionBusyRetryLayer::max_delay) | 2 s | a session that comes up is used within 2 s of it: the per-wait cap stays short |
//! | [`base_delay`](SessionBusyRetryLayer::base_delay) | 100 ms | a short refusal (a session tearing down) should cost little |
//! | [`max_attempts`](SessionBusyRetryLayer::max_attempts) | 50 | a bound that the wait ceiling reaches first: with waits of at least 50, 100, 200, 400, 800 ms and then 1 s (half of each ceiling, the jitter's floor), 45 s holds at most 49 attempts |
//! | [`peek_limit`](SessionBusyRetryLayer::peek_limit) | 4096 bytes | a busy reply is ~100 bytes |
//!
//! A call that meets a 12 s cold start therefore makes about 12 attempts (waits of ~0.1, 0.2,
//! 0.3, 0.6, 1.2 s, then ~1.5 s each) and is answered within 2 s of the session coming up; a
//! session that is up at once answers the first attempt, and a busy moment of a live session
//! costs ~100 ms.
//!
//! The cap and the ceiling are this kind's allowance: they count the first attempt and the
//! re-sends (and waits) after session-busy refusals, never another kind's. After a cold start,
//! the first 429 is still waited out by the
//! [`ThrottleRetryLayer`](crate::ThrottleRetryLayer), and a declared-replayable `tools/call`
//! whose connection drops is still re-sent by the [`ReplayGuardLayer`](crate::ReplayGuardLayer),
//! each with its whole allowance (see
//! [`RetryLayer::max_attempts`](crate::retry::RetryLayer::max_attempts)); the call's one
//! ceiling in time ([`CallBudget`](crate::CallBudget), 90 s by default) bounds them all.
//!
//! The allowance is the call's, counted over every layer: stacked inside another retry
//! layer, this one does not start counting again when the outer one re-sends. Waits are
//! exponential with equal jitter. The matched reply is released before the wait;
//! when the limits are reached, the last refusal is delivered intact. Dropping the response
//! future mid-read releases the body at once.
//!
//! # The known limit
//! The HTTP 200 form is matched by its code and message, so an MCP server behind the runtime
//! can raise the same error itself — after it ran the call — and the match cannot tell the two
//! apart. Neither AWS page says that a matching reply ran nothing. That is why each re-send is
//! recorded as `by adapter, assumes refused-before-execution`, and every attempt's effect stays
//! `unknown`: an assumption with a basis, never a claim that nothing ran. An app that cannot
//! take that risk for a tool forbids the re-send through the replay rule.
//!
//! # Without the layer
//! Custom MCP clients can use the matcher alone: [`is_session_busy_reply`] over a parsed
//! `serde_json::Value`, [`is_session_busy_json`] over bytes, and [`is_session_busy_head`] for
//! the 409 form.

use std::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use http_body::Body;
use serde_json::Value;

use crate::body::{OwnReadAhead, PeekedBody};
use crate::context::CallContext;
use crate::contract::{
    Classified, Form, PlatformError, classify_head, classify_json, classify_json_rpc,
};
use crate::error::Error;
use crate::retry::sealed::{Judge, JudgeAtOnce, RetryAction, RetryReason};
use crate::retry::{Backoff, Retry, RetryLayer};
use crate::rule::{Failure, Refusal};

/// The JSON-RPC error code AgentCore's MCP contract gives the session-busy refusal.
pub const SESSION_BUSY_CODE: i64 = -32005;

/// The exact message of the session-busy refusal. `ConflictException` shares the code with
/// another message and is not retryable, so the message is part of the match.
pub const SESSION_BUSY_MESSAGE: &str = crate::contract::SESSION_BUSY_MESSAGE;

/// The AWS error type of the refusal's HTTP 409 form, in `x-amzn-errortype`.
pub const RETRYABLE_CONFLICT_EXCEPTION: &str = "RetryableConflictException";

/// Where AgentCore documents the refusal, in both forms — the basis of the retry policy.
pub const SESSION_BUSY_DOCUMENTATION: [&str; 2] = [
    "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/runtime-mcp-protocol-contract.html#mcp-error-handling",
    "https://docs.aws.amazon.com/bedrock-agentcore/latest/APIReference/API_InvokeAgentRuntime.html#API_InvokeAgentRuntime_Errors",
];

const LAYER: &str = "session_busy";

/// Whether a parsed JSON value is the session-busy reply: ONE JSON-RPC 2.0 response object
/// (`"jsonrpc": "2.0"`, an `id` that is a string, a number or null, no `result`) whose `error`
/// has the integer code -32005 and exactly the message [`SESSION_BUSY_MESSAGE`] (see
/// [`contract`](crate::contract), which reads every error of the table).
///
/// A batch (an array) is never a match, even when every member is: some of its replies may be
/// the record of work that ran.
///
/// ```
/// use agentcore_tower::session_busy::is_session_busy_reply;
/// use serde_json::json;
/// let busy = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32005, "message": "Session operation in progress, please retry"}});
/// assert!(is_session_busy_reply(&busy));
/// let conflict = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32005, "message": "Resource conflict - Resource already exists"}});
/// assert!(!is_session_busy_reply(&conflict));
/// assert!(!is_session_busy_reply(&json!([busy])));
/// ```
pub fn is_session_busy_reply(value: &Value) -> bool {
    is_busy(classify_json_rpc(value))
}

/// Whether a complete JSON body is the session-busy reply (see [`is_session_busy_reply`]).
/// Bytes in which `-32` does not occur are answered without parsing.
///
/// ```
/// use agentcore_tower::session_busy::is_session_busy_json;
/// assert!(is_session_busy_json(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#));
/// assert!(!is_session_busy_json(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
/// ```
pub fn is_session_busy_json(bytes: &[u8]) -> bool {
    is_busy(classify_json(bytes))
}

/// Whether a response head is the refusal's HTTP 409 form: status 409 and
/// `x-amzn-errortype` naming [`RETRYABLE_CONFLICT_EXCEPTION`].
///
/// ```
/// use agentcore_tower::session_busy::is_session_busy_head;
/// use http::{HeaderMap, StatusCode};
/// let mut headers = HeaderMap::new();
/// headers.insert("x-amzn-errortype", "RetryableConflictException:http://internal.amazon.com/coral/com.amazon.bedrock/".parse().unwrap());
/// assert!(is_session_busy_head(StatusCode::CONFLICT, &headers));
/// assert!(!is_session_busy_head(StatusCode::OK, &headers));
/// headers.insert("x-amzn-errortype", "ConflictException".parse().unwrap());
/// assert!(!is_session_busy_head(StatusCode::CONFLICT, &headers));
/// ```
pub fn is_session_busy_head(status: StatusCode, headers: &HeaderMap) -> bool {
    is_busy(classify_head(status, headers))
}

fn is_busy(platform: Option<crate::contract::Classified>) -> bool {
    platform.is_some_and(|p| p.error() == PlatformError::RetryableConflict)
}

/// The policy of [`SessionBusyRetryLayer`]: the session-busy refusal, in either of its two
/// forms, is worth sending again, and so is a runtime that did not initialize in time (up to
/// its own cap); anything else is not this layer's business.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SessionBusy {
    /// How many attempts a call may make that meet "Runtime initialization time exceeded".
    initialization_attempts: u32,
}

/// How many attempts of a call may meet "Runtime initialization time exceeded", unless
/// configured: 2, the first and one re-send (see the [module docs](self)).
pub const DEFAULT_INITIALIZATION_ATTEMPTS: u32 = 2;

/// Re-sends a request AgentCore Runtime refused as "session operation in progress", in
/// either of its two forms, after a short backoff. See the [module docs](self).
pub type SessionBusyRetryLayer = RetryLayer<SessionBusy>;

/// The service [`SessionBusyRetryLayer`] builds.
///
/// `R`: where it holds the answer it reads ahead (see
/// [`over_retry_layer`](crate::retry::RetryLayer::over_retry_layer)).
pub type SessionBusyRetry<S, R = OwnReadAhead> = Retry<S, SessionBusy, R>;

/// The response future of [`SessionBusyRetry`].
pub type ResponseFuture<S, ReqB, ResB, R = OwnReadAhead> =
    crate::retry::ResponseFuture<S, ReqB, ResB, SessionBusy, R>;

impl Default for SessionBusyRetryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionBusyRetryLayer {
    /// The layer with its defaults: 45 s of waiting in all (a cold start is waited out by
    /// time), 2 s per wait, 100 ms base backoff, 50 attempts (never reached before the 45 s),
    /// a 4 KiB read-ahead. See the [module docs](self) for why.
    pub fn new() -> Self {
        RetryLayer::with_policy(
            LAYER,
            SessionBusy {
                initialization_attempts: DEFAULT_INITIALIZATION_ATTEMPTS,
            },
            Backoff::new(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(2))
                .with_max_attempts(50)
                .with_max_total_wait(Duration::from_secs(45)),
        )
    }
}

impl<R> RetryLayer<SessionBusy, R> {
    /// Sets how many attempts of one call may meet AgentCore's "Runtime initialization time
    /// exceeded" (-32010 / HTTP 424) before it is delivered, the first included (default
    /// [`DEFAULT_INITIALIZATION_ATTEMPTS`], 2: one re-send; `0` is taken as 1, never re-sent).
    /// Counted over every layer of the call, from its record. Each such re-send starts a new
    /// microVM: see the [module docs](self#a-runtime-that-did-not-initialize-in-time).
    pub fn initialization_attempts(mut self, attempts: u32) -> Self {
        self.policy_mut().initialization_attempts = attempts.max(1);
        self
    }
}

impl JudgeAtOnce for SessionBusy {
    type CallJudge = judge::Refusals;

    fn for_call(&self, context: &CallContext) -> judge::Refusals {
        judge::Refusals {
            initialization_attempts: self.initialization_attempts,
            context: context.clone(),
        }
    }
}

const BUSY_200: &str = "session busy (JSON-RPC -32005)";
const BUSY_409: &str = "session busy (HTTP 409 RetryableConflictException)";
const INITIALIZATION_200: &str = "runtime initialization time exceeded (JSON-RPC -32010)";
const INITIALIZATION_424: &str =
    "runtime initialization time exceeded (HTTP 424 RuntimeClientError)";

mod judge {
    use super::*;
    use crate::record::{Decision, Verdict};

    /// The decision for one call: the refusal in either form, as the loop read it off the
    /// answer, and a runtime that did not initialize in time, up to the call's cap.
    pub struct Refusals {
        pub(super) initialization_attempts: u32,
        pub(super) context: CallContext,
    }

    impl Refusals {
        /// Whether the call has met "Runtime initialization time exceeded" as often as it may
        /// (the attempt just answered included): then the cap is recorded, once, on it.
        fn initialization_exhausted(&self, cause: &'static str) -> bool {
            let attempts = self.context.record().attempts();
            let met = attempts
                .iter()
                .filter(|a| {
                    a.platform_error()
                        .is_some_and(|p| p.error() == PlatformError::InitializationTimedOut)
                })
                .count();
            if met < self.initialization_attempts as usize {
                return false;
            }
            // A session-busy layer stacked below already said so.
            let said = attempts.last().is_some_and(|a| {
                a.decisions()
                    .iter()
                    .any(|d| d.layer() == LAYER && d.verdict().is_delivered())
            });
            if !said {
                self.context.decide(Decision::new(
                    LAYER,
                    Verdict::AttemptsExhausted {
                        cause,
                        max_attempts: self.initialization_attempts,
                    },
                    None,
                ));
            }
            true
        }
    }

    impl<B: Body> Judge<B> for Refusals {
        type Body = PeekedBody<B>;

        fn judge(
            &self,
            _answer: Result<&Response<PeekedBody<B>>, &Error>,
            platform: Option<Classified>,
        ) -> RetryAction {
            let Some(platform) = platform else {
                return RetryAction::NoOpinion;
            };
            let json_rpc = matches!(platform.form(), Form::JsonRpc(_));
            let (refusal, cause) = match platform.error() {
                PlatformError::RetryableConflict if json_rpc => (Refusal::SessionBusy, BUSY_200),
                PlatformError::RetryableConflict => (Refusal::SessionBusy, BUSY_409),
                PlatformError::InitializationTimedOut => {
                    let cause = if json_rpc {
                        INITIALIZATION_200
                    } else {
                        INITIALIZATION_424
                    };
                    if self.initialization_exhausted(cause) {
                        return RetryAction::NoOpinion;
                    }
                    (Refusal::InitializationTimedOut, cause)
                }
                _ => return RetryAction::NoOpinion,
            };
            RetryAction::Retry(RetryReason {
                failure: Failure::Refused(refusal),
                cause,
                retry_after: None,
            })
        }

        fn wrap(&self, response: Response<PeekedBody<B>>) -> Response<PeekedBody<B>> {
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn value_matcher_table() {
        let msg = SESSION_BUSY_MESSAGE;
        let cases = [
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":msg}}),
                true,
            ),
            (
                json!({"jsonrpc":"2.0","id":"a","error":{"code":-32005,"message":msg,"data":{"x":1}}}),
                true,
            ),
            (
                json!({"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":msg}}),
                true,
            ),
            (
                json!({"jsonrpc":"2.0","error":{"code":-32005,"message":msg}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":[1],"error":{"code":-32005,"message":msg}}),
                false,
            ),
            (
                json!({"jsonrpc":"1.0","id":1,"error":{"code":-32005,"message":msg}}),
                false,
            ),
            (json!({"id":1,"error":{"code":-32005,"message":msg}}), false),
            (
                json!({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":-32005,"message":msg}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"Resource conflict - Resource already exists"}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32010,"message":"Runtime health check failed or timed out"}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005.0,"message":msg}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":"-32005","message":msg}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"session operation in progress, please retry"}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":format!("{msg} ")}}),
                false,
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"error":{"code":-32005}}),
                false,
            ),
            (json!({"jsonrpc":"2.0","id":1,"error":"busy"}), false),
            (
                json!([{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":msg}}]),
                false,
            ),
            (json!("Session operation in progress, please retry"), false),
            (json!(null), false),
        ];
        for (value, want) in cases {
            assert_eq!(is_session_busy_reply(&value), want, "{value}");
            assert_eq!(
                is_session_busy_json(value.to_string().as_bytes()),
                want,
                "{value}"
            );
        }
    }

    #[test]
    fn bytes_matcher_edge_cases() {
        let busy = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"Session operation in progress, please retry"}}"#;
        assert!(is_session_busy_json(busy));
        let spaced = format!(" \n{}\n", std::str::from_utf8(busy).unwrap());
        assert!(is_session_busy_json(spaced.as_bytes()));
        // Escapes in the message decode to the same string: still the refusal.
        assert!(is_session_busy_json(
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"Session operation in progress, please retr\u0079"}}"#
        ));
        assert!(!is_session_busy_json(&busy[..busy.len() - 1]), "truncated");
        assert!(!is_session_busy_json(b""));
        assert!(!is_session_busy_json(b"\xff\xfe"));
        assert!(!is_session_busy_json(b"-32005"));
        let two = [&busy[..], &busy[..]].concat();
        assert!(!is_session_busy_json(&two), "two values are not one reply");
    }
}
