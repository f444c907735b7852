//! What the differential tests share: the fixed signing time, a request as it would go on the
//! wire, with its parsed `Authorization`, and what our layer hands the service below it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use aws_credential_types::Credentials;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt};

/// 2023-11-14T22:13:20.123456789Z: the sub-second part must be dropped the same way by both.
pub fn fixed_time() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
}
pub const FIXED_AMZ_DATE: &str = "20231114T221320Z";

/// The secret key both differential tests sign with.
pub const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

/// Static credentials for `access_key` and [`SECRET_KEY`], with `session_token` if any: what
/// both sides of a case are given.
pub fn credentials(access_key: &str, session_token: Option<&str>) -> Credentials {
    Credentials::new(
        access_key,
        SECRET_KEY,
        session_token.map(str::to_owned),
        None,
        "test",
    )
}

/// A `tools/call` of exactly `size` bytes: `head` (which opens the text argument), `x`s, then
/// the closing `"}}}`.
pub fn tools_call_of_size(head: &str, size: usize) -> Bytes {
    let tail = r#""}}}"#;
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    body.resize(size - tail.len(), b'x');
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), size);
    Bytes::from(body)
}

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

    /// The request the SDK's side signed, as it would go on the wire.
    pub fn from_sdk(request: &HttpRequest) -> Self {
        let body = request.body().bytes().expect("the SDK's body is in memory");
        Self::new(
            "the SDK",
            request.method(),
            request.uri(),
            request.headers().iter(),
            Bytes::copy_from_slice(body),
        )
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

/// Asserts what every differential test compares in the two requests' signing, the SDK's
/// value pinned and ours equal to it: the algorithm, the credential scope (`access_key` on the
/// fixed date, `region`, `bedrock-agentcore`), `x-amz-date` (the fixed time),
/// `x-amz-security-token` (`session_token`), and the value of every header the SDK signed,
/// which it must have sent.
pub fn assert_same_signing(
    name: &str,
    ours: &Wire,
    sdk: &Wire,
    access_key: &str,
    region: &str,
    session_token: Option<&str>,
) {
    let our_auth = ours.authorization("our layer");
    let sdk_auth = sdk.authorization("the SDK");
    assert_eq!(sdk_auth.algorithm, "AWS4-HMAC-SHA256", "{name}: algorithm");
    assert_eq!(our_auth.algorithm, sdk_auth.algorithm, "{name}: algorithm");
    assert_eq!(
        sdk_auth.credential,
        format!(
            "{access_key}/{}/{region}/bedrock-agentcore/aws4_request",
            &FIXED_AMZ_DATE[..8]
        ),
        "{name}: the SDK's credential scope"
    );
    assert_eq!(
        our_auth.credential, sdk_auth.credential,
        "{name}: credential scope"
    );

    assert_eq!(
        sdk.header("x-amz-date"),
        Some(FIXED_AMZ_DATE),
        "{name}: the SDK's x-amz-date"
    );
    assert_eq!(
        ours.header("x-amz-date"),
        sdk.header("x-amz-date"),
        "{name}: x-amz-date"
    );
    assert_eq!(
        sdk.header("x-amz-security-token"),
        session_token,
        "{name}: the SDK's x-amz-security-token"
    );
    assert_eq!(
        ours.header("x-amz-security-token"),
        sdk.header("x-amz-security-token"),
        "{name}: x-amz-security-token"
    );

    for header in sdk_auth.signed_header_names() {
        let sdk_value = sdk.signed_value(&header);
        assert!(
            sdk_value.is_some(),
            "{name}: the SDK signed `{header}` without sending it"
        );
        assert_eq!(
            ours.signed_value(&header),
            sdk_value,
            "{name}: signed header `{header}`"
        );
    }
}

/// Asserts that both sides sent `body` (`what` names it in the messages).
pub fn assert_same_body(name: &str, ours: &Wire, sdk: &Wire, body: &Bytes, what: &str) {
    assert_eq!(ours.body.len(), body.len(), "{name}: our body length");
    assert!(ours.body == sdk.body, "{name}: the bodies differ");
    assert!(ours.body == body, "{name}: our body is not the {what}");
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
