#!/usr/bin/env bash
# Sets everything up, then runs the main job.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
exec "$root/.venv/bin/probewise" demo "$@"
