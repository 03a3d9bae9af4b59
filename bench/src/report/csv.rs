//! The CSV row: seed 004's 24 columns, in its order, then the settings the
//! seed left out.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use chronik_harness::histogram::Percentiles;

use crate::config::Config;
use crate::result::RunResult;

pub const SEED_COLUMNS: [&str; 24] = [
    "timestamp",
    "mode",
    "duration_secs",
    "total_messages",
    "failed_messages",
    "total_bytes",
    "throughput_msg_per_sec",
    "throughput_mb_per_sec",
    "success_rate_pct",
    "latency_p50_us",
    "latency_p90_us",
    "latency_p95_us",
    "latency_p99_us",
    "latency_p999_us",
    "latency_max_us",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_max_ms",
    "message_size",
    "concurrency",
    "compression",
];

pub const EXTRA_COLUMNS: [&str; 7] = [
    "acks",
    "linger_ms",
    "batch_size",
    "partitions",
    "replication_factor",
    "rate_target_msg_per_sec",
    "valid",
];

pub fn header() -> String {
    SEED_COLUMNS
        .iter()
        .chain(EXTRA_COLUMNS.iter())
        .copied()
        .collect::<Vec<_>>()
        .join(",")
}

/// One row (without newline).
pub fn row(c: &Config, r: &RunResult) -> String {
    let p = Percentiles::of(r.histograms.get(r.headline()));
    let messages = r.messages();
    let failed = r.publish.failed;
    let success = if messages + failed > 0 {
        100.0 * messages as f64 / (messages + failed) as f64
    } else {
        100.0
    };
    let us = [p.p50_us, p.p90_us, p.p95_us, p.p99_us, p.p999_us, p.max_us];
    let mut fields: Vec<String> = vec![
        r.ended_at.clone(),
        c.mode.label().to_string(),
        format!("{}", r.window_secs),
        messages.to_string(),
        failed.to_string(),
        r.bytes().to_string(),
        format!("{:.2}", r.message_rate()),
        format!(
            "{:.2}",
            crate::report::mib(r.bytes() as f64) / r.window_secs.max(1e-9)
        ),
        trim_float(success),
    ];
    fields.extend(us.iter().map(|v| v.to_string()));
    fields.extend(us.iter().map(|v| format!("{:.3}", *v as f64 / 1000.0)));
    fields.extend([
        c.message_size.to_string(),
        c.concurrency.to_string(),
        c.compression.label().to_string(),
        c.acks.as_kafka().to_string(),
        c.linger_ms.to_string(),
        c.batch_size.to_string(),
        r.partitions.to_string(),
        c.replication_factor.to_string(),
        r.rate_target.map(trim_float).unwrap_or_default(),
        r.validity()
            .map(|v| v.valid.to_string())
            .unwrap_or_default(),
    ]);
    fields.join(",")
}

fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Appends rows to `path`, writing the header first when the file is new or empty.
pub fn append(path: &Path, rows: &[String]) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let fresh = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut text = String::new();
    if fresh {
        text.push_str(&header());
        text.push('\n');
    }
    for r in rows {
        text.push_str(r);
        text.push('\n');
    }
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_starts_with_the_seed_columns() {
        let seed = "timestamp,mode,duration_secs,total_messages,failed_messages,total_bytes,throughput_msg_per_sec,throughput_mb_per_sec,success_rate_pct,latency_p50_us,latency_p90_us,latency_p95_us,latency_p99_us,latency_p999_us,latency_max_us,latency_p50_ms,latency_p90_ms,latency_p95_ms,latency_p99_ms,latency_p999_ms,latency_max_ms,message_size,concurrency,compression";
        let h = header();
        assert!(h.starts_with(seed));
        assert!(h.ends_with(",acks,linger_ms,batch_size,partitions,replication_factor,rate_target_msg_per_sec,valid"));
        assert_eq!(h.split(',').count(), 31);
    }

    #[test]
    fn append_writes_the_header_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.csv");
        append(&path, &["a".into()]).expect("first");
        append(&path, &["b".into()]).expect("second");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with("timestamp,"));
    }
}
