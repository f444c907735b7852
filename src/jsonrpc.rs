//! The little JSON-RPC and JSON-over-HTTP inspection the layers share. Its tests (`tests.rs`
//! beside it) hold the plain two-pass reference parser the one-pass reading is checked against
//! on random bodies.

use std::borrow::Cow;

use http::HeaderMap;
use http::header::CONTENT_TYPE;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A request body's bytes and what they hold, kept in the call's context so that the layers below
/// and the attempts after do not parse the same bytes again. Read when a layer first asks
/// ([`body`](Self::body)), not before: a call that no layer asks about is never parsed (a
/// guard's call that does not fail, a signer's request that names its method and tool in
/// headers, untraced and without metrics). Cloned, it is the same reading. Used only while the
/// body is still these bytes.
#[derive(Clone)]
pub(crate) struct ParsedBody(std::sync::Arc<Reading>);

struct Reading {
    bytes: bytes::Bytes,
    with_arguments: bool,
    body: std::sync::OnceLock<Body>,
}

impl ParsedBody {
    /// `bytes` and what they were read as already.
    #[cfg(test)]
    pub(crate) fn new(bytes: bytes::Bytes, body: Body) -> Self {
        Self(std::sync::Arc::new(Reading {
            bytes,
            with_arguments: false,
            body: std::sync::OnceLock::from(body),
        }))
    }

    /// `bytes`, read when first asked (`tools/call` arguments too, when `with_arguments`).
    pub(crate) fn lazy(bytes: bytes::Bytes, with_arguments: bool) -> Self {
        Self(std::sync::Arc::new(Reading {
            bytes,
            with_arguments,
            body: std::sync::OnceLock::new(),
        }))
    }

    /// This reading, if it is of exactly `bytes`: the same buffer (a clone of the request's
    /// body: no comparison), or equal bytes.
    pub(crate) fn of(&self, bytes: &[u8]) -> Option<Self> {
        let own = &self.0.bytes;
        let same =
            (own.as_ptr() == bytes.as_ptr() && own.len() == bytes.len()) || own[..] == *bytes;
        same.then(|| self.clone())
    }

    /// The bytes it reads.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// What the body holds: read now if no layer asked before.
    pub(crate) fn body(&self) -> &Body {
        let reading = &*self.0;
        reading
            .body
            .get_or_init(|| Body::parse(&reading.bytes, reading.with_arguments))
    }
}

impl std::fmt::Debug for ParsedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the bytes: a request's arguments are the app's.
        f.debug_struct("ParsedBody")
            .field("len", &self.0.bytes.len())
            .field("read", &self.0.body.get().is_some())
            .finish()
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
    /// The method (requests and notifications): one of MCP's own without a copy.
    pub(crate) method: Option<Cow<'static, str>>,
    /// What the method's `Mcp-Name` is taken from ([`protocol::name_of`](crate::protocol::name_of)):
    /// `params.name` of `tools/call` and `prompts/get`, `params.uri` of `resources/read`
    /// (and of the subscriptions), `params.taskId` of the tasks' polls.
    pub(crate) name: Option<String>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`: the version a 2026-07-28
    /// request names for itself.
    pub(crate) protocol_version: Option<String>,
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

/// A message as read off the wire: what the layers need of it, `params` as `P` — read in the
/// same pass ([`WireMessage`]) or kept raw for a second reading ([`RawWireMessage`]).
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Wire<'a, P> {
    #[serde(borrow, default, deserialize_with = "borrowed")]
    method: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
    #[serde(default = "Option::default")]
    params: Option<P>,
}

/// The `visit_*` methods of a visitor that takes any JSON value, for what it does not read:
/// every number, boolean and array (consumed to its end) reads as `$other`; with
/// `strings and null`, every string and null too.
macro_rules! read_others_as {
    ($value:ty, $other:expr) => {
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<$value, E> {
            Ok($other)
        }
        fn visit_i64<E>(self, _: i64) -> Result<$value, E> {
            Ok($other)
        }
        fn visit_u64<E>(self, _: u64) -> Result<$value, E> {
            Ok($other)
        }
        fn visit_f64<E>(self, _: f64) -> Result<$value, E> {
            Ok($other)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<$value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok($other)
        }
    };
    ($value:ty, $other:expr, strings and null) => {
        read_others_as!($value, $other);
        fn visit_str<E>(self, _: &str) -> Result<$value, E> {
            Ok($other)
        }
        fn visit_unit<E>(self) -> Result<$value, E> {
            Ok($other)
        }
    };
}

/// A message with its `params` read in the one pass (`tools/call` arguments kept when
/// `ARGUMENTS`).
type WireMessage<'a, const ARGUMENTS: bool> = Wire<'a, WireParams<'a, ARGUMENTS>>;

/// A string or null, as serde reads an `Option<Cow<str>>` — but borrowed from the body when
/// it holds no escape (serde's own reading of a `Cow` in an `Option` always copies it).
fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct Str<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Str<'a> {
        type Value = Cow<'a, str>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Cow<'a, str>, E> {
            Ok(Cow::Owned(v))
        }
    }
    struct OrNull<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for OrNull<'a> {
        type Value = Option<Cow<'a, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(Str(std::marker::PhantomData)).map(Some)
        }
    }
    d.deserialize_option(OrNull(std::marker::PhantomData))
}

/// The same message with `params` kept raw: the second reading, for a body the one-pass
/// reading refused as a whole although only its `params` held what a string or a number cannot
/// be decoded into (a lone surrogate escape, `1e999`). Its `params` are then read on their own,
/// and read as nothing known when they fail.
type RawWireMessage<'a> = Wire<'a, &'a RawValue>;

impl<'a, const ARGUMENTS: bool> From<RawWireMessage<'a>> for WireMessage<'a, ARGUMENTS> {
    fn from(raw: RawWireMessage<'a>) -> Self {
        Wire {
            method: raw.method,
            id: raw.id,
            result: raw.result,
            error: raw.error,
            params: raw.params.and_then(|params| {
                serde_json::from_str::<WireParams<'a, ARGUMENTS>>(params.get()).ok()
            }),
        }
    }
}

/// `params`, read in the same pass as the message (the body is scanned once): `name` and `uri`
/// when they are strings, `arguments` as the raw JSON it is when `ARGUMENTS` (else skipped, as
/// JSON's structure only: serde checks a raw value's UTF-8 as well). When `params` is not an
/// object, or `name` or `uri` is there but not a string (or null), or a member is repeated, it
/// reads as nothing known ([`WireParams::usable`] is false), never as an error of the message.
#[derive(Default)]
struct WireParams<'a, const ARGUMENTS: bool> {
    named: Named<'a>,
    /// Read whatever else `params` holds: a `_meta` that is no object names no version.
    protocol_version: Option<Cow<'a, str>>,
    usable: bool,
}

impl<'de: 'a, 'a, const ARGUMENTS: bool> Deserialize<'de> for WireParams<'a, ARGUMENTS> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ParamsVisitor(std::marker::PhantomData))
    }
}

struct ParamsVisitor<'a, const ARGUMENTS: bool>(std::marker::PhantomData<&'a ()>);

/// A member of `params` the layers read, or any other.
enum ParamsKey {
    Name,
    Uri,
    TaskId,
    Arguments,
    Meta,
    Other,
}

impl<'de> Deserialize<'de> for ParamsKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = ParamsKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, key: &str) -> Result<ParamsKey, E> {
                Ok(match key {
                    "name" => ParamsKey::Name,
                    "uri" => ParamsKey::Uri,
                    "taskId" => ParamsKey::TaskId,
                    "arguments" => ParamsKey::Arguments,
                    "_meta" => ParamsKey::Meta,
                    _ => ParamsKey::Other,
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A string member (borrowed when it has no escape), null, or something else (consumed).
enum Text<'a> {
    Str(Cow<'a, str>),
    Null,
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text::Str(Cow::Owned(v)))
            }
            fn visit_unit<E>(self) -> Result<Text<'a>, E> {
                Ok(Text::Null)
            }
            fn visit_none<E>(self) -> Result<Text<'a>, E> {
                Ok(Text::Null)
            }
            read_others_as!(Text<'a>, Text::Other);
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Text<'a>, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Text::Other)
            }
        }
        d.deserialize_any(TextVisitor(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a, const ARGUMENTS: bool> serde::de::Visitor<'de> for ParamsVisitor<'a, ARGUMENTS> {
    type Value = WireParams<'a, ARGUMENTS>;

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<WireParams<'a, ARGUMENTS>, A::Error> {
        let mut params = WireParams {
            usable: true,
            ..WireParams::default()
        };
        let (mut name, mut uri, mut task_id, mut arguments) = (false, false, false, false);
        let text = |seen: &mut bool, value: Text<'a>, usable: &mut bool| {
            let repeated = std::mem::replace(seen, true);
            match value {
                _ if repeated => {
                    *usable = false;
                    None
                }
                Text::Str(text) => Some(text),
                Text::Null => None,
                Text::Other => {
                    *usable = false;
                    None
                }
            }
        };
        while let Some(key) = map.next_key::<ParamsKey>()? {
            match key {
                ParamsKey::Name => {
                    let value = map.next_value::<Text<'a>>()?;
                    params.named.name = text(&mut name, value, &mut params.usable);
                }
                ParamsKey::Uri => {
                    let value = map.next_value::<Text<'a>>()?;
                    params.named.uri = text(&mut uri, value, &mut params.usable);
                }
                ParamsKey::TaskId => {
                    let value = map.next_value::<Text<'a>>()?;
                    params.named.task_id = text(&mut task_id, value, &mut params.usable);
                }
                ParamsKey::Meta => {
                    params.protocol_version = map.next_value::<MetaVersion<'a>>()?.0;
                }
                ParamsKey::Arguments => {
                    if ARGUMENTS {
                        params.named.arguments = map.next_value::<Option<&'a RawValue>>()?;
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                    if std::mem::replace(&mut arguments, true) {
                        params.usable = false;
                    }
                }
                ParamsKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(params)
    }

    // Anything but an object: consumed, and nothing known.
    read_others_as!(WireParams<'a, ARGUMENTS>, WireParams::default(), strings and null);
}

/// `_meta`'s protocol version: the string under
/// [`PROTOCOL_VERSION_META`](crate::protocol::PROTOCOL_VERSION_META) when `_meta` is an object
/// that has one, else nothing (anything else is consumed).
struct MetaVersion<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MetaVersion<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MetaVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for MetaVisitor<'a> {
            type Value = MetaVersion<'a>;
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MetaVersion<'a>, A::Error> {
                let mut version = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == crate::protocol::PROTOCOL_VERSION_META {
                        if let Text::Str(text) = map.next_value::<Text<'a>>()? {
                            version = Some(text);
                        }
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(MetaVersion(version))
            }
            read_others_as!(MetaVersion<'a>, MetaVersion(None), strings and null);
        }
        d.deserialize_any(MetaVisitor(std::marker::PhantomData))
    }
}

/// Whether a member is there at all (`"id": null` is there).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

impl Body {
    /// Reads a request body, in one pass (a second one only for a body the first refused).
    /// `with_arguments` parses `tools/call` arguments too. JSON text is UTF-8 (RFC 8259): bytes
    /// that are not are no message, whatever member holds them (serde checks only the strings
    /// it keeps).
    pub(crate) fn parse(bytes: &[u8], with_arguments: bool) -> Body {
        if std::str::from_utf8(bytes).is_err() {
            return Body::Unparsable;
        }
        if with_arguments {
            Self::parse_with::<true>(bytes)
        } else {
            Self::parse_with::<false>(bytes)
        }
    }

    fn parse_with<const ARGUMENTS: bool>(bytes: &[u8]) -> Body {
        match Self::parse_as::<WireMessage<'_, ARGUMENTS>, ARGUMENTS>(bytes) {
            Body::Unparsable => Self::parse_as::<RawWireMessage<'_>, ARGUMENTS>(bytes),
            body => body,
        }
    }

    fn parse_as<'a, W, const ARGUMENTS: bool>(bytes: &'a [u8]) -> Body
    where
        W: Deserialize<'a> + Into<WireMessage<'a, ARGUMENTS>>,
    {
        Self::from_wires(bytes, |wire: W| Message::from_wire(wire.into()))
    }

    /// A body of one message or a non-empty batch, each read as a `W` and made a message by
    /// `message`: unparsable when the JSON is neither, or when any member is no message.
    fn from_wires<'a, W: Deserialize<'a>>(
        bytes: &'a [u8],
        message: impl Fn(W) -> Option<Message>,
    ) -> Body {
        match first_significant_byte(bytes) {
            Some(b'{') => match serde_json::from_slice::<W>(bytes) {
                Ok(wire) => message(wire).map_or(Body::Unparsable, Body::Single),
                Err(_) => Body::Unparsable,
            },
            Some(b'[') => match serde_json::from_slice::<Vec<W>>(bytes) {
                Ok(wires) if !wires.is_empty() => wires
                    .into_iter()
                    .map(message)
                    .collect::<Option<Vec<_>>>()
                    .map_or(Body::Unparsable, Body::Batch),
                _ => Body::Unparsable,
            },
            _ => Body::Unparsable,
        }
    }
}

/// MCP's methods (2025-06-18 and 2025-11-25), as the `&'static str` a message can name without a
/// copy of its own.
const MCP_METHODS: [&str; 24] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/roots/list_changed",
    "notifications/tools/list_changed",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
];

/// `method` as one of [`MCP_METHODS`], if it is one.
fn mcp_method(method: &str) -> Option<&'static str> {
    MCP_METHODS.iter().copied().find(|known| *known == method)
}

impl Message {
    fn from_wire<const ARGUMENTS: bool>(wire: WireMessage<'_, ARGUMENTS>) -> Option<Message> {
        let kind = MessageKind::of(wire.method.is_some(), wire.id, wire.result || wire.error)?;
        let method = wire.method.map(|method| match mcp_method(&method) {
            Some(known) => Cow::Borrowed(known),
            None => Cow::Owned(method.into_owned()),
        });
        let mut params = wire.params;
        let protocol_version = params
            .as_mut()
            .and_then(|p| p.protocol_version.take())
            .map(Cow::into_owned);
        Some(Message::new(
            kind,
            method,
            protocol_version,
            ARGUMENTS,
            || params.filter(|p| p.usable).map(|p| p.named),
        ))
    }

    /// A message of `kind`, named by the member of its `params` its method is named by (the
    /// members asked of `named` only for such a method, none when `params` are unusable).
    fn new<'a>(
        kind: MessageKind,
        method: Option<Cow<'static, str>>,
        protocol_version: Option<String>,
        with_arguments: bool,
        named: impl FnOnce() -> Option<Named<'a>>,
    ) -> Message {
        let key = method.as_deref().and_then(crate::protocol::name_key);
        let (name, arguments) = match key.and_then(|_| named()) {
            Some(named) => named.read(key, with_arguments),
            None => (None, None),
        };
        Message {
            kind,
            method,
            name,
            arguments,
            protocol_version,
        }
    }
}

impl MessageKind {
    /// What a message is by the members it has: a method and an id, a method alone, or an id
    /// with a `result` or an `error`. Anything else is no message.
    fn of(method: bool, id: bool, answer: bool) -> Option<MessageKind> {
        match (method, id, answer) {
            (true, true, false) => Some(MessageKind::Request),
            (true, false, false) => Some(MessageKind::Notification),
            (false, true, true) => Some(MessageKind::Response),
            _ => None,
        }
    }
}

/// The members of `params` a message may be named by, and its `arguments` raw.
#[derive(Default)]
struct Named<'a> {
    name: Option<Cow<'a, str>>,
    uri: Option<Cow<'a, str>>,
    task_id: Option<Cow<'a, str>>,
    arguments: Option<&'a RawValue>,
}

impl Named<'_> {
    /// The name under the method's `key` (`params.name` unless the key is `uri` or `taskId`),
    /// and the arguments parsed when `with_arguments` asks for them.
    fn read(
        self,
        key: Option<&str>,
        with_arguments: bool,
    ) -> (Option<String>, Option<serde_json::Value>) {
        let name = match key {
            Some("uri") => self.uri,
            Some("taskId") => self.task_id,
            _ => self.name,
        };
        let arguments = if with_arguments {
            self.arguments
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
        } else {
            None
        };
        (name.map(Cow::into_owned), arguments)
    }
}

/// Whether the head's `Content-Type` is `application/json` (any parameters, such as
/// `charset`, allowed; case-insensitive).
pub(crate) fn is_json_content_type(headers: &HeaderMap) -> bool {
    media_type_is(headers, "application/json")
}

/// Whether the head's one `Content-Type` is `media_type` (parameters allowed; case-insensitive).
pub(crate) fn media_type_is(headers: &HeaderMap, media_type_wanted: &str) -> bool {
    media_type(headers).is_some_and(|m| m.eq_ignore_ascii_case(media_type_wanted))
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
mod tests;
