#!/usr/bin/env bash
# install-report-deps.sh - install the report library's pinned Python
# dependencies (reports/requirements.txt: pandas, matplotlib, hdrhistogram,
# nbclient/nbconvert/nbformat, ipykernel, papermill, pytest) into the
# project-local virtualenv (.venv), creating it if missing.
#
# Idempotent: skips pip entirely when the venv already holds exactly the
# requirements file it was built from (hash stamp) and imports work. Shares
# the venv with scripts/install-python-deps.sh (confluent-kafka, pytest): the
# common pins agree, and neither removes what the other installed.
# Honours pip's own env (PIP_FIND_LINKS, PIP_INDEX_URL, ...).
#
# Needs: python3 >= 3.11 with venv (pandas 3 needs 3.11).
# Env: VENV (default <repo>/.venv), PYTHON (default python3).
# Then: .venv/bin/python -m pytest reports/tests -q
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO_ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
REQ="$REPO_ROOT/reports/requirements.txt"
STAMP="$VENV/.report-requirements.sha256"
RUNCTL="$REPO_ROOT/scripts/runctl.py"
MODULES=(pandas matplotlib hdrh nbclient nbconvert nbformat ipykernel papermill pytest)
# shellcheck source=scripts/venv.sh
source "$REPO_ROOT/scripts/venv.sh"

# A venv whose interpreter no longer runs (python moved or upgraded) is rebuilt.
venv_ready "report deps"
if ! "$VENV/bin/python" "$RUNCTL" has-modules --python 3.11; then
  echo "report deps: $VENV has $("$VENV/bin/python" --version 2>&1); pandas 3 needs Python >= 3.11" >&2
  exit 1
fi

if venv_up_to_date "$REQ" "$STAMP" "${MODULES[@]}"; then
  echo "report deps: $VENV up to date"
  exit 0
fi

venv_install "$REQ" "$STAMP"
"$VENV/bin/python" "$RUNCTL" has-modules "${MODULES[@]}" || { echo "report deps: a module does not import after pip install" >&2; exit 1; }
versions=$("$VENV/bin/python" "$RUNCTL" module-versions pandas matplotlib nbclient papermill pytest)
echo "report deps: $versions"
