//! One request through the layer: sent as it is, or — when its session expired — sent again
//! in a new session, its answer naming the id the client holds.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use tower::ServiceExt;

use super::renew::{Opening, renew};
use super::table::{Kept, Session, Sessions, opened_id};
use super::{EXPIRED, LAYER, READ_LIMIT};
use crate::body::ReadToBytes;
use crate::budget::CallBudget;
use crate::context::{CallContext, KeptExtensions};
use crate::contract::{AWS_ERROR_TYPE, MCP_SESSION_ID};
use crate::error::{BoxError, Error, ErrorKind};
use crate::jsonrpc::Body as JsonRpcBody;
use crate::record::{Decision, Handed, Verdict};
use crate::rule::{Failure, Refusal};
use crate::sends::Sends;

/// The `error.type` of a session whose 404 reached the client: the server no longer knows it
/// and it was not opened again.
const LOST: &str = "session_lost";

/// What a request is to the layer.
enum Role {
    /// A POST without `Mcp-Session-Id`: an `initialize` when its body says so.
    MayOpen,
    /// A request of a session the layer saw opened.
    Of(Arc<Session>),
    /// Anything else: sent once, as it is.
    Other,
}

/// Sends `request` through `service`: an `initialize` remembered when it opens a session, a
/// request of a known session with its id now (see [`in_session`]), anything else as it is.
pub(super) async fn serve<S, ReqB, ResB>(
    mut service: S,
    sessions: Arc<Sessions>,
    request: Request<ReqB>,
    context: &CallContext,
) -> Result<Response<ResB>, Error>
where
    S: Sends<ReqB, ResB> + Clone,
    ReqB: Body<Data = Bytes, Error: Into<BoxError>> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let role = match crate::invoke::mcp_session_of(request.headers()) {
        Some(id) => sessions
            .get(id, request.uri())
            .map_or(Role::Other, Role::Of),
        None if request.method() == Method::POST => Role::MayOpen,
        None => Role::Other,
    };
    // Read only what may open or complete a session, and parse only a body that names it.
    let opening = match &role {
        Role::MayOpen => is_message(&request, "initialize").await,
        Role::Of(session) if !session.has_initialized() && request.method() == Method::POST => {
            is_message(&request, "notifications/initialized").await
        }
        _ => false,
    };
    match role {
        Role::Of(session) => {
            in_session(service, &sessions, session, request, context, opening).await
        }
        Role::MayOpen if opening => initialize(service, &sessions, request, context).await,
        Role::MayOpen | Role::Other => send(&mut service, request, context).await,
    }
}

/// An `initialize`: sent once, remembered when it opened a session.
async fn initialize<S, ReqB, ResB>(
    mut service: S,
    sessions: &Sessions,
    request: Request<ReqB>,
    context: &CallContext,
) -> Result<Response<ResB>, Error>
where
    S: Sends<ReqB, ResB> + Clone,
    ReqB: Body<Data = Bytes, Error: Into<BoxError>> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let initialize = Kept::of(&request, context);
    let answer = send(&mut service, request, context).await?;
    if let Some(id) = opened_id(&answer) {
        #[allow(unused_mut)]
        let mut session = Session::new(id, initialize);
        #[cfg(feature = "opentelemetry")]
        {
            session.server = context.server();
        }
        sessions.open(session);
    }
    Ok(answer)
}

/// What a request of a session keeps, to be sent again in a new session.
struct Resend {
    /// A copy of the request; its head shared with the retry layers below, which keep the same.
    kept: Kept,
    /// Its extensions, as the call's context keeps them.
    extensions: KeptExtensions,
    /// The call's limits, for the requests that open the new session to keep within.
    budget: Option<CallBudget>,
    /// Its `Authorization`, for the requests that open the new session.
    authorization: Option<HeaderValue>,
}

impl Resend {
    /// What `request` keeps.
    fn of<B: Clone + Send + Sync + 'static>(request: &Request<B>, context: &CallContext) -> Self {
        Self {
            kept: Kept::of(request, context),
            extensions: context.keep_extensions(request.extensions()),
            budget: request.extensions().get::<CallBudget>().copied(),
            authorization: request.headers().get(AUTHORIZATION).cloned(),
        }
    }
}

/// A request of a session the layer saw opened (`initialized` when it is the session's
/// `notifications/initialized`): sent with the session's id now, and, when the server no longer
/// knows that id, sent once more in a new session.
async fn in_session<S, ReqB, ResB>(
    mut service: S,
    sessions: &Sessions,
    session: Arc<Session>,
    mut request: Request<ReqB>,
    context: &CallContext,
    initialized: bool,
) -> Result<Response<ResB>, Error>
where
    S: Sends<ReqB, ResB> + Clone,
    ReqB: Body<Data = Bytes, Error: Into<BoxError>> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>>,
{
    // The session's id now, which the request carries in place of the client's.
    let sent_with = session.current();
    if sent_with != session.client_id
        && let Ok(value) = HeaderValue::from_str(&sent_with)
    {
        request.headers_mut().insert(MCP_SESSION_ID, value);
    }
    let resend = Resend::of(&request, context);
    let deleting = request.method() == Method::DELETE;
    let answer = send(&mut service, request, context).await?;
    if !is_expired(&answer) {
        return Ok(noted(
            answer,
            sessions,
            &session,
            &sent_with,
            initialized,
            deleting,
            &resend.kept,
        ));
    }
    if deleting {
        // The client ends a session the server has ended already: nothing to re-open.
        sessions.forget(&session);
        sessions.ended(&session, None);
        return Ok(named_for_client(answer, &session, &sent_with));
    }
    let Some(id) = reopen(
        &mut service,
        sessions,
        &session,
        &sent_with,
        &resend,
        context,
    )
    .await
    else {
        return Ok(named_for_client(answer, &session, &sent_with));
    };
    let mut again = match resend.kept.request::<ReqB>(Some(&id), None) {
        Ok(again) => again,
        Err(why) => {
            // The record says why the call ends here, as the retry loop's does.
            context.record().not_sent(why.to_owned());
            let error = Error::new(ErrorKind::InvalidRequest, why.to_owned(), None);
            return Err(error.with_record(context.record()));
        }
    };
    // The refused answer is released before the request is sent again.
    drop(answer);
    *again.extensions_mut() = context.restore_extensions(&resend.extensions);
    service.ready().await.map_err(Error::from_service)?;
    let answer = send(&mut service, again, context).await?;
    Ok(noted(
        answer,
        sessions,
        &session,
        &id,
        initialized,
        deleting,
        &resend.kept,
    ))
}

/// The server no longer knows the session `sent_with` named, so it ran nothing: when the call
/// may send its request again, a new session is opened (or the one another request opened is
/// taken), and its id is returned. The decision is recorded either way; a session that cannot
/// be opened again has ended.
async fn reopen<S, ReqB, ResB>(
    service: &mut S,
    sessions: &Sessions,
    session: &Arc<Session>,
    sent_with: &Arc<str>,
    resend: &Resend,
    context: &CallContext,
) -> Option<Arc<str>>
where
    S: Sends<ReqB, ResB> + Clone,
    ReqB: Body<Data = Bytes, Error: Into<BoxError>> + Clone + Send + Sync + 'static,
    ResB: Body<Data = Bytes, Error: Into<BoxError>>,
{
    let record = context.record();
    let failure = Failure::Refused(Refusal::SessionExpired);
    let unlimited = (u32::MAX, Duration::MAX);
    let permission = match context.grant(LAYER, &failure, EXPIRED, unlimited, Duration::ZERO) {
        Ok(permission) => permission,
        Err((verdict, permission)) => {
            record.decide(Decision::new(LAYER, verdict, permission));
            sessions.ended(session, Some(LOST));
            return None;
        }
    };
    // The requests that open the new session are calls of their own, within this call's
    // limits and budget.
    let mut carried = http::Extensions::new();
    if let Some(budget) = resend.budget {
        carried.insert(budget);
    }
    if let Some(budget) = context.retry_budget() {
        carried.insert(budget.clone());
    }
    let opening_with = Opening {
        authorization: resend.authorization.as_ref(),
        extensions: &carried,
    };
    let id = match renew(session, sent_with, service.clone(), opening_with).await {
        Ok(id) => id,
        Err(reason) => {
            context.refund(&failure);
            record.decide(Decision::new(
                LAYER,
                Verdict::NotRenewed {
                    cause: EXPIRED,
                    reason,
                },
                Some(permission),
            ));
            sessions.ended(session, Some(LOST));
            return None;
        }
    };
    record.decide(Decision::new(
        LAYER,
        Verdict::SentAgain {
            cause: EXPIRED,
            wait: Duration::ZERO,
            retry_after: None,
        },
        Some(permission),
    ));
    tracing::debug!(layer = LAYER, cause = EXPIRED, "sending again");
    Some(id)
}

/// Notes what an answer of a session means for it — its `notifications/initialized` taken, a
/// DELETE that ended it — and names the client's id in it.
fn noted<B>(
    answer: Response<B>,
    sessions: &Sessions,
    session: &Arc<Session>,
    sent_with: &str,
    initialized: bool,
    deleting: bool,
    kept: &Kept,
) -> Response<B> {
    if answer.status().is_success() {
        if initialized {
            *session
                .initialized
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(kept.clone());
        } else if deleting {
            sessions.forget(session);
            sessions.ended(session, None);
        }
    }
    named_for_client(answer, session, sent_with)
}

/// Sends one attempt of the call: recorded as it is handed down, completed when it is answered.
async fn send<S: Sends<ReqB, ResB>, ReqB, ResB>(
    service: &mut S,
    mut request: Request<ReqB>,
    context: &CallContext,
) -> Result<Response<ResB>, Error> {
    let record = context.record();
    let mut handed = Handed::of(record, &request);
    handed.sent();
    let (index, attempt) = context.dispatch(&mut request);
    let result = tracing::Instrument::instrument(service.call(request), attempt)
        .await
        .map_err(Error::from_service);
    context.complete(index, &result);
    result
}

/// Whether a request body is one JSON-RPC message whose method is `method`. A body in which
/// the method's name does not occur is not parsed (a clone of the body is read: for the
/// bodies MCP clients send, a count, not a copy).
async fn is_message<B: Body<Data = Bytes> + Clone>(request: &Request<B>, method: &str) -> bool {
    let Ok(bytes) = ReadToBytes::new(request.body().clone(), READ_LIMIT).await else {
        return false;
    };
    if memchr::memmem::find(&bytes, method.as_bytes()).is_none() {
        return false;
    }
    matches!(
        JsonRpcBody::parse(&bytes, false),
        JsonRpcBody::Single(message) if message.method.as_deref() == Some(method)
    )
}

/// Whether an answer is the MCP server's 404 for a session it does not know: a platform's 404
/// names an AWS error type.
fn is_expired<B>(answer: &Response<B>) -> bool {
    answer.status() == StatusCode::NOT_FOUND && !answer.headers().contains_key(AWS_ERROR_TYPE)
}

/// The answer, its `Mcp-Session-Id` naming the id the client holds where it named `current`.
fn named_for_client<B>(mut answer: Response<B>, session: &Session, current: &str) -> Response<B> {
    if *session.client_id != *current
        && answer
            .headers()
            .get(MCP_SESSION_ID)
            .is_some_and(|v| v.as_bytes() == current.as_bytes())
        && let Ok(value) = HeaderValue::from_str(&session.client_id)
    {
        answer.headers_mut().insert(MCP_SESSION_ID, value);
    }
    answer
}
