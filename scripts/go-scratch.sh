# shellcheck shell=bash
# scripts/go-scratch.sh - sourced by the install scripts that build Go tools
# from source (install-k8s-tools.sh, install-kube.sh). Owns:
# finding go, and a throwaway GOPATH/GOCACHE so the module sources and build
# cache (about 5 GB for Kubernetes) are deleted once the binaries
# exist instead of filling the disk of the machine that runs the tests.
#
#   go_find             put go on PATH (or /usr/local/go/bin); fails if absent
#   go_scratch DIR      export GOPATH, GOCACHE, GOMODCACHE under DIR/go-scratch
#                       and delete it when the (sub)shell exits

go_find() {
  command -v go > /dev/null 2>&1 && return 0
  [[ -x /usr/local/go/bin/go ]] && PATH="/usr/local/go/bin:$PATH" && return 0
  return 1
}

go_scratch() {
  GO_SCRATCH="$1/go-scratch"
  export GOPATH="$GO_SCRATCH/path" GOCACHE="$GO_SCRATCH/cache" GOMODCACHE="$GO_SCRATCH/path/pkg/mod"
  # the module cache is read-only; `go clean -modcache` knows how to remove it
  trap 'go clean -modcache > /dev/null 2>&1 || true; rm -rf "$GO_SCRATCH"' EXIT
}
