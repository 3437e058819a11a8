//! A request body's deadline: all of it must arrive within [`BODY_TIMEOUT`] of its head,
//! on both request paths (the router's and the hub's). Without it a client that sends a
//! head and then a byte at a time, or nothing, holds its connection — and its slot under
//! the connection cap — for as long as it likes: a few hundred such uploads would lock
//! everyone out. A body costs a timer only once it is not ready when read — which, behind
//! hyper, is every body's first read: hyper hands the body over just after the handler
//! first asks for it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};

/// How long a request's body may take to arrive, after its head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// An error of a body read: boxed, as `http-body`'s wrappers box theirs.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body did not all arrive within [`BODY_TIMEOUT`].
#[derive(Debug, thiserror::Error)]
#[error("the request body did not all arrive within {} s", BODY_TIMEOUT.as_secs())]
pub struct BodyTimedOut;

/// `B`, failing with [`BodyTimedOut`] once [`BODY_TIMEOUT`] has passed since it was
/// wrapped.
pub struct Deadlined<B> {
    body: B,
    deadline: tokio::time::Instant,
    /// Made the first time the body is not ready.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> Deadlined<B> {
    /// Wraps `body`, whose deadline starts now.
    pub fn new(body: B) -> Self {
        Self { body, deadline: tokio::time::Instant::now() + BODY_TIMEOUT, timer: None }
    }
}

impl<B> Body for Deadlined<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The router's middleware: every request's body under the deadline.
pub async fn deadline_bodies(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    next.run(request.map(|body| axum::body::Body::new(Deadlined::new(body)))).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::body::Bytes;

    /// A body whose client sent `{` and then nothing more.
    struct Stalls(bool);

    impl Body for Stalls {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.0 {
                return Poll::Pending;
            }
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{")))))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_coming_fails_at_the_deadline_and_one_that_came_does_not() {
        let started = tokio::time::Instant::now();
        let error = Deadlined::new(Stalls(false)).collect().await.expect_err("timed out");
        assert!(error.is::<BodyTimedOut>(), "{error}");
        assert_eq!(error.to_string(), "the request body did not all arrive within 10 s");
        assert_eq!(started.elapsed(), BODY_TIMEOUT);

        let whole = Deadlined::new(http_body_util::Full::new(Bytes::from_static(b"{}")));
        let read = whole.collect().await.expect("read");
        assert_eq!(read.to_bytes(), "{}");
    }
}
