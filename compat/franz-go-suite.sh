#!/usr/bin/env bash
# compat/franz-go-suite.sh - franz-go's own integration tests (pkg/kgo) against
# a fresh chronik of 1 or 3 nodes started here, or against a broker already
# running (--bootstrap: Apache Kafka from the kafka-anchor, say): the franz-go
# release the compat driver uses is downloaded from the Go module proxy into a
# scratch copy, and `go test -run REGEX` runs in its pkg/kgo with KGO_SEEDS
# pointing at the broker (KGO_TEST_RF = the node count).
#
#   compat/franz-go-suite.sh [--nodes 1|3] [--run REGEX] [--records N] [--bootstrap HOST:PORT[,...]]
#                            [--timeout DURATION] [--no-skip]
#     --nodes N         brokers (default 1; with --bootstrap: KGO_TEST_RF only)
#     --run REGEX       the tests (default 'TestTxnEtl|Test848RegexBrokerResolves';
#                       share groups: 'TestShareGroup', which franz-go skips unless
#                       the broker offers ShareFetch and ShareAcknowledge v2)
#     --records N       KGO_TEST_RECORDS (default: franz-go's, 500000)
#     --bootstrap LIST  use these running brokers; start no chronik
#     --timeout D       go test -timeout (default 20m)
#     --no-skip         fail (exit 1) if a selected test was skipped or none ran:
#                       franz-go skips its share tests when the broker does not
#                       offer ShareFetch / ShareAcknowledge v2 (make compat-smoke)
#
# Prints go test's verdict lines; the whole output is in .run/franz-go-suite/.
# Exit status: go test's (or 1, --no-skip). Bounded: go test -timeout; a broker
# started here is stopped on exit. Needs: Go, the release chronik-server (make build)
# unless --bootstrap.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$REPO_ROOT/scripts/lib.sh"
NODES=1
RUN='TestTxnEtl|Test848RegexBrokerResolves'
RECORDS=""
BOOTSTRAP=""
TIMEOUT=20m
NO_SKIP=0
while (($#)); do
  case "$1" in
    --nodes) NODES=$2; shift 2;;
    --run) RUN=$2; shift 2;;
    --records) RECORDS=$2; shift 2;;
    --bootstrap) BOOTSTRAP=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    --no-skip) NO_SKIP=1; shift;;
    *) die "unknown option $1 (see the header)";;
  esac
done
[[ "$NODES" == 1 || "$NODES" == 3 ]] || die "--nodes is 1 or 3"
VERSION=$(awk '$1 == "github.com/twmb/franz-go" {print $2}' "$REPO_ROOT/compat/go/go.mod")
[[ -n "$VERSION" ]] || die "no franz-go version in compat/go/go.mod"
WORK="$REPO_ROOT/.run/franz-go-suite"
rm -rf "$WORK"
mkdir -p "$WORK"
export GOFLAGS=-mod=mod
log "franz-go $VERSION: downloading the module"
MODULE_DIR=$(cd "$REPO_ROOT/compat/go" && go mod download -json "github.com/twmb/franz-go@$VERSION" \
  | awk -F'"' '$2 == "Dir" {print $4}')
[[ -d "$MODULE_DIR" ]] || die "go mod download gave no directory"
cp -r "$MODULE_DIR" "$WORK/franz-go"
chmod -R u+w "$WORK/franz-go"

CHRONIK_PIDS=()
stop_brokers() {
  local pid
  for pid in "${CHRONIK_PIDS[@]}"; do
    stop_pid "$pid" || true
    wait "$pid" 2> /dev/null || true
    pid_forget "$pid"
  done
  [[ -n "${CHRONIK_PID:-}" ]] && { stop_chronik || true; }
  return 0
}
trap stop_brokers EXIT
trap 'exit 143' TERM INT
if [[ -n "$BOOTSTRAP" ]]; then
  CHRONIK_KAFKA=$BOOTSTRAP
elif ((NODES == 1)); then
  start_chronik "$WORK/broker" --wal-profile medium
else
  start_chronik_cluster "$WORK/cluster" 3 --wal-profile medium
fi
log "running go test -run '$RUN' against $CHRONIK_KAFKA ($NODES node(s))"
export KGO_SEEDS="$CHRONIK_KAFKA" KGO_TEST_RF="$NODES"
[[ -n "$RECORDS" ]] && export KGO_TEST_RECORDS="$RECORDS"
rc=0
(cd "$WORK/franz-go/pkg/kgo" && go test -count=1 -timeout "$TIMEOUT" -run "$RUN" -v .) > "$WORK/go-test.log" 2>&1 || rc=$?
grep -E '^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL)\s' "$WORK/go-test.log" || true
if ((NO_SKIP && rc == 0)); then
  if grep -qE '^\s*--- SKIP' "$WORK/go-test.log"; then
    log "error: --no-skip, and a test was skipped (above)"
    rc=1
  elif ! grep -qE '^\s*--- PASS' "$WORK/go-test.log"; then
    log "error: --no-skip, and no test matched '$RUN'"
    rc=1
  fi
fi
log "exit status $rc (go test's, or 1 from --no-skip); output in ${WORK#"$REPO_ROOT"/}/go-test.log"
exit "$rc"
