#!/usr/bin/env bash
# parked-fetch-cpu.sh - broker CPU per produced message while 1,000 consumers
# long-poll a partition that gets no data (issue 14's purgatory benchmark).
#
# For each broker binary given (default: the release build), a fresh
# one-node broker on 127.0.0.1, then broker/server/examples/parked_fetches.rs
# twice: with 0 and with PARKED parked Fetch requests (max_wait 30 s, on
# their own topic), each time producing MESSAGES records of 100 B in batches
# of 100, acks=1, to another topic. Prints one line per run with the
# broker's CPU µs per message (utime+stime from /proc/PID/stat).
#
#   broker/bench/parked-fetch-cpu.sh [BINARY ...]
#
# Env: PARKED (1000), MESSAGES (300000), WAL_PROFILE (medium).
# Bounded: each produce phase stops after MESSAGES or 120 s; every broker is
# stopped by pid on exit.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$BENCH_DIR/../.." && pwd)"
PARKED="${PARKED:-1000}"
MESSAGES="${MESSAGES:-300000}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
BINARIES=("$@")
[[ ${#BINARIES[@]} -gt 0 ]] || BINARIES=("$REPO_ROOT/target/release/chronik-server")

cargo build --release --quiet -p chronik-server --example parked_fetches --manifest-path "$REPO_ROOT/Cargo.toml"
PARKER="$REPO_ROOT/target/release/examples/parked_fetches"
ulimit -n 8192

WORK="$(mktemp -d)"
BROKER_PID=""
stop_broker() {
    if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    BROKER_PID=""
}
trap 'stop_broker; rm -rf "$WORK"' EXIT

for bin in "${BINARIES[@]}"; do
    for parked in 0 "$PARKED"; do
        data="$WORK/data-$RANDOM"
        "$bin" --data-dir "$data" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
            --wal-profile "$WAL_PROFILE" >"$WORK/out.log" 2>"$WORK/err.log" &
        BROKER_PID=$!
        for _ in $(seq 1 200); do
            grep -q LISTENING "$WORK/out.log" && break
            sleep 0.05
        done
        addr="$(sed -n 's/^LISTENING kafka=\([^ ]*\) .*/\1/p' "$WORK/out.log")"
        [[ -n "$addr" ]] || { echo "broker $bin did not start" >&2; cat "$WORK/err.log" >&2; exit 1; }
        printf '%s ' "$(basename "$bin")"
        "$PARKER" --bootstrap "$addr" --broker-pid "$BROKER_PID" --parked "$parked" --messages "$MESSAGES"
        stop_broker
        rm -rf "$data"
    done
done
