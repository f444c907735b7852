//! `--header NAME=VALUE`: headers added to every request, checked against the door's rules
//! when the command line is read. A value is never shown (it may be a secret): not in a
//! message, not in `Debug`.

use std::fmt;

use agentcore_tower::invoke::{RUNTIME_CUSTOM_MAX_VALUE, RUNTIME_CUSTOM_PREFIX};
use http::{HeaderMap, HeaderName, HeaderValue};

/// How many custom headers a runtime passes on: AWS's guide "Pass custom headers to Amazon
/// Bedrock AgentCore Runtime" (runtime-header-allowlist): "Up to 20 headers can be configured
/// per runtime, and each header value is limited to 4KB" (the value limit is
/// [`RUNTIME_CUSTOM_MAX_VALUE`]).
pub const RUNTIME_CUSTOM_MAX_HEADERS: usize = 20;

/// The headers `--header` adds, in the order given. Equal when their names and values are.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers(pub HeaderMap);

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The names only: a value may be a secret.
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// One `--header NAME=VALUE`: a valid header name and value.
pub fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err("--header takes NAME=VALUE".into());
    };
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("--header {name:?}: not a header name (letters, digits, `-`, `_`)"))?;
    // The message names the header, never the value.
    let value = HeaderValue::from_str(value).map_err(|_| {
        format!("--header {name}: the value is not a header value (visible text, no line breaks)")
    })?;
    Ok((name, value))
}

impl Headers {
    /// The headers of the `--header` options, in the order given: each name once.
    pub fn of(given: Vec<(HeaderName, HeaderValue)>) -> Result<Headers, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in given {
            if headers.contains_key(&name) {
                return Err(format!(
                    "--header {name} is given twice (names are case-insensitive)"
                ));
            }
            headers.insert(name, value);
        }
        Ok(Headers(headers))
    }
}

/// The headers a runtime passes to its container: `X-Amzn-Bedrock-AgentCore-Runtime-Custom-*`
/// only (what `InvokeAgentRuntime` carries; the runtime's request-header allowlist must name
/// them too), within AgentCore's limits ([`check_limits`]).
pub fn check_runtime(headers: &Headers) -> Result<(), String> {
    for name in headers.0.keys() {
        if !name.as_str().starts_with(RUNTIME_CUSTOM_PREFIX)
            || name.as_str().len() == RUNTIME_CUSTOM_PREFIX.len()
        {
            return Err(format!(
                "--header {name}: --runtime-arn passes only X-Amzn-Bedrock-AgentCore-Runtime-\
                 Custom-* headers to the runtime (the ones its request-header allowlist names)"
            ));
        }
    }
    check_limits("a runtime", headers)
}

/// How long a header name a gateway target's allowlist takes: the control plane's
/// `MetadataConfiguration.allowedRequestHeaders` (each name 1 to 100 characters).
pub const GATEWAY_MAX_NAME: usize = 100;

/// The headers an AgentCore Gateway is sent: an MCP endpoint's ([`check_endpoint`]), counted
/// against AgentCore's limits for custom headers as a runtime's are ([`check_limits`]), each
/// name short enough for a target's allowlist ([`GATEWAY_MAX_NAME`]): a header the gateway
/// cannot pass on is said at start, not lost on every call.
pub fn check_gateway(headers: &Headers) -> Result<(), String> {
    check_endpoint("--gateway-url", headers)?;
    if let Some(name) = headers
        .0
        .keys()
        .find(|name| name.as_str().len() > GATEWAY_MAX_NAME)
    {
        return Err(format!(
            "--header {name}: the name is {} characters; a gateway target's header allowlist \
             takes names of at most {GATEWAY_MAX_NAME}",
            name.as_str().len()
        ));
    }
    check_limits("a gateway", headers)
}

/// AgentCore's limits for custom headers: at most [`RUNTIME_CUSTOM_MAX_HEADERS`], each value at
/// most [`RUNTIME_CUSTOM_MAX_VALUE`] (4 KB). `door` names what is sent to, for the message.
fn check_limits(door: &str, headers: &Headers) -> Result<(), String> {
    for (name, value) in &headers.0 {
        if value.len() > RUNTIME_CUSTOM_MAX_VALUE {
            return Err(format!(
                "--header {name}: the value is {} bytes; AgentCore passes at most \
                 {RUNTIME_CUSTOM_MAX_VALUE} (4 KB)",
                value.len()
            ));
        }
    }
    if headers.0.len() > RUNTIME_CUSTOM_MAX_HEADERS {
        return Err(format!(
            "--header is given {} times; {door} passes at most {RUNTIME_CUSTOM_MAX_HEADERS} \
             custom headers",
            headers.0.len()
        ));
    }
    Ok(())
}

/// The headers an MCP endpoint (a gateway, any URL) may be sent: any but those the proxy, the
/// signature or the transport own — `authorization`, `host`, `x-amz-*` (SigV4), `mcp-*` and
/// `last-event-id` (the MCP transport), `accept` and `content-*` (the message), and the
/// hop-by-hop ones (`connection`, `keep-alive`, `proxy-*`, `te`, `trailer`,
/// `transfer-encoding`, `upgrade`).
/// `x-amzn-*` is allowed: a gateway reserves no such request header.
pub fn check_endpoint(flag: &str, headers: &Headers) -> Result<(), String> {
    for name in headers.0.keys() {
        let name = name.as_str();
        let rule = match name {
            "authorization" => Some("the signature or the bearer token sets it"),
            "host" => Some("the URL sets it"),
            "accept" => Some("the MCP transport sets it"),
            "last-event-id" => Some("the MCP transport sets it to resume a stream"),
            "connection" | "keep-alive" | "te" | "trailer" | "transfer-encoding" | "upgrade" => {
                Some("a hop-by-hop header, for one connection only")
            }
            _ if name.starts_with("proxy-") => Some("a hop-by-hop header, for one connection only"),
            _ if name.starts_with("x-amz-") => Some("x-amz-* is SigV4's"),
            _ if name.starts_with("mcp-") => Some("mcp-* is the MCP transport's"),
            _ if name.starts_with("content-") => Some("content-* describes the message body"),
            _ => None,
        };
        if let Some(rule) = rule {
            return Err(format!(
                "--header {name} is reserved ({rule}): {flag} refuses it"
            ));
        }
    }
    Ok(())
}
