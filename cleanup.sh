#!/usr/bin/env bash
# cleanup.sh - undo what run-all.sh, the benchmarks and other scripts using
# scripts/lib.sh left behind after an interrupted run: stop the processes they
# recorded in .run/pids, undo what a --faults schedule left in force (cuts,
# filled disks, tmpfs mounts, cgroups), and remove the .run/ scratch data.
# results/ is kept.
#
# Only recorded processes are touched, and only if the pid still belongs to
# the same process (its start time is recorded too). A process whose owning
# script is still running (someone's run in progress, e.g. in the same work
# tree) is left alone, and then .run/ is kept too; --force stops those as well.
# Safe to run twice.
#
#   ./cleanup.sh               stop leftovers, remove .run/
#   ./cleanup.sh --keep-data   stop leftovers only
#   ./cleanup.sh --force       also stop processes of runs still in progress
#
# Needs: bash, awk, flock. Env: RUN_DIR (default <repo>/.run), STOP_TIMEOUT (30).
set -euo pipefail
# --k8s: remove what run-all.sh --k8s created in the cluster; every other argument goes to k8s-perf/cleanup.sh.
for arg in "$@"; do
  if [[ "$arg" == --k8s ]]; then
    k8s_args=(); for a in "$@"; do [[ "$a" == --k8s ]] || k8s_args+=("$a"); done
    exec "$(dirname "${BASH_SOURCE[0]}")/k8s-perf/cleanup.sh" "${k8s_args[@]}"
  fi
done
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

KEEP_DATA=0
FORCE=0
for a in "$@"; do
  case $a in
    --keep-data) KEEP_DATA=1;;
    --force) FORCE=1;;
    *) echo "usage: $0 [--keep-data] [--force]" >&2; exit 2;;
  esac
done

stopped=0
in_use=0
if [[ -f "$PIDS_FILE" ]]; then
  # snapshot under the lock; stop outside it (stopping can take STOP_TIMEOUT)
  entries=$( (flock 9; cat "$PIDS_FILE") 9> "$PIDS_FILE.lock" )
  while read -r pid start name owner owner_start; do
    [[ -n "${pid:-}" ]] || continue
    pid_is "$pid" "$start" || { pid_forget "$pid"; continue; }   # already gone
    if ((!FORCE)) && [[ -n "${owner:-}" ]] && pid_is "$owner" "${owner_start:-}"; then
      log "leaving $name (pid $pid): its run (pid $owner) is still going; --force to stop it"
      in_use=$((in_use + 1))
      continue
    fi
    log "stopping $name (pid $pid)"
    stop_pid "$pid" || true
    pid_forget "$pid"
    stopped=$((stopped + 1))
  done <<< "$entries"
fi
log "cleanup: stopped $stopped recorded process(es)"

# run-all.sh --faults: nodes its schedule restarted, then every cut, filler,
# tmpfs and cgroup it left (scripts/faults.py undo; idempotent)
if ((FORCE || in_use == 0)); then
  for state in "$RUN_DIR"/*/faults/state.json; do
    [[ -f "$state" ]] || continue
    for pid in $(python3 scripts/faults.py pids --state "${state%/state.json}"); do
      stop_pid "$pid" || true
      pid_forget "$pid"
    done
    python3 scripts/faults.py undo --state "${state%/state.json}" --final || true
    log "cleanup: undid the faults of ${state%/faults/state.json}"
  done
fi

if ((KEEP_DATA)); then
  log "cleanup: kept $RUN_DIR"
elif ((in_use > 0)); then
  log "cleanup: kept $RUN_DIR: $in_use process(es) of runs in progress use it"
else
  rm -rf "$RUN_DIR"
  log "cleanup: removed $RUN_DIR"
fi
