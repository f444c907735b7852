//! The little JSON-RPC and JSON-over-HTTP inspection the layers share.

use std::borrow::Cow;

use http::HeaderMap;
use http::header::CONTENT_TYPE;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A request body as one layer read it, kept in the call's context so that the layers below and
/// the attempts after do not parse the same bytes again (the guard reads it once per call; the
/// signer would otherwise read it on every attempt). Used only while the body is still these
/// bytes.
#[derive(Clone, Debug)]
pub(crate) struct ParsedBody {
    bytes: bytes::Bytes,
    body: std::sync::Arc<Body>,
}

impl ParsedBody {
    pub(crate) fn new(bytes: bytes::Bytes, body: Body) -> Self {
        Self {
            bytes,
            body: std::sync::Arc::new(body),
        }
    }

    /// The parsed body, if it was parsed from exactly `bytes`.
    pub(crate) fn of(&self, bytes: &[u8]) -> Option<std::sync::Arc<Body>> {
        (self.bytes[..] == *bytes).then(|| self.body.clone())
    }

    /// The parsed body.
    pub(crate) fn body(&self) -> std::sync::Arc<Body> {
        self.body.clone()
    }
}

/// What a request body holds, as far as the layers need to know: read once.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Body {
    /// One JSON-RPC message.
    Single(Message),
    /// A batch (a JSON array) of messages.
    Batch(Vec<Message>),
    /// Not JSON-RPC (not JSON, an empty batch, a member that is no message…).
    Unparsable,
}

/// One JSON-RPC message of a request body.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Message {
    pub(crate) kind: MessageKind,
    /// The method (requests and notifications).
    pub(crate) method: Option<String>,
    /// `params.name` of `tools/call` and `prompts/get`, `params.uri` of `resources/read`.
    pub(crate) name: Option<String>,
    /// `params.arguments` of `tools/call`, parsed only when asked for.
    pub(crate) arguments: Option<serde_json::Value>,
}

/// Request, notification or response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// A request: a method and an id; the server answers it.
    Request,
    /// A notification: a method and no id; the server does not answer.
    Notification,
    /// A response the client sends back to a server's request.
    Response,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireParams<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// Whether a member is there at all (`"id": null` is there).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

impl Body {
    /// Reads a request body. `with_arguments` parses `tools/call` arguments too.
    pub(crate) fn parse(bytes: &[u8], with_arguments: bool) -> Body {
        match first_significant_byte(bytes) {
            Some(b'{') => match serde_json::from_slice::<WireMessage<'_>>(bytes) {
                Ok(wire) => {
                    Message::from_wire(wire, with_arguments).map_or(Body::Unparsable, Body::Single)
                }
                Err(_) => Body::Unparsable,
            },
            Some(b'[') => match serde_json::from_slice::<Vec<WireMessage<'_>>>(bytes) {
                Ok(wires) if !wires.is_empty() => wires
                    .into_iter()
                    .map(|w| Message::from_wire(w, with_arguments))
                    .collect::<Option<Vec<_>>>()
                    .map_or(Body::Unparsable, Body::Batch),
                _ => Body::Unparsable,
            },
            _ => Body::Unparsable,
        }
    }
}

impl Message {
    fn from_wire(wire: WireMessage<'_>, with_arguments: bool) -> Option<Message> {
        let kind = match (&wire.method, wire.id, wire.result || wire.error) {
            (Some(_), true, false) => MessageKind::Request,
            (Some(_), false, false) => MessageKind::Notification,
            (None, true, true) => MessageKind::Response,
            _ => return None,
        };
        let method = wire.method.map(Cow::into_owned);
        let params = match method.as_deref() {
            Some("tools/call" | "prompts/get" | "resources/read") => wire
                .params
                .and_then(|raw| serde_json::from_str::<WireParams<'_>>(raw.get()).ok()),
            _ => None,
        };
        let (name, arguments) = match params {
            Some(p) => {
                let name = if method.as_deref() == Some("resources/read") {
                    p.uri
                } else {
                    p.name
                };
                let arguments = if with_arguments {
                    p.arguments
                        .and_then(|raw| serde_json::from_str(raw.get()).ok())
                } else {
                    None
                };
                (name.map(Cow::into_owned), arguments)
            }
            None => (None, None),
        };
        Some(Message {
            kind,
            method,
            name,
            arguments,
        })
    }
}

/// Whether the head's `Content-Type` is `application/json` (any parameters, such as
/// `charset`, allowed; case-insensitive).
pub(crate) fn is_json_content_type(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
}

/// The media type of the head's one `Content-Type`, without parameters.
fn media_type(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?;
    Some(value.split(';').next()?.trim())
}

/// The head's `Content-Length`, when it has exactly one valid value.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(http::header::CONTENT_LENGTH).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()?.trim().parse().ok()
}

/// The first byte of a JSON text that is not insignificant whitespace (RFC 8259 §2).
pub(crate) fn first_significant_byte(bytes: &[u8]) -> Option<u8> {
    bytes
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert!(!is_json_content_type(&h));
        for (v, want) in [
            ("application/json", true),
            ("application/json; charset=utf-8", true),
            ("Application/JSON;charset=UTF-8", true),
            ("application/jsonx", false),
            ("application/json-seq", false),
            ("text/event-stream", false),
            ("text/json", false),
            ("", false),
        ] {
            h.insert(CONTENT_TYPE, v.parse().unwrap());
            assert_eq!(is_json_content_type(&h), want, "{v:?}");
        }
        h.append(CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(!is_json_content_type(&h), "two content types");
    }

    #[test]
    fn lengths() {
        let mut h = HeaderMap::new();
        assert_eq!(content_length(&h), None);
        h.insert(http::header::CONTENT_LENGTH, "42".parse().unwrap());
        assert_eq!(content_length(&h), Some(42));
        h.insert(http::header::CONTENT_LENGTH, "-1".parse().unwrap());
        assert_eq!(content_length(&h), None);
    }

    fn msg(kind: MessageKind, method: Option<&str>, name: Option<&str>) -> Message {
        Message {
            kind,
            method: method.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: None,
        }
    }

    #[test]
    fn request_bodies() {
        use MessageKind::*;
        let cases: Vec<(&str, Body)> = vec![
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"charge","arguments":{"cents":100}}}"#,
                Body::Single(msg(Request, Some("tools/call"), Some("charge"))),
            ),
            (
                r#" {"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Body::Single(msg(Request, Some("ping"), None)),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                Body::Single(msg(Notification, Some("notifications/initialized"), None)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#,
                Body::Single(msg(Response, None, None)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}"#,
                Body::Single(msg(Request, Some("resources/read"), Some("file:///a"))),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p\u0031"}}"#,
                Body::Single(msg(Request, Some("prompts/get"), Some("p1"))),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
                Body::Single(msg(Request, Some("tools/call"), None)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
                Body::Single(msg(Request, Some("tools/call"), None)),
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}]"#,
                Body::Batch(vec![
                    msg(Request, Some("ping"), None),
                    msg(Request, Some("tools/call"), Some("x")),
                ]),
            ),
            ("[]", Body::Unparsable),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 3]"#,
                Body::Unparsable,
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, Body::Unparsable),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
                Body::Unparsable,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"method":3}"#, Body::Unparsable),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"x"}"#,
                Body::Unparsable,
            ),
            ("not json", Body::Unparsable),
            ("", Body::Unparsable),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
                Body::Unparsable,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(Body::parse(input.as_bytes(), false), want, "{input}");
        }
    }

    #[test]
    fn arguments_only_when_asked() {
        let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"charge","arguments":{"cents":100}}}"#;
        let Body::Single(m) = Body::parse(body, true) else {
            panic!()
        };
        assert_eq!(m.arguments, Some(serde_json::json!({"cents": 100})));
        let Body::Single(m) = Body::parse(body, false) else {
            panic!()
        };
        assert_eq!(m.arguments, None);
    }

    /// Random bytes and random JSON-ish text, seeded: parsing never panics.
    #[test]
    fn never_panics() {
        let mut rng = fastrand::Rng::with_seed(0x150);
        let pieces: [&[u8]; 10] = [
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"method\":",
            b"\"tools/call\"",
            b"\"params\":",
            b"\"name\":\"x\"",
            b",",
            b"\xff",
        ];
        for _ in 0..4000 {
            let mut bytes = Vec::new();
            for _ in 0..rng.usize(0..24) {
                match rng.u8(0..3) {
                    0 => bytes.push(rng.u8(..)),
                    _ => bytes.extend_from_slice(pieces[rng.usize(0..pieces.len())]),
                }
            }
            let _ = Body::parse(&bytes, true);
        }
    }

    #[test]
    fn significant() {
        assert_eq!(first_significant_byte(b" \r\n\t{"), Some(b'{'));
        assert_eq!(first_significant_byte(b"  "), None);
    }
}
