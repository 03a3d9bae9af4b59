#!/usr/bin/env bash
# k8s-perf/tests/test_results.sh - what k8s-perf/run.sh writes is the layout
# of a local run: the load generators' results as scrape.sh collected them
# from two live generators (lib/collect.sh's loadgen_fetch through a
# stand-in pod proxy, then chronik-loadgen merge), a real consumer report,
# synthetic Prometheus answers for resources.csv and the merged percentiles;
# rendered with the project's report (`python -m reports render`), checking
# the report read every part. Also what the collection proves about the Job:
# both indexes started together (the barrier), each offered half of the
# plan, the merge pooled both; and run.sh's follow loop's three outcomes
# (fetched; the boundary: pods that complete without answering; a generator
# failing before it answered). Prints "results: N passed, N failed".
#
#   k8s-perf/tests/test_results.sh SCRAPE_DIR
#
# Needs: .venv with the report's packages (scripts/install-report-deps.sh,
# run here; idempotent), target/release/chronik-consumer, python3.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SCRAPE=${1:?usage: test_results.sh SCRAPE_DIR}
RESULTS_PY="$REPO/k8s-perf/lib/results.py"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
RUN="$WORK/20261122T000000Z-k8s-small"
mkdir -p "$RUN"/{load,consumers,ingestors,metrics,logs}

passed=0
failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }

# -- the load generators' results, as run.sh collects them ------------------------------------------
cp -r "$SCRAPE/load/." "$RUN/load/" 2> /dev/null || true
# run.sh's follow loop (lib/collect.sh loadgen_follow) through the stand-in: "RC FETCHED [ENDED]"
check "loadgen_follow fetched both running generators as soon as they had their results (returned 0, 2 fetched: $(cat "$SCRAPE/load-follow-running" 2> /dev/null))" \
  '[[ "$(cat "$SCRAPE/load-follow-running" 2> /dev/null)" == "0 2" ]]'
check "loadgen_follow stops at the boundary when the pods complete without ever answering (returned 3: $(cat "$SCRAPE/load-follow-completed" 2> /dev/null))" \
  '[[ "$(cat "$SCRAPE/load-follow-completed" 2> /dev/null)" == "3 0 2" ]]'
check "loadgen_follow fails when a generator exits non-zero before it answered (returned 2, not the boundary: $(cat "$SCRAPE/load-follow-failed" 2> /dev/null))" \
  '[[ "$(cat "$SCRAPE/load-follow-failed" 2> /dev/null)" == "2 0 2" ]]'
check "collect.sh fetched both generators' results through the pod proxy (gen-0/, gen-1/: summary and raw rows)" \
  '[[ -s "$RUN/load/gen-0/summary-smoke.json" && -s "$RUN/load/gen-1/summary-smoke.json"
     && -s "$RUN/load/gen-0/requests-smoke.csv.gz" && -s "$RUN/load/gen-1/requests-smoke.csv.gz" ]]'
check "each generator's tar held its own gen-<index>/ only" \
  '[[ $(find "$RUN/load" -mindepth 1 -maxdepth 1 -name "gen-*" | wc -l) == 2 && -z $(find "$RUN/load"/gen-* -mindepth 1 -type d) ]]'
# (0 or 99: whether the smoke's thresholds held on a busy 2-core machine is not what this checks)
check "chronik-loadgen merge ran (exit $(cat "$SCRAPE/load-merge-exit" 2> /dev/null): 0 thresholds held, 99 one failed) and wrote merged-smoke.json" \
  '[[ "$(cat "$SCRAPE/load-merge-exit" 2> /dev/null)" =~ ^(0|99)$ && -s "$RUN/load/merged-smoke.json" ]]'
python3 "$HERE/check_results.py" load-facts "$RUN/load" > "$WORK/load-facts" 2>&1 || true
facts() { sed -n "s/^$1 //p" "$WORK/load-facts"; }
check "the summaries are index 0 and 1 of 2 generators, merged: index null of 2 ($(facts indexes) / $(facts merged))" \
  '[[ "$(facts indexes)" == "[0, 1] [2, 2]" && "$(facts merged)" == "None 2" ]]'
check "each index offered half of the plan (20 requests/s x 5 s: 50 + 50 scheduled, merged 100: $(facts scheduled))" \
  '[[ "$(facts scheduled)" == "[50, 50] 100" ]]'
check "the merge pooled every request of both ($(facts http_reqs))" \
  'python3 "$HERE/check_results.py" pooled $(facts http_reqs | tr -d "[],")'
check "both started together: one start time from index 0's barrier ($(facts start_spread_ms) ms apart)" \
  'python3 "$HERE/check_results.py" below "$(facts start_spread_ms)" 250'
check "the run id reached both generators ($(facts run_id))" '[[ "$(facts run_id)" == "['"'"'k8s-test'"'"', '"'"'k8s-test'"'"']" ]]'

# -- consumers, Prometheus figures, resources, meta ----------------------------------------------------
cp "$SCRAPE/consumer-report.json" "$RUN/consumers/chronik-consumer-abc-1769000000.json"
cp "$SCRAPE/consumer-report.hlog" "$RUN/consumers/chronik-consumer-abc-1769000000.hlog"
"$REPO/target/release/chronik-consumer" merge --report "$RUN/consumers/merged.json" "$RUN"/consumers/*.json > /dev/null 2>&1 || true
python3 "$HERE/check_results.py" prometheus-fixtures "$RUN/metrics"
python3 "$RESULTS_PY" resources "$RUN/metrics/prometheus-range-cpu.json" "$RUN/metrics/prometheus-range-rss.json" "$RUN/resources.csv" 2> /dev/null
check "resources.csv has one row per container and sample" '[[ $(wc -l < "$RUN/resources.csv") -eq 21 ]]'
check "resources.csv names the components (the generators' pods as loadgen)" \
  '[[ $(cut -d, -f2 "$RUN/resources.csv" | sort -u | tr "\n" " ") == "broker component consumer ingestor loadgen " ]]'
python3 "$RESULTS_PY" merged "$RUN/metrics" "$RUN/merged-percentiles.md"
check "merged percentiles table" 'grep -q "| loadgen-request-latency | 11.0 | - | - | 45.0 |" "$RUN/merged-percentiles.md"'
# meta.json as run.sh writes it (scripts/runctl.py meta; the settings the
# summaries hold come from the generators' summaries)
python3 "$REPO/scripts/runctl.py" meta "$RUN/meta.json" --run-id 20261122T000000Z-k8s-small \
  --started-at 2026-11-22T00:00:00Z --finished-at 2026-11-22T00:01:00Z --broker chronik \
  --broker-flag=--wal-profile --broker-flag=medium \
  --host kind=kubernetes --host context=kind-test --host namespace=chronik-perf --host nodes=1 \
  --setting test=smoke --setting overlay=small --setting scale=1.0 --setting 'acks="1"' --setting ingestors=1 \
  --setting consumers=1 --setting partitions=6 --setting wal_profile=medium --setting produce_profile=balanced \
  --setting generators=2 --load-dir "$RUN/load" --version "loadgen=$("${LOADGEN_BIN:-false}" version 2> /dev/null || echo unknown)"
check "meta.json: the cluster as host, acks as text" \
  'python3 "$HERE/check_results.py" meta-host "$RUN/meta.json"'
check "meta.json completed from the generators' summaries (runctl meta --load-dir: batch size, message size, duration)" \
  'python3 "$HERE/check_results.py" meta-load "$RUN/meta.json"'

bash "$REPO/scripts/install-python-deps.sh" > /dev/null && bash "$REPO/scripts/install-report-deps.sh" > /dev/null
(cd "$REPO" && .venv/bin/python -m reports render "$RUN" -o "$RUN/report.md" --no-charts) > "$WORK/render.log" 2>&1
check "python -m reports render reads the k8s results directory" '[[ -s "$RUN/report.md" ]]'
check "report: the verdict from merged.json" 'grep -q "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt" "$RUN/report.md"'
check "report: one row per load generator (gen-0, gen-1)" 'grep -q "gen-0" "$RUN/report.md" && grep -q "gen-1" "$RUN/report.md"'
check "report: batch latency pooled over both generators, never averaged" 'grep -qi "2 generators pooled" "$RUN/report.md"'
check "report: resources per component" 'grep -qi "ingestor" "$RUN/report.md" && ! grep -q "not available: .*resources.csv" "$WORK/render.log"'
[[ "${KEEP_WORK:-0}" == 1 ]] && cp -r "$RUN" "$SCRAPE/results-run"
echo "results: $passed passed, $failed failed"
((failed == 0))
