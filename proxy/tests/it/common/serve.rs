//! What the in-test servers share (an MCP server, a runtime that records its headers, a
//! collector, a forwarder): HTTP/1 on loopback, and the request as they read it.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::BodyExt;

#[path = "../../../../tests/common/loopback.rs"]
mod loopback;
pub use loopback::{Serving, serve_loopback};

/// An in-test server on loopback and its record of what it got, one `T` a request; it serves
/// while it is kept.
pub struct Recorder<T> {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    record: Arc<Mutex<Vec<T>>>,
    _task: Serving,
}

impl<T: Clone + Send + 'static> Recorder<T> {
    /// Serves each request with `handle`, which is given the record to add to.
    pub async fn serve<H, F, B>(handle: H) -> Recorder<T>
    where
        H: Fn(Arc<Mutex<Vec<T>>>, http::Request<hyper::body::Incoming>) -> F
            + Clone
            + Send
            + Sync
            + 'static,
        F: std::future::Future<Output = http::Response<B>> + Send + 'static,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let record = Arc::new(Mutex::new(Vec::new()));
        let sink = record.clone();
        let (addr, task) = serve_loopback(move |request| handle(sink.clone(), request)).await;
        Recorder {
            base: format!("http://{addr}"),
            record,
            _task: task,
        }
    }

    /// What the server recorded, in the order it got the requests.
    pub fn recorded(&self) -> Vec<T> {
        self.record.lock().unwrap().clone()
    }

    /// Forgets what the server recorded so far.
    pub fn clear(&self) {
        self.record.lock().unwrap().clear();
    }
}

/// A request's head and its whole body.
pub async fn read_request(
    request: http::Request<hyper::body::Incoming>,
) -> (http::request::Parts, Bytes) {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts, body)
}

/// The header `name`'s value, as text.
pub fn header_of(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}
