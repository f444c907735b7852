//! Differential test of [`McpEndpointLayer`] against the official SDK's SigV4 signer,
//! `aws_runtime::auth::sigv4::SigV4Signer`, for requests to an AgentCore Gateway's MCP URL.
//!
//! For every case (one test each, at the end of the file), the same MCP request (method, URL,
//! headers, body) is signed at the same fixed time with the same credentials twice: once by the
//! SDK's signer, once by our layer (its inner service capturing what would go on the wire). The
//! two requests must agree, byte for byte, on the method, the URI (scheme, authority, path,
//! query, as given), the whole `Authorization` header (algorithm, credential scope,
//! `SignedHeaders=` list, signature), `x-amz-date`, `x-amz-security-token`, the value of every
//! signed header, the value of every unsigned header carried (`user-agent` and `x-amzn-trace-id`
//! among them: carried, never signed) and the body. Each case also pins the `SignedHeaders=` list
//! it expects, so that two signers agreeing on too little fail too. The SDK's own signature is
//! compared: nothing is re-signed here. [`a_changed_header_value_or_body_changes_the_signature`]
//! shows the comparison can fail.
//!
//! # Why the oracle is the SDK's signer, not an SDK call
//! A Gateway is an MCP server at
//! `https://{gateway_id}.gateway.bedrock-agentcore.{region}.amazonaws.com/mcp`: no operation of
//! `aws-sdk-bedrockagentcore` (or of any SDK crate) sends a request there, so unlike
//! `sigv4_differential.rs` there is no SDK call whose request could be captured. What stands for
//! the SDK is the piece every SDK call is signed by: the `sigv4` auth scheme's signer from
//! `aws-runtime` (the version the SDK resolves to in `Cargo.lock`), driven as the SDK's
//! orchestrator drives it, through the `Sign` trait —
//! `sign_http_request(&mut HttpRequest, &Identity, AuthSchemeEndpointConfig, &RuntimeComponents,
//! &ConfigBag)` — with:
//! * a `ConfigBag` holding a `SigV4OperationSigningConfig` with `SigningOptions::default()`, the
//!   options every `aws-sdk-bedrockagentcore` operation stores (double URI encoding, no
//!   `x-amz-content-sha256` header, path normalisation, the session token signed), region
//!   `us-west-2` and name `bedrock-agentcore`. (The SDK keeps the region and name as
//!   `SigningRegion`/`SigningName` in its config layer, which the signer falls back to when the
//!   operation's config has none: set on the operation's config they are used the same way.)
//!   There is no `AttemptSkew` in the bag, so the signer applies no clock-skew correction;
//! * `AuthSchemeEndpointConfig::empty()`: the service's endpoint rules carry no `authSchemes`
//!   property, so nothing overrides the region, name or options;
//! * `RuntimeComponents` whose time source is a `StaticTimeSource` at the fixed time (the other
//!   components are `RuntimeComponentsBuilder::for_tests()` placeholders the signer never calls);
//! * an `Identity` made from the same `Credentials` our layer is given.
//!
//! The SDK's request is an `http::Request<SdkBody>` converted into its `HttpRequest`, as its
//! serializers build one; the body is in memory, so the signer hashes it (as for any SDK payload
//! in memory) rather than sending `UNSIGNED-PAYLOAD`.
//!
//! # What each side is given
//! Our layer gets the MCP client's request: the absolute URL, the MCP headers, the body. It sends
//! that request as it is, adding `Host` (from the URL), `Content-Length` (for a POST or a body)
//! and the SigV4 headers. The SDK's signer gets the same request with the `Content-Length` an
//! SDK serializer sets: on a request with a payload (as `InvokeAgentRuntime`'s POST), none on a
//! request without one (as `GetCodeInterpreterSession`'s GET or `DeleteEvent`'s DELETE).
//!
//! # `host`
//! Signed by both, but the SDK leaves the header to its HTTP connector, so the request it signs
//! has no `Host` header and `aws-sigv4` signs the URI's authority instead; our layer sets the
//! header itself (hyper-util would add it only after the layers). So the SDK side is signed
//! without `Host` (asserted), its `host` value is taken from its URI's authority exactly as its
//! signer takes it, and our `Host` header is compared with that.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::wire::{
    Wire, assert_same_body, assert_same_signing, credentials, fixed_time, through_our_layer,
    tools_call_of_size,
};
use agentcore_tower::endpoint::McpEndpointLayer;
use aws_credential_types::Credentials;
use aws_runtime::auth::sigv4::SigV4Signer;
use aws_runtime::auth::{SigV4OperationSigningConfig, SigningOptions};
use aws_sdk_bedrockagentcore::config::Region;
use aws_smithy_async::time::StaticTimeSource;
use aws_smithy_runtime_api::client::auth::{AuthSchemeEndpointConfig, Sign};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{ConfigBag, Layer as ConfigLayer};
use bytes::Bytes;
use http::Method;
use http_body_util::Full;

const ACCESS_KEY: &str = "ASIAXAMPLEGATEWAY7Q2";
/// An STS session token of a realistic size (696 characters) and alphabet (`/`, `+`, `=`).
const SESSION_TOKEN: &str = concat!(
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLXdlc3QtMiJHMEUCIQDhk8MRqj3EZgxrqB+s417kWq9xK5807gk",
    "SZCVea9axHYLDvRGcedUjvpyz2VKMzFGdbNGGoatgIWx2qCKuXMMBaHE0R1ourfXnW4EQY/ENyeR85aqHtw9dIx",
    "6zYMtRql0XjxJBgdiXBN7d+3gBTPuv3vG0WIBsyJJnamQDUkqL3dknQ3lXNO8h1NnIoBVjcR+u6A3zyfrgchB8U",
    "UAySXqBPrkDLEecNRmNuu9YGWpHteU7+H3t2jVcrRYBOx3TkkV5YPuCyKNm+GqUSKsH0kUmIhQR8lNJhWvulkFu",
    "t/nRYMOUBjhvFHphw+ITZE7e1kMhZ+2kLXI0rDegjCEML4jb7Ia/s9QCFCD+CAzkIB7iXzn8WMheTNvdwqJOEzi",
    "YHbyyYfJfEmVxREtuhLBytzXLtAkqyhsErXeMKX+meiOd9+QIslWVSEVN3TZaa8HaPG1GAm1q7Wkgj35708hQ83",
    "0JsdLJ6UU1WKXy67DlC/hyHn7q9hLb5WIREvuI6LZRDEnsP3VR4RTBhyy1UdeH9B9InRGXarQ0+405aOatEqBg9",
    "rsbIx3vU9/VsYaaH72eW5hCh37aZsXi7VLz00lPAe00xdeVgwxeM1thbuIpBvJQPuPrZsCaa+1vYWcvNgXH0LN=",
);

const REGION: &str = "us-west-2";
/// The layer's default signing name, AgentCore Gateway's: never set on the builder here.
const SIGNING_NAME: &str = "bedrock-agentcore";
const GATEWAY_URL: &str =
    "https://my-gateway-abc123.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";
/// A path segment that needs encoding (`%20`, encoded again by the double encoding) and a query
/// with an encoded value.
const GATEWAY_URL_ENCODED: &str = "https://my-gateway-abc123.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp/tools%20x?a=b&c=d%20e";

const MCP_SESSION_ID: &str = "7f5c0c2e-3b1a-4d8e-9f6a-2c4b8e1d0a93";
const MCP_PROTOCOL_VERSION: &str = "2025-11-25";
const TOOLS_CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"weather___get_forecast","arguments":{"city":"Seattle","days":3}}}"#;

/// The `SignedHeaders=` list of a POST with the MCP headers, without and with a session token.
const SIGNED_POST: &str =
    "accept;content-length;content-type;host;mcp-protocol-version;mcp-session-id;x-amz-date";
const SIGNED_POST_TOKEN: &str = "accept;content-length;content-type;host;mcp-protocol-version;mcp-session-id;x-amz-date;x-amz-security-token";

/// One request, as the MCP client sends it.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    method: Method,
    url: &'static str,
    /// The client's headers, lower-case names, each once.
    headers: Vec<(&'static str, String)>,
    session_token: Option<&'static str>,
    body: Bytes,
    /// The `SignedHeaders=` list both must produce.
    signed_headers: &'static str,
}

impl Case {
    /// A `tools/call` POST to the Gateway with the MCP headers.
    fn tools_call(name: &'static str, session_token: Option<&'static str>) -> Self {
        Self {
            name,
            method: Method::POST,
            url: GATEWAY_URL,
            headers: vec![
                ("content-type", "application/json".to_owned()),
                ("accept", "application/json, text/event-stream".to_owned()),
                ("mcp-session-id", MCP_SESSION_ID.to_owned()),
                ("mcp-protocol-version", MCP_PROTOCOL_VERSION.to_owned()),
            ],
            session_token,
            body: Bytes::from_static(TOOLS_CALL.as_bytes()),
            signed_headers: if session_token.is_some() {
                SIGNED_POST_TOKEN
            } else {
                SIGNED_POST
            },
        }
    }

    fn credentials(&self) -> Credentials {
        credentials(ACCESS_KEY, self.session_token)
    }

    /// The authority of the URL: what `host` must be signed as, and our `Host` header.
    fn authority(&self) -> String {
        let uri: http::Uri = self.url.parse().expect("an absolute URL");
        uri.authority()
            .expect("a URL with a host")
            .as_str()
            .to_owned()
    }
}

/// The request the SDK's signer is given: the case's, with the `Content-Length` an SDK
/// serializer sets (on a request with a payload), without `Host`.
fn sdk_request(case: &Case) -> HttpRequest {
    let mut builder = http::Request::builder()
        .method(case.method.clone())
        .uri(case.url);
    for (name, value) in &case.headers {
        builder = builder.header(*name, value.as_str());
    }
    if case.method == Method::POST || !case.body.is_empty() {
        builder = builder.header(http::header::CONTENT_LENGTH, case.body.len());
    }
    builder
        .body(SdkBody::from(case.body.clone()))
        .expect("a valid request")
        .try_into()
        .expect("an http 1.x request converts")
}

/// Signs the case's request with the SDK's SigV4 signer, as the SDK's orchestrator calls it.
fn through_sdk_signer(case: &Case) -> Wire {
    let mut request = sdk_request(case);
    assert!(
        request.headers().get("host").is_none(),
        "{}: the SDK signs without a Host header",
        case.name
    );

    let identity = Identity::from(case.credentials());
    let mut operation = ConfigLayer::new("GatewayMcp");
    operation.store_put(SigV4OperationSigningConfig {
        region: Some(Region::new(REGION).into()),
        name: Some(SIGNING_NAME.into()),
        signing_options: SigningOptions::default(),
        ..Default::default()
    });
    let config = ConfigBag::of_layers(vec![operation]);
    let components = RuntimeComponentsBuilder::for_tests()
        .with_time_source(Some(StaticTimeSource::new(fixed_time())))
        .build()
        .expect("the test runtime components are complete");

    SigV4Signer::new()
        .sign_http_request(
            &mut request,
            &identity,
            AuthSchemeEndpointConfig::empty(),
            &components,
            &config,
        )
        .unwrap_or_else(|e| panic!("{}: the SDK's signer failed: {e}", case.name));

    Wire::from_sdk(&request)
}

/// Sends the case through our layer and returns the request it hands the service below.
async fn through_layer(case: &Case) -> Wire {
    let time = fixed_time();
    let layer = McpEndpointLayer::sigv4(case.credentials())
        .region(REGION)
        .clock(move || time)
        .build()
        .unwrap_or_else(|e| panic!("{}: the layer is refused: {e}", case.name));

    let mut request = http::Request::builder()
        .method(case.method.clone())
        .uri(case.url);
    for (name, value) in &case.headers {
        request = request.header(*name, value.as_str());
    }
    let request = request
        .body(Full::new(case.body.clone()))
        .expect("a valid MCP request");
    through_our_layer(case.name, &layer, request).await
}

/// Asserts that our layer's request is the SDK signer's, as described in the module docs.
fn assert_same_request(case: &Case, ours: &Wire, sdk: &Wire) {
    let name = case.name;

    assert_eq!(sdk.method, case.method.as_str(), "{name}: the SDK's method");
    assert_eq!(ours.method, sdk.method, "{name}: method");
    assert_eq!(sdk.uri, case.url, "{name}: the SDK's URI");
    assert_eq!(ours.uri, sdk.uri, "{name}: URI");

    let authority = case.authority();
    assert_eq!(sdk.header("host"), None, "{name}: the SDK's Host header");
    assert_eq!(
        ours.header("host"),
        Some(authority.as_str()),
        "{name}: our Host is the URL's authority"
    );

    assert_same_signing(name, ours, sdk, ACCESS_KEY, REGION, case.session_token);
    let our_auth = ours.authorization("our layer");
    let sdk_auth = sdk.authorization("the SDK");
    assert_eq!(
        sdk_auth.signed_headers, case.signed_headers,
        "{name}: the SDK's SignedHeaders"
    );
    assert_eq!(
        our_auth.signed_headers, sdk_auth.signed_headers,
        "{name}: SignedHeaders"
    );

    // Every header but `host` (compared above) and `authorization` (compared below): the same
    // names with the same values, the unsigned ones included.
    let rest = |wire: &Wire| -> BTreeMap<String, String> {
        let mut headers = wire.headers.clone();
        headers.remove("host");
        headers.remove("authorization");
        headers
    };
    assert_eq!(rest(ours), rest(sdk), "{name}: the other headers");

    assert_eq!(our_auth.signature, sdk_auth.signature, "{name}: signature");
    assert_eq!(
        ours.header("authorization"),
        sdk.header("authorization"),
        "{name}: authorization"
    );

    assert_same_body(name, ours, sdk, &case.body, "MCP body");
}

/// Signs the case on both sides and compares.
async fn check(case: Case) {
    let sdk = through_sdk_signer(&case);
    let ours = through_layer(&case).await;
    assert_same_request(&case, &ours, &sdk);
}

#[tokio::test]
async fn post_tools_call_without_session_token() {
    check(Case::tools_call("POST tools/call", None)).await;
}

#[tokio::test]
async fn post_tools_call_with_session_token() {
    assert_eq!(SESSION_TOKEN.len(), 696);
    check(Case::tools_call(
        "POST tools/call + token",
        Some(SESSION_TOKEN),
    ))
    .await;
}

#[tokio::test]
async fn get_sse_stream_with_empty_body() {
    check(Case {
        name: "GET SSE stream",
        method: Method::GET,
        url: GATEWAY_URL,
        headers: vec![
            ("accept", "text/event-stream".to_owned()),
            ("mcp-session-id", MCP_SESSION_ID.to_owned()),
            ("mcp-protocol-version", MCP_PROTOCOL_VERSION.to_owned()),
        ],
        session_token: Some(SESSION_TOKEN),
        body: Bytes::new(),
        // No content-length: neither an SDK GET without a payload nor our layer sends one.
        signed_headers: "accept;host;mcp-protocol-version;mcp-session-id;x-amz-date;x-amz-security-token",
    })
    .await;
}

#[tokio::test]
async fn delete_session() {
    check(Case {
        name: "DELETE session",
        method: Method::DELETE,
        url: GATEWAY_URL,
        headers: vec![
            ("mcp-session-id", MCP_SESSION_ID.to_owned()),
            ("mcp-protocol-version", MCP_PROTOCOL_VERSION.to_owned()),
        ],
        session_token: None,
        body: Bytes::new(),
        signed_headers: "host;mcp-protocol-version;mcp-session-id;x-amz-date",
    })
    .await;
}

#[tokio::test]
async fn query_and_a_path_needing_encoding() {
    check(Case {
        url: GATEWAY_URL_ENCODED,
        ..Case::tools_call("query + encoded path", Some(SESSION_TOKEN))
    })
    .await;
}

#[tokio::test]
async fn unsigned_by_default_headers_are_carried_not_signed() {
    let mut case = Case::tools_call("user-agent + x-amzn-trace-id", Some(SESSION_TOKEN));
    case.headers
        .push(("user-agent", "weather-agent/0.4.1 rmcp/0.8".to_owned()));
    case.headers.push((
        "x-amzn-trace-id",
        "Root=1-6553f100-5759e988bd862e3fe1be46a9;Parent=53995c3f42cd8ad8;Sampled=1".to_owned(),
    ));
    // The signed list is the plain POST's: neither header is in it.
    assert_eq!(case.signed_headers, SIGNED_POST_TOKEN);
    let sdk = through_sdk_signer(&case);
    let ours = through_layer(&case).await;
    assert_same_request(&case, &ours, &sdk);
    for (header, value) in &case.headers[4..] {
        assert_eq!(ours.header(header), Some(value.as_str()), "{header}");
    }
}

#[tokio::test]
async fn body_of_64_kib() {
    let head = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"docs___ingest","arguments":{"text":""#;
    check(Case {
        body: tools_call_of_size(head, 64 << 10),
        ..Case::tools_call("64 KiB body", Some(SESSION_TOKEN))
    })
    .await;
}

/// The comparison can fail: the SDK's signer given one other header value, or one other body
/// byte, signs differently, and [`assert_same_request`] rejects the pair.
#[tokio::test]
async fn a_changed_header_value_or_body_changes_the_signature() {
    let case = Case::tools_call("negative", Some(SESSION_TOKEN));
    let ours = through_layer(&case).await;
    // The unchanged request agrees, so what follows differs by the change alone.
    assert_same_request(&case, &ours, &through_sdk_signer(&case));

    let mut header_changed = case.clone();
    let session = &mut header_changed.headers[2];
    assert_eq!(session.0, "mcp-session-id");
    session.1.pop();
    session.1.push('4');
    let mut body_changed = case.clone();
    let mut body = case.body.to_vec();
    let days = body.iter().rposition(|&b| b == b'3').expect("`\"days\":3`");
    body[days] = b'4';
    body_changed.body = Bytes::from(body);

    for changed in [header_changed, body_changed] {
        let sdk = through_sdk_signer(&changed);
        let (our_auth, sdk_auth) = (
            ours.authorization("our layer"),
            sdk.authorization("the SDK"),
        );
        assert_eq!(our_auth.credential, sdk_auth.credential);
        assert_eq!(our_auth.signed_headers, sdk_auth.signed_headers);
        assert_eq!(ours.header("x-amz-date"), sdk.header("x-amz-date"));
        assert_ne!(
            our_auth.signature, sdk_auth.signature,
            "the signature ignores the change: {changed:?}"
        );
        let compared = catch_unwind(AssertUnwindSafe(|| {
            assert_same_request(&case, &ours, &sdk);
        }));
        assert!(
            compared.is_err(),
            "the comparison accepted a request signed over other content"
        );
    }
}
