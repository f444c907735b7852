//! What a policy is to the loop: [`RetryPolicy`], the bound a [`Retry`](super::Retry) service
//! puts on its policy, and the sealed traits it stands for. A policy judges one attempt's result
//! and nothing else; the loop (the [`ResponseFuture`](super::ResponseFuture)) does the sending,
//! the waiting, the cloning and the recording. Why users cannot write one: see the
//! [module docs](super#why-the-policies-are-sealed).

use http_body::Body;

use sealed::Decide;

/// What a [`RetryLayer`](super::RetryLayer) re-sends: one of the crate's three policies —
/// [`Throttled`](crate::throttle::Throttled), [`SessionBusy`](crate::session_busy::SessionBusy),
/// [`ReplayDeclarations`](crate::replay::ReplayDeclarations). Sealed: it cannot be implemented outside this crate.
pub trait RetryPolicy<ReqB, ResB: Body>: Decide<ReqB, ResB> {}

impl<P: Decide<ReqB, ResB>, ReqB, ResB: Body> RetryPolicy<ReqB, ResB> for P {}

/// What a policy's decision is made of. Sealed: the crate's three policies implement it. Its
/// items are `pub` in a module that is not, so a public bound can name them and no one outside
/// the crate can implement them.
pub(crate) mod sealed {
    use std::future::Future;
    use std::time::Duration;

    use bytes::Bytes;
    use http::{Request, Response};

    use crate::body::PeekedBody;
    use crate::context::CallContext;
    use crate::contract::Classified;
    use crate::error::Error;
    use crate::rule::Failure;

    /// A policy over requests with bodies `ReqB` and responses with bodies `ResB`.
    pub trait Decide<ReqB, ResB: http_body::Body>: Clone {
        /// The body of the responses the layer hands up.
        type Body;
        /// What decides about each attempt of one call.
        type Judge: Judge<ResB, Body = Self::Body>;
        /// Looks at a call before its first attempt (the guard reads the body).
        type Prepare: Future<Output = Self::Judge>;
        /// Starts a call.
        fn prepare(&self, request: &Request<ReqB>, context: &CallContext) -> Self::Prepare;
    }

    /// A policy that reads nothing of a request before its first attempt: its judge is ready
    /// at once, and answers go up as the loop read them ahead. (The call's span is still named
    /// from an in-memory body, when the layer is the call's first.)
    pub trait JudgeAtOnce: Clone {
        /// What decides about each attempt of one call.
        type CallJudge;
        /// The judge of one call.
        fn for_call(&self, context: &CallContext) -> Self::CallJudge;
    }

    impl<P, ReqB, ResB> Decide<ReqB, ResB> for P
    where
        P: JudgeAtOnce,
        P::CallJudge: Judge<ResB, Body = PeekedBody<ResB>>,
        ReqB: http_body::Body<Data = Bytes> + Clone,
        ResB: http_body::Body<Data = Bytes> + Unpin,
    {
        type Body = PeekedBody<ResB>;
        type Judge = P::CallJudge;
        type Prepare = std::future::Ready<P::CallJudge>;

        fn prepare(&self, request: &Request<ReqB>, context: &CallContext) -> Self::Prepare {
            // Names the call's span from an in-memory body, when this layer is the call's first.
            context.describe_from(request.body());
            std::future::ready(self.for_call(context))
        }
    }

    /// A decision over one attempt's result, once the loop has read the platform error it
    /// carries, if any (the answer's head, or its bounded read-ahead: see `peek`).
    pub trait Judge<B: http_body::Body> {
        /// The body of the responses it hands back.
        type Body;
        /// What it makes of the result.
        fn judge(
            &self,
            answer: Result<&Response<PeekedBody<B>>, &Error>,
            platform: Option<Classified>,
        ) -> RetryAction;
        /// The response as the layer hands it up.
        fn wrap(&self, response: Response<PeekedBody<B>>) -> Response<Self::Body>;
    }

    /// What a decision makes of one attempt's result.
    pub enum RetryAction {
        /// Nothing to say: deliver the result as it is.
        NoOpinion,
        /// Worth sending again, for this reason — if the call's rule and budget allow.
        Retry(RetryReason),
    }

    /// Why a layer would send a request again.
    pub struct RetryReason {
        /// The failure, as the replay rule sees it.
        pub failure: Failure,
        /// A short description for the record and logs (e.g. `"HTTP 429"`).
        pub cause: &'static str,
        /// The wait the server asked for, when it did (a valid `Retry-After`).
        pub retry_after: Option<Duration>,
    }
}
