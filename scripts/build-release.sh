#!/usr/bin/env bash
# scripts/build-release.sh - builds the release binaries every step uses
# (chronik-server, chronik-ingestor, chronik-consumer, chronik-bench, and the
# client matrix's chronik-compat-rdkafka) in one cargo invocation over the
# whole workspace. One set everywhere matters: cargo unifies dependency
# features over the packages it builds together, so a build of a subset gets
# other features and compiles shared crates a second time. Built over the
# whole workspace (no dev-dependency adds a feature), the release artifacts
# are exactly those `cargo test --release --workspace` links its tests
# against, so `make test` compiles the workspace once. Used by `make build`,
# run-all.sh, scripts/build-images.sh, compat/run.sh and the k8s-perf scripts.
#
#   scripts/build-release.sh [cargo build options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${CARGO:-cargo}" build --release --workspace "$@"
