#!/usr/bin/env bash
# Sets everything up, then runs every check: ruff, mypy, pyright, verifytypes,
# the docs build (warnings are errors) and pytest. Fails if any of them fails.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/bootstrap.sh
export PATH="$root/.venv/bin:$PATH"
status=0
step() {
    echo "== $*"
    if ! "$@"; then
        echo "!! failed: $*"
        status=1
    fi
}
step ruff check .
step ruff format --check .
step mypy
step pyright
verifytypes() {
    # Run from outside the tree with src on the path: pyright does not follow the
    # editable install's .pth file. Fails unless every exported symbol is known.
    local out
    out=$(cd /tmp && PYTHONPATH="$root/src" pyright --verifytypes probewise --ignoreexternal \
        --pythonpath "$root/.venv/bin/python" 2>&1) || true
    echo "$out" | grep -E "Type completeness score|error" || true
    echo "$out" | grep -q "Type completeness score: 100%"
}
step verifytypes
step sphinx-build -W --keep-going -q -b html docs docs/_build/html
step pytest "$@"
if [ "$status" -ne 0 ]; then
    echo "== some checks failed"
fi
exit "$status"
