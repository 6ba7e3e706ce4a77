#!/usr/bin/env bash
# Sets everything up, then runs the main job: probewise preflight (the pre-launch
# checks; with no arguments, on embedded defaults). Arguments go to preflight.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
exec "$root/.venv/bin/probewise" preflight "$@"
