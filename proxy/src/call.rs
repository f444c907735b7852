//! One call's bounds, shared by the stack that enforces them and the relays that report them:
//! how long a call may take (`--timeout`) and its answer may send nothing (`--idle-timeout`),
//! the deadline an answer carries, and the error of a call cut by it.

use std::time::Duration;

use agentcore_tower::AttemptRecord;

use crate::cli::shown_duration;

/// The body of the stack's answers: the server's, the answer the stack writes to a call the
/// server made a task, or the bridge's own.
pub type ResBody = agentcore_tower::tasks::TaskBody<agentcore_tower::bridge::BridgeBody<InnerBody>>;

/// The body of the answers of the stack below the task layer.
pub type InnerBody = agentcore_tower::RecommendedBody<hyper::body::Incoming>;

/// How long a call may take (`--timeout`) and its answer may send nothing (`--idle-timeout`),
/// as the command line gives them.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub total: Duration,
    pub idle: Duration,
}

/// When a call's `--timeout` runs out, in its answer's extensions: the relays stop reading the
/// answer then.
#[derive(Clone, Copy, Debug)]
pub struct CallDeadline(pub tokio::time::Instant);

/// A call cut by `--timeout` before its answer came: the record of its attempts (the one in
/// flight left "sent, no answer yet", then dropped).
#[derive(Debug)]
pub struct TimedOut {
    pub total: Duration,
    pub record: AttemptRecord,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no answer within {}", shown_duration(self.total))
    }
}

impl std::error::Error for TimedOut {}
