//! What the differential tests share: the fixed signing time, a request as it would go on the
//! wire, with its parsed `Authorization`, and what our layer hands the service below it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt};

/// 2023-11-14T22:13:20.123456789Z: the sub-second part must be dropped the same way by both.
pub fn fixed_time() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
}
pub const FIXED_AMZ_DATE: &str = "20231114T221320Z";

/// What a request would put on the wire, from either side.
#[derive(Clone, Debug)]
pub struct Wire {
    pub method: String,
    pub uri: http::Uri,
    /// Lower-case names; each sent once (asserted).
    pub headers: BTreeMap<String, String>,
    pub body: Bytes,
}

impl Wire {
    pub fn new<'a>(
        side: &str,
        method: &str,
        uri: &str,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
        body: Bytes,
    ) -> Self {
        let mut map = BTreeMap::new();
        for (name, value) in headers {
            let previous = map.insert(name.to_ascii_lowercase(), value.to_owned());
            assert!(previous.is_none(), "{side} sent `{name}` more than once");
        }
        Self {
            method: method.to_owned(),
            uri: uri.parse().expect("an absolute URI"),
            headers: map,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The value `aws-sigv4` signs for `name`: the header, or for `host` without one, the URI's
    /// authority (default ports aside, which no case has).
    pub fn signed_value(&self, name: &str) -> Option<String> {
        match (self.header(name), name) {
            (Some(value), _) => Some(value.to_owned()),
            (None, "host") => self.uri.authority().map(|a| a.as_str().to_owned()),
            (None, _) => None,
        }
    }

    pub fn authorization(&self, side: &str) -> Authorization {
        let value = self
            .header("authorization")
            .unwrap_or_else(|| panic!("{side} sent no `authorization`"));
        Authorization::parse(value)
    }
}

/// The parts of a SigV4 `authorization` header.
#[derive(Debug, PartialEq, Eq)]
pub struct Authorization {
    pub algorithm: String,
    pub credential: String,
    /// As sent: `;`-separated, in the signer's order.
    pub signed_headers: String,
    pub signature: String,
}

impl Authorization {
    pub fn parse(value: &str) -> Self {
        let (algorithm, rest) = value
            .split_once(' ')
            .unwrap_or_else(|| panic!("not a SigV4 authorization: {value}"));
        let mut fields = BTreeMap::new();
        for field in rest.split(", ") {
            let (key, value) = field
                .split_once('=')
                .unwrap_or_else(|| panic!("not a `key=value` field: {field}"));
            let first = fields.insert(key, value).is_none();
            assert!(first, "`{key}=` twice in the authorization");
        }
        let field = |key: &str| {
            (*fields
                .get(key)
                .unwrap_or_else(|| panic!("no `{key}=` in the authorization")))
            .to_owned()
        };
        let signature = field("Signature");
        assert!(
            signature.len() == 64
                && signature
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "the signature is not 64 lower-case hex digits: {signature}"
        );
        assert_eq!(
            fields.len(),
            3,
            "unexpected authorization fields: {fields:?}"
        );
        Self {
            algorithm: algorithm.to_owned(),
            credential: field("Credential"),
            signed_headers: field("SignedHeaders"),
            signature,
        }
    }

    /// The signed header names, sorted.
    pub fn signed_header_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.signed_headers.split(';').map(str::to_owned).collect();
        names.sort_unstable();
        names
    }
}

/// The service under our layer in a differential test: it keeps the one request it is handed
/// and answers 200.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Option<http::Request<Full<Bytes>>>>>);

impl Service<http::Request<Full<Bytes>>> for Capture {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        let previous = self.0.lock().unwrap().replace(request);
        assert!(previous.is_none(), "the layer sent more than one request");
        std::future::ready(Ok(http::Response::new(Full::new(Bytes::new()))))
    }
}

/// Sends `request` through `layer` and returns the request the layer handed the service below,
/// as it would go on the wire ("our layer").
pub async fn through_our_layer<L, B>(
    case: &str,
    layer: &L,
    request: http::Request<Full<Bytes>>,
) -> Wire
where
    L: Layer<Capture>,
    L::Service: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>,
    <L::Service as Service<http::Request<Full<Bytes>>>>::Error: std::fmt::Display,
{
    let capture = Capture::default();
    let response = layer
        .layer(capture.clone())
        .oneshot(request)
        .await
        .unwrap_or_else(|e| panic!("{case}: the layer failed: {e}"));
    assert_eq!(response.status(), 200, "{case}");

    let sent = capture
        .0
        .lock()
        .unwrap()
        .take()
        .expect("the layer sent no request");
    let (parts, body) = sent.into_parts();
    let body = body.collect().await.expect("an in-memory body").to_bytes();
    let headers = parts.headers.iter().map(|(name, value)| {
        let value = value
            .to_str()
            .unwrap_or_else(|_| panic!("our `{name}` is not visible ASCII"));
        (name.as_str(), value)
    });
    Wire::new(
        "our layer",
        parts.method.as_str(),
        &parts.uri.to_string(),
        headers,
        body,
    )
}
