//! What can go wrong inside a [`TowerClient`](super::TowerClient), as rmcp's transport
//! carries it.

use std::fmt;

use ::rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::error::BoxError;

/// What went wrong inside a [`TowerClient`] (rmcp wraps it in [`StreamableHttpError::Client`]).
///
/// Its `Display` and `Debug` carry no header value: the bearer token rmcp may hand the client
/// never appears in them.
///
/// [`TowerClient`]: super::TowerClient
#[derive(Debug)]
#[non_exhaustive]
pub enum TowerClientError {
    /// The message could not be serialized as JSON.
    Encode(serde_json::Error),
    /// The request could not be built: the URI or a header value is invalid.
    Request(http::Error),
    /// The tower service failed. For this crate's layers it is an [`Error`](crate::Error)
    /// (downcast it), which carries the call's attempt record.
    Service(BoxError),
    /// Reading the response body failed.
    Body(BoxError),
    /// An SSE event grew past the transport's `max_sse_event_size`; the stream ends here.
    SseEventTooLarge {
        /// The limit, in bytes.
        max_size: usize,
    },
}

impl fmt::Display for TowerClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Encode(e) => write!(f, "cannot serialize the JSON-RPC message: {e}"),
            Self::Request(e) => write!(f, "cannot build the HTTP request: {e}"),
            Self::Service(e) => write!(f, "the HTTP service failed: {e}"),
            Self::Body(e) => write!(f, "reading the response body failed: {e}"),
            Self::SseEventTooLarge { max_size } => {
                write!(
                    f,
                    "an SSE event exceeded the maximum size of {max_size} bytes"
                )
            }
        }
    }
}

impl std::error::Error for TowerClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Encode(e) => Some(e),
            Self::Request(e) => Some(e),
            Self::Service(e) | Self::Body(e) => Some(&**e),
            Self::SseEventTooLarge { .. } => None,
        }
    }
}

pub(super) type HttpError = StreamableHttpError<TowerClientError>;

pub(super) fn client_error(error: TowerClientError) -> HttpError {
    StreamableHttpError::Client(error)
}
