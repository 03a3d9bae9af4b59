# shellcheck shell=bash
# scripts/venv.sh - the project's shared Python virtualenv (.venv) for the
# install scripts that put their pinned requirements into it
# (scripts/install-python-deps.sh, scripts/install-report-deps.sh,
# compat/install-deps.sh). Sourced, not run.
#
# Owns: making the venv (again when its interpreter no longer runs) and
# pip-installing one requirements file into it only when that file changed
# since its last install (a sha256 stamp kept in the venv) or a module it
# provides does not import. Must not: know any one script's requirements.
#
# Needs: REPO_ROOT, VENV and PYTHON set by the caller; sha256sum;
# scripts/runctl.py (has-modules).

# venv_ready LABEL - $VENV exists and its python runs: made with $PYTHON when
# missing, made again when broken. Says what it did as "LABEL: ...".
venv_ready() {
  if [[ -d "$VENV" ]] && ! "$VENV/bin/python" "$REPO_ROOT/scripts/runctl.py" has-modules 2>/dev/null; then
    echo "$1: $VENV is broken, recreating"
    rm -rf "$VENV"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "$1: creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
  fi
}

# venv_up_to_date REQ STAMP MODULE... - true when STAMP holds REQ's sha256
# (venv_install wrote it) and every MODULE imports in $VENV.
venv_up_to_date() {
  local req=$1 stamp=$2; shift 2
  [[ -f "$stamp" && "$(cat "$stamp")" == "$(sha256sum "$req" | cut -d' ' -f1)" ]] \
    && "$VENV/bin/python" "$REPO_ROOT/scripts/runctl.py" has-modules "$@" 2>/dev/null
}

# venv_install REQ STAMP - pip install -r REQ into $VENV, then record REQ's
# sha256 in STAMP (removed first, so a failed install leaves none).
venv_install() {
  local req=$1 stamp=$2
  rm -f "$stamp"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  sha256sum "$req" | cut -d' ' -f1 > "$stamp"
}
