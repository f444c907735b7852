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
        method: method.map(|m| Cow::Owned(m.to_owned())),
        name: name.map(str::to_owned),
        arguments: None,
        protocol_version: None,
    }
}

#[test]
fn the_2026_era_names_its_version_in_meta_and_tasks_by_id() {
    let parse = |text: &str| match Body::parse(text.as_bytes(), false) {
        Body::Single(message) => message,
        other => panic!("{other:?}"),
    };
    let listen = parse(
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    assert_eq!(listen.protocol_version.as_deref(), Some("2026-07-28"));
    assert_eq!(listen.name, None);
    let poll = parse(
        r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t-9","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    );
    assert_eq!(
        (poll.name.as_deref(), poll.protocol_version.as_deref()),
        (Some("t-9"), Some("2026-07-28"))
    );
    for odd in [
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":["2026-07-28"]}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":null}}"#,
    ] {
        let message = parse(odd);
        assert_eq!(message.protocol_version, None, "{odd}");
        assert_eq!(message.method.as_deref(), Some("ping"), "{odd}");
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

// The two-pass reading this one replaced (the message with `params` raw, then `params`
// again): the one-pass reading must agree with it on every input.
#[derive(Deserialize)]
struct RefWireMessage<'a> {
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
struct RefWireParams<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "taskId")]
    task_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

impl Body {
    /// Reads a request body. `with_arguments` parses `tools/call` arguments too.
    fn parse_two_pass(bytes: &[u8], with_arguments: bool) -> Body {
        Self::from_wires(bytes, |wire: RefWireMessage<'_>| {
            Message::ref_from_wire(wire, with_arguments)
        })
    }
}

impl Message {
    fn ref_from_wire(wire: RefWireMessage<'_>, with_arguments: bool) -> Option<Message> {
        let kind = MessageKind::of(wire.method.is_some(), wire.id, wire.result || wire.error)?;
        let method = wire.method.map(|m| Cow::Owned(m.into_owned()));
        let protocol_version = wire
            .params
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
            .and_then(|params| {
                params
                    .get("_meta")?
                    .get(crate::protocol::PROTOCOL_VERSION_META)?
                    .as_str()
                    .map(str::to_owned)
            });
        Some(Message::new(
            kind,
            method,
            protocol_version,
            with_arguments,
            || {
                let p = serde_json::from_str::<RefWireParams<'_>>(wire.params?.get()).ok()?;
                Some(Named {
                    name: p.name,
                    uri: p.uri,
                    task_id: p.task_id,
                    arguments: p.arguments,
                })
            },
        ))
    }
}

/// A random JSON value from a small grammar (strings with escapes among them).
fn value(rng: &mut fastrand::Rng, depth: u32) -> String {
    let scalars = [
        "1",
        "null",
        "true",
        "\"a\"",
        "\"x\\u0031\\/\"",
        "\"\"",
        "-2.5e3",
    ];
    match rng.u8(0..if depth > 2 { 1 } else { 4 }) {
        0 => scalars[rng.usize(0..scalars.len())].to_owned(),
        1 => format!(
            "[{}]",
            (0..rng.usize(0..3))
                .map(|_| value(rng, depth + 1))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => {
            let keys = ["name", "uri", "arguments", "k", "name"];
            let members: Vec<String> = (0..rng.usize(0..4))
                .map(|_| {
                    format!(
                        "\"{}\":{}",
                        keys[rng.usize(0..keys.len())],
                        value(rng, depth + 1)
                    )
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
}

/// Random JSON-RPC messages and batches, seeded, and random token soup: the one-pass
/// reading is the two-pass one.
#[test]
fn one_pass_reads_what_two_passes_read() {
    let mut rng = fastrand::Rng::with_seed(0x17);
    let mut agreed = random_messages_read_alike(&mut rng);
    token_soup_reads_alike(&mut rng);
    agreed += structured_messages_read_alike();
    assert!(
        agreed > 10_000,
        "the inputs reach parsed messages ({agreed})"
    );
}

/// Random messages and batches of random members, each read both ways, with and without
/// arguments: how many readings parsed.
fn random_messages_read_alike(rng: &mut fastrand::Rng) -> usize {
    let mut agreed = 0;
    let methods = [
        "\"tools/call\"",
        "\"resources/read\"",
        "\"prompts/get\"",
        "\"ping\"",
        "3",
        "null",
        "[1]",
        "\"tools\\/call\"",
        "\"custom/\\u0031\"",
        "\"vendor/method\"",
    ];
    for _ in 0..20_000 {
        let mut members = vec!["\"jsonrpc\":\"2.0\"".to_owned()];
        if rng.u8(0..4) > 0 {
            members.push(format!(
                "\"method\":{}",
                methods[rng.usize(0..methods.len())]
            ));
        }
        if rng.bool() {
            members.push("\"id\":7".to_owned());
        }
        if rng.u8(0..8) == 0 {
            members.push("\"result\":{}".to_owned());
        }
        if rng.u8(0..4) > 0 {
            // Not an array: the two-pass reading took `params[0]` for the name (serde reads
            // a struct from a sequence by position), which JSON-RPC's by-position params
            // never mean in MCP; the one-pass reading does not (see the test below).
            let params = loop {
                let params = value(rng, 0);
                if !params.starts_with('[') {
                    break params;
                }
            };
            members.push(format!("\"params\":{params}"));
        }
        rng.shuffle(&mut members);
        let message = format!("{{{}}}", members.join(","));
        let text = if rng.u8(0..5) == 0 {
            format!("[{message},{message}]")
        } else {
            message
        };
        for with_arguments in [false, true] {
            let one = agreed_reading(&text, with_arguments);
            if one != Body::Unparsable {
                agreed += 1;
            }
        }
    }
    agreed
}

/// Random sequences of JSON tokens, read both ways.
fn token_soup_reads_alike(rng: &mut fastrand::Rng) {
    let pieces: [&str; 12] = [
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"method\"",
        "\"tools/call\"",
        "\"params\"",
        "\"name\"",
        "\"id\"",
        "1",
    ];
    for _ in 0..20_000 {
        let text: String = (0..rng.usize(0..30))
            .map(|_| pieces[rng.usize(0..pieces.len())])
            .collect();
        assert_eq!(
            Body::parse(text.as_bytes(), true),
            Body::parse_two_pass(text.as_bytes(), true),
            "{text}"
        );
    }
}

/// Every shape of params under each method the layers read, read both ways, with and without
/// arguments: how many readings parsed (all of them).
fn structured_messages_read_alike() -> usize {
    let mut agreed = 0;
    let params = [
        "{\"name\":\"a\"}",
        "{\"name\":3}",
        "{\"name\":null}",
        "{\"name\":\"a\",\"name\":\"b\"}",
        "{\"uri\":\"u\",\"arguments\":{\"k\":[1,2]}}",
        "{\"arguments\":null}",
        "[1,2]",
        "\"s\"",
        "7",
        "null",
        "{\"name\":{\"x\":1}}",
        "{\"arguments\":1,\"arguments\":2,\"name\":\"n\"}",
        "{\"name\":\"\\u0041\\/b\",\"other\":[{}]}",
        "{}",
    ];
    // What a string or a number cannot be decoded into, where the two readings once parted.
    let params: Vec<&str> = params
        .iter()
        .copied()
        .chain([
            r#"{"name":"\ud800"}"#,
            r#"{"uri":"\ud800x"}"#,
            r#"{"\ud800":1,"name":"n"}"#,
            r#"{"name":1e999}"#,
            r#"{"arguments":{"k":"\udc00"},"name":"n"}"#,
        ])
        .collect();
    for method in ["tools/call", "resources/read", "prompts/get", "ping"] {
        for &p in &params {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{p}}}"#);
            for with_arguments in [false, true] {
                let one = agreed_reading(&text, with_arguments);
                assert_ne!(one, Body::Unparsable, "{text}");
                agreed += 1;
            }
        }
    }
    agreed
}

#[test]
fn by_position_params_name_nothing() {
    let body =
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["charge",{"cents":100}]}"#;
    let Body::Single(m) = Body::parse(body, true) else {
        panic!()
    };
    assert_eq!((m.name, m.arguments), (None, None));
}

#[test]
fn significant() {
    assert_eq!(first_significant_byte(b" \r\n\t{"), Some(b'{'));
    assert_eq!(first_significant_byte(b"  "), None);
}

/// The one-pass reading of `text`, asserted equal to the reference's.
fn agreed_reading(text: &str, with_arguments: bool) -> Body {
    let one = Body::parse(text.as_bytes(), with_arguments);
    assert_eq!(
        one,
        Body::parse_two_pass(text.as_bytes(), with_arguments),
        "{text}"
    );
    one
}

#[test]
fn bytes_that_are_not_utf_8_are_no_message_wherever_they_stand() {
    // serde checks the strings it keeps, not those it skips: the reading checks the whole body,
    // so that what a body is does not depend on which members a layer asked for.
    let bodies: [&[u8]; 3] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"a\":\"\xff\"}}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"},\"other\":\"\xc3\"}",
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xed\xa0\x80\"}}]",
    ];
    for body in bodies {
        for with_arguments in [false, true] {
            assert_eq!(
                Body::parse(body, with_arguments),
                Body::Unparsable,
                "{body:?}"
            );
        }
    }
    // The same bodies in UTF-8 are messages.
    let valid = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"\u00ff"}}}"#;
    assert!(matches!(Body::parse(valid, false), Body::Single(m) if m.name.as_deref() == Some("x")));
}
