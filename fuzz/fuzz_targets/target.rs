//! Target, ARN and endpoint parsing: never a panic; what resolves yields well-formed URLs.
#![no_main]

use agentcore_tower::invoke::InvokeTarget;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    runtime: String,
    account: Option<String>,
    qualifier: Option<String>,
    region: Option<String>,
    endpoint: Option<String>,
    fips: bool,
    dual_stack: bool,
}

fuzz_target!(|input: Input| {
    let mut target = match input.account {
        Some(account) => InvokeTarget::runtime_id(input.runtime, account),
        None => InvokeTarget::arn(input.runtime),
    };
    if let Some(q) = input.qualifier {
        target = target.qualifier(q);
    }
    if let Some(r) = input.region {
        target = target.region(r);
    }
    if let Some(e) = input.endpoint {
        target = target.endpoint(e);
    }
    target = target.fips(input.fips).dual_stack(input.dual_stack);
    if let Ok(resolved) = target.resolve() {
        let uri = resolved.invocation_uri();
        assert!(uri.path().ends_with("/invocations"));
        assert_eq!(uri.path().matches("/runtimes/").count() >= 1, true);
        let again: http::Uri = uri.to_string().parse().unwrap();
        assert_eq!(again, uri);
        let _ = resolved.stop_session_uri();
    }
});
