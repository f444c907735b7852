//! The bound a layer's helpers ask of the service they send through, written once: a service of
//! HTTP requests whose answers carry `ResB` and whose errors become a [`BoxError`]. A helper adds
//! what it needs more (`Clone`, `Send`, a `Send` future) where it names the bound.

use http::{Request, Response};
use tower::Service;

use crate::error::BoxError;

/// A service a layer sends requests through: `Request<ReqB>` in, `Response<ResB>` out, its
/// errors able to become a [`BoxError`].
pub(crate) trait Sends<ReqB, ResB>:
    Service<Request<ReqB>, Response = Response<ResB>, Error: Into<BoxError>>
{
}

impl<T, ReqB, ResB> Sends<ReqB, ResB> for T where
    T: Service<Request<ReqB>, Response = Response<ResB>, Error: Into<BoxError>>
{
}
