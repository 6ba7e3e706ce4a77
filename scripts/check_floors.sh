#!/usr/bin/env bash
# Outside CI: the lowest versions pyproject.toml allows of every direct dependency (the
# runtime ones and the extras', each at its floor, as uv's --resolution lowest-direct
# picks), over the lock's test tools, in a scratch copy of the checkout with its own
# .venv; then the test suite there. A floor that fails is to be raised in pyproject.toml
# (and said in the CHANGELOG).
#
#   bash scripts/check_floors.sh [WORKDIR]      (default: a new temporary folder)
#
# Exit status: pytest's. The report is WORKDIR/report.txt. torch cannot be had at its
# floor here (torch>=2.4 would be a CUDA build of several GB): it stays at the CPU build
# on this machine kind's disk (torch==2.13.0+cpu), and the report says so. Only pytest
# runs: the type checkers read the stubs of the versions installed, which is not what a
# floor promises.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-$(mktemp -d -t probewise-floors.XXXXXX)}
source "$root/scripts/_scratch_tree.sh"
cd "$work/tree"
uv_version=0.13.9
"${vpip[@]}" install "uv==$uv_version"
uv=("$work/tree/.venv/bin/uv" pip install --python "$work/tree/.venv/bin/python" --quiet)
# The lock first (the test tools at their locked versions), then the floors over it.
"${vpip[@]}" install --no-deps --require-hashes -r "$root/requirements/dev.lock"
"$work/tree/.venv/bin/python" - > "$work/floors.txt" <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
requirements = list(project["dependencies"])
for extra in ("torch", "plot", "dask", "zstd", "gzip"):
    requirements += project["optional-dependencies"][extra]
for requirement in requirements:
    name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,;\s]+)", requirement.strip()).groups()
    if name != "torch":
        print(f"{name}=={floor}")
PY
echo "torch==2.13.0+cpu" > "$work/torch.txt"
"${uv[@]}" --find-links "${TORCH_WHEELS:-/opt/wheels}" --constraint "$work/torch.txt" \
    -r "$work/floors.txt"
"${vpip[@]}" install --no-deps --no-build-isolation -e .
report="$work/report.txt"
{
    echo "check_floors: $(date -u +%Y-%m-%dT%H:%MZ), in $work"
    echo "direct dependencies at their floors (torch held at 2.13.0+cpu: its floor, 2.4, is not to be had here):"
    sed 's/^/  /' "$work/floors.txt"
    echo "pip check: $("${vpip[@]}" check 2>&1 | tr '\n' ' ')"
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
