//! The attempt record: what was sent, what came back, who decided what, on what assumption.
//!
//! One record follows one call through the stack. The outermost of this crate's layers that
//! finds no record in the request's extensions creates one and puts it there; every layer below
//! appends to the same record (it is shared: cloning it is cheap and clones see the same
//! attempts). The creator hands the finished record back in the response's extensions, and
//! every error a layer returns carries it too ([`Error::record`](crate::Error::record)).
//!
//! The record is evidence, not a guess: the effect of every attempt stays
//! [`Effect::Unknown`]. When a layer sends a request again after a refusal, it records the
//! assumption it acted on ("rejected before execution") and who granted it — never a claim
//! that the refused attempt ran nothing.
//!
//! ```
//! use agentcore_tower::AttemptRecord;
//! # use http::{Request, Response};
//! # fn read(response: Response<()>) {
//! if let Some(record) = AttemptRecord::of_response(&response) {
//!     println!("{} attempt(s):\n{record}", record.len());
//! }
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::{Extensions, HeaderMap, StatusCode};

use crate::contract::{Classified, ErrorTypeHeader, Form, PlatformError, REQUIRED_ACCEPT};
use crate::rule::{FailureKind, Permission};

/// The record of every attempt one call made. Shared: clones see the same attempts.
///
/// Its [`Display`](fmt::Display) prints one line per attempt, for logs.
#[derive(Clone, Default)]
pub struct AttemptRecord {
    inner: Arc<Mutex<Attempts>>,
}

#[derive(Default)]
struct Attempts {
    list: Vec<Entry>,
    last_token: u64,
}

/// An attempt, and the token of its latest hand-down, which the layer below may take (0: none).
/// Side by side: one list to grow per call, not two.
struct Entry {
    attempt: Attempt,
    token: u64,
}

impl std::ops::Deref for Entry {
    type Target = Attempt;

    fn deref(&self) -> &Attempt {
        &self.attempt
    }
}

impl std::ops::DerefMut for Entry {
    fn deref_mut(&mut self) -> &mut Attempt {
        &mut self.attempt
    }
}

/// The attempt a request handed down by one of the crate's layers belongs to, in its
/// extensions: the layer below that meets it takes that attempt as its own first one rather
/// than counting another — once: a copy of the request (a layer in between that sends it
/// twice) is an attempt of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dispatch {
    index: usize,
    token: u64,
}

impl AttemptRecord {
    /// Whether `other` is this very record (a clone of it), not one with equal attempts.
    pub(crate) fn is(&self, other: &AttemptRecord) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// The record of a response that went through one of this crate's layers.
    pub fn of_response<B>(response: &http::Response<B>) -> Option<&AttemptRecord> {
        response.extensions().get::<AttemptRecord>()
    }

    /// The record carried in a set of extensions (a request's or a response's).
    pub fn of_extensions(extensions: &Extensions) -> Option<&AttemptRecord> {
        extensions.get::<AttemptRecord>()
    }

    /// A copy of the attempts recorded so far, in the order they were sent.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.lock().list.iter().map(|e| e.attempt.clone()).collect()
    }

    /// Whether the latest attempt exists and carried no platform error (read in place: no copy
    /// of the attempts).
    pub(crate) fn latest_is_clear(&self) -> bool {
        self.lock()
            .list
            .last()
            .is_some_and(|a| a.platform_error().is_none())
    }

    /// How many attempts were recorded.
    pub fn len(&self) -> usize {
        self.lock().list.len()
    }

    /// Whether no attempt was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().list.is_empty()
    }

    /// The attempt a layer sends `request` as: the one a layer above handed it down as, when
    /// that one is still unanswered and no other layer took it (a layer in between may have
    /// sent copies), else a new one, "sent, no answer yet". Marks `request` with it, for the
    /// layers below. Returns its index.
    pub(crate) fn dispatch<B>(&self, request: &mut http::Request<B>) -> usize {
        let handed = request.extensions().get::<Dispatch>().copied();
        let dispatch = {
            let mut attempts = self.lock();
            let index = match handed {
                Some(d) if attempts.is_open(d) => d.index,
                _ => attempts.push_pending(),
            };
            attempts.last_token += 1;
            let token = attempts.last_token;
            attempts.list[index].token = token;
            Dispatch { index, token }
        };
        // In place when a layer above marked it: no new box for each layer of the stack.
        match request.extensions_mut().get_mut::<Dispatch>() {
            Some(mark) => *mark = dispatch,
            None => {
                request.extensions_mut().insert(dispatch);
            }
        }
        dispatch.index
    }

    /// Records an attempt that was stopped before it was sent; returns its index.
    pub(crate) fn not_sent(&self, why: String) -> usize {
        let mut attempts = self.lock();
        let index = attempts.push_pending();
        attempts.list[index].outcome = Outcome::NotSent(why);
        index
    }

    /// Records the attempt handed down as `handed` as not sent, unless a layer took it or it
    /// was answered. Whether it did.
    fn abandon(&self, handed: Dispatch, why: impl FnOnce() -> String) -> bool {
        let mut attempts = self.lock();
        let open = attempts.is_open(handed);
        if open {
            attempts.list[handed.index].token = 0;
            attempts.list[handed.index].outcome = Outcome::NotSent(why());
        }
        open
    }

    /// Notes the platform error the answer of the attempt at `index` carried, unless noted.
    pub(crate) fn note_platform(&self, index: usize, platform: Option<Classified>) {
        if let (Some(attempt), Some(platform)) = (self.lock().list.get_mut(index), platform)
            && attempt.platform.is_none()
        {
            attempt.platform = Some(platform);
        }
    }

    /// Completes the attempt at `index` with what came back, unless a layer below already did.
    pub(crate) fn complete(&self, index: usize, outcome: impl FnOnce() -> Outcome) {
        if let Some(attempt) = self.lock().list.get_mut(index)
            && attempt.outcome == Outcome::Pending
        {
            attempt.outcome = outcome();
        }
    }

    /// Appends a layer's decision to the latest attempt.
    pub(crate) fn decide(&self, decision: Decision) {
        if let Some(last) = self.lock().list.last_mut() {
            last.decisions.push(decision);
        }
    }

    /// Marks the latest attempt delivered by `layer` unless a layer already said why it was.
    /// An attempt that was never sent is not: what the call ends with is an error of its own,
    /// and the attempt's outcome says why nothing went out.
    pub(crate) fn deliver_if_undecided(&self, layer: &'static str) {
        if let Some(last) = self.lock().list.last_mut()
            && !matches!(last.outcome, Outcome::NotSent(_))
            && !last.decisions.iter().any(|d| d.verdict.is_delivered())
        {
            last.decisions
                .push(Decision::new(layer, Verdict::Delivered, None));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Attempts> {
        // A panic elsewhere while holding the lock cannot leave a Vec half-written in a way
        // that matters here; keep reporting rather than propagate the poison.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The attempt a layer was handed with a request and has not sent on yet. Dropped (the call
/// was dropped first) or given up on, it is recorded as not sent — unless another layer took it.
pub(crate) struct Handed {
    record: AttemptRecord,
    index: Option<Dispatch>,
}

impl Handed {
    /// What `request` was handed down as, if a layer above sent it.
    pub(crate) fn of<B>(record: &AttemptRecord, request: &http::Request<B>) -> Self {
        Self {
            record: record.clone(),
            index: request.extensions().get::<Dispatch>().copied(),
        }
    }

    /// The layer sends it on ([`AttemptRecord::dispatch`]).
    pub(crate) fn sent(&mut self) {
        self.index = None;
    }

    /// The layer stops before sending: records why, on the attempt it was handed, or on an
    /// attempt of its own.
    pub(crate) fn not_sent(&mut self, why: String) {
        let mut why = Some(why);
        let taken = self
            .index
            .take()
            .is_some_and(|i| self.record.abandon(i, || why.take().unwrap_or_default()));
        if let Some(why) = why.filter(|_| !taken) {
            self.record.not_sent(why);
        }
    }
}

impl Drop for Handed {
    fn drop(&mut self) {
        if let Some(index) = self.index.take() {
            self.record.abandon(index, || {
                "the call was dropped before it was sent on".to_owned()
            });
        }
    }
}

impl Attempts {
    /// Whether `handed` is an unanswered attempt's latest hand-down, which nobody took yet.
    fn is_open(&self, handed: Dispatch) -> bool {
        handed.token != 0
            && self
                .list
                .get(handed.index)
                .is_some_and(|e| e.token == handed.token && e.outcome == Outcome::Pending)
    }

    fn push_pending(&mut self) -> usize {
        let number = u32::try_from(self.list.len() + 1).unwrap_or(u32::MAX);
        self.list.push(Entry {
            attempt: Attempt {
                number,
                outcome: Outcome::Pending,
                platform: None,
                decisions: Vec::new(),
            },
            token: 0,
        });
        self.list.len() - 1
    }
}

impl fmt::Debug for AttemptRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.lock().list.iter().map(|e| &e.attempt))
            .finish()
    }
}

impl fmt::Display for AttemptRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let attempts = self.lock();
        for (i, attempt) in attempts.list.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            fmt::Display::fmt(&attempt.attempt, f)?;
        }
        Ok(())
    }
}

/// One attempt: a request handed to the service below (or stopped before it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    outcome: Outcome,
    platform: Option<Classified>,
    decisions: Vec<Decision>,
}

impl Attempt {
    /// Its number in the call, from 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// What came back ([`Outcome::Pending`] while nothing has).
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The error of the platform's table its answer carried, in either form (see
    /// [`contract`](crate::contract)), when one of the crate's retry layers read it.
    pub fn platform_error(&self) -> Option<&Classified> {
        self.platform.as_ref()
    }

    /// What each layer that had an opinion decided about it, innermost first.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// Whether it was sent again by some layer.
    pub fn was_sent_again(&self) -> bool {
        self.decisions
            .iter()
            .any(|d| matches!(d.verdict, Verdict::SentAgain { .. }))
    }

    /// What the attempt did on the server: always [`Effect::Unknown`]. A client cannot know;
    /// the [`Permission`] of a re-send says what was assumed instead.
    pub fn effect(&self) -> Effect {
        Effect::Unknown
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {}", self.number, self.outcome)?;
        match &self.platform {
            Some(platform) if matches!(platform.form(), Form::JsonRpc(_)) => {
                write!(f, " ({platform})")?;
            }
            // The head form: the status and the error type are shown already — only the 406
            // says nothing by itself, and only the contract gives it a meaning.
            Some(platform) if platform.error() == PlatformError::RequestUnacceptable => {
                write!(
                    f,
                    " ({} (the Accept header must be `{REQUIRED_ACCEPT}`))",
                    platform.error()
                )?;
            }
            _ => {}
        }
        let mut sep = " -> ";
        for decision in &self.decisions {
            write!(f, "{sep}{decision}")?;
            sep = "; ";
        }
        write!(f, "; effect {}", self.effect())
    }
}

/// What came back from one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The attempt was handed to the service below and nothing has come back (yet). A call
    /// that ends this way — a deadline outside the stack, a cancellation — may still be running
    /// on the server.
    Pending,
    /// A response with this status.
    Response {
        /// The HTTP status.
        status: StatusCode,
        /// The service's error type, from `x-amzn-errortype`.
        error_type: ErrorType,
    },
    /// The service below returned an error instead of a response.
    Failure(FailureKind),
    /// The attempt was stopped before anything was sent (e.g. its send gate refused it).
    NotSent(String),
}

impl Outcome {
    /// The outcome for a response head: its status and AWS error type.
    pub fn of_response(status: StatusCode, headers: &HeaderMap) -> Self {
        Outcome::Response {
            status,
            error_type: ErrorType::of(headers),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pending => f.write_str("sent, no answer yet"),
            Outcome::Response {
                status,
                error_type: ErrorType::Absent,
            } => write!(f, "HTTP {}", status.as_u16()),
            Outcome::Response { status, error_type } => {
                write!(f, "HTTP {} {error_type}", status.as_u16())
            }
            Outcome::Failure(kind) => write!(f, "failed: {kind}"),
            Outcome::NotSent(why) => write!(f, "not sent: {why}"),
        }
    }
}

/// What one layer decided about one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    layer: &'static str,
    verdict: Verdict,
    permission: Option<Permission>,
}

impl Decision {
    pub(crate) fn new(
        layer: &'static str,
        verdict: Verdict,
        permission: Option<Permission>,
    ) -> Self {
        Self {
            layer,
            verdict,
            permission,
        }
    }

    /// The layer that decided (`"throttle"`, `"session_busy"`, `"replay_guard"`, `"sigv4"`,
    /// `"mcp-endpoint"`).
    pub fn layer(&self) -> &'static str {
        self.layer
    }

    /// What it decided.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// On whose permission and assumption a re-send went ahead (or would have, when the budget
    /// stopped it).
    pub fn permission(&self) -> Option<&Permission> {
        self.permission.as_ref()
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.layer, self.verdict)?;
        if let Some(p) = &self.permission {
            write!(f, " ({p})")?;
        }
        Ok(())
    }
}

/// What a layer decided about an attempt: sent again, or delivered — and when delivered although
/// a layer wanted to send again, what stopped it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The request was sent again after this wait.
    SentAgain {
        /// Why the layer wanted to send again (e.g. `"HTTP 429"`).
        cause: &'static str,
        /// How long it waited first.
        wait: Duration,
        /// What the server asked for in `Retry-After`, when it did and was honoured.
        retry_after: Option<Duration>,
    },
    /// The answer (or error) was handed up as it came: no layer wanted to send it again.
    Delivered,
    /// A layer wanted to send again, but the call had sent its maximum number of attempts.
    AttemptsExhausted {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// The attempt cap that was reached.
        max_attempts: u32,
    },
    /// A layer wanted to send again, but the wait would have passed the call's ceiling (or its
    /// deadline).
    WaitCeiling {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// The wait it would have needed.
        wait: Duration,
        /// What was left of the ceiling.
        remaining: Duration,
    },
    /// A layer wanted to send again, but the retry budget shared with the other calls did not
    /// have the re-send's cost (see [`RetryBudget`](crate::RetryBudget)).
    BudgetExhausted {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// What the re-send would have cost.
        cost: u32,
        /// The tokens left.
        left: u32,
    },
    /// A layer wanted to send again, but the replay rule refused it.
    Forbidden {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// Why the rule refused it.
        reason: String,
    },
    /// The call was dropped before it ended — a deadline or a cancellation outside the
    /// stack — while this attempt was in flight, or while a re-send was waited for.
    CallDropped,
    /// The MCP session had expired, and a new one could not be opened (see
    /// [`McpSessionRecoveryLayer`](crate::McpSessionRecoveryLayer)): the answer was handed up.
    NotRenewed {
        /// Why the layer wanted to send again.
        cause: &'static str,
        /// Why no new session was opened.
        reason: String,
    },
}

impl Verdict {
    /// Whether the answer was handed up (every verdict but `SentAgain` and `CallDropped`).
    pub fn is_delivered(&self) -> bool {
        !matches!(self, Verdict::SentAgain { .. } | Verdict::CallDropped)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::SentAgain {
                cause,
                wait,
                retry_after,
            } => {
                write!(f, "{cause}, sent again after {}", Millis(*wait))?;
                if let Some(ra) = retry_after {
                    write!(f, " (Retry-After {})", Millis(*ra))?;
                }
                Ok(())
            }
            Verdict::Delivered => f.write_str("delivered"),
            Verdict::AttemptsExhausted {
                cause,
                max_attempts,
            } => write!(
                f,
                "delivered ({cause}, but the cap of {max_attempts} attempts was reached)"
            ),
            Verdict::WaitCeiling {
                cause,
                wait,
                remaining,
            } => write!(
                f,
                "delivered ({cause}, but a wait of {} passes the ceiling ({} left))",
                Millis(*wait),
                Millis(*remaining)
            ),
            Verdict::BudgetExhausted { cause, cost, left } => write!(
                f,
                "delivered ({cause}, but the retry budget is exhausted: {left} tokens left, {cost} needed)"
            ),
            Verdict::Forbidden { cause, reason } => {
                write!(
                    f,
                    "delivered ({cause}, but a re-send is forbidden: {reason})"
                )
            }
            Verdict::CallDropped => {
                f.write_str("call dropped before it ended (a deadline or cancellation outside)")
            }
            Verdict::NotRenewed { cause, reason } => {
                write!(f, "delivered ({cause}, but no new session: {reason})")
            }
        }
    }
}

/// What an attempt did on the server. A client cannot know, so it is always `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Effect {
    /// Nobody on the client side knows whether the attempt ran.
    Unknown,
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown")
    }
}

/// A duration shown to the millisecond: `850ms`, `1s`, `1.25s`.
struct Millis(Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms < 1000 {
            write!(f, "{ms}ms")
        } else if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            let frac = format!("{:03}", ms % 1000);
            write!(f, "{}.{}s", ms / 1000, frac.trim_end_matches('0'))
        }
    }
}

/// The AWS error type of a response, as the official SDK reads `x-amzn-errortype`: the value up
/// to its first `:` (AWS appends `:namespace`), without any `namespace#` prefix — when what is
/// left looks like an AWS error type name: an ASCII capital letter, then letters, digits or `_`,
/// 128 characters at most (`ThrottlingException`, `InternalFailure`). Anything else counts as
/// absent: the header comes from the server, and is never taken at its word.
///
/// ```
/// use agentcore_tower::record::aws_error_type;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), Some("ThrottlingException"));
/// headers.insert("x-amzn-errortype", "com.amazonaws#RetryableConflictException".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), Some("RetryableConflictException"));
/// // A signature's hex, an echoed token: not an error type.
/// headers.insert("x-amzn-errortype", "3f2a9c0d41b7e6f85a2c9d0e1f3b4a5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), None);
/// ```
pub fn aws_error_type(headers: &HeaderMap) -> Option<&str> {
    ErrorTypeHeader::read(headers).name()
}

/// A response's AWS error type, as the record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorType {
    /// No `x-amzn-errortype` header.
    Absent,
    /// An error type name (see [`aws_error_type`]).
    Named(String),
    /// A header whose value does not look like an error type name: never recorded verbatim,
    /// since it comes from the server (and could echo anything it received).
    Unrecognised,
}

impl ErrorType {
    /// The error type of a response head.
    pub fn of(headers: &HeaderMap) -> Self {
        match ErrorTypeHeader::read(headers) {
            ErrorTypeHeader::Absent => ErrorType::Absent,
            ErrorTypeHeader::Named(name) => ErrorType::Named(name.to_owned()),
            ErrorTypeHeader::Unrecognised => ErrorType::Unrecognised,
        }
    }

    /// The name, when it is one.
    pub fn name(&self) -> Option<&str> {
        match self {
            ErrorType::Named(name) => Some(name),
            ErrorType::Absent | ErrorType::Unrecognised => None,
        }
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorType::Absent => Ok(()),
            ErrorType::Named(name) => f.write_str(name),
            ErrorType::Unrecognised => f.write_str("(unrecognised error type)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_per_attempt() {
        use crate::rule::{Assumption, By};
        let record = AttemptRecord::new();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amzn-errortype",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"
                .parse()
                .unwrap(),
        );
        let mut request = http::Request::new(());
        let first = record.dispatch(&mut request);
        let mut below = http::Request::new(());
        *below.extensions_mut() = request.extensions().clone();
        assert_eq!(
            record.dispatch(&mut below),
            first,
            "the attempt handed down is taken"
        );
        let mut copy = http::Request::new(());
        *copy.extensions_mut() = request.extensions().clone();
        let dropped = Handed::of(&record, &copy);
        assert_eq!(
            record.dispatch(&mut copy),
            1,
            "a copy of it is an attempt of its own"
        );
        drop(dropped);
        let mut never_sent = http::Request::new(());
        *never_sent.extensions_mut() = copy.extensions().clone();
        drop(Handed::of(&record, &never_sent));
        assert_eq!(
            record.to_string(),
            "#1 sent, no answer yet; effect unknown\n\
             #2 not sent: the call was dropped before it was sent on; effect unknown"
        );
        let record = AttemptRecord::new();
        let first = record.dispatch(&mut http::Request::new(()));
        record.complete(first, || {
            Outcome::of_response(StatusCode::TOO_MANY_REQUESTS, &headers)
        });
        record.complete(first, || unreachable!("completed once, by the innermost"));
        record.decide(Decision::new(
            "throttle",
            Verdict::SentAgain {
                cause: "HTTP 429",
                wait: Duration::from_secs(1),
                retry_after: Some(Duration::from_secs(1)),
            },
            Some(Permission::new(
                By::Adapter,
                Assumption::RejectedBeforeExecution,
            )),
        ));
        let mut answered = http::Request::new(());
        answered.extensions_mut().insert(Dispatch {
            index: first,
            token: 1,
        });
        let second = record.dispatch(&mut answered);
        assert_eq!(second, 1, "an answered attempt is never taken");
        record.complete(second, || {
            Outcome::of_response(StatusCode::OK, &HeaderMap::new())
        });
        record.deliver_if_undecided("throttle");
        record.deliver_if_undecided("replay_guard");
        assert_eq!(
            record.to_string(),
            "#1 HTTP 429 ThrottlingException -> throttle: HTTP 429, sent again after 1s \
             (Retry-After 1s) (by adapter, assumes rejected-before-execution); effect unknown\n\
             #2 HTTP 200 -> throttle: delivered; effect unknown"
        );
        assert_eq!(record.len(), 2);
        assert!(record.attempts()[0].was_sent_again());
        assert_eq!(record.attempts()[1].effect(), Effect::Unknown);
    }

    #[test]
    fn millis() {
        let m = |ms| Millis(Duration::from_millis(ms)).to_string();
        assert_eq!(m(0), "0ms");
        assert_eq!(m(850), "850ms");
        assert_eq!(m(1000), "1s");
        assert_eq!(m(1250), "1.25s");
        assert_eq!(m(86_400_000), "86400s");
        assert_eq!(Millis(Duration::from_micros(232_192)).to_string(), "232ms");
    }

    #[test]
    fn error_type_is_the_part_before_the_colon() {
        let mut h = HeaderMap::new();
        assert_eq!(aws_error_type(&h), None);
        h.insert(
            "x-amzn-errortype",
            "RetryableConflictException:ns".parse().unwrap(),
        );
        assert_eq!(aws_error_type(&h), Some("RetryableConflictException"));
        h.insert("x-amzn-errortype", "A B".parse().unwrap());
        assert_eq!(aws_error_type(&h), None);
        assert_eq!(ErrorType::of(&h), ErrorType::Unrecognised);
        h.insert("x-amzn-errortype", ":ns".parse().unwrap());
        assert_eq!(aws_error_type(&h), None);
        for not_a_name in [
            "3f2a9c0d41b7e6f85a2c9d0e1f3b4a5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a",
            "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJH",
            "throttlingException",
            "[redacted]",
        ] {
            h.insert("x-amzn-errortype", not_a_name.parse().unwrap());
            assert_eq!(ErrorType::of(&h), ErrorType::Unrecognised, "{not_a_name}");
            let outcome = Outcome::of_response(StatusCode::OK, &h).to_string();
            assert_eq!(outcome, "HTTP 200 (unrecognised error type)");
        }
        assert_eq!(ErrorType::of(&HeaderMap::new()), ErrorType::Absent);
    }
}
