//! The trace headers as AgentCore receives them: over the emulator on loopback, every attempt
//! of a call carries the app's trace (W3C and X-Ray), signed with the rest of the request.

use crate::common;

use std::time::Duration;

use agentcore_tower::RecommendedLayers;
use agentcore_tower::SessionBusyRetryLayer;
use agentcore_tower::telemetry::{TraceContext, TraceHeaders};
use agentcore_tower_emulator::{Emulator, EmulatorConfig, Fault};
use common::*;
use http_body_util::BodyExt;
use serde_json::json;
use tower::{Layer, ServiceExt};

const TRACE: [u8; 16] = [
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
];
const SPAN: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const X_RAY_ROOT: &str = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736";

/// The `tools/call` attempts the emulator received, after `request` went through the
/// recommended stack (with the fixed trace context) over an emulator answering session busy
/// twice, then running the tool.
async fn busy_twice_then_answered(
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> (Emulator, Vec<agentcore_tower_emulator::Received>) {
    let trace = TraceContext::new(|| Some(TraceHeaders::new(TRACE, SPAN, true)));
    busy_twice_then_answered_with(request, trace).await
}

async fn busy_twice_then_answered_with(
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
    trace: TraceContext,
) -> (Emulator, Vec<agentcore_tower_emulator::Received>) {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    emulator.push_fault(Fault::Busy);
    emulator.push_fault(Fault::Busy);
    let stack = RecommendedLayers::new(emulator.signer().build().unwrap())
        .session_busy(SessionBusyRetryLayer::new().base_delay(Duration::from_millis(5)))
        .trace_context(trace)
        .layer(http_client());
    let response = stack.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains("\"result\""),
        "{body:?}"
    );
    let calls = emulator
        .audit()
        .received
        .into_iter()
        .filter(|r| r.method.as_deref() == Some("tools/call"))
        .collect();
    (emulator, calls)
}

#[tokio::test]
async fn every_attempt_reaches_agentcore_with_the_apps_trace_signed() {
    let (emulator, calls) =
        busy_twice_then_answered(tool_call(7, "add", json!({"a": 1, "b": 2}))).await;
    let audit = emulator.audit();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(audit.busy_refusals, 2);
    assert_eq!(audit.signature_failures, 0);
    for attempt in &calls {
        assert!(attempt.signed, "{attempt:#?}");
        let traceparent = attempt.traceparent.as_deref().expect("a traceparent");
        let fields: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(fields.len(), 4, "{traceparent}");
        assert_eq!(fields[0], "00");
        assert_eq!(fields[1], TRACE_ID, "the hook's trace");
        assert_eq!(fields[3], "01");
        let x_ray = attempt
            .amzn_trace_id
            .as_deref()
            .expect("an X-Amzn-Trace-Id");
        assert!(
            x_ray.starts_with(&format!("{X_RAY_ROOT};")),
            "{x_ray}: the same trace's Root"
        );
        assert!(x_ray.ends_with(";Sampled=1"), "{x_ray}");
    }
}

#[tokio::test]
async fn a_traceparent_the_app_set_reaches_agentcore_unchanged() {
    let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let mut request = tool_call(7, "add", json!({"a": 1, "b": 2}));
    request
        .headers_mut()
        .insert("traceparent", own.parse().unwrap());
    let (emulator, calls) = busy_twice_then_answered(request).await;
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(emulator.audit().signature_failures, 0);
    for attempt in &calls {
        assert!(attempt.signed, "{attempt:#?}");
        assert_eq!(attempt.traceparent.as_deref(), Some(own));
        // The app set no X-Ray header: that one is the hook's.
        assert!(
            attempt
                .amzn_trace_id
                .as_deref()
                .is_some_and(|x| x.starts_with(&format!("{X_RAY_ROOT};"))),
            "{attempt:#?}"
        );
    }
}

#[tokio::test]
async fn the_trace_reaches_the_mcp_server_in_params_meta_when_asked_signed() {
    // Opt-in: the same trace context on every attempt, in the body as in the headers.
    let trace = TraceContext::new(|| Some(TraceHeaders::new(TRACE, SPAN, true))).params_meta(true);
    let (emulator, calls) =
        busy_twice_then_answered_with(tool_call(7, "add", json!({"a": 1, "b": 2})), trace).await;
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(emulator.audit().signature_failures, 0);
    assert_eq!(emulator.audit().executions_of("add"), 1);
    let expected = format!("00-{TRACE_ID}-00f067aa0ba902b7-01");
    for attempt in &calls {
        assert!(attempt.signed, "{attempt:#?}");
        assert_eq!(attempt.meta_traceparent.as_deref(), Some(&*expected));
    }
    // Off by default: the body is the app's.
    let (_, calls) = busy_twice_then_answered(tool_call(7, "add", json!({"a": 1, "b": 2}))).await;
    assert!(
        calls.iter().all(|c| c.meta_traceparent.is_none()),
        "{calls:#?}"
    );
}
