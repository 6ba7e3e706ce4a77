#!/usr/bin/env bash
# Refreshes requirements/dev.lock: the newest versions that pyproject.toml allows of
# every runtime dependency, both extras ([torch], [plot]) and the dev group (tests, lint,
# docs, release tools), with the hashes of every file, for CPython 3.11 on Linux x86_64
# (the machine kind CI runs on). torch is held to the CPU build whose wheel lies on this
# machine kind's disk (TORCH_WHEELS, default /opt/wheels).
#
# Run it, then `bash scripts/test.sh` (bootstrap installs the new lock), and commit the
# lock only when every check passes: the lock records the last versions known to be good.
# Extra arguments go to `uv pip compile` (e.g. --upgrade-package NAME, or
# --exclude-newer 2026-11-20 to lock what was out on a day).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
uv_version=0.13.9
torch_pin="torch==2.13.0+cpu"
wheels=${TORCH_WHEELS:-/opt/wheels}
tools=${XDG_CACHE_HOME:-$HOME/.cache}/probewise-lock-tools
if [ ! -x "$tools/bin/uv" ] || [ "$("$tools/bin/uv" --version | cut -d' ' -f2)" != "$uv_version" ]; then
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip --disable-pip-version-check -q install "uv==$uv_version"
fi
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "$torch_pin" > "$constraints"
"$tools/bin/uv" pip compile pyproject.toml \
    --extra torch --extra plot --group dev \
    --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --find-links "$wheels" --constraint "$constraints" \
    --no-header --quiet --output-file requirements/dev.lock.new "$@"
{
    echo "# The development lock: every runtime dependency, both extras ([torch], [plot]) and"
    echo "# every tool in the dev group, with hashes, for CPython 3.11 on Linux x86_64."
    echo "# Made by scripts/lock.sh (uv $uv_version pip compile, torch held to $torch_pin);"
    echo "# installed by scripts/bootstrap.sh. Do not edit by hand."
    # the constraint file is a temporary one: name what it holds, not where it was
    sed "s|^    #   -c $constraints\$|    #   -c $torch_pin (scripts/lock.sh)|" requirements/dev.lock.new
} > requirements/dev.lock
rm -f requirements/dev.lock.new
echo "lock.sh: requirements/dev.lock: $(grep -c '^[A-Za-z]' requirements/dev.lock) packages"
