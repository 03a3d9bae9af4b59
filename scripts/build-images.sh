#!/usr/bin/env bash
# build-images.sh - build the two container images with podman: chronik-server
# (docker/chronik-server.Dockerfile) and chronik-harness (ingestor, consumer,
# bench and the load generator chronik-loadgen; docker/chronik-harness.Dockerfile).
# Run by `make images`.
#
#   scripts/build-images.sh            -> localhost/chronik-server:dev, localhost/chronik-harness:dev
#   TAG=v1 scripts/build-images.sh     another tag
#
# The Dockerfiles take their base images as build arguments. When a registry
# answers (docker.io's debian:bookworm-slim can be pulled), the ordinary bases
# are used and the binaries compile inside rust:<version>-bookworm
# (BINARIES=compile; chronik-loadgen in golang:<version>-bookworm). When none
# answers (this project's CI machines), the Debian base is made offline once
# with debootstrap from the Debian mirror apt uses
# (localhost/debian:bookworm-slim, about 30 s) and the images take the
# release binaries built here (BINARIES=host; the host is Debian bookworm, so
# their glibc is the base's) and chronik-loadgen as scripts/install-loadgen.sh
# builds it (.tools/bin/chronik-loadgen, which the build context keeps; it
# must be static - CGO_ENABLED=0 - and this script refuses one that is not).
#
# Needs: root (podman with runc and the cgroupfs manager, as the host's
# hybrid cgroups require), cargo, Go (chronik-loadgen). Installs podman, runc
# and debootstrap.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

TAG="${TAG:-dev}"
DEBIAN_RELEASE=bookworm
LOCAL_BASE="localhost/debian:$DEBIAN_RELEASE-slim"
PULL_TIMEOUT="${PULL_TIMEOUT:-20}"

bash scripts/install-system-deps.sh --containers >&2

# podman_cmd ARGS... - podman as this host needs it (runc, cgroupfs)
podman_cmd() { podman --runtime runc --cgroup-manager=cgroupfs "$@"; }

mirror() {  # the Debian mirror apt uses (deb822 or one-line sources)
  local m
  m=$(sed -nE 's/^URIs:[[:space:]]*(\S+).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  [[ -n "$m" ]] || m=$(sed -nE 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?(\S+)[[:space:]]+.*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
  echo "${m:-http://deb.debian.org/debian}"
}

if timeout "$PULL_TIMEOUT" podman_cmd pull -q "docker.io/library/debian:$DEBIAN_RELEASE-slim" > /dev/null 2>&1; then
  log "a registry answers: ordinary bases, binaries compiled in the Rust image"
  BUILD_ARGS=(--build-arg BINARIES=compile)
  CONTEXT=.  # the workspace's sources (.dockerignore keeps them only)
else
  log "no registry answers: local Debian base ($LOCAL_BASE) and this host's release binaries"
  if ! podman_cmd image exists "$LOCAL_BASE"; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    log "debootstrap --variant=minbase $DEBIAN_RELEASE from $(mirror) (once)"
    debootstrap --variant=minbase "$DEBIAN_RELEASE" "$root" "$(mirror)" > "$root.log" 2>&1 \
      || { tail -n 20 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | podman_cmd import -q - "$LOCAL_BASE" > /dev/null
    rm -rf "$root" "$root.log"
  fi
  log "cargo build --release (server, ingestor, consumer, bench)"
  bash scripts/build-release.sh >&2
  # chronik-loadgen: static, at the path the Dockerfile copies (.tools/bin, kept by .dockerignore)
  loadgen=$(bash scripts/install-loadgen.sh) || die "scripts/install-loadgen.sh failed"
  staged=.tools/bin/chronik-loadgen
  if [[ "$(realpath "$loadgen")" != "$(realpath -m "$staged")" ]]; then
    mkdir -p "$(dirname "$staged")" && cp "$loadgen" "$staged"
  fi
  # a dynamically linked Go binary names its loader (PT_INTERP); a static one does not
  if LC_ALL=C readelf -l "$staged" 2> /dev/null | grep -q 'INTERP'; then
    die "$loadgen is dynamically linked: scripts/install-loadgen.sh must build it with CGO_ENABLED=0"
  fi
  BUILD_ARGS=(--build-arg BINARIES=host --build-arg "RUNTIME_IMAGE=$LOCAL_BASE")
  # The build context: a directory holding just what BINARIES=host copies, at
  # the paths the Dockerfiles name. Not the repository root: under CI target/
  # and .tools/ are links into a cache (scripts/link-caches.sh), which a build
  # context cannot follow.
  CONTEXT=.run/image-context
  rm -rf "$CONTEXT" && mkdir -p "$CONTEXT/target/release" "$CONTEXT/.tools/bin"
  for bin in chronik-server chronik-ingestor chronik-consumer chronik-bench; do
    cp "target/release/$bin" "$CONTEXT/target/release/"
  done
  cp "$staged" "$CONTEXT/.tools/bin/"
fi

for image in chronik-server chronik-harness; do
  log "podman build $image:$TAG"
  podman_cmd build --isolation=chroot -q "${BUILD_ARGS[@]}" \
    -f "docker/$image.Dockerfile" -t "localhost/$image:$TAG" "$CONTEXT" > /dev/null
  echo "localhost/$image:$TAG"
done
# the previous build of each tag is left untagged: drop those, not others' images
podman_cmd image prune -f > /dev/null 2>&1 || true
