#!/usr/bin/env bash
# e2e-check.sh - the CI check of the main job: one short real ./run-all.sh
# (a 10 s warm-up, then a minute of load at small scale, with a third
# verifying consumer joining 20 s into it) whose report must state a verified
# zero-loss verdict and name the rebalance the late consumer caused inside
# the measured window; each message must be timed once (its first delivery:
# the merged end-to-end histogram holds exactly the verified messages, and
# no re-reads). Run by `make e2e` (part of `make test`).
#
# Needs: what run-all.sh needs. Env: E2E_DURATION (default 60s), E2E_RATE
# (batches/s, default 20).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

E2E_DURATION="${E2E_DURATION:-60s}"
E2E_RATE="${E2E_RATE:-20}"
RUN_ID="ci-e2e-$(date -u +%Y%m%dT%H%M%SZ)"

./run-all.sh --duration "$E2E_DURATION" --rate "$E2E_RATE" --run-id "$RUN_ID" --late-consumer 20s
report="results/$RUN_ID/report.md"
[[ -s "$report" ]] || { echo "e2e: $report was not written" >&2; exit 1; }
if ! grep -q "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt" "$report"; then
  echo "e2e: the report does not state a verified zero-loss verdict:" >&2
  grep -n -i -E "verified|loss|lost" "$report" >&2 || true
  exit 1
fi
if ! grep -q "Rebalances during the measured window" "$report"; then
  echo "e2e: the late consumer's rebalance is not named in the report's Verification:" >&2
  grep -n -i "rebalance" "$report" >&2 || true
  exit 1
fi
# first delivery only: every verified message timed once, none read twice
if ! .venv/bin/python - "results/$RUN_ID/consumers/merged.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
verified, timed, again = m["counts"]["verified"], m["latency"]["e2e"]["count"], m["counts"]["redeliveries"]
print(f"e2e: {verified} verified, {timed} end-to-end samples, {again} redeliveries", file=sys.stderr)
sys.exit(0 if timed == verified and again == 0 else 1)
PY
then
  echo "e2e: a message was read (and timed) more than once across the rebalance" >&2
  exit 1
fi
echo "e2e: 1 passed, 0 failed"
