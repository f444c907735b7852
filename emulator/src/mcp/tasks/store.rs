//! The tasks the emulator's MCP servers hold, and their lifecycle: each task's status at the
//! moment it is read, on the jobs clock.
//!
//! **The jobs clock.** A task's elapsed time is `tokio::time::Instant::now() - started` plus
//! whatever [`Tasks::advance`] (the emulator's `advance_jobs`) added since it started: a test
//! on a paused clock moves it with `tokio::time::advance`, and a test whose client runs in real
//! time (a child process) moves it with `advance_jobs`. Every time a task shows
//! (`lastUpdatedAt`) is its creation on the wall clock plus its elapsed time on this clock.
//!
//! A task's status is settled lazily, when a request reads it: a job that reached its half (and
//! asks for input) or its end did so at that exact moment of its clock, whenever it is read.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::time::Instant;

/// The key of `long_job`'s one input request: unique over the task's life, as the extension
/// requires of `inputRequests` keys.
pub(crate) const APPROVE: &str = "approve-1";

/// Where a request arrived: the microVM whose MCP server holds the tasks it creates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The runtime session (`None` at a gateway, which has one MCP server).
    pub(crate) runtime_session: Option<String>,
    /// The serial number of its microVM.
    pub(crate) microvm: u64,
}

/// What a task runs, fixed when it is created.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// The tool, as the audit names it.
    pub(crate) tool: &'static str,
    /// How long it works (its clock stops while it waits for input).
    pub(crate) length: Duration,
    /// Whether it asks the user to go on at half its length.
    pub(crate) ask: bool,
    /// Whether it ends in a JSON-RPC error (`failed`) rather than a result.
    pub(crate) fail: bool,
    /// The result it completes with.
    pub(crate) result: Value,
    /// The result it completes with when the user declines to go on.
    pub(crate) declined: Value,
    /// Its `ttlMs` (`None`: null, kept as long as its microVM lives).
    pub(crate) ttl: Option<Duration>,
    /// Its `pollIntervalMs`.
    pub(crate) poll_interval: Duration,
}

/// Why a task is not there to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// This server never held it (another runtime session's, an earlier microVM's, or made up).
    NotFound,
    /// Its TTL passed before it was done: it is gone now.
    Expired,
}

/// Where a task is in its life.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Working,
    /// Waiting for the user since this moment of its clock; the clock of its work stops.
    Waiting {
        since: Duration,
    },
    Completed(Value),
    Failed,
    Cancelled,
}

/// One task.
#[derive(Debug)]
struct Task {
    holder: Holder,
    job: Job,
    /// When it was created, on the wall clock (for its timestamps) and on tokio's.
    created: SystemTime,
    started: Instant,
    /// What the jobs clock had been advanced by when it started.
    advanced_at_start: Duration,
    phase: Phase,
    /// When its status last changed, on its clock.
    updated: Duration,
    /// How long it waited for input, in waits that are over.
    waited: Duration,
    /// Whether it asked for input already (it asks once).
    asked: bool,
}

impl Task {
    /// Its elapsed time on the jobs clock.
    fn elapsed(&self, now: Instant, advanced: Duration) -> Duration {
        now.duration_since(self.started) + advanced.saturating_sub(self.advanced_at_start)
    }

    fn terminal(&self) -> bool {
        matches!(
            self.phase,
            Phase::Completed(_) | Phase::Failed | Phase::Cancelled
        )
    }

    fn moves_to(&mut self, phase: Phase, at: Duration) {
        self.phase = phase;
        self.updated = at;
    }

    /// Brings its status up to `elapsed`: the half where it asks, the end of its work.
    fn settle(&mut self, elapsed: Duration) {
        if self.phase != Phase::Working {
            return;
        }
        let worked = elapsed.saturating_sub(self.waited);
        let half = self.job.length / 2;
        if self.job.ask && !self.asked && worked >= half {
            self.asked = true;
            let since = half + self.waited;
            self.moves_to(Phase::Waiting { since }, since);
        } else if worked >= self.job.length {
            let end = if self.job.fail {
                Phase::Failed
            } else {
                Phase::Completed(self.job.result.clone())
            };
            self.moves_to(end, self.job.length + self.waited);
        }
    }

    /// Whether its TTL passed, at `elapsed`, before it was done.
    fn expired(&self, elapsed: Duration) -> bool {
        self.job
            .ttl
            .is_some_and(|ttl| elapsed >= ttl && !(self.terminal() && self.updated <= ttl))
    }

    /// The user's answer to its input request: the rest of the work runs, or it ends declined.
    fn answered(&mut self, answer: &Value, elapsed: Duration) {
        let Phase::Waiting { since } = self.phase else {
            return;
        };
        let proceed = answer.get("action").and_then(Value::as_str) == Some("accept")
            && answer.pointer("/content/proceed") == Some(&Value::Bool(true));
        if proceed {
            self.waited += elapsed.saturating_sub(since);
            self.moves_to(Phase::Working, elapsed);
        } else {
            let declined = Phase::Completed(self.job.declined.clone());
            self.moves_to(declined, elapsed);
        }
    }

    /// Its detailed task (the extension's `DetailedTask`): its fields, and what its status
    /// carries.
    fn detailed(&self, id: &str) -> Value {
        let mut task = json!({
            "taskId": id,
            "status": self.status(),
            "createdAt": iso8601(self.created),
            "lastUpdatedAt": iso8601(self.created + self.updated),
            "ttlMs": self.job.ttl.map(|ttl| ttl.as_millis()),
            "pollIntervalMs": self.job.poll_interval.as_millis(),
        });
        match &self.phase {
            Phase::Waiting { .. } => task["inputRequests"] = input_requests(),
            Phase::Completed(result) => task["result"] = result.clone(),
            Phase::Failed => {
                task["statusMessage"] = json!(format!("{} failed at its end", self.job.tool));
                task["error"] =
                    json!({"code": -32603, "message": format!("{} failed", self.job.tool)});
            }
            Phase::Working | Phase::Cancelled => {}
        }
        task
    }

    fn status(&self) -> &'static str {
        match self.phase {
            Phase::Working => "working",
            Phase::Waiting { .. } => "input_required",
            Phase::Completed(_) => "completed",
            Phase::Failed => "failed",
            Phase::Cancelled => "cancelled",
        }
    }
}

/// `long_job`'s input request at its half: an `elicitation/create` form asking to go on.
fn input_requests() -> Value {
    json!({APPROVE: {"method": "elicitation/create", "params": {
        "mode": "form",
        "message": "long_job is half done: go on?",
        "requestedSchema": {
            "type": "object",
            "properties": {"proceed": {"type": "boolean"}},
            "required": ["proceed"],
        },
    }}})
}

/// Every task the emulator's MCP servers hold, and the jobs clock's advance.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    tasks: HashMap<String, Task>,
    /// How far [`advance`](Self::advance) moved the jobs clock, in all.
    advanced: Duration,
}

impl Tasks {
    /// Moves the clock of every task forward by `by`.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.advanced = self.advanced.saturating_add(by);
    }

    /// Creates a task for `job`, held by `holder`: its id and its `CreateTaskResult`
    /// (`resultType: "task"`, the task's fields flattened).
    pub(crate) fn create(&mut self, holder: Holder, job: Job) -> (String, Value) {
        let id = uuid::Uuid::new_v4().to_string();
        let task = Task {
            holder,
            job,
            created: SystemTime::now(),
            started: Instant::now(),
            advanced_at_start: self.advanced,
            phase: Phase::Working,
            updated: Duration::ZERO,
            waited: Duration::ZERO,
            asked: false,
        };
        let mut handle = task.detailed(&id);
        handle["resultType"] = json!("task");
        self.tasks.insert(id.clone(), task);
        (id, handle)
    }

    /// The task `id` as the MCP server of `holder` knows it now, settled to this moment, with
    /// its elapsed time. A task whose TTL passed before it was done is discarded.
    fn held(&mut self, id: &str, holder: &Holder) -> Result<(&mut Task, Duration), Missing> {
        let (now, advanced) = (Instant::now(), self.advanced);
        let Entry::Occupied(mut entry) = self.tasks.entry(id.to_owned()) else {
            return Err(Missing::NotFound);
        };
        if entry.get().holder != *holder {
            return Err(Missing::NotFound);
        }
        let task = entry.get_mut();
        let elapsed = task.elapsed(now, advanced);
        task.settle(elapsed);
        if task.expired(elapsed) {
            entry.remove();
            return Err(Missing::Expired);
        }
        Ok((entry.into_mut(), elapsed))
    }

    /// `tasks/get`: the `GetTaskResult` (`resultType: "complete"`, the detailed task flattened).
    pub(crate) fn get(&mut self, id: &str, holder: &Holder) -> Result<Value, Missing> {
        let (task, _) = self.held(id, holder)?;
        let mut answer = task.detailed(id);
        answer["resultType"] = json!("complete");
        Ok(answer)
    }

    /// `tasks/update`: delivers the answer to the task's outstanding input request, if
    /// `responses` has one; other keys are ignored, as the extension says a server should.
    pub(crate) fn update(
        &mut self,
        id: &str,
        holder: &Holder,
        responses: &Value,
    ) -> Result<(), Missing> {
        let (task, elapsed) = self.held(id, holder)?;
        if let Some(answer) = responses.get(APPROVE) {
            task.answered(answer, elapsed);
        }
        Ok(())
    }

    /// `tasks/cancel`: a task not yet terminal is cancelled.
    pub(crate) fn cancel(&mut self, id: &str, holder: &Holder) -> Result<(), Missing> {
        let (task, elapsed) = self.held(id, holder)?;
        if !task.terminal() {
            task.moves_to(Phase::Cancelled, elapsed);
        }
        Ok(())
    }
}

/// `2026-11-30T12:34:56.789Z`: an ISO 8601 UTC timestamp, to the millisecond.
fn iso8601(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's `civil_from_days`).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
pub(super) fn timestamp(time: SystemTime) -> String {
    iso8601(time)
}
