//! What the two doors over the signer's state machine have in common: a layer holding the
//! [`Shared`](super::Shared) settings, the service it builds, and how each shows in `Debug`.
//! [`SigV4InvokeLayer`](super::SigV4InvokeLayer) and
//! [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer) differ only in their builders and
//! their mapping.

/// For `$layer` (a struct with a field `shared: Arc<Shared>`): `Debug` (the shared settings,
/// never a secret) and tower's `Layer`, building `$service`, which this defines with its
/// accessors, its `Debug` and its `Service` (a call of the state machine, as the mapping says).
macro_rules! signing_door {
    ($layer:ident => $service:ident) => {
        impl std::fmt::Debug for $layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.shared, f)
            }
        }

        impl<S> tower::Layer<S> for $layer {
            type Service = $service<S>;

            fn layer(&self, inner: S) -> Self::Service {
                $service {
                    inner,
                    shared: self.shared.clone(),
                }
            }
        }

        #[doc = concat!("The service [`", stringify!($layer), "`] builds.")]
        #[derive(Clone)]
        pub struct $service<S> {
            inner: S,
            shared: std::sync::Arc<$crate::invoke::Shared>,
        }

        impl<S> $service<S> {
            inner_service_accessors!();
        }

        impl<S: std::fmt::Debug> std::fmt::Debug for $service<S> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($service))
                    .field("inner", &self.inner)
                    .field("shared", &self.shared)
                    .finish()
            }
        }

        impl<S, ReqB, ResB> tower::Service<http::Request<ReqB>> for $service<S>
        where
            S: tower::Service<
                    http::Request<http_body_util::Full<bytes::Bytes>>,
                    Response = http::Response<ResB>,
                > + Clone,
            S::Error: Into<$crate::error::BoxError>,
            ReqB: http_body::Body,
            ReqB::Error: Into<$crate::error::BoxError>,
            ResB: http_body::Body<Data = bytes::Bytes>,
        {
            type Response = http::Response<$crate::redact::InvokeBody<ResB>>;
            type Error = $crate::error::Error;
            type Future = $crate::invoke::ResponseFuture<S, ReqB, ResB>;

            fn poll_ready(
                &mut self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Self::Error>> {
                self.inner
                    .poll_ready(cx)
                    .map_err($crate::error::Error::from_service)
            }

            fn call(&mut self, request: http::Request<ReqB>) -> Self::Future {
                $crate::invoke::call(&mut self.inner, &self.shared, request)
            }
        }
    };
}

pub(crate) use signing_door;
