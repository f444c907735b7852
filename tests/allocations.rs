//! Allocations per call, counted (deterministic, unlike time): the whole recommended stack, the
//! signer alone, the retry layers and the session recovery layer over an in-memory service,
//! beyond what the request and the answer allocate; and the signer against what a raw
//! `aws_sigv4` signature of the same request allocates alone. A counting global allocator
//! (this test binary only; the library forbids unsafe code) counts every allocation of the
//! process while one call runs on a current-thread runtime; the ceilings below are this
//! crate's counts when they were set, so a change that allocates more per call fails here
//! rather than in a benchmark nobody reads.
//!
//! The request is the benches' (`compat/benches/`): a 1 KiB `tools/call`, the MCP headers,
//! static credentials with a ~700-character STS session token; the answer a 300-byte JSON body.

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentcore_tower::endpoint::McpEndpointLayer;
use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
use agentcore_tower::{
    McpSessionRecoveryLayer, ReplayGuardLayer, SessionBusyRetryLayer, ThrottleRetryLayer,
    recommended_layers,
};
use aws_credential_types::Credentials;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt, service_fn};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123";
const ANSWER: &[u8] = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"the answer is 3, computed by a tool whose output is long enough to look like a real one: lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua"}],"isError":false}}"#;

/// A realistic STS session token: about 700 characters of base64.
fn session_token() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u32 = 17;
    let mut token = String::from("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+");
    while token.len() < 696 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        token.push(alphabet[(x >> 16) as usize % 64] as char);
    }
    token
}

fn credentials() -> Credentials {
    Credentials::new(
        "AKIDALLOCATIONS",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some(session_token()),
        None,
        "test",
    )
}

/// A 1 KiB `tools/call`.
fn body() -> Bytes {
    let padding = "x".repeat(1024 - 120);
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"add","arguments":{{"a":1,"b":2,"note":"{padding}"}}}}}}"#
    ))
}

fn request(uri: &str, body: &Bytes) -> Request<Full<Bytes>> {
    Request::post(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", "mcp-session-3f1c2a9e")
        .body(Full::new(body.clone()))
        .unwrap()
}

fn answer() -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", "application/json")
        .header("content-length", ANSWER.len())
        .body(Full::new(Bytes::from_static(ANSWER)))
        .unwrap()
}

/// Allocations per call of `call`, after a warm-up, averaged over 200 calls.
fn per_call<F, Fut>(runtime: &tokio::runtime::Runtime, mut call: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for _ in 0..20 {
        runtime.block_on(call());
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..200 {
        runtime.block_on(call());
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 200.0
}

/// Sends `request` through `service` and reads the whole answer.
async fn once<S, B>(service: &S, request: Request<Full<Bytes>>)
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let response = service.clone().oneshot(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), ANSWER.len());
}

/// A raw `aws_sigv4` signature of the same request: what the signer is measured against.
fn raw_sign(credentials: &Credentials, body: &Bytes) {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("bedrock-agentcore")
        .time(std::time::SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "mcp-session-3f1c2a9e"),
        ("host", "bedrock-agentcore.us-east-1.amazonaws.com"),
    ];
    let signable = SignableRequest::new(
        "POST",
        "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fcalc-AbC123/invocations",
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let (instructions, _signature) = sign(signable, &params).unwrap().into_parts();
    let mut request = http::Request::new(());
    instructions.apply_to_request_http1x(&mut request);
    std::hint::black_box(request);
}

#[test]
fn allocations_per_call_stay_within_their_ceilings() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let body = body();
    let credentials = credentials();
    let inner = service_fn(|_: Request<Full<Bytes>>| async { Ok::<_, Infallible>(answer()) });

    let raw = per_call(&runtime, || {
        raw_sign(&credentials, &body);
        async {}
    });
    let signer = SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), credentials.clone())
        .build()
        .unwrap()
        .layer(inner);
    let alone = per_call(&runtime, || {
        once(&signer, request("http://mcp.invalid/mcp", &body))
    });
    let retry = ReplayGuardLayer::new()
        .layer(ThrottleRetryLayer::new().layer(SessionBusyRetryLayer::new().layer(inner)));
    let layers = per_call(&runtime, || {
        once(&retry, request("http://mcp.invalid/mcp", &body))
    });
    let bare = per_call(&runtime, || {
        once(&inner, request("http://mcp.invalid/mcp", &body))
    });
    let full = recommended_layers(
        ReplayGuardLayer::new(),
        SigV4InvokeLayer::builder(InvokeTarget::arn(ARN), credentials.clone())
            .build()
            .unwrap(),
    )
    .layer(inner);
    let stack = per_call(&runtime, || {
        once(&full, request("http://mcp.invalid/mcp", &body))
    });
    let endpoint = recommended_layers(
        ReplayGuardLayer::new(),
        McpEndpointLayer::sigv4(credentials.clone())
            .region("us-east-1")
            // As the proxy has it: the check costs no allocation.
            .origin("https://gw.gateway.bedrock-agentcore.us-east-1.amazonaws.com")
            .build()
            .unwrap(),
    )
    .layer(inner);
    let gateway = per_call(&runtime, || {
        once(
            &endpoint,
            request(
                "https://gw.gateway.bedrock-agentcore.us-east-1.amazonaws.com/mcp",
                &body,
            ),
        )
    });
    // The session recovery layer over a session it saw opened (the MCP server issues the
    // request's id to an `initialize` without one), the session's notification sent: what
    // every call of an open session pays.
    let issuing = service_fn(|request: Request<Full<Bytes>>| async move {
        let mut answer = answer();
        if !request.headers().contains_key("mcp-session-id") {
            answer
                .headers_mut()
                .insert("mcp-session-id", "mcp-session-3f1c2a9e".parse().unwrap());
        }
        Ok::<_, Infallible>(answer)
    });
    let recovery = McpSessionRecoveryLayer::new().layer(issuing);
    let opening = |body: &'static str, session: bool| {
        let mut request = request(
            "http://mcp.invalid/mcp",
            &Bytes::from_static(body.as_bytes()),
        );
        if !session {
            request.headers_mut().remove("mcp-session-id");
        }
        request
    };
    runtime.block_on(once(
        &recovery,
        opening(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
            false,
        ),
    ));
    runtime.block_on(once(
        &recovery,
        opening(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            true,
        ),
    ));
    let recovering = per_call(&runtime, || {
        once(&recovery, request("http://mcp.invalid/mcp", &body))
    });
    let issuing_bare = per_call(&runtime, || {
        once(&issuing, request("http://mcp.invalid/mcp", &body))
    });
    println!(
        "allocations per call: session recovery {recovering} (bare {issuing_bare}), raw sign {raw}, signer alone {alone} (request and answer {bare}), \
         retry layers {layers}, full stack {stack}, full stack over an endpoint {gateway}"
    );
    // The ceilings: this crate's counts when they were set (see the README's Performance),
    // what the layers allocate beyond the request and the answer. The signature is the
    // crate's own (no longer a call of aws-sigv4's `sign`, whose count was subtracted here).
    let ceilings = [
        ("signer alone", alone - bare, 31.0),
        ("guard + throttle + session busy", layers - bare, 16.0),
        ("full stack", stack - bare, 36.0),
        ("full stack over an MCP endpoint", gateway - bare, 37.0),
        ("session recovery", recovering - issuing_bare, 14.0),
    ];
    let mut over = Vec::new();
    for (what, count, ceiling) in ceilings {
        println!(
            "{what}: {count} allocations per call beyond the request and answer (ceiling {ceiling})"
        );
        if count > ceiling {
            over.push(format!("{what}: {count} > {ceiling}"));
        }
    }
    assert!(
        over.is_empty(),
        "more allocations per call than before: {over:?}"
    );
    // The whole layer, signature included, allocates less than a raw signature alone.
    assert!(
        alone - bare < raw,
        "signer alone {} >= raw signature {raw}",
        alone - bare
    );
    // The raw count is aws-sigv4's: a change of it is a dependency's, not ours.
    assert!((80.0..=130.0).contains(&raw), "raw signature: {raw}");
}
