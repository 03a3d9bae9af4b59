#!/usr/bin/env bash
# load/test.sh - the load generator's checks; sends no load outside 127.0.0.1.
#
#   1. gofmt and go vet of load/generator;
#   2. go test: the schedule (open model), answers counted per message (5xx,
#      partial failures, malformed bodies), a slow endpoint that must not lower
#      the offered rate, dropped requests failing a run, two generators behind
#      the start barrier and their merge equal to one pooled result set
#      (fake ingestors on 127.0.0.1);
#   3. every plan in load/plans/ validates, and plans with a bad knob are refused;
#   4. load/run.sh against a local fake ingestor: one generator and two, the
#      results layout the reports read, and a failing threshold exiting 99.
# Prints "load: N passed, N failed". Run by `make load-test` (part of make test).
set -euo pipefail
LOAD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOAD_DIR/.." && pwd)"
cd "$REPO_ROOT"
BIN=$(scripts/install-loadgen.sh)
# shellcheck source=scripts/go-scratch.sh
source scripts/go-scratch.sh
go_find
export GOPATH="$REPO_ROOT/.tools/go" GOMODCACHE="$REPO_ROOT/.tools/go/pkg/mod" GOCACHE="$REPO_ROOT/.tools/go/cache" GOFLAGS=-buildvcs=false

passed=0 failed=0
check() {  # NAME CMD...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name" >&2; fi
}
WORK=$(mktemp -d)
FAKE_PID=""
trap '[[ -n "$FAKE_PID" ]] && kill "$FAKE_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

check gofmt bash -c "cd load/generator && test -z \"\$(gofmt -l .)\""
check "go vet" bash -c "cd load/generator && go vet ./..."
check "go test" bash -c "cd load/generator && go test -count=1 ./..."
check "plans validate" "$BIN" validate load/plans/*.json
refused() {  # a plan with one bad knob must exit 2
  sed "$1" load/plans/smoke.json > "$WORK/bad.json"
  local rc=0; "$BIN" validate "$WORK/bad.json" > /dev/null 2>&1 || rc=$?
  [[ $rc == 2 ]]
}
check "bad route refused" refused 's/"route": *"batch"/"route": "fast"/'
check "bad batch size refused" refused 's/"batch_size": *[0-9]*/"batch_size": "ten"/'
check "unknown field refused" refused 's/"seed"/"sed"/'
check "bad --rate refused" bash -c "! \"$BIN\" run load/plans/find-max.json --targets http://127.0.0.1:1 --results $WORK/x --rate 5 2>/dev/null"

# a fake ingestor answering like chronik-ingestor's /produce/batch
python3 load/testkit.py fake-ingestor "$WORK/port" &
FAKE_PID=$!
for _ in $(seq 50); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
URL="http://127.0.0.1:$(cat "$WORK/port")"
layout() {  # DIR GENERATORS PLAN
  local n
  for ((n = 0; n < $2; n++)); do
    [[ -s "$1/gen-$n/summary-$3.json" && -s "$1/gen-$n/requests-$3.csv.gz" ]] || return 1
  done
  python3 load/testkit.py check-merged "$1/merged-$3.json" "$2"
}
check "run.sh one generator" bash -c "load/run.sh smoke --targets $URL --rate 20 --duration 2s --results $WORK/one > $WORK/one.log 2>&1 && $(declare -f layout); layout $WORK/one 1 smoke"
check "run.sh two generators" bash -c "load/run.sh smoke --targets $URL --rate 20 --duration 2s --generators 2 --results $WORK/two > $WORK/two.log 2>&1 && $(declare -f layout); layout $WORK/two 2 smoke"
check "a failed threshold exits 99" bash -c "rc=0; load/run.sh smoke --targets $URL --rate 20 --duration 1s --p99-ms 0.001 --results $WORK/th > $WORK/th.log 2>&1 || rc=\$?; [[ \$rc == 99 ]]"
check "an unready target exits 3" bash -c "rc=0; \"$BIN\" run load/plans/smoke.json --targets http://127.0.0.1:1 --ready-timeout 1s --results $WORK/nr 2>/dev/null || rc=\$?; [[ \$rc == 3 ]]"

echo "load: $passed passed, $failed failed"
((failed == 0))
