//! Reports: the final JSON of one replica, and the merge of several.
//!
//! Owns: [`Tally`] (the mergeable facts: per-partition offset sets, per
//! producer sequence sets, the latency histogram), the report schema
//! (README "Report JSON"), reading reports back, and the verdict. A replica
//! report and a merged one are built by the same [`build_report`], so one
//! replica's counts and a merge of one report agree by construction.
//! Must not: talk to Kafka or fetch ledgers (callers pass them in).
//!
//! Counts are recomputed from the sets, which is what makes merging exact:
//! - distinct records = Σ partitions |consumed offsets|;
//! - redeliveries = records consumed − distinct records (a record consumed by
//!   two replicas after a rebalance is one redelivery, not a duplicate);
//! - verified = distinct records − foreign records;
//! - duplicates = verified − Σ producers |sequences seen|.

use std::collections::BTreeMap;

use base64::Engine as _;
use chronik_harness::histogram::{
    merge_into, new_latency_histogram, LatencyHistogram, Percentiles,
};
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use crate::ledger::{combine, reconcile, Ledger, ProducerReconciliation};
use crate::verify::{Examples, Verifier, MAX_EXAMPLES};
use crate::Error;
use chronik_harness::intervals::IntervalSet;

/// Version of the report layout; bump when a field changes meaning.
pub const REPORT_SCHEMA_VERSION: u32 = 1;
/// Gap ranges listed per producer (the counts are exact).
const MAX_LISTED_GAPS: usize = 1000;

/// What one partition's records were, as sets of offsets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionTally {
    pub consumed: IntervalSet,
    #[serde(default)]
    pub foreign: IntervalSet,
    #[serde(default)]
    pub corrupt: IntervalSet,
    #[serde(default)]
    pub reordered: IntervalSet,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
}

/// Everything a report's counts are computed from; merging is set union.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Records polled, redeliveries included.
    pub consumed: u64,
    pub envelope_errors: u64,
    pub partitions: BTreeMap<(String, i32), PartitionTally>,
    pub producers: BTreeMap<u64, IntervalSet>,
    pub latency: LatencyHistogram,
    pub examples: Examples,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            consumed: 0,
            envelope_errors: 0,
            partitions: BTreeMap::new(),
            producers: BTreeMap::new(),
            latency: new_latency_histogram(),
            examples: Examples::default(),
        }
    }
}

impl Tally {
    pub fn from_verifier(v: &Verifier) -> Tally {
        let partitions = v
            .partitions()
            .iter()
            .map(|p| {
                let tally = PartitionTally {
                    consumed: p.consumed.clone(),
                    foreign: p.foreign.clone(),
                    corrupt: p.corrupt.clone(),
                    reordered: p.reordered.clone(),
                    log_start_offset: p.log_start_offset,
                    high_watermark: p.high_watermark,
                };
                ((p.topic.clone(), p.partition), tally)
            })
            .collect();
        Tally {
            consumed: v.counts().consumed,
            envelope_errors: v.counts().envelope_errors,
            partitions,
            producers: v
                .producers()
                .iter()
                .map(|p| (p.producer_id, p.seen.clone()))
                .collect(),
            latency: v.latency_total(),
            examples: v.examples().clone(),
        }
    }

    /// Adds another replica's (or merge's) facts.
    pub fn absorb(&mut self, other: Tally) {
        self.consumed += other.consumed;
        self.envelope_errors += other.envelope_errors;
        for (key, p) in other.partitions {
            let mine = self.partitions.entry(key).or_default();
            mine.consumed = mine.consumed.union(&p.consumed);
            mine.foreign = mine.foreign.union(&p.foreign);
            mine.corrupt = mine.corrupt.union(&p.corrupt);
            mine.reordered = mine.reordered.union(&p.reordered);
            mine.log_start_offset = min_some(mine.log_start_offset, p.log_start_offset);
            mine.high_watermark = mine.high_watermark.max(p.high_watermark);
        }
        for (id, seen) in other.producers {
            let mine = self.producers.entry(id).or_default();
            *mine = mine.union(&seen);
        }
        merge_into(&mut self.latency, &other.latency);
        for (mine, theirs) in [
            (&mut self.examples.duplicates, other.examples.duplicates),
            (&mut self.examples.reordered, other.examples.reordered),
            (&mut self.examples.corrupt, other.examples.corrupt),
        ] {
            for e in theirs {
                if mine.len() < MAX_EXAMPLES && !mine.contains(&e) {
                    mine.push(e);
                }
            }
        }
    }
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub schema_version: u32,
    /// "replica" or "merged".
    pub kind: String,
    /// The harness `RunMeta` of the run that wrote this report.
    pub meta: serde_json::Value,
    /// For a merged report: the reports it was made from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceSummary>,
    pub verdict: VerdictReport,
    pub counts: ReportCounts,
    pub latency: LatencyReport,
    pub coverage: CoverageReport,
    pub producers: Vec<ProducerReport>,
    pub reconciliation: Option<ReconciliationReport>,
    pub examples: Examples,
    /// How the replica's run went (absent in merged reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunStats>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStats {
    /// "signal" or "idle".
    pub stop_reason: String,
    pub rebalances: u64,
    /// Each rebalance callback with its wall-clock time, so a report can
    /// tell a consumer-group event from a broker stall.
    pub rebalance_events: Vec<crate::consume::RebalanceEvent>,
    /// Process start to report.
    pub wall_secs: f64,
    /// First to last record consumed.
    pub active_secs: f64,
    /// Verified records per second of `active_secs`.
    pub verified_per_sec: f64,
    /// User + system CPU of the whole process and of the poll thread (/proc).
    pub process_cpu_secs: Option<f64>,
    pub poll_thread_cpu_secs: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSummary {
    pub path: String,
    pub kind: String,
    pub consumed: u64,
    pub verified: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerdictReport {
    /// No failure found.
    pub clean: bool,
    /// Every offset of every partition seen was consumed, so gaps and loss
    /// are facts rather than a partial view.
    pub conclusive: bool,
    /// Any of: lost, gaps, duplicates, corrupt, reordered.
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportCounts {
    pub consumed: u64,
    pub verified: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub corrupt: u64,
    pub redeliveries: u64,
    pub foreign: u64,
    pub envelope_errors: u64,
    pub producers: u64,
    pub distinct_sequences: u64,
    /// Sequences missing between a producer's lowest and highest seen.
    pub gaps: u64,
    /// Gaps not explained by a ledger's failed productions.
    pub unexplained_gaps: u64,
    /// Acknowledged (per the ledgers) but never consumed.
    pub lost: u64,
    pub failed_not_consumed: u64,
    pub delivered_despite_failure: u64,
    pub unknown_not_consumed: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyReport {
    /// End-to-end: consume time − envelope send time, µs.
    pub e2e: Percentiles,
    /// The whole histogram, HdrHistogram V2 deflate, base64.
    pub histogram: String,
    /// The interval log beside the report, if one was written.
    pub hlog: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CoverageReport {
    pub complete: bool,
    pub unconsumed_offsets: u64,
    pub partitions: Vec<PartitionReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionReport {
    pub topic: String,
    pub partition: i32,
    #[serde(flatten)]
    pub tally: PartitionTally,
    #[serde(default)]
    pub records: u64,
    /// Offsets in [logStartOffset, highWatermark) not consumed.
    #[serde(default)]
    pub unconsumed: Option<u64>,
    #[serde(default)]
    pub lag: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerReport {
    pub producer_id: u64,
    #[serde(default)]
    pub producer_id_hex: String,
    #[serde(default)]
    pub count: u64,
    #[serde(default)]
    pub first: Option<u64>,
    #[serde(default)]
    pub last: Option<u64>,
    pub seen: IntervalSet,
    #[serde(default)]
    pub gap_count: u64,
    /// At most 1000 ranges; `gapCount` is exact.
    #[serde(default)]
    pub gaps: Vec<[u64; 2]>,
    #[serde(default, skip_deserializing)]
    pub ledger: Option<ProducerReconciliation>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationReport {
    pub sources: Vec<String>,
    pub ledger_producers: u64,
    pub acknowledged: u64,
    pub lost: u64,
    pub failed_not_consumed: u64,
    pub delivered_despite_failure: u64,
    pub unknown_not_consumed: u64,
    pub consumed_not_in_ledger: u64,
    /// Producer ids consumed that no ledger describes.
    pub producers_without_ledger: Vec<u64>,
}

/// Ledgers by the source they were read from.
pub type LedgerSources = Vec<(String, Vec<Ledger>)>;

/// The report of `tally` against `ledgers`.
pub fn build_report(
    kind: &str,
    meta: serde_json::Value,
    tally: &Tally,
    ledgers: &LedgerSources,
    hlog: Option<String>,
    sources: Vec<SourceSummary>,
) -> Report {
    let mut counts = ReportCounts {
        consumed: tally.consumed,
        envelope_errors: tally.envelope_errors,
        ..Default::default()
    };
    let (mut distinct, mut unconsumed_total, mut coverage_known) = (0u64, 0u64, true);
    let mut partitions = Vec::with_capacity(tally.partitions.len());
    for ((topic, partition), p) in &tally.partitions {
        distinct += p.consumed.len();
        counts.foreign += p.foreign.len();
        counts.corrupt += p.corrupt.len();
        counts.reordered += p.reordered.len();
        let start = p.log_start_offset.unwrap_or(0).max(0) as u64;
        let unconsumed = p.high_watermark.map(|hw| {
            let hw = hw.max(0) as u64;
            if hw > start {
                p.consumed.complement_within(start, hw - 1).len()
            } else {
                0
            }
        });
        match unconsumed {
            Some(n) => unconsumed_total += n,
            None => coverage_known = false,
        }
        let position = p.consumed.last().map_or(start as i64, |o| o as i64 + 1);
        partitions.push(PartitionReport {
            topic: topic.clone(),
            partition: *partition,
            tally: p.clone(),
            records: p.consumed.len(),
            unconsumed,
            lag: p.high_watermark.map(|hw| (hw - position).max(0)),
        });
    }
    counts.redeliveries = counts.consumed.saturating_sub(distinct);
    counts.verified = distinct.saturating_sub(counts.foreign);
    counts.envelope_errors = counts.envelope_errors.min(counts.foreign);

    // Ledgers by producer id.
    let mut by_producer: BTreeMap<u64, Vec<&Ledger>> = BTreeMap::new();
    for (_, list) in ledgers {
        for l in list {
            if let Some(id) = l.id() {
                by_producer.entry(id).or_default().push(l);
            }
        }
    }
    let mut rec = ReconciliationReport {
        sources: ledgers.iter().map(|(s, _)| s.clone()).collect(),
        ledger_producers: by_producer.len() as u64,
        acknowledged: 0,
        lost: 0,
        failed_not_consumed: 0,
        delivered_despite_failure: 0,
        unknown_not_consumed: 0,
        consumed_not_in_ledger: 0,
        producers_without_ledger: Vec::new(),
    };
    let empty = IntervalSet::new();
    let ids: Vec<u64> = tally
        .producers
        .keys()
        .chain(by_producer.keys())
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut producers = Vec::with_capacity(ids.len());
    for id in ids {
        let seen = tally.producers.get(&id).unwrap_or(&empty);
        let gaps = seen.gaps();
        counts.distinct_sequences += seen.len();
        counts.gaps += gaps.len();
        let ledger = by_producer
            .get(&id)
            .map(|list| reconcile(&combine(list), seen));
        match &ledger {
            Some(r) => {
                let failed = combine(&by_producer[&id]).failed;
                counts.unexplained_gaps += gaps.difference(&failed).len();
                rec.acknowledged += r.acknowledged;
                rec.lost += r.lost.len();
                rec.failed_not_consumed += r.failed_not_consumed.len();
                rec.delivered_despite_failure += r.delivered_despite_failure;
                rec.unknown_not_consumed += r.unknown_not_consumed.len();
                rec.consumed_not_in_ledger += r.consumed_not_in_ledger;
            }
            None => {
                counts.unexplained_gaps += gaps.len();
                rec.producers_without_ledger.push(id);
            }
        }
        producers.push(ProducerReport {
            producer_id: id,
            producer_id_hex: format!("{id:016x}"),
            count: seen.len(),
            first: seen.first(),
            last: seen.last(),
            seen: seen.clone(),
            gap_count: gaps.len(),
            gaps: gaps
                .ranges()
                .iter()
                .take(MAX_LISTED_GAPS)
                .copied()
                .collect(),
            ledger,
        });
    }
    counts.producers = tally.producers.len() as u64;
    counts.duplicates = counts.verified.saturating_sub(counts.distinct_sequences);
    counts.lost = rec.lost;
    counts.failed_not_consumed = rec.failed_not_consumed;
    counts.delivered_despite_failure = rec.delivered_despite_failure;
    counts.unknown_not_consumed = rec.unknown_not_consumed;

    let complete = coverage_known && unconsumed_total == 0;
    let verdict = verdict(&counts, complete, unconsumed_total, coverage_known);
    Report {
        schema_version: REPORT_SCHEMA_VERSION,
        kind: kind.to_string(),
        meta,
        sources,
        verdict,
        counts,
        latency: LatencyReport {
            e2e: Percentiles::of(&tally.latency),
            histogram: encode_histogram(&tally.latency),
            hlog,
        },
        coverage: CoverageReport {
            complete,
            unconsumed_offsets: unconsumed_total,
            partitions,
        },
        producers,
        reconciliation: if ledgers.is_empty() { None } else { Some(rec) },
        examples: tally.examples.clone(),
        run: None,
    }
}

fn verdict(
    c: &ReportCounts,
    complete: bool,
    unconsumed: u64,
    coverage_known: bool,
) -> VerdictReport {
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    for (name, n) in [
        ("duplicates", c.duplicates),
        ("corrupt", c.corrupt),
        ("reordered", c.reordered),
    ] {
        if n > 0 {
            failures.push(name.to_string());
        }
    }
    if complete {
        if c.lost > 0 {
            failures.push("lost".into());
        }
        if c.unexplained_gaps > 0 {
            failures.push("gaps".into());
        }
    } else {
        let why = if coverage_known {
            format!("{unconsumed} offsets of the partitions seen were not consumed by this report")
        } else {
            "some partitions' high watermarks are unknown".to_string()
        };
        notes.push(format!("coverage incomplete ({why}): gaps ({}) and lost ({}) are not conclusive; merge every replica's report", c.gaps, c.lost));
    }
    if c.failed_not_consumed > 0 {
        notes.push(format!(
            "{} sequences whose production failed are absent (expected, not loss)",
            c.failed_not_consumed
        ));
    }
    VerdictReport {
        clean: failures.is_empty(),
        conclusive: complete,
        failures,
        notes,
    }
}

pub fn encode_histogram(h: &LatencyHistogram) -> String {
    let mut bytes = Vec::new();
    // Serialising into a Vec cannot fail for I/O; a histogram of the shared
    // shape always fits V2. On the impossible error, an empty string.
    if V2DeflateSerializer::new().serialize(h, &mut bytes).is_err() {
        return String::new();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode_histogram(text: &str) -> Result<LatencyHistogram, String> {
    if text.is_empty() {
        return Ok(new_latency_histogram());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())?;
    let h: LatencyHistogram = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("{e:?}"))?;
    let mut out = new_latency_histogram();
    merge_into(&mut out, &h);
    Ok(out)
}

/// The parts of a report that merging reads back.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReportInput {
    schema_version: u32,
    kind: String,
    counts: ReportCounts,
    latency: LatencyInput,
    coverage: CoverageInput,
    producers: Vec<ProducerReport>,
    #[serde(default)]
    examples: Examples,
}

#[derive(Debug, Deserialize)]
struct LatencyInput {
    histogram: String,
}

#[derive(Debug, Deserialize)]
struct CoverageInput {
    partitions: Vec<PartitionReport>,
}

/// Reads a report written by [`build_report`] back into its tally.
pub fn read_report(path: &std::path::Path) -> Result<(Tally, SourceSummary), Error> {
    let bad = |reason: String| Error::Report {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let input: ReportInput = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if input.schema_version != REPORT_SCHEMA_VERSION {
        return Err(bad(format!(
            "schema version {} (expected {REPORT_SCHEMA_VERSION})",
            input.schema_version
        )));
    }
    let tally = Tally {
        consumed: input.counts.consumed,
        envelope_errors: input.counts.envelope_errors,
        partitions: input
            .coverage
            .partitions
            .into_iter()
            .map(|p| ((p.topic, p.partition), p.tally))
            .collect(),
        producers: input
            .producers
            .into_iter()
            .map(|p| (p.producer_id, p.seen))
            .collect(),
        latency: decode_histogram(&input.latency.histogram)
            .map_err(|e| bad(format!("latency histogram: {e}")))?,
        examples: input.examples,
    };
    let summary = SourceSummary {
        path: path.display().to_string(),
        kind: input.kind,
        consumed: input.counts.consumed,
        verified: input.counts.verified,
    };
    Ok((tally, summary))
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
#[path = "report_tests.rs"]
mod tests;
