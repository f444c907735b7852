//! What the app may read of an answer: decided here, once.
//!
//! * Headers: only those `InvokeAgentRuntime` models (and the ones the retry layers need) come
//!   back; every other header the service (or something pretending to be it) sent is dropped.
//! * Trailers: only those the operation models — none — come back: a trailer could carry
//!   anything past the header allow-list.
//! * Secrets: the signature and the session token of the attempt are redacted wherever they
//!   occur — in a kept header, or anywhere in the body, across frame boundaries, plainly or
//!   JSON-escaped (see [`secrets`](super::secrets)). An AWS error such as
//!   `InvalidSignatureException` quotes the canonical request, which carries the session token;
//!   a hostile endpoint can echo the whole request. Neither reaches the app.
//! * The body streams through (JSON or SSE), its length unchanged; only the few bytes that could
//!   be the start of a secret at the end of a frame are held back until the next frame tells.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

use super::secrets::{REDACTED, Redactor, Secrets};

/// The response headers that come back to the app.
pub(crate) const RESPONSE_HEADERS: [&str; 17] = [
    "content-type",
    "content-length",
    "mcp-session-id",
    "mcp-protocol-version",
    "x-amzn-bedrock-agentcore-runtime-session-id",
    "x-amzn-bedrock-agentcore-runtime-session-endpoint-url",
    "retry-after",
    "x-amz-retry-after",
    "x-amzn-errortype",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-amzn-trace-id",
    "traceparent",
    "tracestate",
    "baggage",
    "allow",
    "www-authenticate",
];

/// The trailers that come back to the app: the operation models none.
pub(crate) const RESPONSE_TRAILERS: [&str; 0] = [];

/// Keeps the headers the app may read (in place), redacting any that carries a secret.
pub(crate) fn filter_headers(headers: &mut HeaderMap, secrets: &Secrets) {
    keep_only(headers, &RESPONSE_HEADERS, secrets);
}

/// The hop-by-hop headers (RFC 9110 §7.6.1): the connection's, not the app's — neither carried
/// from a request nor handed back from an answer. Names, not text: removing by a `&str` parses
/// the name every time.
pub(crate) static HOP_BY_HOP: [HeaderName; 7] = [
    http::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
];

/// Keeps every header of an MCP endpoint's answer but the hop-by-hop ones (in place),
/// redacting any that carries a secret: the endpoint's headers are MCP's, not a model's.
pub(crate) fn filter_endpoint_headers(headers: &mut HeaderMap, secrets: &Secrets) {
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    redact_values(headers, secrets);
}

/// Keeps the names in `allowed`, and redacts every value with a secret in it.
fn keep_only(headers: &mut HeaderMap, allowed: &[&str], secrets: &Secrets) {
    let unwanted: Vec<HeaderName> = headers
        .keys()
        .filter(|name| !allowed.contains(&name.as_str()))
        .cloned()
        .collect();
    for name in unwanted {
        headers.remove(&name);
    }
    redact_values(headers, secrets);
}

/// Redacts every value with a secret in it.
fn redact_values(headers: &mut HeaderMap, secrets: &Secrets) {
    for value in headers.values_mut() {
        if secrets.occur_in(value.as_bytes()) {
            *value = HeaderValue::from_static(REDACTED);
        }
    }
}

/// A response answered here, without calling the service (405 for what the operation cannot
/// carry).
pub(crate) fn local<B: Body>(
    status: StatusCode,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> Response<InvokeBody<B>> {
    let mut response = Response::new(InvokeBody::local(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}

pin_project! {
    /// The body of a [`SigV4Invoke`](crate::invoke::SigV4Invoke) response (and of an
    /// [`McpEndpoint`](crate::endpoint::McpEndpoint) one): the service's body with the
    /// attempt's secrets redacted, or a body answered locally.
    pub struct InvokeBody<B: Body> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = InnerProj]
    enum Inner<B: Body> {
        Remote {
            #[pin]
            body: B,
            redactor: Redactor,
            // What comes after the held bytes: the filtered trailers, or the inner body's error.
            after: Option<Result<Frame<Bytes>, B::Error>>,
            ended: bool,
        },
        Local {
            #[pin]
            body: Full<Bytes>,
        },
    }
}

impl<B: Body> InvokeBody<B> {
    pub(crate) fn remote(body: B, secrets: Secrets) -> Self {
        Self {
            inner: Inner::Remote {
                body,
                redactor: Redactor::new(secrets),
                after: None,
                ended: false,
            },
        }
    }

    pub(crate) fn local(bytes: Bytes) -> Self {
        Self {
            inner: Inner::Local {
                body: Full::new(bytes),
            },
        }
    }
}

impl<B> Body for InvokeBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().inner.project() {
            InnerProj::Local { body } => match std::task::ready!(body.poll_frame(cx)) {
                Some(Ok(frame)) => Poll::Ready(Some(Ok(frame))),
                Some(Err(never)) => match never {},
                None => Poll::Ready(None),
            },
            InnerProj::Remote {
                mut body,
                redactor,
                after,
                ended,
            } => loop {
                if *ended {
                    return Poll::Ready(after.take());
                }
                // The inner body is done (trailers, an error, or its end): what was held back
                // comes first, then what ended it.
                let end = match std::task::ready!(body.as_mut().poll_frame(cx)) {
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => {
                            let safe = redactor.feed(data);
                            if !safe.is_empty() {
                                return Poll::Ready(Some(Ok(Frame::data(safe))));
                            }
                            // Everything was held back (a possible secret's start): read on.
                            continue;
                        }
                        Err(trailers) => filter_trailers(trailers, redactor.secrets()).map(Ok),
                    },
                    Some(Err(error)) => Some(Err(error)),
                    None => None,
                };
                *ended = true;
                *after = end;
                let held = redactor.finish();
                if !held.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(held))));
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Local { body } => body.is_end_stream(),
            Inner::Remote {
                body,
                redactor,
                after,
                ended,
            } => after.is_none() && (*ended || (body.is_end_stream() && redactor.held() == 0)),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Local { body } => body.size_hint(),
            // Masking keeps the length: what is held back, and what is still to come.
            Inner::Remote {
                body,
                redactor,
                ended,
                ..
            } => {
                if *ended {
                    return SizeHint::with_exact(0);
                }
                let inner = body.size_hint();
                let held = redactor.held() as u64;
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower().saturating_add(held));
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper.saturating_add(held));
                }
                hint
            }
        }
    }
}

/// The trailers the app may read, redacted; none when none is left.
fn filter_trailers(trailers: Frame<Bytes>, secrets: &Secrets) -> Option<Frame<Bytes>> {
    let mut trailers = trailers.into_trailers().ok()?;
    keep_only(&mut trailers, &RESPONSE_TRAILERS, secrets);
    (!trailers.is_empty()).then(|| Frame::trailers(trailers))
}

impl<B: Body> fmt::Debug for InvokeBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.inner {
            Inner::Remote { .. } => "remote",
            Inner::Local { .. } => "local",
        };
        f.debug_struct("InvokeBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn body_of(
        frames: Vec<Result<Frame<Bytes>, std::io::Error>>,
        secrets: &[&str],
    ) -> InvokeBody<impl Body<Data = Bytes, Error = std::io::Error>> {
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        InvokeBody::remote(inner, Secrets::new(secrets.iter().map(|s| s.to_string())))
    }

    #[tokio::test]
    async fn trailers_are_dropped_and_held_bytes_delivered() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-echo-token", "TOKEN99".parse().unwrap());
        trailers.insert("x-t", "1".parse().unwrap());
        let body = body_of(
            vec![
                Ok(Frame::data(Bytes::from_static(b"abc TOK"))),
                Ok(Frame::trailers(trailers)),
            ],
            &["TOKEN99"],
        );
        let collected = body.collect().await.unwrap();
        assert_eq!(
            collected.trailers(),
            None,
            "the operation models no trailer"
        );
        assert_eq!(&collected.to_bytes()[..], b"abc TOK");
    }

    #[tokio::test]
    async fn an_error_comes_after_the_held_bytes_masked_when_they_could_tell() {
        let mut body = body_of(
            vec![
                Ok(Frame::data(Bytes::from_static(b"ok SECRETTOK"))),
                Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            ],
            &["SECRETTOKEN"],
        );
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"ok ");
        let held = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(
            &held[..],
            b"*********",
            "9 bytes of a possible secret, masked"
        );
        assert!(
            body.frame().await.unwrap().is_err(),
            "then the error, at the same point"
        );
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn the_length_is_kept_so_content_length_and_size_hint_stay_exact() {
        let text = b"{\"echo\":\"SECRETTOKEN and SECRET\\/TOKEN\"}";
        let body = http_body_util::Full::new(Bytes::from_static(text));
        let body = InvokeBody::remote(
            body,
            Secrets::new(["SECRET/TOKEN".to_string(), "SECRETTOKEN".to_string()]),
        );
        assert_eq!(body.size_hint().exact(), Some(text.len() as u64));
        let out = body.collect().await.unwrap().to_bytes();
        assert_eq!(out.len(), text.len());
        assert_eq!(&out[..], b"{\"echo\":\"[redacted]* and [redacted]***\"}");
    }

    #[test]
    fn headers_are_filtered_and_redacted() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "application/json".parse().unwrap());
        h.insert("set-cookie", "a=b".parse().unwrap());
        h.insert(
            "x-amzn-errortype",
            "InvalidSignatureException".parse().unwrap(),
        );
        h.insert("mcp-session-id", "echo TOKEN99".parse().unwrap());
        h.insert("x-amzn-requestid", "TOK\\u0045N99".parse().unwrap());
        filter_headers(&mut h, &Secrets::new(["TOKEN99".to_string()]));
        assert_eq!(h.len(), 4);
        assert_eq!(h["mcp-session-id"], REDACTED);
        assert_eq!(h["x-amzn-requestid"], REDACTED, "escaped, still caught");
        assert!(h.get("set-cookie").is_none());
    }
}
