#!/usr/bin/env bash
# k6/test.sh - static checks of the k6 scenarios; sends no load.
#
#   k6/test.sh
#
# 1. `k6 inspect --execution-requirements` on every k6/scenarios/*.js, at the
#    seeds' full scale and at a tiny local scale (VU_SCALE=0.01
#    DURATION_SCALE=0.05): each must parse, build valid options and report a
#    positive VU count and duration.
# 2. Bad knobs must be refused at init (k6 exits non-zero): a typo in MODE,
#    decreasing find-max LEVELS,
#    a non-numeric BATCH_SIZE, a malformed INGESTOR_URLS.
# 3. The offline unit tests of k6/lib (k6/tests/*.test.js, no network).
# It never starts or targets a broker or an ingestor, even when INGESTOR_URLS
# is set: live runs are k6/run.sh's job (see k6/README.md).
#
# Prints "k6: N passed, N failed" last; exits non-zero when anything failed.
# Needs: Go for the first k6 build (scripts/install-k6.sh), python3.
set -euo pipefail

K6_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$K6_DIR/.." && pwd)"
K6_BIN="${K6_BIN:-$("$REPO_ROOT/scripts/install-k6.sh")}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }

# k6_with SUBCOMMAND SCRIPT [ENV=VAL | --flag ...] - k6 with only the knobs
# named (as -e flags), never the caller's environment, so a developer's
# exported BATCH_SIZE cannot change a result.
k6_with() {
  local sub=$1 script=$2
  shift 2
  local args=()
  for a in "$@"; do
    case $a in
      -*) args+=("$a");;
      *) args+=(-e "$a");;
    esac
  done
  "$K6_BIN" "$sub" --include-system-env-vars=false "${args[@]}" "$script"
}

# inspect NAME SCRIPT [ENV=VAL...] - options build, VUs > 0, duration > 0
inspect() {
  local name=$1 script=$2
  shift 2
  local out="$WORK/inspect.json" err="$WORK/inspect.err"
  if ! k6_with inspect "$script" --execution-requirements "$@" > "$out" 2> "$err"; then
    fail "$name: k6 inspect failed: $(tail -n 3 "$err")"
    return
  fi
  local summary
  if summary=$(python3 - "$out" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
def secs(s):
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u]
               for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", s))
vus, dur = d.get("maxVUs", 0), secs(d.get("totalDuration", ""))
assert vus > 0 and dur > 0, f"maxVUs={vus} totalDuration={d.get('totalDuration')}"
assert d.get("thresholds"), "no thresholds"
print(f"maxVUs={vus} duration={d['totalDuration']} thresholds={len(d['thresholds'])}")
EOF
  ); then
    ok "$name: $summary"
  else
    fail "$name: bad execution requirements: $summary"
  fi
}

# refused NAME SCRIPT ENV=VAL... - the knob must make k6 fail at init
refused() {
  local name=$1 script=$2
  shift 2
  if k6_with inspect "$script" "$@" > /dev/null 2> "$WORK/refused.err"; then
    fail "$name: accepted $*"
  else
    ok "$name: refused ($(grep -o 'Error: [^\\]*' "$WORK/refused.err" | head -n 1))"
  fi
}

echo "k6: $("$K6_BIN" version | head -n 1)"
for script in "$K6_DIR"/scenarios/*.js; do
  name="$(basename "$script" .js)"
  inspect "$name (seed scale)" "$script"
  inspect "$name (tiny scale)" "$script" VU_SCALE=0.01 DURATION_SCALE=0.05
done

refused "bad MODE" "$K6_DIR/scenarios/smoke.js" MODE=fast
refused "bad BATCH_SIZE" "$K6_DIR/scenarios/blocking-batch.js" BATCH_SIZE=ten
refused "bad INGESTOR_URLS" "$K6_DIR/scenarios/blocking-batch.js" INGESTOR_URLS=127.0.0.1:8080
refused "bad THINK_TIME" "$K6_DIR/scenarios/max-load.js" THINK_TIME=5-1
refused "bad KEYS" "$K6_DIR/scenarios/smoke.js" KEYS=random
refused "bad LEVELS (not increasing)" "$K6_DIR/scenarios/find-max.js" LEVELS=400,200
refused "bad GAP (under P99_MS)" "$K6_DIR/scenarios/find-max.js" GAP=1s P99_MS=2000

for t in "$K6_DIR"/tests/*.test.js; do
  if k6_with run "$t" --quiet > "$WORK/unit.out" 2>&1; then
    ok "$(basename "$t"): $(tail -n 1 "$WORK/unit.out")"
  else
    cat "$WORK/unit.out"
    fail "$(basename "$t")"
  fi
done

echo "k6: $passed passed, $failed failed"
((failed == 0))
