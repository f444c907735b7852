//! The emulator's doors, driven over raw HTTP (no crate layers but where said): a runtime behind
//! OAuth bearer tokens, an AgentCore Gateway (SigV4 or bearer) with its MCP sessions, the SigV4
//! signing name, and MCP 2026-07-28 through both doors next to every earlier version. Each test
//! asserts the exact answers: statuses, challenges, documents, counters.

use crate::common::{Raw, http_client};
use crate::emulator::start;

use std::time::SystemTime;

use agentcore_tower::protocol::{self, ParamHeaders};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, Received};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

/// How a request authenticates itself.
#[derive(Clone)]
enum Door<'a> {
    None,
    Bearer(&'a str),
    SigV4 {
        credentials: &'a Credentials,
        service: &'a str,
    },
}

/// One request, with the door's credentials (SigV4 signed here with `aws_sigv4`, as the
/// emulator's verifier recomputes it).
fn build(
    method: Method,
    url: &str,
    extra: &[(&str, &str)],
    body: &str,
    door: Door<'_>,
) -> Request<Full<Bytes>> {
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().to_string();
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", &host);
    if !body.is_empty() {
        builder = builder
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
    }
    for (name, value) in extra {
        builder = builder.header(*name, *value);
    }
    if let Door::Bearer(token) = door {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let mut request = builder
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    if let Door::SigV4 {
        credentials,
        service,
    } = door
    {
        sign_request(&mut request, body.as_bytes(), credentials, service);
    }
    request
}

/// Sends one request ([`build`]), and reads the answer whole.
async fn send(
    method: Method,
    url: &str,
    extra: &[(&str, &str)],
    body: &str,
    door: Door<'_>,
) -> Raw {
    let request = build(method, url, extra, body, door);
    Raw::read(http_client().request(request).await.unwrap()).await
}

fn sign_request(
    request: &mut Request<Full<Bytes>>,
    body: &[u8],
    credentials: &Credentials,
    service: &str,
) {
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let signable = SignableRequest::new(
        request.method().as_str(),
        request.uri().to_string(),
        headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let identity: Identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(request);
}

/// A request to the emulator's gateway, with the `extra` headers (its MCP session's, say).
async fn gateway(
    emulator: &Emulator,
    method: Method,
    extra: &[(&str, &str)],
    body: &str,
    door: Door<'_>,
) -> Raw {
    send(method, &emulator.gateway_url(), extra, body, door).await
}

/// A GET of `url` with no credentials and no header of its own.
async fn get(url: &str) -> Raw {
    send(Method::GET, url, &[], "", Door::None).await
}

/// A POST of `body`, with no header of its own.
async fn post(url: &str, body: &str, door: Door<'_>) -> Raw {
    send(Method::POST, url, &[], body, door).await
}

/// A 401 whose challenge points at the runtime's protected resource metadata for `qualifier`.
#[track_caller]
fn assert_runtime_challenge(answer: &Raw, emulator: &Emulator, qualifier: &str) {
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{answer:?}");
    assert_eq!(
        answer.header("www-authenticate").unwrap(),
        format!(
            "Bearer resource_metadata=\"{}\"",
            runtime_metadata_url(emulator, qualifier)
        )
    );
}

fn rpc(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn initialize(id: u64) -> String {
    rpc(
        id,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
}

fn counter(id: u64) -> String {
    rpc(
        id,
        "tools/call",
        json!({"name": "counter", "arguments": {}}),
    )
}

/// The ARN as it goes in a path label: `:` and `/` percent-encoded.
fn escaped(arn: &str) -> String {
    arn.replace(':', "%3A").replace('/', "%2F")
}

fn invocations(emulator: &Emulator, query: &str) -> String {
    format!(
        "{}/runtimes/{}/invocations{query}",
        emulator.endpoint(),
        escaped(emulator.runtime_arn())
    )
}

fn runtime_metadata_url(emulator: &Emulator, qualifier: &str) -> String {
    format!(
        "{}/runtimes/{}/invocations/.well-known/oauth-protected-resource?qualifier={qualifier}",
        emulator.endpoint(),
        escaped(emulator.runtime_arn())
    )
}

fn sigv4(credentials: &Credentials) -> Door<'_> {
    Door::SigV4 {
        credentials,
        service: "bedrock-agentcore",
    }
}

fn first_credentials() -> Credentials {
    Credentials::new(
        "AKIDFIRST",
        "first-secret",
        Some("first-session-token".to_owned()),
        None,
        "test",
    )
}

fn second_credentials() -> Credentials {
    Credentials::new("AKIDSECOND", "second-secret", None, None, "test")
}

fn last(emulator: &Emulator) -> Received {
    emulator.audit().received.last().unwrap().clone()
}

// ---- OAuth runtime ----

#[tokio::test]
async fn an_oauth_runtime_challenges_a_request_without_a_token_and_runs_nothing() {
    let emulator = start(EmulatorConfig::default().bearer_tokens(["token-a"])).await;
    for (query, qualifier) in [
        ("?qualifier=DEFAULT", "DEFAULT"),
        ("", "DEFAULT"),
        ("?qualifier=prod", "prod"),
    ] {
        let answer = post(&invocations(&emulator, query), &counter(1), Door::None).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{query}");
        assert_eq!(
            answer.header("www-authenticate").unwrap(),
            format!(
                "Bearer resource_metadata=\"{}\"",
                runtime_metadata_url(&emulator, qualifier)
            )
        );
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(
            answer.json(),
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Missing Authentication Token"}})
        );
        assert!(
            answer
                .header("x-amzn-bedrock-agentcore-runtime-session-id")
                .is_none()
        );
    }
    let audit = emulator.audit();
    assert_eq!(audit.unauthorized, 3);
    assert_eq!(audit.executions_of("counter"), 0);
    assert_eq!(
        audit.sessions_started, 0,
        "no runtime session for a refused request"
    );
    assert_eq!(emulator.counter(), 0);
    let received = last(&emulator);
    assert_eq!(received.operation.as_deref(), Some("invocations"));
    assert_eq!(received.authorization, None);
    assert!(!received.bearer_accepted && !received.signed);
}

#[tokio::test]
async fn an_oauth_runtime_takes_an_accepted_token_and_refuses_another() {
    let emulator = start(EmulatorConfig::default().bearer_tokens(["token-a", "token-b"])).await;
    let url = emulator.invocations_url();

    let wrong = post(&url, &counter(1), Door::Bearer("not-a-token")).await;
    assert_runtime_challenge(&wrong, &emulator, "DEFAULT");
    assert_eq!(wrong.json()["error"]["code"], -32001);
    let received = last(&emulator);
    assert_eq!(received.authorization, Some("bearer"));
    assert!(!received.bearer_accepted);
    assert_eq!(emulator.counter(), 0);

    for (id, token) in [(2, "token-a"), (3, "token-b")] {
        let answer = post(&url, &counter(id), Door::Bearer(token)).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        assert_eq!(
            answer.json()["result"]["content"][0]["text"],
            (id - 1).to_string()
        );
        assert!(
            answer
                .header("x-amzn-bedrock-agentcore-runtime-session-id")
                .is_some(),
            "a bearer runtime still has runtime sessions"
        );
        let received = last(&emulator);
        assert_eq!(received.authorization, Some("bearer"));
        assert!(received.bearer_accepted);
        assert!(!received.signed);
    }
    let audit = emulator.audit();
    assert_eq!(audit.unauthorized, 1);
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!(audit.sessions_started, 2);

    // No token anywhere the test can read: not in the audit, not in either Debug.
    let shown = format!("{audit:?} {emulator:?}");
    for token in ["token-a", "token-b", "not-a-token"] {
        assert!(!shown.contains(token), "{token} in {shown}");
    }
    assert!(format!("{emulator:?}").contains("bearer_tokens: Some(2)"));
}

#[tokio::test]
async fn a_runtime_refuses_the_other_door_with_a_403_and_no_challenge() {
    // SigV4 to a bearer runtime.
    let oauth = start(EmulatorConfig::default().bearer_tokens(["token-a"])).await;
    let signed = post(
        &oauth.invocations_url(),
        &counter(1),
        sigv4(&oauth.credentials()),
    )
    .await;
    // A bearer token to a SigV4 runtime.
    let iam = start(EmulatorConfig::default()).await;
    let bearer = post(&iam.invocations_url(), &counter(1), Door::Bearer("token-a")).await;
    for (emulator, answer, scheme) in [(&oauth, &signed, "sigv4"), (&iam, &bearer, "bearer")] {
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{scheme}");
        assert!(answer.header("www-authenticate").is_none());
        assert!(
            answer
                .header("x-amzn-errortype")
                .unwrap()
                .starts_with("AccessDeniedException:")
        );
        assert!(
            answer.json()["message"]
                .as_str()
                .unwrap()
                .starts_with("Authorization method mismatch.")
        );
        let audit = emulator.audit();
        assert_eq!(audit.auth_method_mismatches, 1);
        assert_eq!(audit.unauthorized, 0);
        assert_eq!(audit.executions_of("counter"), 0);
        assert_eq!(last(emulator).authorization, Some(scheme));
    }
}

#[tokio::test]
async fn an_oauth_runtime_serves_its_protected_resource_metadata_without_auth() {
    let emulator = start(
        EmulatorConfig::default()
            .bearer_tokens(["token-a"])
            .issuer("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"),
    )
    .await;
    for qualifier in ["DEFAULT", "prod"] {
        let answer = get(&runtime_metadata_url(&emulator, qualifier)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(
            answer.json(),
            json!({
                "resource": invocations(&emulator, &format!("?qualifier={qualifier}")),
                "authorization_servers": ["https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"],
                "bearer_methods_supported": ["header"],
            })
        );
        assert_eq!(
            last(&emulator).operation.as_deref(),
            Some("oauth-protected-resource")
        );
    }
    // The default issuer, and another runtime's document is not there.
    let default = start(EmulatorConfig::default().bearer_tokens(["t"])).await;
    let answer = get(&runtime_metadata_url(&default, "DEFAULT")).await;
    assert_eq!(
        answer.json()["authorization_servers"],
        json!(["https://issuer.example/emulator"])
    );
    let other = format!(
        "{}/runtimes/{}/invocations/.well-known/oauth-protected-resource",
        default.endpoint(),
        escaped("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/other-XyZ")
    );
    let answer = get(&other).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(emulator.audit().unauthorized, 0);
}

#[tokio::test]
async fn a_token_swapped_at_run_time_makes_the_old_one_stale() {
    let emulator = start(EmulatorConfig::default().bearer_tokens(["old-token"])).await;
    let url = emulator.invocations_url();
    let first = post(&url, &counter(1), Door::Bearer("old-token")).await;
    assert_eq!(first.status, StatusCode::OK);

    emulator.set_bearer_tokens(["new-token"]);
    let stale = post(&url, &counter(2), Door::Bearer("old-token")).await;
    assert_runtime_challenge(&stale, &emulator, "DEFAULT");
    let refreshed = post(&url, &counter(3), Door::Bearer("new-token")).await;
    assert_eq!(refreshed.status, StatusCode::OK);
    assert_eq!(refreshed.json()["result"]["content"][0]["text"], "2");

    let audit = emulator.audit();
    assert_eq!(audit.unauthorized, 1);
    assert_eq!(
        audit.executions_of("counter"),
        2,
        "the stale call ran nothing"
    );
    assert_eq!(
        audit
            .executions_by_id
            .get(&("counter".to_owned(), "2".to_owned())),
        None
    );
}

#[tokio::test]
async fn an_oauth_runtime_stops_a_session_for_a_token_only() {
    let emulator = start(EmulatorConfig::default().bearer_tokens(["token-a"])).await;
    let session = "a-runtime-session-of-thirty-three-or-more";
    let session_header = [("x-amzn-bedrock-agentcore-runtime-session-id", session)];
    let answer = send(
        Method::POST,
        &emulator.invocations_url(),
        &session_header,
        &counter(1),
        Door::Bearer("token-a"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let stop = format!(
        "{}/runtimes/{}/stopruntimesession?qualifier=DEFAULT",
        emulator.endpoint(),
        escaped(emulator.runtime_arn())
    );
    let body = r#"{"clientToken":"ce9895cb-cf9f-4d5b-9b8c-24b6b7ec9f08"}"#;
    let unsigned = send(Method::POST, &stop, &session_header, body, Door::None).await;
    assert_eq!(unsigned.status, StatusCode::UNAUTHORIZED);
    let signed = send(
        Method::POST,
        &stop,
        &session_header,
        body,
        sigv4(&emulator.credentials()),
    )
    .await;
    assert_eq!(signed.status, StatusCode::FORBIDDEN);
    let stopped = send(
        Method::POST,
        &stop,
        &session_header,
        body,
        Door::Bearer("token-a"),
    )
    .await;
    assert_eq!(stopped.status, StatusCode::OK);
    let audit = emulator.audit();
    assert_eq!(audit.sessions_stopped, 1);
    assert_eq!(audit.unauthorized, 1);
    assert_eq!(audit.auth_method_mismatches, 1);
}

// ---- Gateway ----

/// `initialize` through the gateway; the `Mcp-Session-Id` it answered.
async fn open_session(emulator: &Emulator, door: Door<'_>) -> String {
    let answer = post(&emulator.gateway_url(), &initialize(1), door).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(
        answer.json()["result"]["serverInfo"]["name"],
        "agentcore-tower-emulator"
    );
    answer.header("mcp-session-id").unwrap().to_owned()
}

/// An emulated SigV4 gateway, its credentials, and an MCP session opened with them.
async fn sigv4_gateway_session() -> (Emulator, Credentials, String) {
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let mine = emulator.credentials();
    let session = open_session(&emulator, sigv4(&mine)).await;
    (emulator, mine, session)
}

#[tokio::test]
async fn a_gateway_serves_plain_mcp_within_its_sessions() {
    let emulator = start(
        EmulatorConfig::default()
            .gateway(true)
            .credentials([first_credentials(), second_credentials()]),
    )
    .await;
    assert_eq!(
        emulator.gateway_url(),
        format!("{}/mcp", emulator.endpoint())
    );
    let mine = emulator.credentials();
    let session = open_session(&emulator, sigv4(&mine)).await;
    let other_session = open_session(&emulator, sigv4(&mine)).await;
    assert_ne!(
        session, other_session,
        "every initialize opens a new session"
    );

    let with = [("mcp-session-id", session.as_str())];
    let call = gateway(&emulator, Method::POST, &with, &counter(2), sigv4(&mine)).await;
    assert_eq!(call.status, StatusCode::OK, "{}", call.text);
    assert_eq!(call.json()["result"]["content"][0]["text"], "1");
    assert!(
        call.header("x-amzn-bedrock-agentcore-runtime-session-id")
            .is_none(),
        "no runtime sessions at a gateway"
    );
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let accepted = gateway(&emulator, Method::POST, &with, &notification, sigv4(&mine)).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED);
    let received = last(&emulator);
    assert_eq!(received.operation.as_deref(), Some("mcp"));
    assert_eq!(received.authorization, Some("sigv4"));
    assert!(received.signed);
    assert_eq!(received.mcp_session_id.as_deref(), Some(session.as_str()));

    // No session header: 400, nothing runs.
    let missing = post(&emulator.gateway_url(), &counter(3), sigv4(&mine)).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        missing.json()["error"]["message"],
        "Missing required Mcp-Session-Id header"
    );
    assert_eq!(missing.json()["id"], 3);
    // An id the gateway never issued: 404.
    let unknown = send(
        Method::POST,
        &emulator.gateway_url(),
        &[("mcp-session-id", "never-issued")],
        &counter(4),
        sigv4(&mine),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        unknown.json()["error"]["message"],
        "Session not found or expired"
    );
    // Another principal's session: 404, as unknown.
    let second = second_credentials();
    let hijack = gateway(&emulator, Method::POST, &with, &counter(5), sigv4(&second)).await;
    assert_eq!(hijack.status, StatusCode::NOT_FOUND);
    assert_eq!(hijack.text, unknown.text.replace("\"id\":4", "\"id\":5"));

    let audit = emulator.audit();
    assert_eq!(audit.mcp_sessions_started, 2);
    assert_eq!(audit.mcp_session_refusals, 3);
    assert_eq!(audit.executions_of("counter"), 1);
    assert_eq!(audit.sessions_started, 0, "no runtime sessions");
    assert_eq!(audit.unauthorized, 0);
}

#[tokio::test]
async fn a_gateway_session_expires_and_ends() {
    let (emulator, mine, session) = sigv4_gateway_session().await;
    let with = [("mcp-session-id", session.as_str())];
    let list = rpc(2, "tools/list", json!({}));
    let listed = gateway(&emulator, Method::POST, &with, &list, sigv4(&mine)).await;
    assert_eq!(listed.status, StatusCode::OK);

    emulator.expire_mcp_sessions();
    let expired = gateway(&emulator, Method::POST, &with, &list, sigv4(&mine)).await;
    assert_eq!(expired.status, StatusCode::NOT_FOUND);
    let gone = gateway(&emulator, Method::DELETE, &with, "", sigv4(&mine)).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);

    // A new session, ended by DELETE: then 404 too.
    let session = open_session(&emulator, sigv4(&mine)).await;
    let with = [("mcp-session-id", session.as_str())];
    let ended = gateway(&emulator, Method::DELETE, &with, "", sigv4(&mine)).await;
    assert_eq!(ended.status, StatusCode::OK);
    assert_eq!(ended.text, "");
    assert_eq!(last(&emulator).http_method, "DELETE");
    let after = gateway(&emulator, Method::POST, &with, &list, sigv4(&mine)).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    let no_header = gateway(&emulator, Method::DELETE, &[], "", sigv4(&mine)).await;
    assert_eq!(no_header.status, StatusCode::BAD_REQUEST);

    // No server-initiated stream.
    let get = gateway(&emulator, Method::GET, &with, "", sigv4(&mine)).await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.header("allow"), Some("POST, DELETE"));

    let audit = emulator.audit();
    assert_eq!(audit.mcp_sessions_started, 2);
    assert_eq!(audit.mcp_sessions_ended, 1);
    assert_eq!(audit.mcp_session_refusals, 4);
}

#[tokio::test]
async fn a_gateway_applies_faults_to_tool_calls() {
    let (emulator, mine, session) = sigv4_gateway_session().await;
    let with = [("mcp-session-id", session.as_str())];
    emulator.push_fault(Fault::Throttle { retry_after: None });
    let throttled = gateway(&emulator, Method::POST, &with, &counter(2), sigv4(&mine)).await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS);
    let ran = gateway(&emulator, Method::POST, &with, &counter(3), sigv4(&mine)).await;
    assert_eq!(ran.status, StatusCode::OK);
    let audit = emulator.audit();
    assert_eq!(audit.throttled, 1);
    assert_eq!(audit.executions_of("counter"), 1);
}

#[tokio::test]
async fn a_bearer_gateway_challenges_serves_its_metadata_and_scopes_sessions_to_tokens() {
    let emulator = start(
        EmulatorConfig::default()
            .gateway(true)
            .bearer_tokens(["token-a", "token-b"]),
    )
    .await;
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
        emulator.endpoint()
    );
    let signed = emulator.credentials();
    for (door, scheme) in [
        (Door::None, None),
        (Door::Bearer("not-a-token"), Some("bearer")),
        // A SigV4-signed request is answered as one without a token.
        (sigv4(&signed), Some("sigv4")),
    ] {
        let answer = post(&emulator.gateway_url(), &initialize(1), door).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{scheme:?}");
        assert_eq!(answer.header("www-authenticate"), Some(challenge.as_str()));
        assert_eq!(
            answer.json(),
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Invalid Bearer token"}})
        );
        assert!(answer.header("mcp-session-id").is_none());
        assert_eq!(last(&emulator).authorization, scheme);
    }
    let metadata = get(&format!(
        "{}/.well-known/oauth-protected-resource",
        emulator.endpoint()
    ))
    .await;
    assert_eq!(metadata.status, StatusCode::OK);
    assert_eq!(
        metadata.json(),
        json!({
            "resource": emulator.gateway_url(),
            "authorization_servers": ["https://issuer.example/emulator"],
            "bearer_methods_supported": ["header"],
        })
    );

    let session = open_session(&emulator, Door::Bearer("token-a")).await;
    let with = [("mcp-session-id", session.as_str())];
    let call = gateway(
        &emulator,
        Method::POST,
        &with,
        &counter(2),
        Door::Bearer("token-a"),
    )
    .await;
    assert_eq!(call.status, StatusCode::OK);
    assert!(last(&emulator).bearer_accepted);
    // Another accepted token is another principal: its session is not this one.
    let other = gateway(
        &emulator,
        Method::POST,
        &with,
        &counter(3),
        Door::Bearer("token-b"),
    )
    .await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);

    let audit = emulator.audit();
    assert_eq!(audit.unauthorized, 3);
    assert_eq!(audit.mcp_session_refusals, 1);
    assert_eq!(audit.executions_of("counter"), 1);
    assert_eq!(audit.signature_failures, 0);
    let shown = format!("{audit:?} {emulator:?}");
    assert!(!shown.contains("token-a") && !shown.contains("token-b"));
}

#[tokio::test]
async fn a_gateway_scopes_a_jwts_sessions_to_its_subject() {
    use base64::Engine;
    // A JWT by its claims (the emulator reads the payload; the signature part is opaque).
    let jwt = |claims: &str| {
        let encode = |part: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(part);
        format!(
            "{}.{}.c2lnbmF0dXJl",
            encode(r#"{"alg":"RS256"}"#),
            encode(claims)
        )
    };
    let first = jwt(r#"{"sub":"user-1","exp":4102444800,"jti":"a"}"#);
    let refreshed = jwt(r#"{"sub":"user-1","exp":4102448400,"jti":"b"}"#);
    let other_user = jwt(r#"{"sub":"user-2","exp":4102444800}"#);
    let no_subject = jwt(r#"{"exp":4102444800,"jti":"c"}"#);
    let emulator = start(EmulatorConfig::default().gateway(true).bearer_tokens([
        first.clone(),
        refreshed.clone(),
        other_user.clone(),
        no_subject.clone(),
    ]))
    .await;
    let session = open_session(&emulator, Door::Bearer(&first)).await;
    let with = [("mcp-session-id", session.as_str())];
    let status = |token: &str, id: u64| {
        let (with, token) = (with, token.to_owned());
        let emulator = &emulator;
        async move {
            gateway(
                emulator,
                Method::POST,
                &with,
                &counter(id),
                Door::Bearer(&token),
            )
            .await
            .status
        }
    };
    // The same user with a refreshed token: the same session, as AWS scopes it.
    assert_eq!(status(&first, 2).await, StatusCode::OK);
    assert_eq!(status(&refreshed, 3).await, StatusCode::OK);
    // Another user, or a JWT without a subject (a principal of its own): not this session.
    assert_eq!(status(&other_user, 4).await, StatusCode::NOT_FOUND);
    assert_eq!(status(&no_subject, 5).await, StatusCode::NOT_FOUND);
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!(audit.mcp_session_refusals, 2);
}

// ---- Signing name ----

#[tokio::test]
async fn the_signing_name_is_the_one_checked_in_either_mode() {
    // An API Gateway (`execute-api`) in front of an MCP server at /mcp.
    let gateway = start(
        EmulatorConfig::default()
            .gateway(true)
            .signing_name("execute-api"),
    )
    .await;
    let credentials = gateway.credentials();
    let wrong = post(&gateway.gateway_url(), &initialize(1), sigv4(&credentials)).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert!(
        wrong
            .header("x-amzn-errortype")
            .unwrap()
            .starts_with("InvalidSignatureException:")
    );
    assert!(!last(&gateway).signed);
    let right = post(
        &gateway.gateway_url(),
        &initialize(1),
        Door::SigV4 {
            credentials: &credentials,
            service: "execute-api",
        },
    )
    .await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.text);
    assert!(right.header("mcp-session-id").is_some());
    assert!(last(&gateway).signed);
    assert_eq!(gateway.audit().signature_failures, 1);

    // The runtime checks its default, `bedrock-agentcore`.
    let runtime = start(EmulatorConfig::default()).await;
    let credentials = runtime.credentials();
    let wrong = post(
        &runtime.invocations_url(),
        &counter(1),
        Door::SigV4 {
            credentials: &credentials,
            service: "execute-api",
        },
    )
    .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let right = post(&runtime.invocations_url(), &counter(2), sigv4(&credentials)).await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.text);
    assert_eq!(runtime.audit().executions_of("counter"), 1);
}

// ---- MCP 2026-07-28 ----

const RUNTIME_SESSION: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
const SESSION_A: &str = "doors-runtime-session-a-000000000000000001";
const SESSION_B: &str = "doors-runtime-session-b-000000000000000002";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` a 2026-07-28 client puts on every request; with `tasks`, its capabilities
/// declare the tasks extension.
fn client_meta(tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "doors", "version": "1"},
    })
}

/// A 2026-07-28 request: `params` with the client's `_meta`.
fn modern(id: u64, method: &str, params: Value) -> Value {
    modern_with(id, method, params, false)
}

fn modern_with(id: u64, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = client_meta(tasks);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a 2026-07-28 client writes for `message` (its version, `Mcp-Method`, `Mcp-Name`,
/// and the `Mcp-Param-*` of the listing `params` learned), as owned pairs.
fn modern_headers(message: &Value, params: Option<&ParamHeaders>) -> Vec<(String, String)> {
    let mut headers = vec![(
        "mcp-protocol-version".to_owned(),
        protocol::version_in_meta(message).unwrap().to_owned(),
    )];
    for (name, value) in &protocol::request_headers(message, params) {
        headers.push((name.to_string(), value.to_str().unwrap().to_owned()));
    }
    headers
}

/// Replaces (or, with `None`, removes) a header among `headers`.
fn with_header(
    mut headers: Vec<(String, String)>,
    name: &str,
    value: Option<&str>,
) -> Vec<(String, String)> {
    headers.retain(|(n, _)| n != name);
    if let Some(value) = value {
        headers.push((name.to_owned(), value.to_owned()));
    }
    headers
}

fn borrowed(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

/// A POST of `message` with `headers` (and no others of the MCP's) to `url`, SigV4-signed.
async fn post_with(
    emulator: &Emulator,
    url: &str,
    headers: &[(String, String)],
    message: &Value,
) -> Raw {
    let credentials = emulator.credentials();
    send(
        Method::POST,
        url,
        &borrowed(headers),
        &message.to_string(),
        sigv4(&credentials),
    )
    .await
}

/// A 2026-07-28 request to the runtime, in runtime session `session`, with the headers its
/// client writes.
async fn runtime_modern(emulator: &Emulator, session: &str, message: &Value) -> Raw {
    let headers = with_header(
        modern_headers(message, Some(&listing())),
        RUNTIME_SESSION,
        Some(session),
    );
    runtime_post(emulator, &headers, message).await
}

/// A POST of `message` with `headers` to the runtime's invocations (its default endpoint),
/// SigV4-signed.
async fn runtime_post(emulator: &Emulator, headers: &[(String, String)], message: &Value) -> Raw {
    let url = invocations(emulator, "?qualifier=DEFAULT");
    post_with(emulator, &url, headers, message).await
}

/// What a 2026-07-28 client learns of the emulator's `x-mcp-header` annotations from its
/// listing.
fn listing() -> ParamHeaders {
    let mut params = ParamHeaders::default();
    params.learn(&json!({"tools": [{"name": "weather", "inputSchema": {"type": "object",
        "properties": {"city": {"type": "string", "x-mcp-header": "City"}}, "required": ["city"]}}]}));
    params
}

/// The JSON-RPC error of an answer: its code and message.
fn rpc_error(answer: &Raw) -> (i64, String) {
    let error = &answer.json()["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{answer:?}")),
        error["message"].as_str().unwrap().to_owned(),
    )
}

/// The text of a tool result.
fn tool_text(answer: &Raw) -> String {
    answer.json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no tool text: {answer:?}"))
        .to_owned()
}

#[tokio::test]
async fn server_discover_is_answered_in_2026_and_unknown_to_a_legacy_request_and_a_2025_server() {
    let emulator = start(EmulatorConfig::default()).await;
    let discover = modern(1, "server/discover", json!({}));
    let answer = runtime_modern(&emulator, SESSION_A, &discover).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete",
            "supportedVersions": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "extensions": {TASKS: {}}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {
                "name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")}},
        }})
    );
    assert!(answer.header("mcp-session-id").is_none(), "no MCP session");
    assert_eq!(answer.header(RUNTIME_SESSION), Some(SESSION_A));

    // The same at a gateway: no MCP session needed (none held here), none issued.
    let gateway = start(EmulatorConfig::default().gateway(true)).await;
    let headers = modern_headers(&discover, None);
    let answer = post_with(&gateway, &gateway.gateway_url(), &headers, &discover).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json()["result"]["supportedVersions"][4],
        "2026-07-28"
    );
    assert!(answer.header("mcp-session-id").is_none());
    assert_eq!(gateway.audit().mcp_session_refusals, 0);

    // Sent as a request of the `initialize` era (no 2026-07-28 header, no `_meta` version):
    // the method is not known, as to a 2025 server, and a client in auto mode falls back.
    let legacy = json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}});
    let answer = runtime_post(&emulator, &[], &legacy).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found: server/discover"}})
    );

    // An emulator of the `initialize` era: the 2026-07-28 probe meets the 400 of a 2025 SDK
    // server for a version it does not speak; without the header, an unknown method.
    let old = start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await;
    let old_url = old.invocations_url();
    let answer = post_with(&old, &old_url, &modern_headers(&discover, None), &discover).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message":
            "Bad Request: Unsupported protocol version: 2026-07-28 (supported versions: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"}})
    );
    // `_meta` alone is no 2026-07-28 to it: the method is unknown.
    let answer = post_with(&old, &old_url, &[], &discover).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(rpc_error(&answer).0, -32601);
    // Nor does it check the standard headers of what it takes as its own era's.
    let call = modern(3, "tools/call", json!({"name": "counter", "arguments": {}}));
    let headers = vec![("mcp-name".to_owned(), "not-counter".to_owned())];
    let answer = post_with(&old, &old_url, &headers, &call).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(tool_text(&answer), "1");
    assert!(answer.json()["result"].get("resultType").is_none());
    assert_eq!(old.audit().header_mismatches, 0);
    assert_eq!(emulator.audit().header_mismatches, 0);
}

#[tokio::test]
async fn a_2026_request_whose_headers_disagree_with_its_body_is_a_400_and_runs_nothing() {
    // Stateful: a request of the `initialize` era needs an MCP session here; one of 2026-07-28
    // needs none.
    let emulator = start(EmulatorConfig::default().stateful(true)).await;
    let url = emulator.invocations_url();
    let call = modern(1, "tools/call", json!({"name": "counter", "arguments": {}}));
    let good = with_header(
        modern_headers(&call, None),
        RUNTIME_SESSION,
        Some(SESSION_A),
    );
    // What is wrong, the headers sent, the message of the -32020.
    type Case = (&'static str, Vec<(String, String)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "another tool named",
            with_header(good.clone(), "mcp-name", Some("add")),
            "mcp-name `add` does not match the body's `counter`",
        ),
        (
            "no Mcp-Method",
            with_header(good.clone(), "mcp-method", None),
            "mcp-method is missing (the body says `tools/call`)",
        ),
        (
            "another version in the header",
            with_header(good.clone(), "mcp-protocol-version", Some("2025-11-25")),
            "mcp-protocol-version `2025-11-25` does not match the body's `2026-07-28`",
        ),
        (
            "no version header",
            with_header(good.clone(), "mcp-protocol-version", None),
            "mcp-protocol-version is missing (the body says `2026-07-28`)",
        ),
    ];
    for (case, headers, message) in &cases {
        let answer = post_with(&emulator, &url, headers, &call).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{case}: {answer:?}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(
            answer.json(),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": message}}),
            "{case}"
        );
    }
    assert_eq!(emulator.counter(), 0, "nothing ran");
    assert_eq!(emulator.audit().header_mismatches, 4);

    // A 2026-07-28 header, and a body without `_meta`: the request names no version of its own.
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "counter", "arguments": {}}});
    let answer = post_with(&emulator, &url, &good, &bare).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(rpc_error(&answer), (-32602, "Invalid params: request _meta is missing or has malformed required fields: io.modelcontextprotocol/protocolVersion, io.modelcontextprotocol/clientCapabilities".to_owned()));
    // A version not spoken here.
    let mut future = call.clone();
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    let headers = with_header(good.clone(), "mcp-protocol-version", Some("2027-01-01"));
    let answer = post_with(&emulator, &url, &headers, &future).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.json()["error"],
        json!({"code": -32022, "message": "Unsupported protocol version", "data": {
            "requested": "2027-01-01",
            "supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]}})
    );
    // No `clientCapabilities`.
    let mut anonymous = call.clone();
    anonymous["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let answer = post_with(&emulator, &url, &good, &anonymous).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(rpc_error(&answer), (-32602, "Invalid params: request _meta is missing or has malformed required fields: io.modelcontextprotocol/clientCapabilities".to_owned()));
    // A method the revision does not have: 404.
    let ping = modern(3, "ping", json!({}));
    let answer = runtime_modern(&emulator, SESSION_A, &ping).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found: ping"}})
    );
    assert_eq!(emulator.counter(), 0, "nothing ran");

    // Agreeing headers: the call runs once, in no MCP session even at a stateful server.
    let answer = post_with(&emulator, &url, &good, &call).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "1"}], "isError": false, "resultType": "complete"}})
    );
    assert!(answer.header("mcp-session-id").is_none());
    // A stale `Mcp-Session-Id` is ignored, not refused.
    let stale = with_header(good.clone(), "mcp-session-id", Some("never-issued"));
    let answer = post_with(&emulator, &url, &stale, &call).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("counter"), 2);
    assert_eq!(audit.mcp_session_refusals, 0);
    assert_eq!(audit.mcp_sessions_started, 0);
    assert_eq!(audit.header_mismatches, 4);
    // The same call of the `initialize` era is refused for its missing MCP session, as before.
    let legacy = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "counter", "arguments": {}}});
    let answer = post_with(&emulator, &url, &[], &legacy).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(emulator.counter(), 2);
}

#[tokio::test]
async fn a_2026_tool_listing_carries_its_caching_hints_and_mcp_param_headers_are_checked() {
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let url = emulator.gateway_url();
    let list = modern(1, "tools/list", json!({}));
    let answer = post_with(&emulator, &url, &modern_headers(&list, None), &list).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let result = &answer.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "add", "echo", "counter", "confirm", "weather", "slow_job", "long_job"
        ]
    );
    // What the client learns from this listing is what the server checks.
    let mut params = ParamHeaders::default();
    params.learn(result);
    assert!(params.annotates("weather"));

    let call = |id: u64, city: &str| {
        modern(
            id,
            "tools/call",
            json!({"name": "weather", "arguments": {"city": city}}),
        )
    };
    let zurich = call(2, "Zürich");
    let headers = modern_headers(&zurich, Some(&params));
    assert!(
        headers.contains(&(
            "mcp-param-city".to_owned(),
            "=?base64?WsO8cmljaA==?=".to_owned()
        )),
        "{headers:?}"
    );
    for (case, headers, message) in [
        (
            "no Mcp-Param-City",
            with_header(headers.clone(), "mcp-param-city", None),
            "mcp-param-city is missing (the body says `Zürich`)",
        ),
        (
            "another city",
            with_header(headers.clone(), "mcp-param-city", Some("Bern")),
            "mcp-param-city `Bern` does not match the body's `Zürich`",
        ),
    ] {
        let answer = post_with(&emulator, &url, &headers, &zurich).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{case}");
        assert_eq!(rpc_error(&answer), (-32020, message.to_owned()), "{case}");
    }
    assert_eq!(emulator.audit().executions_of("weather"), 0, "nothing ran");
    let answer = post_with(&emulator, &url, &headers, &zurich).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(tool_text(&answer), "Sunny in Zürich");
    assert_eq!(answer.json()["result"]["resultType"], "complete");
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("weather"), 1);
    assert_eq!(audit.header_mismatches, 2);
    assert_eq!(audit.mcp_sessions_started, 0);

    // The listing of the `initialize` era is as it was: three tools, no 2026-07-28 fields.
    let session = open_session(&emulator, sigv4(&emulator.credentials())).await;
    let with = vec![
        ("mcp-session-id".to_owned(), session),
        ("mcp-protocol-version".to_owned(), "2025-06-18".to_owned()),
    ];
    let legacy = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    let answer = post_with(&emulator, &url, &with, &legacy).await;
    let result = &answer.json()["result"];
    assert_eq!(result["tools"].as_array().unwrap().len(), 3, "{result}");
    assert!(result.get("resultType").is_none() && result.get("ttlMs").is_none());
    // A tool of 2026-07-28 called by name in that era: no header checks; it runs.
    let legacy_call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "weather", "arguments": {"city": "Bern"}}});
    let answer = post_with(&emulator, &url, &with, &legacy_call).await;
    assert_eq!(tool_text(&answer), "Sunny in Bern");
    assert_eq!(emulator.audit().executions_of("weather"), 2);
}

#[tokio::test]
async fn a_confirm_round_trip_runs_once_and_its_first_leg_runs_nothing() {
    let emulator = start(EmulatorConfig::default()).await;
    let first = modern(
        1,
        "tools/call",
        json!({"name": "confirm", "arguments": {"action": "deploy"}}),
    );
    let answer = runtime_modern(&emulator, SESSION_A, &first).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let result = answer.json()["result"].clone();
    let request_state = result["requestState"].as_str().unwrap().to_owned();
    assert_eq!(
        result,
        json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": "Confirm deploy?",
                "requestedSchema": {"type": "object",
                    "properties": {"confirmed": {"type": "boolean", "title": "Confirm"}},
                    "required": ["confirmed"]},
            }}},
            "requestState": request_state,
        })
    );
    let audit = emulator.audit();
    assert_eq!(
        audit.executions_of("confirm"),
        0,
        "the first leg runs nothing"
    );
    assert_eq!(audit.inputs_required, 1);

    // The client asks the user, then sends the request again with the answer and the state.
    let again = |id: u64, state: Option<&str>, answer: Value| {
        let mut params = json!({"name": "confirm", "arguments": {"action": "deploy"},
            "inputResponses": {"confirm": answer}});
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        modern(id, "tools/call", params)
    };
    let accept = json!({"action": "accept", "content": {"confirmed": true}});
    let answer = runtime_modern(
        &emulator,
        SESSION_A,
        &again(2, Some(&request_state), accept.clone()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json()["result"],
        json!({"content": [{"type": "text", "text": "confirmed: deploy"}], "isError": false, "resultType": "complete"})
    );
    assert_eq!(emulator.audit().executions_of("confirm"), 1);
    assert_eq!(
        emulator
            .audit()
            .executions_by_id
            .get(&("confirm".to_owned(), "2".to_owned())),
        Some(&1)
    );

    // A state the emulator did not issue, none, or one issued for other arguments: refused.
    let mut other_arguments = again(5, Some(&request_state), accept.clone());
    other_arguments["params"]["arguments"]["action"] = json!("delete");
    for (case, message) in [
        ("forged", again(3, Some("forged-state"), accept.clone())),
        ("missing", again(4, None, accept.clone())),
        ("other arguments", other_arguments),
    ] {
        let answer = runtime_modern(&emulator, SESSION_A, &message).await;
        assert_eq!(answer.status, StatusCode::OK, "{case}");
        assert_eq!(
            answer.json()["error"],
            json!({"code": -32602, "message": "Invalid or expired requestState",
                "data": {"reason": "invalid_request_state"}}),
            "{case}"
        );
    }
    // The user declines: nothing runs.
    let decline = json!({"action": "decline"});
    let answer = runtime_modern(
        &emulator,
        SESSION_A,
        &again(6, Some(&request_state), decline),
    )
    .await;
    assert_eq!(tool_text(&answer), "not confirmed: nothing ran");
    assert_eq!(emulator.audit().executions_of("confirm"), 1);

    // In the `initialize` era there is no round trip: a tool error, nothing run.
    let legacy = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"action": "deploy"}}});
    let answer = runtime_post(&emulator, &[], &legacy).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["result"]["isError"], true);
    assert_eq!(
        tool_text(&answer),
        "confirm asks the user first, in a multi round-trip request: it needs MCP 2026-07-28"
    );
    let audit = emulator.audit();
    assert_eq!(audit.executions_of("confirm"), 1);
    assert_eq!(audit.inputs_required, 1);
}

/// The events of an SSE answer, read as they come.
struct Events {
    body: hyper::body::Incoming,
    buffer: String,
}

impl Events {
    /// The next event's JSON-RPC message; `None` once the stream ended.
    async fn next(&mut self) -> Option<Value> {
        let read = async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let event: String = self.buffer.drain(..end + 2).collect();
                    let data = event
                        .lines()
                        .find_map(|line| line.strip_prefix("data: "))
                        .unwrap();
                    return Some(serde_json::from_str(data).unwrap());
                }
                match self.body.frame().await {
                    Some(Ok(frame)) => {
                        let data = frame.into_data().unwrap();
                        self.buffer.push_str(std::str::from_utf8(&data).unwrap());
                    }
                    Some(Err(error)) => panic!("{error}"),
                    None => {
                        assert_eq!(self.buffer, "", "a partial event");
                        return None;
                    }
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), read)
            .await
            .expect("an event within 5 s")
    }
}

/// Opens a `subscriptions/listen` stream at the runtime: its status, headers and events.
async fn listen(emulator: &Emulator, id: u64) -> (StatusCode, http::HeaderMap, Events) {
    let message = modern(
        id,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
    );
    let headers = with_header(
        modern_headers(&message, None),
        RUNTIME_SESSION,
        Some(SESSION_A),
    );
    let credentials = emulator.credentials();
    let request = build(
        Method::POST,
        &invocations(emulator, "?qualifier=DEFAULT"),
        &borrowed(&headers),
        &message.to_string(),
        sigv4(&credentials),
    );
    let response = http_client().request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let events = Events {
        body,
        buffer: String::new(),
    };
    (parts.status, parts.headers, events)
}

#[tokio::test]
async fn a_listen_stream_is_acknowledged_carries_what_is_pushed_and_sees_its_end() {
    let emulator = start(EmulatorConfig::default()).await;
    let (status, headers, mut events) = listen(&emulator, 7).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    assert!(headers.get("mcp-session-id").is_none());
    // First, what it will carry: of what was asked, the tools' list changes alone.
    assert_eq!(
        events.next().await,
        Some(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}})
        )
    );
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    assert_eq!(emulator.notify_listeners(changed.clone()), 1);
    assert_eq!(
        events.next().await,
        Some(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 7}}})
        )
    );
    // The server ends it: the listen request's final result, then the end of the stream.
    assert_eq!(emulator.end_listens(), 1);
    assert_eq!(
        events.next().await,
        Some(
            json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete", "_meta": {
            "io.modelcontextprotocol/subscriptionId": 7,
            "io.modelcontextprotocol/serverInfo": {
                "name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")}}}})
        )
    );
    assert_eq!(events.next().await, None);
    assert_eq!(emulator.notify_listeners(changed.clone()), 0);
    assert_eq!(emulator.end_listens(), 0);

    // A client that goes away ends its stream: nothing is left to push to.
    let (_, _, mut events) = listen(&emulator, 8).await;
    assert!(events.next().await.is_some());
    assert_eq!(emulator.notify_listeners(changed.clone()), 1);
    drop(events);
    let mut reached = 1;
    for _ in 0..100 {
        reached = emulator.notify_listeners(changed.clone());
        if reached == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(reached, 0, "the dropped stream is forgotten");
    assert_eq!(emulator.end_listens(), 0);

    let audit = emulator.audit();
    assert_eq!(audit.listens, 2);
    // Listening is of 2026-07-28 only.
    let legacy = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {}});
    let answer = runtime_post(&emulator, &[], &legacy).await;
    assert_eq!(rpc_error(&answer).0, -32601);
    assert_eq!(emulator.audit().listens, 2);
}

/// One request through the crate's own stack: the emulator's signer in runtime session
/// `session`, which writes a 2026-07-28 request's standard headers from its body.
async fn through_signer(emulator: &Emulator, session: &str, message: &Value) -> Raw {
    use tower::ServiceExt;
    let signer = emulator
        .signer()
        .runtime_session_id(session)
        .build()
        .unwrap();
    let stack = tower::ServiceBuilder::new()
        .layer(signer)
        .service(http_client());
    let request = Request::post("http://agentcore.invalid/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(message.to_string())))
        .unwrap();
    Raw::read(stack.oneshot(request).await.unwrap()).await
}

#[tokio::test(start_paused = true)]
async fn a_task_is_answered_at_once_and_its_polls_find_it_only_in_the_runtime_session_holding_it() {
    let emulator = start(EmulatorConfig::default()).await;
    let job = modern_with(
        1,
        "tools/call",
        json!({"name": "slow_job", "arguments": {}}),
        true,
    );
    let answer = through_signer(&emulator, SESSION_A, &job).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let handle = answer.json()["result"].clone();
    let task_id = handle["taskId"].as_str().unwrap().to_owned();
    assert_eq!(handle["resultType"], "task");
    assert_eq!(handle["status"], "working");
    assert_eq!(handle["ttlMs"], Value::Null);
    assert_eq!(handle["pollIntervalMs"], 100);
    assert_eq!(handle["createdAt"], handle["lastUpdatedAt"]);
    let audit = emulator.audit();
    assert_eq!(audit.tasks_created, 1);
    assert_eq!(
        audit.executions_of("slow_job"),
        1,
        "counted once, as it starts"
    );

    let poll = |id: u64| modern_with(id, "tasks/get", json!({"taskId": task_id.clone()}), true);
    let answer = through_signer(&emulator, SESSION_A, &poll(2)).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.json()["result"]["status"], "working");
    assert_eq!(answer.json()["result"]["resultType"], "complete");
    tokio::time::advance(std::time::Duration::from_millis(200)).await;
    let answer = through_signer(&emulator, SESSION_A, &poll(3)).await;
    let done = answer.json()["result"].clone();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"],
        json!({"content": [{"type": "text", "text": "slow_job done"}], "isError": false, "resultType": "complete"})
    );
    assert_eq!(done["taskId"], task_id.as_str());
    // A poll that reaches another runtime session meets a server that never held the task.
    let answer = through_signer(&emulator, SESSION_B, &poll(4)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "Failed to retrieve task: Task not found"}})
    );
    // Nor does the next microVM of its own runtime session hold it.
    assert!(emulator.end_microvm(SESSION_A));
    let answer = through_signer(&emulator, SESSION_A, &poll(5)).await;
    assert_eq!(rpc_error(&answer).0, -32602);

    let polls: Vec<(String, Option<String>, bool)> = emulator
        .audit()
        .task_requests
        .into_iter()
        .map(|r| (r.method, r.runtime_session_id, r.found))
        .collect();
    let get = || "tasks/get".to_owned();
    let a = || Some(SESSION_A.to_owned());
    assert_eq!(
        polls,
        [
            (get(), a(), true),
            (get(), a(), true),
            (get(), Some(SESSION_B.to_owned()), false),
            (get(), a(), false),
        ]
    );
    // Each poll went where the signer sent it, named by the task.
    let received = emulator.audit().received;
    let last_poll = received.last().unwrap();
    assert_eq!(last_poll.mcp_method.as_deref(), Some("tasks/get"));
    assert_eq!(last_poll.mcp_name.as_deref(), Some(task_id.as_str()));

    // A client that does not declare the tasks extension gets no task: the job runs in the
    // call, and `tasks/*` asks for the capability.
    let started = tokio::time::Instant::now();
    let plain = modern(
        6,
        "tools/call",
        json!({"name": "slow_job", "arguments": {}}),
    );
    let answer = through_signer(&emulator, SESSION_A, &plain).await;
    assert_eq!(
        answer.json()["result"],
        json!({"content": [{"type": "text", "text": "slow_job done"}], "isError": false, "resultType": "complete"})
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
    let undeclared = modern(7, "tasks/get", json!({"taskId": task_id.clone()}));
    let answer = through_signer(&emulator, SESSION_A, &undeclared).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.json()["error"],
        json!({"code": -32021, "message": "Missing required client capability",
            "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}})
    );
    let audit = emulator.audit();
    assert_eq!(audit.tasks_created, 1);
    assert_eq!(audit.executions_of("slow_job"), 2);
    assert_eq!(audit.task_requests.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_task_cancelled_before_it_is_done_stays_cancelled() {
    let emulator =
        start(EmulatorConfig::default().slow_job_duration(std::time::Duration::from_secs(5))).await;
    let job = modern_with(1, "tools/call", json!({"name": "slow_job"}), true);
    let answer = runtime_modern(&emulator, SESSION_A, &job).await;
    let task_id = answer.json()["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancel = modern_with(2, "tasks/cancel", json!({"taskId": task_id}), true);
    let answer = runtime_modern(&emulator, SESSION_A, &cancel).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.json(),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete"}})
    );
    tokio::time::advance(std::time::Duration::from_secs(6)).await;
    let poll = modern_with(3, "tasks/get", json!({"taskId": task_id}), true);
    let answer = runtime_modern(&emulator, SESSION_A, &poll).await;
    let result = &answer.json()["result"];
    assert_eq!(result["status"], "cancelled", "{result}");
    assert!(result.get("result").is_none());
    let methods: Vec<String> = emulator
        .audit()
        .task_requests
        .into_iter()
        .map(|r| r.method)
        .collect();
    assert_eq!(methods, ["tasks/cancel", "tasks/get"]);
    // Of the `initialize` era, `tasks/get` without the extension declared: the extension's
    // -32021, naming it.
    let legacy =
        json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"taskId": task_id}});
    let answer = runtime_post(&emulator, &[], &legacy).await;
    assert_eq!(rpc_error(&answer).0, -32021);
    assert_eq!(
        answer.json()["error"]["data"],
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    );
}

#[tokio::test]
async fn initialize_is_unchanged_for_every_earlier_version_and_negotiates_2026_down() {
    for gateway in [false, true] {
        let emulator = start(EmulatorConfig::default().gateway(gateway)).await;
        let url = if gateway {
            emulator.gateway_url()
        } else {
            emulator.invocations_url()
        };
        for (asked, answered) in [
            ("2024-11-05", "2024-11-05"),
            ("2025-03-26", "2025-03-26"),
            ("2025-06-18", "2025-06-18"),
            ("2025-11-25", "2025-11-25"),
            ("2026-07-28", "2025-11-25"),
        ] {
            let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
            let answer = post_with(&emulator, &url, &[], &message).await;
            assert_eq!(answer.status, StatusCode::OK, "{asked}: {answer:?}");
            assert_eq!(
                answer.json(),
                json!({"jsonrpc": "2.0", "id": 1, "result": {
                    "protocolVersion": answered,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")},
                }}),
                "{asked}"
            );
            let session = answer.header("mcp-session-id").unwrap().to_owned();
            // The session's requests, with the version agreed where it has a header.
            let mut headers = vec![("mcp-session-id".to_owned(), session)];
            if answered >= "2025-06-18" {
                headers.push(("mcp-protocol-version".to_owned(), answered.to_owned()));
            }
            let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
            let answer = post_with(&emulator, &url, &headers, &ping).await;
            assert_eq!(
                answer.json(),
                json!({"jsonrpc": "2.0", "id": 2, "result": {}})
            );
            let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
            let answer = post_with(&emulator, &url, &headers, &call).await;
            assert_eq!(
                answer.json(),
                json!({"jsonrpc": "2.0", "id": 3, "result": {
                    "content": [{"type": "text", "text": "3"}], "isError": false}}),
                "{asked}"
            );
        }
        let audit = emulator.audit();
        assert_eq!(audit.mcp_sessions_started, 5);
        assert_eq!(audit.executions_of("add"), 5);
        assert_eq!(audit.header_mismatches, 0);
    }
    // An emulator whose newest version is 2025-06-18 negotiates down to it.
    let old = start(EmulatorConfig::default().newest_protocol_version("2025-06-18")).await;
    let url = old.invocations_url();
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-11-25", "2025-06-18"),
        ("2026-07-28", "2025-06-18"),
    ] {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let answer = post_with(&old, &url, &[], &message).await;
        assert_eq!(
            answer.json()["result"]["protocolVersion"],
            answered,
            "{asked}"
        );
    }
    // A version above it in the header: the 400 of its era.
    let headers = vec![("mcp-protocol-version".to_owned(), "2025-11-25".to_owned())];
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let answer = post_with(&old, &url, &headers, &list).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        rpc_error(&answer),
        (
            -32000,
            "Bad Request: Unsupported protocol version: 2025-11-25 (supported versions: 2025-06-18, 2025-03-26, 2024-11-05)".to_owned()
        )
    );
    assert!(
        format!(
            "{:?}",
            EmulatorConfig::default().newest_protocol_version("2025-06-18")
        )
        .contains("newest_protocol_version: \"2025-06-18\"")
    );
}
