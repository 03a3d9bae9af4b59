#!/usr/bin/env bash
# scripts/lint-shell.sh - refuse program logic written as inline Python in
# shell scripts: a Python interpreter given its program with -c, on stdin
# ("-", /dev/stdin, a heredoc or here-string) or through a pipe. Such logic
# belongs in the Python module that owns its concern, called as a
# subcommand (scripts/runctl.py, scripts/benchctl.py, k8s-perf/lib/results.py,
# the tests' check_*.py, ...), where it can be read, imported and tested.
#
#   scripts/lint-shell.sh [FILE...]   default: every *.sh git tracks or would
#                                     add (untracked, not ignored)
#
# Interpreters recognised: python, python3, python3.N (also as a path's last
# part, e.g. "$VENV/bin/python") and variables whose name contains PY
# ("$PY", "${VENV_PY}", "$PYTHON"). Comment lines are skipped. Prints each
# offending line as FILE:LINE:TEXT and exits 1; exits 0 when there is none.
# Run by `make lint` (and `make lint-shell`). Needs: bash, git, GNU grep (-P).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Lines allowed to keep inline Python: "PATH|TEXT THE LINE CONTAINS|why".
# Keep it empty: move the snippet into a module instead.
ALLOW=()

interp='(?<![A-Za-z0-9_.-])(?:python[0-9.]*|\$\{?[A-Za-z_]*PY(?:THON)?[A-Za-z0-9_]*\}?)"?'
flags='(?:\s+-[A-Za-z]+)*?'
# -c PROGRAM | - (stdin) | a heredoc / here-string | /dev/stdin
inline="${interp}${flags}\\s+(?:-[A-Za-z]*c(?![A-Za-z0-9_-])|-(?=\\s|\$|[;)|])|<<|/dev/stdin)"
# ... | python3 (the program on stdin from the pipe)
piped="\\|\\s*\"?${interp}${flags}\\s*(?:\$|[;)|])"

if (($#)); then
  files=("$@")
else
  cd "$REPO_ROOT"
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.sh')
  existing=()  # (a tracked file deleted in the work tree is not read)
  for f in "${files[@]}"; do [[ -f "$f" ]] && existing+=("$f"); done
  files=("${existing[@]}")
fi

hits=$(grep -nHP "(?:$inline)|(?:$piped)" -- "${files[@]}") || (($? == 1)) \
  || { echo "lint-shell: grep -P failed (GNU grep with PCRE needed)" >&2; exit 2; }
found=0
while IFS= read -r hit; do
  [[ -n "$hit" ]] || continue
  path=${hit%%:*}
  text=${hit#*:*:}
  [[ "$text" =~ ^[[:space:]]*# ]] && continue
  allowed=0
  for entry in "${ALLOW[@]}"; do
    IFS='|' read -r apath atext _ <<< "$entry"
    [[ "$path" == "$apath" && "$text" == *"$atext"* ]] && allowed=1
  done
  ((allowed)) && continue
  echo "$hit"
  found=$((found + 1))
done <<< "$hits"

if ((found)); then
  echo "lint-shell: $found line(s) run inline Python in a shell script; move the logic into the Python module" \
       "that owns it and call it as a subcommand (see scripts/runctl.py)" >&2
  exit 1
fi
echo "lint-shell: no inline Python in ${#files[@]} shell scripts"
