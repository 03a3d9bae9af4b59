//! One connection's Produce requests append in the order they arrived, as
//! Kafka's are (it reads a connection's next request only after answering
//! the last). Requests of a connection run concurrently here, and a Produce
//! can wait before it appends (KIP-890 verification asks the transaction
//! coordinator on another broker): without a turn, a later request of the
//! same producer could append first and be refused OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! Owns: `AppendOrder` (per connection: hands out turns in arrival order) and
//! `AppendTurn` (a request waits for the previous Produce's appends, then
//! lets the next one go; dropping it lets the next one go too). Only the
//! appends are ordered: waiting for durability and the ISR overlaps. A
//! request whose deadline passes while it waits hands its turn on
//! (`hand_on`) rather than letting the next one jump the queue.
//! The group manager uses the same turns for the KIP-848 groups' records
//! (`coordinators::groups::consumer_group_writes`). Must not: order
//! anything but appends.

use tokio::sync::oneshot;

/// Turns for one connection's Produce requests, in arrival order.
#[derive(Debug, Default)]
pub struct AppendOrder {
    /// Resolves once the last turn handed out has appended (or is gone).
    last: Option<oneshot::Receiver<()>>,
}

impl AppendOrder {
    /// The turn of the Produce request read now: after every earlier one's.
    pub fn next_turn(&mut self) -> AppendTurn {
        let (done, next) = oneshot::channel();
        AppendTurn {
            after: self.last.replace(next),
            done: Some(done),
        }
    }
}

/// One request's place in its connection's append order.
#[derive(Debug, Default)]
pub struct AppendTurn {
    after: Option<oneshot::Receiver<()>>,
    done: Option<oneshot::Sender<()>>,
}

impl AppendTurn {
    /// A turn that waits for nothing (requests outside a connection's order).
    pub fn unordered() -> AppendTurn {
        AppendTurn::default()
    }

    /// Waits until every earlier Produce of the connection has appended.
    /// Cancel-safe: a wait given up (at a deadline) keeps the turn's place.
    pub async fn wait(&mut self) {
        if let Some(previous) = self.after.as_mut() {
            // Err: the previous request ended without `appended` (dropped).
            let _ = previous.await;
            self.after = None;
        }
    }

    /// Gives up this turn without appending, keeping the order: the next
    /// request goes once every earlier one has appended, not before (each
    /// earlier one waits within its own deadline, so this ends too).
    pub fn hand_on(mut self) {
        if self.after.is_none() {
            self.appended();
            return;
        }
        tokio::spawn(async move {
            self.wait().await;
            self.appended();
        });
    }

    /// This request's appends are done: the next Produce may append.
    pub fn appended(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    fn ready<F: Future>(f: F) -> bool {
        let mut f = std::pin::pin!(f);
        matches!(
            f.as_mut().poll(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(_)
        )
    }

    #[test]
    fn a_turn_waits_for_the_previous_appends_and_a_dropped_turn_lets_the_next_go() {
        let mut order = AppendOrder::default();
        let mut first = order.next_turn();
        let mut second = order.next_turn();
        let mut third = order.next_turn();
        assert!(ready(first.wait()), "the first turn waits for nothing");
        assert!(
            !ready(second.wait()),
            "the second appended before the first"
        );
        first.appended();
        assert!(ready(second.wait()));
        drop(second);
        assert!(ready(third.wait()), "a dropped turn held the next one");
    }

    #[tokio::test]
    async fn a_turn_handed_on_lets_the_next_go_only_after_the_earlier_appends() {
        let mut order = AppendOrder::default();
        let mut first = order.next_turn();
        let mut second = order.next_turn();
        let mut third = order.next_turn();
        assert!(ready(first.wait()));
        assert!(!ready(second.wait()), "a given-up wait lost its place");
        second.hand_on();
        tokio::task::yield_now().await;
        assert!(
            !ready(third.wait()),
            "the turn handed on let the third append before the first"
        );
        first.appended();
        tokio::time::timeout(std::time::Duration::from_secs(5), third.wait())
            .await
            .expect("the third turn comes once the first has appended");
    }
}
