#!/usr/bin/env bash
# compat/install-deps.sh - install and build everything the client
# compatibility matrix (compat/run.sh) needs. Idempotent: each step checks
# first and does nothing (touches no network) when already done.
#
#   apt        kcat (Debian's, bundles librdkafka 2.0.2); also java 17 + maven
#              and curl if missing (apt-get update runs only if something is)
#   python     confluent-kafka, kafka-python, aiokafka (compat/requirements.txt) into the
#              repo's shared .venv (created if missing)
#   go         compat/go -> target/compat/franz-go-driver,
#              compat/sarama -> target/compat/sarama-driver (go build, incremental;
#              both require the local module compat/driver, nothing to download)
#   node       compat/kafkajs/node_modules                  (npm ci, when the lockfile changed)
#   java       compat/java -> compat/java/target/{classes,lib} (mvn -q -B package;
#              skipped while pom.xml and the sources are unchanged)
#   rust       chronik-compat-rdkafka -> target/release/     (scripts/build-release.sh)
#
# Needs: Debian 12, root or sudo (only when an apt package is missing), Go >= 1.26
# on PATH (franz-go's minimum; never downloaded: GOTOOLCHAIN=local), cargo, python3.
# Env: VENV (default <repo>/.venv), CARGO (default cargo), PYTHON (default python3).
set -euo pipefail
COMPAT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$COMPAT_DIR/.." && pwd)"
VENV="${VENV:-$REPO_ROOT/.venv}"
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"
RUNCTL="$REPO_ROOT/scripts/runctl.py"

say() { printf '[compat deps] %s\n' "$*" >&2; }
# shellcheck source=scripts/venv.sh
source "$REPO_ROOT/scripts/venv.sh"

# -- apt ---------------------------------------------------------------------
missing=()
command -v kcat > /dev/null 2>&1 || missing+=(kcat)
command -v curl > /dev/null 2>&1 || missing+=(curl)
command -v mvn > /dev/null 2>&1 || missing+=(maven)
command -v npm > /dev/null 2>&1 || missing+=(nodejs npm)
java_major=$(java -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p' || true)
[[ -n "$java_major" && "$java_major" -ge 17 ]] || missing+=(openjdk-17-jdk-headless)
if ((${#missing[@]})); then
  say "apt: installing ${missing[*]}"
  SUDO=""
  if ((EUID != 0)); then
    command -v sudo > /dev/null || { say "error: need root or sudo for apt-get install ${missing[*]}"; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
say "apt: $(kcat -V 2>&1 | sed -nE 's/^Version ([^ ]+) .*librdkafka ([^ ]+).*/kcat \1 (librdkafka \2)/p')"

# -- python ------------------------------------------------------------------
req="$COMPAT_DIR/requirements.txt"
stamp="$VENV/.compat-requirements.sha256"
venv_ready "[compat deps] python" >&2
venv_up_to_date "$req" "$stamp" confluent_kafka kafka aiokafka || venv_install "$req" "$stamp"
say "python: $("$VENV/bin/python" "$RUNCTL" module-versions confluent-kafka=confluent_kafka kafka-python=kafka aiokafka=aiokafka)"

# -- go ----------------------------------------------------------------------
command -v go > /dev/null 2>&1 || { say "error: go not on PATH (franz-go needs Go >= 1.26)"; exit 1; }
mkdir -p "$REPO_ROOT/target/compat"
(cd "$COMPAT_DIR/go" && GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:--buildvcs=false}" \
  go build -o "$REPO_ROOT/target/compat/franz-go-driver" .)
(cd "$COMPAT_DIR/sarama" && GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:--buildvcs=false}" \
  go build -o "$REPO_ROOT/target/compat/sarama-driver" .)
say "go: target/compat/{franz-go,sarama}-driver ($(go version | cut -d' ' -f3))"

# -- node --------------------------------------------------------------------
node_stamp="$COMPAT_DIR/kafkajs/node_modules/.lock.sha256"
node_want=$(sha256sum "$COMPAT_DIR/kafkajs/package-lock.json" | cut -d' ' -f1)
if [[ ! -f "$node_stamp" || "$(cat "$node_stamp")" != "$node_want" ]]; then
  npm ci --prefix "$COMPAT_DIR/kafkajs" --no-audit --no-fund --loglevel=error > /dev/null
  echo "$node_want" > "$node_stamp"
fi
say "node: compat/kafkajs/node_modules (kafkajs $(node -p 'require(process.argv[1]).version' "$COMPAT_DIR/kafkajs/node_modules/kafkajs/package.json"), node $(node --version))"

# -- java --------------------------------------------------------------------
java_stamp="$COMPAT_DIR/java/target/.built.sha256"
java_want=$(find "$COMPAT_DIR/java/pom.xml" "$COMPAT_DIR/java/src" -type f -print0 | sort -z \
  | xargs -0 cat | sha256sum | cut -d' ' -f1)
if [[ -f "$java_stamp" && "$(cat "$java_stamp")" == "$java_want" && -d "$COMPAT_DIR/java/target/lib" ]]; then
  :
else
  (cd "$COMPAT_DIR/java" && mvn -q -B package)
  echo "$java_want" > "$java_stamp"
fi
jars=("$COMPAT_DIR"/java/target/lib/kafka-clients-[0-9]*.jar "$COMPAT_DIR"/java/target/lib/kafka-tools-[0-9]*.jar)
say "java: compat/java/target (${jars[*]##*/})"

# -- rust --------------------------------------------------------------------
# the whole release set (scripts/build-release.sh): built alone, the driver
# would get other dependency features and compile shared crates again
CARGO="$CARGO" bash "$REPO_ROOT/scripts/build-release.sh" --quiet
say "rust: target/release/chronik-compat-rdkafka"
