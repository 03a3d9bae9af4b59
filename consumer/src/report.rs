//! Reports: the final JSON of one replica, and the merge of several.
//!
//! Owns: the report schema (README "Report JSON"), reading reports back
//! into a `Tally`, coverage (which offsets of the partitions seen were not
//! consumed) and the verdict. A replica report and a merged one are built by
//! the same [`build_report`], so one replica's counts and a merge of one
//! report agree by construction.
//! Must not: talk to Kafka, fetch ledgers (callers pass them in) or define
//! a count: every count is `chronik_harness::assess`'s, from the tally's
//! sets (which is what makes merging exact).

use base64::Engine as _;
use chronik_harness::histogram::{
    merge_into, new_latency_histogram, LatencyHistogram, Percentiles,
};
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use chronik_harness::assess::{assess, LedgerTotals, Totals};
use chronik_harness::intervals::IntervalSet;
use chronik_harness::reconcile::ProducerReconciliation;
use chronik_harness::verify::Examples;

use crate::ledger::Ledger;
use crate::Error;

pub use chronik_harness::tally::{PartitionTally, Tally};

/// Version of the report layout; bump when a field changes meaning.
pub const REPORT_SCHEMA_VERSION: u32 = 1;
/// Gap ranges listed per producer (the counts are exact).
const MAX_LISTED_GAPS: usize = 1000;

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
    pub counts: Totals,
    pub latency: LatencyReport,
    pub coverage: CoverageReport,
    pub producers: Vec<ProducerReport>,
    pub reconciliation: Option<ReconciliationReport>,
    pub examples: Examples,
    /// How the replica's run went (absent in merged reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunStats>,
    /// Share mode only: acceptance, delivery counts, redeliveries explained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<crate::share::report::ShareReport>,
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
    #[serde(flatten)]
    pub totals: LedgerTotals,
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
    let (mut unconsumed_total, mut coverage_known) = (0u64, true);
    let mut partitions = Vec::with_capacity(tally.partitions.len());
    for ((topic, partition), p) in &tally.partitions {
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

    let all_ledgers: Vec<&Ledger> = ledgers.iter().flat_map(|(_, list)| list).collect();
    let assessment = assess(tally, &all_ledgers);
    let counts = assessment.totals;
    let empty = IntervalSet::new();
    let producers = assessment
        .producers
        .into_iter()
        .map(|p| {
            let id = p.producer_id;
            let seen = tally.producers.get(&id).unwrap_or(&empty);
            ProducerReport {
                producer_id: id,
                producer_id_hex: format!("{id:016x}"),
                count: seen.len(),
                first: seen.first(),
                last: seen.last(),
                seen: seen.clone(),
                gap_count: p.gaps.len(),
                gaps: p
                    .gaps
                    .ranges()
                    .iter()
                    .take(MAX_LISTED_GAPS)
                    .copied()
                    .collect(),
                ledger: p.ledger,
            }
        })
        .collect();
    let rec = ReconciliationReport {
        sources: ledgers.iter().map(|(s, _)| s.clone()).collect(),
        totals: assessment.ledgers,
    };

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
        share: None,
    }
}

fn verdict(c: &Totals, complete: bool, unconsumed: u64, coverage_known: bool) -> VerdictReport {
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    for (name, n) in [
        ("duplicates", c.records.duplicates),
        ("corrupt", c.records.corrupt),
        ("reordered", c.records.reordered),
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
    counts: Totals,
    latency: LatencyInput,
    coverage: CoverageInput,
    producers: Vec<ProducerReport>,
    #[serde(default)]
    examples: Examples,
    #[serde(default)]
    share: serde_json::Value,
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
    read_report_with_share(path).map(|(t, s, _)| (t, s))
}

/// [`read_report`], with the report's `share` section (share mode) read
/// back into a share tally.
pub fn read_report_with_share(
    path: &std::path::Path,
) -> Result<
    (
        Tally,
        SourceSummary,
        Option<crate::share::tally::ShareTally>,
    ),
    Error,
> {
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
    let share = crate::share::report::read_share(&serde_json::json!({ "share": input.share }))
        .map_err(bad)?;
    let tally = Tally {
        consumed: input.counts.records.consumed,
        envelope_errors: input.counts.records.envelope_errors,
        other_run: input.counts.records.other_run,
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
        consumed: input.counts.records.consumed,
        verified: input.counts.records.verified,
    };
    Ok((tally, summary, share))
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
#[path = "report_tests.rs"]
mod tests;
