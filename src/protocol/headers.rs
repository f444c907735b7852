//! The standard headers of MCP 2026-07-28 (SEP-2243): `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*`, mirrored from the body so that intermediaries route without reading it —
//! written by a client, checked by a server, in the revision's value encoding.

use std::collections::HashMap;

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The sentinel that wraps a Base64 value.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// `Mcp-Param-` and the annotation's name.
const PARAM_PREFIX: &str = "mcp-param-";

/// The member of `params` a method's `Mcp-Name` comes from: the tool or prompt name, the
/// resource URI, the task id (the tasks extension, so that a task's polls can be routed to the
/// server instance that holds it).
pub(crate) fn name_key(method: &str) -> Option<&'static str> {
    Some(match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    })
}

/// The text a request's `Mcp-Name` carries (before encoding), when its method has one.
pub fn name_of<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    params?.get(name_key(method)?)?.as_str()
}

/// A text as the revision's "Value Encoding" writes it in a header: as it is when it is plain
/// visible ASCII (spaces inside, not at either end) that does not itself look like the
/// sentinel; else Base64 of its UTF-8 as `=?base64?…?=`. `None` for the empty text.
pub fn encode_header_value(text: &str) -> Option<HeaderValue> {
    if text.is_empty() {
        return None;
    }
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let bytes = text.as_bytes();
    let sentinel = text.starts_with(BASE64_PREFIX) && text.ends_with(BASE64_SUFFIX);
    let visible = bytes.iter().all(|b| (0x20..=0x7e).contains(b));
    let plain = visible && !edge(bytes.first()) && !edge(bytes.last()) && !sentinel;
    if plain {
        HeaderValue::from_str(text).ok()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        HeaderValue::from_str(&format!("{BASE64_PREFIX}{encoded}{BASE64_SUFFIX}")).ok()
    }
}

/// The text a header value carries: the sentinel's Base64 decoded, else the value as it is.
/// `None` when the value is not text, or the sentinel wraps what is not Base64 of UTF-8.
pub fn decode_header_value(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    match text
        .strip_prefix(BASE64_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_SUFFIX))
    {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(text.to_owned()),
    }
}

/// A primitive argument as its header text; `None` for anything else (and for null).
fn primitive(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An RFC 9110 token character: what an `x-mcp-header` name may hold.
fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// One annotated argument: its path from `arguments` through nested objects, its header.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Annotated {
    path: Vec<String>,
    header: HeaderName,
}

/// The `x-mcp-header` annotations of a schema's properties (nested ones through `properties`
/// alone), or why they are invalid: not a non-empty token, the same header twice
/// (case-insensitively), or on a property that is not a string, integer or boolean. A tool
/// whose annotations are invalid gets no `Mcp-Param-*` headers, as the SDKs' clients drop it.
fn annotations(schema: &Value) -> Result<Vec<Annotated>, String> {
    fn walk(
        properties: Option<&Value>,
        path: &mut Vec<String>,
        out: &mut Vec<Annotated>,
    ) -> Result<(), String> {
        let Some(Value::Object(properties)) = properties else {
            return Ok(());
        };
        for (name, schema) in properties {
            path.push(name.clone());
            if let Some(header) = schema.get("x-mcp-header") {
                let at = path.join(".");
                let header = header
                    .as_str()
                    .filter(|h| !h.is_empty() && h.bytes().all(is_token_char))
                    .ok_or_else(|| format!("`{at}`: x-mcp-header is not a token"))?;
                if !matches!(
                    schema.get("type").and_then(Value::as_str),
                    Some("string" | "integer" | "boolean")
                ) {
                    return Err(format!("`{at}`: x-mcp-header on a non-primitive"));
                }
                let header = HeaderName::from_bytes(format!("{PARAM_PREFIX}{header}").as_bytes())
                    .map_err(|_| format!("`{at}`: x-mcp-header is no header name"))?;
                if out.iter().any(|a| a.header == header) {
                    return Err(format!("`{at}`: {header} twice"));
                }
                out.push(Annotated {
                    path: path.clone(),
                    header,
                });
            }
            walk(schema.get("properties"), path, out)?;
            path.pop();
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(schema.get("properties"), &mut Vec::new(), &mut out)?;
    Ok(out)
}

/// What the tools' listed input schemas mark with `x-mcp-header`: the `Mcp-Param-*` headers a
/// client writes for a `tools/call`, remembered from `tools/list` as the SDK clients do.
#[derive(Clone, Debug, Default)]
pub struct ParamHeaders {
    tools: HashMap<String, Vec<Annotated>>,
}

impl ParamHeaders {
    /// Learns the tools of one `tools/list` result (one page): each listed tool's annotations
    /// replace what was known of it.
    pub fn learn(&mut self, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            match tool.get("inputSchema").map(annotations) {
                Some(Ok(annotated)) if !annotated.is_empty() => {
                    self.tools.insert(name.to_owned(), annotated);
                }
                _ => {
                    self.tools.remove(name);
                }
            }
        }
    }

    /// Whether the tool named has annotated arguments.
    pub fn annotates(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }

    /// The `Mcp-Param-*` headers of a `tools/call` message's arguments.
    fn write(&self, message: &Value, headers: &mut HeaderMap) {
        let params = message.get("params");
        let (Some(tool), Some(arguments)) = (
            name_of("tools/call", params),
            params.and_then(|p| p.get("arguments")),
        ) else {
            return;
        };
        for annotated in self.tools.get(tool).into_iter().flatten() {
            let value = annotated
                .path
                .iter()
                .try_fold(arguments, |value, key| value.get(key))
                .and_then(primitive)
                .and_then(|text| encode_header_value(&text));
            if let Some(value) = value {
                headers.insert(annotated.header.clone(), value);
            }
        }
    }
}

/// The standard headers a 2026-07-28 client writes for `message`: `Mcp-Method`, `Mcp-Name`
/// where its method has one, and — for a `tools/call`, given what the listing said —
/// `Mcp-Param-*`. Empty for what is not a request or notification.
pub fn request_headers(message: &Value, params: Option<&ParamHeaders>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return headers;
    };
    let Some(value) = encode_header_value(method) else {
        return headers;
    };
    headers.insert(HeaderName::from_static("mcp-method"), value);
    if let Some(name) = name_of(method, message.get("params")).and_then(encode_header_value) {
        headers.insert(HeaderName::from_static("mcp-name"), name);
    }
    if method == "tools/call"
        && let Some(params) = params
    {
        params.write(message, &mut headers);
    }
    headers
}

/// Checks a 2026-07-28 request's headers against its body as a server must: one
/// `MCP-Protocol-Version` equal to `_meta`'s version, one `Mcp-Method` equal to the method,
/// `Mcp-Name` where the method has one, and for a `tools/call` of a tool whose `input_schema`
/// annotates arguments, an `Mcp-Param-*` header exactly for each annotated argument present.
/// `Err` says what disagrees: a server answers it with HTTP 400 and -32020 `HeaderMismatch`.
pub fn check_request_headers(
    headers: &HeaderMap,
    message: &Value,
    input_schema: Option<&Value>,
) -> Result<(), String> {
    let one = |name: &str| -> Result<Option<String>, String> {
        let mut values = headers.get_all(name).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(format!("{name} is given twice"));
        }
        decode_header_value(value)
            .map(Some)
            .ok_or_else(|| format!("{name} is not valid"))
    };
    let agree = |name: &str, body: Option<&str>| -> Result<(), String> {
        match (one(name)?, body) {
            (None, None) => Ok(()),
            (Some(header), Some(body)) if header == body => Ok(()),
            (None, Some(body)) => Err(format!("{name} is missing (the body says `{body}`)")),
            (Some(header), None) => Err(format!("{name} `{header}` has nothing in the body")),
            (Some(header), Some(body)) => Err(format!(
                "{name} `{header}` does not match the body's `{body}`"
            )),
        }
    };
    let method = message.get("method").and_then(Value::as_str);
    agree("mcp-protocol-version", super::version_in_meta(message))?;
    agree("mcp-method", method)?;
    let params = message.get("params");
    if let Some(method) = method
        && name_key(method).is_some()
    {
        agree("mcp-name", name_of(method, params))?;
    }
    if method == Some("tools/call")
        && let Some(schema) = input_schema
    {
        let arguments = params.and_then(|p| p.get("arguments"));
        for annotated in annotations(schema)? {
            let body = arguments
                .and_then(|a| annotated.path.iter().try_fold(a, |v, key| v.get(key)))
                .and_then(primitive);
            agree(annotated.header.as_str(), body.as_deref())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_plain_ascii_or_base64_in_the_sentinel() {
        let encoded = |t: &str| encode_header_value(t).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(encoded("tools/call").as_deref(), Some("tools/call"));
        assert_eq!(encoded("a b").as_deref(), Some("a b"));
        assert_eq!(encoded(" a").as_deref(), Some("=?base64?IGE=?="));
        assert_eq!(encoded("a\t").as_deref(), Some("=?base64?YQk=?="));
        assert_eq!(encoded("ü").as_deref(), Some("=?base64?w7w=?="));
        assert_eq!(
            encoded("=?base64?x?=").as_deref(),
            Some("=?base64?PT9iYXNlNjQ/eD89?=")
        );
        assert_eq!(encoded(""), None);
        for text in [" a", "ü", "line\nbreak", "=?base64?x?=", "plain"] {
            let value = encode_header_value(text).unwrap();
            assert_eq!(decode_header_value(&value).as_deref(), Some(text));
        }
        let bad = HeaderValue::from_static("=?base64?!!?=");
        assert_eq!(decode_header_value(&bad), None);
    }

    fn listing() -> ParamHeaders {
        let mut params = ParamHeaders::default();
        params.learn(&json!({"tools": [
            {"name": "deploy", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry"},
                "target": {"type": "object", "properties": {
                    "count": {"type": "integer", "x-mcp-header": "Count"}}}}}},
            {"name": "bad", "inputSchema": {"type": "object", "properties": {
                "list": {"type": "array", "x-mcp-header": "List"}}}},
            {"name": "plain", "inputSchema": {"type": "object", "properties": {}}}
        ]}));
        params
    }

    #[test]
    fn a_tools_call_gets_the_params_its_listing_annotates() {
        let params = listing();
        assert!(params.annotates("deploy"));
        assert!(!params.annotates("bad"), "invalid annotations: none");
        assert!(!params.annotates("plain"));
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"region": "eu-west-1", "dry": true,
            "target": {"count": 3}}}});
        let headers = request_headers(&call, Some(&params));
        let text = |n: &str| headers.get(n).map(|v| v.to_str().unwrap());
        assert_eq!(text("mcp-method"), Some("tools/call"));
        assert_eq!(text("mcp-name"), Some("deploy"));
        assert_eq!(text("mcp-param-region"), Some("eu-west-1"));
        assert_eq!(text("mcp-param-dry"), Some("true"));
        assert_eq!(text("mcp-param-count"), Some("3"));
        assert_eq!(headers.len(), 5);
        // A later listing without the annotation forgets it.
        let mut params = params;
        params.learn(&json!({"tools": [{"name": "deploy", "inputSchema": {"type": "object"}}]}));
        assert!(!params.annotates("deploy"));
    }

    #[test]
    fn every_method_gets_mcp_method_and_names_come_from_their_member() {
        let headers = |m: serde_json::Value| request_headers(&m, None);
        let ping = headers(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
        assert_eq!(ping["mcp-method"], "ping");
        assert!(ping.get("mcp-name").is_none());
        let read =
            headers(json!({"id": 1, "method": "resources/read", "params": {"uri": "file:///a b"}}));
        assert_eq!(read["mcp-name"], "file:///a b");
        let poll = headers(json!({"id": 1, "method": "tasks/get", "params": {"taskId": "t-1"}}));
        assert_eq!(poll["mcp-name"], "t-1");
        let response = headers(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert!(response.is_empty());
    }

    #[test]
    fn a_server_checks_every_header_against_the_body() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"region": "eu-west-1"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        let mut headers = request_headers(&call, Some(&listing()));
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        let check = |headers: &HeaderMap| check_request_headers(headers, &call, Some(&schema));
        assert_eq!(check(&headers), Ok(()));

        // Each edit of the agreeing headers, and what the refusal names.
        type Edit = fn(&mut HeaderMap);
        let edits: [(Edit, &str); 4] = [
            (
                |h| {
                    h.insert("mcp-name", HeaderValue::from_static("other"));
                },
                "mcp-name",
            ),
            (
                |h| {
                    h.remove("mcp-param-region");
                },
                "missing",
            ),
            (
                |h| {
                    let old = HeaderValue::from_static("2025-11-25");
                    h.insert("mcp-protocol-version", old);
                },
                "mcp-protocol-version",
            ),
            (
                |h| {
                    h.append("mcp-method", HeaderValue::from_static("tools/call"));
                },
                "twice",
            ),
        ];
        for (edit, named) in edits {
            let mut edited = headers.clone();
            edit(&mut edited);
            let refusal = check(&edited).unwrap_err();
            assert!(refusal.contains(named), "{refusal}");
        }
    }
}
