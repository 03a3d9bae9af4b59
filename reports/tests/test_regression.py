"""The regression verdict (reports/regression.py): a difference is called
real only when it is beyond run-to-run noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports.regression import compare, interval_rates, mann_whitney

from .conftest import ACKS1, KAFKA, LEGACY


def test_mann_whitney_matches_the_normal_approximation_by_hand():
    # U = 0, mean 4.5, sd sqrt(3*3*7/12): z = -1.964, p = 0.0495
    u, p = mann_whitney(np.array([1, 2, 3]), np.array([4, 5, 6]))
    assert u == 0
    assert p == pytest.approx(math.erfc(4.5 / math.sqrt(63 / 12) / math.sqrt(2)))
    assert p == pytest.approx(0.0495, abs=1e-4)
    # ties: every value equal gives no evidence at all
    assert mann_whitney(np.ones(5), np.ones(5))[1] == 1.0


def side(means, noise, seconds=60, seed=1):
    rng = np.random.default_rng(seed)
    return {f"run{i}": rng.normal(m, noise, seconds) for i, m in enumerate(means)}


def test_a_clear_shift_is_beyond_noise():
    v = compare(side([100_000] * 3, 2_000, seed=1), side([90_000] * 3, 2_000, seed=2))
    assert v.beyond_noise and v.ratio_high < 1 and v.p_value < 1e-6
    assert "beyond run-to-run noise" in v.text and v.ratio == pytest.approx(0.9, abs=0.01)


def test_the_same_build_twice_is_within_noise():
    v = compare(side([100_000] * 3, 5_000, seed=3), side([100_000] * 3, 5_000, seed=4))
    assert not v.beyond_noise and v.ratio_low < 1 < v.ratio_high


def test_run_to_run_noise_is_not_mistaken_for_a_difference():
    # Each run sits at its own level (run-to-run noise of several %) with
    # steady seconds: pooled seconds differ "significantly", the runs do not.
    baseline = side([96_000, 104_000, 98_000], 300, seed=5)
    candidate = side([103_000, 97_000, 106_000], 300, seed=6)
    v = compare(baseline, candidate)
    assert v.p_value < 0.01  # the seconds alone would call it
    assert not v.beyond_noise and v.ratio_low < 1 < v.ratio_high


def test_one_run_a_side_says_the_noise_between_runs_is_unmeasured():
    v = compare(side([100_000], 1_000, seed=7), side([95_000], 1_000, seed=8))
    assert v.beyond_noise and "one run on a side" in v.text


def test_interval_rates_and_compare_command(runs, capsys, copy_run):
    from reports.__main__ import main

    rates = interval_rates([r for r in runs if r.run_id == ACKS1])
    assert list(rates) == [ACKS1] and len(rates[ACKS1]) > 0
    acks1 = str(copy_run(ACKS1))
    assert main(["compare", "--baseline", acks1, "--candidate", acks1]) == 0
    assert "within noise" in capsys.readouterr().out
    # the Kafka fixture has summaries only, no raw request rows: a usage error, said plainly
    assert main(["compare", "--baseline", acks1, "--candidate", str(copy_run(KAFKA))]) == 2
    err = capsys.readouterr().err
    assert "no raw request rows (load/gen-*/requests-*.csv.gz): left out" in err
    assert "each side needs at least one run with raw request rows" in err


def test_compare_reads_a_legacy_k6_run(copy_run, capsys):
    from reports.__main__ import main

    legacy = str(copy_run(LEGACY))
    assert main(["compare", "--baseline", legacy, "--candidate", legacy]) == 0
    assert "1 baseline run(s), 1 candidate run(s)" in capsys.readouterr().out
