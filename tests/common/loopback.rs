//! An HTTP/1 server on loopback that answers as a test says: the one accept loop of the tests of
//! every crate of the workspace (the library's `tests/common`, and the proxy's tests, which
//! include this file by its path).

use std::net::SocketAddr;

/// A server's task, aborted when dropped: the server lives as long as what holds it.
pub struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves HTTP/1 on 127.0.0.1 (a free port), each request answered by `handle`, while the
/// [`Serving`] is kept: its address and the task.
pub async fn serve_loopback<H, F, B>(handle: H) -> (SocketAddr, Serving)
where
    H: Fn(http::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = http::Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let answer = handle(request);
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, Serving(task))
}
