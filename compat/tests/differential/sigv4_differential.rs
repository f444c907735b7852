//! Differential test of [`SigV4InvokeLayer`] against the official SDK,
//! `aws-sdk-bedrockagentcore`.
//!
//! For every case (one test each, at the end of the file), the same `InvokeAgentRuntime` input is sent at the same
//! fixed time with the same credentials twice: once through the SDK (its HTTP client replaced by
//! a capturing one, retries off), once through our layer (its inner service capturing what would
//! go on the wire). The two requests must agree on the method, the URI (endpoint, path, query),
//! the credential scope, the `SignedHeaders=` list, the signature, byte for byte, `x-amz-date`,
//! `x-amz-security-token`, the value of every signed header, the unsigned modelled headers and
//! the body. The SDK's own signature is compared: nothing is re-signed here.
//!
//! # Headers left out of the comparison, and why
//! * `x-amz-user-agent`: the SDK's `UserAgentInterceptor` adds it in `modify_before_signing`, so
//!   the SDK signs it; our layer has no SDK user agent to report. [`StripSdkUserAgent`], an
//!   interceptor registered with the config builder's `.interceptor(..)`, removes it in the same
//!   hook, *before* signing. Interceptors registered on the config run after the SDK's own
//!   (the config's runtime plugin has order `Overrides`, the service's `ServiceRuntimePlugin` that
//!   carries `UserAgentInterceptor` has order `Defaults`), so the header is there to remove; the
//!   interceptor records what it removed and every test asserts it removed exactly one value.
//!   The signature compared is therefore the SDK's own, over the same signed header set as ours.
//! * `user-agent`: added by the same SDK interceptor before signing, but `aws-sigv4`'s default
//!   settings never sign it (it is in `SigningSettings::excluded_headers`); ours does not send it.
//! * `amz-sdk-invocation-id` (`InvocationIdInterceptor`) and `amz-sdk-request`
//!   (`RequestInfoInterceptor`): added by the SDK in `modify_before_transmit`, after signing, so
//!   never signed; ours does not send them.
//! * `host`: signed by both, but the SDK leaves it to its HTTP connector, so its captured request
//!   has no `Host` header and `aws-sigv4` signs the URI's authority instead; our layer sets the
//!   header itself (hyper-util would add it only after the layers). The SDK's `host` value is taken
//!   from its URI's authority, exactly as its signer does, and compared with our header.
//!
//! `x-amzn-trace-id` is carried by both but signed by neither (another of `aws-sigv4`'s default
//! exclusions): it is compared by value with the other unsigned headers, not left out.
//! (The SDK's recursion-detection interceptor would add it from `_X_AMZN_TRACE_ID` when
//! `AWS_LAMBDA_FUNCTION_NAME` is set in the environment; the tests do not run on Lambda.)
//!
//! # `mcp-method` and `mcp-name`
//! Our layer fills them from a `tools/call` (and `resources/read`, `prompts/get`) JSON-RPC body
//! when the MCP client did not set them; the SDK never reads the payload. Both situations are
//! covered: cases with the headers set explicitly on both sides (one with a name different from
//! the body's, so the client's value must win), and cases where only the SDK is given them, with
//! the values our layer must derive from the body ([`Case::derived_mcp`]).
//!
//! # The HTTP client on the SDK side
//! `aws_smithy_runtime::client::http::test_util::capture_request` exists only with the
//! `legacy-test-util` feature of `aws-smithy-runtime` 1.16 (it takes an http 0.2 response); with
//! `test-util`, the one the crate enables, the module re-exports the `CaptureRequestHandler` type
//! but not the function. The http 1.x `capture_request` lives in
//! `aws_smithy_http_client::test_util`, which is not a direct dev-dependency. So
//! [`CaptureClient`] does the same job with the public `aws_smithy_runtime_api::client::http`
//! traits: it keeps the one request it is given and answers a canned empty 200.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::wire::{
    Wire, assert_same_body, assert_same_signing, credentials, fixed_time, through_our_layer,
    tools_call_of_size,
};
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use aws_credential_types::Credentials;
use aws_sdk_bedrockagentcore::config::retry::RetryConfig;
use aws_sdk_bedrockagentcore::config::{BehaviorVersion, Region};
use aws_sdk_bedrockagentcore::operation::invoke_agent_runtime::builders::InvokeAgentRuntimeFluentBuilder;
use aws_smithy_async::time::StaticTimeSource;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::Blob;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use bytes::Bytes;
use http_body_util::Full;

const ACCESS_KEY: &str = "AKIDEXAMPLE";
/// A test value with the characters a real token has (`/`, `+`, `=`).
const SESSION_TOKEN: &str =
    "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+test/token=";
/// 35 characters: within the 33..=256 the service takes.
const RUNTIME_SESSION: &str = "mcp-differential-session-0000000001";
const ACCOUNT: &str = "123456789012";
const ARN_US_EAST_1: &str =
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/hosted_agent_x1y2z-AbCdEf1234";
const ARN_EU_WEST_1: &str =
    "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/eu_agent-ZyXwVu9876";
const RUNTIME_ID: &str = "hosted_agent_x1y2z-AbCdEf1234";

/// Headers the SDK adds that it does not sign: `user-agent` (excluded by `aws-sigv4`'s default
/// settings), `amz-sdk-invocation-id` and `amz-sdk-request` (added after signing).
const SDK_UNSIGNED_EXTRAS: [&str; 3] = ["amz-sdk-invocation-id", "amz-sdk-request", "user-agent"];

/// The SDK's signed header the [`StripSdkUserAgent`] interceptor removes before signing.
const X_AMZ_USER_AGENT: &str = "x-amz-user-agent";

const TOOLS_CALL_ADD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#;
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"differential","version":"1.0"}}}"#;

/// Which runtime a case invokes.
#[derive(Clone, Copy, Debug)]
enum Target {
    Arn(&'static str),
    RuntimeId {
        id: &'static str,
        account: &'static str,
    },
}

/// The optional header members of `InvokeAgentRuntime`, each sent as the MCP header of the same
/// meaning to our layer and as the member to the SDK.
#[derive(Clone, Copy, Debug, Default)]
struct Members {
    content_type: Option<&'static str>,
    accept: Option<&'static str>,
    mcp_session_id: Option<&'static str>,
    mcp_protocol_version: Option<&'static str>,
    mcp_method: Option<&'static str>,
    mcp_name: Option<&'static str>,
    runtime_user_id: Option<&'static str>,
    trace_id: Option<&'static str>,
    trace_parent: Option<&'static str>,
    trace_state: Option<&'static str>,
    baggage: Option<&'static str>,
}

impl Members {
    /// Every member set at once.
    fn all() -> Self {
        Self {
            content_type: Some("application/json"),
            accept: Some("application/json, text/event-stream"),
            mcp_session_id: Some("mcp-session-3f1c2a9e"),
            mcp_protocol_version: Some("2025-06-18"),
            mcp_method: Some("tools/call"),
            // Not the body's tool name ("add"): the client's header must win over the body.
            mcp_name: Some("calculator.add"),
            runtime_user_id: Some("user-42@example.com"),
            trace_id: Some(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            ),
            trace_parent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            trace_state: Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
            baggage: Some("userId=alice,serverNode=DF%2028,isProduction=false"),
        }
    }

    /// The MCP request headers our layer maps onto these members.
    fn headers(&self) -> Vec<(&'static str, &'static str)> {
        [
            ("content-type", self.content_type),
            ("accept", self.accept),
            ("mcp-session-id", self.mcp_session_id),
            ("mcp-protocol-version", self.mcp_protocol_version),
            ("mcp-method", self.mcp_method),
            ("mcp-name", self.mcp_name),
            (
                "x-amzn-bedrock-agentcore-runtime-user-id",
                self.runtime_user_id,
            ),
            ("x-amzn-trace-id", self.trace_id),
            ("traceparent", self.trace_parent),
            ("tracestate", self.trace_state),
            ("baggage", self.baggage),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| (name, value)))
        .collect()
    }

    /// Sets these members on the SDK's operation.
    fn apply(&self, call: InvokeAgentRuntimeFluentBuilder) -> InvokeAgentRuntimeFluentBuilder {
        let owned = |value: Option<&str>| value.map(str::to_owned);
        call.set_content_type(owned(self.content_type))
            // The layer sends the Accept the MCP contract requires when the app sent none: the
            // SDK call it stands for has that member.
            .set_accept(
                owned(self.accept).or(Some(agentcore_tower::contract::REQUIRED_ACCEPT.to_owned())),
            )
            .set_mcp_session_id(owned(self.mcp_session_id))
            .set_mcp_protocol_version(owned(self.mcp_protocol_version))
            .set_mcp_method(owned(self.mcp_method))
            .set_mcp_name(owned(self.mcp_name))
            .set_runtime_user_id(owned(self.runtime_user_id))
            .set_trace_id(owned(self.trace_id))
            .set_trace_parent(owned(self.trace_parent))
            .set_trace_state(owned(self.trace_state))
            .set_baggage(owned(self.baggage))
    }
}

/// One row of the table.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    target: Target,
    /// The SDK client's region.
    region: &'static str,
    /// `InvokeTarget::region` on our side; `None` when the ARN names the region.
    our_region: Option<&'static str>,
    qualifier: Option<&'static str>,
    session_token: Option<&'static str>,
    /// Set on both sides.
    members: Members,
    /// `(mcp-method, mcp-name)` given to the SDK only: the values our layer must derive from the
    /// JSON-RPC body because the MCP client did not set them.
    derived_mcp: Option<(&'static str, &'static str)>,
    body: Bytes,
}

impl Case {
    fn new(name: &'static str, target: Target, region: &'static str) -> Self {
        Self {
            name,
            target,
            region,
            our_region: None,
            qualifier: None,
            session_token: None,
            members: Members::default(),
            derived_mcp: None,
            body: Bytes::from_static(INITIALIZE.as_bytes()),
        }
    }

    /// A case invoking [`ARN_US_EAST_1`] from a `us-east-1` client.
    fn us_east_1(name: &'static str) -> Self {
        Self::new(name, Target::Arn(ARN_US_EAST_1), "us-east-1")
    }

    /// A case invoking [`RUNTIME_ID`] in [`ACCOUNT`] from a `us-east-1` client, the region given
    /// on our side too (a runtime id names none).
    fn runtime_id(name: &'static str) -> Self {
        let target = Target::RuntimeId {
            id: RUNTIME_ID,
            account: ACCOUNT,
        };
        Self {
            our_region: Some("us-east-1"),
            ..Self::new(name, target, "us-east-1")
        }
    }

    fn credentials(&self) -> Credentials {
        credentials(ACCESS_KEY, self.session_token)
    }
}

/// Removes the SDK's `x-amz-user-agent` before signing, and records what it removed.
#[derive(Clone, Debug, Default)]
struct StripSdkUserAgent {
    removed: Arc<Mutex<Vec<String>>>,
}

impl Intercept for StripSdkUserAgent {
    fn name(&self) -> &'static str {
        "StripSdkUserAgent"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(value) = context.request_mut().headers_mut().remove(X_AMZ_USER_AGENT) {
            self.removed.lock().unwrap().push(value);
        }
        Ok(())
    }
}

/// The SDK's HTTP client: keeps the one request it is given, answers an empty 200.
#[derive(Clone, Debug, Default)]
struct CaptureClient {
    request: Arc<Mutex<Option<HttpRequest>>>,
}

impl CaptureClient {
    /// The captured request; panics unless exactly one was sent.
    fn expect_request(&self) -> HttpRequest {
        self.request
            .lock()
            .unwrap()
            .take()
            .expect("the SDK sent no request")
    }
}

impl HttpConnector for CaptureClient {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let previous = self.request.lock().unwrap().replace(request);
        assert!(previous.is_none(), "the SDK sent more than one request");
        let response: HttpResponse = http::Response::builder()
            .status(200)
            .body(SdkBody::empty())
            .expect("a valid response")
            .try_into()
            .expect("an http 1.x response converts");
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for CaptureClient {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// Sends the case through the SDK and returns its request, as captured, with the
/// `x-amz-user-agent` values the interceptor removed.
async fn through_sdk(case: &Case) -> (Wire, Vec<String>) {
    let capture = CaptureClient::default();
    let strip = StripSdkUserAgent::default();
    let config = aws_sdk_bedrockagentcore::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(case.region))
        .credentials_provider(case.credentials())
        .http_client(capture.clone())
        .time_source(StaticTimeSource::new(fixed_time()))
        .retry_config(RetryConfig::disabled())
        .interceptor(strip.clone())
        .build();
    let client = aws_sdk_bedrockagentcore::Client::from_conf(config);
    let mut call = client
        .invoke_agent_runtime()
        .payload(Blob::new(case.body.to_vec()))
        .runtime_session_id(RUNTIME_SESSION)
        .set_qualifier(case.qualifier.map(str::to_owned));
    call = match case.target {
        Target::Arn(arn) => call.agent_runtime_arn(arn),
        Target::RuntimeId { id, account } => call.agent_runtime_arn(id).account_id(account),
    };
    call = case.members.apply(call);
    if let Some((method, name)) = case.derived_mcp {
        call = call.mcp_method(method).mcp_name(name);
    }
    call.send()
        .await
        .unwrap_or_else(|e| panic!("{}: the SDK call failed: {e:?}", case.name));

    let wire = Wire::from_sdk(&capture.expect_request());
    let removed = std::mem::take(&mut *strip.removed.lock().unwrap());
    (wire, removed)
}

/// Sends the case through our layer and returns the request it hands the service below.
async fn through_layer(case: &Case) -> Wire {
    let mut target = match case.target {
        Target::Arn(arn) => InvokeTarget::arn(arn),
        Target::RuntimeId { id, account } => InvokeTarget::runtime_id(id, account),
    };
    if let Some(qualifier) = case.qualifier {
        target = target.qualifier(qualifier);
    }
    if let Some(region) = case.our_region {
        target = target.region(region);
    }
    let time = fixed_time();
    let layer = SigV4InvokeLayer::builder(target, case.credentials())
        .runtime_session_id(RUNTIME_SESSION)
        .clock(move || time)
        .build()
        .unwrap_or_else(|e| panic!("{}: the layer is refused: {e}", case.name));

    let mut request = http::Request::post("http://ignored.invalid/mcp");
    for (name, value) in case.members.headers() {
        request = request.header(name, value);
    }
    let request = request
        .body(Full::new(case.body.clone()))
        .expect("a valid MCP request");
    through_our_layer(case.name, &layer, request).await
}

/// Asserts that our layer's request is the SDK's, as described in the module docs.
fn assert_same_request(case: &Case, ours: &Wire, sdk: &Wire, removed_user_agents: &[String]) {
    let name = case.name;

    // The interceptor ran after the SDK's user-agent interceptor, before signing.
    assert_eq!(
        removed_user_agents.len(),
        1,
        "{name}: the interceptor should remove exactly one `{X_AMZ_USER_AGENT}`: {removed_user_agents:?}"
    );
    assert!(
        removed_user_agents[0].starts_with("aws-sdk-rust/"),
        "{name}: removed {removed_user_agents:?}"
    );

    assert_eq!(ours.method, "POST", "{name}: method");
    assert_eq!(ours.method, sdk.method, "{name}: method");
    assert_eq!(ours.uri.scheme(), sdk.uri.scheme(), "{name}: scheme");
    assert_eq!(
        ours.uri.authority(),
        sdk.uri.authority(),
        "{name}: endpoint"
    );
    assert_eq!(ours.uri.path(), sdk.uri.path(), "{name}: path");
    assert_eq!(ours.uri.query(), sdk.uri.query(), "{name}: query");
    assert_eq!(ours.uri, sdk.uri, "{name}: URI");

    assert_same_signing(name, ours, sdk, ACCESS_KEY, case.region, case.session_token);
    let our_auth = ours.authorization("our layer");
    let sdk_auth = sdk.authorization("the SDK");
    let sdk_signed = sdk_auth.signed_header_names();
    assert_eq!(
        our_auth.signed_header_names(),
        sdk_signed,
        "{name}: SignedHeaders"
    );
    assert!(
        !sdk_signed.iter().any(|h| h == X_AMZ_USER_AGENT),
        "{name}: the SDK signed `{X_AMZ_USER_AGENT}` although it was removed before signing"
    );

    // Headers outside the signed set: ours may carry only what the SDK carries unsigned too
    // (`x-amzn-trace-id`), with the same value; the SDK carries only that and its own extras.
    let signed: BTreeSet<&str> = sdk_signed.iter().map(String::as_str).collect();
    let unsigned = |wire: &Wire| -> BTreeMap<String, String> {
        wire.headers
            .iter()
            .filter(|(h, _)| !signed.contains(h.as_str()) && h.as_str() != "authorization")
            .map(|(h, v)| (h.clone(), v.clone()))
            .collect()
    };
    let ours_unsigned = unsigned(ours);
    let mut sdk_unsigned = unsigned(sdk);
    let mut sdk_extras = BTreeSet::new();
    for extra in SDK_UNSIGNED_EXTRAS {
        if sdk_unsigned.remove(extra).is_some() {
            sdk_extras.insert(extra);
        }
    }
    assert_eq!(
        sdk_extras,
        BTreeSet::from(SDK_UNSIGNED_EXTRAS),
        "{name}: the SDK's unsigned extras changed"
    );
    assert_eq!(ours_unsigned, sdk_unsigned, "{name}: unsigned headers");
    assert!(
        ours_unsigned.keys().all(|h| h == "x-amzn-trace-id"),
        "{name}: unsigned headers other than x-amzn-trace-id: {ours_unsigned:?}"
    );

    assert_eq!(our_auth.signature, sdk_auth.signature, "{name}: signature");

    assert_same_body(name, ours, sdk, &case.body, "payload");
}

/// Runs one case through both and compares.
async fn check(case: Case) {
    let (sdk, removed) = through_sdk(&case).await;
    let ours = through_layer(&case).await;
    assert_same_request(&case, &ours, &sdk, &removed);
}

#[tokio::test]
async fn arn_with_colon_and_slash_no_qualifier_no_token() {
    let case = Case::us_east_1("arn");
    let (sdk, removed) = through_sdk(&case).await;
    let ours = through_layer(&case).await;
    // Pins the comparison to something non-trivial: the minimal signed set.
    assert_eq!(
        ours.authorization("our layer").signed_header_names(),
        [
            "accept",
            "content-length",
            "content-type",
            "host",
            "x-amz-date",
            "x-amzn-bedrock-agentcore-runtime-session-id"
        ]
    );
    assert_eq!(
        ours.uri.path(),
        "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fhosted_agent_x1y2z-AbCdEf1234/invocations"
    );
    assert_eq!(
        ours.header("content-type"),
        Some("application/octet-stream")
    );
    assert_same_request(&case, &ours, &sdk, &removed);
}

#[tokio::test]
async fn arn_with_qualifier_and_session_token_and_derived_mcp_headers() {
    check(Case {
        qualifier: Some("DEFAULT"),
        session_token: Some(SESSION_TOKEN),
        members: Members {
            content_type: Some("application/json"),
            accept: Some("application/json, text/event-stream"),
            ..Members::default()
        },
        derived_mcp: Some(("tools/call", "add")),
        body: Bytes::from_static(TOOLS_CALL_ADD.as_bytes()),
        ..Case::us_east_1("arn+qualifier+token")
    })
    .await;
}

#[tokio::test]
async fn arn_with_explicit_region_and_qualifier_no_token() {
    check(Case {
        our_region: Some("us-east-1"),
        qualifier: Some("prod_v2"),
        ..Case::us_east_1("arn+region+qualifier")
    })
    .await;
}

#[tokio::test]
async fn runtime_id_with_account_id_no_qualifier() {
    check(Case::runtime_id("runtime id+account")).await;
}

#[tokio::test]
async fn runtime_id_with_account_id_qualifier_and_session_token() {
    check(Case {
        qualifier: Some("DEFAULT"),
        session_token: Some(SESSION_TOKEN),
        derived_mcp: Some(("tools/call", "add")),
        body: Bytes::from_static(TOOLS_CALL_ADD.as_bytes()),
        ..Case::runtime_id("runtime id+account+qualifier+token")
    })
    .await;
}

#[tokio::test]
async fn other_region_read_from_the_arn() {
    check(Case {
        qualifier: Some("DEFAULT"),
        session_token: Some(SESSION_TOKEN),
        ..Case::new("eu-west-1 arn", Target::Arn(ARN_EU_WEST_1), "eu-west-1")
    })
    .await;
}

#[tokio::test]
async fn every_optional_header_set_explicitly() {
    check(Case {
        qualifier: Some("DEFAULT"),
        session_token: Some(SESSION_TOKEN),
        members: Members::all(),
        body: Bytes::from_static(TOOLS_CALL_ADD.as_bytes()),
        ..Case::us_east_1("every header")
    })
    .await;
}

#[tokio::test]
async fn empty_body() {
    check(Case {
        body: Bytes::new(),
        ..Case::us_east_1("empty body")
    })
    .await;
}

#[tokio::test]
async fn one_mib_body_with_derived_mcp_headers() {
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
    check(Case {
        session_token: Some(SESSION_TOKEN),
        members: Members {
            content_type: Some("application/json"),
            ..Members::default()
        },
        derived_mcp: Some(("tools/call", "echo")),
        body: tools_call_of_size(head, 1 << 20),
        ..Case::us_east_1("1 MiB body")
    })
    .await;
}
