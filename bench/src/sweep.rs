//! `--sweep`: step the rate upward until the latency objective or the
//! validity gate fails; the knee is the highest rate that passed.
//!
//! Owns: the rate sequence, the pass/fail rule of a step, and the knee.
//! Must not: run anything itself (the caller runs each step).

use chronik_harness::histogram::Percentiles;

use crate::config::{SweepConfig, SweepStep};
use crate::result::RunResult;

/// The rates a sweep tries, in order: start, then +step or ×factor, while ≤ max.
pub fn rates(s: &SweepConfig) -> Vec<f64> {
    let mut out = Vec::new();
    let mut r = s.start;
    while r <= s.max * (1.0 + 1e-9) && out.len() < 1000 {
        out.push(r);
        r = match s.step {
            SweepStep::Add(a) => r + a,
            SweepStep::Multiply(f) => r * f,
        };
    }
    out
}

/// How one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepJudgement {
    pub p99_ms: f64,
    pub valid: bool,
    pub within_slo: bool,
}

impl StepJudgement {
    pub fn passed(&self) -> bool {
        self.valid && self.within_slo
    }
}

/// A step passes when the run is valid (achieved ≥ 95 % of the rate) and
/// the p99 of its headline latency (response time; round-trip: end to end)
/// is within the objective.
pub fn judge(r: &RunResult, slo_p99_ms: f64) -> StepJudgement {
    let kind = match r.mode {
        crate::config::Mode::RoundTrip => crate::metrics::Kind::EndToEnd,
        _ => r.headline(),
    };
    let p99_ms = Percentiles::of(r.histograms.get(kind)).p99_us as f64 / 1000.0;
    let valid = r.validity().is_some_and(|v| v.valid);
    StepJudgement {
        p99_ms,
        valid,
        within_slo: p99_ms <= slo_p99_ms,
    }
}

/// The highest rate that passed before the first failure.
pub fn knee(steps: &[(f64, StepJudgement)]) -> Option<f64> {
    steps
        .iter()
        .take_while(|(_, j)| j.passed())
        .map(|(r, _)| *r)
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(start: f64, step: SweepStep, max: f64) -> SweepConfig {
        SweepConfig {
            start,
            step,
            max,
            slo_p99_ms: 10.0,
        }
    }

    #[test]
    fn rates_step_by_addition_or_factor_up_to_the_max() {
        assert_eq!(
            rates(&cfg(1000.0, SweepStep::Add(500.0), 2500.0)),
            vec![1000.0, 1500.0, 2000.0, 2500.0]
        );
        assert_eq!(
            rates(&cfg(100.0, SweepStep::Multiply(2.0), 1000.0)),
            vec![100.0, 200.0, 400.0, 800.0]
        );
        assert_eq!(
            rates(&cfg(5.0, SweepStep::Add(1.0), 4.0)),
            Vec::<f64>::new()
        );
    }

    #[test]
    fn the_knee_is_the_last_pass_before_the_first_failure() {
        let pass = StepJudgement {
            p99_ms: 1.0,
            valid: true,
            within_slo: true,
        };
        let slow = StepJudgement {
            p99_ms: 50.0,
            valid: true,
            within_slo: false,
        };
        let invalid = StepJudgement {
            p99_ms: 1.0,
            valid: false,
            within_slo: true,
        };
        assert_eq!(knee(&[(1.0, pass), (2.0, pass), (3.0, slow)]), Some(2.0));
        assert_eq!(knee(&[(1.0, pass), (2.0, invalid), (3.0, pass)]), Some(1.0));
        assert_eq!(knee(&[(1.0, slow)]), None);
        assert_eq!(knee(&[]), None);
    }
}
