//! The two deadlines hyper does not enforce itself.
//!
//! - `DeadlineBody`: a request body must be complete within a deadline
//!   counted from when its headers were read. tower-http's body timeout
//!   restarts at every frame, so a body dripped a byte at a time never
//!   trips it; this one does not restart.
//! - `WriteStall`: a connection whose writes make no progress for the
//!   write timeout fails. Without it a client that asks for a response and
//!   never reads it holds its connection (and a place under the cap) for as
//!   long as it likes: hyper's header timer only runs while it waits for a
//!   request, not while it waits to write one's response.
//!
//! Must not: know about connections counts or routes (`serve` does).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Sleep};

/// A request body that fails once `deadline` has passed unfinished.
pub(crate) struct DeadlineBody {
    inner: Incoming,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl DeadlineBody {
    pub(crate) fn new(inner: Incoming, timeout: Duration) -> DeadlineBody {
        DeadlineBody {
            inner,
            timeout,
            deadline: Box::pin(sleep(timeout)),
        }
    }
}

/// The body's error once its deadline passed (a route may answer 408).
#[derive(Debug)]
pub struct BodyDeadlineElapsed {
    /// The body read timeout that passed.
    pub timeout: Duration,
}

impl std::fmt::Display for BodyDeadlineElapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request body not received within {:?} of its headers",
            self.timeout
        )
    }
}

impl std::error::Error for BodyDeadlineElapsed {}

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        // Whatever already arrived is passed on first: the deadline cuts
        // off waiting, not data in hand.
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyDeadlineElapsed {
                timeout: this.timeout,
            }))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An I/O stream whose writes (and flushes) fail after making no progress
/// for `timeout`. Reads pass through: waiting for a request is hyper's
/// header timer's business.
pub(crate) struct WriteStall<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub(crate) fn new(inner: S, timeout: Duration) -> WriteStall<S> {
        WriteStall {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// `Pending` from the inner stream: starts or checks the stall timer.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(sleep(timeout)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            )));
        }
        Poll::Pending
    }

    fn progress<T>(&mut self, result: io::Result<T>) -> Poll<io::Result<T>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(result) => self.progress(result),
            Poll::Pending => self.pending(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.progress(result),
            Poll::Pending => self.pending(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(result) => self.progress(result),
            Poll::Pending => self.pending(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Ready(result) => self.progress(result),
            Poll::Pending => self.pending(cx),
        }
    }
}
