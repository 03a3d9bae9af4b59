"""Latency distributions: HdrHistogram interval logs and the load generator's raw samples.

Owns: decoding ``.hlog`` files (the chronik-harness ``HlogWriter`` layout,
which is HdrHistogram's Java ``HistogramLogWriter`` layout), merging
histograms, the percentile summary, and percentiles of raw samples the way the
load generator (chronik-loadgen) computes them. Must not: know which file a histogram came from or what it
measured; average percentiles of different sources (the one thing this module
exists to prevent: percentiles only come from merged distributions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

# The shape chronik-harness records in (histogram.rs): 1 µs .. 1 h, 3 digits.
LOWEST_TRACKABLE_US = 1
HIGHEST_TRACKABLE_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3

# The percentiles every latency table shows, as (column, percentile).
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("p99.99", 99.99),
)

# `[Tag=name,]start,length,max,payload`; the payload is base64 of a
# compressed V2 histogram ("HISTFAA...").
_INTERVAL = re.compile(r"^(?:Tag=(?P<tag>[^,]*),)?(?P<start>[\d.]+),(?P<length>[\d.]+),(?P<max>[\d.]+),(?P<payload>\S+)$")


class HlogError(ValueError):
    """A ``.hlog`` file that cannot be read or decoded."""


_BASE_TIME = re.compile(r"^#\[(?:BaseTime|StartTime): (?P<epoch>[\d.]+)")


@dataclass(frozen=True)
class HlogInterval:
    tag: str | None
    start_s: float
    length_s: float
    histogram: HdrHistogram
    # seconds since the Unix epoch of the interval's start, when the log has a
    # BaseTime (or StartTime) header
    epoch_start_s: float | None = None

    @property
    def epoch_mid_s(self) -> float | None:
        return None if self.epoch_start_s is None else self.epoch_start_s + self.length_s / 2


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_TRACKABLE_US, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)


def decode_histogram(payload: str) -> HdrHistogram:
    """One base64 compressed V2 histogram (an ``.hlog`` payload, or a report's ``histogram`` field)."""
    try:
        return HdrHistogram.decode(payload)
    except Exception as e:  # hdrh raises bare ValueError/zlib.error/TypeError
        raise HlogError(f"cannot decode histogram: {e}") from e


def read_hlog(path: Path) -> list[HlogInterval]:
    """Every interval histogram of an interval log; comment and header lines are skipped."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise HlogError(f"{path}: {e}") from e
    intervals = []
    base: float | None = None
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        # a writer killed mid-line (a SIGKILLed consumer) leaves its last
        # interval torn: every complete line before it still counts
        lines = lines[:-1]
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        header = _BASE_TIME.match(line)
        if header is not None:
            # BaseTime wins over StartTime (interval timestamps count from it)
            if base is None or line.startswith("#[BaseTime"):
                base = float(header["epoch"])
            continue
        if not line or line.startswith(("#", '"')):
            continue
        m = _INTERVAL.match(line)
        if m is None:
            raise HlogError(f"{path}:{number}: not an interval line")
        try:
            histogram = decode_histogram(m["payload"])
        except HlogError as e:
            raise HlogError(f"{path}:{number}: {e}") from e
        start = float(m["start"])
        intervals.append(HlogInterval(m["tag"], start, float(m["length"]), histogram,
                                      None if base is None else base + start))
    return intervals


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    """The union of ``histograms``: every recorded value keeps its count."""
    merged = new_histogram()
    for h in histograms:
        try:
            merged.add(h)
        except IndexError:
            # A histogram of a wider range: re-record its values, saturating
            # at the top (as chronik-harness does) so no sample is dropped.
            top = merged.get_highest_equivalent_value(HIGHEST_TRACKABLE_US)
            for item in h.get_recorded_iterator():
                merged.record_value(min(item.value_iterated_to, top), item.count_at_value_iterated_to)
    return merged


def merge_hlogs(paths: Sequence[Path]) -> HdrHistogram:
    """All intervals of all ``paths`` merged into one histogram."""
    return merge(interval.histogram for path in paths for interval in read_hlog(path))


def split_hlogs(paths: Sequence[Path], measured_from: float) -> tuple[HdrHistogram, HdrHistogram]:
    """(measured, warm-up): the intervals of all ``paths`` whose midpoint is
    at or after ``measured_from`` (seconds since the epoch), and those before
    it. A log without a BaseTime header cannot be split and counts as
    measured."""
    measured, warmup = [], []
    for path in paths:
        for interval in read_hlog(path):
            mid = interval.epoch_mid_s
            (warmup if mid is not None and mid < measured_from else measured).append(interval.histogram)
    return merge(measured), merge(warmup)


def histogram_percentiles(h: HdrHistogram) -> dict[str, float]:
    """count, mean, the usual percentiles and max, in the histogram's unit (µs)."""
    if h.get_total_count() == 0:
        return {"count": 0, "mean": np.nan, **{name: np.nan for name, _ in PERCENTILES}, "max": np.nan}
    return {
        "count": h.get_total_count(),
        "mean": h.get_mean_value(),
        **{name: float(h.get_value_at_percentile(p)) for name, p in PERCENTILES},
        "max": float(h.get_max_value()),
    }


def percentile_distribution(h: HdrHistogram, ticks_per_half_distance: int = 5) -> pd.DataFrame:
    """``percentile``, ``value`` pairs for a percentile plot, ending at 100 % = max."""
    if h.get_total_count() == 0:
        return pd.DataFrame({"percentile": pd.Series(dtype=float), "value": pd.Series(dtype=float)})
    rows = [
        (item.percentile_level_iterated_to, float(h.get_highest_equivalent_value(item.value_iterated_to)))
        for item in h.get_percentile_iterator(ticks_per_half_distance)
    ]
    return (
        pd.DataFrame(rows, columns=["percentile", "value"])
        .drop_duplicates("percentile", keep="last")
        .reset_index(drop=True)
    )


def sample_percentiles(values: Sequence[float] | pd.Series) -> dict[str, float]:
    """count, mean, percentiles and max of raw samples, interpolated linearly
    between closest ranks as chronik-loadgen's summary (and k6's Trend before
    it) does, so one generator's raw samples reproduce its summary."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return {"count": 0, "mean": np.nan, **{name: np.nan for name, _ in PERCENTILES}, "max": np.nan}
    return {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        **{name: float(np.percentile(arr, p, method="linear")) for name, p in PERCENTILES},
        "max": float(arr.max()),
    }
