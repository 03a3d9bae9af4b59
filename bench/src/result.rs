//! The outcome of one run, as every output format reads it.
//!
//! Owns: [`RunResult`] and its derived figures (rates, validity, whether
//! verification is clean), and [`Verification`]: chronik-harness's counts
//! (`assess`, the definitions chronik-consumer's report uses) under this
//! tool's result names. Must not: format anything (see `report`) or define
//! a count.

use std::path::PathBuf;

use chronik_harness::assess::{assess, Assessment};
use chronik_harness::histogram::LatencyHistogram;
use chronik_harness::ledger::Ledger;
use chronik_harness::tally::Tally;
use chronik_harness::verify::Verifier;
use serde::Serialize;

use crate::config::{Mode, VALIDITY_THRESHOLD};
use crate::metrics::{IntervalSummary, Kind};

/// Producer-side counts.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishCounts {
    /// Successful acknowledgements received inside the measured window
    /// (metadata mode: answered requests).
    pub acked: u64,
    pub acked_bytes: u64,
    /// Failed deliveries reported after the warmup (including the drain).
    pub failed: u64,
    /// Messages still unacknowledged when the drain timed out.
    pub unacknowledged: u64,
    /// Messages the schedule wanted sent before the stop but that were not
    /// sent (open loop: how far behind the producers were).
    pub behind_schedule: u64,
    /// Every message sent, warmup included (for CPU per message).
    pub sent_total: u64,
}

#[derive(Debug, Clone)]
pub struct Histograms {
    pub service: LatencyHistogram,
    pub response: LatencyHistogram,
    pub schedule_delay: LatencyHistogram,
    pub end_to_end: LatencyHistogram,
}

impl Histograms {
    pub fn get(&self, kind: Kind) -> &LatencyHistogram {
        match kind {
            Kind::Service => &self.service,
            Kind::Response => &self.response,
            Kind::ScheduleDelay => &self.schedule_delay,
            Kind::EndToEnd => &self.end_to_end,
        }
    }
}

/// What the consumers found. The names are this tool's result fields (read
/// by its tests and README); each is a count of `chronik_harness::assess`,
/// named there as in chronik-consumer's report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Records of this run consumed, redeliveries excluded (`verified`).
    pub verified: u64,
    /// A (producer id, sequence) consumed at a second offset (`duplicates`).
    pub duplicates: u64,
    /// Below the producer's previous sequence in its partition (`reordered`).
    pub out_of_order: u64,
    /// The value's CRC-32C differs from the envelope's (`corrupt`).
    pub corrupt: u64,
    /// Records without a (decodable) envelope (`foreign − otherRun`).
    pub no_envelope: u64,
    /// Records of producer ids this run does not own (`otherRun`).
    pub foreign: u64,
    /// Offsets read a second time, not verified again (`redeliveries`).
    pub redeliveries: u64,
    /// Round-trip only: the producers' ledgers against what was consumed.
    pub reconciliation: Option<Reconciliation>,
    /// Consume mode only: sequences missing between the lowest and highest
    /// consumed per producer id (`gaps`).
    pub missing_in_observed_range: Option<u64>,
}

/// The ledgers' side of a round trip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciliation {
    pub acknowledged: u64,
    /// Acknowledged, never consumed (`lost`).
    pub lost: u64,
    /// Assigned, neither acknowledged nor failed, never consumed
    /// (`unknownNotConsumed`): not a broker loss.
    pub gaps: u64,
    /// Reported failed, consumed anyway (`deliveredDespiteFailure`).
    pub delivered_despite_error: u64,
    /// Records of this run's producer ids no ledger knows (should be 0).
    pub unknown_producer: u64,
}

impl Verification {
    /// What `verifiers` (one per consumer task) saw together; with
    /// `ledgers` (round-trip), reconciled against them.
    pub fn of(verifiers: &[&Verifier], ledgers: Option<&[Ledger]>) -> Verification {
        let mut tally = Tally::default();
        for v in verifiers {
            tally.absorb(Tally::from_verifier(v));
        }
        let ledger_refs: Vec<&Ledger> = ledgers.unwrap_or_default().iter().collect();
        let Assessment {
            totals,
            ledgers: sums,
            ..
        } = assess(&tally, &ledger_refs);
        let r = totals.records;
        let reconciliation = ledgers.map(|_| Reconciliation {
            acknowledged: sums.acknowledged,
            lost: sums.lost,
            gaps: sums.unknown_not_consumed,
            delivered_despite_error: sums.delivered_despite_failure,
            unknown_producer: sums
                .producers_without_ledger
                .iter()
                .filter_map(|id| tally.producers.get(id))
                .map(|seen| seen.len())
                .sum(),
        });
        Verification {
            verified: r.verified,
            duplicates: r.duplicates,
            out_of_order: r.reordered,
            corrupt: r.corrupt,
            no_envelope: r.foreign - r.other_run,
            foreign: r.other_run,
            redeliveries: r.redeliveries,
            reconciliation,
            missing_in_observed_range: ledgers.is_none().then_some(totals.gaps),
        }
    }

    pub fn lost(&self) -> u64 {
        self.reconciliation.map_or(0, |r| r.lost)
    }

    pub fn gaps(&self) -> u64 {
        self.reconciliation.map_or(0, |r| r.gaps)
    }

    /// No lost, duplicated, out-of-order or corrupt message.
    pub fn clean(&self) -> bool {
        self.lost() == 0 && self.duplicates == 0 && self.out_of_order == 0 && self.corrupt == 0
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Validity {
    pub target_rate: f64,
    pub achieved_rate: f64,
    pub threshold: f64,
    pub valid: bool,
}

impl Validity {
    pub fn judge(target_rate: f64, achieved_rate: f64) -> Validity {
        Validity {
            target_rate,
            achieved_rate,
            threshold: VALIDITY_THRESHOLD,
            valid: achieved_rate >= VALIDITY_THRESHOLD * target_rate,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerResources {
    pub pids: Vec<u32>,
    /// utime + stime of the broker processes over the measured window.
    pub cpu_secs: f64,
    pub cpu_us_per_msg: f64,
    /// Highest RSS sampled during the window (sum over the pids).
    pub peak_rss_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// This process's CPU over the measured window.
    pub tool_cpu_secs: f64,
    pub tool_cpu_us_per_msg: f64,
    pub broker: Option<BrokerResources>,
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub mode: Mode,
    pub rate_target: Option<f64>,
    pub started_at: String,
    pub ended_at: String,
    /// Length of the measured window (warmup excluded, drain excluded).
    pub window_secs: f64,
    /// Ended early by SIGINT.
    pub interrupted: bool,
    pub publish: PublishCounts,
    pub consumed: u64,
    pub consumed_bytes: u64,
    pub histograms: Histograms,
    pub series: Vec<IntervalSummary>,
    pub verification: Option<Verification>,
    pub resources: Resources,
    pub hlog_files: Vec<PathBuf>,
    /// Partitions the topic actually has.
    pub partitions: usize,
}

impl RunResult {
    fn per_sec(&self, n: u64) -> f64 {
        if self.window_secs > 0.0 {
            n as f64 / self.window_secs
        } else {
            0.0
        }
    }

    pub fn publish_rate(&self) -> f64 {
        self.per_sec(self.publish.acked)
    }

    pub fn consume_rate(&self) -> f64 {
        self.per_sec(self.consumed)
    }

    /// The rate the seed's "Message rate" line shows for this mode.
    pub fn message_rate(&self) -> f64 {
        match self.mode {
            Mode::Consume => self.consume_rate(),
            _ => self.publish_rate(),
        }
    }

    /// Messages (requests) the headline counts.
    pub fn messages(&self) -> u64 {
        match self.mode {
            Mode::Consume => self.consumed,
            _ => self.publish.acked,
        }
    }

    pub fn bytes(&self) -> u64 {
        match self.mode {
            Mode::Consume => self.consumed_bytes,
            _ => self.publish.acked_bytes,
        }
    }

    /// The histogram the headline latency figures come from.
    pub fn headline(&self) -> Kind {
        headline_kind(self.mode)
    }

    pub fn validity(&self) -> Option<Validity> {
        let target = self.rate_target?;
        Some(Validity::judge(target, self.publish_rate()))
    }
}

/// Headline latency per mode: response time for producing (= service time
/// in closed loop), end-to-end for consuming, request latency for metadata.
pub fn headline_kind(mode: Mode) -> Kind {
    match mode {
        Mode::Produce | Mode::RoundTrip => Kind::Response,
        Mode::Consume => Kind::EndToEnd,
        Mode::Metadata => Kind::Service,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_harness::intervals::IntervalSet;
    use chronik_harness::Envelope;

    const RUN: u32 = 0xabcd_0123;

    fn pid(task: u64) -> u64 {
        (u64::from(RUN) << 32) | task
    }

    /// Feeds (partition, offset, producer, sequence, value intact?) to a
    /// verifier of the run; producer `None` is a record without envelope.
    fn consumer(records: &[(i32, i64, Option<u64>, u64, bool)]) -> Verifier {
        let mut v = Verifier::for_run(RUN);
        for &(partition, offset, producer, seq, intact) in records {
            let slot = v.partition_slot("t", partition);
            let header = producer.map(|p| Ok(Envelope::new(p, seq, 0, b"v")));
            v.judge(slot, offset, header, if intact { b"v" } else { b"x" });
        }
        v
    }

    /// The bench's names carry the harness's counts (each defined and
    /// tested once, in chronik-harness's `verify` and `assess`).
    #[test]
    fn verification_names_map_the_shared_counts() {
        let v = consumer(&[
            (0, 0, Some(pid(0)), 0, true),
            (0, 1, Some(pid(0)), 2, true),
            (0, 2, Some(pid(0)), 1, true),  // reordered
            (0, 3, Some(pid(0)), 2, true),  // duplicate
            (0, 4, Some(pid(0)), 4, false), // corrupt
            (0, 5, None, 0, true),          // no envelope
            (0, 6, Some(7), 0, true),       // another run's producer
            (0, 6, Some(pid(0)), 9, true),  // offset read again
            (1, 0, Some(pid(1)), 0, true),  // no ledger for task 1
        ]);
        // Task 0 assigned 0..7: 3 acknowledged, never consumed (lost); 5
        // never reported (a gap); 6 failed, never consumed; 4 failed, read.
        let ledger = Ledger::new(
            None,
            pid(0),
            7,
            IntervalSet::from_ranges([[0, 3]]),
            IntervalSet::from_ranges([[4, 4], [6, 6]]),
        );
        let r = Verification::of(&[&v], Some(&[ledger]));
        assert_eq!(
            (
                r.verified,
                r.duplicates,
                r.out_of_order,
                r.corrupt,
                r.no_envelope,
                r.foreign,
                r.redeliveries
            ),
            (6, 1, 1, 1, 1, 1, 1)
        );
        assert_eq!(
            r.reconciliation,
            Some(Reconciliation {
                acknowledged: 4,
                lost: 1,
                gaps: 1,
                delivered_despite_error: 1,
                unknown_producer: 1,
            })
        );
        assert_eq!(r.missing_in_observed_range, None);
        assert!(!r.clean());
        let json = serde_json::to_value(r).expect("serialises");
        for key in [
            "outOfOrder",
            "noEnvelope",
            "foreign",
            "missingInObservedRange",
        ] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
        assert_eq!(json["reconciliation"]["deliveredDespiteError"], 1);

        // Consume mode: two consumers' partitions together, no ledger.
        let a = consumer(&[(0, 0, Some(pid(0)), 0, true), (0, 1, Some(pid(0)), 3, true)]);
        let b = consumer(&[(1, 0, Some(pid(0)), 1, true), (1, 1, Some(pid(0)), 3, true)]);
        let r = Verification::of(&[&a, &b], None);
        assert_eq!((r.verified, r.duplicates), (4, 1));
        assert_eq!(r.missing_in_observed_range, Some(1));
        assert_eq!(r.reconciliation, None);
    }

    #[test]
    fn validity_gate_is_95_percent_of_the_target() {
        assert!(Validity::judge(1000.0, 950.0).valid);
        assert!(!Validity::judge(1000.0, 949.9).valid);
        assert!(Validity::judge(1000.0, 1200.0).valid);
    }

    #[test]
    fn verification_is_clean_only_without_faults() {
        let mut v = Verification::default();
        assert!(v.clean());
        v.reconciliation = Some(Reconciliation {
            gaps: 3,
            ..Default::default()
        });
        assert!(v.clean(), "gaps are not broker faults");
        v.reconciliation = Some(Reconciliation {
            lost: 1,
            ..Default::default()
        });
        assert!(!v.clean());
        let v = Verification {
            duplicates: 1,
            ..Default::default()
        };
        assert!(!v.clean());
    }
}
