#!/usr/bin/env bash
# Sets everything up, then runs every check: ruff, mypy, pyright, verifytypes,
# the docs build (warnings are errors) and pytest. Fails if any of them fails.
# Arguments go to pytest. PROBEWISE_CHECKS="mypy pyright" runs only the checks named
# (ruff format mypy pyright verifytypes docs pytest); PROBEWISE_NO_BOOTSTRAP=1 uses
# .venv as it is (scripts/check_newest.sh and check_floors.sh set their own up).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ "${PROBEWISE_NO_BOOTSTRAP:-0}" != 1 ]; then
    bash scripts/bootstrap.sh
fi
export PATH="$root/.venv/bin:$PATH"
checks=" ${PROBEWISE_CHECKS:-ruff format mypy pyright verifytypes docs pytest} "
status=0
step() {
    local name=$1
    shift
    case "$checks" in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name: $*"
    if ! "$@"; then
        echo "!! failed: $name"
        status=1
    fi
}
verifytypes() {
    # Run from outside the tree with src on the path: pyright does not follow the
    # editable install's .pth file. Fails unless every exported symbol is known.
    local out
    out=$(cd /tmp && PYTHONPATH="$root/src" pyright --verifytypes probewise --ignoreexternal \
        --pythonpath "$root/.venv/bin/python" 2>&1) || true
    echo "$out" | grep -E "Type completeness score|error" || true
    echo "$out" | grep -q "Type completeness score: 100%"
}
step ruff ruff check .
step format ruff format --check .
step mypy mypy
step pyright pyright
step verifytypes verifytypes
step docs sphinx-build -W --keep-going -q -b html docs docs/_build/html
step pytest pytest "$@"
if [ "$status" -ne 0 ]; then
    echo "== some checks failed"
fi
exit "$status"
