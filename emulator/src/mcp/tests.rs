//! The era of each request at a server of both eras, of the `initialize` era only and of
//! 2026-07-28 only, and the answers a modern-only server refuses with.

use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::{Era, Refusal, Reply, era, inspect, modern, supported_versions};
use crate::{Emulator, EmulatorConfig};

/// The three servers: both eras, the `initialize` era only, 2026-07-28 only.
async fn servers() -> [Emulator; 3] {
    let start = |config| async {
        Emulator::start(config)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    };
    [
        start(EmulatorConfig::default()).await,
        start(EmulatorConfig::default().newest_protocol_version("2025-11-25")).await,
        start(EmulatorConfig::default().oldest_protocol_version("2026-07-28")).await,
    ]
}

fn headers(version: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(version) = version {
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_str(version).unwrap(),
        );
    }
    headers
}

/// The era `emulator` reads `body` in, with `version` in `MCP-Protocol-Version`.
fn era_of(emulator: &Emulator, version: Option<&str>, body: &Value) -> Era {
    era(
        &emulator.state,
        &headers(version),
        &inspect(body.to_string().as_bytes()),
    )
}

fn request(method: &str, meta: Option<&str>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}});
    if let Some(version) = meta {
        message["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": version});
    }
    message
}

#[tokio::test]
async fn each_server_speaks_its_versions() {
    let [both, legacy, modern] = servers().await;
    let all = [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
    ];
    assert_eq!(supported_versions(&both.state), all);
    assert_eq!(supported_versions(&legacy.state), all[..4]);
    assert_eq!(supported_versions(&modern.state), ["2026-07-28"]);
    let middle = Emulator::start(EmulatorConfig::default().oldest_protocol_version("2025-06-18"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(supported_versions(&middle.state), all[2..]);
}

#[tokio::test]
async fn each_server_reads_each_era_of_request() {
    let [both, legacy, modern] = servers().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25"}});
    let new = request("tools/list", Some("2026-07-28"));
    let old = request("tools/list", None);
    let unspoken = || Era::Unspoken("2026-07-28".to_owned());
    // (server, header, body, era)
    let cases = [
        (&both, None, &initialize, Era::Legacy),
        (&both, Some("2026-07-28"), &new, Era::Modern),
        (&both, Some("2025-11-25"), &old, Era::Legacy),
        (&legacy, None, &initialize, Era::Legacy),
        (&legacy, Some("2026-07-28"), &new, unspoken()),
        (&legacy, None, &new, Era::Legacy),
        (&legacy, Some("2025-11-25"), &old, Era::Legacy),
        (
            &modern,
            None,
            &initialize,
            Era::Refused(Refusal::Initialize),
        ),
        (&modern, Some("2026-07-28"), &new, Era::Modern),
        (
            &modern,
            Some("2025-11-25"),
            &old,
            Era::Refused(Refusal::NoMetaVersion),
        ),
        (&modern, None, &old, Era::Refused(Refusal::NoHeader)),
        // A `_meta` version of another revision: 2026-07-28's checks answer it (-32022).
        (
            &modern,
            None,
            &request("tools/list", Some("2025-11-25")),
            Era::Modern,
        ),
    ];
    for (i, (server, header, body, expected)) in cases.into_iter().enumerate() {
        assert_eq!(era_of(server, header, body), expected, "case {i}");
    }
}

#[tokio::test]
async fn a_modern_only_server_answers_what_is_no_request_in_2026() {
    let [_, _, modern] = servers().await;
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
    for body in [notification, response, json!([request("ping", None)])] {
        assert_eq!(era_of(&modern, None, &body), Era::Modern, "{body}");
        assert!(era_of(&modern, None, &body).sessionless());
    }
    let refused = era_of(&modern, Some("2025-11-25"), &request("tools/list", None));
    assert!(
        refused.sessionless(),
        "a modern-only server has no MCP session"
    );
}

#[tokio::test]
async fn a_modern_only_server_refuses_each_request_of_the_initialize_era_with_a_400() {
    let [_, _, modern] = servers().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18"}});
    let list = request("tools/list", None);
    let cases = [
        (
            Refusal::Initialize,
            &initialize,
            json!({"code": -32022,
            "message": "Unsupported protocol version",
            "data": {"requested": "2025-06-18", "supported": ["2026-07-28"]}}),
        ),
        (
            Refusal::NoMetaVersion,
            &list,
            json!({"code": -32602,
            "message": "Invalid params: request requires protocolVersion in request _meta"}),
        ),
        (
            Refusal::NoHeader,
            &list,
            json!({"code": -32020,
            "message": "Missing MCP-Protocol-Version header for request requiring per-request protocol metadata"}),
        ),
    ];
    for (refusal, body, error) in cases {
        let Reply::Answer(status, answer) = modern::refuse(refusal, body, &modern.state) else {
            panic!("{refusal:?}: not an answer");
        };
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refusal:?}");
        let id = body["id"].clone();
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": id, "error": error}),
            "{refusal:?}"
        );
    }
}
