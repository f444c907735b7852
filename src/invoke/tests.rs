//! The layer's own tests: one built from an AWS configuration, and a renewal read from the
//! request's extensions.

use std::convert::Infallible;
use std::sync::Mutex;

use aws_credential_types::Credentials;
#[cfg(feature = "aws-config")]
use aws_credential_types::provider::SharedCredentialsProvider;
use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use tower::{Layer, ServiceExt, service_fn};

use super::*;

#[cfg(feature = "aws-config")]
#[test]
fn a_signer_from_an_sdk_config_takes_what_the_target_leaves_open() {
    let config = aws_config::SdkConfig::builder()
        .region(aws_config::Region::new("eu-west-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKID", "secret", None, None, "test",
        )))
        .build();
    // A runtime id names no region: the configuration's.
    let signer = SigV4InvokeLayer::from_sdk_config(
        InvokeTarget::runtime_id("calc-AbC123", "123456789012"),
        &config,
    )
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(signer.target().region(), "eu-west-1");
    // An ARN names its own: it wins over the configuration's.
    let signer = SigV4InvokeLayer::from_sdk_config(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/calc-AbC123"),
        &config,
    )
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(signer.target().region(), "us-west-2");
    let bare = aws_config::SdkConfig::builder().build();
    assert_eq!(
        SigV4InvokeLayer::from_sdk_config(InvokeTarget::runtime_id("x", "123456789012"), &bare)
            .err(),
        Some(ConfigError::NoCredentials)
    );
}

/// An `initialize` carrying [`RenewedFrom`] goes to the expired MCP session's microVM, and
/// the new MCP session takes it over.
#[tokio::test]
async fn a_renewal_is_read_from_the_requests_extensions() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = service_fn({
        let seen = seen.clone();
        move |request: Request<Full<Bytes>>| {
            let runtime = request.headers()[RUNTIME_SESSION_ID]
                .to_str()
                .unwrap()
                .to_owned();
            let opens = !request.headers().contains_key("mcp-session-id");
            seen.lock().unwrap().push(runtime);
            let mut answer = Response::builder().status(200);
            if opens {
                answer = answer.header("mcp-session-id", "new");
            }
            async move { Ok::<_, Infallible>(answer.body(Full::new(Bytes::new())).unwrap()) }
        }
    });
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-AbC123"),
        Credentials::new("AKID", "secret", None, None, "test"),
    )
    .runtime_sessions(RuntimeSessions::PerMcpSession)
    .build()
    .unwrap();
    let service = signer.layer(server);
    let send = |mcp_session: Option<&str>, renewed_from: Option<&str>| {
        let mut request = Request::post("http://mcp.invalid/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(mcp_session) = mcp_session {
            request = request.header("mcp-session-id", mcp_session);
        }
        let mut request = request
            .body(Full::new(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            )))
            .unwrap();
        if let Some(old) = renewed_from {
            request.extensions_mut().insert(RenewedFrom(old.into()));
        }
        service.clone().oneshot(request)
    };
    send(Some("old"), None).await.unwrap();
    send(None, Some("old")).await.unwrap();
    send(Some("new"), None).await.unwrap();
    send(Some("old"), None).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen[1], seen[0],
        "the renewal goes to the old session's microVM"
    );
    assert_eq!(seen[2], seen[0], "and the new MCP session stays there");
    assert_ne!(
        seen[3], seen[0],
        "the old MCP session is bound to it no more"
    );
}

/// A runtime custom header (any case) is carried and signed, for the container; another header
/// is still dropped before signing; a value over 4 KB is refused.
#[tokio::test]
async fn a_runtime_custom_header_is_carried_signed_and_others_dropped() {
    let seen = Arc::new(Mutex::new(None));
    let server = service_fn({
        let seen = seen.clone();
        move |request: Request<Full<Bytes>>| {
            *seen.lock().unwrap() = Some(request.headers().clone());
            async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::new()))) }
        }
    });
    let signer = SigV4InvokeLayer::builder(
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-AbC123"),
        Credentials::new("AKID", "secret", None, None, "test"),
    )
    .build()
    .unwrap();
    let service = signer.layer(server);
    let send = |value: &str| {
        let request = Request::post("http://mcp.invalid/mcp")
            .header("content-type", "application/json")
            .header("X-Amzn-Bedrock-AgentCore-Runtime-Custom-Foo", value)
            .header("x-other", "dropped")
            .body(Full::new(Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            )))
            .unwrap();
        service.clone().oneshot(request)
    };
    send("bar").await.unwrap();
    let headers = seen.lock().unwrap().take().unwrap();
    assert_eq!(
        headers["x-amzn-bedrock-agentcore-runtime-custom-foo"],
        "bar"
    );
    assert!(!headers.contains_key("x-other"));
    let authorization = headers["authorization"].to_str().unwrap();
    let signed = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    assert!(
        signed
            .split(';')
            .any(|name| name == "x-amzn-bedrock-agentcore-runtime-custom-foo"),
        "{authorization}"
    );
    assert!(!signed.split(';').any(|name| name == "x-other"));
    let error = send(&"v".repeat(4097)).await.unwrap_err();
    assert!(error.to_string().contains("4096"), "{error}");
}
