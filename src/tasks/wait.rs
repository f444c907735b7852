//! Waiting for the first of two things: a poll interval or a cancellation, a client's answer or
//! the next sign of life.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Waits until `wake`: whether the client cancelled the call meanwhile.
pub(super) async fn wait_until(wake: Instant, cancelled: &Notify) -> bool {
    matches!(
        first(tokio::time::sleep_until(wake), cancelled.notified()).await,
        Either::Right(())
    )
}

/// Which of two futures ended first.
pub(super) enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Runs two futures until the first ends (the left one is polled first).
pub(super) async fn first<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(out));
        }
        b.as_mut().poll(cx).map(Either::Right)
    })
    .await
}
