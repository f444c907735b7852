//! The emulator's doors, driven over raw HTTP (no crate layers): a runtime behind OAuth bearer
//! tokens, an AgentCore Gateway (SigV4 or bearer) with its MCP sessions, and the SigV4 signing
//! name. Each test asserts the exact answers: statuses, challenges, documents, counters.

use std::time::SystemTime;

use agentcore_tower::emulator::{Emulator, EmulatorConfig, Fault, Received};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

fn client() -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// An answer, read whole.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    text: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

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

/// Sends one request, with the door's credentials (SigV4 signed here with `aws_sigv4`, as the
/// emulator's verifier recomputes it).
async fn send(
    method: Method,
    url: &str,
    extra: &[(&str, &str)],
    body: &str,
    door: Door<'_>,
) -> Answer {
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
    let response = client().request(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        text: String::from_utf8(bytes.to_vec()).unwrap(),
    }
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
) -> Answer {
    send(method, &emulator.gateway_url(), extra, body, door).await
}

/// A POST of `body`, with no header of its own.
async fn post(url: &str, body: &str, door: Door<'_>) -> Answer {
    send(Method::POST, url, &[], body, door).await
}

/// A 401 whose challenge points at the runtime's protected resource metadata for `qualifier`.
#[track_caller]
fn assert_runtime_challenge(answer: &Answer, emulator: &Emulator, qualifier: &str) {
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

async fn start(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).await.unwrap()
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
        let answer = send(
            Method::POST,
            &invocations(&emulator, query),
            &[],
            &counter(1),
            Door::None,
        )
        .await;
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
    let url = invocations(&emulator, "?qualifier=DEFAULT");

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
    let signed = send(
        Method::POST,
        &invocations(&oauth, "?qualifier=DEFAULT"),
        &[],
        &counter(1),
        sigv4(&oauth.credentials()),
    )
    .await;
    // A bearer token to a SigV4 runtime.
    let iam = start(EmulatorConfig::default()).await;
    let bearer = send(
        Method::POST,
        &invocations(&iam, "?qualifier=DEFAULT"),
        &[],
        &counter(1),
        Door::Bearer("token-a"),
    )
    .await;
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
        let answer = send(
            Method::GET,
            &runtime_metadata_url(&emulator, qualifier),
            &[],
            "",
            Door::None,
        )
        .await;
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
    let answer = send(
        Method::GET,
        &runtime_metadata_url(&default, "DEFAULT"),
        &[],
        "",
        Door::None,
    )
    .await;
    assert_eq!(
        answer.json()["authorization_servers"],
        json!(["https://issuer.example/emulator"])
    );
    let other = format!(
        "{}/runtimes/{}/invocations/.well-known/oauth-protected-resource",
        default.endpoint(),
        escaped("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/other-XyZ")
    );
    let answer = send(Method::GET, &other, &[], "", Door::None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(emulator.audit().unauthorized, 0);
}

#[tokio::test]
async fn a_token_swapped_at_run_time_makes_the_old_one_stale() {
    let emulator = start(EmulatorConfig::default().bearer_tokens(["old-token"])).await;
    let url = invocations(&emulator, "?qualifier=DEFAULT");
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
        &invocations(&emulator, "?qualifier=DEFAULT"),
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
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let mine = emulator.credentials();
    let session = open_session(&emulator, sigv4(&mine)).await;
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
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let mine = emulator.credentials();
    let session = open_session(&emulator, sigv4(&mine)).await;
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
    let metadata = send(
        Method::GET,
        &format!(
            "{}/.well-known/oauth-protected-resource",
            emulator.endpoint()
        ),
        &[],
        "",
        Door::None,
    )
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
    let right = send(
        Method::POST,
        &gateway.gateway_url(),
        &[],
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
    let wrong = send(
        Method::POST,
        &invocations(&runtime, "?qualifier=DEFAULT"),
        &[],
        &counter(1),
        Door::SigV4 {
            credentials: &credentials,
            service: "execute-api",
        },
    )
    .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let right = send(
        Method::POST,
        &invocations(&runtime, "?qualifier=DEFAULT"),
        &[],
        &counter(2),
        sigv4(&credentials),
    )
    .await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.text);
    assert_eq!(runtime.audit().executions_of("counter"), 1);
}
