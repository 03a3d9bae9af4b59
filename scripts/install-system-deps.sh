#!/usr/bin/env bash
# install-system-deps.sh - make sure the Debian packages the build, the tests
# and (with --bench) the CPU benchmark need are installed. Installs only what
# is missing, runs `apt-get update` only when something is missing, so a
# re-run on a ready machine is a no-op that touches no network.
#
#   scripts/install-system-deps.sh           build + tests: C toolchain, make,
#                                            pkg-config and zlib headers (the
#                                            vendored librdkafka of the rdkafka
#                                            dev-dependency), curl (readiness
#                                            polls), flock, python3 venv support,
#                                            tcpdump (the encrypted-raft-port test
#                                            captures loopback traffic)
#   scripts/install-system-deps.sh --bench   also java 17+ and maven (kafka-anchor)
#   scripts/install-system-deps.sh --run     also prometheus (run-all.sh scrapes every component)
#   scripts/install-system-deps.sh --containers  also podman, runc, debootstrap and iproute2
#                                            (make images, make images-test)
#
# Needs: Debian 12, root or sudo when something is missing.
set -euo pipefail
RUNCTL="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/runctl.py"

want_bench=0
want_run=0
want_containers=0
for a in "$@"; do
  case $a in
    --bench) want_bench=1;;
    --run) want_run=1;;
    --containers) want_containers=1;;
    *) echo "usage: $0 [--bench] [--run] [--containers]" >&2; exit 2;;
  esac
done

missing=()
need_cmd() { command -v "$1" > /dev/null 2>&1 || missing+=("$2"); }   # $1 command, $2 package
need_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed' || missing+=("$1"); }

need_cmd cc gcc
need_cmd c++ g++
need_cmd make make
need_cmd pkg-config pkg-config
need_cmd curl curl
need_cmd git git
need_cmd flock util-linux
need_cmd shellcheck shellcheck
need_cmd python3 python3
need_cmd tcpdump tcpdump
# the fault tools (scripts/faults.py: cuts between nodes' cgroups; their
# tests in tests/python/test_faults.py) and the network-namespace tests
need_cmd iptables iptables
need_cmd ip iproute2
need_pkg zlib1g-dev
# pyenv/uv pythons ship venv+ensurepip; Debian's python3 needs python3-venv
if command -v python3 > /dev/null 2>&1 && ! python3 "$RUNCTL" has-modules venv ensurepip 2>/dev/null; then
  missing+=(python3-venv)
fi
if ((want_bench)); then
  java_major=$(java -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p' || true)
  [[ -n "$java_major" && "$java_major" -ge 17 ]] || missing+=(openjdk-17-jdk-headless)
  need_cmd mvn maven
fi

if ((want_run)); then
  need_cmd prometheus prometheus
fi

if ((want_containers)); then
  need_cmd podman podman
  need_cmd runc runc
  need_cmd debootstrap debootstrap
  need_cmd ip iproute2
fi

if ((${#missing[@]} == 0)); then
  echo "system deps: all present"
  exit 0
fi

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "system deps: installing ${missing[*]}"
SUDO=""
if ((EUID != 0)); then
  command -v sudo > /dev/null || { echo "error: need root or sudo to apt-get install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
