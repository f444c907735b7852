//! The `Bearer` challenge of a refused request (`WWW-Authenticate`), read as the MCP
//! authorization specification reads it.

use http::HeaderMap;

/// The `Bearer` challenge of a 401 (`WWW-Authenticate`), as the MCP authorization
/// specification reads it: where the protected resource's metadata is, for an app that runs
/// the OAuth flow. The signing layers put it in the extensions of a 401 or 403 they deliver
/// with one (AgentCore Gateway answers a token without the scopes it wants with a 403
/// `insufficient_scope` challenge).
///
/// ```
/// use agentcore_tower::auth::BearerChallenge;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert(
///     "www-authenticate",
///     r#"Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource", error="invalid_token""#
///         .parse()
///         .unwrap(),
/// );
/// let challenge = BearerChallenge::of(&headers).unwrap();
/// assert_eq!(
///     challenge.resource_metadata(),
///     Some("https://example.com/.well-known/oauth-protected-resource")
/// );
/// assert_eq!(challenge.error(), Some("invalid_token"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BearerChallenge {
    resource_metadata: Option<String>,
    error: Option<String>,
    scope: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge among `headers`' `WWW-Authenticate` values, if there is one.
    pub fn of(headers: &HeaderMap) -> Option<Self> {
        headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|value| challenge_starts(value).find_map(|at| parse_bearer(&value[at..])))
    }

    /// The URL of the protected resource's metadata (RFC 9728), the start of the OAuth flow.
    pub fn resource_metadata(&self) -> Option<&str> {
        self.resource_metadata.as_deref()
    }

    /// The error code (RFC 6750: `invalid_token`, `insufficient_scope`, …), if given.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The scope the resource asks for, if given.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }
}

/// Where a challenge may start in a `WWW-Authenticate` value, which can hold several
/// (`Basic realm="x", Bearer resource_metadata="…"`): its start, and after every comma outside
/// a quoted string (a parameter's comma too: [`parse_bearer`] tells a scheme from a parameter).
fn challenge_starts(value: &str) -> impl Iterator<Item = usize> + '_ {
    let mut quoted = false;
    let mut escaped = false;
    std::iter::once(0).chain(value.char_indices().filter_map(move |(i, c)| {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => return Some(i + 1),
            _ => {}
        }
        None
    }))
}

/// Parses one challenge `Bearer k="v", k=v, …` (RFC 9110 §11.6.1's auth-params, quoted or
/// not); anything unreadable after the scheme is skipped, never a panic.
fn parse_bearer(value: &str) -> Option<BearerChallenge> {
    let value = value.trim_start();
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let rest = &value[6..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let mut challenge = BearerChallenge {
        resource_metadata: None,
        error: None,
        scope: None,
    };
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let (param, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => out.push(c),
                }
            }
            let Some(end) = end else { break };
            (out, &quoted[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        match name.as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(param),
            "error" => challenge.error = Some(param),
            "scope" => challenge.scope = Some(param),
            _ => {}
        }
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Some(challenge)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(value: &str) -> Option<BearerChallenge> {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::WWW_AUTHENTICATE, value.parse().unwrap());
        BearerChallenge::of(&headers)
    }

    #[test]
    fn bearer_challenges_are_read_quoted_or_not() {
        let c = challenge(
            r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource?qualifier=DEFAULT""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata(),
            Some("https://x/.well-known/oauth-protected-resource?qualifier=DEFAULT")
        );
        let c = challenge(r#"bearer error=invalid_token, scope="a b", realm="x\"y""#).unwrap();
        assert_eq!(
            (c.error(), c.scope(), c.resource_metadata()),
            (Some("invalid_token"), Some("a b"), None)
        );
        assert_eq!(challenge("Bearer").unwrap().error(), None);
        assert_eq!(challenge("Basic realm=\"x\""), None);
        // Several challenges in one value: the Bearer one is found, not a quoted look-alike.
        let c = challenge(r#"Basic realm="a, Bearer error=fake", Bearer error="invalid_token", resource_metadata="https://m""#).unwrap();
        assert_eq!(
            (c.error(), c.resource_metadata()),
            (Some("invalid_token"), Some("https://m"))
        );
        assert_eq!(challenge("Bearerish x=1"), None);
        // Unterminated quotes and stray text: read what can be read, never a panic.
        let c = challenge(r#"Bearer error="invalid_token, resource_metadata"#).unwrap();
        assert_eq!(c.error(), None);
        let c = challenge("Bearer ,,, =,= error=e").unwrap();
        assert_eq!(c.error(), None);
    }

    #[test]
    fn arbitrary_challenges_never_panic() {
        let mut rng = fastrand::Rng::with_seed(15);
        let alphabet = b"Bearer =\",\\ abcrsoue_mtadx";
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
                .collect();
            // Another scheme is never taken for Bearer; a Bearer challenge is always read.
            let other = parse_bearer(&format!("Basic {text}"));
            assert_eq!(other, None, "{text:?}");
            let bearer = parse_bearer(&format!("Bearer {text}"));
            assert!(bearer.is_some(), "{text:?}");
        }
    }
}
