#!/usr/bin/env bash
# Outside CI: the newest versions pyproject.toml allows, in a scratch copy of the checkout
# with its own .venv, through every check of scripts/test.sh. Where a check fails, each
# package whose version differs from the lock is tried alone (the lock, with that one
# package at its newest version) on the failed checks, and those that fail them are named.
#
#   bash scripts/check_newest.sh [WORKDIR]      (default: a new temporary folder)
#
# Exit 0: every check passed at the newest versions (refresh the lock: scripts/lock.sh);
# 1: a check failed (the report names the upgrades that break it). The report is
# WORKDIR/report.txt. torch goes as high as pip may take it here: this machine kind caps
# it at a release on its disk (/etc/xdg/pip; 2.14.1, a CUDA build of several GB, on
# 2026-12-06), which runs on the CPU like the lock's 2.13.0+cpu.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-$(mktemp -d -t probewise-newest.XXXXXX)}
source "$root/scripts/_scratch_tree.sh"
cd "$work/tree"
"${vpip[@]}" install "torch==2.13.0"
"${vpip[@]}" install --upgrade --upgrade-strategy eager -e ".[torch,plot]" --group dev
lock_pins > "$work/lock.txt"
venv_pins > "$work/newest.txt"
changed_names "$work/lock.txt" "$work/newest.txt" > "$work/changed.txt"
report="$work/report.txt"
{
    echo "check_newest: $(date -u +%Y-%m-%dT%H:%MZ), in $work"
    echo "versions that differ from the lock (name lock newest):"
    sed 's/^/  /' "$work/changed.txt"
} > "$report"
set +e
PROBEWISE_NO_BOOTSTRAP=1 bash scripts/test.sh > "$work/checks.log" 2>&1
status=$?
set -e
failed=$(sed -n 's/^!! failed: //p' "$work/checks.log" | tr '\n' ' ')
if [ "$status" -eq 0 ]; then
    echo "every check passed at the newest versions" >> "$report"
    cat "$report"
    exit 0
fi
echo "failed at the newest versions: $failed(log: $work/checks.log)" >> "$report"
# Each upgrade alone, on the failed checks (pytest: the tests that failed, by node id;
# --lf would run everything once a package passed and the cache forgot them): the lock
# is installed once, then each package is moved to its newest version and back.
mapfile -t failed_tests < <(sed -n 's/^\(FAILED\|ERROR\) \([^ ]*::[^ ]*\).*/\2/p' \
    "$work/checks.log" | sort -u)
"${vpip[@]}" install --no-deps --require-hashes -r "$root/requirements/dev.lock"
while read -r name locked newest; do
    [ "$newest" = "-" ] && continue
    "${vpip[@]}" install --no-deps "$name==$newest"
    if PROBEWISE_NO_BOOTSTRAP=1 PROBEWISE_CHECKS="$failed" bash scripts/test.sh \
        -p no:cacheprovider "${failed_tests[@]}" \
        > "$work/alone-$name.log" 2>&1; then
        echo "  $name $newest alone: passes" >> "$report"
    else
        echo "  $name $newest alone: BREAKS $(sed -n 's/^!! failed: //p' "$work/alone-$name.log" | tr '\n' ' ')" >> "$report"
    fi
    if [ "$locked" = "-" ]; then
        "${vpip[@]}" uninstall -y "$name"
    else
        "${vpip[@]}" install --no-deps "$name==$locked"
    fi
done < "$work/changed.txt"
cat "$report"
exit 1
