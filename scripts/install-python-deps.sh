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

want=$(sha256sum "$REQ" | cut -d' ' -f1)

# A venv whose interpreter no longer runs (python moved or upgraded) is rebuilt.
if [[ -d "$VENV" ]] && ! "$VENV/bin/python" "$RUNCTL" has-modules 2>/dev/null; then
  echo "python deps: $VENV is broken, recreating"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "python deps: creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
   && "$VENV/bin/python" "$RUNCTL" has-modules confluent_kafka pytest 2>/dev/null; then
  echo "python deps: $VENV up to date"
  exit 0
fi

rm -f "$STAMP"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
versions=$("$VENV/bin/python" "$RUNCTL" module-versions confluent-kafka=confluent_kafka librdkafka=confluent_kafka:libversion pytest)
echo "python deps: $versions"
echo "$want" > "$STAMP"
