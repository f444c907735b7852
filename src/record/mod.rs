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

mod attempt;
mod error_type;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use http::Extensions;

use crate::contract::Classified;

pub use attempt::{Attempt, Decision, Effect, Outcome, Verdict};
pub use error_type::{ErrorType, aws_error_type};

/// The record of every attempt one call made. Shared: clones see the same attempts.
///
/// Its [`Display`](fmt::Display) prints one line per attempt, for logs.
#[derive(Clone, Default)]
pub struct AttemptRecord {
    inner: Arc<Mutex<Attempts>>,
}

#[derive(Default)]
struct Attempts {
    /// The first attempt held in place (most calls have one).
    list: smallvec::SmallVec<[Entry; 1]>,
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

    /// The layer handed it down to itself (the signer opens the attempt before it signs):
    /// holds the attempt `extensions` now mark, so that stopping before sending records why
    /// on it.
    pub(crate) fn hold(&mut self, extensions: &http::Extensions) {
        if let Some(mark) = extensions.get::<Dispatch>() {
            self.index = Some(*mark);
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
                decisions: smallvec::SmallVec::new(),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{HeaderMap, StatusCode};

    use super::*;
    use crate::rule::Permission;

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
}
