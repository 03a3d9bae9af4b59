//! The outcome of one run, as every output format reads it.
//!
//! Owns: [`RunResult`] and its derived figures (rates, validity, whether
//! verification is clean). Must not: format anything (see `report`).

use std::path::PathBuf;

use chronik_harness::histogram::LatencyHistogram;
use serde::Serialize;

use crate::config::{Mode, VALIDITY_THRESHOLD};
use crate::metrics::{IntervalSummary, Kind};
use crate::verify::{Reconciliation, VerifyCounts};

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

#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    #[serde(flatten)]
    pub counts: VerifyCounts,
    /// Round-trip only: the producers' ledgers against what was consumed.
    pub reconciliation: Option<Reconciliation>,
    /// Consume mode only: sequences missing between the lowest and highest
    /// consumed per producer id.
    pub missing_in_observed_range: Option<u64>,
}

impl Verification {
    pub fn lost(&self) -> u64 {
        self.reconciliation.map_or(0, |r| r.lost)
    }

    pub fn gaps(&self) -> u64 {
        self.reconciliation.map_or(0, |r| r.gaps)
    }

    /// No lost, duplicated, out-of-order or corrupt message.
    pub fn clean(&self) -> bool {
        self.lost() == 0
            && self.counts.duplicates == 0
            && self.counts.out_of_order == 0
            && self.counts.corrupt == 0
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
        let mut v = Verification::default();
        v.counts.duplicates = 1;
        assert!(!v.clean());
    }
}
