//! Human output: the seed's periodic line and box table, extended.
//!
//! The periodic line shows the *interval* rate and the *interval* p99 (the
//! seed printed a cumulative p99). The box table keeps the seed's sections
//! and wording, then adds the settings that produced the figures, the
//! open-loop histograms, end-to-end latency, verification and broker
//! resources.

use std::fmt::Write as _;
use std::time::SystemTime;

use chronik_harness::histogram::Percentiles;

use crate::config::Config;
use crate::metrics::{IntervalSummary, Kind};
use crate::report::{mib, thousands};
use crate::result::RunResult;

const RULE: &str = "══════════════════════════════════════════════════════════════";

/// `[12:51:16] Rate:  409 msg/s | 0.4 MB/s | Total:  2,045 msgs | p99:  101.7 ms`
pub fn periodic_line(
    s: &IntervalSummary,
    total: u64,
    total_consumed: u64,
    headline: Kind,
    show_consumed: bool,
) -> String {
    let clock = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let hms = clock.get(11..19).unwrap_or("--:--:--");
    let p = match headline {
        Kind::Service => s.service,
        Kind::Response => s.response,
        Kind::ScheduleDelay => s.schedule_delay,
        Kind::EndToEnd => s.end_to_end,
    };
    let (rate, total) = if headline == Kind::EndToEnd && !show_consumed {
        (s.consume_rate, total_consumed)
    } else {
        (s.publish_rate, total)
    };
    let mut line = format!(
        "[{hms}] Rate: {:>6.0} msg/s | {:.1} MB/s | Total: {:>6} msgs | p99: {:>6.1} ms",
        rate,
        s.publish_mb_per_sec * 1e6 / (1024.0 * 1024.0),
        thousands(total),
        p.p99_us as f64 / 1000.0
    );
    if show_consumed {
        let _ = write!(
            line,
            " | Consumed: {:>6.0} msg/s | e2e p99: {:>6.1} ms",
            s.consume_rate,
            s.end_to_end.p99_us as f64 / 1000.0
        );
    }
    if s.length_secs <= 0.0 {
        line.push_str(" (drain)");
    }
    line
}

fn header(out: &mut String, title: &str) {
    let _ = writeln!(out, "╠{RULE}╣");
    let _ = writeln!(out, "║ {title:<61}║");
    let _ = writeln!(out, "╠{RULE}╣");
}

fn percentile_rows(out: &mut String, p: &Percentiles) {
    let rows = [
        ("p50", p.p50_us),
        ("p90", p.p90_us),
        ("p95", p.p95_us),
        ("p99", p.p99_us),
        ("p99.9", p.p999_us),
        ("max", p.max_us),
    ];
    for (name, us) in rows {
        let _ = writeln!(
            out,
            "║ {:<8}{:>22} μs  ({:>8.2} ms)",
            format!("{name}:"),
            thousands(us),
            us as f64 / 1000.0
        );
    }
}

fn short_percentiles(out: &mut String, label: &str, p: &Percentiles) {
    let _ = writeln!(
        out,
        "║ {label:<18}p50 {:.2} ms | p99 {:.2} ms | p99.9 {:.2} ms | max {:.2} ms",
        p.p50_us as f64 / 1000.0,
        p.p99_us as f64 / 1000.0,
        p.p999_us as f64 / 1000.0,
        p.max_us as f64 / 1000.0
    );
}

/// The final box table.
pub fn box_table(c: &Config, r: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "╔{RULE}╗");
    let _ = writeln!(
        out,
        "║            Chronik Benchmark Results                        ║"
    );
    let _ = writeln!(out, "╠{RULE}╣");
    let _ = writeln!(out, "║ Mode:             {}", c.mode.label());
    let _ = writeln!(
        out,
        "║ Duration:         {:.2}s{}",
        r.window_secs,
        if r.interrupted {
            "  (interrupted by Ctrl-C)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "║ Concurrency:      {}", c.concurrency);
    let _ = writeln!(out, "║ Compression:      {}", c.compression.label());
    let producing = matches!(
        c.mode,
        crate::config::Mode::Produce | crate::config::Mode::RoundTrip
    );
    if producing {
        let _ = writeln!(out, "║ Acks:             {}", c.acks.as_kafka());
        let _ = writeln!(
            out,
            "║ Batch / linger:   {} B / {} ms",
            c.batch_size, c.linger_ms
        );
        let _ = writeln!(out, "║ Message size:     {} B", c.message_size);
    }
    let _ = writeln!(
        out,
        "║ Topic:            {} ({} partitions)",
        c.topic, r.partitions
    );
    match r.validity() {
        Some(v) => {
            let _ =
                writeln!(
                out,
                "║ Load:             open loop, target {:.0} msg/s, achieved {:.0} ({:.1}%) → {}",
                v.target_rate,
                v.achieved_rate,
                100.0 * v.achieved_rate / v.target_rate,
                if v.valid { "VALID" } else { "INVALID (< 95% of target)" }
            );
        }
        None if producing => {
            let _ = writeln!(
                out,
                "║ Load:             closed loop (as fast as the client accepts)"
            );
        }
        None => {}
    }
    header(&mut out, "THROUGHPUT");
    let messages = r.messages();
    let failed = r.publish.failed;
    let failed_pct = if messages + failed > 0 {
        100.0 * failed as f64 / (messages + failed) as f64
    } else {
        0.0
    };
    let _ = writeln!(out, "║ Messages:         {:>12} total", thousands(messages));
    let _ = writeln!(
        out,
        "║ Failed:           {:>12} ({failed_pct:.2}%)",
        thousands(failed)
    );
    if r.publish.unacknowledged > 0 {
        let _ = writeln!(
            out,
            "║ Unacknowledged:   {:>12} (drain timed out)",
            thousands(r.publish.unacknowledged)
        );
    }
    if r.publish.behind_schedule > 0 {
        let _ = writeln!(
            out,
            "║ Behind schedule:  {:>12} (due but unsent at stop)",
            thousands(r.publish.behind_schedule)
        );
    }
    let _ = writeln!(
        out,
        "║ Data transferred: {:>10.2} MB",
        mib(r.bytes() as f64)
    );
    let _ = writeln!(out, "║ Message rate:     {:>12.0} msg/s", r.message_rate());
    let _ = writeln!(
        out,
        "║ Bandwidth:        {:>12.2} MB/s",
        mib(r.bytes() as f64) / r.window_secs.max(1e-9)
    );
    if c.mode == crate::config::Mode::RoundTrip {
        let _ = writeln!(
            out,
            "║ Consumed:         {:>12} ({:.0} msg/s)",
            thousands(r.consumed),
            r.consume_rate()
        );
    }
    let what = match r.headline() {
        Kind::Response if r.rate_target.is_some() => "ack − intended send (response time)",
        Kind::Response => "ack − send",
        Kind::EndToEnd => "consumed − intended send (end to end)",
        _ => "Metadata request latency",
    };
    header(&mut out, "LATENCY (microseconds → milliseconds)");
    let _ = writeln!(out, "║ Measured as:      {what}");
    percentile_rows(&mut out, &Percentiles::of(r.histograms.get(r.headline())));
    if r.rate_target.is_some() {
        header(&mut out, "OPEN LOOP BREAKDOWN");
        short_percentiles(
            &mut out,
            "Service time:",
            &Percentiles::of(&r.histograms.service),
        );
        short_percentiles(
            &mut out,
            "Schedule delay:",
            &Percentiles::of(&r.histograms.schedule_delay),
        );
    }
    if c.mode == crate::config::Mode::RoundTrip {
        header(&mut out, "END-TO-END (consumed − intended send)");
        percentile_rows(&mut out, &Percentiles::of(&r.histograms.end_to_end));
    }
    if let Some(v) = &r.verification {
        header(&mut out, "VERIFICATION");
        if let Some(rec) = &v.reconciliation {
            let _ = writeln!(
                out,
                "║ Acknowledged:     {:>12}",
                thousands(rec.acknowledged)
            );
            let _ = writeln!(
                out,
                "║ Lost:             {:>12} (acked, never consumed)",
                thousands(rec.lost)
            );
            let _ = writeln!(
                out,
                "║ Gaps:             {:>12} (never acked, never consumed)",
                thousands(rec.gaps)
            );
            if rec.delivered_despite_error > 0 {
                let _ = writeln!(
                    out,
                    "║ Failed but read:  {:>12}",
                    thousands(rec.delivered_despite_error)
                );
            }
        }
        if let Some(m) = v.missing_in_observed_range {
            let _ = writeln!(out, "║ Missing in range: {:>12}", thousands(m));
        }
        let _ = writeln!(out, "║ Verified:         {:>12}", thousands(v.verified));
        let _ = writeln!(out, "║ Duplicated:       {:>12}", thousands(v.duplicates));
        let _ = writeln!(out, "║ Out of order:     {:>12}", thousands(v.out_of_order));
        let _ = writeln!(out, "║ Corrupt:          {:>12}", thousands(v.corrupt));
        if v.no_envelope + v.foreign > 0 {
            let _ = writeln!(
                out,
                "║ Not this run:     {:>12} ({} without envelope)",
                thousands(v.no_envelope + v.foreign),
                thousands(v.no_envelope)
            );
        }
        if v.redeliveries > 0 {
            let _ = writeln!(
                out,
                "║ Read again:       {:>12} (same offset, not verified again)",
                thousands(v.redeliveries)
            );
        }
        let _ = writeln!(
            out,
            "║ Result:           {}",
            if v.clean() { "CLEAN" } else { "FAULTS FOUND" }
        );
    }
    header(&mut out, "RESOURCES");
    let _ = writeln!(
        out,
        "║ Tool CPU:         {:.2} s ({:.2} µs/msg)",
        r.resources.tool_cpu_secs, r.resources.tool_cpu_us_per_msg
    );
    if let Some(b) = &r.resources.broker {
        let _ = writeln!(
            out,
            "║ Broker CPU:       {:.2} s ({:.2} µs/msg), pids {:?}",
            b.cpu_secs, b.cpu_us_per_msg, b.pids
        );
        let _ = writeln!(
            out,
            "║ Broker peak RSS:  {:.1} MB",
            mib(b.peak_rss_bytes as f64)
        );
    }
    let _ = writeln!(out, "╚{RULE}╝");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(length: f64) -> IntervalSummary {
        let p = Percentiles {
            count: 1,
            mean_us: 1.0,
            p50_us: 1,
            p75_us: 1,
            p90_us: 1,
            p95_us: 1,
            p99_us: 101_700,
            p999_us: 1,
            p9999_us: 1,
            max_us: 1,
        };
        IntervalSummary {
            index: 0,
            start_secs: 0.0,
            length_secs: length,
            publish_rate: 409.0,
            publish_mb_per_sec: 0.4 * 1.048576,
            consume_rate: 0.0,
            failed: 0,
            service: p,
            response: p,
            schedule_delay: p,
            end_to_end: p,
        }
    }

    #[test]
    fn periodic_line_keeps_the_seed_shape() {
        let line = periodic_line(&summary(5.0), 2045, 0, Kind::Response, false);
        assert!(line.starts_with('['), "{line}");
        assert!(
            line.contains("] Rate:    409 msg/s | 0.4 MB/s | Total:  2,045 msgs | p99:  101.7 ms"),
            "{line}"
        );
        assert!(!line.contains("drain"));
        assert!(periodic_line(&summary(0.0), 1, 0, Kind::Response, true).ends_with("(drain)"));
    }
}
