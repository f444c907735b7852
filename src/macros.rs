//! Accessor boilerplate for services that wrap an `inner` service.

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
