//! The JSON result: OpenMessaging Benchmark's `TestResult` fields, then
//! chronik-bench's own, then the `meta` block.
//!
//! OMB semantics kept: `publishLatency*` is the time from the actual send to
//! the acknowledgement (our service time) in ms; `publishDelayLatency*` is
//! the actual send minus the intended send in **µs** (integers);
//! `endToEndLatency*` is in ms — measured here from the *intended* send time
//! carried in the envelope, stricter than OMB's producer timestamp. Lists are
//! per report interval inside the window; `aggregated*` are over the whole
//! run (merged histograms). Added: `responseLatency*` /
//! `aggregatedResponseLatency*` (ack − intended send, ms), validity,
//! verification, resources, `.hlog` files.

use chronik_harness::histogram::{percentile_distribution, LatencyHistogram, Percentiles};
use chronik_harness::results::RunMeta;
use serde_json::{json, Map, Value};

use crate::config::{Config, Mode};
use crate::metrics::IntervalSummary;
use crate::result::RunResult;

/// Quantile-map resolution (HdrHistogram's ticks per half distance); OMB
/// uses 100, which makes maps of thousands of entries.
const QUANTILE_TICKS: u32 = 5;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A percentile as Java's `Double.toString` writes it in OMB's maps
/// (`50.0`, `99.9`), without floating-point noise (`30.000000000000004`).
fn percentile_key(pct: f64) -> String {
    let s = format!("{pct:.6}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// The eight OMB list fields for one histogram kind.
fn series_fields(
    out: &mut Map<String, Value>,
    prefix: &str,
    series: &[IntervalSummary],
    pick: fn(&IntervalSummary) -> Percentiles,
    micros: bool,
) {
    let conv = |us: u64| if micros { json!(us) } else { json!(ms(us)) };
    let avg = |p: &Percentiles| {
        if micros {
            json!(p.mean_us)
        } else {
            json!(p.mean_us / 1000.0)
        }
    };
    let list = |f: &dyn Fn(&Percentiles) -> Value| {
        Value::Array(series.iter().map(|s| f(&pick(s))).collect())
    };
    out.insert(format!("{prefix}Avg"), list(&avg));
    out.insert(format!("{prefix}50pct"), list(&|p| conv(p.p50_us)));
    out.insert(format!("{prefix}75pct"), list(&|p| conv(p.p75_us)));
    out.insert(format!("{prefix}95pct"), list(&|p| conv(p.p95_us)));
    out.insert(format!("{prefix}99pct"), list(&|p| conv(p.p99_us)));
    out.insert(format!("{prefix}999pct"), list(&|p| conv(p.p999_us)));
    out.insert(format!("{prefix}9999pct"), list(&|p| conv(p.p9999_us)));
    out.insert(format!("{prefix}Max"), list(&|p| conv(p.max_us)));
}

/// `aggregated<Name>Avg`, `…50pct` … `…Max` and `aggregated<Name>Quantiles`.
fn aggregated_fields(
    out: &mut Map<String, Value>,
    name: &str,
    h: &LatencyHistogram,
    micros: bool,
    quantiles: bool,
) {
    let p = Percentiles::of(h);
    let conv = |us: u64| if micros { json!(us) } else { json!(ms(us)) };
    out.insert(
        format!("aggregated{name}Avg"),
        if micros {
            json!(p.mean_us)
        } else {
            json!(p.mean_us / 1000.0)
        },
    );
    out.insert(format!("aggregated{name}50pct"), conv(p.p50_us));
    out.insert(format!("aggregated{name}75pct"), conv(p.p75_us));
    out.insert(format!("aggregated{name}95pct"), conv(p.p95_us));
    out.insert(format!("aggregated{name}99pct"), conv(p.p99_us));
    out.insert(format!("aggregated{name}999pct"), conv(p.p999_us));
    out.insert(format!("aggregated{name}9999pct"), conv(p.p9999_us));
    out.insert(format!("aggregated{name}Max"), conv(p.max_us));
    if quantiles {
        let map: Map<String, Value> = percentile_distribution(h, QUANTILE_TICKS)
            .into_iter()
            .map(|(pct, us)| (percentile_key(pct), conv(us)))
            .collect();
        out.insert(format!("aggregated{name}Quantiles"), Value::Object(map));
    }
}

/// The result object of one run (without `meta`).
pub fn result_object(c: &Config, r: &RunResult) -> Map<String, Value> {
    let mut o = Map::new();
    let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
    o.insert(
        "workload".into(),
        json!(format!(
            "{} {}B acks={} {}",
            c.mode.label(),
            c.message_size,
            c.acks.as_kafka(),
            match r.rate_target {
                Some(t) => format!("rate={t}"),
                None => "closed-loop".into(),
            }
        )),
    );
    o.insert(
        "driver".into(),
        json!(format!("chronik-bench (librdkafka {librdkafka})")),
    );
    o.insert("beginTime".into(), json!(r.started_at));
    o.insert("endTime".into(), json!(r.ended_at));
    o.insert("messageSize".into(), json!(c.message_size));
    o.insert("topics".into(), json!(1));
    o.insert("partitions".into(), json!(r.partitions));
    let (producers, consumers) = match c.mode {
        Mode::Produce => (c.concurrency, 0),
        Mode::RoundTrip => (c.concurrency, 1),
        Mode::Consume => (0, c.concurrency),
        Mode::Metadata => (0, 0),
    };
    o.insert("producersPerTopic".into(), json!(producers));
    o.insert("consumersPerTopic".into(), json!(consumers));

    let s = &r.series;
    o.insert(
        "publishRate".into(),
        json!(s.iter().map(|i| i.publish_rate).collect::<Vec<_>>()),
    );
    o.insert(
        "publishErrorRate".into(),
        json!(s
            .iter()
            .map(|i| if i.length_secs > 0.0 {
                i.failed as f64 / i.length_secs
            } else {
                0.0
            })
            .collect::<Vec<_>>()),
    );
    o.insert(
        "consumeRate".into(),
        json!(s.iter().map(|i| i.consume_rate).collect::<Vec<_>>()),
    );
    let backlog: Vec<i64> = if c.mode == Mode::RoundTrip {
        let (mut published, mut consumed) = (0f64, 0f64);
        s.iter()
            .map(|i| {
                published += i.publish_rate * i.length_secs;
                consumed += i.consume_rate * i.length_secs;
                (published - consumed).round() as i64
            })
            .collect()
    } else {
        Vec::new()
    };
    o.insert("backlog".into(), json!(backlog));

    series_fields(&mut o, "publishLatency", s, |i| i.service, false);
    series_fields(&mut o, "publishDelayLatency", s, |i| i.schedule_delay, true);
    aggregated_fields(&mut o, "PublishLatency", &r.histograms.service, false, true);
    aggregated_fields(
        &mut o,
        "PublishDelayLatency",
        &r.histograms.schedule_delay,
        true,
        true,
    );
    series_fields(&mut o, "endToEndLatency", s, |i| i.end_to_end, false);
    aggregated_fields(
        &mut o,
        "EndToEndLatency",
        &r.histograms.end_to_end,
        false,
        true,
    );
    series_fields(&mut o, "responseLatency", s, |i| i.response, false);
    aggregated_fields(
        &mut o,
        "ResponseLatency",
        &r.histograms.response,
        false,
        false,
    );

    // chronik-bench's own fields.
    o.insert("mode".into(), json!(c.mode));
    o.insert("durationSecs".into(), json!(r.window_secs));
    o.insert("interrupted".into(), json!(r.interrupted));
    o.insert("targetRate".into(), json!(r.rate_target));
    o.insert("achievedRate".into(), json!(r.publish_rate()));
    o.insert("valid".into(), json!(r.validity().map(|v| v.valid)));
    o.insert("messages".into(), json!(r.messages()));
    o.insert("messageRate".into(), json!(r.message_rate()));
    o.insert("publish".into(), json!(r.publish));
    o.insert("consumed".into(), json!(r.consumed));
    o.insert("consumedBytes".into(), json!(r.consumed_bytes));
    o.insert("verification".into(), json!(r.verification));
    o.insert("resources".into(), json!(r.resources));
    o.insert("intervals".into(), json!(r.series));
    o.insert("hlogFiles".into(), json!(r.hlog_files));
    o
}

/// The document of a single run.
pub fn run_document(c: &Config, r: &RunResult, meta: &RunMeta) -> Value {
    let mut o = result_object(c, r);
    o.insert("meta".into(), json!(meta));
    Value::Object(o)
}

/// One sweep step as reported in the sweep document.
#[derive(Debug)]
pub struct SweepStepReport<'a> {
    pub rate: f64,
    pub p99_ms: f64,
    pub valid: bool,
    pub within_slo: bool,
    pub result: &'a RunResult,
}

/// The document of a sweep: the knee, then every step's full result.
pub fn sweep_document(
    c: &Config,
    steps: &[SweepStepReport<'_>],
    knee: Option<f64>,
    meta: &RunMeta,
) -> Value {
    let sweep = c.sweep.map(|s| json!(s));
    let step_values: Vec<Value> = steps
        .iter()
        .map(|s| {
            json!({
                "rate": s.rate,
                "achievedRate": s.result.publish_rate(),
                "p99Ms": s.p99_ms,
                "valid": s.valid,
                "withinSlo": s.within_slo,
                "result": Value::Object(result_object(c, s.result)),
            })
        })
        .collect();
    json!({
        "sweep": sweep,
        "kneeRate": knee,
        "steps": step_values,
        "meta": meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_keys_look_like_omb_ones() {
        assert_eq!(percentile_key(50.0), "50.0");
        assert_eq!(percentile_key(30.000000000000004), "30.0");
        assert_eq!(percentile_key(99.90234375), "99.902344");
        assert_eq!(percentile_key(100.0), "100.0");
    }
}
