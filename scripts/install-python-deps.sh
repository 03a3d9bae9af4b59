#!/usr/bin/env bash
# install-python-deps.sh - create the project-local virtualenv (.venv) and
# install the pinned Python test dependencies (tests/python/requirements.txt:
# confluent-kafka, pytest) into it.
#
# Idempotent: skips pip entirely when the venv already holds exactly the
# requirements file it was built from (hash stamp) and imports work.
# Honours pip's own env (PIP_FIND_LINKS, PIP_INDEX_URL, ...).
#
# Needs: python3 >= 3.9 with venv (scripts/install-system-deps.sh).
# Env: VENV (default <repo>/.venv), PYTHON (default python3).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNCTL="$REPO_ROOT/scripts/runctl.py"
VENV="${VENV:-$REPO_ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
REQ="$REPO_ROOT/tests/python/requirements.txt"
STAMP="$VENV/.requirements.sha256"
# shellcheck source=scripts/venv.sh
source "$REPO_ROOT/scripts/venv.sh"

# A venv whose interpreter no longer runs (python moved or upgraded) is rebuilt.
venv_ready "python deps"
if venv_up_to_date "$REQ" "$STAMP" confluent_kafka pytest; then
  echo "python deps: $VENV up to date"
  exit 0
fi

venv_install "$REQ" "$STAMP"
versions=$("$VENV/bin/python" "$RUNCTL" module-versions confluent-kafka=confluent_kafka librdkafka=confluent_kafka:libversion pytest)
echo "python deps: $versions"
