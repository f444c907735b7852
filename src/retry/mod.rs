//! The one retry layer of this crate, generic over what it re-sends: [`RetryLayer<P>`], its
//! service [`Retry<S, P>`] and their [`ResponseFuture`]. The three retry layers are its
//! policies: [`ThrottleRetryLayer`](crate::ThrottleRetryLayer) is `RetryLayer<Throttled>`,
//! [`SessionBusyRetryLayer`](crate::SessionBusyRetryLayer) is `RetryLayer<SessionBusy>`,
//! [`ReplayGuardLayer`](crate::ReplayGuardLayer) is `RetryLayer<ReplayDeclarations>` — as tower's
//! `RetryLayer<P>` is generic over its `Policy`.
//!
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::{ThrottleRetryLayer, retry::RetryLayer, throttle::Throttled};
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // The alias and the generic name are one type.
//! let layer: RetryLayer<Throttled> = ThrottleRetryLayer::new().max_attempts(4);
//! let client = ServiceBuilder::new().layer(layer).service(service_fn(|_: Request<Full<Bytes>>| async {
//!     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
//! }));
//! let response = client.oneshot(Request::new(Full::new(Bytes::new()))).await.unwrap();
//! assert_eq!(response.status(), 200);
//! # }
//! ```
//!
//! A policy decides only what it makes of one attempt's result. The loop does the rest, the
//! same way for every layer:
//!
//! 1. Send the request through the service that was polled ready (tower's rule: a clone of a
//!    ready service is not ready; the ready one is taken, a clone left in its place). The
//!    attempt is recorded as sent, with no answer yet, as it is handed down.
//! 2. Hand the result to the policy. No opinion: deliver it.
//! 3. A reason to send again: stop if the call has made as many attempts of the failure's kind
//!    as this layer's cap allows (its allowance for that kind: the first attempt and the
//!    re-sends after failures of the kind, counted over every layer, so stacked layers never
//!    multiply their caps and no kind eats another's), or as many attempts in all as the
//!    call's [`CallBudget`](crate::CallBudget) allows; ask the call's replay rule (refusing
//!    always wins); stop if the wait — `Retry-After` when the server sent a valid one,
//!    otherwise this layer's [`Backoff`] — does not fit in what the call may still wait (this
//!    layer's ceiling minus the waits of that kind so far, the call's ceiling in time from its
//!    first attempt, the app's limits and deadline). The last answer is then delivered as it
//!    came.
//! 4. Otherwise record the decision, release the refused answer (its body is dropped, so no
//!    keep-alive connection stays pinned by it), wait, poll the service ready again, and send a
//!    clone of the request this layer received (method, URI, version, headers, extensions,
//!    body).
//!
//! Dropping the response future cancels whatever is under way: the wait, or the attempt in
//! flight. The call's record keeps the evidence: an attempt in flight stays "sent, no answer
//! yet", followed by [`Verdict::CallDropped`](crate::record::Verdict::CallDropped), and the `on_record`
//! hooks are called.
//!
//! Request bodies are cloned for every re-send, so the layers require `ReqBody: Clone` (and an
//! `http_body::Body<Data = Bytes>`, which the first of them reads at once when it is in memory,
//! to name the call's span): a body that cannot be cloned cannot be retried, and that is a
//! compile-time fact rather than a half-sent stream at run time. MCP requests are small JSON
//! documents: send them as `http_body_util::Full<Bytes>` or `String`.
//!
//! # Why the policies are sealed
//! A user cannot add a classifier of their own, as aws-smithy's `ClassifyRetry` allows:
//! [`RetryPolicy`] is sealed, and the three layers are the crate's three policies. A classifier
//! decides what the loop takes for a refusal (an answer given before anything ran), and the
//! crate's first promise is never to re-run what may have run: one classifier that mistook a
//! dropped connection or a 5xx for a refusal would re-run a tool, past every guard of the call.
//! So what AgentCore's answers mean is decided in one place, [`contract`](crate::contract), from
//! the platform's documented errors, and each policy maps it to one kind of failure with an
//! allowance of its own. What an app may decide has a public place of its own: which failures
//! may be sent again ([`ReplayRule`](crate::rule::ReplayRule); the guard's `idempotent_tools`,
//! `strict_tools` and `replayable_if`), how often and for how long (each layer's settings,
//! [`CallBudget`](crate::CallBudget), [`RetryBudget`](crate::RetryBudget)). To re-send on an
//! answer the crate does not judge, an app can stack tower's `tower::retry::Retry` with a
//! `Policy` of its own outside the crate's layers, and answers for what that policy re-runs.
//! Sealed, the traits can also change (they take the call's context, which is internal) without
//! a breaking release; unsealing them later would break no one, sealing them again would.

pub(crate) mod backoff;
mod config;
mod decide;
mod future;
mod layer;
mod policy;
pub(crate) mod retry_after;
mod service;
mod template;

pub use backoff::Backoff;
pub use config::RetryInfo;
pub use future::ResponseFuture;
pub use layer::RetryLayer;
pub use policy::RetryPolicy;
pub(crate) use policy::sealed;
pub use retry_after::{parse_retry_after, retry_after, retry_after_at};
pub use service::Retry;
