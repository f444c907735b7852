//! Who owns a call: the layer that created its context writes the final decision and calls
//! every `on_record` hook, once — also when the call is dropped before it ends.

use std::fmt;

use super::{CallContext, Owner};
use crate::error::Error;
use crate::jsonrpc::ParsedBody;
use crate::record::{AttemptRecord, Decision, Verdict};
use crate::rule::FailureKind;
use crate::telemetry::{self, CallError};

/// The ownership of a call: held by the layer that created its context. Finishing — or being
/// dropped before — it writes the final decision and calls the `on_record` hooks, once.
pub(crate) struct Ownership {
    pub(super) context: CallContext,
    pub(super) layer: &'static str,
    pub(super) finished: bool,
}

impl Ownership {
    /// The call ended with an answer or an error (`succeeded`: a 2xx that carries no platform
    /// error): the latest attempt is delivered.
    pub(crate) fn finish(mut self, succeeded: bool) {
        self.finished = true;
        self.context.record().deliver_if_undecided(self.layer);
        if let Some(budget) = &self.context.0.retry_budget {
            budget.ended(self.context.attempts(), succeeded);
        }
    }

    /// [`finish`](Self::finish), with how the call ended for its span: `answer_error` is the
    /// error the answer's body carried, when a layer read the whole body ahead.
    pub(crate) fn finish_with<B>(
        self,
        succeeded: bool,
        result: &Result<http::Response<B>, Error>,
        answer_error: Option<CallError>,
    ) {
        let span = self.context.span();
        let metrics = self.context.lock().metrics.is_on();
        if !span.is_disabled() || metrics {
            let error = match result {
                Ok(response) => answer_error.or_else(|| {
                    let status = response.status();
                    (status.is_client_error() || status.is_server_error())
                        .then(|| CallError::Http(status.as_u16()))
                }),
                Err(error) => Some(CallError::Transport(call_error_kind(error))),
            };
            telemetry::call_ended(&span, error);
            if metrics {
                // Read before the context is locked.
                let reading = self.context.first_parse();
                let body = reading.as_ref().map(ParsedBody::body);
                self.context.lock().metrics.call_ended(body, error);
            }
        }
        self.finish(succeeded);
    }
}

/// The call's output, `result`, as a layer hands it up: `owner`, when that layer is the call's
/// first, finishes the call (a success is a 2xx whose record's latest attempt carries no
/// platform error) and puts the record in the response; an error carries the record either way.
pub(crate) fn delivered<B>(
    result: Result<http::Response<B>, Error>,
    answer_error: Option<CallError>,
    record: &AttemptRecord,
    owner: Option<Ownership>,
) -> Result<http::Response<B>, Error> {
    let owns = owner.is_some();
    if let Some(owner) = owner {
        let succeeded = result
            .as_ref()
            .is_ok_and(|r| r.status().is_success() && record.latest_is_clear());
        owner.finish_with(succeeded, &result, answer_error);
    }
    match result {
        Ok(mut response) => {
            if owns {
                response.extensions_mut().insert(record.clone());
            }
            Ok(response)
        }
        Err(error) => Err(error.with_record(record)),
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        let record = self.context.record();
        if !self.finished {
            if self.context.attempts() > 0 {
                self.context
                    .decide(Decision::new(self.layer, Verdict::CallDropped, None));
            }
            if let Some(budget) = &self.context.0.retry_budget {
                budget.ended(self.context.attempts(), false);
            }
        }
        // The call is over: no layer that meets it later (a late dispatch through a buffer)
        // owns it again, and the hooks are called this once.
        let (hooks, _spans) = {
            let mut state = self.context.lock();
            state.owner = Owner::Finished;
            // The call's spans close once the layers' futures let go of theirs.
            if let Some(uri) = state.call_uri.take() {
                telemetry::call_sent_to(&state.span, &uri);
            }
            let spans = (
                std::mem::take(&mut state.span),
                std::mem::take(&mut state.attempt_spans),
            );
            (std::mem::take(&mut state.hooks), spans)
        };
        for hook in &hooks {
            (hook.0)(record);
        }
    }
}

impl fmt::Debug for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ownership")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

/// A call's error as `error.type`: how the transport failed, or what of this crate's stopped it
/// (`credentials`, `token`, `invalid_request`…).
fn call_error_kind(error: &Error) -> &'static str {
    use crate::error::ErrorKind;
    match error.kind() {
        ErrorKind::Credentials => "credentials",
        ErrorKind::Token => "token",
        ErrorKind::Signing => "signing",
        ErrorKind::InvalidRequest => "invalid_request",
        ErrorKind::BodyTooLarge => "body_too_large",
        ErrorKind::RequestBody => "request_body",
        ErrorKind::SendGateClosed => "send_gate_closed",
        _ => error_kind(error.failure_kind()),
    }
}

/// A transport failure as `error.type`: short, low-cardinality.
pub(super) fn error_kind(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::NeverSent => "never_sent",
        FailureKind::ConnectionDropped => "connection_dropped",
        FailureKind::TimedOut => "timeout",
        _ => "_OTHER",
    }
}
