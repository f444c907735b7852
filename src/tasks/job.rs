//! One task polled to its end on the client's behalf: `tasks/get` at the server's interval,
//! life for the client while it works, the server's requests put to the client when it needs
//! input, and the client's answer once it has ended.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::body::Watch;
use super::client::Client;
use super::request::{self, Template};
use super::table::Table;
use super::wait::wait_until;
use super::wire::{self, Status, Task};
use crate::sends::Sends;

/// How the job is bounded.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// The longest the job may run, from the task's creation; `None`: the task's TTL, or
    /// [`DEFAULT_JOB_LIMIT`](super::DEFAULT_JOB_LIMIT).
    pub(super) job: Option<Duration>,
    /// The poll interval when the server suggests none.
    pub(super) poll_interval: Duration,
    /// How many polls in a row may fail before the client is told.
    pub(super) poll_failures: u32,
    /// How long one request about the task may take.
    pub(super) poll_timeout: Duration,
}

/// What a job is, apart from the client it answers: kept while it waits for a 2026-07-28
/// client's input, and taken up again by the client's next request.
#[derive(Clone)]
pub(super) struct JobState {
    pub(super) task: Task,
    pub(super) template: Template,
    /// When the task was created, and how long the job may run from then.
    started: Instant,
    limit: Duration,
    /// The keys of the server's requests the client has answered (a poll may show them
    /// outstanding until the server has taken the answers in).
    answered: HashSet<String>,
    /// Polls made: the progress reported.
    polls: u64,
}

impl JobState {
    pub(super) fn new(task: Task, template: Template, limits: &Limits) -> Self {
        let limit = limits.job.or(task.ttl).unwrap_or(super::DEFAULT_JOB_LIMIT);
        Self {
            task,
            template,
            started: Instant::now(),
            limit,
            answered: HashSet::new(),
            polls: 0,
        }
    }

    /// When the job's limit passes.
    pub(super) fn deadline(&self) -> Instant {
        self.started + self.limit
    }

    /// Sends `tasks/update` with the client's answers through `service` (writing `record`,
    /// when given): whether the server acknowledged it. The keys answered are not asked again.
    pub(super) async fn send_update<S, ReqB, ResB>(
        &mut self,
        service: &mut S,
        responses: Map<String, Value>,
        record: Option<crate::record::AttemptRecord>,
        timeout: Duration,
    ) -> Result<(), String>
    where
        S: Sends<ReqB, ResB>,
        ReqB: From<Bytes>,
        ResB: Body<Data = Bytes>,
    {
        let id = format!("{}update/{}", super::table::PREFIX, self.polls);
        let keys: Vec<String> = responses.keys().cloned().collect();
        let extra = Some(("inputResponses", Value::Object(responses)));
        let mut update = self
            .template
            .request("tasks/update", &id, &self.task.id, extra);
        if let Some(record) = record {
            update.extensions_mut().insert(record);
        }
        let answer = crate::exchange::ask(service, update, &id, timeout).await?;
        if let Some(error) = answer.get("error") {
            return Err(format!("tasks/update was answered {error}"));
        }
        self.answered.extend(keys);
        Ok(())
    }

    /// The server's requests the client has not answered.
    fn outstanding(&self) -> Map<String, Value> {
        let mut requests = self.task.input_requests.clone();
        requests.retain(|key, _| !self.answered.contains(key));
        requests
    }
}

/// A job, and everything it answers to.
pub(super) struct Job<S, ReqB, ResB> {
    pub(super) service: S,
    pub(super) state: JobState,
    pub(super) client: Client,
    pub(super) limits: Limits,
    pub(super) watch: Watch,
    pub(super) table: Arc<Table<JobState>>,
    /// The client's request, as a `notifications/cancelled` names it.
    pub(super) key: String,
    pub(super) types: PhantomData<fn(ReqB) -> ResB>,
}

/// What the job does after a step.
pub(super) enum Next {
    Poll,
    End,
}

impl<S, ReqB, ResB> Job<S, ReqB, ResB>
where
    S: Sends<ReqB, ResB>,
    ReqB: From<Bytes>,
    ResB: Body<Data = Bytes>,
{
    /// The server's requests the client is to answer, when the task waits for its input.
    pub(super) fn input_wanted(&self) -> Option<Map<String, Value>> {
        let outstanding = self.state.outstanding();
        (self.state.task.status == Status::InputRequired && !outstanding.is_empty())
            .then_some(outstanding)
    }

    /// One step of a job whose task wants no input: the client's answer for a task that has
    /// ended, else a wait and a poll.
    pub(super) async fn step(&mut self, cancelled: &Notify) -> Next {
        if self.state.task.is_terminal() {
            self.watch.finished();
            let answer = final_answer(&self.client, &self.state.task);
            self.client.write(&answer);
            return Next::End;
        }
        self.wait_and_poll(cancelled).await
    }

    /// Waits the poll interval (or to the job's limit), then polls once.
    async fn wait_and_poll(&mut self, cancelled: &Notify) -> Next {
        let task = self.state.task.id.clone();
        let interval = self
            .state
            .task
            .poll_interval
            .unwrap_or(self.limits.poll_interval)
            .max(Duration::from_millis(1));
        let deadline = self.state.deadline();
        let past_limit = Instant::now() + interval > deadline;
        let wake = if past_limit {
            deadline
        } else {
            Instant::now() + interval
        };
        if wait_until(wake, cancelled).await {
            return self.cancelled().await;
        }
        if past_limit {
            let limit = self.state.limit.as_secs();
            let message = format!("task {task} did not end within {limit} s; it was cancelled");
            return self.fail("task_limit", message, None, true).await;
        }
        self.poll().await
    }

    /// One `tasks/get`: the task as it is now, or the end of the job.
    async fn poll(&mut self) -> Next {
        let mut failures = 0;
        loop {
            self.state.polls += 1;
            let id = format!("{}get/{}", super::table::PREFIX, self.state.polls);
            let task = &self.state.task.id;
            let poll = self.state.template.request("tasks/get", &id, task, None);
            match crate::exchange::ask(&mut self.service, poll, &id, self.limits.poll_timeout).await
            {
                Ok(answer) => return self.update(answer).await,
                Err(why) => {
                    failures += 1;
                    if failures >= self.limits.poll_failures {
                        let message = format!(
                            "task {task}: {failures} polls in a row failed, the last with: {why}"
                        );
                        return self.fail("task_unreachable", message, None, false).await;
                    }
                    let again = Instant::now() + self.limits.poll_interval;
                    tokio::time::sleep_until(again).await;
                }
            }
        }
    }

    /// Takes a poll's answer in: the task's new state, or the end of a job the server no
    /// longer knows.
    async fn update(&mut self, answer: Value) -> Next {
        let task = &self.state.task;
        match answer.get("result").and_then(Task::of) {
            Some(next) if next.id == task.id => {
                self.state.task = Task {
                    poll_interval: next.poll_interval.or(task.poll_interval),
                    ttl: next.ttl.or(task.ttl),
                    ..next
                };
                if !self.state.task.is_terminal() && self.state.outstanding().is_empty() {
                    self.client.alive(self.state.polls, &self.state.task);
                }
                Next::Poll
            }
            _ => {
                // Expired, held elsewhere, or something that is no task: the job is lost.
                let server = answer.get("error").cloned();
                let why = server
                    .as_ref()
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("an answer that is no task");
                let message = format!("task {}: tasks/get was answered: {why}", task.id);
                self.fail("task_lost", message, server, false).await
            }
        }
    }

    /// Ends the job with an error of the layer's own (`kind`), the task cancelled first when
    /// `cancel` says so.
    pub(super) async fn fail(
        &mut self,
        kind: &str,
        message: String,
        server: Option<Value>,
        cancel: bool,
    ) -> Next {
        self.watch.finished();
        if cancel {
            self.send_cancel().await;
        }
        self.client
            .error(wire::task_error(&self.state.task.id, kind, message, server));
        Next::End
    }

    /// The client cancelled the call: the task is cancelled, and the call gets no answer (MCP:
    /// a cancelled request is not answered).
    pub(super) async fn cancelled(&mut self) -> Next {
        self.watch.finished();
        self.send_cancel().await;
        Next::End
    }

    async fn send_cancel(&mut self) {
        let (template, task) = (&self.state.template, &self.state.task.id);
        request::cancel(&mut self.service, template, task, self.limits.poll_timeout).await;
    }

    /// Sends `tasks/update` with the client's answers: whether the server acknowledged it.
    pub(super) async fn send_update(
        &mut self,
        responses: Map<String, Value>,
    ) -> Result<(), String> {
        let timeout = self.limits.poll_timeout;
        self.state
            .send_update(&mut self.service, responses, None, timeout)
            .await
    }
}

/// The client's answer to a task that has ended. A 2026-07-28 client's result carries
/// `resultType` (SEP-2322: every result of the revision does), which a task's stored result
/// need not.
fn final_answer(client: &Client, task: &Task) -> Value {
    let id = &client.id;
    match task.status {
        Status::Completed => {
            let mut result = task
                .result
                .clone()
                .unwrap_or_else(|| Value::Object(Map::new()));
            if client.stateless
                && let Some(result) = result.as_object_mut()
            {
                result
                    .entry("resultType")
                    .or_insert_with(|| Value::from("complete"));
            }
            wire::result_message(id, result)
        }
        Status::Failed => wire::error_message(id, wire::failed_error(task)),
        _ => {
            let message = match &task.status_message {
                Some(why) => format!("task {} was cancelled: {why}", task.id),
                None => format!("task {} was cancelled", task.id),
            };
            wire::error_message(
                id,
                wire::task_error(&task.id, "task_cancelled", message, None),
            )
        }
    }
}
