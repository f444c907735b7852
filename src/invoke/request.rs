//! An MCP POST mapped onto `InvokeAgentRuntime` (and a DELETE onto `StopRuntimeSession`), or
//! carried as it is to an MCP endpoint: the headers and URI each sends (the auth is added by
//! [`auth`](super::auth)).

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::target::ResolvedTarget;
use crate::context::CallContext;
use crate::contract::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::{Body as JsonRpcBody, ParsedBody};
use crate::protocol;
use crate::redact::HOP_BY_HOP;

/// The runtime session header.
pub(crate) const RUNTIME_SESSION_ID: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
/// The runtime user header.
pub(crate) const RUNTIME_USER_ID: &str = "x-amzn-bedrock-agentcore-runtime-user-id";
/// The service name requests are signed for.
pub(crate) const SIGNING_NAME: &str = "bedrock-agentcore";

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const SESSION_HEADER: HeaderName = HeaderName::from_static(RUNTIME_SESSION_ID);
const USER_HEADER: HeaderName = HeaderName::from_static(RUNTIME_USER_ID);

/// The request headers `InvokeAgentRuntime` models, with the lengths the service accepts
/// (agentcore-wire.md §2.1). Every other header is dropped before signing. Static names: a
/// lookup by `&str` would parse the name again on every call.
static CARRIED: [(HeaderName, usize, usize); 12] = [
    (CONTENT_TYPE, 1, 256),
    (http::header::ACCEPT, 1, 256),
    (MCP_SESSION_ID, 1, 1024),
    (SESSION_HEADER, 33, 256),
    (MCP_PROTOCOL_VERSION, 1, 1024),
    (MCP_METHOD, 1, 1024),
    (MCP_NAME, 1, 1024),
    (USER_HEADER, 1, 1024),
    (HeaderName::from_static("x-amzn-trace-id"), 0, 128),
    (HeaderName::from_static("traceparent"), 0, 128),
    (HeaderName::from_static("tracestate"), 0, 512),
    (HeaderName::from_static("baggage"), 0, 8192),
];

/// The prefix of the custom headers AgentCore passes to the container when the runtime's
/// request-header allowlist names them. AWS's guide "Pass custom headers to Amazon Bedrock
/// AgentCore Runtime" (runtime-header-allowlist): headers prefixed with
/// `X-Amzn-Bedrock-AgentCore-Runtime-Custom-` are passed (the guide now also admits other
/// unrestricted names, this prefix "for backward compatibility"); "Up to 20 headers can be
/// configured per runtime, and each header value is limited to 4KB". Header names are
/// case-insensitive: [`HeaderName`] holds them in lower case.
pub const RUNTIME_CUSTOM_PREFIX: &str = "x-amzn-bedrock-agentcore-runtime-custom-";

/// The largest custom header value the service passes on (4 KB).
pub const RUNTIME_CUSTOM_MAX_VALUE: usize = 4096;

/// Whether `value` is 33..=256 visible ASCII characters: a runtime session id the service takes.
pub(crate) fn is_valid_session_id(value: &str) -> bool {
    (33..=256).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic())
}

fn invalid(detail: String) -> Error {
    Error::new(ErrorKind::InvalidRequest, detail, None)
}

/// The largest `mcp-method` and `mcp-name` the model accepts.
const MCP_ROUTING_MAX: usize = 1024;

/// A value the crate adds of its own accord (`mcp-method`, `mcp-name`), in the MCP
/// specification's value encoding ([`protocol::encode_header_value`]). None when it is empty
/// or, encoded, longer than the model's 1,024 characters: these headers are optional to the
/// runtime, so the call goes on without.
fn routing_value(text: &str) -> Option<HeaderValue> {
    protocol::encode_header_value(text).filter(|value| value.len() <= MCP_ROUTING_MAX)
}

/// The methods that get `mcp-method` (and whether `mcp-name`): the three AgentCore routes on,
/// and — for MCP 2026-07-28 and later, which requires it on every request — every method,
/// named where the revision names it.
fn routed_method(method: Option<&str>, every: bool) -> Option<(&str, bool)> {
    let method = method?;
    if every {
        return Some((method, protocol::name_key(method).is_some()));
    }
    matches!(method, "tools/call" | "resources/read" | "prompts/get").then_some((method, true))
}

/// The body's reading: the one a layer above (the guard), or an earlier attempt, kept for these
/// very bytes, else a new one kept for the layers below and the attempts after.
fn parsed_body(context: &CallContext, body: &Bytes) -> ParsedBody {
    context.parsed(body).unwrap_or_else(|| {
        let parsed = ParsedBody::lazy(body.clone(), false);
        context.set_parsed(parsed.clone());
        parsed
    })
}

/// Whether the body is an `initialize`: the request opens an MCP session.
pub(crate) fn opens_session(context: &CallContext, body: &Bytes) -> bool {
    matches!(parsed_body(context, body).body(), JsonRpcBody::Single(message)
        if message.method.as_deref() == Some("initialize"))
}

/// Builds the headers of an `InvokeAgentRuntime` request from the MCP request's, in the order the
/// SDK writes them: the carried ones, `mcp-method`/`mcp-name` filled from the JSON-RPC body
/// when absent (and when they can be headers), the runtime session (`session_id`, when the
/// request names none) and user, `content-length` and `host`.
pub(crate) fn invoke_headers(
    original: &HeaderMap,
    context: &CallContext,
    body: &Bytes,
    session_id: Option<&str>,
    user_id: Option<&str>,
    target: &ResolvedTarget,
) -> Result<HeaderMap, Error> {
    let mut headers = HeaderMap::with_capacity(CARRIED.len() + 2);
    let (carried, several) = carried(original);
    if let Some((name, _, _)) = CARRIED
        .iter()
        .zip(several)
        .find_map(|(c, s)| s.then_some(c))
    {
        return Err(invalid(format!(
            "the header `{name}` has several values; the operation carries one"
        )));
    }
    for ((name, _, _), value) in CARRIED.iter().zip(carried) {
        if let Some(value) = value {
            headers.insert(name.clone(), value.clone());
        }
    }
    // What the request carries, without hashing each name again.
    let given = |name: &HeaderName| {
        CARRIED
            .iter()
            .zip(carried)
            .find_map(|((carried, _, _), value)| (carried == name).then_some(value))
            .flatten()
    };
    if given(&http::header::ACCEPT).is_none() {
        // The MCP contract refuses (406 / -32011) a request that does not accept both.
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static(crate::contract::REQUIRED_ACCEPT),
        );
    }
    if given(&CONTENT_TYPE).is_none() {
        // The SDK's default for a blob payload.
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
    }
    if given(&MCP_METHOD).is_none() {
        routing_headers(&mut headers, &given, context, body);
    }
    if let (None, Some(session_id)) = (given(&SESSION_HEADER), session_id) {
        headers.insert(
            SESSION_HEADER,
            HeaderValue::from_str(session_id)
                .map_err(|_| invalid("the runtime session id is not a header value".into()))?,
        );
    }
    if let (None, Some(user)) = (given(&USER_HEADER), user_id) {
        headers.insert(
            USER_HEADER,
            HeaderValue::from_str(user)
                .map_err(|_| invalid("the runtime user id is not a header value".into()))?,
        );
    }
    check_lengths(&headers)?;
    // The custom headers, for the container: carried (and so signed), every value.
    for (name, value) in original {
        if name.as_str().starts_with(RUNTIME_CUSTOM_PREFIX) {
            if value.len() > RUNTIME_CUSTOM_MAX_VALUE {
                return Err(invalid(format!(
                    "the header `{name}` is {} bytes; the service passes at most \
                     {RUNTIME_CUSTOM_MAX_VALUE}",
                    value.len()
                )));
            }
            headers.append(name.clone(), value.clone());
        }
    }
    headers.insert(CONTENT_LENGTH, length_value(body.len()));
    headers.insert(HOST, target.host().clone());
    Ok(headers)
}

/// `Mcp-Method` and `Mcp-Name` (and `MCP-Protocol-Version`, when the request's `_meta` names
/// one and the client wrote no header) filled for the methods AgentCore routes on, from the one
/// message of the body — which a layer above (the guard), or an earlier attempt, may have read.
fn routing_headers<'a>(
    headers: &mut HeaderMap,
    given: &impl Fn(&HeaderName) -> Option<&'a HeaderValue>,
    context: &CallContext,
    body: &Bytes,
) {
    let parsed = parsed_body(context, body);
    let message = match parsed.body() {
        JsonRpcBody::Single(message) => Some(message),
        _ => None,
    };
    // The version the request's `_meta` names: the one value the revision allows there.
    let meta_version = message.and_then(|m| m.protocol_version.as_deref());
    if given(&MCP_PROTOCOL_VERSION).is_none()
        && let Some(value) = meta_version.and_then(|v| HeaderValue::from_str(v).ok())
    {
        headers.insert(MCP_PROTOCOL_VERSION, value);
    }
    let every = given(&MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .or(meta_version)
        .is_some_and(protocol::is_stateless);
    if let Some(message) = message
        && let Some((method, named)) = routed_method(message.method.as_deref(), every)
        && let Some(value) = routing_value(method)
    {
        headers.insert(MCP_METHOD, value);
        let name = message
            .name
            .as_deref()
            .filter(|_| named)
            .and_then(routing_value);
        if let (None, Some(name)) = (given(&MCP_NAME), name) {
            headers.insert(MCP_NAME, name);
        }
    }
}

/// `Content-Length`'s value for `len` bytes: its digits written on the stack, then copied once
/// (`HeaderValue::from(usize)` grows a buffer of its own: a tenth of the headers' mapping).
fn length_value(len: usize) -> HeaderValue {
    HeaderValue::from_str(itoa::Buffer::new().format(len)).unwrap_or_else(|_| len.into())
}

/// The value of each [`CARRIED`] header in `headers` (its first), and whether it has several:
/// one walk over `headers` rather than a lookup (a hash) per name.
fn carried(headers: &HeaderMap) -> ([Option<&HeaderValue>; CARRIED.len()], [bool; CARRIED.len()]) {
    let mut values = [None; CARRIED.len()];
    let mut several = [false; CARRIED.len()];
    for (name, value) in headers {
        if let Some(at) = CARRIED.iter().position(|(carried, _, _)| carried == name) {
            several[at] |= values[at].is_some();
            values[at].get_or_insert(value);
        }
    }
    (values, several)
}

fn check_lengths(headers: &HeaderMap) -> Result<(), Error> {
    for ((name, min, max), value) in CARRIED.iter().zip(carried(headers).0) {
        let (min, max) = (*min, *max);
        if let Some(value) = value {
            let text = value
                .to_str()
                .map_err(|_| invalid(format!("the header `{name}` is not visible ASCII text")))?;
            let len = text.chars().count();
            if len < min || len > max {
                return Err(invalid(format!(
                    "the header `{name}` is {len} characters; the service accepts {min} to {max}"
                )));
            }
        }
    }
    Ok(())
}

/// The body and headers of a `StopRuntimeSession` request for `session_id`, with the call's
/// `client_token` (the same on every attempt of one stop, as the SDK sends it).
pub(crate) fn stop_request(
    session_id: &str,
    client_token: &str,
    target: &ResolvedTarget,
) -> Result<(HeaderMap, Bytes), Error> {
    let body = Bytes::from(format!(r#"{{"clientToken":"{client_token}"}}"#));
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        HeaderName::from_static(RUNTIME_SESSION_ID),
        HeaderValue::from_str(session_id)
            .map_err(|_| invalid("the runtime session id is not a header value".into()))?,
    );
    headers.insert(CONTENT_LENGTH, length_value(body.len()));
    headers.insert(HOST, target.host().clone());
    Ok((headers, body))
}

/// Beside the hop-by-hop headers ([`HOP_BY_HOP`]), what is never carried to an MCP endpoint
/// from the request as given: the proxy's headers, and the ones a signature or a token sets.
const NOT_CARRIED: [HeaderName; 8] = [
    // The answer must come as it is, uncompressed: the redaction reads its bytes, and a
    // compressed echo of a secret would pass it.
    http::header::ACCEPT_ENCODING,
    HeaderName::from_static("x-amz-content-sha256"),
    http::header::PROXY_AUTHENTICATE,
    http::header::PROXY_AUTHORIZATION,
    http::header::AUTHORIZATION,
    HOST,
    HeaderName::from_static("x-amz-date"),
    HeaderName::from_static("x-amz-security-token"),
];

/// The one origin an MCP endpoint layer sends to, when it was given one: a scheme, a host
/// (lower case) and a port (the scheme's default when the URL names none), as RFC 6454 has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of `url`, an absolute `http`/`https` URL (see [`crate::uri::absolute_http`]);
    /// its path and query are not part of it. The error says why not.
    pub(crate) fn parse(url: &str, https_only: bool) -> Result<Origin, &'static str> {
        let (scheme, authority, _) = crate::uri::absolute_http(url)?;
        if clear_text_refused(https_only, scheme.as_str(), authority.host()) {
            return Err("a bearer token is sent over https only (plain http to a loopback host)");
        }
        Ok(Origin::of(scheme.as_str(), &authority))
    }

    /// Whether a URL of `scheme` and `authority` is at this origin (no allocation: asked for
    /// every attempt).
    fn admits(&self, scheme: &str, authority: &http::uri::Authority) -> bool {
        let https = scheme == "https";
        https == self.https
            && authority.host().eq_ignore_ascii_case(&self.host)
            && authority.port_u16().unwrap_or(default_port(https)) == self.port
    }

    fn of(scheme: &str, authority: &http::uri::Authority) -> Origin {
        let https = scheme == "https";
        Origin {
            https,
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(default_port(https)),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.host)?;
        if self.port != default_port(self.https) {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// The port a URL of the scheme means when it names none.
fn default_port(https: bool) -> u16 {
    if https { 443 } else { 80 }
}

/// Whether a bearer token (`https_only`) would travel in clear text to `host`: plain http is
/// for a loopback host only.
fn clear_text_refused(https_only: bool, scheme: &str, host: &str) -> bool {
    https_only && scheme == "http" && !is_loopback(host)
}

/// The URI of a request to an MCP endpoint, as the request gives it: absolute (`http`/`https`
/// with a host), without user information (a password belongs in the auth, not in a URL that
/// travels and gets logged), at `origin` when the layer has one. Returns it with its `Host`
/// value.
pub(crate) fn endpoint_uri(
    uri: &http::Uri,
    https_only: bool,
    origin: Option<&Origin>,
) -> Result<(http::Uri, HeaderValue), Error> {
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(invalid(
            "an MCP endpoint request needs an absolute URL (https://host/path): the layer sends \
             it where it names"
                .into(),
        ));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(invalid(format!(
            "the scheme `{scheme}` is not http or https"
        )));
    }
    if authority.as_str().contains('@') {
        return Err(invalid(
            "the URL carries user information (a user or password): give credentials to the \
             layer, not in the URL"
                .into(),
        ));
    }
    if let Some(origin) = origin
        && !origin.admits(scheme, authority)
    {
        return Err(invalid(format!(
            "the request names {}, and this layer sends to {origin} only: it was not sent, so \
             that its token or signature reaches no other server",
            Origin::of(scheme, authority)
        )));
    }
    let host = authority.host();
    if clear_text_refused(https_only, scheme, host) {
        return Err(invalid(
            "a bearer token is sent over https only (plain http to a loopback host): the token \
             would travel in clear text"
                .into(),
        ));
    }
    // The `Host` the SDKs sign: without the scheme's default port.
    let host = match authority.port_u16() {
        Some(port) if port != default_port(scheme == "https") => {
            HeaderValue::from_str(authority.as_str())
        }
        _ => HeaderValue::from_str(host),
    }
    .map_err(|_| invalid("the URL's host is not a header value".into()))?;
    Ok((uri.clone(), host))
}

/// Whether `host` is this machine: `localhost`, `127.0.0.0/8`, `::1`.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The headers of a request to an MCP endpoint: the request's own as they are (the MCP headers
/// among them), minus the hop-by-hop ones and what the auth sets; `Host` from the URL, and
/// `Content-Length` when there is a body (or the method is POST).
pub(crate) fn endpoint_headers(
    given: &HeaderMap,
    host: HeaderValue,
    method: &Method,
    body: &Bytes,
) -> HeaderMap {
    // And the headers `Connection` names: hop-by-hop too (RFC 9110 §7.6.1).
    let named_by_connection = |name: &HeaderName| {
        given
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case(name.as_str()))
    };
    let mut headers = HeaderMap::with_capacity(given.len() + 2);
    for (name, value) in given {
        if !HOP_BY_HOP.contains(name)
            && !NOT_CARRIED.contains(name)
            && name != CONTENT_LENGTH
            && !named_by_connection(name)
        {
            headers.append(name.clone(), value.clone());
        }
    }
    if !body.is_empty() || method == Method::POST {
        headers.insert(CONTENT_LENGTH, length_value(body.len()));
    }
    headers.insert(HOST, host);
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invoke::InvokeTarget;

    fn target() -> ResolvedTarget {
        InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-1")
            .resolve()
            .unwrap()
    }

    const SESSION: Option<&str> = Some("0123456789abcdef0123456789abcdef0");

    fn context() -> CallContext {
        CallContext::enter(&mut http::Request::new(()), "test", None, None).0
    }

    /// A request head of these headers, in this order (a name given twice has both values).
    fn head<const N: usize>(headers: [(&str, &str); N]) -> HeaderMap {
        let mut head = HeaderMap::new();
        for (name, value) in headers {
            head.append(HeaderName::try_from(name).unwrap(), value.parse().unwrap());
        }
        head
    }

    /// The headers for `original` and `body` in a new call, with the test's session id.
    fn headers_for(original: &HeaderMap, body: &Bytes) -> Result<HeaderMap, Error> {
        invoke_headers(original, &context(), body, SESSION, None, &target())
    }

    #[test]
    fn only_modelled_headers_travel_and_mcp_headers_are_filled() {
        let original = head([
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", "Bearer app-token"),
            ("cookie", "a=b"),
            ("x-custom", "1"),
            // MCP 2026-07-28's argument headers: the API models none, so none travels.
            ("mcp-param-city", "Paris"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
        ]);
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{}}}"#);
        let h = invoke_headers(
            &original,
            &context(),
            &body,
            SESSION,
            Some("user-1"),
            &target(),
        )
        .unwrap();
        let mut names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "accept",
                "content-length",
                "content-type",
                "host",
                "mcp-method",
                "mcp-name",
                "traceparent",
                "x-amzn-bedrock-agentcore-runtime-session-id",
                "x-amzn-bedrock-agentcore-runtime-user-id"
            ]
        );
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "add");
        assert_eq!(h["host"], "bedrock-agentcore.us-east-1.amazonaws.com");
        assert_eq!(h["content-length"], body.len().to_string().as_str());
    }

    #[test]
    fn the_clients_own_values_win() {
        let original = head([
            ("mcp-method", "tools/call"),
            ("mcp-name", "mine"),
            (RUNTIME_SESSION_ID, &"s".repeat(40)),
        ]);
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}"#,
        );
        let h = headers_for(&original, &body).unwrap();
        assert_eq!(h["mcp-name"], "mine");
        assert_eq!(h[RUNTIME_SESSION_ID], "s".repeat(40).as_str());
        assert_eq!(h["content-type"], "application/octet-stream");
        let h = headers_for(&HeaderMap::new(), &body).unwrap();
        assert_eq!(
            (
                h["mcp-method"].to_str().unwrap(),
                h["mcp-name"].to_str().unwrap()
            ),
            ("resources/read", "file:///x")
        );
        let ping = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let h = headers_for(&HeaderMap::new(), &ping).unwrap();
        assert!(
            h.get("mcp-method").is_none(),
            "only the routed methods are filled"
        );
    }

    #[test]
    fn a_body_parsed_above_for_the_same_bytes_is_not_parsed_again() {
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}"#,
        );
        let other =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"from-above"}}"#;
        let extensions = context();
        extensions.set_parsed(ParsedBody::new(
            body.clone(),
            JsonRpcBody::parse(other, false),
        ));
        let h = invoke_headers(
            &HeaderMap::new(),
            &extensions,
            &body,
            SESSION,
            None,
            &target(),
        )
        .unwrap();
        assert_eq!(h["mcp-name"], "from-above", "the parse left above was used");
        let changed = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sub"}}"#,
        );
        let h = invoke_headers(
            &HeaderMap::new(),
            &extensions,
            &changed,
            SESSION,
            None,
            &target(),
        )
        .unwrap();
        assert_eq!(h["mcp-name"], "sub", "other bytes are parsed afresh");
    }

    #[test]
    fn names_are_sent_as_the_mcp_spec_encodes_them_or_left_out() {
        let long_uri = format!("file:///{}", "a".repeat(2000));
        for (body, name) in [
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"","arguments":{}}}"#.to_owned(), None),
            (r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"caf\u00e9"}}"#.to_owned(), Some("=?base64?Y2Fmw6k=?=")),
            (r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"café"}}"#.to_owned(), Some("=?base64?Y2Fmw6k=?=")),
            (format!(r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"{long_uri}"}}}}"#), None),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\nb"}}"#.to_owned(), Some("=?base64?YQpi?=")),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":" padded"}}"#.to_owned(), Some("=?base64?IHBhZGRlZA==?=")),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"=?base64?x?="}}"#.to_owned(), Some("=?base64?PT9iYXNlNjQ/eD89?=")),
        ] {
            let body = Bytes::from(body);
            let h = headers_for(&HeaderMap::new(), &body).unwrap_or_else(|e| panic!("{e} for {body:?}"));
            assert_eq!(h.get("mcp-name").map(|v| v.to_str().unwrap()), name, "{body:?}");
            assert!(h.get("mcp-method").is_some(), "{body:?}");
        }
        // At the model's limit it still travels.
        let uri = format!("file:///{}", "a".repeat(1024 - 8));
        let body = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"{uri}"}}}}"#
        ));
        let h = headers_for(&HeaderMap::new(), &body).unwrap();
        assert_eq!(h["mcp-name"], uri.as_str());
    }

    #[test]
    fn every_method_gets_mcp_method_from_mcp_2026_07_28() {
        let ping = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(
            headers_for(&HeaderMap::new(), &ping)
                .unwrap()
                .get("mcp-method")
                .is_none()
        );
        let stateless = head([("mcp-protocol-version", "2026-07-28")]);
        let h = headers_for(&stateless, &ping).unwrap();
        assert_eq!(h["mcp-method"], "ping");
        assert!(h.get("mcp-name").is_none());
    }

    #[test]
    fn a_version_named_in_meta_is_the_headers_version_when_none_is_given() {
        let poll = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        let h = headers_for(&HeaderMap::new(), &poll).unwrap();
        assert_eq!(h["mcp-protocol-version"], "2026-07-28");
        assert_eq!(h["mcp-method"], "tasks/get");
        assert_eq!(h["mcp-name"], "t-1", "a task's polls name the task");
        // The client's own header is never overwritten.
        let given = head([("mcp-protocol-version", "2025-11-25")]);
        let h = headers_for(&given, &poll).unwrap();
        assert_eq!(h["mcp-protocol-version"], "2025-11-25");
        assert!(
            h.get("mcp-method").is_none(),
            "not a method AgentCore routes on before 2026"
        );
    }

    #[test]
    fn content_length_is_the_decimal_length() {
        for len in [0, 7, 10, 1024, 65_536, usize::MAX] {
            assert_eq!(length_value(len), HeaderValue::from(len), "{len}");
        }
    }

    #[test]
    fn values_outside_the_models_limits_are_refused() {
        let body = Bytes::new();
        let cases = [
            (
                "mcp-session-id",
                "x".repeat(1025),
                "the header `mcp-session-id` is 1025 characters; the service accepts 1 to 1024",
            ),
            (
                "traceparent",
                "x".repeat(129),
                "the header `traceparent` is 129 characters; the service accepts 0 to 128",
            ),
            (
                RUNTIME_SESSION_ID,
                "short".to_string(),
                "the header `x-amzn-bedrock-agentcore-runtime-session-id` is 5 characters; the service accepts 33 to 256",
            ),
            (
                "accept",
                String::new(),
                "the header `accept` is 0 characters; the service accepts 1 to 256",
            ),
        ];
        for (name, value, message) in cases {
            let err = headers_for(&head([(name, &value)]), &body).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidRequest);
            assert_eq!(
                err.to_string(),
                format!("the request cannot be sent: {message}")
            );
        }
        // Several values of a carried header: the first such header in the carried order is
        // named, whatever order the request holds them in.
        let original = head([
            ("mcp-session-id", "a"),
            ("accept", "a"),
            ("mcp-session-id", "b"),
            ("accept", "b"),
        ]);
        let err = headers_for(&original, &body).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the request cannot be sent: the header `accept` has several values; the operation \
             carries one"
        );
        let mut original = HeaderMap::new();
        original.insert(
            "mcp-session-id",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        let err = headers_for(&original, &body).unwrap_err();
        assert!(err.to_string().contains("not visible ASCII"));
    }
}
