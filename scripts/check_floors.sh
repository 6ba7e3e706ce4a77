#!/usr/bin/env bash
# Outside CI: the lowest versions pyproject.toml allows of every direct dependency (the
# runtime ones and the extras', each at its floor, as uv's --resolution lowest-direct
# picks), in a scratch copy of the checkout with its own .venv; then the test suite
# there. A floor that fails is to be raised in pyproject.toml
# (and said in the CHANGELOG).
#
#   bash scripts/check_floors.sh [WORKDIR [PYTEST ARGS...]]   (default: a new temporary folder)
#
# Exit status: pytest's. The report is WORKDIR/report.txt. torch cannot be had at its
# floor here (torch>=2.4 would be a CUDA build of several GB): it stays at the CPU build
# on this machine kind's disk (torch==2.13.0+cpu), and the report says so. Only pytest
# runs: the type checkers read the stubs of the versions installed, which is not what a
# floor promises.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-$(mktemp -d -t probewise-floors.XXXXXX)}
[ "$#" -gt 0 ] && shift  # the rest go to pytest
source "$root/scripts/_scratch_tree.sh"
cd "$work/tree"
uv_version=0.13.9
"${vpip[@]}" install "uv==$uv_version"
"$work/tree/.venv/bin/python" - > "$work/floors.txt" <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
requirements = list(project["dependencies"])
for extra in ("torch", "plot", "dask", "zstd", "gzip"):
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,;\s]+)", requirement.strip()).groups()
    print(f"{name}=={floor}")
PY
# Held: torch to the CPU wheel on disk; the test runner and hypothesis to the lock's
# versions (a floor is a promise to users, not to the test tools).
{
    echo "torch==2.13.0+cpu"
    grep -E '^(pytest|hypothesis)==' "$root/requirements/dev.lock" | sed 's/ .*//'
} > "$work/held.txt"
# lowest-direct: each direct dependency (the project's, its extras', the test group's)
# at the lowest version allowed, and whatever those need at their newest.
"$work/tree/.venv/bin/uv" pip install --python "$work/tree/.venv/bin/python" --quiet \
    --resolution lowest-direct --find-links "${TORCH_WHEELS:-/opt/wheels}" \
    --constraint "$work/held.txt" -e ".[torch,plot,dask,zstd,gzip]" --group test
{
    echo "installed:"
    venv_list | grep -iE "^($(sed 's/==.*//' "$work/floors.txt" | paste -sd'|'))==" |
        sed 's/^/  /' || true
} > "$work/installed.txt"
report="$work/report.txt"
{
    echo "check_floors: $(date -u +%Y-%m-%dT%H:%MZ), in $work"
    echo "floors in pyproject.toml (torch held at 2.13.0+cpu: its floor, 2.4, is not to be had here):"
    sed 's/^/  /' "$work/floors.txt"
    cat "$work/installed.txt"
    echo "pip check: $("$work/tree/.venv/bin/python" -m pip --disable-pip-version-check check 2>&1 | tr '\n' ' ')"
} > "$report"
set +e
PROBEWISE_NO_BOOTSTRAP=1 PROBEWISE_CHECKS=pytest bash scripts/test.sh -q "$@" \
    > "$work/pytest.log" 2>&1
status=$?
set -e
{
    echo "pytest exit status $status (log: $work/pytest.log):"
    tail -n 1 "$work/pytest.log" | sed 's/^/  /'
    grep -E '^(FAILED|ERROR) ' "$work/pytest.log" | sed 's/ - .*//' | sort | uniq | sed 's/^/  /'
} >> "$report"
cat "$report"
exit "$status"
