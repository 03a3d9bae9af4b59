//! The report's `share` section: what a share-mode member (or the merge of
//! every member) says about acceptance and redelivery, read back for
//! merging, and what it changes in the verdict.
//!
//! Owns: [`ShareReport`] (JSON shape), [`share_report`] (tally -> section,
//! with the explanation lines), [`read_share`] (section -> tally) and
//! [`apply_verdict`]. At-least-once semantics: a record delivered again is
//! never a fault; a record ACCEPTED twice, or consumed and never accepted,
//! is. Order is not promised by a share group, so `reordered` becomes a
//! note. Must not: define the counts (`tally::ShareTally::counts`).

use std::collections::BTreeMap;

use chronik_harness::histogram::Percentiles;
use serde::{Deserialize, Serialize};

use super::tally::{AcceptSets, MemberSummary, ShareCounts, ShareTally};
use crate::report::{decode_histogram, encode_histogram, Report};

/// One partition's acceptance sets in the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharePartitionReport {
    pub topic: String,
    pub partition: i32,
    #[serde(flatten)]
    pub sets: AcceptSets,
}

/// The report's `share` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShareReport {
    pub group: String,
    #[serde(flatten)]
    pub counts: ShareCounts,
    /// Deliveries by the broker's delivery count ("1": first deliveries).
    pub by_delivery_count: BTreeMap<String, u64>,
    /// Sum of broker confirmations of ACCEPT (what merging adds up).
    pub confirmations: u64,
    /// End-to-end latency of first deliveries only (the report's `latency`
    /// covers every record's first sight by a member, redeliveries
    /// included).
    pub first_delivery_latency: serde_json::Value,
    pub first_delivery_histogram: String,
    pub members: Vec<MemberSummary>,
    /// Why there were redeliveries, and any acceptance fault, in words.
    pub explanation: Vec<String>,
    pub partitions: Vec<SharePartitionReport>,
}

/// The `share` section of `share` (against the verifier's `tally`).
pub fn share_report(
    group: &str,
    share: &ShareTally,
    tally: &chronik_harness::tally::Tally,
) -> ShareReport {
    let counts = share.counts(tally);
    ShareReport {
        group: group.to_string(),
        counts,
        by_delivery_count: share
            .by_delivery_count
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        confirmations: share.confirmations,
        first_delivery_latency: serde_json::to_value(Percentiles::of(
            &share.first_delivery_latency,
        ))
        .unwrap_or_default(),
        first_delivery_histogram: encode_histogram(&share.first_delivery_latency),
        members: share.members.clone(),
        explanation: explain(&counts, share),
        partitions: share
            .partitions
            .iter()
            .map(|((topic, partition), sets)| SharePartitionReport {
                topic: topic.clone(),
                partition: *partition,
                sets: sets.clone(),
            })
            .collect(),
    }
}

fn explain(c: &ShareCounts, share: &ShareTally) -> Vec<String> {
    let mut lines = Vec::new();
    let died: Vec<&MemberSummary> = share.members.iter().filter(|m| m.died()).collect();
    if c.redeliveries > 0 {
        let by: Vec<String> = share
            .by_delivery_count
            .iter()
            .filter(|(k, _)| **k > 1)
            .map(|(k, v)| format!("{v} at delivery count {k}"))
            .collect();
        let mut line = format!(
            "{} redeliveries ({}): the broker gave these records out again after their acquisition lock expired (share.record.lock.duration.ms) or their holder left; at-least-once, not a fault",
            c.redeliveries,
            by.join(", ")
        );
        if !died.is_empty() {
            let names: Vec<String> = died.iter().map(|m| m.client_id.clone()).collect();
            line.push_str(&format!(
                ". Member(s) that died holding records (their report is their last checkpoint): {}",
                names.join(", ")
            ));
        }
        line.push_str(&format!(
            ". {} of them were seen earlier in some report; the other {} were delivered to a member after its last checkpoint",
            c.redeliveries_seen_before.min(c.redeliveries),
            c.redeliveries.saturating_sub(c.redeliveries_seen_before)
        ));
        lines.push(line);
    }
    if !died.is_empty() {
        lines.push(
            "Records of partitions assigned only to a member that died wait until the group evicts it (share.session.timeout.ms, 45 s by default) and hands those partitions to the others: that wait is in their first-delivery latency, and records it held but never acknowledged come back with delivery count 2".to_string(),
        );
    }
    if c.accept_outcome_unknown > 0 {
        lines.push(format!(
            "{} records were being accepted by a member that died (ACCEPT sent or about to be, no answer in its last checkpoint) and nobody accepted them since: the broker took that ACCEPT (else it would have delivered them again)",
            c.accept_outcome_unknown
        ));
    }
    if c.ack_failed > 0 {
        lines.push(format!(
            "{} ACCEPTs were refused by the broker (lock expired first); those records were delivered again",
            c.ack_failed
        ));
    }
    if c.accepted_twice > 0 {
        lines.push(format!(
            "FAULT: {} broker confirmations of ACCEPT beyond one per record: some record was accepted twice",
            c.accepted_twice
        ));
    }
    if c.not_accepted > 0 {
        lines.push(format!(
            "{} records consumed were never accepted by any member (left in the queue)",
            c.not_accepted
        ));
    }
    lines
}

/// Reads a report's `share` section back into a tally.
pub fn read_share(value: &serde_json::Value) -> Result<Option<ShareTally>, String> {
    let Some(section) = value.get("share").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let report: ShareReport =
        serde_json::from_value(section.clone()).map_err(|e| format!("share section: {e}"))?;
    let mut by_delivery_count = BTreeMap::new();
    for (k, v) in report.by_delivery_count {
        let count: u16 = k
            .parse()
            .map_err(|_| format!("share section: delivery count {k:?}"))?;
        by_delivery_count.insert(count, v);
    }
    Ok(Some(ShareTally {
        partitions: report
            .partitions
            .into_iter()
            .map(|p| ((p.topic, p.partition), p.sets))
            .collect(),
        by_delivery_count,
        confirmations: report.confirmations,
        first_delivery_latency: decode_histogram(&report.first_delivery_histogram)
            .map_err(|e| format!("share first-delivery histogram: {e}"))?,
        members: report.members,
    }))
}

/// The verdict of a share-mode report: redeliveries are fine, order is not
/// promised, a record accepted twice is a failure, and (with complete
/// coverage) so is a record consumed and never accepted.
pub fn apply_verdict(report: &mut Report) {
    let Some(share) = &report.share else { return };
    let counts = share.counts;
    let v = &mut report.verdict;
    if let Some(i) = v.failures.iter().position(|f| f == "reordered") {
        v.failures.remove(i);
        v.notes.push(format!(
            "{} records arrived below an earlier sequence of their producer in the same partition: a share group promises no order (not a failure)",
            report.counts.records.reordered
        ));
    }
    if counts.accepted_twice > 0 {
        v.failures.push("acceptedTwice".into());
    }
    if v.conclusive && counts.not_accepted > 0 {
        v.failures.push("notAccepted".into());
    }
    v.clean = v.failures.is_empty();
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_harness::intervals::IntervalSet;

    #[test]
    fn a_share_section_reads_back_into_the_same_tally() {
        let mut share = ShareTally::default();
        share.note_delivery(1, Some(1500));
        share.note_delivery(2, None);
        share.accepting("t", 0, 7);
        share.confirmed("t", 0, &IntervalSet::from_ranges([[7, 7]]), true);
        share.members.push(MemberSummary {
            client_id: "c".into(),
            member_id: "m".into(),
            stop_reason: "checkpoint".into(),
            written_at_us: 1,
            deliveries: 2,
            accepted: 1,
            unconfirmed: 0,
            checkpoints: 0,
            checkpoint_secs: 0.0,
        });
        let tally = chronik_harness::tally::Tally::default();
        let section = share_report("g", &share, &tally);
        let json = serde_json::json!({ "share": serde_json::to_value(&section).expect("json") });
        let back = read_share(&json).expect("reads").expect("present");
        assert_eq!(back.partitions, share.partitions);
        assert_eq!(back.by_delivery_count, share.by_delivery_count);
        assert_eq!(back.confirmations, 1);
        assert_eq!(back.first_delivery_latency.len(), 1);
        assert_eq!(back.members, share.members);
        assert_eq!(section.counts.redeliveries, 1);
        assert_eq!(section.counts.max_delivery_count, 2);
        assert!(section.explanation[0].contains("1 at delivery count 2"));
        assert!(section.explanation[0].contains("died holding records"));
        assert!(read_share(&serde_json::json!({})).expect("ok").is_none());
    }
}
