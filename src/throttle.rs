//! [`ThrottleRetryLayer`]: HTTP 429 → wait → the same request again.
//!
//! ```
//! use std::convert::Infallible;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//!
//! use agentcore_tower::{AttemptRecord, ThrottleRetryLayer};
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), agentcore_tower::Error> {
//! // A server that throttles the first request, asking for one second.
//! let calls = Arc::new(AtomicU32::new(0));
//! let server = service_fn({
//!     let calls = calls.clone();
//!     move |_request: Request<Full<Bytes>>| {
//!         let n = calls.fetch_add(1, Ordering::SeqCst);
//!         async move {
//!             Ok::<_, Infallible>(match n {
//!                 0 => Response::builder()
//!                     .status(StatusCode::TOO_MANY_REQUESTS)
//!                     .header("retry-after", "1")
//!                     .body(Full::new(Bytes::from_static(b"slow down")))
//!                     .unwrap(),
//!                 _ => Response::new(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#))),
//!             })
//!         }
//!     }
//! });
//!
//! let client = ServiceBuilder::new()
//!     .layer(ThrottleRetryLayer::new().max_attempts(3).max_total_wait(Duration::from_secs(10)))
//!     .service(server);
//!
//! let request = Request::post("https://runtime.example/mcp")
//!     .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)))
//!     .unwrap();
//! let response = client.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! let record = AttemptRecord::of_response(&response).unwrap().clone();
//! assert_eq!(record.len(), 2);
//! println!("{record}");
//! // #1 HTTP 429 -> throttle: HTTP 429, sent again after 1s (Retry-After 1s) (by adapter, assumes rejected-before-execution); effect unknown
//! // #2 HTTP 200 -> throttle: delivered; effect unknown
//! let body = response.into_body().collect().await.unwrap().to_bytes();
//! assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
//! # Ok(())
//! # }
//! ```
//!
//! # What it re-sends
//! Throttling, in both of AgentCore's forms ([`contract`](crate::contract)): HTTP 429, and an
//! HTTP 200 `application/json` answer that is ONE JSON-RPC error -32003 with the contract's
//! exact message "Rate limit exceeded - Too many requests" (read through the bounded
//! read-ahead every retry layer shares; a batch, an SSE stream, another message or another
//! code is delivered as it came). `ServiceQuotaExceededException` shares that reply, so the
//! record says so; the assumption is still "rejected before execution". A 5xx, a transport
//! error or a timeout may come after the request ran: re-sending those is the replay rule's
//! business ([`ReplayGuardLayer`](crate::replay)), not this layer's.
//!
//! # How long it waits
//! * A valid `Retry-After` (delta-seconds or an HTTP-date; see
//!   [`parse_retry_after`](crate::retry::parse_retry_after)) or `x-amz-retry-after` (milliseconds, as
//!   AWS services send it; the longer when both are there: see [`retry_after`])
//!   is the wait — it is not capped by
//!   [`max_delay`](ThrottleRetryLayer::max_delay), which only caps the computed backoff.
//! * Otherwise exponential backoff with equal jitter from [`base_delay`](ThrottleRetryLayer::base_delay).
//! * Either way the call's waits after throttling never add up to more than
//!   [`max_total_wait`](ThrottleRetryLayer::max_total_wait) when this layer starts one: when
//!   the next wait would pass it (or the call's ceiling in time, its
//!   [`CallBudget`](crate::CallBudget), its deadline), the 429 is delivered at once, as it came.
//!   A server asking for 24 hours gets its 429 back now, not a hung call.
//!
//! The cap and the ceiling are throttling's allowance: they count the first attempt and the
//! re-sends (and waits) after throttling, in either form, never another kind's — a cold start's
//! session-busy refusals before the first 429 leave it whole. They are the call's: stacked
//! inside another retry layer, this one does not start counting again when the outer one
//! re-sends.
//!
//! | setting | default |
//! |---|---|
//! | [`max_attempts`](ThrottleRetryLayer::max_attempts) (the call's, first one included) | 3 |
//! | [`max_total_wait`](ThrottleRetryLayer::max_total_wait) | 10 s |
//! | [`base_delay`](ThrottleRetryLayer::base_delay) | 200 ms |
//! | [`max_delay`](ThrottleRetryLayer::max_delay) | 5 s |
//!
//! # What it records
//! Each re-send is recorded in the call's [`AttemptRecord`](crate::AttemptRecord) with the
//! permission `by adapter, assumes rejected-before-execution`; the call's replay rule (the
//! app's, or a guard's, wherever it is stacked) is asked first and may forbid it. The refused answer's body is dropped before the
//! wait, so a pooled connection is not held.
//!
//! # Differences from `tower::retry`
//! No `Policy` to write; the request is cloned with its extensions; the replay rule can forbid;
//! `Retry-After` is honoured; every attempt is recorded; the service is polled ready before
//! every attempt.

use std::time::Duration;

use http::{Response, StatusCode};
use http_body::Body;

use crate::body::{OwnReadAhead, PeekedBody};
use crate::context::CallContext;
use crate::contract::{Classified, Form, PlatformError};
use crate::error::Error;
use crate::retry::retry_after;
use crate::retry::sealed::{Judge, JudgeAtOnce, RetryAction, RetryReason};
use crate::retry::{Backoff, Retry, RetryLayer};
use crate::rule::{Failure, Refusal};

/// The policy of [`ThrottleRetryLayer`]: an HTTP 429 is a refusal worth sending again; anything
/// else is not this layer's business.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Throttled;

/// Re-sends a request the service answered with HTTP 429, honouring `Retry-After` under a
/// total-wait ceiling. See the [module docs](self).
pub type ThrottleRetryLayer = RetryLayer<Throttled>;

/// The service [`ThrottleRetryLayer`] builds.
///
/// `R`: where it holds the answer it reads ahead (see
/// [`over_retry_layer`](crate::retry::RetryLayer::over_retry_layer)).
pub type ThrottleRetry<S, R = OwnReadAhead> = Retry<S, Throttled, R>;

/// The response future of [`ThrottleRetry`].
pub type ResponseFuture<S, ReqB, ResB, R = OwnReadAhead> =
    crate::retry::ResponseFuture<S, ReqB, ResB, Throttled, R>;

impl Default for ThrottleRetryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl ThrottleRetryLayer {
    /// The layer with its defaults: 3 attempts, 10 s of waiting in all, 200 ms base backoff,
    /// 5 s per backoff wait.
    pub fn new() -> Self {
        RetryLayer::with_policy(
            "throttle",
            Throttled,
            Backoff::new(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(5))
                .with_max_attempts(3)
                .with_max_total_wait(Duration::from_secs(10)),
        )
    }
}

impl JudgeAtOnce for Throttled {
    type CallJudge = Throttled;

    fn for_call(&self, _: &CallContext) -> Throttled {
        Throttled
    }
}

impl<B: Body> Judge<B> for Throttled {
    type Body = PeekedBody<B>;

    fn judge(
        &self,
        answer: Result<&Response<PeekedBody<B>>, &Error>,
        platform: Option<Classified>,
    ) -> RetryAction {
        let Ok(response) = answer else {
            return RetryAction::NoOpinion;
        };
        let throttled = platform.is_some_and(|p| p.error() == PlatformError::Throttling);
        let cause = match platform.map(|p| p.form()) {
            _ if response.status() == StatusCode::TOO_MANY_REQUESTS => "HTTP 429",
            Some(Form::JsonRpc(_)) if throttled => {
                "throttled (JSON-RPC -32003, shared with ServiceQuotaExceeded)"
            }
            _ => return RetryAction::NoOpinion,
        };
        RetryAction::Retry(RetryReason {
            failure: Failure::Refused(Refusal::Throttled),
            cause,
            retry_after: retry_after::retry_after(response.headers()),
        })
    }

    fn wrap(&self, response: Response<PeekedBody<B>>) -> Response<PeekedBody<B>> {
        response
    }
}
