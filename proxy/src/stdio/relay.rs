//! An answer relayed to stdout: an event stream message by message as it comes (resumed when
//! the server ends it before its answers), a JSON body read whole; whatever request is still
//! unanswered then gets an error.

use http::header::HeaderValue;
use http::{HeaderMap, Response, StatusCode};
use serde_json::Value;
use tracing::{debug, warn};

use super::own_calls::is_header_mismatch;
use super::{Answers, Proxy, STREAM_FAILURES, STREAM_RETRY};
use crate::answers::{Broke, Call, is_jsonrpc, next_frame, preview};
use crate::call::ResBody;
use crate::sse::{Event, SseParser, is_event_stream};

/// How a relayed answer ended.
pub(super) enum Relayed {
    /// It was relayed (or its requests failed).
    Done,
    /// A held stream ([`is_held`](crate::answers::is_held)) ended before its answer, after
    /// `events` messages: issued again after `retry` (what the server asked for, if it did).
    Ended {
        events: usize,
        retry: Option<std::time::Duration>,
    },
    /// It was the revision's HeaderMismatch, not relayed: the call may be sent again.
    HeaderMismatch,
}

/// What the client's message asked, for how its answer is relayed.
#[derive(Clone, Copy)]
pub(super) struct Asked {
    /// It is `initialize`: its answer opens the session.
    pub(super) initialize: bool,
    /// A 400 that is the revision's HeaderMismatch (-32020) is not relayed but said.
    pub(super) watch_mismatch: bool,
    /// Its stream is held open by the client ([`is_held`](crate::answers::is_held)).
    pub(super) held: bool,
}

/// Reads an event stream, each event to `on_event`, until it ends or `on_event` wants no more
/// (every request it waited for is answered: a server may keep the stream open after the
/// answer, and nothing is waited for on it): `Err` when it broke or stalled first, or the
/// call's deadline came.
pub(super) async fn read_events(
    body: &mut ResBody,
    call: &Call,
    events: &mut SseParser,
    mut on_event: impl FnMut(Event) -> bool,
) -> Result<(), Broke> {
    let mut more = true;
    let ended = loop {
        match next_frame(body, call).await {
            Ok(Some(frame)) => {
                if let Some(data) = frame.data_ref() {
                    events.feed(data, |event| more &= on_event(event));
                }
                if !more {
                    break Ok(());
                }
            }
            Ok(None) => break Ok(()),
            Err(why) => break Err(why),
        }
    };
    events.finish(|event| {
        on_event(event);
    });
    ended
}

impl Proxy {
    /// Relays an answer to the client: SSE events as they come, a JSON body whole.
    pub(super) async fn relay(
        &self,
        response: Response<ResBody>,
        answers: &mut Answers,
        asked: Asked,
    ) -> Relayed {
        let (parts, body) = response.into_parts();
        let status = parts.status;
        let call = Call::of_held(&parts.extensions, asked.held, &self.upstream);
        if asked.initialize && status.is_success() {
            let mut session = self.session.write().unwrap_or_else(|p| p.into_inner());
            session.id = parts.headers.get("mcp-session-id").cloned();
            session.protocol_version = None;
        }
        if status.is_success() && is_event_stream(&parts.headers) {
            self.relay_events(status, body, answers, &call, asked).await
        } else {
            let head = (status, &parts.headers);
            self.relay_whole(head, body, answers, &call, asked).await
        }
    }

    /// Writes one message of an answer (see [`Proxy::emit`]); from the answer to `initialize`,
    /// learns the protocol version it agreed. Whether it was a message.
    fn deliver(&self, answers: &mut Answers, data: &[u8], initialize: bool) -> bool {
        let Some(message) = self.emit(answers, data) else {
            return false;
        };
        if initialize
            && let Some(version) = message
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .and_then(|v| HeaderValue::from_str(v).ok())
        {
            self.session
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .protocol_version = Some(version);
        }
        true
    }

    /// Relays an SSE answer event by event; resumes it while requests wait for their answer
    /// ([`Proxy::resume`]), and answers those still waiting in the end with an error. A held
    /// stream that ends is [`Relayed::Ended`]: it is issued again, not resumed.
    async fn relay_events(
        &self,
        status: StatusCode,
        mut body: ResBody,
        answers: &mut Answers,
        call: &Call,
        asked: Asked,
    ) -> Relayed {
        let mut events = SseParser::default();
        let mut delivered = 0;
        let ended = read_events(&mut body, call, &mut events, |event| {
            if let Some(data) = event.message() {
                delivered += usize::from(self.deliver(answers, data, asked.initialize));
            }
            !answers.open.is_empty()
        })
        .await;
        if asked.held && !answers.open.is_empty() {
            if let Err(why) = &ended {
                debug!("a held stream ended: {}", why.message);
            }
            return Relayed::Ended {
                events: delivered,
                retry: events.retry(),
            };
        }
        let ended = self
            .resume(answers, call, &mut events, ended, asked.initialize)
            .await;
        if !answers.open.is_empty() {
            let (message, data) = match ended {
                Err(why) if why.message.ends_with("may have run") => (why.message, Some(why.data)),
                Err(why) => (
                    format!("{}; the tool may have run", why.message),
                    Some(why.data),
                ),
                Ok(()) => (self.upstream.unanswered(status), None),
            };
            warn!("{message}");
            answers.fail_all(&message, data.as_ref());
        }
        Relayed::Done
    }

    /// While requests wait for their answer and the stream's events had ids, resumes it (GET
    /// with Last-Event-ID) after the wait the server asked for: resuming is not sending again,
    /// the server sends the rest of the answer. Gives up after [`STREAM_FAILURES`] resumes that
    /// brought no new event. How the stream ended last (`ended`, how it first did).
    async fn resume(
        &self,
        answers: &mut Answers,
        call: &Call,
        events: &mut SseParser,
        mut ended: Result<(), Broke>,
        initialize: bool,
    ) -> Result<(), Broke> {
        let mut resumes = 0;
        while !answers.open.is_empty() {
            let Some(last) = events.last_id().map(str::to_owned) else {
                break;
            };
            resumes += 1;
            if resumes > STREAM_FAILURES {
                return Err(call.broken(format!("it was resumed {STREAM_FAILURES} times")));
            }
            tokio::time::sleep(events.retry().unwrap_or(STREAM_RETRY)).await;
            let mut next = match self.get_stream(Some(&last)).await {
                Ok(Some(next)) => next,
                Ok(None) => {
                    return Err(call.broken(format!(
                        "{} ended its answer's stream before the answer, and offers no stream \
                         to resume it (GET: 405)",
                        self.upstream.name
                    )));
                }
                Err(why) => {
                    return Err(
                        call.broken(format!("its answer's stream could not be resumed: {why}"))
                    );
                }
            };
            // The same call: its deadline still holds.
            ended = read_events(&mut next, call, events, |event| {
                if let Some(data) = event.message() {
                    self.deliver(answers, data, initialize);
                }
                !answers.open.is_empty()
            })
            .await;
            if events.last_id() != Some(last.as_str()) {
                resumes = 0;
            }
        }
        ended
    }

    /// Relays a JSON answer (or an error's body), read whole: a refusal in the JSON-RPC form
    /// said as the HTTP form is, an error naming none of the open requests made the answer of
    /// the one open, any other failure said as an error for each open request.
    async fn relay_whole(
        &self,
        (status, headers): (StatusCode, &HeaderMap),
        mut body: ResBody,
        answers: &mut Answers,
        call: &Call,
        asked: Asked,
    ) -> Relayed {
        let mut whole = Vec::new();
        loop {
            let frame = match next_frame(&mut body, call).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(why) => {
                    warn!("{}", why.message);
                    answers.fail_all(&why.message, Some(&why.data));
                    return Relayed::Done;
                }
            };
            if let Some(data) = frame.data_ref() {
                whole.extend_from_slice(data);
            }
        }
        let text = whole.trim_ascii();
        if asked.watch_mismatch && status == StatusCode::BAD_REQUEST && is_header_mismatch(text) {
            return Relayed::HeaderMismatch;
        }
        // A refusal in the JSON-RPC form says what it is, as the HTTP form's error does.
        let said = call.refusal_in_json_rpc(status, text);
        let text = said.as_deref().unwrap_or(text);
        let deliver =
            |answers: &mut Answers, data: &[u8]| self.deliver(answers, data, asked.initialize);
        if status.is_success() {
            if !text.is_empty() && !deliver(answers, text) {
                answers.fail_all(
                    &format!(
                        "{} answered HTTP {} with a body that is not JSON",
                        self.upstream.name,
                        status.as_u16()
                    ),
                    Some(
                        &serde_json::json!({"httpStatus": status.as_u16(), "body": preview(text)}),
                    ),
                );
            }
        } else if let Some(error) = serde_json::from_slice::<Value>(text)
            .ok()
            .and_then(|message| answers.open.correlated(&message))
        {
            deliver(answers, error.to_string().as_bytes());
        } else if !(is_jsonrpc(text) && deliver(answers, text)) {
            let (message, mut data) = self.upstream.describe_status(status, headers, text);
            call.add_attempts(&mut data);
            warn!("{message}");
            answers.fail_all(&message, Some(&data));
        }
        if !answers.open.is_empty() {
            answers.fail_all(&self.upstream.unanswered(status), None);
        }
        Relayed::Done
    }
}
