//! [`RetryLayer<P>`], the one retry layer of the crate: a policy and its settings, which it
//! hands to every [`Retry`] service it builds. Its builder methods are in `config.rs`.

use std::marker::PhantomData;
use std::sync::Arc;

use tower::Layer;

use super::config::RetryConfig;
use super::{Backoff, Retry};
use crate::body::{InnerReadAhead, OwnReadAhead};

/// Re-sends what its policy `P` says is worth sending again, within the call's budget and rule.
/// Use it by its policy's name: [`ThrottleRetryLayer`](crate::ThrottleRetryLayer),
/// [`SessionBusyRetryLayer`](crate::SessionBusyRetryLayer),
/// [`ReplayGuardLayer`](crate::ReplayGuardLayer). See the [module docs](super).
///
/// The second parameter says where the layer holds the answer it reads ahead: see
/// [`over_retry_layer`](Self::over_retry_layer).
#[derive(Clone, Debug)]
pub struct RetryLayer<P, R = OwnReadAhead> {
    /// What it re-sends.
    policy: P,
    /// Its settings, set by the builder methods of `config.rs`.
    pub(super) config: RetryConfig,
    /// Where it holds the answer it reads ahead.
    read_ahead: PhantomData<fn() -> R>,
}

impl<P> RetryLayer<P> {
    /// A layer named `layer` (in records and logs) with `policy` and `backoff`.
    pub(crate) fn with_policy(layer: &'static str, policy: P, backoff: Backoff) -> Self {
        Self {
            policy,
            config: RetryConfig::new(layer, backoff),
            read_ahead: PhantomData,
        }
    }

    /// For a layer stacked right over another retry layer of this crate (the guard over
    /// throttling, as in [`RecommendedLayers`](crate::RecommendedLayers)): the answer stays
    /// in the [`PeekedBody`](crate::body::PeekedBody) the layer under it read it ahead into,
    /// so the stack's body type nests one read-ahead wrapper, not one per retry layer. The
    /// answer is read ahead once either way. Over any other service, the layer does not
    /// build (its answers are not in a `PeekedBody`).
    ///
    /// ```
    /// use agentcore_tower::body::{ObservedBody, PeekedBody};
    /// use agentcore_tower::{ReplayGuardLayer, ThrottleRetryLayer};
    /// use http_body_util::Full;
    /// use tower::{Service, ServiceBuilder, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stack = ServiceBuilder::new()
    ///     .layer(ReplayGuardLayer::new().over_retry_layer())
    ///     .layer(ThrottleRetryLayer::new())
    ///     .service(service_fn(|_: http::Request<Full<bytes::Bytes>>| async {
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::new())))
    ///     }));
    /// let response: http::Response<ObservedBody<PeekedBody<Full<bytes::Bytes>>>> =
    ///     stack.call(http::Request::new(Full::new(bytes::Bytes::new()))).await.unwrap();
    /// # let _ = response;
    /// # }
    /// ```
    pub fn over_retry_layer(self) -> RetryLayer<P, InnerReadAhead> {
        RetryLayer {
            policy: self.policy,
            config: self.config,
            read_ahead: PhantomData,
        }
    }
}

impl<P, R> RetryLayer<P, R> {
    /// Its policy.
    pub(crate) fn policy(&self) -> &P {
        &self.policy
    }

    /// Its policy, to change (the guard's declarations, session busy's cap).
    pub(crate) fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }
}

impl<S, P: Clone, R> Layer<S> for RetryLayer<P, R> {
    type Service = Retry<S, P, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry::with_config(inner, self.policy.clone(), Arc::new(self.config.clone()))
    }
}
