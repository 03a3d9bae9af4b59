# shellcheck shell=bash
# k8s-perf/tests/nodecheck.sh - what the tests on the real node of make
# k8s-node share (node.sh, grow.sh). Sourced, not run.
#
# Owns: the pass/fail tally (ok, fail, finish), log, starting the node
# (node_up: scripts/k8s-node.sh up, every process running, the node Ready),
# a run's verdict in its report (check_verdict) and kubectl against the node
# (kc, KUBECONFIG exported).
# Globals set: REPO, PY, passed, failed, KUBECONFIG.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # (node.sh reads it)
PY="$REPO/.venv/bin/python"
passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
log() { printf '[%s] %s: %s\n' "$(date +%H:%M:%S)" "$(basename "$0" .sh)" "$*" >&2; }
finish() { echo "k8s-node: $passed passed, $failed failed"; ((failed == 0)); }
kc() { "$REPO/.tools/k8s-node/bin/kubectl" "$@"; }

# node_up - the node of scripts/k8s-node.sh up and Ready (started if it is
# not); on failure the tally is printed and the test exits 1.
node_up() {
  local status
  if bash "$REPO/scripts/k8s-node.sh" up > /dev/null 2>&1 && status=$(bash "$REPO/scripts/k8s-node.sh" status); then
    ok "every process of the node runs: $(awk '{print $1}' <<< "$status" | tr '\n' ' ')"
  else
    fail "scripts/k8s-node.sh up/status: $(bash "$REPO/scripts/k8s-node.sh" status 2>&1 | grep stopped | tr -s ' \n' ' ')"
    finish
    exit 1
  fi
  KUBECONFIG="$(bash "$REPO/scripts/k8s-node.sh" kubeconfig)"
  export KUBECONFIG
  if kc wait --for condition=Ready --timeout 60s node/chronik-node > /dev/null 2>&1; then
    ok "node chronik-node Ready ($(kc get node chronik-node -o jsonpath='{.status.nodeInfo.containerRuntimeVersion} kubelet {.status.nodeInfo.kubeletVersion}'))"
  else
    fail "node chronik-node not Ready"
  fi
}

# check_verdict OUT RUN_ID - the run's report.md says it verified clean
check_verdict() {
  if grep -q '^- `'"$2"'`: \*\*Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt across [0-9,]* messages\*\*' "$1/report.md" 2> /dev/null; then
    ok "report: $(grep -o 'Verified: 0 lost.*messages' "$1/report.md" | head -n 1)"
  else
    fail "report.md has no clean verdict: $(grep -m1 -A2 '^## Verification' "$1/report.md" 2> /dev/null | tail -n 1)"
  fi
}
