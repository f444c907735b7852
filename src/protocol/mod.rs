//! MCP's protocol versions, and what a Streamable HTTP client of each era writes: the one
//! place the layers, the emulator and the proxy learn them from.
//!
//! ```
//! use agentcore_tower::protocol::{self, ParamHeaders};
//! use serde_json::json;
//!
//! // A 2026-07-28 request names its version in `_meta`, not in an `initialize` before it.
//! let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
//!     "name": "weather", "arguments": {"city": "Zürich"},
//!     "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
//! assert_eq!(protocol::version_in_meta(&call), Some("2026-07-28"));
//! assert!(protocol::is_stateless("2026-07-28"));
//!
//! // The headers that version asks for, `Mcp-Param-*` from the tool's listed schema.
//! let mut params = ParamHeaders::default();
//! params.learn(&json!({"tools": [{"name": "weather", "inputSchema": {"type": "object",
//!     "properties": {"city": {"type": "string", "x-mcp-header": "City"}}}}]}));
//! let headers = protocol::request_headers(&call, Some(&params));
//! assert_eq!(headers["mcp-method"], "tools/call");
//! assert_eq!(headers["mcp-name"], "weather");
//! // Not plain ASCII: Base64 in the revision's sentinel form.
//! assert_eq!(headers["mcp-param-city"], "=?base64?WsO8cmljaA==?=");
//! ```
//!
//! | version | handshake | batches | `MCP-Protocol-Version` | `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` |
//! |---|---|---|---|---|
//! | 2024-11-05 | `initialize` | yes | — | — |
//! | 2025-03-26 | `initialize` | yes | — | — |
//! | 2025-06-18, 2025-11-25 | `initialize` | no | every request after `initialize` | — |
//! | 2026-07-28 | none: `_meta` on every request, `server/discover` | no | every POST, equal to `_meta` | every POST |

mod headers;
mod message;

pub(crate) use headers::name_key;
pub use headers::{
    ParamHeaders, check_request_headers, decode_header_value, encode_header_value, name_of,
    request_headers,
};
pub use message::{InvalidMessage, check_client_message};

/// The newest MCP protocol version the crate knows.
pub const LATEST: &str = "2026-07-28";

/// The newest version with an `initialize` handshake.
pub const LATEST_WITH_INITIALIZE: &str = "2025-11-25";

/// Every MCP protocol version the crate knows, oldest first.
pub const KNOWN_VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The `params._meta` key that names a request's protocol version (2026-07-28 and later).
pub const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The first version without `initialize` and without MCP sessions: its requests carry their
/// version in `_meta` and every POST its `Mcp-Method` header.
const FIRST_STATELESS: &str = "2026-07-28";

/// Whether `version` is one of the stateless revisions (2026-07-28 and later): no
/// `initialize`, no `Mcp-Session-Id`, the standard headers on every POST. Versions are dates
/// and compare as text.
pub fn is_stateless(version: &str) -> bool {
    is_version_shaped(version) && version >= FIRST_STATELESS
}

/// Whether a client of `version` may send a JSON-RPC batch: only 2025-03-26, which required
/// servers to accept them; 2025-06-18 removed batching and later versions never had it
/// (2024-11-05 had no Streamable HTTP).
pub fn allows_batches(version: &str) -> bool {
    version == "2025-03-26"
}

/// `params._meta["io.modelcontextprotocol/protocolVersion"]` of a message, when it is a string.
pub fn version_in_meta(message: &serde_json::Value) -> Option<&str> {
    message
        .get("params")?
        .get("_meta")?
        .get(PROTOCOL_VERSION_META)?
        .as_str()
}

/// `YYYY-MM-DD`: what MCP's versions look like (the only shape that compares as a date).
fn is_version_shaped(version: &str) -> bool {
    let b = version.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_eras_are_told_apart_by_date() {
        assert!(is_stateless("2026-07-28"));
        assert!(is_stateless("2027-03-01"));
        for old in &KNOWN_VERSIONS[..4] {
            assert!(!is_stateless(old), "{old}");
        }
        assert!(!is_stateless("latest"), "not a date");
        assert!(!is_stateless("2026-7-28"));
        assert!(allows_batches("2025-03-26"));
        assert!(!allows_batches("2025-06-18") && !allows_batches("2026-07-28"));
    }

    #[test]
    fn the_version_is_read_from_meta_only_as_a_string() {
        let with = |meta: serde_json::Value| json!({"method": "ping", "params": {"_meta": meta}});
        assert_eq!(
            version_in_meta(&with(json!({PROTOCOL_VERSION_META: "2026-07-28"}))),
            Some("2026-07-28")
        );
        assert_eq!(
            version_in_meta(&with(json!({PROTOCOL_VERSION_META: 1}))),
            None
        );
        assert_eq!(version_in_meta(&json!({"method": "ping"})), None);
        assert_eq!(version_in_meta(&json!([1])), None);
    }
}
