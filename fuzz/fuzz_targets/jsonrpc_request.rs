//! JSON-RPC request inspection, through the replay guard: an arbitrary request body is read,
//! judged and never panics; an undeclared body is never re-sent after a dropped connection.
#![no_main]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentcore_tower::ReplayGuardLayer;
use common::*;
use libfuzzer_sys::fuzz_target;
use tower::{Layer, ServiceExt};

fuzz_target!(|body: &[u8]| {
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = tower::service_fn({
        let calls = calls.clone();
        move |_req: http::Request<http_body_util::Full<bytes::Bytes>>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<http::Response<http_body_util::Full<bytes::Bytes>>, _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset)) }
        }
    });
    // No tool is declared and there are no protocol reads: nothing may be sent twice.
    let guard = ReplayGuardLayer::new().protocol_reads(Vec::<String>::new());
    let svc = guard.layer(inner);
    runtime().block_on(async {
        let error = svc.oneshot(request(body.to_vec())).await.unwrap_err();
        assert_eq!(error.record().unwrap().len(), 1);
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
});
