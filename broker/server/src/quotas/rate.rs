//! Rates measured as Kafka's quota sensors measure them, and the throttle
//! time a rate over its bound earns.
//!
//! Owns: `SampledRate` (Kafka's Rate over a SampledStat: `samples`
//! windows of `sample_ms`; a window starts at the first record after the
//! previous one ended; the rate is the samples' total over their elapsed
//! time, counted as at least `samples - 1` whole windows, so a client that
//! just started is not measured over a sliver), `throttle_ms` (Kafka's
//! QuotaUtils.throttleTime: how long until the rate is back at its bound,
//! at most one whole measured span) and `TokenBucket` (KIP-599's controller
//! mutation rate: credits up to quota × span, spent by mutations, refilled
//! at the quota). Must not: know entities or keys (`resolve`, `sensors`).

use std::collections::VecDeque;

/// Kafka's quota.window.num and quota.window.size.seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaWindow {
    pub samples: u32,
    pub sample_ms: u64,
}

impl Default for QuotaWindow {
    /// Kafka's defaults: 11 samples of 1 s.
    fn default() -> Self {
        QuotaWindow {
            samples: 11,
            sample_ms: 1000,
        }
    }
}

impl QuotaWindow {
    /// The whole measured span, and the longest throttle (Kafka's
    /// maxThrottleTimeMs for client quotas).
    pub fn span_ms(&self) -> u64 {
        self.sample_ms * u64::from(self.samples)
    }
}

/// A rate per second over the last `samples` windows.
#[derive(Clone, Debug)]
pub struct SampledRate {
    /// (window start, total recorded in it), oldest first.
    samples: VecDeque<(u64, f64)>,
}

impl SampledRate {
    pub fn new() -> SampledRate {
        SampledRate {
            samples: VecDeque::new(),
        }
    }

    /// Drops windows that ended before the measured span.
    fn purge(&mut self, window: QuotaWindow, now_ms: u64) {
        let horizon = now_ms.saturating_sub(window.span_ms());
        while self
            .samples
            .front()
            .is_some_and(|(start, _)| start + window.sample_ms <= horizon)
        {
            self.samples.pop_front();
        }
        while self.samples.len() > window.samples as usize {
            self.samples.pop_front();
        }
    }

    /// Adds `value` (negative: takes back what was recorded, as Kafka's
    /// fetch quota does for an answer it did not send).
    pub fn record(&mut self, window: QuotaWindow, value: f64, now_ms: u64) {
        self.purge(window, now_ms);
        match self.samples.back_mut() {
            Some((start, total)) if now_ms < *start + window.sample_ms => *total += value,
            _ => self.samples.push_back((now_ms, value)),
        }
        self.purge(window, now_ms);
    }

    /// Kafka's Rate.windowSize: the elapsed span of the samples held, at
    /// least `samples - 1` whole windows.
    fn window_ms(&self, window: QuotaWindow, now_ms: u64) -> u64 {
        let oldest = self.samples.front().map_or(now_ms, |(start, _)| *start);
        let elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / window.sample_ms;
        let min_full = u64::from(window.samples - 1);
        if full < min_full {
            elapsed + (min_full - full) * window.sample_ms
        } else {
            elapsed
        }
        .max(1)
    }

    /// The rate per second now.
    pub fn measure(&mut self, window: QuotaWindow, now_ms: u64) -> f64 {
        self.purge(window, now_ms);
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        total * 1000.0 / self.window_ms(window, now_ms) as f64
    }

    /// The throttle this rate earns against `bound` per second: 0 within
    /// it, else the time for the rate to fall back to it, at most the span.
    pub fn throttle_ms(&mut self, window: QuotaWindow, bound: f64, now_ms: u64) -> u64 {
        let rate = self.measure(window, now_ms);
        if rate <= bound || bound <= 0.0 {
            return 0;
        }
        let span = self.window_ms(window, now_ms) as f64;
        let throttle = ((rate - bound) / bound * span).round();
        (throttle as u64).min(window.span_ms())
    }

    /// When this rate last recorded anything (for expiring idle sensors).
    pub fn last_window_ms(&self) -> Option<u64> {
        self.samples.back().map(|(start, _)| *start)
    }
}

impl Default for SampledRate {
    fn default() -> Self {
        SampledRate::new()
    }
}

/// KIP-599's token bucket: `credits` start full at quota × span, each
/// mutation spends one, and they refill at the quota per second. A request
/// is refused while the credits are below zero; the one that takes them
/// there is accepted (Kafka's rule).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    credits: f64,
    last_ms: Option<u64>,
}

impl TokenBucket {
    pub fn new() -> TokenBucket {
        TokenBucket {
            credits: f64::INFINITY,
            last_ms: None,
        }
    }

    fn refill(&mut self, window: QuotaWindow, quota: f64, now_ms: u64) {
        let burst = quota * window.span_ms() as f64 / 1000.0;
        let elapsed = self.last_ms.map_or(f64::INFINITY, |last| {
            now_ms.saturating_sub(last) as f64 / 1000.0
        });
        self.credits = (self.credits + elapsed * quota).min(burst);
        self.last_ms = Some(now_ms);
    }

    /// Whether the credits are spent below zero now (the next mutation is
    /// refused).
    pub fn exceeded(&mut self, window: QuotaWindow, quota: f64, now_ms: u64) -> bool {
        self.refill(window, quota, now_ms);
        self.credits < 0.0
    }

    /// Spends `mutations` credits.
    pub fn spend(&mut self, window: QuotaWindow, quota: f64, mutations: f64, now_ms: u64) {
        self.refill(window, quota, now_ms);
        self.credits -= mutations;
    }

    /// How long until the credits are back at zero.
    pub fn throttle_ms(&mut self, window: QuotaWindow, quota: f64, now_ms: u64) -> u64 {
        self.refill(window, quota, now_ms);
        if self.credits >= 0.0 || quota <= 0.0 {
            return 0;
        }
        ((-self.credits / quota * 1000.0).ceil() as u64).min(window.span_ms())
    }

    pub fn last_ms(&self) -> Option<u64> {
        self.last_ms
    }
}

impl Default for TokenBucket {
    fn default() -> Self {
        TokenBucket::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: QuotaWindow = QuotaWindow {
        samples: 11,
        sample_ms: 1000,
    };

    #[test]
    fn a_new_rate_is_measured_over_at_least_ten_windows() {
        let mut r = SampledRate::new();
        r.record(W, 10_000.0, 1_000);
        // 10,000 over 10 s (the minimum span), not over an instant.
        assert!((r.measure(W, 1_000) - 1_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_steady_rate_within_its_bound_is_not_throttled() {
        let mut r = SampledRate::new();
        for s in 0..30u64 {
            r.record(W, 900.0, s * 1000);
        }
        assert_eq!(r.throttle_ms(W, 1000.0, 29_500), 0);
    }

    #[test]
    fn twice_the_bound_earns_a_throttle_that_brings_it_back() {
        let mut r = SampledRate::new();
        for s in 0..30u64 {
            r.record(W, 2000.0, s * 1000);
        }
        let t = r.throttle_ms(W, 1000.0, 29_999);
        // (2000 - 1000) / 1000 × the ~11 s span, capped at the span.
        assert!((9_000..=11_000).contains(&t), "{t}");
    }

    #[test]
    fn old_windows_fall_out_of_the_measure() {
        let mut r = SampledRate::new();
        r.record(W, 1e9, 0);
        assert!(r.measure(W, 60_000) == 0.0);
        assert_eq!(r.throttle_ms(W, 1.0, 60_000), 0);
    }

    #[test]
    fn unrecording_takes_back_a_recorded_value() {
        let mut r = SampledRate::new();
        r.record(W, 5000.0, 100);
        r.record(W, -5000.0, 200);
        assert_eq!(r.measure(W, 300), 0.0);
    }

    #[test]
    fn the_token_bucket_refuses_once_spent_below_zero_and_refills() {
        let mut b = TokenBucket::new();
        // quota 1/s: a burst of 11 credits.
        assert!(!b.exceeded(W, 1.0, 0));
        b.spend(W, 1.0, 20.0, 0);
        assert!(b.exceeded(W, 1.0, 0));
        assert_eq!(b.throttle_ms(W, 1.0, 0), 9_000);
        assert!(!b.exceeded(W, 1.0, 9_000));
    }
}
