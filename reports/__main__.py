"""``python -m reports render RESULTS_DIR... -o report.md``: writes the report and
its charts (``charts/*.png`` beside the report); ``--target-rate N`` is the
msg/s its sizing table projects to (default 800,000). Exit status 2 when a
results directory does not exist (or a bad option); missing pieces inside one
are reported, not fatal.

``python -m reports capacity RESULTS_DIR...``: prints the max sustainable rate
of each find-max run; exit status 1 when a run has no level that held (or no
find-max summary).

``python -m reports compare --baseline DIR... --candidate DIR...``: whether
the candidate runs' throughput differs from the baseline runs' beyond
run-to-run noise (``regression``); exit status 2 when a side has no raw
request rows of the load generator (chronik-loadgen).

``python -m reports faults RESULTS_DIR...``: prints each scheduled fault
(``run-all.sh --faults``) with its recovery figures; exit status 1 when a run
has no fault that ran, or one that ran has no figure for when
acknowledgements resumed or (a kill or stop) no ISR shrink or leader change
seen (``scripts/fault-smoke.sh``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from . import capacity, faults, regression
from .charts import write_charts
from .load import load_runs
from .render import render_markdown
from .report import build_report
from .sizing import DEFAULT_TARGET_RATE


def _rate(text: str) -> float:
    """A target rate: a positive number of messages per second."""
    try:
        rate = float(text)
    except ValueError:
        rate = float("nan")
    if not rate > 0 or rate == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive msg/s rate: {text!r}")
    return rate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="render results directories as one Markdown report")
    render.add_argument("results", nargs="+", type=Path, metavar="RESULTS_DIR", help="results/<run-id>/ directories")
    render.add_argument("-o", "--output", type=Path, default=Path("report.md"), help="Markdown file (default report.md)")
    render.add_argument("--no-charts", action="store_true", help="do not draw charts/*.png")
    render.add_argument("--target-rate", type=_rate, default=DEFAULT_TARGET_RATE, metavar="N",
                        help=f"msg/s the sizing table projects to (default {DEFAULT_TARGET_RATE:,})")
    cap = commands.add_parser("capacity", help="print the max sustainable rate of find-max runs")
    cap.add_argument("results", nargs="+", type=Path, metavar="RESULTS_DIR", help="results/<run-id>/ directories")
    flt = commands.add_parser("faults", help="print the recovery figures of each scheduled fault")
    flt.add_argument("results", nargs="+", type=Path, metavar="RESULTS_DIR", help="results/<run-id>/ directories")
    cmp = commands.add_parser("compare", help="is the candidate's throughput different beyond run-to-run noise?")
    cmp.add_argument("--baseline", nargs="+", type=Path, required=True, metavar="RESULTS_DIR")
    cmp.add_argument("--candidate", nargs="+", type=Path, required=True, metavar="RESULTS_DIR")
    return parser


def _compare(baseline, candidate) -> int:
    sides = []
    for paths in (baseline, candidate):
        runs = load_runs(paths)
        rates = regression.interval_rates(runs)
        for run in runs:
            if run.run_id not in rates:
                print(f"`{run.run_id}`: no raw request rows (load/gen-*/requests-*.csv.gz): left out",
                      file=sys.stderr)
        sides.append(rates)
    try:
        verdict = regression.compare(*sides)
    except ValueError as e:
        print(f"python -m reports compare: {e}", file=sys.stderr)
        return 2
    print(f"{verdict.baseline_runs} baseline run(s), {verdict.candidate_runs} candidate run(s): {verdict.text}")
    return 0


def _capacity(runs) -> int:
    verdicts = capacity.verdicts(capacity.levels(capacity.steps(runs)))
    for line in capacity.verdict_lines(verdicts) + capacity.comparison_lines(verdicts):
        print(line.replace("**", ""))
    found = set(verdicts["run_id"]) if len(verdicts) else set()
    for run in runs:
        if run.run_id not in found:
            print(f"`{run.run_id}`: no find-max summary", file=sys.stderr)
    return 0 if len(found) == len(runs) and verdicts["max_level"].notna().all() else 1


def _faults(runs) -> int:
    _, table = faults.faults(runs)
    ok = True
    for run in runs:
        mine = table[table["run_id"] == run.run_id]
        ran = mine[mine["ran"]]
        if ran.empty:
            print(f"`{run.run_id}`: no scheduled fault ran", file=sys.stderr)
            ok = False
        for f in mine.itertuples():
            print(f"{run.run_id} {f.kind} {f.target} at {f.at_s:.1f} s for {f.lasted_s:.1f} s: acks resumed after "
                  f"{f.acks_resumed_after_s:.1f} s, p99 {f.p99_before_ms:.0f} -> {f.p99_peak_ms:.0f} ms (during "
                  f"{f.p99_during_ms:.0f} ms) back within 2x "
                  f"after {f.p99_back_after_s:.0f} s, {f.messages_unanswered:.0f} msgs not answered in time and "
                  f"{f.messages_refused:.0f} answered failed, ISR shrank after "
                  f"{f.isr_shrank_after_s:.1f} s full after {f.isr_full_after_s:.1f} s, {f.leader_changes:.0f} leader "
                  f"changes ({f.detail})")
            if not f.ran:
                continue
            if pd.isna(f.acks_resumed_after_s):
                print(f"`{run.run_id}` {f.kind}: no figure for acknowledgements resuming", file=sys.stderr)
                ok = False
            if f.kind in ("kill", "stop") and (pd.isna(f.isr_shrank_after_s) or not f.leader_changes > 0):
                print(f"`{run.run_id}` {f.kind}: no ISR shrink or leader change seen", file=sys.stderr)
                ok = False
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dirs = args.baseline + args.candidate if args.command == "compare" else args.results
    missing = [str(p) for p in dirs if not p.is_dir()]
    if missing:
        print(f"python -m reports: not a results directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.command == "compare":
        return _compare(args.baseline, args.candidate)
    if args.command == "capacity":
        return _capacity(load_runs(args.results))
    if args.command == "faults":
        return _faults(load_runs(args.results))
    report = build_report(load_runs(args.results), target_rate=args.target_rate)
    output = args.output
    output.parent.mkdir(parents=True, exist_ok=True)
    charts = {}
    if not args.no_charts:
        written = write_charts(report, output.parent / "charts")
        charts = {name: Path(os.path.relpath(path, output.parent)).as_posix() for name, path in written.items()}
    output.write_text(render_markdown(report, charts))
    print(f"wrote {output} ({len(report.runs)} runs, {len(charts)} charts)")
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
