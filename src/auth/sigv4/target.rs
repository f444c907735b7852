//! What a signature needs of the URL it signs for, which is the same for every request to that
//! URL: the canonical URI and query, and the `Host` a request without one is signed with. A
//! layer sends to one or two URLs (an `InvokeAgentRuntime` target's invocations and its
//! `StopRuntimeSession`; an MCP endpoint), so these are built once per URL and kept in a few
//! slots, found again by the URL's exact text (scheme, authority, path and query; no string
//! built per attempt).
//!
//! Built as `aws-sigv4` (1.x) builds them with `SigningSettings::default()`
//! (`http_request/canonical_request.rs`, `uri_path_normalization.rs`, `url_escape.rs`):
//! * the URI: the path normalised (RFC 3986's dot segments removed, empty segments dropped, a
//!   trailing `/` kept), then percent-encoded again (`PercentEncodingMode::Double`: the `%` of
//!   `%3A` becomes `%25`) with `aws-smithy-http`'s greedy label set;
//! * the query: its pairs decoded as `application/x-www-form-urlencoded` (`+` is a space), each
//!   name and value encoded with the same set (`/` included), sorted by the encoded pair,
//!   joined with `&`;
//! * the `Host`: the URL's host, with its port unless it is the scheme's default.

use std::sync::{Arc, Mutex};

use http::Uri;
use http::uri::{Port, Scheme};
use percent_encoding::{AsciiSet, utf8_percent_encode};

use crate::urlencode::BASE_SET;

/// How many URLs are kept.
const SLOTS: usize = 4;

/// `aws-smithy-http`'s greedy label set: [`BASE_SET`] without `/`; what the path is encoded
/// against.
const GREEDY: &AsciiSet = &BASE_SET.remove(b'/');

/// The canonical parts of one URL. No `Debug`: a query may carry anything, a token among it.
pub(super) struct Target {
    /// The URL they were built for.
    uri: Uri,
    /// The canonical URI and query, each followed by a newline: the canonical request's second
    /// and third lines.
    canonical: Box<str>,
    /// The `Host` a request that carries none is signed with.
    host: Box<str>,
}

impl Target {
    /// Builds the parts of `uri`, read from its text as aws-sigv4 reads it; `None` when it has
    /// no host (the reference signer says what is wrong with it).
    fn build(uri: &Uri) -> Option<Target> {
        let given = uri.clone();
        let uri: Uri = uri.to_string().parse().ok()?;
        let authority = uri.authority()?.as_str();
        let host = if default_port(uri.scheme(), uri.port()) {
            uri.host()?
        } else {
            authority
        };
        let path = normalize_path(uri.path());
        let mut canonical = utf8_percent_encode(&path, GREEDY).to_string();
        canonical.push('\n');
        canonical.push_str(&canonical_query(uri.query().unwrap_or_default()));
        canonical.push('\n');
        Some(Target {
            uri: given,
            canonical: canonical.into(),
            host: host.into(),
        })
    }

    /// The canonical URI and query, each followed by a newline.
    pub(super) fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The `Host` a request that carries none is signed with.
    pub(super) fn host(&self) -> &str {
        &self.host
    }
}

/// The URLs signed for last, the most recently used first.
pub(super) struct Targets {
    /// The most recently used first.
    slots: Mutex<[Option<Arc<Target>>; SLOTS]>,
}

impl Targets {
    /// None kept yet.
    pub(super) fn new() -> Self {
        Targets {
            slots: Mutex::new(Default::default()),
        }
    }

    /// The parts of `uri`: kept, or built and kept; `None` when it has no host.
    pub(super) fn get(&self, uri: &Uri) -> Option<Arc<Target>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let kept = slots
            .iter()
            .position(|slot| slot.as_ref().is_some_and(|t| same(&t.uri, uri)));
        match kept {
            Some(at) => slots[..=at].rotate_right(1),
            None => {
                let built = Target::build(uri)?;
                slots.rotate_right(1);
                slots[0] = Some(Arc::new(built));
            }
        }
        slots[0].clone()
    }
}

/// Whether `a` and `b` are the same text: `Uri`'s own equality takes the host in any case,
/// and the `Host` signed keeps the case it is given.
fn same(a: &Uri, b: &Uri) -> bool {
    a.scheme_str() == b.scheme_str()
        && a.authority().map(|a| a.as_str()) == b.authority().map(|b| b.as_str())
        && a.path_and_query().map(|p| p.as_str()) == b.path_and_query().map(|p| p.as_str())
}

/// Whether `port` is `scheme`'s default (80 for http, 443 for https): then `Host` leaves it out,
/// as aws-sigv4 does (RFC 9110 §7.2; hyper strips it too).
fn default_port(scheme: Option<&Scheme>, port: Option<Port<&str>>) -> bool {
    match (scheme, port) {
        (Some(scheme), Some(port)) => matches!(
            (scheme.as_str(), port.as_str()),
            ("http", "80") | ("https", "443")
        ),
        _ => false,
    }
}

/// `path` normalised as aws-sigv4's `normalize_uri_path` does: `/` for an empty path, a `/` in
/// front of a relative one, and, when it holds a `.` or a `//`, RFC 3986 §5.2.4's dot segments
/// removed with the empty segments.
fn normalize_path(path: &str) -> String {
    if path.is_empty() {
        return "/".to_owned();
    }
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    if !(path.contains('.') || path.contains("//")) {
        return path;
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            segment => kept.push(segment),
        }
    }
    let mut normalized = kept.join("/");
    if !normalized.starts_with('/') {
        normalized.insert(0, '/');
    }
    let ends_with_slash = ["/", "/.", "/./", "/..", "/../"]
        .iter()
        .any(|end| path.ends_with(end));
    if ends_with_slash && !normalized.ends_with('/') {
        normalized.push('/');
    }
    normalized
}

/// The canonical query of `query` (the text after `?`): its pairs form-decoded, each part
/// encoded against [`BASE_SET`], sorted by the encoded pair, joined as `k=v&k=v`.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| {
            let encode = |text: &str| utf8_percent_encode(text, BASE_SET).to_string();
            (encode(&name), encode(&value))
        })
        .collect();
    pairs.sort();
    let mut canonical = String::with_capacity(query.len() + pairs.len());
    for (at, (name, value)) in pairs.iter().enumerate() {
        if at > 0 {
            canonical.push('&');
        }
        canonical.push_str(name);
        canonical.push('=');
        canonical.push_str(value);
    }
    canonical
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> (String, String) {
        let target = Target::build(&text.parse().unwrap()).unwrap();
        (target.canonical.into(), target.host.into())
    }

    #[test]
    fn an_invocation_url_is_encoded_twice() {
        let (canonical, host) = parts(
            "https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fa-1/invocations?qualifier=DEFAULT",
        );
        assert_eq!(
            canonical,
            "/runtimes/arn%253Aaws%253Abedrock-agentcore%253Aus-east-1%253A123456789012%253Aruntime%252Fa-1/invocations\nqualifier=DEFAULT\n"
        );
        assert_eq!(host, "bedrock-agentcore.us-east-1.amazonaws.com");
    }

    #[test]
    fn paths_are_normalised_as_aws_sigv4_does() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("/a/./b/../c", "/a/c"),
            ("/a//b", "/a/b"),
            ("/../a", "/a"),
            ("/a/b/.", "/a/b/"),
            ("/a/..", "/"),
            ("/a.b/c", "/a.b/c"),
            ("/a/", "/a/"),
        ];
        for (path, normalized) in cases {
            assert_eq!(normalize_path(path), normalized, "{path:?}");
        }
    }

    #[test]
    fn queries_are_decoded_encoded_and_sorted() {
        assert_eq!(canonical_query(""), "");
        assert_eq!(canonical_query("b=2&a=1&a=0"), "a=0&a=1&b=2");
        assert_eq!(canonical_query("q=a+b%2Fc&&x"), "q=a%20b%2Fc&x=");
        assert_eq!(canonical_query("k=%3A%zz"), "k=%3A%25zz");
    }

    #[test]
    fn the_host_keeps_a_port_that_is_not_the_default() {
        assert_eq!(parts("https://h.example:443/").1, "h.example");
        assert_eq!(parts("http://h.example:80/").1, "h.example");
        assert_eq!(parts("http://h.example:8080/").1, "h.example:8080");
        assert_eq!(parts("https://h.example:80/").1, "h.example:80");
        assert!(Target::build(&"/no/host".parse().unwrap()).is_none());
    }

    #[test]
    fn a_url_is_built_once_while_it_is_kept() {
        let targets = Targets::new();
        let get = |text: &str| targets.get(&text.parse().unwrap()).unwrap();
        let first = get("https://a.example/x");
        for other in [
            "https://b.example/",
            "https://c.example/",
            "https://d.example/",
        ] {
            get(other);
        }
        assert!(Arc::ptr_eq(&first, &get("https://a.example/x")));
        get("https://e.example/");
        // b was the least recently used.
        let b: Uri = "https://b.example/".parse().unwrap();
        let slots = targets.slots.lock().unwrap();
        assert!(slots.iter().flatten().all(|t| !same(&t.uri, &b)));
    }

    #[test]
    fn a_host_in_another_case_is_another_url() {
        let targets = Targets::new();
        let lower = targets.get(&"https://h.example/".parse().unwrap()).unwrap();
        let upper = targets.get(&"https://H.example/".parse().unwrap()).unwrap();
        assert_eq!(lower.host(), "h.example");
        assert_eq!(upper.host(), "H.example");
    }
}
