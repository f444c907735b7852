//! How a URI is shown in a log, an error or a `Debug` output: never with its user information
//! (which may hold a password) nor its query (which may carry anything, a token among it).

use std::fmt;

use http::Uri;

/// A URI as logs show it: scheme, host, port and path.
pub(crate) struct Shown<'a>(pub(crate) &'a Uri);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(scheme), Some(authority)) = (self.0.scheme(), self.0.authority()) {
            write!(f, "{scheme}://{}", authority.host())?;
            if let Some(port) = authority.port() {
                write!(f, ":{port}")?;
            }
        }
        f.write_str(self.0.path())?;
        if self.0.query().is_some() {
            f.write_str("?…")?;
        }
        Ok(())
    }
}

/// A URL given as text, as errors and `Debug` show it: parsed and shown as [`Shown`] shows it;
/// text that is no URI is cut at its first `@` or `?`, whichever comes first.
pub(crate) fn shown_text(text: &str) -> String {
    match text.parse::<Uri>() {
        Ok(uri) if uri.authority().is_some() || uri.query().is_none() => {
            if uri.scheme().is_some() {
                Shown(&uri).to_string()
            } else {
                cut(text)
            }
        }
        _ => cut(text),
    }
}

/// A URL given as text that a layer can send to: absolute, `http` or `https`, with a host and
/// no user information (a password belongs in the auth, not in a URL that travels and gets
/// logged). Returns its scheme and authority with it; the error says what is wrong, in words
/// that never quote the URL.
pub(crate) fn absolute_http(
    text: &str,
) -> Result<(http::uri::Scheme, http::uri::Authority, Uri), &'static str> {
    let uri: Uri = text.parse().map_err(|_| "not a URL")?;
    let scheme = uri
        .scheme()
        .cloned()
        .ok_or("no scheme (http:// or https://)")?;
    if scheme != http::uri::Scheme::HTTP && scheme != http::uri::Scheme::HTTPS {
        return Err("the scheme must be http or https");
    }
    let authority = uri.authority().cloned().ok_or("no host")?;
    if authority.host().is_empty() {
        return Err("no host");
    }
    if authority.as_str().contains('@') {
        return Err("credentials in the URL are not allowed");
    }
    Ok((scheme, authority, uri))
}

fn cut(text: &str) -> String {
    match text.find(['@', '?']) {
        Some(at) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_password_and_no_query() {
        let uri: Uri = "http://user:password@mcp.invalid:8443/mcp?token=secret"
            .parse()
            .unwrap();
        assert_eq!(Shown(&uri).to_string(), "http://mcp.invalid:8443/mcp?…");
        for (text, shown) in [
            (
                "https://user:pw@example.com/base",
                "https://example.com/base",
            ),
            ("https://example.com/?a=secret", "https://example.com/?…"),
            ("not a url user:pw@x", "not a url user:pw…"),
            ("localhost:8080", "localhost:8080"),
            ("user:pw@localhost:8080", "user:pw…"),
            ("/just/a/path?k=v", "/just/a/path…"),
        ] {
            assert_eq!(shown_text(text), shown, "{text}");
            assert!(!shown_text(text).contains("pw@") && !shown_text(text).contains("secret"));
        }
    }
}
