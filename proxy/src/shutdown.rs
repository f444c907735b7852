//! Shutdown, as both transports go through it: SIGINT or SIGTERM watched over their loop
//! ([`Signals`]), the requests or connections still running let finish for a while
//! ([`drain`]), and how long ending the sessions may take then ([`STOP_TIMEOUT`]).

use std::pin::Pin;
use std::time::Duration;

use tracing::warn;

/// How long requests still running may go on once the proxy is told to stop.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping the runtime sessions (or ending the MCP session) may take at exit.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Lets the tasks still running (`what`: requests, connections) finish for up to
/// [`DRAIN_TIMEOUT`], then gives up on the rest (dropping them answers what they owed).
pub async fn drain<T: 'static>(tasks: &mut tokio::task::JoinSet<T>, what: &str) {
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            left = tasks.len(),
            "{what} still run after {DRAIN_TIMEOUT:?}: giving up on them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// SIGINT or SIGTERM, watched over the whole loop of a transport.
pub struct Signals {
    signal: Pin<Box<dyn Future<Output = &'static str>>>,
    came: Option<&'static str>,
}

impl Signals {
    pub fn watch() -> Signals {
        Signals {
            signal: Box::pin(shutdown_signal()),
            came: None,
        }
    }

    /// What `next` gives, or `None` once a signal has come ([`Signals::came`]): then at once,
    /// without polling `next` or the finished signal again.
    pub async fn unless<T>(&mut self, next: impl Future<Output = T>) -> Option<T> {
        if self.came.is_some() {
            return None;
        }
        tokio::select! {
            value = next => Some(value),
            name = &mut self.signal => {
                self.came = Some(name);
                None
            }
        }
    }

    /// The name of the signal that came, if one did.
    pub fn came(&self) -> Option<&'static str> {
        self.came
    }
}

/// Resolves on SIGINT or SIGTERM, with the signal's name; never when they cannot be watched.
async fn shutdown_signal() -> &'static str {
    let interrupt = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "SIGINT",
            Err(e) => {
                warn!("cannot watch for SIGINT: {e}");
                std::future::pending().await
            }
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                name = interrupt => name,
                _ = terminate.recv() => "SIGTERM",
            },
            Err(e) => {
                warn!("cannot watch for SIGTERM: {e}");
                interrupt.await
            }
        }
    }
    #[cfg(not(unix))]
    interrupt.await
}
