#!/usr/bin/env bash
# Creates .venv and installs, from the lock (requirements/dev.lock, with hashes), every
# runtime dependency, both extras ([torch], [plot]) and every development tool, then
# probewise itself (editable, no dependencies: the lock has them all).
# Safe to run twice: a stamp of the inputs skips the install when nothing changed.
# scripts/lock.sh refreshes the lock; docs/contributing.md says when and how.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
fi
# The lock and the C scanner's source too: the editable install compiles it in place
# (setup.py).
stamp_want=$( (cat pyproject.toml setup.py requirements/dev.lock scripts/bootstrap.sh \
    src/probewise/throughput/readers/_scan.c
    .venv/bin/python -V) | sha256sum | cut -d' ' -f1)
if [ -f .venv/.probewise-stamp ] && [ "$(cat .venv/.probewise-stamp)" = "$stamp_want" ]; then
    exit 0
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# The lock pins torch to the CPU build (torch==2.13.0+cpu), whose wheel lies on this
# machine kind's disk (pip's find-links); a plain "torch" requirement would pull a CUDA
# build. Every file is checked against the lock's hashes.
"${pip[@]}" install --require-hashes --no-deps -r requirements/dev.lock
# setuptools comes from the lock too, so the build of the editable install (and of the
# scanner) uses it rather than whatever an isolated build environment would fetch.
"${pip[@]}" install --no-deps --no-build-isolation -e .
# Nothing missing and nothing in conflict: the lock is whole.
.venv/bin/python -m pip --disable-pip-version-check check
echo "$stamp_want" > .venv/.probewise-stamp
