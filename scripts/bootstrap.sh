#!/usr/bin/env bash
# Creates .venv and installs probewise with both extras ([torch], [plot]) and every
# development group.
# Safe to run twice: a stamp of the inputs skips the install when nothing changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
fi
# The C scanner's source too: the editable install compiles it in place (setup.py).
stamp_want=$( (cat pyproject.toml setup.py scripts/bootstrap.sh src/probewise/throughput/readers/_scan.c
    .venv/bin/python -V) | sha256sum | cut -d' ' -f1)
if [ -f .venv/.probewise-stamp ] && [ "$(cat .venv/.probewise-stamp)" = "$stamp_want" ]; then
    exit 0
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# pip >= 25.1 understands dependency groups (PEP 735).
"${pip[@]}" install --upgrade "pip>=25.1"
# The CPU wheel first: where it lies on disk (this machine kind) pip takes it from
# there; a plain "torch" requirement with nothing installed would pull a CUDA build.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    "${pip[@]}" install "torch==2.13.0" || echo "bootstrap: torch 2.13.0 CPU wheel not available; the project install picks a torch" >&2
fi
"${pip[@]}" install -e ".[torch,plot]" --group dev
echo "$stamp_want" > .venv/.probewise-stamp
