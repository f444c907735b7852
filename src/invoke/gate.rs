//! The send gate: asked after a request is signed and just before it is sent, on every attempt.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Decides, just before each attempt is sent, whether it may still go.
///
/// A request carries its gate in its extensions as a [`SharedSendGate`]. The gate is asked
/// after the request is signed and before the service below is called, on every attempt —
/// so an app that closes its MCP client can stop retry loops already in flight from sending
/// again. A refusal ends the call with [`ErrorKind::SendGateClosed`](crate::ErrorKind), recorded
/// in the attempt record; nothing is sent.
pub trait SendGate: Send + Sync + 'static {
    /// `Ok(())` to send; `Err(reason)` to stop (the reason is recorded and reported).
    fn check(&self) -> Result<(), String>;
}

impl<F> SendGate for F
where
    F: Fn() -> Result<(), String> + Send + Sync + 'static,
{
    fn check(&self) -> Result<(), String> {
        self()
    }
}

/// A send gate as it travels in a request's extensions. Cheap to clone.
#[derive(Clone)]
pub struct SharedSendGate(Arc<dyn SendGate>);

impl SharedSendGate {
    /// Shares `gate`.
    pub fn new(gate: impl SendGate) -> Self {
        Self(Arc::new(gate))
    }

    /// Asks the gate.
    pub fn check(&self) -> Result<(), String> {
        self.0.check()
    }
}

impl fmt::Debug for SharedSendGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedSendGate(..)")
    }
}

/// A send gate that is open until closed, with a reason: the usual gate for an MCP client.
///
/// ```
/// use agentcore_tower::invoke::{ClosableGate, SendGate};
///
/// let gate = ClosableGate::new();
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(gate.shared());
/// assert!(gate.check().is_ok());
/// gate.close("the MCP client was closed");
/// assert_eq!(gate.check(), Err("the MCP client was closed".to_string()));
/// ```
#[derive(Clone, Default)]
pub struct ClosableGate {
    closed: Arc<AtomicBool>,
    reason: Arc<Mutex<String>>,
}

impl ClosableGate {
    /// An open gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes the gate: every later check refuses with `reason`.
    pub fn close(&self, reason: impl Into<String>) {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.into();
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether it was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The gate, to put in a request's extensions.
    pub fn shared(&self) -> SharedSendGate {
        SharedSendGate::new(self.clone())
    }
}

impl SendGate for ClosableGate {
    fn check(&self) -> Result<(), String> {
        if self.is_closed() {
            Err(self
                .reason
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone())
        } else {
            Ok(())
        }
    }
}

impl fmt::Debug for ClosableGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClosableGate")
            .field("closed", &self.is_closed())
            .finish()
    }
}
