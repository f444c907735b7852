//! A request's head, kept once for the re-sends of every retry layer of a call that received it
//! unchanged.

/// A request's head — method, URI, version, headers — kept for re-sends, shared by the retry
/// layers of one call that received it unchanged (each checks: a layer of the app's between two
/// of ours may have changed it).
pub(crate) struct Head {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: http::HeaderMap,
}

impl Head {
    pub(crate) fn of<B>(request: &http::Request<B>) -> Self {
        Self {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
        }
    }

    /// Whether `request` has exactly this head.
    pub(crate) fn is_of<B>(&self, request: &http::Request<B>) -> bool {
        self.method == request.method()
            && self.uri == *request.uri()
            && self.version == request.version()
            && same_headers(&self.headers, request.headers())
    }

    #[cfg(feature = "opentelemetry")]
    pub(crate) fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }

    pub(crate) fn uri(&self) -> &http::Uri {
        &self.uri
    }

    /// A request with this head, `body` and `extensions`.
    pub(crate) fn request<B>(&self, body: B, extensions: http::Extensions) -> http::Request<B> {
        let mut copy = http::Request::new(body);
        *copy.method_mut() = self.method.clone();
        *copy.uri_mut() = self.uri.clone();
        *copy.version_mut() = self.version;
        *copy.headers_mut() = self.headers.clone();
        *copy.extensions_mut() = extensions;
        copy
    }
}

/// Whether two header maps hold the same entries in the same order. Stricter than the maps'
/// `==` (which ignores order, hashing each name to look it up): an unchanged request passes it
/// with one linear walk, and a reordered one merely is not shared — it is copied.
fn same_headers(a: &http::HeaderMap, b: &http::HeaderMap) -> bool {
    a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x == y)
}
