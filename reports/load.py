"""Reads one results directory (``results/<run-id>/``) into raw Python objects and frames.

Owns: the file names and formats of the results-directory contract (see
``reports/README.md`` and ``load/SPEC.md``): ``meta.json``, ``load/`` (the
load generator, chronik-loadgen: ``gen-<i>/summary-<plan>.json``,
``gen-<i>/requests-<plan>.csv.gz``, ``merged-<plan>.json``), a legacy run's
``k6/``, ``consumers/``, ``ingestors/``, ``metrics/``, ``resources.csv``,
``faults/partitions.csv``; the
Prometheus text parser. Must not: compute figures (``tidy``, ``summarise``)
or crash on a missing or unreadable file: a file that is absent is simply
absent (``render`` says "not available"); one that exists but cannot be read
is recorded in ``Run.problems`` and otherwise ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

# chronik-loadgen (load/SPEC.md "Results")
LOAD_DIR = "load"
SUMMARY = re.compile(r"^summary-(?P<plan>.+)\.json$")
MERGED = re.compile(r"^merged-(?P<plan>.+)\.json$")
REQUESTS = re.compile(r"^requests-(?P<plan>.+)\.csv(?:\.gz)?$")
REQUEST_COLUMNS = [
    "seq", "scheduled_s", "sent_s", "latency_ms", "route", "status", "messages", "ok", "failed", "bytes_out",
    "bytes_in", "step", "error",
]
# the generator name of files directly in load/ (not in a gen-<i>/ directory)
SINGLE_GENERATOR = "loadgen"
# legacy runs (before issue 33): k6's handleSummary and `--out csv` files
K6_DIR = "k6"
K6_SUMMARY = re.compile(r"^k6-(?P<scenario>.+)-summary\.json$")
K6_RAW = re.compile(r"^raw-(?P<scenario>.+)\.csv(?:\.gz)?$")
# the runner name of files directly in k6/ (a single runner)
SINGLE_RUNNER = "k6"
LEDGER = re.compile(r"^(?P<name>.+)-ledger\.json$")
INGESTOR_METRICS = re.compile(r"^(?P<name>.+)-metrics\.prom$")
# ./run-all.sh --faults (scripts/faults.py): every partition's leader, replicas
# and ISR each time they changed, as the brokers' Metadata answered
PARTITION_STATES = "faults/partitions.csv"
PARTITION_STATE_COLUMNS = ["time", "partition", "leader", "replicas", "isr"]

REQUEST_FRAME_COLUMNS = ["generator", "scenario", *REQUEST_COLUMNS]
K6_RAW_COLUMNS = ["generator", "scenario", "metric_name", "timestamp", "metric_value"]
PROM_COLUMNS = ["scope", "source", "metric", "labels", "value"]
RESOURCE_COLUMNS = ["timestamp", "component", "name", "pid", "cpu_seconds", "rss_bytes"]


@dataclass(frozen=True)
class LoadSummary:
    """One load generator's summary of one plan: chronik-loadgen's
    ``summary-<plan>.json`` (``engine`` "loadgen"), its pooled
    ``merged-<plan>.json`` (``generator`` "merged"), or a legacy k6 runner's
    ``handleSummary`` data (``engine`` "k6"). All keep the
    ``metrics.<name>.values.<stat>`` shape."""

    generator: str
    scenario: str  # the plan's name (a legacy run: the k6 scenario's)
    path: Path
    data: dict
    engine: str = "loadgen"


@dataclass(frozen=True)
class ConsumerReport:
    """One chronik-consumer report (a replica's, or ``merged.json``)."""

    name: str
    path: Path
    data: dict

    @property
    def kind(self) -> str:
        return "merged" if self.data.get("kind") == "merged" or self.name == "merged" else "replica"


@dataclass(frozen=True)
class Ledger:
    """One ingestor's ledger of acknowledged / failed sequence ranges."""

    ingestor: str
    path: Path
    data: dict


@dataclass(frozen=True, eq=False)
class Run:
    """Everything read from one results directory, as found on disk."""

    path: Path
    run_id: str
    meta: dict
    # one per load generator and plan (never the merged summary)
    load_summaries: tuple[LoadSummary, ...]
    # load/merged-<plan>.json: the generators' raw rows pooled by chronik-loadgen merge
    merged_summaries: tuple[LoadSummary, ...]
    # generator, scenario, then the request columns of load/SPEC.md as written
    load_requests: pd.DataFrame
    # legacy runs: generator (the k6 runner), scenario, metric_name, timestamp (raw), metric_value
    k6_raw: pd.DataFrame
    consumers: tuple[ConsumerReport, ...]
    ledgers: tuple[Ledger, ...]
    # scope ("metrics" for metrics/*.prom, "metrics-start" for
    # metrics/start/*.prom: the same brokers as the measured load began,
    # "ingestor"), source (file stem or ingestor name), metric, labels, value
    prom: pd.DataFrame
    # timestamp (raw), component, name, pid, cpu_seconds, rss_bytes
    resources: pd.DataFrame
    problems: tuple[str, ...] = field(default=())
    # faults/partitions.csv: time (epoch s), partition, leader, replicas, isr (space-separated node ids)
    partition_states: pd.DataFrame = field(default_factory=lambda: _empty(PARTITION_STATE_COLUMNS))


def load_runs(paths) -> list[Run]:
    """Every results directory in ``paths``, in the order the runs started."""
    runs = [load_run(Path(p)) for p in paths]
    return sorted(runs, key=lambda r: (str(r.meta.get("started_at") or ""), r.run_id))


def load_run(path: Path) -> Run:
    """One results directory. Raises ``FileNotFoundError`` only if ``path`` is not a directory."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"results directory not found: {path}")
    problems: list[str] = []
    meta = _read_json(path / "meta.json", problems) or {}
    return Run(
        path=path,
        run_id=str(meta.get("run_id") or path.name),
        meta=meta,
        load_summaries=(*_loadgen_summaries(path, problems), *_k6_summaries(path, problems)),
        merged_summaries=tuple(_merged_summaries(path, problems)),
        load_requests=_load_requests(path, problems),
        k6_raw=_k6_raw(path, problems),
        consumers=tuple(_consumer_reports(path, problems)),
        ledgers=tuple(_ledgers(path, problems)),
        prom=_prom(path, problems),
        resources=_resources(path, problems),
        partition_states=_partition_states(path, problems),
        problems=tuple(problems),
    )


def _read_json(path: Path, problems: list[str]) -> dict | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        problems.append(f"{path.name}: unreadable JSON ({e})")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name}: expected a JSON object")
        return None
    return value


def _generator_of(top: Path, file: Path, single: str) -> str:
    parent = file.parent.relative_to(top)
    return single if parent == Path(".") else parent.as_posix()


def _summaries(run_dir: Path, sub: str, files, pattern: re.Pattern, single: str, engine: str, problems: list[str]):
    top = run_dir / sub
    for file in files:
        m = pattern.match(file.name)
        data = _read_json(file, problems) if m else None
        if data is None:
            continue
        if not isinstance(data.get("metrics"), dict):
            problems.append(f"{sub}/{file.relative_to(top)}: no metrics object")
            continue
        yield LoadSummary(_generator_of(top, file, single), m.group(1), file, data, engine)


def _loadgen_summaries(run_dir: Path, problems: list[str]):
    top = run_dir / LOAD_DIR
    if top.is_dir():
        yield from _summaries(run_dir, LOAD_DIR, sorted(top.rglob("summary-*.json")), SUMMARY, SINGLE_GENERATOR,
                              "loadgen", problems)


def _merged_summaries(run_dir: Path, problems: list[str]):
    top = run_dir / LOAD_DIR
    if top.is_dir():
        yield from _summaries(run_dir, LOAD_DIR, sorted(top.glob("merged-*.json")), MERGED, "merged", "loadgen",
                              problems)


def _k6_summaries(run_dir: Path, problems: list[str]):
    top = run_dir / K6_DIR
    if top.is_dir():
        yield from _summaries(run_dir, K6_DIR, sorted(top.rglob("k6-*-summary.json")), K6_SUMMARY, SINGLE_RUNNER,
                              "k6", problems)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _load_requests(run_dir: Path, problems: list[str]) -> pd.DataFrame:
    top = run_dir / LOAD_DIR
    frames = []
    if top.is_dir():
        for file in sorted(top.rglob("requests-*.csv*")):
            m = REQUESTS.match(file.name)
            if m is None:
                continue
            try:
                frame = pd.read_csv(file, dtype={"route": str, "step": str, "error": str}, keep_default_na=False,
                                    na_values={c: [""] for c in REQUEST_COLUMNS if c not in ("route", "step", "error")})
            except (OSError, ValueError, EOFError) as e:
                problems.append(f"{LOAD_DIR}/{file.relative_to(top)}: unreadable CSV ({e})")
                continue
            missing = [c for c in REQUEST_COLUMNS if c not in frame.columns]
            if missing:
                problems.append(f"{LOAD_DIR}/{file.relative_to(top)}: missing columns {', '.join(missing)}")
                continue
            frames.append(frame.assign(generator=_generator_of(top, file, SINGLE_GENERATOR), scenario=m["plan"]))
    if not frames:
        return _empty(REQUEST_FRAME_COLUMNS)
    return pd.concat(frames, ignore_index=True)[REQUEST_FRAME_COLUMNS]


def _partition_states(run_dir: Path, problems: list[str]) -> pd.DataFrame:
    file = run_dir / PARTITION_STATES
    if not file.is_file():
        return _empty(PARTITION_STATE_COLUMNS)
    try:
        frame = pd.read_csv(file, dtype={"replicas": str, "isr": str}, keep_default_na=False)
    except (OSError, ValueError) as e:
        problems.append(f"{PARTITION_STATES}: unreadable CSV ({e})")
        return _empty(PARTITION_STATE_COLUMNS)
    missing = [c for c in PARTITION_STATE_COLUMNS if c not in frame.columns]
    if missing:
        problems.append(f"{PARTITION_STATES}: missing columns {', '.join(missing)}")
        return _empty(PARTITION_STATE_COLUMNS)
    return frame[PARTITION_STATE_COLUMNS]


def _k6_raw(run_dir: Path, problems: list[str]) -> pd.DataFrame:
    top = run_dir / K6_DIR
    frames = []
    if top.is_dir():
        for file in sorted(top.rglob("raw-*.csv*")):
            m = K6_RAW.match(file.name)
            if m is None:
                continue
            try:
                frame = pd.read_csv(file, usecols=["metric_name", "timestamp", "metric_value"])
            except (OSError, ValueError, EOFError) as e:
                problems.append(f"{K6_DIR}/{file.relative_to(top)}: unreadable CSV ({e})")
                continue
            frames.append(frame.assign(generator=_generator_of(top, file, SINGLE_RUNNER), scenario=m["scenario"]))
    if not frames:
        return _empty(K6_RAW_COLUMNS)
    return pd.concat(frames, ignore_index=True)[K6_RAW_COLUMNS]


def _consumer_reports(run_dir: Path, problems: list[str]):
    cdir = run_dir / "consumers"
    if not cdir.is_dir():
        return
    for file in sorted(cdir.glob("*.json")):
        data = _read_json(file, problems)
        if data is not None:
            yield ConsumerReport(file.stem, file, data)


def _ledgers(run_dir: Path, problems: list[str]):
    idir = run_dir / "ingestors"
    if not idir.is_dir():
        return
    for file in sorted(idir.glob("*-ledger.json")):
        data = _read_json(file, problems)
        if data is not None:
            yield Ledger(LEDGER.match(file.name)["name"], file, data)


def _prom(run_dir: Path, problems: list[str]) -> pd.DataFrame:
    sources: list[tuple[str, str, Path]] = []
    if (run_dir / "metrics").is_dir():
        sources += [("metrics", f.stem, f) for f in sorted((run_dir / "metrics").glob("*.prom"))]
        sources += [("metrics-start", f.stem, f) for f in sorted((run_dir / "metrics" / "start").glob("*.prom"))]
    if (run_dir / "ingestors").is_dir():
        sources += [
            ("ingestor", INGESTOR_METRICS.match(f.name)["name"], f)
            for f in sorted((run_dir / "ingestors").glob("*-metrics.prom"))
        ]
    frames = []
    for scope, source, file in sources:
        try:
            frames.append(parse_prometheus_text(file.read_text()).assign(scope=scope, source=source))
        except OSError as e:
            problems.append(f"{file.name}: unreadable ({e})")
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PROM_COLUMNS})
    return pd.concat(frames, ignore_index=True)[PROM_COLUMNS]


def _resources(run_dir: Path, problems: list[str]) -> pd.DataFrame:
    file = run_dir / "resources.csv"
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in RESOURCE_COLUMNS})
    if not file.is_file():
        return empty
    try:
        frame = pd.read_csv(file, dtype={"component": str, "name": str, "timestamp": str})
    except (OSError, ValueError) as e:
        problems.append(f"resources.csv: unreadable ({e})")
        return empty
    missing = [c for c in RESOURCE_COLUMNS if c not in frame.columns]
    if missing:
        problems.append(f"resources.csv: missing columns {', '.join(missing)}")
        return empty
    return frame[RESOURCE_COLUMNS]


# name{labels} value [timestamp]; label values may contain escaped quotes
_SAMPLE = re.compile(r"^(?P<metric>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus_text(text: str) -> pd.DataFrame:
    """Samples of a Prometheus / OpenMetrics text exposition: ``metric``,
    ``labels`` (``k="v",...`` sorted by key, ``""`` for none) and ``value``.
    Comment lines and lines that do not parse are skipped."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(_LABEL.findall(m["labels"] or "")))
        rows.append((m["metric"], labels, value))
    return pd.DataFrame(rows, columns=["metric", "labels", "value"]).astype({"value": float})
