//! MCP 2026-07-28's first probe: the `server/discover` rmcp's worker sends itself and cannot
//! cancel. [`TowerClient`](super::TowerClient) does not send it: it asks rmcp for it again, and
//! rmcp sends it again as a request it can cancel.
//!
//! # Why
//! rmcp's Streamable HTTP worker sends the first message of the lifecycle itself and awaits its
//! POST to the end, whatever its caller does meanwhile, then hands the caller the answer;
//! every later POST it drops as soon as its caller stops waiting. With
//! `ClientLifecycleMode::Auto` that first message is a `server/discover` (JSON-RPC id 0), whose
//! answer rmcp waits for 10 s before it falls back to `initialize` (id 1). Over this crate's
//! stack the probe can take longer: while AgentCore provisions the runtime session (a cold
//! start, up to ~12.6 s) the session-busy layer sends it again and again. rmcp gives up on it
//! and sends `initialize`, the probe is still being sent, and when its answer comes the worker
//! hands it to rmcp, which waits for id 1: the handshake fails (`conflict initialized response
//! id: expected 1, got 0`). Against a server that never answers the probe, the worker would
//! wait for it for ever, and `initialize` would never go out.
//!
//! # What [`FirstProbe`] does
//! The first probe is answered at once, without sending anything, with the JSON-RPC error by
//! which a server asks for a probe again: -32022, with the requested version among the
//! `supported` ones. rmcp answers it by sending `server/discover` once more, at the same
//! version (rmcp does this once per version), and that second probe is an ordinary POST of
//! the worker, which rmcp cancels itself:
//! * in `Auto` mode it is dropped when rmcp's 10 s end — dropping the call stops the stack's
//!   re-sends, which live in the call's future — and nothing of it reaches rmcp, which falls
//!   back to `initialize`; `initialize` then waits the rest of the cold start out;
//! * in `Discover` mode (no timeout) it waits the cold start out, and the client connects in
//!   2026-07-28;
//! * answered in time, it is the probe as it would have been, in either mode.
//!
//! Nothing is sent twice by this crate: the first probe is never sent. The cost is one local
//! answer per connection, and rmcp's one retry of the version it asked for (a server that
//! itself asks for the probe again at that version then fails discovery).
//!
//! The first probe is a `server/discover` with id 0, sent without a session: rmcp's ids start
//! at 0, and the first message of its lifecycle takes the first.

use ::rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, GetMeta, ProtocolVersion, RequestId,
    ServerJsonRpcMessage,
};
use ::rmcp::transport::streamable_http_client::StreamableHttpPostResponse;

/// The first `server/discover` of rmcp's lifecycle, which rmcp cannot cancel: see the [module
/// docs](self).
pub(super) struct FirstProbe {
    id: RequestId,
    version: ProtocolVersion,
}

impl FirstProbe {
    /// The first probe, if `message` is it: a `server/discover` with id 0, sent without a
    /// session, naming the version it asks for.
    pub(super) fn of(message: &ClientJsonRpcMessage, session_attached: bool) -> Option<Self> {
        let ClientJsonRpcMessage::Request(request) = message else {
            return None;
        };
        let first = matches!(request.request, ClientRequest::DiscoverRequest(_))
            && !session_attached
            && request.id == RequestId::Number(0);
        if !first {
            return None;
        }
        Some(Self {
            id: request.id.clone(),
            version: request.request.get_meta().protocol_version()?,
        })
    }

    /// The answer to the probe, sent nowhere: the error by which a server asks for it again
    /// (-32022, the requested version among the supported ones), correlated to its id.
    pub(super) fn send_again(self) -> StreamableHttpPostResponse {
        let mut error = ErrorData::unsupported_protocol_version(
            self.version.clone(),
            std::slice::from_ref(&self.version),
        );
        error.message = "server/discover not sent: rmcp could not cancel its first request; \
                         send it again"
            .into();
        StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, Some(self.id)), None)
    }
}
