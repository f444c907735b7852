//! The body of a [`TaskPolling`](super::TaskPolling) answer: the server's, as it came, or the
//! layer's own answer to a call that became a task, written while the task is polled.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;
use serde_json::{Value, json};

use crate::body::PeekedBody;
use crate::error::BoxError;
use crate::exchange::Driven;

pin_project! {
    /// The body of a [`TaskPolling`](super::TaskPolling) answer: the server's, as it came (its
    /// first bytes, when the layer read them to tell a task handle, yielded first), or the
    /// layer's own answer to a call the server made a task — the messages it writes while it
    /// polls the task (progress, then the final result or error).
    pub struct TaskBody<B: Body> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = Projected]
    enum Inner<B: Body> {
        Server {
            #[pin]
            body: PeekedBody<B>,
        },
        Task {
            job: JobBody,
        },
        Local {
            #[pin]
            body: Full<Bytes>,
        },
    }
}

impl<B: Body> TaskBody<B> {
    /// The server's body, as it came.
    pub(super) fn server(body: PeekedBody<B>) -> Self {
        Self {
            inner: Inner::Server { body },
        }
    }

    /// The layer's answer to a call that became a task.
    pub(super) fn task(job: JobBody) -> Self {
        Self {
            inner: Inner::Task { job },
        }
    }

    /// An answer of the layer's own, whole.
    pub(super) fn local(bytes: Bytes) -> Self {
        Self {
            inner: Inner::Local {
                body: Full::new(bytes),
            },
        }
    }

    /// An answer of the layer's own: one JSON-RPC message, and a record of no attempt (nothing
    /// was sent for it).
    pub(super) fn local_json(message: &Value) -> Response<Self> {
        let body = Self::local(Bytes::from(message.to_string()));
        crate::exchange::own_answer(http::StatusCode::OK, body, true)
    }

    /// An answer of the layer's own to the client's request `id`: one JSON-RPC error.
    pub(super) fn local_error(id: &Value, code: i64, message: &str) -> Response<Self> {
        let error = json!({"code": code, "message": message});
        Self::local_json(&super::wire::error_message(id, error))
    }

    /// Whether this is the layer's own answer to a call the server made a task.
    pub fn is_task(&self) -> bool {
        matches!(self.inner, Inner::Task { .. })
    }
}

impl<B: Body> From<B> for TaskBody<B> {
    /// The server's body, as it came: for a stack that sometimes has no task layer.
    fn from(body: B) -> Self {
        Self::server(PeekedBody::new(body))
    }
}

impl<B> Body for TaskBody<B>
where
    B: Body<Data = Bytes, Error: Into<BoxError>>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().inner.project() {
            Projected::Server { body } => body.poll_frame(cx).map_err(Into::into),
            Projected::Task { job } => job.driven.poll_frame(cx),
            Projected::Local { body } => body.poll_frame(cx).map_err(|never| match never {}),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Server { body } => body.is_end_stream(),
            Inner::Task { job } => job.driven.is_end_stream(),
            Inner::Local { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Server { body } => body.size_hint(),
            Inner::Task { .. } => SizeHint::default(),
            Inner::Local { body } => body.size_hint(),
        }
    }
}

impl<B: Body> fmt::Debug for TaskBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Server { .. } => f.write_str("TaskBody::Server"),
            Inner::Local { .. } => f.write_str("TaskBody::Local"),
            Inner::Task { job } => f
                .debug_struct("TaskBody::Task")
                .field("task", &job.watch.task())
                .finish_non_exhaustive(),
        }
    }
}

/// What the body's owner does when it is dropped before the task ended: sends `tasks/cancel`.
pub(super) type OnAbandon = Box<dyn FnOnce(String) + Send>;

/// The layer's own answer: the job's driver runs as the body is read ([`Driven`]), and dropping
/// the body stops it (and cancels the task, through [`OnAbandon`]).
pub(super) struct JobBody {
    driven: Driven,
    watch: Watch,
    on_abandon: Option<OnAbandon>,
}

impl JobBody {
    pub(super) fn new(driven: Driven, watch: Watch, on_abandon: OnAbandon) -> Self {
        Self {
            driven,
            watch,
            on_abandon: Some(on_abandon),
        }
    }
}

impl Drop for JobBody {
    fn drop(&mut self) {
        if let (Some(task), Some(on_abandon)) = (self.watch.unfinished(), self.on_abandon.take()) {
            on_abandon(task);
        }
    }
}

/// What the driver and the body share: the task being polled, and whether it has ended (or the
/// layer has cancelled it already).
#[derive(Clone, Default)]
pub(super) struct Watch(Arc<Mutex<(Option<String>, bool)>>);

impl Watch {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<String>, bool)> {
        self.0.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    pub(super) fn polling(&self, task: &str) {
        *self.lock() = (Some(task.to_owned()), false);
    }

    /// The task has ended, or needs nothing more from the layer.
    pub(super) fn finished(&self) {
        self.lock().1 = true;
    }

    fn task(&self) -> Option<String> {
        self.lock().0.clone()
    }

    fn unfinished(&self) -> Option<String> {
        let state = self.lock();
        (!state.1).then(|| state.0.clone()).flatten()
    }
}
