//! What the conventions name, and how the crate shows it: the headers the spans and the trace
//! context read or write, and `url.full` as OpenTelemetry asks for it.

use std::fmt;

use http::{HeaderName, Uri};

pub(super) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(super) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub(super) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(super) const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(super) const AWS_REQUEST_ID: HeaderName = HeaderName::from_static("x-amzn-requestid");
pub(super) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(super) const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
pub(super) const BAGGAGE: HeaderName = HeaderName::from_static("baggage");
pub(super) const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");

/// A URI as `url.full`: user info `REDACTED:REDACTED`, and the value of every query key
/// `REDACTED` — OpenTelemetry's list (`X-Amz-Signature`, `X-Amz-Credential`, `sig`…) and the
/// rest: this crate never shows a query's values (they may carry anything, a token among them;
/// see [`Shown`](crate::uri::Shown)). Keys and path as they are.
pub(crate) struct FullUrl<'a>(pub(crate) &'a Uri);

impl fmt::Display for FullUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let uri = self.0;
        if let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) {
            write!(f, "{scheme}://")?;
            if authority.as_str().contains('@') {
                f.write_str("REDACTED:REDACTED@")?;
            }
            f.write_str(authority.host())?;
            if let Some(port) = authority.port() {
                write!(f, ":{port}")?;
            }
        }
        f.write_str(uri.path())?;
        if let Some(query) = uri.query() {
            f.write_str("?")?;
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    f.write_str("&")?;
                }
                match pair.split_once('=') {
                    Some((key, _)) => write!(f, "{key}=REDACTED")?,
                    None => f.write_str(pair)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_full_hides_secrets() {
        let uri: Uri = "https://user:pw@example.com:8443/a/b?color=blue&X-Amz-Signature=abc&sig=x&X-Amz-Credential=AKID%2F1"
            .parse()
            .unwrap();
        assert_eq!(
            FullUrl(&uri).to_string(),
            "https://REDACTED:REDACTED@example.com:8443/a/b?color=REDACTED&X-Amz-Signature=REDACTED&sig=REDACTED&X-Amz-Credential=REDACTED"
        );
        let plain: Uri = "http://localhost/mcp".parse().unwrap();
        assert_eq!(FullUrl(&plain).to_string(), "http://localhost/mcp");
    }
}
