//! What a retry layer re-sends: a copy of the request it received ([`Template`]).

use std::sync::Arc;

use http::Request;

use crate::context::{CallContext, Head, KeptExtensions};

/// What a retry layer re-sends: the request it received — the head shared with the layer above
/// when that one kept the same, its own body (a body cannot be compared), and its extensions
/// (copied, unless they hold nothing but the call's own marks: see
/// [`CallContext::keep_extensions`]).
pub(super) struct Template<B> {
    /// Method, URI, version and headers.
    head: Arc<Head>,
    /// The body, cloned for every re-send.
    body: B,
    /// The extensions, as the call's context keeps them.
    extensions: KeptExtensions,
}

impl<B> Template<B> {
    /// The request's URI, for logs.
    pub(super) fn uri(&self) -> &http::Uri {
        self.head.uri()
    }
}

impl<B: Clone> Template<B> {
    /// A copy of `request`, kept for the re-sends of its call.
    pub(super) fn of(request: &Request<B>, context: &CallContext) -> Self {
        Self {
            head: context.head_of(request),
            body: request.body().clone(),
            extensions: context.keep_extensions(request.extensions()),
        }
    }

    /// A copy for a re-send: method, URI, version, headers, extensions and body. `None` when
    /// a header cannot be built again ([`Head::request`]).
    pub(super) fn request(&self, context: &CallContext) -> Option<Request<B>> {
        self.head.request(
            self.body.clone(),
            context.restore_extensions(&self.extensions),
        )
    }
}
