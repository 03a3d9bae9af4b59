#!/usr/bin/env bash
# scripts/fuzz.sh - coverage-guided fuzzing of everything the broker and the
# ingestor decode from the network: request frames (every API and version
# advertised), record batches and their validation, bounded decompression,
# raft RPC frames, the ingestor's JSON bodies.
#
# libFuzzer through libfuzzer-sys, built on the stable toolchain: plain
# `cargo build` of fuzz/ with the SanitizerCoverage pass (-Cpasses=sancov-module
# and its -Cllvm-args, all stable codegen options) and --cfg fuzzing; no
# nightly (cargo-fuzz's sanitizers need -Z flags) and no AFL++ toolchain.
#
#   scripts/fuzz.sh                 every target for FUZZ_SECONDS (make fuzz)
#   FUZZ_SECONDS=5 scripts/fuzz.sh  a smoke run (make fuzz-smoke, in make test)
#
# Env: FUZZ_SECONDS (per target, default 200), FUZZ_TARGETS (default all),
# FUZZ_RSS_MB (libFuzzer's -rss_limit_mb, default 1024), FUZZ_JOBS (targets
# run at once, default 2), FUZZ_PROFILE (cargo profile of fuzz/Cargo.toml,
# default release; the smoke uses `smoke`, which builds faster). Prints executions per target and in total,
# crashes and peak RSS; exits non-zero on any crash, leak or RSS overrun
# (crashing inputs land in fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS="${FUZZ_SECONDS:-200}"
FUZZ_TARGETS="${FUZZ_TARGETS:-request_decode record_batch decompress raft_frame ingestor_json}"
FUZZ_RSS_MB="${FUZZ_RSS_MB:-1024}"
FUZZ_JOBS="${FUZZ_JOBS:-2}"
FUZZ_PROFILE="${FUZZ_PROFILE:-release}"
CARGO="${CARGO:-cargo}"
TARGET_TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"
OUT="fuzz/out"
mkdir -p "$OUT"

# --target keeps the instrumentation off build scripts and proc macros.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
echo "fuzz: building targets ($FUZZ_PROFILE profile, instrumented) ..."
(cd fuzz && CARGO_TARGET_DIR=target "$CARGO" build --profile "$FUZZ_PROFILE" --target "$TARGET_TRIPLE" --bins)
BIN_DIR="fuzz/target/$TARGET_TRIPLE/$FUZZ_PROFILE"
unset RUSTFLAGS

# Seed corpora: frames and batches as clients write them, plus the
# hand-written raft and ingestor seeds.
# (built with the release workspace's features, so the artifacts of make
# build and cargo test are reused rather than a debug build made for it)
"$CARGO" build -q --release --workspace --example fuzz_seeds
target/release/examples/fuzz_seeds fuzz/corpus
for t in raft_frame ingestor_json; do
  mkdir -p "fuzz/corpus/$t"
  cp -n fuzz/seeds/$t/* "fuzz/corpus/$t/" 2> /dev/null || true
done

run_target() {
  local t=$1 log="$OUT/$1.log"
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  local rc=0
  "$BIN_DIR/$t" "fuzz/corpus/$t" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb="$FUZZ_RSS_MB" \
    -max_len=65536 -timeout=10 -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
    > "$log" 2>&1 || rc=$?
  echo "$rc" > "$OUT/$t.rc"
}

started=$(date +%s)
running=0
for t in $FUZZ_TARGETS; do
  run_target "$t" &
  running=$((running + 1))
  if [[ "$running" -ge "$FUZZ_JOBS" ]]; then wait -n; running=$((running - 1)); fi
done
wait

total=0; failed=0
printf '%-16s %14s %10s %8s %s\n' target executions exec/s peak_MB result
for t in $FUZZ_TARGETS; do
  log="$OUT/$t.log"; rc=$(cat "$OUT/$t.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  result=ok
  if [[ "$rc" != 0 ]] || grep -qE '^==[0-9]+== ERROR|deadly signal|panicked at|out-of-memory' "$log"; then
    result="FAILED (rc $rc, see $log and fuzz/artifacts/$t/)"; failed=1
  fi
  printf '%-16s %14s %10s %8s %s\n' "$t" "${execs:-0}" "${rate:-0}" "${peak:-?}" "$result"
  total=$((total + ${execs:-0}))
done
echo "total executions: $total in $(( $(date +%s) - started )) s (FUZZ_SECONDS=$FUZZ_SECONDS per target, rss limit ${FUZZ_RSS_MB} MB)"
exit "$failed"
