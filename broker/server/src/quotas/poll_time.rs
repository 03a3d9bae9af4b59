//! A request's time on the broker's threads: the time its future spends
//! being polled, not the time it waits parked (for acks, for data). What
//! Kafka's request_percentage quota measures as network and I/O thread
//! time.
//!
//! Owns: `PollTime`, a future wrapper that sums its inner future's poll
//! durations. Must not: decide anything about quotas.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Wraps `inner`, summing the time spent inside its `poll`.
pub struct PollTime<F> {
    inner: Pin<Box<F>>,
    busy: Duration,
}

impl<F: Future> PollTime<F> {
    pub fn new(inner: F) -> PollTime<F> {
        PollTime {
            inner: Box::pin(inner),
            busy: Duration::ZERO,
        }
    }
}

impl<F: Future> Future for PollTime<F> {
    /// The inner output and the time spent polling it.
    type Output = (F::Output, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.busy += started.elapsed();
        polled.map(|output| (output, self.busy))
    }
}
