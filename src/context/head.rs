//! A request's head, kept once for the re-sends of every retry layer of a call that received it
//! unchanged.

use super::packed::PackedHeaders;

/// A request's head — method, URI, version, headers — kept for re-sends, shared by the retry
/// layers of one call that received it unchanged (each checks: a layer of the app's between two
/// of ours may have changed it). The headers are packed ([`PackedHeaders`]): kept on every
/// call, read back only when one is re-sent.
pub(crate) struct Head {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: PackedHeaders,
}

impl Head {
    pub(crate) fn of<B>(request: &http::Request<B>) -> Self {
        Self {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: PackedHeaders::of(request.headers()),
        }
    }

    /// Whether `request` has exactly this head.
    pub(crate) fn is_of<B>(&self, request: &http::Request<B>) -> bool {
        self.method == request.method()
            && same_uri(&self.uri, request.uri())
            && self.version == request.version()
            && self.headers.is_of(request.headers())
    }

    /// The first value of the header `name` (lower case).
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn header(&self, name: &str) -> Option<http::HeaderValue> {
        self.headers.get(name)
    }

    pub(crate) fn uri(&self) -> &http::Uri {
        &self.uri
    }

    /// A request with this head, `body` and `extensions`; `None` when a header cannot be built
    /// again ([`PackedHeaders::to_map`]).
    pub(crate) fn request<B>(
        &self,
        body: B,
        extensions: http::Extensions,
    ) -> Option<http::Request<B>> {
        let mut copy = http::Request::new(body);
        *copy.method_mut() = self.method.clone();
        *copy.uri_mut() = self.uri.clone();
        *copy.version_mut() = self.version;
        *copy.headers_mut() = self.headers.to_map()?;
        *copy.extensions_mut() = extensions;
        Some(copy)
    }
}

/// Whether two URIs are the same bytes. Stricter than `Uri`'s `==` (which compares the
/// authority without regard to case): an unchanged request passes it with plain comparisons,
/// and one whose host changed case merely is not shared — it is copied.
fn same_uri(a: &http::Uri, b: &http::Uri) -> bool {
    a.scheme_str() == b.scheme_str()
        && a.authority().map(|x| x.as_str()) == b.authority().map(|x| x.as_str())
        && a.path_and_query().map(|x| x.as_str()) == b.path_and_query().map(|x| x.as_str())
}
