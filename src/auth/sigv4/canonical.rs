//! The canonical request and the string to sign of one attempt, written into one buffer: the
//! request's headers read in one walk, the URL's parts as [`Target`](super::target) built them
//! once.
//!
//! As `aws-sigv4` (1.x) writes them with `SigningSettings::default()`
//! (`http_request/canonical_request.rs`):
//! * every header of the request is signed but `authorization`, `user-agent`,
//!   `x-amzn-trace-id` and `transfer-encoding`; names in lower case (as [`HeaderMap`] holds
//!   them), sorted; the values of one name joined by `,` in their order; each value trimmed of
//!   spaces at both ends and each run of spaces inside made one (spaces only: a tab stays);
//! * the signer's own: `host` from the URL when the request has none, `x-amz-date` (in place of
//!   any the request has), `x-amz-security-token` when the credentials have a session token (in
//!   place of any the request has, and written as it is, untrimmed);
//! * the payload hash: the SHA-256 of the body, in hex (no `x-amz-content-sha256` header).

use std::ops::Range;

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind};

/// The headers `SigningSettings::default()` leaves unsigned.
const UNSIGNED: [&str; 4] = [
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];

/// The algorithm, as the string to sign and `Authorization` name it.
pub(super) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// One value of a signed header.
struct Field<'a> {
    /// The header's name, lower case.
    name: &'a str,
    /// One of its values.
    value: &'a [u8],
    /// Whether the value is the request's own (trimmed) or the signer's (written as it is).
    trimmed: bool,
}

/// The signed headers of one attempt, read from the request in one walk, then the signer's own.
pub(super) struct Fields<'a> {
    /// The values, in the request's order, then the signer's.
    fields: Vec<Field<'a>>,
    /// Whether the request carries its own `host`.
    has_host: bool,
    /// The canonical request's bytes for these headers, at most: what the buffer is sized by.
    len: usize,
}

impl<'a> Fields<'a> {
    /// Reads `headers`, every value of which must be visible ASCII (the error names the first
    /// header that is not); leaves out those the signer sets itself (`x-amz-date`, and
    /// `x-amz-security-token` when `token_replaced`) and those left unsigned.
    pub(super) fn of(headers: &'a HeaderMap, token_replaced: bool) -> Result<Self, Error> {
        let mut fields = Fields {
            fields: Vec::with_capacity(headers.len() + 3),
            has_host: false,
            len: 0,
        };
        for (name, value) in headers {
            let value = header_text(name, value)?;
            let name = name.as_str();
            let replaced =
                name == "x-amz-date" || (token_replaced && name == "x-amz-security-token");
            if replaced || UNSIGNED.contains(&name) {
                continue;
            }
            fields.has_host |= name == "host";
            fields.push(name, value.as_bytes(), true);
        }
        Ok(fields)
    }

    /// Adds the signer's own: `host` (when the request has none), the `date_time` and the
    /// session `token`.
    pub(super) fn add(&mut self, host: &'a str, date_time: &'a [u8], token: Option<&'a [u8]>) {
        if !self.has_host {
            self.push("host", host.as_bytes(), false);
        }
        self.push("x-amz-date", date_time, false);
        if let Some(token) = token {
            self.push("x-amz-security-token", token, false);
        }
    }

    /// Adds one value, counting the room its line and its name in the list take.
    fn push(&mut self, name: &'a str, value: &'a [u8], trimmed: bool) {
        // Its line (name, colon, value, newline) and its place in the list (name, semicolon).
        self.len += 2 * name.len() + value.len() + 3;
        self.fields.push(Field {
            name,
            value,
            trimmed,
        });
    }
}

/// SHA-256 of `bytes`, in lower-case hex.
pub(super) fn sha256_hex(bytes: &[u8]) -> [u8; 64] {
    let digest: [u8; 32] = Sha256::digest(bytes).into();
    let mut hex = [0; 64];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    hex
}

/// The lower-case hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes into `out` (emptied first) the canonical request of `method` to `target` (its
/// canonical URI and query lines) with `fields` and the body's `payload_hash`; returns where
/// in `out` the list of signed header names is, for `Authorization`.
pub(super) fn write_request(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    mut fields: Fields<'_>,
    payload_hash: &[u8; 64],
) -> Range<usize> {
    out.clear();
    out.reserve(method.len() + target.len() + fields.len + 2 + payload_hash.len());
    out.extend_from_slice(method.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(target.as_bytes());
    // Stable: the values of one name stay in their order.
    fields.fields.sort_by(|a, b| a.name.cmp(b.name));
    let mut last: Option<&str> = None;
    for field in &fields.fields {
        if last == Some(field.name) {
            out.push(b',');
        } else {
            if last.is_some() {
                out.push(b'\n');
            }
            out.extend_from_slice(field.name.as_bytes());
            out.push(b':');
            last = Some(field.name);
        }
        if field.trimmed {
            push_trimmed(out, field.value);
        } else {
            out.extend_from_slice(field.value);
        }
    }
    out.extend_from_slice(b"\n\n");
    let start = out.len();
    let mut last: Option<&str> = None;
    for field in &fields.fields {
        if last != Some(field.name) {
            if last.is_some() {
                out.push(b';');
            }
            out.extend_from_slice(field.name.as_bytes());
            last = Some(field.name);
        }
    }
    let names = start..out.len();
    out.push(b'\n');
    out.extend_from_slice(payload_hash);
    names
}

/// `value` without spaces at either end and with each run of spaces inside made one, as
/// aws-sigv4's `trim_all` (spaces only, not tabs).
fn push_trimmed(out: &mut Vec<u8>, value: &[u8]) {
    let start = value.iter().position(|b| *b != b' ').unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| *b != b' ')
        .map_or(start, |at| at + 1);
    let mut rest = &value[start..end];
    while let Some(at) = rest.windows(2).position(|pair| pair == b"  ") {
        // Up to and with the run's first space; the rest of the run skipped.
        out.extend_from_slice(&rest[..=at]);
        let run = rest[at..].iter().take_while(|b| **b == b' ').count();
        rest = &rest[at + run..];
    }
    out.extend_from_slice(rest);
}

/// Writes into `out` (emptied first) the string to sign: the algorithm, the `date_time`, the
/// credential scope (the date, then `scope_tail`: `/{region}/{service}/aws4_request`) and the
/// canonical request's hash.
pub(super) fn write_string_to_sign(
    out: &mut Vec<u8>,
    date_time: &[u8; 16],
    scope_tail: &str,
    request_hash: &[u8; 64],
) {
    out.clear();
    out.extend_from_slice(ALGORITHM.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(date_time);
    out.push(b'\n');
    out.extend_from_slice(&date_time[..8]);
    out.extend_from_slice(scope_tail.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(request_hash);
}

/// A header's value as the text a signature covers: a value that is not visible ASCII cannot be
/// signed, and the request is refused.
pub(super) fn header_text<'a>(
    name: &http::HeaderName,
    value: &'a http::HeaderValue,
) -> Result<&'a str, Error> {
    value.to_str().map_err(|_| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("the header `{name}` is not visible ASCII text"),
            None,
        )
    })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn trimmed(value: &str) -> String {
        let mut out = Vec::new();
        push_trimmed(&mut out, value.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_are_trimmed_of_spaces_only() {
        let cases = [
            ("", ""),
            ("   ", ""),
            ("a", "a"),
            ("  a  b   c  ", "a b c"),
            ("\ta  b\t", "\ta b\t"),
            ("a \t b", "a \t b"),
            ("a\t\tb", "a\t\tb"),
        ];
        for (value, expected) in cases {
            assert_eq!(trimmed(value), expected, "{value:?}");
        }
    }

    #[test]
    fn a_canonical_request_as_aws_sigv4_writes_it() {
        let mut headers = HeaderMap::new();
        headers.append("X-Custom", HeaderValue::from_static("  two  words "));
        headers.append("x-custom", HeaderValue::from_static("second"));
        headers.append("user-agent", HeaderValue::from_static("unsigned"));
        headers.append("x-amz-date", HeaderValue::from_static("replaced"));
        headers.append("content-type", HeaderValue::from_static("application/json"));
        let mut fields = Fields::of(&headers, true).unwrap();
        fields.add("h.example", b"20250101T000000Z", Some(b"tok  en"));
        let mut out = Vec::new();
        let names = write_request(&mut out, "POST", "/a\nq=1\n", fields, &[b'0'; 64]);
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            text,
            format!(
                "POST\n/a\nq=1\ncontent-type:application/json\nhost:h.example\n\
                 x-amz-date:20250101T000000Z\nx-amz-security-token:tok  en\n\
                 x-custom:two words,second\n\n\
                 content-type;host;x-amz-date;x-amz-security-token;x-custom\n{}",
                "0".repeat(64)
            )
        );
        assert_eq!(
            &out[names],
            b"content-type;host;x-amz-date;x-amz-security-token;x-custom"
        );
    }

    #[test]
    fn a_header_that_is_not_visible_ascii_is_named() {
        let mut headers = HeaderMap::new();
        headers.append("x-fine", HeaderValue::from_static("ok"));
        headers.append("x-bad", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let error = Fields::of(&headers, false).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::InvalidRequest);
        assert!(error.to_string().contains("`x-bad`"), "{error}");
    }

    #[test]
    fn the_hash_is_lower_case_hex() {
        assert_eq!(
            &sha256_hex(b""),
            b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
