#!/usr/bin/env bash
# scripts/link-caches.sh - points a clone's build and tool directories at a
# cache that outlives the clone, so a fresh clone on a machine that built
# Chronik before reuses what it built: `target/` (cargo's release and clippy
# artifacts: every dependency, about 10 minutes cold on 2 cores), `.tools/`
# (the Kubernetes control plane, 5-8 minutes cold, kustomize, kubeconform,
# the schemas, chronik-loadgen and the Go module and build caches behind it)
# and `fuzz/target/` (the instrumented fuzz build).
#
# Owns: the three links, and the source stamp that lets cargo reuse the
# workspace's own crates too. Must not: decide what else is stale. Every tool
# that fills these directories rebuilds what is out of date (cargo by its
# fingerprints, install-kube.sh and install-k8s-tools.sh by version stamps,
# install-loadgen.sh when a source file is newer than the binary).
#
# The stamp. Cargo decides that a workspace crate is stale by modification
# times, and every file of a fresh clone is newer than any cached artifact,
# so without help a clean clone compiles the whole workspace again (several
# minutes) although its sources are byte for byte those the cache was built
# from. So `make test` records, when it ends, a hash of cargo's inputs (the
# tracked files of the workspace's packages, fuzz/, Cargo.toml, Cargo.lock),
# provided they did not change while it ran. A clone whose inputs hash to
# the recorded value, in a cache where no artifact is newer than the stamp,
# gets those files dated back to 2000-01-01, and cargo finds the artifacts
# fresh. Any other clone keeps its dates, and cargo rebuilds as usual.
#
# `make test` calls it under CI (CI runs on a clean clone of the machine the
# submission was made on). A developer opts in with CHRONIK_SHARED_CACHE=1.
# Not with two clones testing at once: they would share the binaries.
# A directory that already exists in the clone is left alone (a warm local
# checkout keeps its own target/).
#
#   scripts/link-caches.sh              link what is missing; date back cargo's
#                                       inputs when they match the stamp
#   scripts/link-caches.sh --hash       print the hash of cargo's inputs
#   scripts/link-caches.sh --stamp H    record H as built, if the inputs still hash to H
#
# Env: CHRONIK_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/chronik).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CHRONIK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/chronik}"
STAMP="$CACHE/cargo-inputs.sha256"
OLD_DATE="2000-01-01T00:00:00Z"
cd "$REPO_ROOT"

# cargo_inputs - the tracked files cargo reads, NUL-separated
cargo_inputs() {
  local dirs
  dirs=$(cargo metadata --no-deps --format-version 1 --offline 2> /dev/null \
    | grep -o '"manifest_path":"[^"]*"' | sed -e 's/^"manifest_path":"//' -e 's|/Cargo.toml"$||' \
      -e "s|^$REPO_ROOT/||")
  [[ -n "$dirs" ]] || { echo "link-caches: cargo metadata listed no package" >&2; return 1; }
  # shellcheck disable=SC2086 # one pathspec per package directory
  git ls-files -z -- Cargo.toml Cargo.lock fuzz $dirs
}

inputs_hash() {
  cargo_inputs | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

# link NAME CACHED - REPO_ROOT/NAME -> CACHE/CACHED, unless NAME exists
link() {
  local name=$1 cached="$CACHE/$2"
  if [[ -L "$name" ]]; then
    echo "link-caches: $name -> $(readlink "$name")"
  elif [[ -e "$name" ]]; then
    echo "link-caches: $name exists in the clone, kept"
  else
    mkdir -p "$cached"
    ln -s "$cached" "$name"
    echo "link-caches: $name -> $cached"
  fi
}

# newer_artifact - true when some cargo artifact was built after the stamp
newer_artifact() {
  local dir
  for dir in target/release/.fingerprint target/debug/.fingerprint fuzz/target/*/*/.fingerprint; do
    [[ -d "$dir" ]] || continue
    [[ -n "$(find "$dir" -newer "$STAMP" -print -quit)" ]] && return 0
  done
  return 1
}

# date_back - cargo's inputs dated back when the cache was built from them
date_back() {
  if [[ ! -f "$STAMP" ]]; then
    echo "link-caches: no source stamp in the cache: cargo rebuilds the workspace's crates"
  elif [[ "$(cat "$STAMP")" != "$(inputs_hash)" ]]; then
    echo "link-caches: the cache was built from other sources: cargo rebuilds what changed"
  elif newer_artifact; then
    echo "link-caches: an artifact is newer than the source stamp: cargo decides by dates"
  else
    cargo_inputs | xargs -0 touch -d "$OLD_DATE"
    echo "link-caches: the cache was built from these sources: cargo's inputs dated back, its artifacts reused"
  fi
}

case "${1:-}" in
  --hash) inputs_hash ;;
  --stamp)
    if [[ "$(inputs_hash)" == "${2:?--stamp HASH}" ]]; then
      echo "$2" > "$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
      echo "link-caches: source stamp recorded"
    else
      rm -f "$STAMP"
      echo "link-caches: cargo's inputs changed during the run: no source stamp"
    fi ;;
  "")
    link target target
    link .tools tools
    link fuzz/target fuzz-target
    date_back ;;
  *) echo "usage: scripts/link-caches.sh [--hash | --stamp HASH]" >&2; exit 2 ;;
esac
