//! The checks every request to the endpoint passes before anything is sent: a loopback `Host`
//! and `Origin` (no DNS rebinding, no web page), the `--listen-token-file` token, the path.

use http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tracing::warn;

use super::{Endpoint, HttpBody, PATH, refusal};
use crate::cli::is_loopback_host;

impl Endpoint {
    /// The checks every request passes before anything is sent: Host, Origin, token, path;
    /// the answer to one that fails.
    pub(super) fn refusal(&self, request: &Request<Incoming>) -> Option<Response<HttpBody>> {
        let headers = request.headers();
        let host = headers.get(HOST).and_then(|v| v.to_str().ok());
        if !host.is_some_and(is_loopback_authority) {
            warn!(host = ?host, "refused a request whose Host is not a loopback name");
            return Some(refusal(
                StatusCode::MISDIRECTED_REQUEST,
                "the Host header must name a loopback address (localhost, 127.0.0.1, [::1])",
                &[],
            ));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let text = origin.to_str().unwrap_or("(not text)");
            if !is_loopback_origin(text) {
                warn!(
                    origin = text,
                    "refused a request from a non-loopback Origin"
                );
                return Some(refusal(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "the origin {text} may not use this endpoint: only loopback origins \
                         (http://localhost, http://127.0.0.1, http://[::1]) may"
                    ),
                    &[],
                ));
            }
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(AUTHORIZATION)
                .map(|v| bearer_token(v.as_bytes()));
            let (why, challenge) = match given {
                None => ("the request has no Authorization header", "Bearer"),
                Some(Some(given)) if same(given, token.as_bytes()) => ("", ""),
                Some(_) => (
                    "the bearer token is wrong",
                    "Bearer error=\"invalid_token\"",
                ),
            };
            if !why.is_empty() {
                warn!("refused a request: {why}");
                return Some(refusal(
                    StatusCode::UNAUTHORIZED,
                    &format!(
                        "{why}: this endpoint takes \"Authorization: Bearer TOKEN\", TOKEN from \
                         the proxy's --listen-token-file"
                    ),
                    &[(WWW_AUTHENTICATE.as_str(), challenge)],
                ));
            }
        }
        if request.uri().path() != PATH {
            return Some(refusal(
                StatusCode::NOT_FOUND,
                &format!("the MCP endpoint is {PATH}"),
                &[],
            ));
        }
        None
    }
}

/// Whether a `Host` value (or an origin's authority) names a loopback address: `localhost`,
/// `127.x.x.x`, `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let Ok(authority) = authority.parse::<http::uri::Authority>() else {
        return false;
    };
    if authority.as_str().contains('@') {
        return false;
    }
    is_loopback_host(authority.host())
}

/// Whether an `Origin` is a loopback one: `http://` and a loopback authority, nothing else
/// (`null`, another scheme, a path are refused).
fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &origin[7..])
    else {
        return false;
    };
    !rest.contains(['/', '?', '#']) && is_loopback_authority(rest)
}

/// The token of an `Authorization: Bearer TOKEN` value.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

/// Compares in time that depends on the length only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for ok in [
            "http://localhost",
            "http://localhost:8765",
            "http://LOCALHOST:1",
            "HTTP://127.0.0.1:8765",
            "http://127.9.9.9",
            "http://[::1]:8765",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://evil.example:8765",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:8765",
            "https://localhost:8765",
            "file://",
            "http://localhost:8765/path",
            "http://user@localhost:8765",
            "http://[::ffff:127.0.0.1]",
            "http://0.0.0.0:8765",
            "http://192.168.1.10",
            "http://",
            "",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn only_loopback_hosts_pass() {
        for ok in [
            "localhost:8765",
            "127.0.0.1:8765",
            "127.0.0.1",
            "[::1]:8765",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "0.0.0.0:8765",
            "10.0.0.1",
            "",
            "a@localhost",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_and_compared_whole() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
