//! Keeping secrets out of answers: an attempt's signature, the session token it was signed with
//! and its bearer token never reach the app — not in a header, not in any byte of the body
//! ([`InvokeBody`], the body of every answer of
//! [`SigV4InvokeLayer`](crate::invoke::SigV4InvokeLayer) and
//! [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer)).
//!
//! ```
//! use std::convert::Infallible;
//! use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
//! use aws_credential_types::Credentials;
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::{BodyExt, Full};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let signer = SigV4InvokeLayer::builder(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     Credentials::new("AKIDEXAMPLE", "secret", Some("the-session-token".into()), None, "example"),
//! )
//! .build()?;
//! // A server that echoes the session token it was sent, in a header and in the body.
//! let echo = service_fn(|request: Request<Full<Bytes>>| async move {
//!     let token = request.headers()["x-amz-security-token"].clone();
//!     let body = format!(r#"{{"echo":"{}"}}"#, token.to_str().unwrap());
//!     let answer = Response::builder().header("x-amzn-requestid", token);
//!     Ok::<_, Infallible>(answer.body(Full::new(Bytes::from(body))).unwrap())
//! });
//! let client = ServiceBuilder::new().layer(signer).service(echo);
//! let request = Request::post("http://mcp.invalid/mcp")
//!     .header("content-type", "application/json")
//!     .header("accept", "application/json, text/event-stream")
//!     .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)))?;
//! let response = client.oneshot(request).await?;
//! assert_eq!(response.headers()["x-amzn-requestid"], "[redacted]");
//! let body = response.into_body().collect().await?.to_bytes();
//! // Masked where it stood, the body's length kept.
//! assert_eq!(&body[..], br#"{"echo":"[redacted]*******"}"#);
//! # Ok(())
//! # }
//! ```
//!
//! * **What is caught**: each secret spelled plainly, or JSON-escaped character by character in
//!   any mix — `\/` for `/`, `\uXXXX` (either case of hex digits) for any character: the forms
//!   a JSON encoder may produce and a JSON parser turns back into the secret.
//! * **How**: in a body, a match is masked with as many bytes as it spans (`[redacted]` then
//!   `*`s), so the body's length, its `Content-Length` and its `size_hint` stay exact; a header
//!   value with a secret in it becomes `[redacted]` as a whole.
//! * **Across frames**: only what could be the start of a secret at the end of a frame is held
//!   back until the next frame tells — at most six bytes per character of the longest secret
//!   (every character escaped); an SSE event is never kept waiting for the next one.
//! * **A body cut short**: when a body ends or fails in the middle of what could be a secret, 8
//!   or more of its bytes are delivered masked (then the error, if any); fewer are delivered as
//!   they came — no secret can be told from 7 of its bytes, and an answer that merely ends with
//!   the first letters of one is not mangled.
//! * **What no filter can catch**: a server that has a secret can always encode it in a form no
//!   filter knows (base64 of it, percent-encoding, its hex in other case, split by other text,
//!   a timing channel). The promise is that the forms an honest mistake or a plain echo
//!   produce — quoting the canonical request in an error, echoing a header, JSON-encoding it —
//!   never reach the app.

mod answer;
mod secrets;

pub use answer::InvokeBody;
pub(crate) use answer::{HOP_BY_HOP, filter_endpoint_headers, filter_headers, local};
pub(crate) use secrets::{Needle, Secrets, cached_needle, needle};
