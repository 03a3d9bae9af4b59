#!/usr/bin/env bash
# fault-compare.sh - Chronik and Apache Kafka under the same fault schedule,
# one report with both fault timelines: ./run-all.sh --faults SPEC with the
# default broker, then with --broker kafka (the same topology: 3 nodes, RF 3,
# min.insync.replicas 2, acks=all), then `python -m reports render` of both
# runs into results/<id>/report.md and their recovery figures into
# results/<id>/faults.txt. Both runs take every fault kind (Kafka's log.dirs
# sit where disk-full mounts its tmpfs and slow-disk finds the disk: a
# per-run copy of the kafka-anchor, scripts/pipeline.sh); a kind one broker
# could not take would be left out of its run (faults.py for-broker), and
# the script would say so.
#
#   scripts/fault-compare.sh [--spec SPEC] [RUN-ALL OPTIONS...]
#     without --spec: the schedule of the plan given by --test (default
#     --test faults: load/plans/faults.json, 120 s at 10,000 msg/s with a
#     leader kill, a partition, a pause and a full disk)
#   e.g. scripts/fault-compare.sh --no-build --spec 'slow-disk:follower@20s+20s;slow-disk:leader@60s+20s' --duration 100s
#   e.g. scripts/fault-compare.sh --no-build
#        scripts/fault-compare.sh --spec 'kill:leader@20s,restart@+10s' --duration 60s --rate 50
#
# Env: FAULT_COMPARE_ID (default <UTC time>-faults): the runs are
# results/<id>-chronik and results/<id>-kafka.
# Exit status: non-zero when either run failed (loss, duplication, ...).
# Needs: what run-all.sh --faults and --broker kafka need (root, Java 17).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SPEC="" TEST="" ARGS=()
while (($#)); do
  case $1 in
    --spec) SPEC=$2; shift 2 ;;
    --test) TEST=$2; ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [[ -z "$SPEC" ]]; then
  [[ -n "$TEST" ]] || { TEST=faults; ARGS+=(--test faults); }
  SPEC=$(python3 scripts/faults.py plan "load/plans/$TEST.json")
  [[ -n "$SPEC" ]] || { echo "fault-compare: load/plans/$TEST.json has no fault schedule: give --spec" >&2; exit 2; }
fi
ID="${FAULT_COMPARE_ID:-$(date -u +%Y%m%dT%H%M%SZ)-faults}"
KAFKA_SPEC=$(python3 scripts/faults.py for-broker kafka "$SPEC")
[[ "$KAFKA_SPEC" == "$SPEC" ]] || echo "fault-compare: Kafka runs '$KAFKA_SPEC' (the rest is Chronik only)" >&2

rc=0
./run-all.sh --faults "$SPEC" --run-id "$ID-chronik" "${ARGS[@]}" || rc=1
./run-all.sh --broker kafka --faults "$KAFKA_SPEC" --run-id "$ID-kafka" "${ARGS[@]}" || rc=1
mkdir -p "results/$ID"
.venv/bin/python -m reports render "results/$ID-chronik" "results/$ID-kafka" -o "results/$ID/report.md"
.venv/bin/python -m reports faults "results/$ID-chronik" "results/$ID-kafka" | tee "results/$ID/faults.txt" || rc=1
echo "fault-compare: results/$ID/report.md (runs $ID-chronik, $ID-kafka; exit $rc)"
exit "$rc"
