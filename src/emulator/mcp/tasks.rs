//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as rmcp 3.11 models it
//! (`src/model/task.rs`, `src/task_manager.rs`): a `slow_job` call answered with a task handle
//! at once, done after [`slow_job_duration`](crate::emulator::EmulatorConfig::slow_job_duration)
//! on tokio's clock, its state read by `tasks/get`.
//!
//! A task lives where it was created, as in a real microVM's own store: in the microVM of the
//! runtime session that created it ([`Holder`]). A request that reaches another runtime session,
//! or the same one's next microVM, does not know it.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::time::Instant;

/// The extension's id, in capabilities.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The poll interval a task handle suggests.
const POLL_INTERVAL_MS: u64 = 100;

/// Where a request arrived: the microVM whose MCP server holds the tasks it creates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The runtime session (`None` at a gateway, which has one MCP server).
    pub(crate) runtime_session: Option<String>,
    /// The serial number of its microVM.
    pub(crate) microvm: u64,
}

/// One task.
#[derive(Debug)]
struct Task {
    holder: Holder,
    /// When it was created, on the wall clock (for its timestamps) and on tokio's.
    created: SystemTime,
    started: Instant,
    duration: Duration,
    /// When `tasks/cancel` stopped it before it was done (wall clock).
    cancelled: Option<SystemTime>,
}

impl Task {
    fn done(&self, now: Instant) -> bool {
        now.duration_since(self.started) >= self.duration
    }
}

/// Every task the emulator's MCP servers hold.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    tasks: HashMap<String, Task>,
}

impl Tasks {
    /// Creates a task that is done after `duration`: its id and its `CreateTaskResult`
    /// (`resultType: "task"`, the task's fields flattened, as rmcp's model serializes it).
    pub(super) fn create(&mut self, holder: Holder, duration: Duration) -> (String, Value) {
        let id = uuid::Uuid::new_v4().to_string();
        let task = Task {
            holder,
            created: SystemTime::now(),
            started: Instant::now(),
            duration,
            cancelled: None,
        };
        let mut handle = fields(&id, &task, "working", task.created);
        handle["resultType"] = json!("task");
        self.tasks.insert(id.clone(), task);
        (id, handle)
    }

    /// The task `id` as the MCP server of `holder` knows it: `None` when it holds no such task.
    fn held(&mut self, id: &str, holder: &Holder) -> Option<&mut Task> {
        self.tasks.get_mut(id).filter(|task| task.holder == *holder)
    }

    /// `tasks/get`: the `GetTaskResult` (`resultType: "complete"`, the detailed task flattened:
    /// `result` once `completed`), or `None` for a task this server does not hold.
    pub(super) fn get(&mut self, id: &str, holder: &Holder, result: Value) -> Option<Value> {
        let now = Instant::now();
        let task = self.held(id, holder)?;
        let mut answer = if let Some(at) = task.cancelled {
            fields(id, task, "cancelled", at)
        } else if task.done(now) {
            let mut completed = fields(id, task, "completed", task.created + task.duration);
            completed["result"] = result;
            completed
        } else {
            fields(id, task, "working", task.created)
        };
        answer["resultType"] = json!("complete");
        Some(answer)
    }

    /// `tasks/update`: nothing to deliver (`slow_job` asks for no input, and unknown keys are
    /// ignored, as rmcp's task manager does); whether this server holds the task.
    pub(super) fn update(&mut self, id: &str, holder: &Holder) -> bool {
        self.held(id, holder).is_some()
    }

    /// `tasks/cancel`: a task not yet done is cancelled; whether this server holds it.
    pub(super) fn cancel(&mut self, id: &str, holder: &Holder) -> bool {
        let now = Instant::now();
        let Some(task) = self.held(id, holder) else {
            return false;
        };
        if task.cancelled.is_none() && !task.done(now) {
            task.cancelled = Some(SystemTime::now());
        }
        true
    }
}

/// A task's own fields (rmcp's `Task`): `ttlMs` null, for the emulator keeps every task as long
/// as its microVM lives.
fn fields(id: &str, task: &Task, status: &str, updated: SystemTime) -> Value {
    json!({
        "taskId": id,
        "status": status,
        "createdAt": iso8601(task.created),
        "lastUpdatedAt": iso8601(updated),
        "ttlMs": null,
        "pollIntervalMs": POLL_INTERVAL_MS,
    })
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
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        let at = |secs: u64, millis: u64| {
            iso8601(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
        assert_eq!(at(1_785_196_800, 0), "2026-07-28T00:00:00.000Z");
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_is_done_after_its_duration_and_known_only_where_it_was_made() {
        let mut tasks = Tasks::default();
        let here = Holder {
            runtime_session: Some("a".into()),
            microvm: 1,
        };
        let (id, handle) = tasks.create(here.clone(), Duration::from_millis(200));
        assert_eq!(handle["resultType"], "task");
        assert_eq!(handle["status"], "working");
        let result = json!({"content": []});
        let poll = |tasks: &mut Tasks, holder: &Holder| tasks.get(&id, holder, result.clone());
        assert_eq!(poll(&mut tasks, &here).unwrap()["status"], "working");
        tokio::time::advance(Duration::from_millis(200)).await;
        let done = poll(&mut tasks, &here).unwrap();
        assert_eq!(done["status"], "completed");
        assert_eq!(done["resultType"], "complete");
        assert_eq!(done["result"], result);
        for elsewhere in [
            Holder {
                runtime_session: Some("b".into()),
                microvm: 1,
            },
            Holder {
                runtime_session: Some("a".into()),
                microvm: 2,
            },
        ] {
            assert_eq!(poll(&mut tasks, &elsewhere), None);
            assert!(!tasks.cancel(&id, &elsewhere));
        }
        // Done: a cancel changes nothing.
        assert!(tasks.cancel(&id, &here));
        assert_eq!(poll(&mut tasks, &here).unwrap()["status"], "completed");
        let (other, _) = tasks.create(here.clone(), Duration::from_millis(200));
        assert!(tasks.cancel(&other, &here));
        tokio::time::advance(Duration::from_millis(500)).await;
        let cancelled = tasks.get(&other, &here, Value::Null).unwrap();
        assert_eq!(cancelled["status"], "cancelled");
        assert!(cancelled.get("result").is_none());
    }
}
