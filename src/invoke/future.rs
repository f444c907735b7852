//! The response future of the signing layers: one state machine for every call, from reading
//! the request's body to the answer handed up — credentials or a token resolved, each attempt
//! mapped and authenticated, the send gate asked, a refused attempt sent once more
//! authenticated afresh, the answer redacted and its runtime session adopted.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Full;
use pin_project_lite::pin_project;
use tower::Service;

use super::request::{self, RUNTIME_SESSION_ID};
use super::session::Chosen;
use super::{
    MAX_PAYLOAD_BYTES, Mapping, Operation, RenewedFrom, Shared, SharedSendGate, mcp_session_of,
};
use crate::auth::{Auth, BearerChallenge, BearerToken, Key, KeyFuture, Refresh};
use crate::body::{ReadError, ReadToBytes};
use crate::context::{CallContext, KeptExtensions, Ownership};
use crate::error::{BoxError, Error, ErrorKind};
use crate::record::{Decision, Handed, Outcome, Verdict};
use crate::redact::{self, InvokeBody, Secrets};
use crate::rule::{Failure, Refusal};

/// Starts a call of `request` through `inner` (the ready service; a clone stays behind), as
/// the layer's mapping says.
pub(crate) fn call<S, ReqB, ResB>(
    inner: &mut S,
    shared: &Arc<Shared>,
    mut request: Request<ReqB>,
) -> ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>> + Clone,
    ReqB: Body,
    ResB: Body<Data = Bytes>,
{
    let operation = shared.operation(&request);
    let layer = shared.layer();
    let (context, ownership) = CallContext::enter(&mut request, layer, None, None);
    let mut call = Call {
        handed: Handed::of(context.record(), &request),
        index: 0,
        held: None,
        layer,
        context,
        ownership,
    };
    let operation = match operation {
        Ok(operation) => operation,
        Err(why) => {
            // GET (the server-message stream), DELETE and anything else: not offered.
            let response = redact::local(StatusCode::METHOD_NOT_ALLOWED, &[("allow", "POST")], "");
            call.handed.not_sent(why);
            return ResponseFuture {
                state: State::Local {
                    response: Some(response),
                },
                call,
            };
        }
    };
    let clone = inner.clone();
    let service = std::mem::replace(inner, clone);
    let (parts, body) = request.into_parts();
    ResponseFuture {
        state: State::Reading {
            reading: ReadToBytes::new(body, MAX_PAYLOAD_BYTES),
            pending: Some(Pending {
                parts,
                service,
                shared: shared.clone(),
                operation,
                may_refresh: true,
                kept_extensions: None,
            }),
        },
        call,
    }
}

struct Pending<S> {
    parts: http::request::Parts,
    service: S,
    shared: Arc<Shared>,
    operation: Operation,
    /// Whether this call may still be sent once more, authenticated afresh (expired
    /// credentials, a skewed clock, a refused token).
    may_refresh: bool,
    /// For that re-send: the extensions the first attempt carried, put back into `parts`
    /// only if it is made.
    kept_extensions: Option<KeptExtensions>,
}

struct Prepared<S, ResB> {
    pending: Pending<S>,
    body: Bytes,
    /// For a re-send after a refusal: the refused answer, delivered as it came when the
    /// re-send cannot be made (no fresh token or credentials, the service not ready), and the
    /// secrets of the refused attempt, kept out of the new answer too.
    refused: Option<Refused<ResB>>,
}

/// An answer that called for fresh authentication, held until the re-send is on its way.
struct Refused<ResB> {
    parts: http::response::Parts,
    body: ResB,
    secrets: Secrets,
    chosen: Option<Chosen>,
}

/// What one attempt was signed with, for its answer.
struct Signed {
    request: Request<Full<Bytes>>,
    secrets: Secrets,
    /// The time its signature was dated by (SigV4).
    signed_at: Option<SystemTime>,
    /// The runtime session, when the layer chose it (the request named none).
    chosen: Option<Chosen>,
}

/// An attempt handed to the service below: what its answer is read with.
struct Sent<S, ResB> {
    /// What to mask in the answer.
    secrets: Secrets,
    /// The time its signature was dated by (SigV4).
    signed_at: Option<SystemTime>,
    /// The runtime session, when the layer chose it (the request named none).
    chosen: Option<Chosen>,
    shared: Arc<Shared>,
    operation: Operation,
    /// The re-send authenticated afresh, while one may still be made.
    again: Option<Prepared<S, ResB>>,
    /// The bearer token sent, named to its provider should the server refuse it.
    token: Option<BearerToken>,
}

/// The call as this layer sees it: the attempt it was handed (until it sends it on) and the one
/// it sent, its context, its ownership when this layer is the first of the crate's. (Dropped in
/// this order: the record is final before the owner calls the hooks.)
struct Call {
    handed: Handed,
    index: usize,
    /// The attempt this layer opened to sign, until it is sent.
    held: Option<usize>,
    /// The layer's name in the record.
    layer: &'static str,
    context: CallContext,
    ownership: Option<Ownership>,
}

impl Call {
    /// Records a failure before sending and returns the error, with the record.
    fn not_sent(&mut self, error: Error) -> Error {
        self.handed.not_sent(error.to_string());
        self.held_not_sent();
        let result: Result<Response<()>, Error> = Err(error);
        self.end(&result);
        let Err(error) = result else {
            unreachable!("an error")
        };
        error.with_record(self.context.record())
    }

    /// The attempt this layer opened was not sent: its span says so.
    fn held_not_sent(&mut self) {
        if let Some(index) = self.held.take() {
            self.context.not_sent(index);
        }
    }

    /// A re-send after a refusal could not be made (`error`): the refused answer is delivered
    /// as it came, the re-send recorded as not sent. Without one (the first attempt), the
    /// error ends the call.
    fn not_resent<S, ResB: Body>(
        &mut self,
        error: Error,
        refused: Option<Refused<ResB>>,
        pending: &Pending<S>,
    ) -> Result<Response<InvokeBody<ResB>>, Error> {
        let Some(refused) = refused else {
            return Err(self.not_sent(error));
        };
        self.handed.not_sent(format!(
            "{error}; the refused answer is delivered as it came"
        ));
        self.held_not_sent();
        let response = deliver(
            self,
            &pending.shared,
            pending.operation,
            refused.chosen,
            refused.parts,
            refused.body,
            refused.secrets,
        );
        let result = Ok(response);
        self.end(&result);
        result
    }

    /// Whether the call may be sent once more after `refresh`: the call's rule and budget
    /// allow it. Records the decision either way.
    fn may_send_again(&self, refresh: &Refresh) -> bool {
        let cause = refresh.cause();
        let failure = Failure::Refused(Refusal::CredentialsRejected);
        // The signer has no cap or ceiling of its own: the call's, its rule and budget decide.
        let verdict = self.context.grant(
            self.layer,
            &failure,
            cause,
            (u32::MAX, std::time::Duration::MAX),
            std::time::Duration::ZERO,
        );
        // Decided on the refused attempt, and shown on its span.
        match verdict {
            Ok(permission) => {
                self.context.decide(Decision::new(
                    self.layer,
                    Verdict::SentAgain {
                        cause,
                        wait: std::time::Duration::ZERO,
                        retry_after: None,
                    },
                    Some(permission),
                ));
                true
            }
            Err((verdict, permission)) => {
                self.context
                    .decide(Decision::new(self.layer, verdict, permission));
                false
            }
        }
    }

    /// Sends `request` on as this call's attempt.
    fn dispatch<B>(&mut self, request: &mut Request<B>) {
        self.handed.sent();
        self.held = None;
        self.index = self.context.record().dispatch(request);
    }

    /// The call ends here with `result` (a success: a 2xx answer; a platform error in its body
    /// is for the layers above to read: they end the call when they own it).
    fn end<B>(&mut self, result: &Result<Response<B>, Error>) {
        if let Some(owner) = self.ownership.take() {
            let succeeded = result.as_ref().is_ok_and(|r| r.status().is_success());
            owner.finish_with(succeeded, result, None);
        }
    }
}

pin_project! {
    /// The response future of [`SigV4Invoke`].
    pub struct ResponseFuture<S, ReqB, ResB>
    where
        S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
        ReqB: Body,
        ResB: Body,
    {
        #[pin]
        state: State<S, ReqB, ResB>,
        call: Call,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqB, ResB>
    where
        S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
        ReqB: Body,
        ResB: Body,
    {
        Reading {
            #[pin]
            reading: ReadToBytes<ReqB>,
            pending: Option<Pending<S>>,
        },
        Resolving {
            key: KeyFuture,
            prepared: Option<Prepared<S, ResB>>,
        },
        Calling {
            #[pin]
            future: S::Future,
            sent: Option<Sent<S, ResB>>,
            // The attempt's span, entered while the service below works on it.
            attempt: tracing::Span,
        },
        Refreshing {
            prepared: Option<Prepared<S, ResB>>,
            // The bearer token the server refused, when that is why it is sent again.
            refused_token: Option<BearerToken>,
        },
        Local {
            response: Option<Response<InvokeBody<ResB>>>,
        },
        Done,
    }
}

/// What one step of the state machine leads to: its next state, or the call's end.
#[expect(
    clippy::large_enum_variant,
    reason = "a step is moved once, into the pinned state: boxing it would allocate per step"
)]
enum Step<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    ReqB: Body,
    ResB: Body,
{
    Next(State<S, ReqB, ResB>),
    Ready(Result<Response<InvokeBody<ResB>>, Error>),
}

impl<S, ReqB, ResB> Future for ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ReqB::Error: Into<BoxError>,
    ResB: Body<Data = Bytes>,
{
    type Output = Result<Response<InvokeBody<ResB>>, Error>;

    /// Moves between the steps, each a function of its own: read the body, resolve the key,
    /// sign and send, read the answer (or refresh and sign again), deliver.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let call = &mut *this.call;
            let step = match this.state.as_mut().project() {
                StateProj::Reading { reading, pending } => {
                    let read = std::task::ready!(reading.poll(cx));
                    read_body(read, taken(pending), call)
                }
                StateProj::Resolving { key, prepared } => {
                    let resolved = std::task::ready!(key.as_mut().poll(cx));
                    sign_and_send(resolved, taken(prepared), call)
                }
                StateProj::Refreshing {
                    prepared,
                    refused_token,
                } => std::task::ready!(refreshing(prepared, refused_token, call, cx)),
                StateProj::Calling {
                    future,
                    sent,
                    attempt,
                } => {
                    let result = std::task::ready!(attempt.in_scope(|| future.poll(cx)));
                    answered(result, taken(sent), call)
                }
                StateProj::Local { response } => Step::Ready(local(taken(response), call)),
                StateProj::Done => panic!("ResponseFuture polled after it completed"),
            };
            match step {
                Step::Next(state) => this.state.set(state),
                Step::Ready(result) => {
                    this.state.set(State::Done);
                    return Poll::Ready(result);
                }
            }
        }
    }
}

/// What a state holds until its step takes it, once.
fn taken<T>(slot: &mut Option<T>) -> T {
    slot.take().unwrap_or_else(|| unreachable!("taken once"))
}

/// The request's body read: the key resolved next (or the call failed before it was sent).
fn read_body<S, ReqB, ResB>(
    read: Result<Bytes, ReadError<ReqB::Error>>,
    pending: Pending<S>,
    call: &mut Call,
) -> Step<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    ReqB: Body,
    ReqB::Error: Into<BoxError>,
    ResB: Body,
{
    let body = match read {
        Ok(bytes) => bytes,
        Err(ReadError::TooLarge) => {
            let error = Error::new(ErrorKind::BodyTooLarge, None, None);
            return Step::Ready(Err(call.not_sent(error)));
        }
        Err(ReadError::Body(e)) => {
            let error = Error::new(ErrorKind::RequestBody, None, Some(e.into()));
            return Step::Ready(Err(call.not_sent(error)));
        }
    };
    let key = pending.shared.auth.resolve(None);
    Step::Next(State::Resolving {
        key,
        prepared: Some(Prepared {
            pending,
            body,
            refused: None,
        }),
    })
}

/// The key resolved: the attempt opened, signed, the send gate asked, and the request handed
/// to the service below (what a re-send authenticated afresh would need kept beside it).
fn sign_and_send<S, ReqB, ResB>(
    resolved: Result<Key, Error>,
    prepared: Prepared<S, ResB>,
    call: &mut Call,
) -> Step<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    ReqB: Body,
    ResB: Body,
{
    let Prepared {
        mut pending,
        body,
        refused,
    } = prepared;
    let attempt = open_attempt(call, &mut pending, &body);
    let context = &call.context;
    // What a re-send with fresh credentials would need: the request as it came. Signing reads
    // the head and moves the extensions to the request sent: only they are kept (copied unless
    // they are the call's own marks alone); the head is kept as it is.
    let copy = pending.may_refresh.then(|| {
        (
            context.keep_extensions(&pending.parts.extensions),
            body.clone(),
        )
    });
    let mut token = None;
    let sent = resolved.and_then(|key| {
        if let (Key::Bearer(sent), Some(_)) = (&key, &copy) {
            token = Some(sent.clone());
        }
        sign_attempt(&mut pending, body, &key, context)
    });
    let Signed {
        mut request,
        mut secrets,
        signed_at,
        chosen,
    } = match sent {
        Ok(signed) => signed,
        Err(error) => return Step::Ready(call.not_resent(error, refused, &pending)),
    };
    if let Some(refused) = &refused {
        // The refused attempt's secrets (a token no longer used, an old session token) must
        // not come back in this answer either.
        secrets.extend(&refused.secrets);
    }
    if let Some(gate) = request.extensions().get::<SharedSendGate>()
        && let Err(reason) = gate.check()
    {
        let error = Error::new(ErrorKind::SendGateClosed, reason, None);
        return Step::Ready(call.not_resent(error, refused, &pending));
    }
    let Pending {
        parts,
        mut service,
        shared,
        operation,
        ..
    } = pending;
    call.dispatch(&mut request);
    call.context.sent_to(call.index, request.uri());
    let future = attempt.in_scope(|| service.call(request));
    let again = copy.map(|(extensions, body)| Prepared {
        refused: None,
        pending: Pending {
            parts,
            service,
            shared: shared.clone(),
            operation,
            may_refresh: false,
            kept_extensions: Some(extensions),
        },
        body,
    });
    let sent = Sent {
        secrets,
        signed_at,
        chosen,
        shared,
        operation,
        again,
        token,
    };
    Step::Next(State::Calling {
        future,
        sent: Some(sent),
        attempt,
    })
}

/// Opens the attempt, before it is signed: its span (the call's named from the body, when no
/// layer above did) and its trace headers (signed with the rest). Each attempt is a call of its
/// own here: the extensions move to the request sent (for a re-send, those the first attempt
/// carried). This layer holds the attempt until it is sent.
fn open_attempt<S>(call: &mut Call, pending: &mut Pending<S>, body: &Bytes) -> tracing::Span {
    if let Some(kept) = pending.kept_extensions.take() {
        pending.parts.extensions = call.context.restore_extensions(&kept);
    }
    call.context.describe_bytes(body);
    let (index, attempt) = call.context.dispatch_head(&mut pending.parts);
    call.handed.hold(&pending.parts.extensions);
    call.held = Some(index);
    attempt
}

/// Before a re-send authenticated afresh: the service below ready, then the key resolved again
/// (the refused token named to its provider); the refused answer delivered as it came if the
/// service fails.
fn refreshing<S, ReqB, ResB>(
    prepared: &mut Option<Prepared<S, ResB>>,
    refused_token: &Option<BearerToken>,
    call: &mut Call,
    cx: &mut Context<'_>,
) -> Poll<Step<S, ReqB, ResB>>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ResB: Body,
{
    let Some(again) = prepared.as_mut() else {
        unreachable!("taken once")
    };
    if let Err(error) = std::task::ready!(again.pending.service.poll_ready(cx)) {
        let again = taken(prepared);
        let error = Error::from_service(error);
        return Poll::Ready(Step::Ready(call.not_resent(
            error,
            again.refused,
            &again.pending,
        )));
    }
    let key = again.pending.shared.auth.resolve(refused_token.as_ref());
    let prepared = prepared.take();
    Poll::Ready(Step::Next(State::Resolving { key, prepared }))
}

/// The answer of the service below: recorded, redacted, then sent again authenticated afresh
/// (expired credentials, a skewed clock, a refused token) or delivered; a failure ends the
/// call.
fn answered<S, ReqB, ResB>(
    result: Result<Response<ResB>, S::Error>,
    mut sent: Sent<S, ResB>,
    call: &mut Call,
) -> Step<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: Body,
    ResB: Body<Data = Bytes>,
{
    let record = call.context.record().clone();
    let response = match result {
        Ok(response) => response,
        Err(error) => {
            let error = Error::from_service(error);
            record.complete(call.index, || Outcome::Failure(error.failure_kind()));
            call.context.answered(call.index, Err(error.failure_kind()));
            let result = Err(error.with_record(&record));
            call.end(&result);
            return Step::Ready(result);
        }
    };
    let (mut parts, body) = response.into_parts();
    // The server's clock, read before the head is filtered (the app does not get `Date`): only
    // parsed, never shown.
    let server_time = parts
        .headers
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    // Redact first: nothing below is read from an unredacted head.
    match sent.shared.mapping {
        Mapping::Invoke(_) => redact::filter_headers(&mut parts.headers, &sent.secrets),
        Mapping::Endpoint(_) => redact::filter_endpoint_headers(&mut parts.headers, &sent.secrets),
    }
    record.complete(call.index, || {
        Outcome::of_response(parts.status, &parts.headers)
    });
    call.context
        .answered(call.index, Ok((parts.status, &parts.headers)));
    let refresh = sent
        .again
        .is_some()
        .then(|| {
            let auth = &sent.shared.auth;
            auth.refresh_for(parts.status, &parts.headers, server_time, sent.signed_at)
        })
        .flatten();
    if let (Some(refresh), Some(mut again)) = (refresh, sent.again.take())
        && call.may_send_again(&refresh)
    {
        sent.shared.auth.refresh(&refresh);
        // This attempt is over: its span ends before the next opens.
        call.context.end_attempts();
        // Held, not read: delivered as it came if the re-send cannot be made.
        again.refused = Some(Refused {
            parts,
            body,
            secrets: sent.secrets,
            chosen: sent.chosen,
        });
        let refused_token = sent
            .token
            .filter(|_| matches!(refresh, Refresh::TokenRefused));
        return Step::Next(State::Refreshing {
            prepared: Some(again),
            refused_token,
        });
    }
    let result = Ok(deliver(
        call,
        &sent.shared,
        sent.operation,
        sent.chosen,
        parts,
        body,
        sent.secrets,
    ));
    call.end(&result);
    Step::Ready(result)
}

/// An answer of the layer's own (a 405 for a GET or DELETE not offered): no success, and no
/// error of the call's either — MCP clients take it as "not offered".
fn local<ResB: Body>(
    mut response: Response<InvokeBody<ResB>>,
    call: &mut Call,
) -> Result<Response<InvokeBody<ResB>>, Error> {
    if call.ownership.is_some() {
        response
            .extensions_mut()
            .insert(call.context.record().clone());
    }
    if let Some(owner) = call.ownership.take() {
        owner.finish(false);
    }
    Ok(response)
}

/// Hands an answer (its head redacted) to the app: the runtime session adopted or forgotten,
/// a `Bearer` challenge read into its extensions, the record attached when this layer owns
/// the call, the call ended.
fn deliver<ResB: Body>(
    call: &mut Call,
    shared: &Shared,
    operation: Operation,
    chosen: Option<Chosen>,
    mut parts: http::response::Parts,
    body: ResB,
    secrets: Secrets,
) -> Response<InvokeBody<ResB>> {
    if let Some(chosen) = &chosen {
        let sessions = &shared.invoke().sessions;
        match operation {
            Operation::Invoke => sessions.adopt(chosen, &parts.headers),
            Operation::StopSession if parts.status.is_success() => sessions.forget(chosen),
            Operation::StopSession | Operation::Forward => {}
        }
    }
    // A refused token (401), too few scopes (403 `insufficient_scope`): the challenge, for an
    // app that runs the OAuth flow.
    if matches!(
        parts.status,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
    ) && let Some(challenge) = BearerChallenge::of(&parts.headers)
    {
        parts.extensions.insert(challenge);
    }
    if call.ownership.is_some() {
        parts.extensions.insert(call.context.record().clone());
    }
    Response::from_parts(parts, InvokeBody::remote(body, secrets))
}

/// Maps and authenticates one attempt.
fn sign_attempt<S>(
    pending: &mut Pending<S>,
    body: Bytes,
    key: &Key,
    context: &CallContext,
) -> Result<Signed, Error> {
    let shared = &pending.shared;
    // The trace context into `params._meta`, when the app asked for it: before signing.
    let body = match pending.operation {
        Operation::Invoke | Operation::Forward => context.with_params_meta(&body).unwrap_or(body),
        Operation::StopSession => body,
    };
    // Each attempt is a call of its own here: the extensions move to the request sent (for a
    // re-send, those the first attempt carried).
    let extensions = std::mem::take(&mut pending.parts.extensions);
    if pending.operation == Operation::Forward {
        let bearer = matches!(shared.auth, Auth::Bearer(_));
        let origin = match &shared.mapping {
            Mapping::Endpoint(origin) => origin.as_ref(),
            Mapping::Invoke(_) => None,
        };
        let (uri, host) = request::endpoint_uri(&pending.parts.uri, bearer, origin)?;
        let method = pending.parts.method.clone();
        let headers = request::endpoint_headers(&pending.parts.headers, host, &method, &body);
        let (request, secrets, signed_at) = shared
            .auth
            .authorize(key, method, uri, headers, body, extensions)?;
        return Ok(Signed {
            request,
            secrets,
            signed_at,
            chosen: None,
        });
    }
    let invoke = shared.invoke();
    let target = &invoke.target;
    let headers = &pending.parts.headers;
    // A request that names its runtime session goes there, for that request only. Else the
    // layer picks one, the same for every attempt of the call.
    let chosen = match headers.get(RUNTIME_SESSION_ID) {
        Some(_) => None,
        None => {
            let mcp_session = mcp_session_of(headers);
            // An `initialize` that re-opens an expired MCP session: on that session's microVM.
            let renewed_from = extensions.get::<RenewedFrom>();
            // Read before the context is locked for the choice (the read keeps the parse in it),
            // and only where the choice depends on it.
            let opens = invoke.sessions.asks_whether_opens(mcp_session)
                && request::opens_session(context, &body);
            let mut picked = None;
            let id = context.runtime_session(|| {
                let chosen = match pending.operation {
                    Operation::StopSession => invoke.sessions.to_stop(headers),
                    Operation::Invoke | Operation::Forward => None,
                }
                .unwrap_or_else(|| invoke.sessions.choose(mcp_session, renewed_from, opens));
                let id = chosen.id.clone();
                picked = Some(chosen);
                id
            });
            Some(picked.unwrap_or_else(|| invoke.sessions.pinned(id, mcp_session, renewed_from)))
        }
    };
    let session_id = chosen.as_ref().map(|c| &*c.id);
    let (uri, headers, body) = match pending.operation {
        Operation::StopSession => {
            let session_id = match session_id {
                Some(id) => id,
                None => headers
                    .get(RUNTIME_SESSION_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
            };
            let (headers, body) = request::stop_request(session_id, &context.stop_token(), target)?;
            (target.stop_session_uri(), headers, body)
        }
        Operation::Invoke | Operation::Forward => {
            let headers = request::invoke_headers(
                headers,
                context,
                &body,
                session_id,
                invoke.user_id.as_deref(),
                target,
            )?;
            (target.invocation_uri(), headers, body)
        }
    };
    let (request, secrets, signed_at) =
        shared
            .auth
            .authorize(key, Method::POST, uri, headers, body, extensions)?;
    Ok(Signed {
        request,
        secrets,
        signed_at,
        chosen,
    })
}

impl<S, ReqB, ResB> fmt::Debug for ResponseFuture<S, ReqB, ResB>
where
    S: Service<Request<Full<Bytes>>, Response = Response<ResB>>,
    ReqB: Body,
    ResB: Body,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
