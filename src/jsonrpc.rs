//! The little JSON-RPC and JSON-over-HTTP inspection the layers share.

use http::HeaderMap;
use http::header::CONTENT_TYPE;

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

    #[test]
    fn significant() {
        assert_eq!(first_significant_byte(b" \r\n\t{"), Some(b'{'));
        assert_eq!(first_significant_byte(b"  "), None);
    }
}
