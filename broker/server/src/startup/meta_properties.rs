//! `<data-dir>/meta.properties`, as Kafka writes it (`version=1`):
//! `cluster.id`, `node.id` and (KIP-853) `directory.id`, the data
//! directory's random Uuid in Kafka's text form (URL-safe base64, 22
//! characters). Kafka's `kafka-metadata-quorum.sh add-controller` reads
//! the directory id from here (its `metadata.log.dir` / `log.dirs`).
//!
//! Owns: reading, creating and rewriting that file (atomically), the
//! directory id's generation and parsing. Must not: decide the cluster id
//! (the quorum does; `cluster_start::adopt_cluster_id`).

use std::path::Path;

use anyhow::Context;
use base64::Engine;

const FILE: &str = "meta.properties";

/// What a data directory's meta.properties holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    /// Stable for the directory's life: a wiped directory gets a new one,
    /// and the quorum then no longer counts it as the voter it was.
    pub directory_id: [u8; 16],
}

/// Reads `<data_dir>/meta.properties`, creating it (fresh cluster id and
/// directory id) on first start and adding a directory id to one written
/// before them; refuses one that belongs to another node id.
pub fn load_or_create(data_dir: &Path, node_id: i32) -> anyhow::Result<MetaProperties> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating data dir {}", data_dir.display()))?;
    let path = data_dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let meta = MetaProperties {
                cluster_id: uuid::Uuid::new_v4().simple().to_string(),
                node_id,
                directory_id: new_directory_id(),
            };
            store(data_dir, &meta)?;
            return Ok(meta);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let (mut cluster_id, mut directory_id) = (None, None);
    for line in text.lines() {
        match line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("cluster.id", v)) => cluster_id = Some(v.to_string()),
            Some(("directory.id", v)) => {
                directory_id = Some(
                    parse_directory_id(v)
                        .with_context(|| format!("{}: directory.id {v:?}", path.display()))?,
                )
            }
            Some(("node.id", v)) if v != node_id.to_string() => anyhow::bail!(
                "{} belongs to node.id {v} but this node is --node-id {node_id}",
                path.display()
            ),
            _ => {}
        }
    }
    let cluster_id = cluster_id.with_context(|| format!("{} has no cluster.id", path.display()))?;
    let meta = MetaProperties {
        cluster_id,
        node_id,
        directory_id: directory_id.unwrap_or_else(new_directory_id),
    };
    if directory_id.is_none() {
        store(data_dir, &meta)?;
    }
    Ok(meta)
}

/// Rewrites meta.properties with the quorum's `cluster_id` (the
/// directory id stays).
pub fn store_cluster_id(data_dir: &Path, node_id: i32, cluster_id: &str) -> anyhow::Result<()> {
    let mut meta = load_or_create(data_dir, node_id)?;
    meta.cluster_id = cluster_id.to_string();
    store(data_dir, &meta)
}

fn store(data_dir: &Path, meta: &MetaProperties) -> anyhow::Result<()> {
    let path = data_dir.join(FILE);
    let text = format!(
        "version=1\ncluster.id={}\nnode.id={}\ndirectory.id={}\n",
        meta.cluster_id,
        meta.node_id,
        chronik_metadata::uuid_string(&meta.directory_id)
    );
    chronik_log::write_atomically(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// A random Uuid Kafka accepts as a directory id: not one of its reserved
/// ids (all below 100 in the low bits with zero high bits) and not
/// starting with `-` in its text form, as Kafka's `Uuid.randomUuid` avoids.
fn new_directory_id() -> [u8; 16] {
    loop {
        let bytes = *uuid::Uuid::new_v4().as_bytes();
        let reserved = bytes[..15].iter().all(|b| *b == 0);
        if !reserved && !chronik_metadata::uuid_string(&bytes).starts_with('-') {
            return bytes;
        }
    }
}

/// Parses Kafka's Uuid text (22 characters of URL-safe base64).
pub fn parse_directory_id(text: &str) -> anyhow::Result<[u8; 16]> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .context("not URL-safe base64")?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow::anyhow!("{} bytes, a Uuid has 16", b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_keeps_and_upgrades_meta_properties() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = load_or_create(dir.path(), 4).expect("created");
        assert_eq!(load_or_create(dir.path(), 4).expect("read"), first);
        let text = std::fs::read_to_string(dir.path().join(FILE)).expect("written");
        assert!(text.starts_with("version=1\n"), "{text}");
        let written = text
            .lines()
            .find_map(|l| l.strip_prefix("directory.id="))
            .expect("a directory id");
        assert_eq!(written.len(), 22);
        assert_eq!(
            parse_directory_id(written).expect("parses"),
            first.directory_id
        );
        // Rewriting the cluster id keeps the directory id.
        store_cluster_id(dir.path(), 4, "quorum-id").expect("stored");
        let after = load_or_create(dir.path(), 4).expect("read");
        assert_eq!(
            (after.cluster_id.as_str(), after.directory_id),
            ("quorum-id", first.directory_id)
        );
        // Another node's directory is refused.
        assert!(load_or_create(dir.path(), 5).is_err());
        // A file written before directory ids gets one, kept from then on.
        std::fs::write(
            dir.path().join(FILE),
            "version=1\ncluster.id=c\nnode.id=4\n",
        )
        .expect("old file");
        let upgraded = load_or_create(dir.path(), 4).expect("upgraded");
        assert_eq!(load_or_create(dir.path(), 4).expect("read"), upgraded);
        assert!(parse_directory_id("short").is_err());
    }
}
