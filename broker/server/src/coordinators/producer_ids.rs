//! Producer id allocation for InitProducerId: ids are handed out from blocks
//! reserved durably in `<data-dir>/producer-id-block`, so an id is never
//! reused after a restart (a reused id would collide with the sequence state
//! the log keeps for it). Each broker allocates its own ids and they are
//! interleaved by node id (`local * NODE_STRIDE + node_id`),
//! so two brokers never hand out the same id.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;

const BLOCK_SIZE: i64 = 1000;
/// Node ids must be below this to get disjoint producer id ranges.
pub const NODE_STRIDE: i64 = 1024;

#[derive(Debug)]
pub struct ProducerIdAllocator {
    path: PathBuf,
    /// (next id to hand out, first id not yet reserved on disk)
    state: Mutex<(i64, i64)>,
    /// This broker's node id, interleaved into every id (`for_node`).
    node: Option<i64>,
}

impl ProducerIdAllocator {
    pub fn open(data_dir: &Path) -> anyhow::Result<ProducerIdAllocator> {
        let path = data_dir.join("producer-id-block");
        let reserved_until = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .with_context(|| format!("{} does not hold a number", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(ProducerIdAllocator {
            path,
            state: Mutex::new((reserved_until, reserved_until)),
            node: None,
        })
    }

    /// Interleaves `node_id` into every id. Ids handed out before (by a
    /// broker without it) stay below every interleaved one.
    pub fn for_node(mut self, node_id: i32) -> anyhow::Result<ProducerIdAllocator> {
        let node = i64::from(node_id);
        anyhow::ensure!(
            (0..NODE_STRIDE).contains(&node),
            "node id {node_id} must be in 0..{NODE_STRIDE}"
        );
        self.node = Some(node);
        Ok(self)
    }

    /// A producer id never handed out before, on this data directory (and,
    /// by any other node).
    pub fn allocate(&self) -> anyhow::Result<i64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 >= state.1 {
            let reserved_until = state.0 + BLOCK_SIZE;
            persist(&self.path, reserved_until)?;
            state.1 = reserved_until;
        }
        let id = state.0;
        state.0 += 1;
        Ok(match self.node {
            Some(node) => id * NODE_STRIDE + node,
            None => id,
        })
    }
}

fn persist(path: &Path, reserved_until: i64) -> anyhow::Result<()> {
    chronik_log::write_atomically(path, reserved_until.to_string().as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = ProducerIdAllocator::open(dir.path()).expect("open");
        let first: Vec<i64> = (0..3).map(|_| a.allocate().expect("allocate")).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIdAllocator::open(dir.path()).expect("reopen");
        let next = b.allocate().expect("allocate");
        assert!(
            next > 2,
            "after a restart ids continue past the reserved block, got {next}"
        );
    }
}
