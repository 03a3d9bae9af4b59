#!/usr/bin/env bash
# fault-compare.sh - Chronik and Apache Kafka under the same fault schedule,
# one report with both fault timelines: ./run-all.sh --faults SPEC with the
# default broker, then with --broker kafka (same topology: 3 nodes, RF 3,
# min.insync.replicas 2, acks=all), then `python -m reports render` of both
# runs into results/<id>/report.md. Faults Kafka cannot take here
# (disk-full: the anchor owns its data directories) are left out of Kafka's
# run and the script says so.
#
#   scripts/fault-compare.sh SPEC [RUN-ALL OPTIONS...]
#   e.g. scripts/fault-compare.sh 'kill:leader@20s,restart@+10s;partition:node2@50s+8s' --duration 90s --no-build
#
# Exit status: non-zero when either run failed (loss, duplication, ...).
# Needs: what run-all.sh --faults and --broker kafka need (root, Java 17).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
(($# >= 1)) || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
SPEC=$1; shift
ID="${FAULT_COMPARE_ID:-$(date -u +%Y%m%dT%H%M%SZ)-faults}"
KAFKA_SPEC=$(python3 scripts/faults.py for-broker kafka "$SPEC")
[[ "$KAFKA_SPEC" == "$SPEC" ]] || echo "fault-compare: Kafka runs '$KAFKA_SPEC' (disk-full is Chronik only)" >&2

rc=0
./run-all.sh --faults "$SPEC" --run-id "$ID-chronik" "$@" || rc=1
./run-all.sh --broker kafka --faults "$KAFKA_SPEC" --run-id "$ID-kafka" "$@" || rc=1
mkdir -p "results/$ID"
.venv/bin/python -m reports render "results/$ID-chronik" "results/$ID-kafka" -o "results/$ID/report.md"
.venv/bin/python -m reports faults "results/$ID-chronik" "results/$ID-kafka" | tee "results/$ID/faults.txt" || rc=1
echo "fault-compare: results/$ID/report.md (runs $ID-chronik, $ID-kafka; exit $rc)"
exit "$rc"
