//! [`ReqwestService`]: a [`reqwest::Client`] as the inner HTTP client of an `agentcore_tower`
//! stack.
//!
//! The layers of `agentcore_tower` call a `tower::Service<http::Request<Full<Bytes>>>` that
//! answers an `http::Response<B>` with `B: http_body::Body<Data = Bytes> + Unpin + Send`.
//! `reqwest::Client` is a `tower::Service<reqwest::Request>` answering `reqwest::Response`, so
//! this adapter converts both ways and nothing else:
//!
//! * the request: method, URI (must be absolute: the SigV4 layer always makes it so), HTTP
//!   version, every header exactly as the layers above set it, and the body bytes (the body is
//!   already buffered; it becomes a reusable `reqwest::Body` of known length);
//! * the answer: `http::Response<reqwest::Body>` (status, headers, extensions; the body still
//!   streams, so an SSE answer is read as it arrives). `reqwest::Body` implements
//!   `http_body::Body<Data = Bytes, Error = reqwest::Error>` and is `Unpin + Send + Sync`;
//! * the error: `reqwest::Error`, unchanged, so `agentcore_tower` can walk its
//!   [`source`](std::error::Error::source) chain to tell how the attempt failed.
//!
//! # The signature survives
//! `SigV4InvokeLayer` sets and signs `host` and `content-length` (and every other header it
//! carries). reqwest 0.13.5 keeps them: it adds its default headers only where the request has
//! none of that name, and its hyper-util client adds `host` only when it is absent; hyper writes
//! a `content-length` set by the caller as it is. What reqwest can add is unsigned and harmless:
//! `accept: */*` when the request carries no `accept` (a default header of every
//! `ClientBuilder`), `user-agent` only when configured, `accept-encoding` only with its
//! decompression features, proxy headers only when a proxy applies. A SigV4 signature covers
//! only its `SignedHeaders` list, so an extra header does not break it.
//!
//! # Configure the client: [`ReqwestService::client_builder`]
//! * **No retries of its own.** reqwest 0.13 re-sends, by default, requests refused by the
//!   protocol (HTTP/2 `REFUSED_STREAM`, `GOAWAY`). The stack above decides every re-send (and
//!   keeps the record of them), so turn this off: `ClientBuilder::retry(reqwest::retry::never())`.
//! * **No redirects.** reqwest follows up to 10 redirects by default; a 307/308 would re-send the
//!   signed body to another URL behind the stack's back, a 301/302/303 would turn the POST into a
//!   GET. `InvokeAgentRuntime` never redirects: `redirect(reqwest::redirect::Policy::none())`,
//!   and a 3xx reaches the stack as it is.
//! * **TLS** for the real service (`https://bedrock-agentcore.{region}.amazonaws.com`): enable a
//!   reqwest TLS feature (`rustls`, `rustls-no-provider`, `native-tls`). The emulator speaks
//!   plain HTTP on 127.0.0.1, for which none is needed.
//! * **Proxies**: reqwest reads `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` by default. Against the
//!   local emulator, [`ClientBuilder::no_proxy`](reqwest::ClientBuilder::no_proxy) keeps a proxy
//!   from the environment out of the way.
//!
//! ```ignore
//! let client = ReqwestService::client_builder().no_proxy().build()?;
//! let stack = tower::ServiceBuilder::new()
//!     .layer(ThrottleRetryLayer::new())
//!     .layer(signer)
//!     .service(ReqwestService::new(client));
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// A [`reqwest::Client`] as a `tower::Service<http::Request<Full<Bytes>>>` answering
/// `http::Response<reqwest::Body>`. Cheap to clone (the client is an `Arc` inside; clones share
/// its connection pool). See the [module docs](self).
#[derive(Clone, Debug)]
pub struct ReqwestService {
    client: reqwest::Client,
}

impl ReqwestService {
    /// Wraps `client`. Build it from [`client_builder`](Self::client_builder), or turn off its
    /// retries and redirects yourself (see the module docs).
    pub fn new(client: reqwest::Client) -> Self {
        Self { client }
    }

    /// A `ClientBuilder` for this adapter: reqwest's own retries off
    /// (`retry(reqwest::retry::never())`) and redirects off
    /// (`redirect(reqwest::redirect::Policy::none())`), as the stack decides every re-send.
    pub fn client_builder() -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
    }

    /// The wrapped client.
    #[allow(dead_code)] // this file is compiled into several crates; not all of them call it
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

/// The response future of [`ReqwestService`].
pub type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<reqwest::Body>, reqwest::Error>> + Send>>;

impl tower::Service<http::Request<Full<Bytes>>> for ReqwestService {
    type Response = http::Response<reqwest::Body>;
    type Error = reqwest::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // reqwest::Client is always ready (its own `poll_ready` answers `Ready(Ok(()))`): the
        // connection pool has no back-pressure to report.
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
            // Keeps method, headers, version and extensions; the URI is re-parsed as a `Url`
            // (an origin-form URI such as "/mcp" is refused here, with a builder error).
            let request = reqwest::Request::try_from(http::Request::from_parts(parts, bytes))?;
            let response = client.execute(request).await?;
            Ok(http::Response::from(response))
        })
    }
}

// What the stack requires of the answer's body, checked where the adapter is defined.
const _: fn() = || {
    fn body<B: http_body::Body<Data = Bytes> + Unpin + Send + Sync + 'static>() {}
    body::<reqwest::Body>();
};
