//! Result lines, test messages and the checks on what came back: the Rust
//! twin of compat/python/compat_common.py (compat/README.md, "Driver
//! contract"). Pure functions; no Kafka client here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One consumed message: partition, offset, value.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub value: Vec<u8>,
}

/// Where the producer was told a message landed.
pub type Position = (i32, i64);

pub struct Reporter {
    pub client: &'static str,
    pub version: String,
    pub emitted: HashSet<String>,
}

impl Reporter {
    pub fn emit(&mut self, check: &str, result: &str, detail: &str) {
        println!(
            "{{\"client\": {}, \"version\": {}, \"check\": {}, \"result\": {}, \"detail\": {}}}",
            json(self.client),
            json(&self.version),
            json(check),
            json(result),
            json(detail)
        );
        self.emitted.insert(check.to_string());
    }

    pub fn verdict(&mut self, check: &str, problems: &[String], ok_detail: &str) {
        if problems.is_empty() {
            self.emit(check, "pass", ok_detail);
        } else {
            let detail: String = problems.join("; ").chars().take(2000).collect();
            self.emit(check, "fail", &detail);
        }
    }
}

fn json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn log(msg: &str) {
    eprintln!("[compat-rdkafka] {msg}");
}

pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:010x}", nanos & 0xff_ffff_ffff)
}

pub fn message_key(i: usize) -> String {
    format!("key-{i}")
}

pub fn message_value(tag: &str, i: usize) -> String {
    format!("{tag}-{i:07}")
}

fn value_index(tag: &str, value: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(value).ok()?;
    let (head, num) = s.rsplit_once('-')?;
    (head == tag).then(|| num.parse().ok()).flatten()
}

pub fn verify_acks(n: usize, acks: &HashMap<usize, Position>, errors: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(first) = errors.first() {
        problems.push(format!("{} delivery errors, first: {first}", errors.len()));
    }
    if acks.len() != n {
        problems.push(format!("{} of {n} acknowledged", acks.len()));
    }
    let distinct: HashSet<_> = acks.values().collect();
    if distinct.len() != acks.len() {
        problems.push("two messages acknowledged at the same partition/offset".into());
    }
    if acks.values().any(|&(p, o)| p < 0 || o < 0) {
        problems.push("acks without partition/offset".into());
    }
    problems
}

/// Exactly the n messages of `tag`, each once, in produce order per
/// partition, and (`acks` given) each at the position its ack named.
pub fn verify_read_back(
    tag: &str,
    n: usize,
    records: &[Record],
    acks: Option<&HashMap<usize, Position>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen: HashMap<usize, Position> = HashMap::new();
    let mut by_partition: BTreeMap<i32, BTreeMap<i64, usize>> = BTreeMap::new();
    let (mut dups, mut foreign) = (0, 0);
    for r in records {
        match value_index(tag, &r.value) {
            Some(i) if i < n => {
                if seen.insert(i, (r.partition, r.offset)).is_some() {
                    dups += 1;
                } else {
                    by_partition
                        .entry(r.partition)
                        .or_default()
                        .insert(r.offset, i);
                }
            }
            _ => foreign += 1,
        }
    }
    if foreign > 0 {
        problems.push(format!("{foreign} records that are not ours"));
    }
    if dups > 0 {
        problems.push(format!("{dups} duplicates"));
    }
    if seen.len() != n {
        problems.push(format!("read {} of {n}", seen.len()));
    }
    for (p, by_offset) in &by_partition {
        let seq: Vec<usize> = by_offset.values().copied().collect();
        if seq.windows(2).any(|w| w[0] > w[1]) {
            problems.push(format!("partition {p}: produce order not kept"));
        }
    }
    let moved = acks.map_or(0, |acks| {
        seen.iter()
            .filter(|(i, pos)| acks.get(i) != Some(pos))
            .count()
    });
    if moved > 0 {
        problems.push(format!("{moved} records not at their acked position"));
    }
    problems
}

pub fn partition_counts(records: &[Record]) -> BTreeMap<i32, usize> {
    let mut counts = BTreeMap::new();
    for r in records {
        *counts.entry(r.partition).or_default() += 1;
    }
    counts
}

/// The records whose value is one of `tag`'s messages.
pub fn with_tag(tag: &str, records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| value_index(tag, &r.value).is_some())
        .cloned()
        .collect()
}

/// Per partition, the offset after the last record read.
pub fn end_of(records: &[Record]) -> BTreeMap<i32, i64> {
    let mut end = BTreeMap::new();
    for r in records {
        let e = end.entry(r.partition).or_insert(0);
        *e = (*e).max(r.offset + 1);
    }
    end
}

/// The group committed, on every partition, at least past the last
/// committed record (resuming re-reads nothing committed) and at most the
/// last stable offset (nothing beyond what is there).
pub fn verify_txn_offsets(
    committed: &BTreeMap<i32, i64>,
    data_end: &BTreeMap<i32, i64>,
    lso: &BTreeMap<i32, i64>,
    partitions: i32,
) -> Vec<String> {
    let mut problems = Vec::new();
    for p in 0..partitions {
        let end = data_end.get(&p).copied().unwrap_or(0);
        let stable = lso.get(&p).copied().unwrap_or(0);
        match committed.get(&p) {
            None if end > 0 => problems.push(format!(
                "partition {p}: no committed offset, committed records end at {end}"
            )),
            Some(&c) if c < end || c > stable => problems.push(format!(
                "partition {p}: group committed {c}, want {end}..{stable} \
                 (end of the committed records .. last stable offset)"
            )),
            _ => {}
        }
    }
    problems
}

/// Each member owns exactly `per_member` partitions, together all, none twice.
pub fn split_ok(assigned: &[Vec<i32>], per_member: usize, partitions: usize) -> bool {
    let union: HashSet<i32> = assigned.iter().flatten().copied().collect();
    assigned.iter().all(|a| a.len() == per_member)
        && union.len() == partitions
        && assigned.iter().map(Vec::len).sum::<usize>() == partitions
}

pub fn describe_split(assigned: &[Vec<i32>]) -> String {
    assigned
        .iter()
        .map(|a| format!("{a:?}").replace(' ', ""))
        .collect::<Vec<_>>()
        .join(" ")
}

/// True once `cond` has held for `hold` in a row; false after `timeout`.
pub fn wait_stable(mut cond: impl FnMut() -> bool, timeout: Duration, hold: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut since: Option<Instant> = None;
    while Instant::now() < deadline {
        if cond() {
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed() >= hold {
                return true;
            }
        } else {
            since = None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// What commit-resume phase a leaves for phase b (a small line-based file).
#[derive(Debug, Default)]
pub struct ResumeState {
    pub topic: String,
    pub group: String,
    pub committed: BTreeMap<i32, i64>,
    pub end_offsets: BTreeMap<i32, i64>,
    pub consumed: Vec<Position>,
}

impl ResumeState {
    pub fn to_text(&self) -> String {
        let map = |m: &BTreeMap<i32, i64>| {
            m.iter()
                .map(|(p, o)| format!("{p}:{o}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let consumed = self
            .consumed
            .iter()
            .map(|(p, o)| format!("{p}:{o}"))
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "topic={}\ngroup={}\ncommitted={}\nend_offsets={}\nconsumed={}\n",
            self.topic,
            self.group,
            map(&self.committed),
            map(&self.end_offsets),
            consumed
        )
    }

    pub fn from_text(text: &str) -> anyhow::Result<Self> {
        let pairs = |s: &str| -> anyhow::Result<Vec<Position>> {
            s.split_whitespace()
                .map(|kv| {
                    let (p, o) = kv
                        .split_once(':')
                        .ok_or_else(|| anyhow::anyhow!("bad pair {kv}"))?;
                    Ok((p.parse()?, o.parse()?))
                })
                .collect()
        };
        let mut s = ResumeState::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k {
                "topic" => s.topic = v.to_string(),
                "group" => s.group = v.to_string(),
                "committed" => s.committed = pairs(v)?.into_iter().collect(),
                "end_offsets" => s.end_offsets = pairs(v)?.into_iter().collect(),
                "consumed" => s.consumed = pairs(v)?,
                _ => {}
            }
        }
        Ok(s)
    }

    /// Where phase b must start: the commit, or 0 (earliest) if never committed.
    pub fn start(&self, partition: i32) -> i64 {
        self.committed.get(&partition).copied().unwrap_or(0)
    }

    pub fn done(&self, records: &[Record]) -> bool {
        let mut high: HashMap<i32, i64> = HashMap::new();
        for r in records {
            let h = high.entry(r.partition).or_insert(0);
            *h = (*h).max(r.offset + 1);
        }
        self.end_offsets
            .iter()
            .all(|(p, end)| high.get(p).copied().unwrap_or(self.start(*p)) >= *end)
    }

    pub fn verify(&self, records: &[Record]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut first: HashMap<i32, i64> = HashMap::new();
        let mut got: HashSet<Position> = HashSet::new();
        for r in records {
            first.entry(r.partition).or_insert(r.offset);
            got.insert((r.partition, r.offset));
        }
        for (&p, &end) in &self.end_offsets {
            let start = self.start(p);
            if start < end && first.get(&p) != Some(&start) {
                problems.push(format!(
                    "partition {p}: committed {start}, first read {:?}",
                    first.get(&p)
                ));
            }
        }
        let reread = self.consumed.iter().filter(|pos| got.contains(pos)).count();
        if reread > 0 {
            problems.push(format!(
                "{reread} records re-read that phase a had committed"
            ));
        }
        let missing: usize = self
            .end_offsets
            .iter()
            .map(|(&p, &end)| {
                (self.start(p)..end)
                    .filter(|o| !got.contains(&(p, *o)))
                    .count()
            })
            .sum();
        if missing > 0 {
            problems.push(format!("{missing} uncommitted records not read"));
        }
        if got.len() != records.len() {
            problems.push(format!(
                "{} duplicate deliveries in phase b",
                records.len() - got.len()
            ));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, offset: i64, tag: &str, i: usize) -> Record {
        Record {
            partition,
            offset,
            value: message_value(tag, i).into_bytes(),
        }
    }

    #[test]
    fn read_back_catches_duplicates_and_reordering() {
        let acks: HashMap<usize, Position> = [(0, (0, 0)), (1, (0, 1))].into();
        assert!(
            verify_read_back("t", 2, &[rec(0, 0, "t", 0), rec(0, 1, "t", 1)], Some(&acks))
                .is_empty()
        );
        assert!(
            !verify_read_back("t", 2, &[rec(0, 0, "t", 0), rec(0, 1, "t", 0)], Some(&acks))
                .is_empty()
        );
        assert!(
            !verify_read_back("t", 2, &[rec(0, 0, "t", 1), rec(0, 1, "t", 0)], Some(&acks))
                .is_empty()
        );
    }

    #[test]
    fn txn_offsets_between_committed_records_and_stable_offset() {
        let end: BTreeMap<i32, i64> = [(0, 3), (1, 2)].into();
        let lso: BTreeMap<i32, i64> = [(0, 6), (1, 2), (2, 0)].into();
        let ok: BTreeMap<i32, i64> = [(0, 4), (1, 2)].into();
        assert!(verify_txn_offsets(&ok, &end, &lso, 3).is_empty());
        let behind: BTreeMap<i32, i64> = [(0, 2), (1, 2)].into();
        assert!(!verify_txn_offsets(&behind, &end, &lso, 3).is_empty());
        let missing: BTreeMap<i32, i64> = [(0, 4)].into();
        assert!(!verify_txn_offsets(&missing, &end, &lso, 3).is_empty());
    }

    #[test]
    fn resume_state_round_trips_and_checks_start() {
        let s = ResumeState {
            topic: "t".into(),
            group: "g".into(),
            committed: [(0, 2)].into(),
            end_offsets: [(0, 4), (1, 1)].into(),
            consumed: vec![(0, 0), (0, 1)],
        };
        let back = ResumeState::from_text(&s.to_text()).expect("parses");
        assert_eq!(back.committed, s.committed);
        let good = [rec(0, 2, "t", 2), rec(0, 3, "t", 3), rec(1, 0, "t", 4)];
        assert!(back.done(&good) && back.verify(&good).is_empty());
        let reread = [
            rec(0, 1, "t", 1),
            rec(0, 2, "t", 2),
            rec(0, 3, "t", 3),
            rec(1, 0, "t", 4),
        ];
        assert!(!back.verify(&reread).is_empty());
    }
}
