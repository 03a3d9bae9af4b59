"""Whether two sets of runs differ beyond run-to-run noise.

Owns: the per-second throughput series a comparison uses (from the load
generators' raw request rows, or a legacy run's raw k6 samples; the first and
last ``TRIM_S`` seconds of each run dropped: ramp-up and drain), the two
tests and the verdict. Must not: read files (``load``) or format a
report.

Two tests must agree before a difference is called real:

- **Mann–Whitney U** on the per-second rates of the two sides (normal
  approximation with tie correction, two-sided): are the rates of one side
  generally higher? Seconds of one run are not independent, so on its own
  this test is too eager.
- **Bootstrap of the ratio of means**, resampling whole runs first and
  seconds within each drawn run second (``BOOTSTRAP_DRAWS`` draws, fixed
  seed): with repeated runs, it carries the run-to-run noise; its
  ``1 − ALPHA`` interval of candidate ÷ baseline must exclude 1.

With a single run on a side, the run-to-run noise is not measured at all; the
verdict says so and asks for repeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .load import Run
from .summarise import throughput_timeline

TRIM_S = 5
ALPHA = 0.01
BOOTSTRAP_DRAWS = 4000
SEED = 20261124


@dataclass(frozen=True)
class Verdict:
    baseline_runs: int
    candidate_runs: int
    baseline_mean: float
    candidate_mean: float
    ratio: float  # candidate mean / baseline mean
    ratio_low: float  # bootstrap interval, 1 - ALPHA
    ratio_high: float
    p_value: float  # Mann–Whitney, two-sided
    beyond_noise: bool
    text: str


def interval_rates(runs: list[Run], trim_s: int = TRIM_S) -> dict[str, np.ndarray]:
    """Messages per second of each run, without its first and last ``trim_s`` seconds."""
    timeline = throughput_timeline(runs)
    out = {}
    for run_id, g in timeline.groupby("run_id", sort=False):
        g = g.sort_values("second")
        keep = g[(g["second"] >= g["second"].min() + trim_s) & (g["second"] <= g["second"].max() - trim_s)]
        if len(keep):
            out[str(run_id)] = keep["msg_per_s"].to_numpy(dtype=float)
    return out


def mann_whitney(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(U of ``a``, two-sided p) by the normal approximation with tie correction."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan
    both = np.concatenate([a, b])
    ranks = pd.Series(both).rank(method="average").to_numpy()
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    n = n1 + n2
    _, counts = np.unique(both, return_counts=True)
    tie = (counts**3 - counts).sum() / (n * (n - 1)) if n > 1 else 0.0
    variance = n1 * n2 / 12 * ((n + 1) - tie)
    if variance <= 0:
        return float(u), 1.0
    z = (u - n1 * n2 / 2) / math.sqrt(variance)
    return float(u), math.erfc(abs(z) / math.sqrt(2))


def bootstrap_ratio(baseline: list[np.ndarray], candidate: list[np.ndarray], draws: int = BOOTSTRAP_DRAWS,
                    alpha: float = ALPHA, seed: int = SEED) -> tuple[float, float]:
    """The ``1 − alpha`` percentile interval of mean(candidate) / mean(baseline),
    resampling runs, then seconds within each drawn run."""
    rng = np.random.default_rng(seed)

    def draw_mean(side: list[np.ndarray]) -> float:
        picked = rng.integers(0, len(side), size=len(side))
        values = [side[i][rng.integers(0, len(side[i]), size=len(side[i]))] for i in picked]
        return float(np.concatenate(values).mean())

    ratios = np.array([draw_mean(candidate) / draw_mean(baseline) for _ in range(draws)])
    return float(np.quantile(ratios, alpha / 2)), float(np.quantile(ratios, 1 - alpha / 2))


def compare(baseline: dict[str, np.ndarray], candidate: dict[str, np.ndarray]) -> Verdict:
    """The verdict on two sides' per-second rates (run id -> series)."""
    if not baseline or not candidate:
        raise ValueError("each side needs at least one run with raw request rows "
                         "(load/gen-*/requests-*.csv.gz; a legacy run: k6/raw-*.csv.gz)")
    b_runs, c_runs = list(baseline.values()), list(candidate.values())
    b_all, c_all = np.concatenate(b_runs), np.concatenate(c_runs)
    b_mean, c_mean = float(b_all.mean()), float(c_all.mean())
    _, p = mann_whitney(c_all, b_all)
    low, high = bootstrap_ratio(b_runs, c_runs)
    beyond = bool(p < ALPHA and (low > 1 or high < 1))
    change = f"{(c_mean / b_mean - 1):+.1%}"
    interval = f"{1 - ALPHA:.0%} interval of the ratio {low:.3f}–{high:.3f}"
    if beyond:
        text = (f"candidate {c_mean:,.0f} vs baseline {b_mean:,.0f} msg/s ({change}): beyond run-to-run noise "
                f"(Mann–Whitney p = {p:.2g}; {interval})")
    else:
        text = (f"candidate {c_mean:,.0f} vs baseline {b_mean:,.0f} msg/s ({change}): within noise "
                f"(Mann–Whitney p = {p:.2g}; {interval})")
    if len(b_runs) < 2 or len(c_runs) < 2:
        text += ("; one run on a side: the noise between runs is not measured, so this judges one run "
                 "against another, not two builds; repeat each side (3 or more runs)")
    return Verdict(len(b_runs), len(c_runs), b_mean, c_mean, c_mean / b_mean, low, high, p, beyond, text)
