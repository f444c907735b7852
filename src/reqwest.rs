//! reqwest as the stack's HTTP client (feature `reqwest`): [`ReqwestService`], a
//! `reqwest::Client` with its own retries and redirects off by construction.
//!
//! ```no_run
//! use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
//! use agentcore_tower::reqwest::ReqwestService;
//! use agentcore_tower::{ReplayGuardLayer, recommended_layers};
//! use aws_credential_types::Credentials;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let signer = SigV4InvokeLayer::builder(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     Credentials::new("AKIDEXAMPLE", "secret", None, None, "example"),
//! )
//! .build()?;
//! // Your reqwest settings (a TLS feature of reqwest for https, a proxy, timeouts…); the
//! // retries and redirects are switched off after them, whatever they say.
//! let client = ReqwestService::with_client(|builder| builder.no_proxy())?;
//! let stack = tower::ServiceBuilder::new()
//!     .layer(recommended_layers(ReplayGuardLayer::new(), signer))
//!     .service(client);
//! # let _ = stack;
//! # Ok(())
//! # }
//! ```
//!
//! The layers call a `tower::Service<http::Request<Full<Bytes>>>` that answers an
//! `http::Response<B>` with `B: http_body::Body<Data = Bytes> + Unpin + Send`. A
//! `reqwest::Client` is a `tower::Service<reqwest::Request>` answering `reqwest::Response`, so
//! [`ReqwestService`] converts both ways and nothing else:
//!
//! * the request: method, URI (absolute: the signer always makes it so), HTTP version, every
//!   header exactly as the layers above set it, and the body bytes (already buffered; they
//!   become a `reqwest::Body` of known length);
//! * the answer: `http::Response<reqwest::Body>` (status, headers, extensions; the body still
//!   streams, so an SSE answer is read as it arrives);
//! * the error: `reqwest::Error`, unchanged, so the layers can tell how the attempt failed
//!   ([`FailureKind::of_error`](crate::rule::FailureKind::of_error) reads reqwest's timeouts and
//!   connect errors when this feature is on).
//!
//! # Why its retries and redirects are off
//! * **Retries.** reqwest 0.13 re-sends, by default, requests refused by the protocol (HTTP/2
//!   `REFUSED_STREAM`, `GOAWAY`). The stack above decides every re-send and keeps the record of
//!   them: `retry(reqwest::retry::never())`.
//! * **Redirects.** reqwest follows up to 10 redirects by default: a 307/308 would re-send the
//!   signed body to another URL behind the stack's back, a 301/302/303 would turn the POST into
//!   a GET. `InvokeAgentRuntime` never redirects: `redirect(reqwest::redirect::Policy::none())`,
//!   and a 3xx reaches the stack as it is.
//!
//! Both are applied after your settings, in every constructor: there is no way to build a
//! [`ReqwestService`] with them on.
//!
//! # The signature survives
//! The signer sets and signs `host`, `content-length`, `accept` and every other header it
//! carries. reqwest keeps them: it adds a default header only where the request has none of that
//! name, and its client adds `host` only when absent. What it can add is unsigned and harmless:
//! `user-agent` only when configured, `accept-encoding` only with its decompression features,
//! proxy headers when a proxy applies. A signature covers only its `SignedHeaders`.
//!
//! # TLS and proxies
//! For the real service (`https://bedrock-agentcore.{region}.amazonaws.com`), enable a TLS
//! feature of reqwest in your own `Cargo.toml` (`rustls`, `native-tls`); the emulator speaks
//! plain HTTP on 127.0.0.1. reqwest reads `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` by default;
//! `no_proxy()` keeps one from the environment away from the local emulator.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// A `reqwest::Client` as a `tower::Service<http::Request<Full<Bytes>>>` answering
/// `http::Response<reqwest::Body>`, its own retries and redirects off. Cheap to clone (clones
/// share the client's connection pool). See the [module docs](self).
#[derive(Clone, Debug)]
pub struct ReqwestService {
    client: ::reqwest::Client,
}

impl ReqwestService {
    /// A client with reqwest's defaults, its retries and redirects off.
    pub fn new() -> Result<Self, ::reqwest::Error> {
        Self::with_client(|builder| builder)
    }

    /// A client with your settings (`configure` is handed reqwest's `ClientBuilder`), its
    /// retries and redirects switched off after them.
    pub fn with_client(
        configure: impl FnOnce(::reqwest::ClientBuilder) -> ::reqwest::ClientBuilder,
    ) -> Result<Self, ::reqwest::Error> {
        let client = configure(::reqwest::Client::builder())
            .retry(::reqwest::retry::never())
            .redirect(::reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { client })
    }

    /// The client.
    pub fn client(&self) -> &::reqwest::Client {
        &self.client
    }
}

/// The response future of [`ReqwestService`].
pub type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<::reqwest::Body>, ::reqwest::Error>> + Send>>;

impl tower::Service<http::Request<Full<Bytes>>> for ReqwestService {
    type Response = http::Response<::reqwest::Body>;
    type Error = ::reqwest::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // A reqwest client is always ready: its connection pool reports no back-pressure.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        let client = self.client.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // `Full<Bytes>` holds one frame and cannot fail: this reads it without waiting.
            let bytes = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            // Keeps method, headers, version and extensions; the URI is parsed as a `Url` (an
            // origin-form URI such as "/mcp" is refused here, with reqwest's builder error).
            let request = ::reqwest::Request::try_from(http::Request::from_parts(parts, bytes))?;
            let response = client.execute(request).await?;
            Ok(http::Response::from(response))
        })
    }
}

// What the stack requires of the answer's body, checked where the adapter is defined.
const _: fn() = || {
    fn body<B: http_body::Body<Data = Bytes> + Unpin + Send + Sync + 'static>() {}
    body::<::reqwest::Body>();
};
