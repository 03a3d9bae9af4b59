//! Topic metadata files: `<data_dir>/__topics/<topic>.meta`.
//!
//! Owns: the file format (`key=value` lines: `topic_id=<32 hex>`,
//! `partitions=N`, then `config.<name>=<value>` per override) and reading,
//! writing (atomically) and removing these files. The meta file is a
//! topic's commit point: it is written after its partition directories
//! exist and removed before they are deleted. Must not: validate config
//! values (config.rs does) or touch partition data.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::durable_file::{remove_durably, write_atomically};
use crate::error::{Error, Result};

pub(crate) const TOPICS_DIR: &str = "__topics";
const META_EXT: &str = "meta";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicMeta {
    pub name: String,
    pub topic_id: [u8; 16],
    pub partitions: u32,
    pub overrides: BTreeMap<String, String>,
}

impl TopicMeta {
    fn encode(&self) -> String {
        let mut text = format!(
            "topic_id={}\npartitions={}\n",
            hex(&self.topic_id),
            self.partitions
        );
        for (name, value) in &self.overrides {
            // Writing into a String cannot fail.
            let _ = writeln!(text, "config.{name}={value}");
        }
        text
    }

    fn decode(name: &str, text: &str) -> std::result::Result<Self, String> {
        let mut topic_id = None;
        let mut partitions = None;
        let mut overrides = BTreeMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line:?} is not key=value"))?;
            match key {
                "topic_id" => {
                    topic_id = Some(unhex(value).ok_or_else(|| format!("bad topic_id {value:?}"))?)
                }
                "partitions" => {
                    partitions = Some(
                        value
                            .parse()
                            .map_err(|_| format!("bad partitions {value:?}"))?,
                    )
                }
                _ => match key.strip_prefix("config.") {
                    Some(config) => {
                        overrides.insert(config.to_string(), value.to_string());
                    }
                    None => return Err(format!("unknown key {key:?}")),
                },
            }
        }
        Ok(TopicMeta {
            name: name.to_string(),
            topic_id: topic_id.ok_or("missing topic_id")?,
            partitions: partitions.ok_or("missing partitions")?,
            overrides,
        })
    }
}

fn hex(bytes: &[u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

pub(crate) fn topics_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(TOPICS_DIR)
}

fn meta_path(data_dir: &Path, name: &str) -> PathBuf {
    topics_dir(data_dir).join(format!("{name}.{META_EXT}"))
}

pub(crate) fn write(data_dir: &Path, meta: &TopicMeta) -> Result<()> {
    write_atomically(&meta_path(data_dir, &meta.name), meta.encode().as_bytes())
}

pub(crate) fn remove(data_dir: &Path, name: &str) -> Result<()> {
    remove_durably(&meta_path(data_dir, name))
}

/// Every topic's metadata, sorted by name.
pub(crate) fn read_all(data_dir: &Path) -> Result<Vec<TopicMeta>> {
    let dir = topics_dir(data_dir);
    let mut metas = Vec::new();
    for entry in fs::read_dir(&dir).map_err(Error::io(&dir))? {
        let path = entry.map_err(Error::io(&dir))?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".meta"))
        else {
            continue;
        };
        let text = fs::read_to_string(&path).map_err(Error::io(&path))?;
        let meta = TopicMeta::decode(name, &text).map_err(|reason| Error::Corrupt {
            path: path.clone(),
            position: 0,
            reason,
        })?;
        metas.push(meta);
    }
    metas.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(metas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TopicMeta {
        TopicMeta {
            name: "orders.v1".into(),
            topic_id: [0xab; 16],
            partitions: 3,
            overrides: [
                ("retention.ms".to_string(), "1000".to_string()),
                ("cleanup.policy".to_string(), "delete".to_string()),
            ]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn encodes_as_key_value_lines_and_round_trips() {
        let meta = sample();
        let text = meta.encode();
        assert!(text.starts_with("topic_id=abababababababababababababababab\npartitions=3\n"));
        assert!(text.contains("config.retention.ms=1000\n"));
        assert_eq!(TopicMeta::decode("orders.v1", &text), Ok(meta));
    }

    #[test]
    fn rejects_malformed_files() {
        for bad in [
            "partitions=3\n",
            "topic_id=zz\npartitions=1\n",
            "topic_id=abababababababababababababababab\n",
            "what\n",
        ] {
            assert!(TopicMeta::decode("t", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn files_round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(topics_dir(dir.path())).expect("mkdir");
        write(dir.path(), &sample()).expect("write");
        assert_eq!(read_all(dir.path()).expect("read"), vec![sample()]);
        remove(dir.path(), "orders.v1").expect("remove");
        assert!(read_all(dir.path()).expect("read").is_empty());
    }
}
