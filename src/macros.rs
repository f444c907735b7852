//! The parts every retry layer shares in shape: builder methods and the opaque future.

/// Builder methods over a layer's `config: RetryConfig`, documented once for every layer.
macro_rules! retry_builder_methods {
    () => {
        /// Sets how many attempts are sent at most, the first one included (`0` is taken as 1).
        pub fn max_attempts(mut self, max_attempts: u32) -> Self {
            self.config.backoff = self.config.backoff.with_max_attempts(max_attempts);
            self
        }

        /// Sets the ceiling on the time one call waits in all. A wait that would pass it is
        /// not started: the last answer is delivered at once.
        pub fn max_total_wait(mut self, max_total_wait: std::time::Duration) -> Self {
            self.config.backoff = self.config.backoff.with_max_total_wait(max_total_wait);
            self
        }

        /// Sets the delay the first re-send's backoff is computed from (before jitter).
        pub fn base_delay(mut self, base: std::time::Duration) -> Self {
            self.config.backoff = self.config.backoff.with_base(base);
            self
        }

        /// Sets the cap on one backoff wait (before jitter). A server's `Retry-After` is not
        /// capped by it, only by [`max_total_wait`](Self::max_total_wait).
        pub fn max_delay(mut self, max_delay: std::time::Duration) -> Self {
            self.config.backoff = self.config.backoff.with_max_delay(max_delay);
            self
        }

        /// Replaces the whole schedule at once.
        pub fn backoff(mut self, backoff: $crate::Backoff) -> Self {
            self.config.backoff = backoff;
            self
        }

        /// Calls `hook` before every re-send, with the attempt about to start, the cap, the
        /// wait and the `Retry-After` if any. It runs inside the call: keep it short.
        pub fn on_retry(
            mut self,
            hook: impl Fn(&$crate::RetryInfo) + Send + Sync + 'static,
        ) -> Self {
            self.config.on_retry = Some($crate::retry::OnRetry::new(hook));
            self
        }

        /// Calls `hook` with the finished attempt record of every call this layer owns (when it
        /// is the outermost of this crate's layers): for MCP clients that never hand the HTTP
        /// response to the app, so the record would otherwise be out of reach.
        pub fn on_record(
            mut self,
            hook: impl Fn(&$crate::AttemptRecord) + Send + Sync + 'static,
        ) -> Self {
            self.config.on_record = Some($crate::retry::OnRecord(std::sync::Arc::new(hook)));
            self
        }

        /// The schedule in use.
        pub fn schedule(&self) -> $crate::Backoff {
            self.config.backoff
        }
    };
}

/// A public, opaque `ResponseFuture` over the shared `RetryFuture` with a given decision.
macro_rules! retry_response_future {
    ($(#[$meta:meta])* $name:ident, $classify:ty, $body:ty $(, where $($bound:tt)+)?) => {
        pin_project_lite::pin_project! {
            $(#[$meta])*
            pub struct $name<S, ReqB, ResB>
            where
                S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
                $($($bound)+)?
            {
                #[pin]
                inner: $crate::retry::RetryFuture<S, ReqB, ResB, $classify>,
            }
        }

        impl<S, ReqB, ResB> std::future::Future for $name<S, ReqB, ResB>
        where
            S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
            S::Error: Into<$crate::BoxError>,
            ReqB: Clone,
            $($($bound)+)?
        {
            type Output = Result<http::Response<$body>, $crate::Error>;

            fn poll(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Self::Output> {
                self.project().inner.poll(cx)
            }
        }

        impl<S, ReqB, ResB> std::fmt::Debug for $name<S, ReqB, ResB>
        where
            S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
            $($($bound)+)?
        {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

/// `new`, `layer`, `get_ref`, `get_mut`, `into_inner` for a retry service built by `$layer`.
macro_rules! retry_service_methods {
    ($layer:ident) => {
        /// Wraps `inner` with the layer's default settings.
        pub fn new(inner: S) -> Self {
            tower::Layer::layer(&$layer::new(), inner)
        }

        /// The layer, to change settings: `Self::layer().max_attempts(5)`.
        pub fn layer() -> $layer {
            $layer::new()
        }

        inner_service_accessors!();
    };
}

/// `get_ref`, `get_mut`, `into_inner` for a service wrapping `inner`.
macro_rules! inner_service_accessors {
    () => {
        /// The service below.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The service below, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Unwraps the service below.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
