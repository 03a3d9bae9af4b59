#!/usr/bin/env bash
# k8s-perf/tests/test_results.sh - what k8s-perf/run.sh writes is the layout
# of a local run: build a results directory the way run.sh does (lib/results.py
# on real runner logs and a real consumer report from scrape.sh, synthetic
# Prometheus answers for resources.csv and the merged percentiles), render it
# with the project's report (`python -m reports render`), and check the
# report read every part. Prints "results: N passed, N failed".
#
#   k8s-perf/tests/test_results.sh SCRAPE_DIR
#
# Needs: .venv with the report's packages (scripts/install-report-deps.sh,
# run here; idempotent), target/release/chronik-consumer.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SCRAPE=${1:?usage: test_results.sh SCRAPE_DIR}
RESULTS_PY="$REPO/k8s-perf/lib/results.py"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
RUN="$WORK/20261122T000000Z-k8s-small"
mkdir -p "$RUN"/{k6,consumers,ingestors,metrics,logs}

passed=0
failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }

python3 "$RESULTS_PY" k6-files "$SCRAPE/logs/k6-smoke.out" "$RUN/k6/chronik-load-1-x2x4q" 2> /dev/null
python3 "$RESULTS_PY" k6-files "$SCRAPE/logs/k6-dropped.out" "$RUN/k6/chronik-load-2-7hg2k" 2> /dev/null
check "k6-files cut each runner's summary out of its log" \
  '[[ -s "$RUN/k6/chronik-load-1-x2x4q/k6-smoke-summary.json" && -s "$RUN/k6/chronik-load-2-7hg2k/k6-smoke-summary.json" ]]'
cp "$SCRAPE/consumer-report.json" "$RUN/consumers/chronik-consumer-abc-1769000000.json"
cp "$SCRAPE/consumer-report.hlog" "$RUN/consumers/chronik-consumer-abc-1769000000.hlog"
"$REPO/target/release/chronik-consumer" merge --report "$RUN/consumers/merged.json" "$RUN"/consumers/*.json > /dev/null 2>&1 || true
python3 - "$RUN/metrics" << 'PY'
import json, sys
from pathlib import Path
m = Path(sys.argv[1])
def vector(v):
    return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1769000060, str(v)]}]}}
for q, v in (("0.5", 0.011), ("0.99", 0.045)):
    (m / f"prometheus-k6-batch-latency-p{q}.json").write_text(json.dumps(vector(v)))
(m / "prometheus-k6-messages-produced-total.json").write_text(json.dumps(vector(17900)))
def matrix(metric_name, per_pod):
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"pod": pod, "container": c, "namespace": "chronik-perf"},
         "values": [[1769000000 + 5 * i, str(f(i))] for i in range(5)]} for pod, c, f in per_pod]}}
pods = [("chronik-0", "chronik", lambda i: 2.0 * i), ("chronik-ingestor-7d9f-abc", "ingestor", lambda i: 0.5 * i),
        ("chronik-consumer-5c4-xyz", "consumer", lambda i: 0.1 * i), ("chronik-load-1-x2x4q", "k6", lambda i: 1.0 * i)]
(m / "prometheus-range-cpu.json").write_text(json.dumps(matrix("cpu", pods)))
(m / "prometheus-range-rss.json").write_text(json.dumps(matrix("rss", [(p, c, lambda i: 64e6) for p, c, _ in pods])))
PY
python3 "$RESULTS_PY" resources "$RUN/metrics/prometheus-range-cpu.json" "$RUN/metrics/prometheus-range-rss.json" "$RUN/resources.csv" 2> /dev/null
check "resources.csv has one row per container and sample" '[[ $(wc -l < "$RUN/resources.csv") -eq 21 ]]'
check "resources.csv names the components" \
  '[[ $(cut -d, -f2 "$RUN/resources.csv" | sort -u | tr "\n" " ") == "broker component consumer ingestor k6 " ]]'
python3 "$RESULTS_PY" merged "$RUN/metrics" "$RUN/merged-percentiles.md"
check "merged percentiles table" 'grep -q "| k6-batch-latency | 11.0 | - | - | 45.0 |" "$RUN/merged-percentiles.md"'
python3 "$REPO/scripts/runctl.py" meta "$RUN/meta.json" --run-id 20261122T000000Z-k8s-small \
  --started-at 2026-11-22T00:00:00Z --finished-at 2026-11-22T00:01:00Z --broker chronik \
  --broker-flag=--wal-profile --broker-flag=medium \
  --host kind=kubernetes --host context=kind-test --host namespace=chronik-perf --host nodes=1 \
  --setting test=smoke --setting overlay=small --setting scale=1.0 --setting 'acks="1"' --setting ingestors=1 \
  --setting consumers=1 --setting partitions=6 --setting wal_profile=medium --setting produce_profile=balanced \
  --k6-dir "$RUN/k6"
check "meta.json: the cluster as host, acks as text" \
  'python3 -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(not (m[\"host\"] == {\"kind\": \"kubernetes\", \"context\": \"kind-test\", \"namespace\": \"chronik-perf\", \"nodes\": 1} and m[\"settings\"][\"acks\"] == \"1\"))" "$RUN/meta.json"'
check "meta.json completed from the k6 summaries" \
  'python3 -c "import json,sys; s=json.load(open(sys.argv[1]))[\"settings\"]; sys.exit(not (s[\"batch_size\"] == 100 and s[\"message_size\"] == 256 and s[\"duration_s\"] > 0))" "$RUN/meta.json"'

bash "$REPO/scripts/install-python-deps.sh" > /dev/null && bash "$REPO/scripts/install-report-deps.sh" > /dev/null
(cd "$REPO" && .venv/bin/python -m reports render "$RUN" -o "$RUN/report.md" --no-charts) > "$WORK/render.log" 2>&1
check "python -m reports render reads the k8s results directory" '[[ -s "$RUN/report.md" ]]'
check "report: the verdict from merged.json" 'grep -q "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt" "$RUN/report.md"'
check "report: one row per k6 runner pod" 'grep -q "chronik-load-1-x2x4q" "$RUN/report.md" && grep -q "chronik-load-2-7hg2k" "$RUN/report.md"'
check "report: runner percentiles not averaged" 'grep -q "not merged: 2 runners" "$RUN/report.md"'
check "report: resources per component" 'grep -qi "ingestor" "$RUN/report.md" && ! grep -q "not available: .*resources.csv" "$WORK/render.log"'
echo "results: $passed passed, $failed failed"
((failed == 0))
