#!/usr/bin/env bash
# scripts/build-release.sh - builds the release binaries every step uses
# (chronik-server, chronik-ingestor, chronik-consumer, chronik-bench) in one
# cargo invocation. One set everywhere matters: cargo unifies dependency
# features over the packages it builds together, and the server built alone
# gets other features (serde, serde_json, axum) than the server built with
# the ingestor and consumer, so a second set would compile the server and its
# crates a second time (minutes on a fresh machine). Used by `make build`,
# run-all.sh, scripts/build-images.sh, compat/run.sh and the k8s-perf scripts.
#
#   scripts/build-release.sh [cargo build options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${CARGO:-cargo}" build --release \
  -p chronik-server -p chronik-ingestor -p chronik-consumer -p chronik-bench "$@"
