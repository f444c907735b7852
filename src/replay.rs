//! [`ReplayGuardLayer`]: the replay rule — which failed attempt may be sent again — and the
//! record of every attempt.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! use agentcore_tower::{AttemptRecord, ReplayGuardLayer, ThrottleRetryLayer};
//! use bytes::Bytes;
//! use http::{Request, Response};
//! use http_body_util::Full;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // A server whose connection drops after every tool ran.
//! let executions = Arc::new(AtomicU32::new(0));
//! let server = service_fn({
//!     let executions = executions.clone();
//!     move |_request: Request<Full<Bytes>>| {
//!         executions.fetch_add(1, Ordering::SeqCst);
//!         async { Err::<Response<Full<Bytes>>, _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset)) }
//!     }
//! });
//! let client = ServiceBuilder::new()
//!     .layer(ReplayGuardLayer::new().idempotent_tools(["lookup"]))
//!     .layer(ThrottleRetryLayer::new())
//!     .service(server);
//!
//! let call = |tool: &str| {
//!     let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#);
//!     Request::post("https://runtime.example/mcp").body(Full::new(Bytes::from(body))).unwrap()
//! };
//!
//! // `charge` was not declared replayable: it may have run, so it is not sent again.
//! let error = client.clone().oneshot(call("charge")).await.unwrap_err();
//! assert_eq!(executions.swap(0, Ordering::SeqCst), 1);
//! println!("{}", error.record().unwrap());
//! // #1 failed: connection dropped -> replay_guard: delivered (connection dropped, but a re-send is forbidden: tools/call `charge` is not declared replayable); effect unknown
//!
//! // `lookup` was: it is sent again, on the app's word.
//! let error = client.oneshot(call("lookup")).await.unwrap_err();
//! assert_eq!(executions.load(Ordering::SeqCst), 3);
//! println!("{}", error.record().unwrap());
//! // #1 failed: connection dropped -> replay_guard: connection dropped, sent again after 63ms (by app declaration, assumes idempotent); effect unknown
//! // #2 failed: connection dropped -> replay_guard: connection dropped, sent again after 148ms (by app declaration, assumes idempotent); effect unknown
//! // #3 failed: connection dropped -> replay_guard: delivered (connection dropped, but the cap of 3 attempts was reached); effect unknown
//! # }
//! ```
//!
//! # The rule
//! Blind retries run a `tools/call` twice: the official AWS SDK re-sends `InvokeAgentRuntime`
//! after any 5xx, reset or timeout, and generic retry middleware does the same. The rule, in one
//! place, consulted by every retry layer of this crate before every re-send — wherever it is
//! stacked, above the guard or below it:
//!
//! | what failed | re-sent? | permission recorded |
//! |---|---|---|
//! | a refusal documented as coming before execution: HTTP 429, AgentCore's session-busy reply | yes, unless the tool is [strict](ReplayGuardLayer::strict_tools) | by adapter, assumes rejected/refused-before-execution |
//! | a failure that proves the request was never written ([`FailureKind::NeverSent`]) | yes, for any request | by transport, assumes not-delivered |
//! | a failure after which it may have run: a connection dropped after the request may have been written, a timeout, any 5xx, AgentCore's `RuntimeClientError` (JSON-RPC -32010 in an HTTP 200, or HTTP 424; not "Runtime initialization time exceeded", a refusal the session-busy layer re-sends) | only a replayable request | by app declaration / protocol read / idempotent method / server annotation, assumes idempotent |
//! | anything else | delivered as is | — |
//!
//! **What is replayable**: the protocol reads (`ping`, `tools/list`, `resources/list`,
//! `resources/templates/list`, `resources/read`, `prompts/list`, `prompts/get`, and a task's
//! poll `tasks/get`; see
//! [`protocol_reads`](ReplayGuardLayer::protocol_reads)), the tools the app names
//! ([`idempotent_tools`](ReplayGuardLayer::idempotent_tools)), whatever the app's predicate
//! accepts ([`replayable_if`](ReplayGuardLayer::replayable_if)), and — only when the app opts in
//! with [`learn_idempotent_hints`](ReplayGuardLayer::learn_idempotent_hints) — the tools a
//! `tools/list` answer annotated `readOnlyHint: true`, or `idempotentHint: true` and not
//! `destructiveHint: true` (trusting the server's word); and the
//! requests whose HTTP method is idempotent — the DELETE that ends an MCP session (carried as
//! `StopRuntimeSession` with one client token for all its attempts) and the GET of the server's
//! stream. Never `initialize`, never an undeclared `tools/call`, never a POST whose body is not
//! JSON-RPC. A batch is replayable only when every member is. A [`ReplayOverride`] in the
//! request's extensions decides for that one request.
//!
//! **How never-sent is recognised**: see [`FailureKind::of_error`] — hyper-util's connect
//! errors, `ConnectionRefused`, and [`RequestNotSent`](crate::error::RequestNotSent), which any
//! transport can use to state it.
//!
//! # One rule for the whole call, in any order
//! The guard puts its rule in force for the whole call, in the call's context (see
//! [`CallBudget`](crate::CallBudget) for what else the context holds): every retry layer of this
//! crate asks it — the ones below the guard, and the ones stacked *above* it, which re-send a
//! request that has already passed the guard. So `ThrottleRetryLayer` above
//! `ReplayGuardLayer::new().strict_tools(["charge"])` never re-sends `charge` after a 429. An
//! app's own [`SharedReplayRule`] in the request's extensions, and a second guard, add their
//! rules beside it: every rule must permit a re-send, so refusing always wins, whoever refuses.
//! The permission recorded is the first rule's (the app's, else the first guard's).
//!
//! A retry layer of yours asks the same rule with [`replay_permission`].
//! Without any rule, [`Failure::default_permission`](crate::rule::Failure::default_permission)
//! applies: refusals re-sent on the adapter's own policy, a never-delivered request re-sent on
//! the transport's evidence, nothing that may have run.
//!
//! # What the guard re-sends itself
//! The failures that may have run, for replayable requests only, on the shared retry loop:
//! 3 attempts (the call's, over every layer), 100 ms base backoff (equal jitter), 2 s per wait,
//! 5 s waited in all; a `Retry-After` on a 5xx is honoured within that ceiling. Refusals are the
//! business of [`ThrottleRetryLayer`](crate::ThrottleRetryLayer) and
//! [`SessionBusyRetryLayer`](crate::SessionBusyRetryLayer), which ask this rule first.
//!
//! # The record
//! Every layer of the call appends to the call's [`AttemptRecord`](crate::AttemptRecord); the
//! first of this crate's layers the call meets hands it back in the response's extensions and
//! in every [`Error`] (whose `source` is the failure below). Printed, it shows per attempt what
//! came back, who decided what, on whose permission and assumption — and that the effect is
//! unknown.
//!
//! A request body is collected once per call, before the first attempt, from a clone (MCP
//! bodies are small and buffered); the guard needs `ReqBody: Body + Clone`. Its JSON-RPC reading
//! is kept in the call's context and parsed when a layer first asks: the guard asks when the
//! call first fails (its rule is made then, once, from those bytes), or when it learns hints
//! from a successful answer; otherwise the body is parsed only if something else needs it (the
//! signer, for the routing headers a client did not set; tracing and metrics, to name the
//! call). Bytes a layer below changes are read anew.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response};
use http_body::Body as HttpBody;
use pin_project_lite::pin_project;

pub use crate::context::replay_permission;

use crate::body::{ObservedBody, OwnReadAhead, PeekedBody, ReadToBytes};
use crate::context::CallContext;
use crate::contract::{Classified, Form, PlatformError};
use crate::error::{Error, ErrorKind};
use crate::jsonrpc::{Body as JsonRpcBody, Message, MessageKind, ParsedBody};
use crate::retry::sealed::{Decide, Judge, RetryAction, RetryReason};
use crate::retry::{Backoff, Retry, RetryLayer};
use crate::rule::{
    Assumption, By, Failure, FailureKind, MayHaveRun, Permission, ReplayRule, SharedReplayRule,
};

/// A per-request decision that travels in the request's extensions and wins over the guard's
/// declarations for that request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplayOverride {
    /// The request may be sent again after a failure that may have run.
    Replayable,
    /// It may not (refusals are still re-sent).
    NotReplayable,
    /// It is never sent again, not even after a refusal (a failure that proves it was never
    /// written still may be).
    Strict,
}

/// What the app's predicate is asked about: one message of a request body.
#[derive(Debug)]
pub struct ReplayCandidate<'a> {
    method: &'a str,
    tool: Option<&'a str>,
    arguments: Option<&'a serde_json::Value>,
}

impl<'a> ReplayCandidate<'a> {
    /// The JSON-RPC method (`"tools/call"`, …).
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The tool of a `tools/call`.
    pub fn tool(&self) -> Option<&'a str> {
        self.tool
    }

    /// The arguments of a `tools/call`.
    pub fn arguments(&self) -> Option<&'a serde_json::Value> {
        self.arguments
    }
}

type Predicate = Arc<dyn Fn(&ReplayCandidate<'_>) -> bool + Send + Sync>;

/// The protocol reads the guard replays by default.
pub const DEFAULT_PROTOCOL_READS: [&str; 8] = [
    "ping",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    // A task's poll (the Tasks extension): it reads the task's state, and runs nothing.
    "tasks/get",
];

/// How many bytes of a `tools/list` answer are kept to learn annotations from.
const HINT_LIMIT: usize = 4 * 1024 * 1024;

#[derive(Clone)]
struct Declarations {
    idempotent_tools: HashSet<String>,
    strict_tools: HashSet<String>,
    protocol_reads: HashSet<String>,
    predicate: Option<Predicate>,
    learned: Option<Arc<RwLock<HashSet<String>>>>,
}

impl fmt::Debug for Declarations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sorted = |set: &HashSet<String>| {
            let mut v: Vec<_> = set.iter().cloned().collect();
            v.sort();
            v
        };
        f.debug_struct("Declarations")
            .field("idempotent_tools", &sorted(&self.idempotent_tools))
            .field("strict_tools", &sorted(&self.strict_tools))
            .field("protocol_reads", &sorted(&self.protocol_reads))
            .field("predicate", &self.predicate.as_ref().map(|_| ".."))
            .field("learns_idempotent_hints", &self.learned.is_some())
            .finish()
    }
}

impl Declarations {
    /// Whether one message may be sent again after a failure that may have run, and on whose
    /// word; or why not.
    fn replayable(&self, message: &Message) -> Result<By, String> {
        let Some(method) = message.method.as_deref() else {
            return Err("a JSON-RPC response is not declared replayable".into());
        };
        let tool = message.name.as_deref().filter(|_| method == "tools/call");
        let candidate = ReplayCandidate {
            method,
            tool,
            arguments: message.arguments.as_ref(),
        };
        let by_predicate = || self.predicate.as_ref().is_some_and(|p| p(&candidate));
        if method == "tools/call" {
            let Some(tool) = tool else {
                return Err("a tools/call without a tool name is not replayable".into());
            };
            if self.idempotent_tools.contains(tool) || by_predicate() {
                return Ok(By::AppDeclaration);
            }
            if let Some(learned) = &self.learned
                && learned
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains(tool)
            {
                return Ok(By::ServerAnnotation);
            }
            return Err(format!("tools/call `{tool}` is not declared replayable"));
        }
        if message.kind == MessageKind::Request && self.protocol_reads.contains(method) {
            return Ok(By::ProtocolRead);
        }
        if by_predicate() {
            return Ok(By::AppDeclaration);
        }
        Err(format!("`{method}` is not declared replayable"))
    }

    fn strict(&self, message: &Message) -> Option<String> {
        let tool = message.name.as_deref()?;
        (message.method.as_deref() == Some("tools/call") && self.strict_tools.contains(tool))
            .then(|| format!("tools/call `{tool}` is strict: never sent again"))
    }

    /// Which guard these declarations are, among the rules of a call (never 0, the app's).
    fn key(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self).cast::<()>() as usize
    }

    /// The classifier of a call with this body: it learns from the answer of a `tools/list`
    /// (the body is read for it only when hints are learned, and an answer came).
    fn classifier_for(&self, body: ParsedBody) -> MayHaveRunOrNeverSent {
        MayHaveRunOrNeverSent {
            learn: self.learned.clone().map(|learned| (learned, body)),
        }
    }

    /// The rule for one request: its HTTP method, its body, the app's override.
    fn rule_for(
        &self,
        method: &Method,
        body: &JsonRpcBody,
        choice: Option<ReplayOverride>,
    ) -> Decided {
        let (replayable, strict) = match choice {
            Some(ReplayOverride::Replayable) => (Ok(By::AppDeclaration), None),
            Some(ReplayOverride::NotReplayable) => (
                Err("the request's ReplayOverride says not replayable".into()),
                None,
            ),
            Some(ReplayOverride::Strict) => {
                let why = "the request's ReplayOverride says strict: never sent again".to_string();
                (Err(why.clone()), Some(why))
            }
            // An MCP DELETE ends the session (StopRuntimeSession, one client token for all its
            // attempts); a GET opens the server's stream. Both are idempotent methods.
            None if *method != Method::POST && method.is_idempotent() => {
                (Ok(By::IdempotentMethod), None)
            }
            None => match body {
                JsonRpcBody::Unparsable => (Err("the request body is not JSON-RPC".into()), None),
                JsonRpcBody::Single(m) => (self.replayable(m), self.strict(m)),
                JsonRpcBody::Batch(members) => {
                    let mut by = By::ProtocolRead;
                    let mut replayable = Ok(By::ProtocolRead);
                    for m in members {
                        match self.replayable(m) {
                            Ok(By::ProtocolRead) => {}
                            Ok(other) => by = other,
                            Err(why) => {
                                replayable =
                                    Err(format!("a batch member is not replayable: {why}"));
                                break;
                            }
                        }
                    }
                    let replayable = replayable.map(|_| by);
                    (replayable, members.iter().find_map(|m| self.strict(m)))
                }
            },
        };
        // Strict wins over every declaration: forbidding always wins.
        let replayable = match &strict {
            Some(why) => Err(why.clone()),
            None => replayable,
        };
        Decided { replayable, strict }
    }
}

/// The guard's rule for one request, decided when first asked — at the call's first failure:
/// a call that never fails never has its body read for it.
struct GuardRule {
    declarations: Arc<Declarations>,
    method: Method,
    choice: Option<ReplayOverride>,
    body: ParsedBody,
    decided: std::sync::OnceLock<Decided>,
}

/// What the guard's rule decided for one request.
#[derive(Debug)]
struct Decided {
    replayable: Result<By, String>,
    strict: Option<String>,
}

impl GuardRule {
    fn decided(&self) -> &Decided {
        self.decided.get_or_init(|| {
            (self.declarations).rule_for(&self.method, self.body.body(), self.choice)
        })
    }
}

impl fmt::Debug for GuardRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardRule")
            .field("method", &self.method)
            .field("choice", &self.choice)
            .field("decided", &self.decided.get())
            .finish_non_exhaustive()
    }
}

impl ReplayRule for GuardRule {
    fn permission(&self, failure: &Failure) -> Result<Permission, String> {
        match failure {
            Failure::NeverDelivered => failure.default_permission(),
            Failure::Refused(refusal) => match &self.decided().strict {
                Some(why) => Err(why.clone()),
                None => Ok(Permission::new(By::Adapter, refusal.assumption())),
            },
            Failure::MayHaveRun(_) => match &self.decided().replayable {
                Ok(by) => Ok(Permission::new(*by, Assumption::Idempotent)),
                Err(why) => Err(why.clone()),
            },
        }
    }
}

/// The policy of [`ReplayGuardLayer`]: the app's declarations of what is replayable, from which
/// the guard makes each call's replay rule; a failure that may have run (or was never sent) is
/// worth sending again, which that rule then permits or refuses.
#[derive(Clone, Debug)]
pub struct ReplayDeclarations {
    declarations: Arc<Declarations>,
}

impl ReplayDeclarations {
    fn new() -> Self {
        Self {
            declarations: Arc::new(Declarations {
                idempotent_tools: HashSet::new(),
                strict_tools: HashSet::new(),
                protocol_reads: DEFAULT_PROTOCOL_READS
                    .iter()
                    .map(|m| (*m).to_owned())
                    .collect(),
                predicate: None,
                learned: None,
            }),
        }
    }
}

/// Decides which failed attempt may be sent again, re-sends the replayable ones after a
/// failure that may have run, and puts the call's replay rule in force for every layer of
/// the call. See the [module docs](self).
pub type ReplayGuardLayer = RetryLayer<ReplayDeclarations>;

/// The service [`ReplayGuardLayer`] builds.
///
/// `R`: where it holds the answer it reads ahead (see
/// [`over_retry_layer`](crate::retry::RetryLayer::over_retry_layer)).
pub type ReplayGuard<S, R = OwnReadAhead> = Retry<S, ReplayDeclarations, R>;

/// The response future of [`ReplayGuard`].
pub type ResponseFuture<S, ReqB, ResB, R = OwnReadAhead> =
    crate::retry::ResponseFuture<S, ReqB, ResB, ReplayDeclarations, R>;

impl Default for ReplayGuardLayer {
    fn default() -> Self {
        Self::new()
    }
}

const LAYER: &str = "replay_guard";

impl ReplayGuardLayer {
    /// The guard with its defaults: the protocol reads are replayable, no tool is; 3 attempts,
    /// 100 ms base backoff, 2 s per wait, 5 s waited in all.
    pub fn new() -> Self {
        RetryLayer::with_policy(
            LAYER,
            ReplayDeclarations::new(),
            Backoff::new(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(2))
                .with_max_attempts(3)
                .with_max_total_wait(Duration::from_secs(5)),
        )
    }
}

impl<R> RetryLayer<ReplayDeclarations, R> {
    fn declare(mut self, f: impl FnOnce(&mut Declarations)) -> Self {
        f(Arc::make_mut(&mut self.policy_mut().declarations));
        self
    }

    /// Declares tools whose `tools/call` may be sent again after a failure that may have run:
    /// running them twice does no more than running them once. Adds to earlier declarations.
    pub fn idempotent_tools<I, T>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.declare(|d| d.idempotent_tools.extend(tools.into_iter().map(Into::into)))
    }

    /// Declares tools that are never sent again, not even after a refusal the platform documents
    /// as coming before execution (429, session busy). Forbidding wins over every declaration,
    /// and over every layer of the call, wherever they are stacked.
    pub fn strict_tools<I, T>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.declare(|d| d.strict_tools.extend(tools.into_iter().map(Into::into)))
    }

    /// Declares replayable whatever `predicate` accepts: it is asked about every message whose
    /// method is not already replayable, with the method, the tool and the arguments of a
    /// `tools/call` — once per call, when the call first fails (never for a call that does not).
    pub fn replayable_if(
        self,
        predicate: impl Fn(&ReplayCandidate<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.declare(|d| d.predicate = Some(Arc::new(predicate)))
    }

    /// Replaces the methods replayable as protocol reads (default [`DEFAULT_PROTOCOL_READS`]).
    /// An empty list makes none replayable by default.
    pub fn protocol_reads<I, T>(self, methods: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.declare(|d| d.protocol_reads = methods.into_iter().map(Into::into).collect())
    }

    /// Learns from the `tools/list` answers that pass through this guard (JSON or SSE): a tool
    /// annotated `readOnlyHint: true`, or `idempotentHint: true` and not `destructiveHint: true`,
    /// becomes replayable, by
    /// [`By::ServerAnnotation`]; a later answer that says otherwise takes it back. Off by
    /// default: this trusts the server's word about its own tools. What is learned is shared by
    /// the services this layer builds (one MCP server).
    pub fn learn_idempotent_hints(self, learn: bool) -> Self {
        self.declare(|d| {
            d.learned = learn.then(|| Arc::new(RwLock::new(HashSet::new())));
        })
    }

    /// The tools learned from annotations so far, sorted.
    pub fn learned_tools(&self) -> Vec<String> {
        let Some(learned) = &self.policy().declarations.learned else {
            return Vec::new();
        };
        let mut tools: Vec<_> = learned
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        tools.sort();
        tools
    }
}

impl<ReqB, ResB> Decide<ReqB, ResB> for ReplayDeclarations
where
    ReqB: HttpBody + Clone,
    ResB: HttpBody,
{
    type Body = ObservedBody<PeekedBody<ResB>>;
    type Judge = MayHaveRunOrNeverSent;
    type Prepare = Prepare<ReqB>;

    fn prepare(&self, request: &Request<ReqB>, context: &CallContext) -> Self::Prepare {
        let declarations = self.declarations.clone();
        // Once per call: a guard met again (below a layer that re-sends) reuses the first read.
        if context.has_rule_of(declarations.key())
            && let Some(body) = context.first_parse()
        {
            return Prepare::Done {
                classifier: Some(declarations.classifier_for(body)),
            };
        }
        Prepare::Reading {
            reading: ReadToBytes::new(request.body().clone(), crate::invoke::MAX_PAYLOAD_BYTES),
            job: Some(Job {
                declarations,
                choice: request.extensions().get::<ReplayOverride>().copied(),
                method: request.method().clone(),
                context: context.clone(),
            }),
        }
    }
}

/// The guard's per-call machinery: public in a private module, so the sealed policy can name it
/// while no user can.
mod imp {
    use super::*;

    /// What the guard needs to make a call's rule once its body is read.
    pub struct Job {
        pub(super) declarations: Arc<Declarations>,
        pub(super) choice: Option<ReplayOverride>,
        pub(super) method: Method,
        pub(super) context: CallContext,
    }

    pin_project! {
        /// Reads a call's body (a clone) once, puts the call's rule in force and keeps the parse.
        #[project = PrepareProj]
        pub enum Prepare<B> {
            Done { classifier: Option<MayHaveRunOrNeverSent> },
            Reading {
                #[pin]
                reading: ReadToBytes<B>,
                job: Option<Job>,
            },
        }
    }

    impl<B> Future for Prepare<B>
    where
        B: HttpBody,
    {
        type Output = MayHaveRunOrNeverSent;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project() {
                PrepareProj::Done { classifier } => Poll::Ready(
                    classifier
                        .take()
                        .expect("Prepare polled after it completed"),
                ),
                PrepareProj::Reading { reading, job } => {
                    // A body that fails to read is not JSON-RPC: not replayable (the attempt below
                    // meets the same failure and reports it).
                    let bytes = std::task::ready!(reading.poll(cx)).ok();
                    let Job {
                        declarations,
                        choice,
                        method,
                        context,
                    } = job.take().expect("Prepare polled after it completed");
                    // Read when the rule is first asked (or a layer below asks first).
                    let body = ParsedBody::lazy(
                        bytes.unwrap_or_default(),
                        declarations.predicate.is_some(),
                    );
                    let rule = GuardRule {
                        declarations: declarations.clone(),
                        method,
                        choice,
                        body: body.clone(),
                        decided: std::sync::OnceLock::new(),
                    };
                    context.add_rule(declarations.key(), SharedReplayRule::new(rule));
                    context.set_parsed(body.clone());
                    Poll::Ready(declarations.classifier_for(body))
                }
            }
        }
    }

    /// The guard's decision: a failure that may have run (or was never sent) is worth a re-send,
    /// which the rule then permits or forbids.
    #[derive(Clone, Debug)]
    pub struct MayHaveRunOrNeverSent {
        /// The tools learned, and the request: learning is from a `tools/list`'s answer.
        pub(super) learn: Option<(Arc<RwLock<HashSet<String>>>, ParsedBody)>,
    }

    impl<B: HttpBody> Judge<B> for MayHaveRunOrNeverSent {
        type Body = ObservedBody<PeekedBody<B>>;

        fn judge(
            &self,
            answer: Result<&Response<PeekedBody<B>>, &Error>,
            platform: Option<Classified>,
        ) -> RetryAction {
            let (failure, cause, retry_after) = match answer {
                Err(error) if error.kind() == ErrorKind::Service => {
                    let (failure, cause) = match error.failure_kind() {
                        FailureKind::NeverSent => (Failure::NeverDelivered, "never sent"),
                        kind @ FailureKind::ConnectionDropped => (
                            Failure::MayHaveRun(MayHaveRun::Transport(kind)),
                            "connection dropped",
                        ),
                        kind @ FailureKind::TimedOut => (
                            Failure::MayHaveRun(MayHaveRun::Transport(kind)),
                            "timed out",
                        ),
                        kind => (
                            Failure::MayHaveRun(MayHaveRun::Transport(kind)),
                            "transport error",
                        ),
                    };
                    (failure, cause, None)
                }
                Err(_) => return RetryAction::NoOpinion,
                Ok(response) => {
                    let retry_after = crate::retry::retry_after(response.headers());
                    match platform {
                        // -32010 in an HTTP 200, or 424: the runtime's code failed, the tool may
                        // have run.
                        Some(p) if p.error() == PlatformError::RuntimeClientError => (
                            Failure::MayHaveRun(MayHaveRun::RuntimeClientError),
                            match p.form() {
                                Form::JsonRpc(_) => "RuntimeClientError (JSON-RPC -32010)",
                                _ => "RuntimeClientError (HTTP 424)",
                            },
                            retry_after,
                        ),
                        _ if response.status().is_server_error() => (
                            Failure::MayHaveRun(MayHaveRun::ServerError(response.status())),
                            "HTTP 5xx",
                            retry_after,
                        ),
                        _ => return RetryAction::NoOpinion,
                    }
                }
            };
            RetryAction::Retry(RetryReason {
                failure,
                cause,
                retry_after,
            })
        }

        fn wrap(&self, response: Response<PeekedBody<B>>) -> Response<ObservedBody<PeekedBody<B>>> {
            match &self.learn {
                Some((learned, request))
                    if response.status().is_success() && lists_tools(request.body()) =>
                {
                    let sse = !crate::jsonrpc::is_json_content_type(response.headers());
                    let learned = learned.clone();
                    response.map(|body| {
                        ObservedBody::observed(body, HINT_LIMIT, move |bytes| {
                            learn_hints(bytes, sse, &learned)
                        })
                    })
                }
                _ => response.map(ObservedBody::new),
            }
        }
    }
}

use imp::{Job, MayHaveRunOrNeverSent, Prepare};

/// Whether a request body is a `tools/list`.
fn lists_tools(body: &JsonRpcBody) -> bool {
    matches!(body, JsonRpcBody::Single(m) if m.method.as_deref() == Some("tools/list"))
}

/// Learns `readOnlyHint`, `idempotentHint` and `destructiveHint` from a `tools/list` answer
/// (JSON, or SSE events whose data is JSON). A tool both idempotent and destructive is not
/// learned: a server's hints are its word, and a lost answer of a destructive tool is left to
/// the app to send again. An absent `destructiveHint` counts as not destructive (MCP's default
/// is `true` for a tool that is not read-only, which would make `idempotentHint` alone mean
/// nothing).
fn learn_hints(bytes: &[u8], sse: bool, learned: &RwLock<HashSet<String>>) {
    let learn_from = |value: &serde_json::Value| {
        let Some(tools) = value.pointer("/result/tools").and_then(|t| t.as_array()) else {
            return;
        };
        let mut learned = learned.write().unwrap_or_else(|p| p.into_inner());
        for tool in tools {
            let Some(name) = tool.get("name").and_then(|n| n.as_str()) else {
                continue;
            };
            let hint = |key: &str| {
                tool.pointer(&format!("/annotations/{key}"))
                    .and_then(|v| v.as_bool())
            };
            let read_only = hint("readOnlyHint") == Some(true);
            let idempotent = hint("idempotentHint") == Some(true);
            let destructive = hint("destructiveHint") == Some(true);
            if read_only || (idempotent && !destructive) {
                learned.insert(name.to_owned());
            } else {
                learned.remove(name);
            }
        }
    };
    if !sse {
        if let Ok(value) = serde_json::from_slice(bytes) {
            learn_from(&value);
        }
        return;
    }
    // SSE: each event's `data:` lines, joined by newlines, form one JSON message.
    let text = String::from_utf8_lossy(bytes);
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Ok(value) = serde_json::from_str(&data) {
                learn_from(&value);
            }
            data.clear();
        } else if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
}
