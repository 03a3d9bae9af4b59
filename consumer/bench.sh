#!/usr/bin/env bash
# consumer/bench.sh - how many messages per second one core of chronik-consumer
# verifies (256-byte messages by default).
#
# 1. Starts a release chronik-server on 127.0.0.1 (unless BOOTSTRAP is given).
# 2. Pre-produces MESSAGES messages with chronik-env envelopes into a fresh
#    PARTITIONS-partition topic: with target/release/chronik-bench when it is
#    built (PRODUCER=auto), falling back to chronik-consumer-envelope-producer.
# 3. Times one `chronik-consumer --from-beginning --until-idle 2` run; from its
#    report: verified messages, active seconds (first to last record), CPU
#    seconds of the whole process and of the poll thread (/proc) ->
#    msg/s and msg per CPU-second ("per core").
# 4. Runs chronik-consumer-verifier-bench: the verifier alone, no Kafka, to
#    separate verifier cost from rdkafka cost.
#
# Prerequisites: cargo, python3. Builds the release binaries it needs once.
# Knobs: MESSAGES (2000000) SIZE (256) PARTITIONS (6) PRODUCER (auto |
#   chronik-bench | envelope-producer) BOOTSTRAP (use a running broker)
#   OUT_DIR (consumer/bench-results) IDLE (2).
# Safe to re-run: every run uses a new topic and group; it stops what it started.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
MESSAGES="${MESSAGES:-2000000}"
SIZE="${SIZE:-256}"
PARTITIONS="${PARTITIONS:-6}"
PRODUCER="${PRODUCER:-auto}"
BOOTSTRAP="${BOOTSTRAP:-}"
OUT_DIR="${OUT_DIR:-$HERE/bench-results}"
IDLE="${IDLE:-2}"
CARGO="${CARGO:-cargo}"
RELEASE="$ROOT/target/release"
RUN_ID="$(date +%Y%m%d-%H%M%S)-$$"
RUN_DIR="$OUT_DIR/$RUN_ID"
TOPIC="consumer-bench-$RUN_ID"
mkdir -p "$RUN_DIR"

BROKER_PID=""
cleanup() {
    if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    rm -rf "$RUN_DIR/broker-data"
}
trap cleanup EXIT

packages=()
for bin in chronik-consumer chronik-consumer-verifier-bench chronik-consumer-envelope-producer; do
    if [[ ! -x "$RELEASE/$bin" ]]; then packages+=(chronik-consumer); break; fi
done
if [[ -z "$BOOTSTRAP" && ! -x "$RELEASE/chronik-server" ]]; then packages+=(chronik-server); fi
if ((${#packages[@]})); then
    build_args=()
    for p in "${packages[@]}"; do build_args+=(-p "$p"); done
    echo "building release binaries: ${packages[*]}" >&2
    (cd "$ROOT" && "$CARGO" build --release "${build_args[@]}")
fi

if [[ -z "$BOOTSTRAP" ]]; then
    "$RELEASE/chronik-server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
        --data-dir "$RUN_DIR/broker-data" --wal-profile low --group-initial-rebalance-delay-ms 0 \
        >"$RUN_DIR/broker.stdout" 2>"$RUN_DIR/broker.stderr" &
    BROKER_PID=$!
    for _ in $(seq 1 300); do
        BOOTSTRAP="$(sed -n 's/^LISTENING kafka=\([^ ]*\).*/\1/p' "$RUN_DIR/broker.stdout")"
        [[ -n "$BOOTSTRAP" ]] && break
        kill -0 "$BROKER_PID" 2>/dev/null || { cat "$RUN_DIR/broker.stderr" >&2; exit 1; }
        sleep 0.1
    done
    [[ -n "$BOOTSTRAP" ]] || { echo "broker printed no LISTENING line" >&2; exit 1; }
fi
echo "broker: $BOOTSTRAP  topic: $TOPIC  messages: $MESSAGES x $SIZE B  partitions: $PARTITIONS" >&2

produce_with_envelope_producer() {
    "$RELEASE/chronik-consumer-envelope-producer" --bootstrap-servers "$BOOTSTRAP" --topic "$TOPIC" \
        --partitions "$PARTITIONS" --messages "$MESSAGES" --size "$SIZE" --producers 4 \
        --ledger "$RUN_DIR/ledger.json"
}
produce_with_chronik_bench() {
    "$RELEASE/chronik-bench" --bootstrap-servers "$BOOTSTRAP" --topic "$TOPIC" --mode produce \
        --create-topic --partitions "$PARTITIONS" --message-count "$MESSAGES" --message-size "$SIZE" \
        --linger-ms 5 --batch-size 1000000 --warmup-duration 0s
}
USED="$PRODUCER"
case "$PRODUCER" in
    envelope-producer) produce_with_envelope_producer ;;
    chronik-bench) produce_with_chronik_bench ;;
    auto)
        if [[ -x "$RELEASE/chronik-bench" ]] && produce_with_chronik_bench >"$RUN_DIR/producer.log" 2>&1; then
            USED=chronik-bench
        else
            [[ -x "$RELEASE/chronik-bench" ]] && echo "chronik-bench failed (see $RUN_DIR/producer.log); using the envelope producer" >&2
            TOPIC="$TOPIC-ep"
            USED=envelope-producer
            produce_with_envelope_producer
        fi
        ;;
    *) echo "PRODUCER must be auto, chronik-bench or envelope-producer" >&2; exit 2 ;;
esac

REPORT="$RUN_DIR/consumer-report.json"
LEDGER_ARGS=()
[[ -f "$RUN_DIR/ledger.json" ]] && LEDGER_ARGS=(--ledger "$RUN_DIR/ledger.json")
set +e
"$RELEASE/chronik-consumer" --bootstrap-servers "$BOOTSTRAP" --topic "$TOPIC" --group "bench-$RUN_ID" \
    --from-beginning --until-idle "$IDLE" --report "$REPORT" "${LEDGER_ARGS[@]}" \
    >"$RUN_DIR/consumer.stdout" 2>"$RUN_DIR/consumer.stderr"
STATUS=$?
set -e
cat "$RUN_DIR/consumer.stdout" >&2

python3 "$ROOT/scripts/benchctl.py" consumer-summary "$REPORT" "$USED" "$STATUS"

echo
"$RELEASE/chronik-consumer-verifier-bench" 4000000 "$SIZE"
echo "results in $RUN_DIR" >&2
