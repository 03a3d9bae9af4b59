#!/usr/bin/env bash
# e2e-check.sh - the CI check of the main job: one short real ./run-all.sh
# (a minute of load at small scale) whose report must state a verified
# zero-loss verdict. Run by `make e2e` (part of `make test`).
#
# Needs: what run-all.sh needs. Env: E2E_DURATION (default 60s), E2E_RATE
# (batches/s, default 20).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

E2E_DURATION="${E2E_DURATION:-60s}"
E2E_RATE="${E2E_RATE:-20}"
RUN_ID="ci-e2e-$(date -u +%Y%m%dT%H%M%SZ)"

./run-all.sh --duration "$E2E_DURATION" --rate "$E2E_RATE" --run-id "$RUN_ID"
report="results/$RUN_ID/report.md"
[[ -s "$report" ]] || { echo "e2e: $report was not written" >&2; exit 1; }
if ! grep -q "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt" "$report"; then
  echo "e2e: the report does not state a verified zero-loss verdict:" >&2
  grep -n -i -E "verified|loss|lost" "$report" >&2 || true
  exit 1
fi
echo "e2e: 1 passed, 0 failed"
