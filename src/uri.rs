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
