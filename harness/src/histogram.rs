//! Latency histograms as every harness tool records them: one unit
//! (microseconds), one range, merged (never averaged), summarised into the
//! same percentiles, and logged as HdrHistogram interval logs (`.hlog`).
//!
//! Owns: the histogram shape ([`new_latency_histogram`]), merging, the
//! percentile summary, the `.hlog` writer and reader. Must not: know which
//! tool recorded a value or what the value means (publish, end-to-end, …).
//!
//! `.hlog` files follow the Java `HistogramLogWriter` layout (comment lines,
//! `StartTime`/`BaseTime` headers, a legend line, one
//! `Tag=…,start,length,max,base64(compressed V2 histogram)` line per interval),
//! so HdrHistogram's `HistogramLogProcessor` and `HistogramLogAnalyzer` read
//! them. Values, including the interval max, are microseconds.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{
    IntervalLogHistogram, IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::HarnessError;

/// A latency histogram in microseconds.
pub type LatencyHistogram = Histogram<u64>;

/// Largest value tracked exactly: one hour in µs. Larger values are recorded
/// as this value (saturating), never dropped.
pub const HIGHEST_TRACKABLE_US: u64 = 3_600_000_000;

/// Value precision: 3 significant digits (0.1 % relative error).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// An empty histogram of the shared shape (1 µs .. 1 h, 3 significant digits).
pub fn new_latency_histogram() -> LatencyHistogram {
    // The bounds are constants satisfying hdrhistogram's preconditions
    // (low >= 1, high >= 2 * low, sigfig <= 5), so creation cannot fail.
    Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)
        .expect("constant bounds are valid")
}

/// Records `value_us`, clamping values above the range instead of dropping them.
#[inline]
pub fn record_us(histogram: &mut LatencyHistogram, value_us: u64) {
    histogram.saturating_record(value_us);
}

/// Adds `source` into `into`. Histograms of the shared shape always merge;
/// one of another shape is re-recorded value by value (saturating) so that no
/// sample is lost either way.
pub fn merge_into(into: &mut LatencyHistogram, source: &LatencyHistogram) {
    if into.add(source).is_err() {
        for v in source.iter_recorded() {
            into.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

/// The merge of `histograms` (an empty histogram when there are none).
pub fn merge_all<'a>(
    histograms: impl IntoIterator<Item = &'a LatencyHistogram>,
) -> LatencyHistogram {
    let mut merged = new_latency_histogram();
    for h in histograms {
        merge_into(&mut merged, h);
    }
    merged
}

/// The usual percentiles of one histogram, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p75_us: u64,
    pub p90_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(h: &LatencyHistogram) -> Percentiles {
        if h.is_empty() {
            return Percentiles {
                count: 0,
                mean_us: 0.0,
                p50_us: 0,
                p75_us: 0,
                p90_us: 0,
                p95_us: 0,
                p99_us: 0,
                p999_us: 0,
                p9999_us: 0,
                max_us: 0,
            };
        }
        let q = |quantile: f64| h.value_at_quantile(quantile);
        Percentiles {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: q(0.50),
            p75_us: q(0.75),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: h.max(),
        }
    }
}

/// `(percentile, value µs)` pairs walking the histogram as HdrHistogram's
/// percentile distribution does (`ticks_per_half_distance` steps per halving
/// of the remaining distance to 100 %), ending with 100 % = max.
pub fn percentile_distribution(
    h: &LatencyHistogram,
    ticks_per_half_distance: u32,
) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(f64, u64)> = h
        .iter_quantiles(ticks_per_half_distance)
        .map(|v| {
            (
                v.quantile_iterated_to() * 100.0,
                h.highest_equivalent(v.value_iterated_to()),
            )
        })
        .collect();
    out.dedup_by(|later, earlier| later.0 == earlier.0);
    out
}

/// Writes one `.hlog` interval log.
pub struct HlogWriter {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl std::fmt::Debug for HlogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlogWriter")
            .field("path", &self.path)
            .finish()
    }
}

impl HlogWriter {
    /// Creates `path` and writes the header: `comment` lines, `StartTime` and
    /// `BaseTime` both set to `start` (interval timestamps are seconds since
    /// `start`), and the legend line.
    pub fn create(
        path: &Path,
        start: SystemTime,
        comment: &str,
    ) -> Result<HlogWriter, HarnessError> {
        let io_err = |source| HarnessError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::create(path).map_err(io_err)?;
        let mut writer = HlogWriter {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            serializer: V2DeflateSerializer::new(),
        };
        let mut builder = IntervalLogWriterBuilder::new();
        for line in comment.lines() {
            builder.add_comment(line);
        }
        builder.add_comment("values in microseconds");
        builder.with_start_time(start).with_base_time(start);
        builder
            .begin_log_with(&mut writer.out, &mut writer.serializer)
            .map_err(io_err)?;
        writeln!(writer.out, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")
            .map_err(io_err)?;
        Ok(writer)
    }

    /// Appends one interval: `start` is its offset from the log's start time.
    pub fn write_interval(
        &mut self,
        h: &LatencyHistogram,
        start: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> Result<(), HarnessError> {
        // A builder without headers writes nothing itself; it only lends its
        // line writer for this one histogram.
        let mut line = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|source| HarnessError::Io {
                path: self.path.clone(),
                source,
            })?;
        line.write_histogram(h, start, length, tag.and_then(Tag::new))
            .map_err(|e| HarnessError::Hlog {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }

    /// Writes what is buffered to the file, so that a process killed later
    /// (SIGKILL) leaves every interval written so far whole.
    pub fn flush(&mut self) -> Result<(), HarnessError> {
        self.out.flush().map_err(|source| HarnessError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Flushes and closes the file, returning its path.
    pub fn finish(mut self) -> Result<PathBuf, HarnessError> {
        self.out.flush().map_err(|source| HarnessError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.path)
    }
}

/// One interval read back from a `.hlog` file.
#[derive(Debug)]
pub struct HlogInterval {
    pub tag: Option<String>,
    pub start: Duration,
    pub length: Duration,
    pub histogram: LatencyHistogram,
}

/// Reads every interval histogram of a `.hlog` file (its own or HdrHistogram's Java output).
pub fn read_hlog(path: &Path) -> Result<Vec<HlogInterval>, HarnessError> {
    let bytes = std::fs::read(path).map_err(|source| HarnessError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |reason: String| HarnessError::Hlog {
        path: path.to_path_buf(),
        reason,
    };
    let mut deserializer = Deserializer::new();
    let mut intervals = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.map_err(|e| bad(format!("{e:?}")))? {
            LogEntry::Interval(ilh) => {
                intervals.push(decode_interval(&ilh, &mut deserializer).map_err(bad)?)
            }
            LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
        }
    }
    Ok(intervals)
}

fn decode_interval(
    ilh: &IntervalLogHistogram<'_>,
    deserializer: &mut Deserializer,
) -> Result<HlogInterval, String> {
    use base64::Engine as _;
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(ilh.encoded_histogram())
        .map_err(|e| e.to_string())?;
    let histogram: LatencyHistogram = deserializer
        .deserialize(&mut compressed.as_slice())
        .map_err(|e| format!("{e:?}"))?;
    Ok(HlogInterval {
        tag: ilh.tag().map(|t| t.as_str().to_string()),
        start: ilh.start_timestamp(),
        length: ilh.duration(),
        histogram,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn filled(values: &[u64]) -> LatencyHistogram {
        let mut h = new_latency_histogram();
        for &v in values {
            record_us(&mut h, v);
        }
        h
    }

    #[test]
    fn merging_keeps_every_sample_and_is_not_an_average() {
        // One runner fast, one slow: the merged p99 is the slow one's, an
        // average of the two p99s would be wrong by ~50 %.
        let fast = filled(&[100; 990]);
        let slow = filled(&[10_000; 10]);
        let merged = merge_all([&fast, &slow]);
        assert_eq!(merged.len(), 1000);
        let p = Percentiles::of(&merged);
        assert_eq!(p.p50_us, 100);
        assert!(p.p999_us >= 9_990, "p99.9 {}", p.p999_us);
        assert!(p.max_us >= 9_990);
    }

    #[test]
    fn out_of_range_values_saturate_instead_of_dropping() {
        let h = filled(&[0, 5, HIGHEST_TRACKABLE_US * 10]);
        assert_eq!(h.len(), 3);
        assert!(h.max() >= HIGHEST_TRACKABLE_US - HIGHEST_TRACKABLE_US / 500);
    }

    #[test]
    fn empty_histograms_summarise_to_zero() {
        let p = Percentiles::of(&new_latency_histogram());
        assert_eq!(p.count, 0);
        assert_eq!(p.max_us, 0);
        assert!(percentile_distribution(&new_latency_histogram(), 5).is_empty());
    }

    #[test]
    fn distribution_ends_at_the_max() {
        let h = filled(&(1..=1000).collect::<Vec<_>>());
        let d = percentile_distribution(&h, 5);
        let last = d.last().copied().expect("non-empty");
        assert_eq!(last.0, 100.0);
        assert_eq!(last.1, h.highest_equivalent(1000));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn hlog_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.hlog");
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut w = HlogWriter::create(&path, start, "chronik test\nsecond line").expect("create");
        let a = filled(&[10, 20, 30]);
        let b = filled(&[1_000]);
        w.write_interval(&a, Duration::ZERO, Duration::from_secs(1), Some("service"))
            .expect("write a");
        w.write_interval(&b, Duration::from_secs(1), Duration::from_millis(500), None)
            .expect("write b");
        w.finish().expect("finish");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("#[StartTime: 1700000000.000"), "{text}");
        assert!(text.contains("\"StartTimestamp\",\"Interval_Length\""));
        let back = read_hlog(&path).expect("parse");
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].tag.as_deref(), Some("service"));
        assert_eq!(back[0].histogram, a);
        assert_eq!(back[1].start, Duration::from_secs(1));
        assert_eq!(back[1].length, Duration::from_millis(500));
        assert_eq!(back[1].histogram.len(), 1);
    }
}
