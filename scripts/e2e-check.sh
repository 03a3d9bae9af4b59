#!/usr/bin/env bash
# e2e-check.sh - the CI check of the main job: one short real ./run-all.sh
# (a 10 s warm-up, then 40 s of load at small scale, with a third
# verifying consumer joining 20 s into it) whose report must state a verified
# zero-loss verdict and name the rebalance the late consumer caused inside
# the measured window; each message must be timed once (its first delivery:
# the merged end-to-end histogram holds exactly the verified messages, and
# no re-reads). Then a short `./run-all.sh --secure` (SASL_SSL SCRAM-SHA-512
# everywhere, ACLs, the ingestors over HTTPS with a bearer token) whose
# report must state the same verified zero-loss verdict. Then a miniature
# `./run-all.sh --test noisy-neighbour` (one node, the plan at a quarter of
# its rates for a tenth of its 90 s) whose report must verify each tenant,
# find the noisy tenant's flood and show the calm tenant before and during
# it, with each tenant's ingestor exposing its produce throttle time. Run by
# `make e2e` (part of `make test`).
#
# Needs: what run-all.sh needs. Env: E2E_DURATION (default 40s), E2E_RATE
# (batches/s, default 20), E2E_SECURE_DURATION (default 20s).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

E2E_DURATION="${E2E_DURATION:-40s}"
E2E_RATE="${E2E_RATE:-20}"
E2E_SECURE_DURATION="${E2E_SECURE_DURATION:-20s}"
RUN_ID="ci-e2e-$(date -u +%Y%m%dT%H%M%SZ)"

# verdict REPORT - the report states a verified zero-loss verdict
verdict() {
  [[ -s "$1" ]] || { echo "e2e: $1 was not written" >&2; return 1; }
  grep -q "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt" "$1" && return 0
  echo "e2e: $1 does not state a verified zero-loss verdict:" >&2
  grep -n -i -E "verified|loss|lost" "$1" >&2 || true
  return 1
}

./run-all.sh --duration "$E2E_DURATION" --rate "$E2E_RATE" --run-id "$RUN_ID" --late-consumer 20s
report="results/$RUN_ID/report.md"
verdict "$report" || exit 1
if ! grep -q "Rebalances during the measured window" "$report"; then
  echo "e2e: the late consumer's rebalance is not named in the report's Verification:" >&2
  grep -n -i "rebalance" "$report" >&2 || true
  exit 1
fi
# first delivery only: every verified message timed once, none read twice
if ! .venv/bin/python scripts/runctl.py first-delivery "results/$RUN_ID/consumers/merged.json"; then
  echo "e2e: a message was read (and timed) more than once across the rebalance" >&2
  exit 1
fi

# the same pipeline secured end to end
./run-all.sh --secure --no-build --warmup 0 --duration "$E2E_SECURE_DURATION" --rate "$E2E_RATE" \
  --run-id "$RUN_ID-secure"
verdict "results/$RUN_ID-secure/report.md" || exit 1
grep -q '"security": "SASL_SSL SCRAM-SHA-512' "results/$RUN_ID-secure/meta.json" \
  || { echo "e2e: the secure run's meta.json does not record its security" >&2; exit 1; }

# two tenants on one broker, the noisy one flooding from a third in
./run-all.sh --test noisy-neighbour --no-build --nodes 1 --warmup 3s --scale 0.25 --duration-scale 0.1 \
  --run-id "$RUN_ID-noisy"
noisy="results/$RUN_ID-noisy"
for tenant in calm noisy; do
  grep -q "^- \`$RUN_ID-noisy\` $tenant: \*\*Verified: 0 lost" "$noisy/report.md" \
    || { echo "e2e: the noisy-neighbour report does not verify tenant $tenant" >&2; exit 1; }
  grep -q "^ingestor_produce_throttle_time_ms_total " "$noisy/tenants/$tenant/ingestors/ingestor-0-metrics.prom" \
    || { echo "e2e: tenant $tenant's ingestor does not expose its produce throttle time" >&2; exit 1; }
done
for phase in "calm | \`$RUN_ID-noisy\` | chronik | none | before flood" "calm | \`$RUN_ID-noisy\` | chronik | none | flood" \
  "noisy | \`$RUN_ID-noisy\` | chronik | none | flood"; do
  grep -qF "| $phase |" "$noisy/report.md" \
    || { echo "e2e: the noisy-neighbour report has no row '$phase'" >&2; exit 1; }
done
echo "e2e: 3 passed, 0 failed"
