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
step pyright --verifytypes probewise --ignoreexternal
step sphinx-build -W --keep-going -q -b html docs docs/_build/html
step pytest "$@"
if [ "$status" -ne 0 ]; then
    echo "== some checks failed"
fi
exit "$status"
