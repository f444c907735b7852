//! The other doors — a runtime with OAuth inbound auth (`SigV4InvokeLayer::bearer`), and
//! `McpEndpointLayer` for plain MCP URLs (an AgentCore Gateway, any SigV4-gated MCP server)
//! over SigV4 or a bearer token — alone over in-memory services and a local server, then the
//! whole stack over the emulator playing each door.

use crate::common;
use crate::emulator::start;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use agentcore_tower::auth::{BearerChallenge, BearerToken, ProvideToken, TokenFn};
use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::record::{Outcome, Verdict};
use agentcore_tower::{
    AttemptRecord, ErrorKind, RecommendedLayers, ReplayGuardLayer, recommended_layers,
};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault, SignatureVerifier};
use aws_credential_types::Credentials;
use bytes::Bytes;
use common::*;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer as _, ServiceBuilder, ServiceExt};

/// An endpoint layer carrying the token `FRESH`, with its defaults.
fn fresh_endpoint() -> McpEndpointLayer {
    McpEndpointLayer::bearer(BearerToken::new(FRESH))
        .build()
        .unwrap()
}

/// Where a request to the runtime says it goes (the invoke layer sends it to the runtime).
const RUNTIME_URL: &str = "http://mcp.invalid/mcp";
const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123";
/// A token as long as real ones (a Cognito access token is ~1,000 characters).
const STALE: &str = "eyJraWQiOiJzdGFsZSIsImFsZyI6IlJTMjU2In0.eyJzdWIiOiJzdGFsZSJ9.c3RhbGUtc2lnbmF0dXJlLXN0YWxlLXNpZ25hdHVyZQ";
const FRESH: &str = "eyJraWQiOiJmcmVzaCIsImFsZyI6IlJTMjU2In0.eyJzdWIiOiJmcmVzaCJ9.ZnJlc2gtc2lnbmF0dXJlLWZyZXNoLXNpZ25hdHVyZQ";
const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#;
const METADATA: &str = "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations/.well-known/oauth-protected-resource?qualifier=DEFAULT";

/// A bearer invoke layer for the runtime `ARN` with `tokens`, with its defaults.
fn bearer_layer(tokens: impl ProvideToken) -> SigV4InvokeLayer {
    SigV4InvokeLayer::bearer(InvokeTarget::arn(ARN), tokens)
        .build()
        .unwrap()
}

/// `CALL` sent through a bearer invoke layer with `tokens` over `service`.
async fn bearer_call(
    tokens: impl ProvideToken,
    service: Scripted,
) -> Result<Response<agentcore_tower::redact::InvokeBody<TestBody>>, agentcore_tower::Error> {
    bearer_layer(tokens)
        .layer(service)
        .oneshot(mcp_post(RUNTIME_URL, CALL))
        .await
}

/// `request` sent once through `layer` over a service playing `steps`: the outcome, and what
/// the service saw.
async fn send_scripted<L>(
    layer: &L,
    steps: impl IntoIterator<Item = Step>,
    request: Request<Full<Bytes>>,
) -> (
    Result<<L::Service as tower::Service<Request<Full<Bytes>>>>::Response, agentcore_tower::Error>,
    Arc<Shared>,
)
where
    L: tower::Layer<Scripted>,
    L::Service: tower::Service<Request<Full<Bytes>>, Error = agentcore_tower::Error>,
{
    let service = Scripted::new(steps);
    let shared = service.shared();
    (layer.layer(service).oneshot(request).await, shared)
}

/// The recommended layers over `signer`, over a real HTTP client.
type OverHttp<L> = <RecommendedLayers<L> as tower::Layer<HttpClient>>::Service;

/// `signer` under the recommended layers with `guard`, over a real HTTP client.
fn over_http<L>(guard: ReplayGuardLayer, signer: L) -> OverHttp<L>
where
    RecommendedLayers<L>: tower::Layer<HttpClient>,
{
    recommended_layers(guard, signer).layer(http_client())
}

/// `request` sent through a clone of `stack`, which stays ready for the next.
async fn send<S>(stack: &S, request: Request<Full<Bytes>>) -> Result<S::Response, S::Error>
where
    S: tower::Service<Request<Full<Bytes>>> + Clone,
{
    stack.clone().oneshot(request).await
}

/// The `Mcp-Session-Id` an answer carries.
fn session_of<B>(response: &Response<B>) -> String {
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// A GET of the server's event stream at `url`, in the MCP session `session` when there is one.
fn get_stream(url: &str, session: Option<&str>) -> Request<Full<Bytes>> {
    let mut get = Request::get(url).header("accept", "text/event-stream");
    if let Some(session) = session {
        get = get.header("mcp-session-id", session);
    }
    get.body(Full::new(Bytes::new())).unwrap()
}

/// A DELETE of the MCP session `session` at `url`.
fn delete_session(url: &str, session: &str) -> Request<Full<Bytes>> {
    Request::delete(url)
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// A POST of `body` to `uri` as a 2025-11-25 client sends it, outside any MCP session.
fn mcp_post(uri: &str, body: &'static str) -> Request<Full<Bytes>> {
    at_2025_11_25(common::mcp_post(uri, None, body))
}

/// `request` with the `MCP-Protocol-Version` a 2025-11-25 client sends.
fn at_2025_11_25(mut request: Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    request.headers_mut().insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static("2025-11-25"),
    );
    request
}

fn unauthorized() -> Response<TestBody> {
    response(
        401,
        &[
            (
                "www-authenticate",
                &format!(r#"Bearer resource_metadata="{METADATA}""#),
            ),
            ("content-type", "application/json"),
        ],
        br#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Missing Authentication Token"}}"#,
    )
}

fn ok() -> Response<TestBody> {
    response(
        200,
        &[("content-type", "application/json")],
        br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"3"}]}}"#,
    )
}

/// A token provider that gives `STALE` until asked after a refused token, then `FRESH`; counts
/// both, and keeps the refused token each ask named.
#[derive(Clone, Default)]
struct Tokens {
    asked: Arc<AtomicUsize>,
    refreshed: Arc<AtomicUsize>,
    named: Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl Tokens {
    fn provider(&self) -> impl agentcore_tower::auth::ProvideToken + use<> {
        let this = self.clone();
        TokenFn::new(move |refused: Option<BearerToken>| {
            let this = this.clone();
            async move {
                this.asked.fetch_add(1, Ordering::SeqCst);
                this.named
                    .lock()
                    .unwrap()
                    .push(refused.as_ref().map(|t| t.as_str().to_owned()));
                let refreshed = if refused.is_some() {
                    this.refreshed.fetch_add(1, Ordering::SeqCst) + 1
                } else {
                    this.refreshed.load(Ordering::SeqCst)
                };
                Ok::<_, std::io::Error>(BearerToken::new(if refreshed > 0 { FRESH } else { STALE }))
            }
        })
    }
}

fn authorization(parts: &http::request::Parts) -> &str {
    parts.headers["authorization"].to_str().unwrap()
}

#[tokio::test]
async fn a_bearer_runtime_gets_the_invoke_mapping_with_the_token_instead_of_a_signature() {
    let layer = bearer_layer(BearerToken::new(FRESH));
    let (response, shared) =
        send_scripted(&layer, [Step::Respond(ok())], mcp_post(RUNTIME_URL, CALL)).await;
    let response = response.unwrap();
    assert_eq!(response.status(), 200);
    let requests = shared.requests.lock().unwrap();
    let (parts, body) = &requests[0];
    assert_eq!(parts.method, "POST");
    assert_eq!(
        parts.uri.to_string(),
        "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations"
    );
    assert_eq!(authorization(parts), format!("Bearer {FRESH}"));
    assert!(parts.headers["authorization"].is_sensitive());
    // No SigV4 at all: no date, no token header, no content hash.
    for name in ["x-amz-date", "x-amz-security-token", "x-amz-content-sha256"] {
        assert!(!parts.headers.contains_key(name), "{name}");
    }
    // The mapping is the same as with SigV4: the MCP headers filled, the runtime session set.
    assert_eq!(parts.headers["mcp-method"], "tools/call");
    assert_eq!(parts.headers["mcp-name"], "add");
    assert_eq!(
        parts.headers["x-amzn-bedrock-agentcore-runtime-session-id"],
        layer.runtime_session_id().as_str()
    );
    assert_eq!(body, CALL.as_bytes());
}

#[tokio::test]
async fn a_refused_token_is_refreshed_once_and_the_call_sent_again() {
    let service = Scripted::new([Step::Respond(unauthorized()), Step::Respond(ok())]);
    let shared = service.shared();
    let tokens = Tokens::default();
    let layer = bearer_layer(tokens.provider());
    let record = AttemptRecord::new();
    let mut request = mcp_post(RUNTIME_URL, CALL);
    request.extensions_mut().insert(record.clone());
    let response = layer.layer(service).oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let (body, _) = read_all(response.into_body()).await;
    assert!(body.starts_with(br#"{"jsonrpc":"2.0","id":3,"result""#));
    assert_eq!(shared.calls(), 2);
    assert_eq!(tokens.asked.load(Ordering::SeqCst), 2);
    assert_eq!(tokens.refreshed.load(Ordering::SeqCst), 1);
    // The provider is told which token was refused: the one the first attempt carried.
    assert_eq!(
        *tokens.named.lock().unwrap(),
        [None, Some(STALE.to_owned())]
    );
    let requests = shared.requests.lock().unwrap();
    assert_eq!(authorization(&requests[0].0), format!("Bearer {STALE}"));
    assert_eq!(authorization(&requests[1].0), format!("Bearer {FRESH}"));
    // The same runtime session for both attempts of the call.
    assert_eq!(
        requests[0].0.headers["x-amzn-bedrock-agentcore-runtime-session-id"],
        requests[1].0.headers["x-amzn-bedrock-agentcore-runtime-session-id"]
    );
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 2);
    assert!(matches!(
        attempts[0].outcome(),
        Outcome::Response { status, .. } if *status == StatusCode::UNAUTHORIZED
    ));
    let decisions = attempts[0].decisions();
    assert_eq!(decisions.len(), 1, "{record}");
    assert_eq!(decisions[0].layer(), "sigv4");
    assert!(
        matches!(decisions[0].verdict(), Verdict::SentAgain { cause, .. } if *cause == "the bearer token was refused (HTTP 401)"),
        "{record}"
    );
}

#[tokio::test]
async fn a_token_that_stays_refused_is_delivered_with_the_challenge_after_one_refresh() {
    let service = Scripted::with_fallback([], || Step::Respond(unauthorized()));
    let shared = service.shared();
    let tokens = Tokens::default();
    let response = bearer_call(tokens.provider(), service).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(shared.calls(), 2, "one refresh, not a loop");
    assert_eq!(tokens.refreshed.load(Ordering::SeqCst), 1);
    // The challenge is kept for MCP clients that run the OAuth flow from the 401, and read.
    assert_eq!(
        response.headers()["www-authenticate"],
        format!(r#"Bearer resource_metadata="{METADATA}""#).as_str()
    );
    let challenge = response.extensions().get::<BearerChallenge>().unwrap();
    assert_eq!(challenge.resource_metadata(), Some(METADATA));
    // A static token cannot be refreshed: its 401 is delivered at once.
    let service = Scripted::with_fallback([], || Step::Respond(unauthorized()));
    let shared = service.shared();
    let response = bearer_call(BearerToken::new(STALE), service).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(shared.calls(), 1);
    assert!(response.extensions().get::<BearerChallenge>().is_some());
}

#[tokio::test]
async fn a_failing_token_provider_is_a_clear_error_and_nothing_is_sent() {
    let service = Scripted::new([]);
    let shared = service.shared();
    let tokens = TokenFn::new(|_refused: Option<BearerToken>| async {
        Err::<BearerToken, _>(std::io::Error::other("the authorization server is down"))
    });
    let error = bearer_call(tokens, service).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Token);
    assert_eq!(
        error.to_string(),
        "could not get a bearer token: the authorization server is down (after 1 attempt)"
    );
    assert_eq!(shared.calls(), 0);
    // A token that cannot be a header value: refused, and not quoted.
    let service = Scripted::new([]);
    let error = bearer_call(BearerToken::new("secret-with-a\nnewline"), service)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Token);
    assert!(!error.to_string().contains("secret-with-a"), "{error}");
}

/// A server that echoes everything it was sent, in every form a careless or hostile one
/// might: the header, the JSON-escaped header, into a header of its own and into its body.
fn hostile_echo(parts: &http::request::Parts) -> Response<TestBody> {
    let authorization = parts.headers["authorization"].to_str().unwrap().to_owned();
    let escaped: String = authorization
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":3,"error":{{"code":-32000,"message":"you sent {authorization} a.k.a. {escaped}"}}}}"#
    );
    let mut response = Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("x-echo", authorization.as_str())
        .header("mcp-session-id", authorization.as_str())
        .header("content-length", body.len())
        .body(boxed(Full::new(Bytes::from(body))))
        .unwrap();
    response.headers_mut().insert(
        "www-authenticate",
        format!("Bearer error=\"{authorization}\"").parse().unwrap(),
    );
    response
}

#[tokio::test]
async fn the_token_reaches_no_header_body_error_or_debug_the_app_reads() {
    for endpoint in [false, true] {
        let seen = Arc::new(Mutex::new(None));
        let echo = {
            let seen = seen.clone();
            tower::service_fn(move |request: Request<Full<Bytes>>| {
                let seen = seen.clone();
                async move {
                    let (parts, _) = request.into_parts();
                    let response = hostile_echo(&parts);
                    *seen.lock().unwrap() = Some(parts);
                    Ok::<_, BoxError>(response)
                }
            })
        };
        let (response, debug) = if endpoint {
            let layer = fresh_endpoint();
            let debug = format!("{layer:?} {:?}", layer.layer(echo.clone()));
            let stack = recommended_layers(ReplayGuardLayer::new(), layer).layer(echo);
            let request = mcp_post("https://gw.example/mcp", CALL);
            (stack.oneshot(request).await.unwrap(), debug)
        } else {
            let layer = bearer_layer(BearerToken::new(FRESH));
            let debug = format!("{layer:?}");
            let stack = recommended_layers(ReplayGuardLayer::new(), layer).layer(echo);
            let request = mcp_post(RUNTIME_URL, CALL);
            (stack.oneshot(request).await.unwrap(), debug)
        };
        // The server did get the token...
        assert_eq!(
            authorization(seen.lock().unwrap().as_ref().unwrap()),
            format!("Bearer {FRESH}")
        );
        // ...and the app never sees it back.
        let head = format!("{:?}", response.headers());
        let length: usize = response.headers()["content-length"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let record = format!("{:?}", AttemptRecord::of_response(&response));
        let (body, _) = read_all(response.into_body()).await;
        assert_eq!(body.len(), length, "Content-Length stays exact");
        let body = String::from_utf8(body.to_vec()).unwrap();
        let escaped_start: String = FRESH[..8]
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        for text in [&head, &body, &debug, &record] {
            assert!(!text.contains(FRESH), "endpoint={endpoint}: {text}");
            assert!(
                !text.contains(&escaped_start),
                "endpoint={endpoint}: {text}"
            );
        }
        assert!(body.contains("you sent Bearer [redacted]"), "{body}");
    }
}

fn signing_verifier(region: &str, service: &str) -> SignatureVerifier {
    SignatureVerifier::new(region, service).with_credentials(credentials())
}

fn credentials() -> Credentials {
    // A session token as long as a real STS one.
    Credentials::new(
        "AKIDENDPOINT",
        "endpoint-secret-access-key",
        Some(format!("IQoJb3JpZ2luX2VjE{}", "Z".repeat(680))),
        None,
        "test",
    )
}

#[tokio::test]
async fn an_endpoint_request_goes_where_it_names_with_its_headers_signed_for_the_signing_name() {
    let seen: Arc<Mutex<Vec<(http::request::Parts, Bytes)>>> = Arc::default();
    let server = {
        let seen = seen.clone();
        serve(move |parts, body| {
            seen.lock().unwrap().push((parts, body));
            Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .header("mcp-session-id", "gw-session-1")
                .header("x-custom-answer", "kept")
                .body(Full::new(Bytes::from_static(
                    br#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
                )))
                .unwrap()
        })
        .await
    };
    let layer = McpEndpointLayer::sigv4(credentials())
        .region("us-west-2")
        .signing_name("execute-api")
        .build()
        .unwrap();
    let client = over_http(ReplayGuardLayer::new(), layer);
    let url = format!("http://{}/prod/mcp?stage=blue", server.addr);
    let mut request = mcp_post(&url, CALL);
    let headers = request.headers_mut();
    headers.insert("mcp-session-id", "gw-session-1".parse().unwrap());
    headers.insert("x-tenant", "acme".parse().unwrap());
    headers.insert("authorization", "Bearer the-apps-own".parse().unwrap());
    headers.insert("connection", "keep-alive".parse().unwrap());
    let response = client.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    // An endpoint's answer keeps its headers (they are MCP's, not a model's).
    assert_eq!(response.headers()["mcp-session-id"], "gw-session-1");
    assert_eq!(response.headers()["x-custom-answer"], "kept");
    // GET and DELETE go to the server, which decides.
    let get = get_stream(&url, Some("gw-session-1"));
    assert_eq!(client.clone().oneshot(get).await.unwrap().status(), 200);
    let delete = delete_session(&url, "gw-session-1");
    assert_eq!(client.oneshot(delete).await.unwrap().status(), 200);

    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter()
            .map(|(p, _)| p.method.as_str())
            .collect::<Vec<_>>(),
        ["POST", "GET", "DELETE"]
    );
    let verifier = signing_verifier("us-west-2", "execute-api");
    for (parts, body) in seen.iter() {
        assert_eq!(parts.uri, "/prod/mcp?stage=blue");
        verifier
            .verify(parts, body, SystemTime::now())
            .unwrap_or_else(|e| panic!("{} not verified: {e}", parts.method));
        let auth = authorization(parts);
        assert!(
            auth.contains("/us-west-2/execute-api/aws4_request"),
            "{auth}"
        );
        assert_eq!(parts.headers["mcp-session-id"], "gw-session-1");
        assert!(
            !parts.headers.contains_key("connection"),
            "hop-by-hop: not carried"
        );
    }
    let (post, body) = &seen[0];
    assert_eq!(body, CALL.as_bytes());
    assert_eq!(post.headers["x-tenant"], "acme");
    assert_eq!(post.headers["mcp-protocol-version"], "2025-11-25");
    assert_eq!(
        post.headers["content-length"],
        CALL.len().to_string().as_str()
    );
    assert!(authorization(post).starts_with("AWS4-HMAC-SHA256 Credential=AKIDENDPOINT/"));
    // Nothing filled in: the headers are the client's.
    assert!(!post.headers.contains_key("mcp-method"));
    // Another signing name does not verify.
    let other = signing_verifier("us-west-2", "bedrock-agentcore");
    assert!(other.verify(post, body, SystemTime::now()).is_err());
}

#[tokio::test]
async fn an_endpoint_url_that_is_relative_or_carries_a_password_is_refused_unsent() {
    for (uri, expected) in [
        (
            "/mcp",
            "the request cannot be sent: an MCP endpoint request needs an absolute URL (https://host/path): the layer sends it where it names (after 1 attempt)",
        ),
        (
            "https://user:hunter2@gw.example/mcp",
            "the request cannot be sent: the URL carries user information (a user or password): give credentials to the layer, not in the URL (after 1 attempt)",
        ),
    ] {
        let (result, shared) = send_scripted(&fresh_endpoint(), [], mcp_post(uri, CALL)).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidRequest);
        assert_eq!(error.to_string(), expected);
        assert!(!format!("{error:?}").contains("hunter2"));
        assert_eq!(shared.calls(), 0);
    }
}

#[tokio::test]
async fn an_endpoint_layer_given_an_origin_sends_there_only() {
    // One layer, as an app that shares it between the clients of several servers has it.
    let layer = McpEndpointLayer::bearer(BearerToken::new(FRESH))
        .origin("https://MCP.example.com/mcp?tenant=acme")
        .build()
        .unwrap();
    // The same origin, whatever the path, the host's case or an explicit default port: sent.
    for uri in [
        "https://mcp.example.com/mcp",
        "https://Mcp.Example.com:443/other/path?x=1",
    ] {
        let (response, shared) =
            send_scripted(&layer, [Step::Respond(ok())], mcp_post(uri, CALL)).await;
        assert_eq!(response.unwrap().status(), 200, "{uri}");
        assert_eq!(shared.calls(), 1, "{uri}");
        let requests = shared.requests.lock().unwrap();
        assert_eq!(authorization(&requests[0].0), format!("Bearer {FRESH}"));
    }
    // Another scheme, port or host: not sent, and the token nowhere in what comes back.
    for (uri, named) in [
        ("http://mcp.example.com/mcp", "http://mcp.example.com"),
        (
            "https://mcp.example.com:8443/mcp",
            "https://mcp.example.com:8443",
        ),
        (
            "https://mcp.example.com.attacker.test/mcp",
            "https://mcp.example.com.attacker.test",
        ),
        ("https://attacker.test/mcp", "https://attacker.test"),
    ] {
        let record = AttemptRecord::new();
        let mut request = mcp_post(uri, CALL);
        request.extensions_mut().insert(record.clone());
        let (result, shared) = send_scripted(&layer, [], request).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidRequest, "{uri}");
        assert_eq!(
            error.to_string(),
            format!(
                "the request cannot be sent: the request names {named}, and this layer sends to \
                 https://mcp.example.com only: it was not sent, so that its token or signature \
                 reaches no other server (after 1 attempt)"
            )
        );
        assert_eq!(shared.calls(), 0, "{uri}");
        let shown = format!("{error:?} {record} {record:?}");
        assert!(!shown.contains(FRESH), "{shown}");
    }
}

#[tokio::test]
async fn an_expired_endpoint_session_is_a_404_delivered_and_the_guards_rule_is_unchanged() {
    // A throttled tools/call is sent again; a 404 (an expired gateway session) is delivered as
    // it is (MCP clients re-initialise on it); a non-idempotent tool whose answer was lost is
    // not sent again.
    let service = Scripted::new([
        Step::Respond(response(
            429,
            &[("retry-after", "0"), ("content-type", "application/json")],
            b"{}",
        )),
        Step::Respond(ok()),
        Step::Respond(response(404, &[], b"")),
        Step::Fail(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        ))),
    ]);
    let shared = service.shared();
    let layer = fresh_endpoint();
    let client = ServiceBuilder::new()
        .layer(recommended_layers(ReplayGuardLayer::new(), layer))
        .service(service);
    let url = "https://gw.example/mcp";
    let answer = client.clone().oneshot(mcp_post(url, CALL)).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(shared.calls(), 2);
    let mut expired = mcp_post(url, CALL);
    expired
        .headers_mut()
        .insert("mcp-session-id", "gone".parse().unwrap());
    let answer = client.clone().oneshot(expired).await.unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(shared.calls(), 3);
    let error = client.oneshot(mcp_post(url, CALL)).await.unwrap_err();
    assert_eq!(
        shared.calls(),
        4,
        "a call that may have run is not sent again"
    );
    let record = error.record().unwrap();
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 1);
    assert!(
        attempts[0].decisions().iter().any(
            |d| d.layer() == "replay_guard" && matches!(d.verdict(), Verdict::Forbidden { .. })
        ),
        "{record}"
    );
}

// Over the emulator: each door as AgentCore plays it.

/// A JSON-RPC request to `url`, in the MCP session `session` if any.
fn rpc(
    url: &str,
    session: Option<&str>,
    id: u64,
    method: &str,
    params: serde_json::Value,
) -> Request<Full<Bytes>> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    at_2025_11_25(common::mcp_post(url, session, body.to_string()))
}

fn initialize(url: &str) -> Request<Full<Bytes>> {
    rpc(
        url,
        None,
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "doors", "version": "1"}}),
    )
}

fn call_tool(url: &str, session: Option<&str>, id: u64, tool: &str) -> Request<Full<Bytes>> {
    let arguments = if tool == "add" {
        serde_json::json!({"a": 1, "b": 2})
    } else {
        serde_json::json!({})
    };
    rpc(
        url,
        session,
        id,
        "tools/call",
        serde_json::json!({"name": tool, "arguments": arguments}),
    )
}

/// An emulated OAuth runtime that takes the token `FRESH`, and the recommended layers over a
/// bearer invoke layer for it that gets its tokens from `tokens`.
async fn bearer_runtime(tokens: impl ProvideToken) -> (Emulator, OverHttp<SigV4InvokeLayer>) {
    let emulator = start(EmulatorConfig::default().bearer_tokens([FRESH])).await;
    let target = InvokeTarget::arn(emulator.runtime_arn()).endpoint(emulator.endpoint());
    let layer = SigV4InvokeLayer::bearer(target, tokens).build().unwrap();
    (emulator, over_http(ReplayGuardLayer::new(), layer))
}

/// The emulated gateway's MCP sessions expired, then a call of `counter` (JSON-RPC id `id`) in
/// `session`, the one the client holds, through `stack`: the answer.
async fn call_after_expiry<S, B>(
    emulator: &Emulator,
    stack: &S,
    url: &str,
    session: &str,
    id: u64,
) -> Response<B>
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    emulator.expire_mcp_sessions();
    send(stack, call_tool(url, Some(session), id, "counter"))
        .await
        .unwrap()
}

#[tokio::test]
async fn over_the_emulator_a_bearer_runtime_refreshes_a_refused_token_once() {
    let tokens = Tokens::default();
    let (emulator, stack) = bearer_runtime(tokens.provider()).await;
    let response = send(&stack, call_tool(RUNTIME_URL, None, 1, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    assert_eq!(record.len(), 2, "{record}");
    let audit = emulator.audit();
    assert_eq!(audit.unauthorized, 1);
    assert_eq!(emulator.counter(), 1, "the refused attempt ran nothing");
    assert_eq!(tokens.refreshed.load(Ordering::SeqCst), 1);
    assert_eq!(
        audit
            .received
            .iter()
            .map(|r| r.bearer_accepted)
            .collect::<Vec<_>>(),
        [false, true]
    );
    // Later calls use the fresh token straight away.
    let response = send(&stack, call_tool(RUNTIME_URL, None, 2, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(emulator.audit().unauthorized, 1);
    assert_eq!(emulator.counter(), 2);
}

#[tokio::test]
async fn over_the_emulator_a_wrong_token_is_the_401_delivered_with_the_metadata_url() {
    let (emulator, stack) = bearer_runtime(BearerToken::new(STALE)).await;
    let response = send(&stack, call_tool(RUNTIME_URL, None, 1, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let expected = format!(
        "{}/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Femulated_mcp-AbC123/invocations/.well-known/oauth-protected-resource?qualifier=DEFAULT",
        emulator.endpoint()
    );
    let challenge = response
        .extensions()
        .get::<BearerChallenge>()
        .unwrap()
        .clone();
    assert_eq!(challenge.resource_metadata(), Some(expected.as_str()));
    assert_eq!(
        response.headers()["www-authenticate"],
        format!(r#"Bearer resource_metadata="{expected}""#).as_str()
    );
    let (body, _) = read_all(response.into_body()).await;
    assert!(!String::from_utf8_lossy(&body).contains(STALE));
    assert_eq!(emulator.counter(), 0);
    assert_eq!(
        emulator.audit().requests,
        1,
        "a static token is not sent again"
    );
}

#[tokio::test]
async fn over_the_emulator_a_gateway_over_sigv4_keeps_mcp_sessions_and_the_guards_rule() {
    let emulator = start(EmulatorConfig::default().gateway(true)).await;
    let layer = emulator.endpoint_signer().build().unwrap();
    let stack = over_http(ReplayGuardLayer::new().idempotent_tools(["add"]), layer);
    let url = emulator.gateway_url();
    let response = send(&stack, initialize(&url)).await.unwrap();
    assert_eq!(response.status(), 200);
    let session = session_of(&response);
    // A lost answer: `add` (declared idempotent) is sent again, `counter` is not.
    emulator.push_fault(Fault::DropAfterRun);
    let response = send(&stack, call_tool(&url, Some(&session), 1, "add"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(emulator.audit().executions_of("add"), 2);
    emulator.push_fault(Fault::DropAfterRun);
    let error = send(&stack, call_tool(&url, Some(&session), 2, "counter"))
        .await
        .unwrap_err();
    assert_eq!(error.record().unwrap().len(), 1);
    assert_eq!(emulator.counter(), 1);
    // A throttled call is sent again: nothing ran.
    emulator.push_fault(Fault::Throttle { retry_after: None });
    let response = send(&stack, call_tool(&url, Some(&session), 3, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(emulator.counter(), 2);
    // A request without the session: the 400 delivered. An expired session: the 404 delivered,
    // not sent again, nothing run.
    let response = send(&stack, call_tool(&url, None, 4, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = call_after_expiry(&emulator, &stack, &url, &session, 5).await;
    assert_eq!(response.status(), 404);
    assert_eq!(AttemptRecord::of_response(&response).unwrap().len(), 1);
    assert_eq!(emulator.counter(), 2);
    // The emulator's signer sends to its origin only: the same server by another name is
    // another origin, refused unsent.
    let elsewhere = url.replacen("127.0.0.1", "localhost", 1);
    let before = emulator.audit().requests;
    let error = send(&stack, call_tool(&elsewhere, Some(&session), 6, "counter"))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidRequest, "{error}");
    let audit = emulator.audit();
    assert_eq!(audit.requests, before, "nothing more reached the emulator");
    assert_eq!(audit.mcp_session_refusals, 2);
    assert_eq!(audit.signature_failures, 0);
    assert!(
        audit
            .received
            .iter()
            .all(|r| r.operation.as_deref() == Some("mcp"))
    );
    assert!(
        audit
            .received
            .iter()
            .all(|r| r.authorization == Some("sigv4"))
    );
    // GET and DELETE went to the gateway, which decides: a DELETE of an expired session is
    // its 404, a GET its 405.
    let delete = delete_session(&url, &session);
    assert_eq!(send(&stack, delete).await.unwrap().status(), 404);
    let get = get_stream(&url, None);
    assert_eq!(stack.oneshot(get).await.unwrap().status(), 405);
    let methods: Vec<String> = emulator
        .audit()
        .received
        .iter()
        .map(|r| r.http_method.clone())
        .collect();
    assert_eq!(methods[methods.len() - 2..], ["DELETE", "GET"]);
}

#[tokio::test]
async fn over_the_emulator_a_gateway_over_a_bearer_token_refreshes_it_and_expires_sessions() {
    let emulator = start(
        EmulatorConfig::default()
            .gateway(true)
            .bearer_tokens([FRESH]),
    )
    .await;
    let tokens = Tokens::default();
    let layer = McpEndpointLayer::bearer(tokens.provider()).build().unwrap();
    let stack = over_http(ReplayGuardLayer::new(), layer);
    let url = emulator.gateway_url();
    let response = send(&stack, initialize(&url)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(emulator.audit().unauthorized, 1);
    assert_eq!(tokens.refreshed.load(Ordering::SeqCst), 1);
    let session = session_of(&response);
    let response = send(&stack, call_tool(&url, Some(&session), 1, "counter"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(emulator.counter(), 1);
    let response = call_after_expiry(&emulator, &stack, &url, &session, 2).await;
    assert_eq!(response.status(), 404);
    assert_eq!(emulator.counter(), 1);
    assert_eq!(emulator.audit().unauthorized, 1);
}

#[tokio::test]
async fn over_the_emulator_a_sigv4_mcp_url_is_signed_for_its_signing_name() {
    let emulator = start(
        EmulatorConfig::default()
            .gateway(true)
            .signing_name("execute-api")
            .region("us-west-2"),
    )
    .await;
    let url = emulator.gateway_url();
    for (name, status) in [("execute-api", 200), ("bedrock-agentcore", 403)] {
        let layer = McpEndpointLayer::sigv4(emulator.credentials())
            .region("us-west-2")
            .signing_name(name)
            .build()
            .unwrap();
        let response = layer
            .layer(http_client())
            .oneshot(initialize(&url))
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{name}");
    }
    let audit = emulator.audit();
    assert_eq!(audit.signature_failures, 1);
    assert_eq!(
        audit.received.len(),
        2,
        "a refused signature within the clock's tolerance is not sent again"
    );
}

// What a review of the doors found, pinned.

#[tokio::test]
async fn a_refresh_that_cannot_be_made_delivers_the_refused_401_with_its_challenge() {
    let service = Scripted::new([Step::Respond(unauthorized())]);
    let shared = service.shared();
    let tokens = TokenFn::new(|refused: Option<BearerToken>| async move {
        if refused.is_some() {
            Err(std::io::Error::other("the refresh token expired"))
        } else {
            Ok(BearerToken::new(STALE))
        }
    });
    let response = bearer_call(tokens, service).await.unwrap();
    // The app (or its MCP client) can still run the OAuth flow from the 401.
    assert_eq!(response.status(), 401);
    assert_eq!(
        response
            .extensions()
            .get::<BearerChallenge>()
            .unwrap()
            .resource_metadata(),
        Some(METADATA)
    );
    let record = AttemptRecord::of_response(&response).unwrap().clone();
    let (body, _) = read_all(response.into_body()).await;
    assert_eq!(
        &body[..],
        br#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Missing Authentication Token"}}"#
    );
    assert_eq!(shared.calls(), 1);
    let attempts = record.attempts();
    assert_eq!(attempts.len(), 2, "{record}");
    assert!(
        record.to_string().contains(
            "could not get a bearer token: the refresh token expired; the refused answer is delivered as it came"
        ),
        "{record}"
    );
}

#[tokio::test]
async fn the_refused_tokens_echo_in_the_next_answer_is_redacted_too() {
    let echo_of_stale = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"seen":"{STALE}"}}}}"#);
    let echo: &'static [u8] = Box::leak(echo_of_stale.into_bytes().into_boxed_slice());
    let service = Scripted::new([
        Step::Respond(unauthorized()),
        Step::Respond(response(200, &[("content-type", "application/json")], echo)),
    ]);
    let tokens = Tokens::default();
    let answer = bearer_call(tokens.provider(), service).await.unwrap();
    let (body, _) = read_all(answer.into_body()).await;
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert!(!body.contains(STALE), "{body}");
    assert!(body.contains(r#""seen":"[redacted]"#), "{body}");
}

#[tokio::test]
async fn tokens_that_are_no_bearer_tokens_are_refused_unsent_and_unquoted() {
    for token in [
        "",
        "ak",
        "short",
        "t\u{e9}kentokentoken",
        "with space inside",
        "a=b=cdefghij",
    ] {
        let layer = bearer_layer(BearerToken::new(token));
        let (result, shared) = send_scripted(&layer, [], mcp_post(RUNTIME_URL, CALL)).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Token, "{token:?}");
        if !token.is_empty() {
            assert!(!error.to_string().contains(token), "{error}");
        }
        assert_eq!(shared.calls(), 0, "{token:?}");
    }
}

#[tokio::test]
async fn a_bearer_token_goes_over_https_or_to_this_machine_only() {
    for (uri, sent) in [
        ("http://gw.example/mcp", false),
        ("https://gw.example/mcp", true),
        ("http://127.0.0.1:8080/mcp", true),
        ("http://localhost/mcp", true),
        ("http://[::1]:9/mcp", true),
    ] {
        let (result, shared) = send_scripted(
            &fresh_endpoint(),
            [Step::Respond(ok())],
            mcp_post(uri, CALL),
        )
        .await;
        assert_eq!(result.is_ok(), sent, "{uri}");
        assert_eq!(shared.calls(), usize::from(sent), "{uri}");
        if let Err(error) = result {
            assert_eq!(error.kind(), ErrorKind::InvalidRequest);
        }
    }
}

#[tokio::test]
async fn an_endpoint_request_drops_what_is_hop_by_hop_or_would_hide_an_echo() {
    let mut request = mcp_post("https://Gw.Example:443/mcp", CALL);
    let headers = request.headers_mut();
    headers.insert("accept-encoding", "gzip, br".parse().unwrap());
    headers.insert("connection", "x-hop, keep-alive".parse().unwrap());
    headers.insert("x-hop", "1".parse().unwrap());
    headers.insert("proxy-connection", "keep-alive".parse().unwrap());
    headers.insert("x-kept", "2".parse().unwrap());
    let (result, shared) = send_scripted(&fresh_endpoint(), [Step::Respond(ok())], request).await;
    result.unwrap();
    let requests = shared.requests.lock().unwrap();
    let sent = &requests[0].0.headers;
    for name in ["accept-encoding", "connection", "x-hop", "proxy-connection"] {
        assert!(!sent.contains_key(name), "{name} was carried");
    }
    assert_eq!(sent["x-kept"], "2");
    // The Host the SDKs sign: no default port.
    assert_eq!(sent["host"], "Gw.Example");
}
