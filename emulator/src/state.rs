//! The emulator's shared state: its configuration, the sessions it keeps, the faults queued,
//! the audit.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{
    Audit, BusyForm, EmulatorConfig, Fault, PlatformForm, RetryAfter, SignatureVerifier, lifecycle,
    mcp,
};

/// The emulator's shared state.
pub(crate) struct State {
    pub(super) config: EmulatorConfig,
    pub(super) verifier: SignatureVerifier,
    /// `http://127.0.0.1:PORT`, for the URLs the answers name.
    pub(super) endpoint: String,
    /// The accepted bearer tokens; `None` when SigV4 is the door.
    pub(super) tokens: Mutex<Option<Vec<String>>>,
    /// Runtime mode: the runtime sessions, their microVMs and the MCP sessions they issued.
    pub(super) runtime: Mutex<lifecycle::Runtime>,
    /// Gateway mode: the live MCP sessions by `Mcp-Session-Id`.
    pub(super) mcp_sessions: Mutex<HashMap<String, McpSession>>,
    pub(super) faults: Mutex<VecDeque<Fault>>,
    /// Faults for the next MCP POSTs whatever their method ([`Emulator::push_request_fault`]).
    ///
    /// [`Emulator::push_request_fault`]: super::Emulator::push_request_fault
    pub(super) request_faults: Mutex<VecDeque<Fault>>,
    pub(super) rng: Mutex<fastrand::Rng>,
    pub(super) audit: Mutex<Audit>,
    pub(super) counter: AtomicU64,
    pub(super) busy_toggle: AtomicU64,
    /// What the MCP servers keep between MCP 2026-07-28 requests: tasks, listen streams,
    /// issued `requestState`s.
    pub(super) mcp: Mutex<mcp::Memory>,
}

/// Who made a request, as far as session scoping goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Principal {
    /// SigV4: the access key id.
    AccessKey(String),
    /// A JWT bearer token, by its `sub` claim (AWS's scoping).
    Subject(String),
    /// Another bearer token, by a fingerprint (the token itself is not kept with the session).
    Token(u64),
}

/// A gateway MCP session.
pub(crate) struct McpSession {
    pub(super) principal: Principal,
    pub(super) started: tokio::time::Instant,
}

impl State {
    /// Expires the MCP session `id`, in either mode, as a timeout would: whether it was live
    /// (what `Emulator::expire_mcp_session` does, and the fault `SessionExpired`).
    pub(crate) fn expire_mcp_session(&self, id: &str) -> bool {
        let gateway = self
            .mcp_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .is_some_and(|s| s.started.elapsed() < self.config.gateway_session_timeout);
        let limits = self.limits();
        let runtime = self
            .runtime()
            .expire(id, tokio::time::Instant::now(), &limits);
        gateway || runtime
    }

    /// Whether bearer tokens are the door (else SigV4).
    pub(super) fn bearer_door(&self) -> bool {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    pub(super) fn limits(&self) -> lifecycle::Limits {
        lifecycle::Limits {
            provisioning: self.config.provisioning,
            idle_timeout: self.config.idle_timeout,
            max_lifetime: self.config.max_lifetime,
            termination_delay: self.config.termination_delay,
        }
    }

    pub(super) fn runtime(&self) -> std::sync::MutexGuard<'_, lifecycle::Runtime> {
        self.runtime.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn mcp(&self) -> std::sync::MutexGuard<'_, mcp::Memory> {
        self.mcp.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn record(&self, f: impl FnOnce(&mut Audit)) {
        f(&mut self.audit.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The next fault queued for any MCP POST.
    pub(super) fn next_request_fault(&self) -> Option<Fault> {
        self.request_faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    }

    /// The form of the initialization fault this request meets, taken from its queue: the next
    /// fault for any request when it is one, else (when none is queued for any request) the
    /// next `tools/call` fault when the request is a `tools/call` and that fault is one.
    pub(super) fn take_initialization_fault(&self, tool_call: bool) -> Option<PlatformForm> {
        fn form(fault: Option<&Fault>) -> Option<PlatformForm> {
            match fault? {
                Fault::InitializationTimedOut { form } => Some(*form),
                Fault::Platform {
                    error: agentcore_tower::contract::PlatformError::InitializationTimedOut,
                    form,
                } => Some(*form),
                _ => None,
            }
        }
        let mut any = self
            .request_faults
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !any.is_empty() {
            let found = form(any.front());
            if found.is_some() {
                any.pop_front();
            }
            return found;
        }
        drop(any);
        if !tool_call {
            return None;
        }
        let mut calls = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        let found = form(calls.front());
        if found.is_some() {
            calls.pop_front();
        }
        found
    }

    /// The next fault for a `tools/call`: a scripted one first, else one drawn at the rates.
    pub(super) fn next_fault(&self) -> Option<Fault> {
        if let Some(fault) = self
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            return Some(fault);
        }
        let rates = self.config.rates?;
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let x = rng.f64();
        let mut edge = rates.busy;
        if x < edge {
            return Some(Fault::Busy);
        }
        edge += rates.throttle;
        if x < edge {
            let retry_after = rng.bool().then_some(RetryAfter::Seconds(0));
            return Some(Fault::Throttle { retry_after });
        }
        edge += rates.drop_after_run;
        if x < edge {
            return Some(Fault::DropAfterRun);
        }
        edge += rates.server_error;
        if x < edge {
            return Some(Fault::ServerError { after_run: false });
        }
        None
    }

    pub(super) fn busy_form(&self) -> BusyForm {
        match self.config.busy_form {
            BusyForm::Alternate => {
                if self
                    .busy_toggle
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(2)
                {
                    BusyForm::JsonRpc200
                } else {
                    BusyForm::Conflict409
                }
            }
            form => form,
        }
    }
}
