//! A bench task's start, the same for producers, consumers and metadata
//! requesters: its own named thread, then its side of the run's start
//! barrier — say on `ready` that it is connected (or why it cannot be),
//! then wait on `go` for the run's timeline. `run` holds the other side
//! (every task connected, or none runs).
//! Must not: connect anything itself.

use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};

use crate::metrics::Timeline;

/// One task's side of the start barrier.
pub struct Barrier {
    ready: Sender<Result<(), String>>,
    go: Receiver<Arc<Timeline>>,
}

impl Barrier {
    pub fn new(ready: Sender<Result<(), String>>, go: Receiver<Arc<Timeline>>) -> Barrier {
        Barrier { ready, go }
    }

    /// The task cannot connect: tells the run `why` (the run then starts no
    /// task).
    pub fn failed(&self, why: String) {
        let _ = self.ready.send(Err(why));
    }

    /// The task is connected: says so and waits for the run's timeline; an
    /// error when the run was abandoned before it started.
    pub fn connected(self) -> Result<Arc<Timeline>> {
        let _ = self.ready.send(Ok(()));
        self.go
            .recv()
            .map_err(|_| anyhow!("run aborted before start"))
    }
}

/// Runs `task(spec, barrier)` on a thread of its own named `name`.
pub fn spawn<S, T>(
    name: String,
    spec: S,
    barrier: Barrier,
    task: fn(S, Barrier) -> Result<T>,
) -> Result<JoinHandle<Result<T>>>
where
    S: Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || task(spec, barrier))
        .with_context(|| format!("spawning the {name} thread"))
}
