"""Save the ``--json`` output of every subcommand on every fixture, for comparing two trees.

Usage::

    python scripts/snapshot_outputs.py OUT_DIR [--fixtures DIR]
    diff -r OUT_A OUT_B        # after running it on two checkouts

The guard of a refactor (issue 22): the outputs of two commits must be byte-identical,
unless a difference is a bug fix named in the CHANGELOG. Each case writes
``<case>.out`` (stdout), ``<case>.err`` (stderr) and ``<case>.rc`` (exit status).
Completion text is never involved: the response figures come from
``scripts/eval_rubric.py --json``, which prints counts and ids only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cases(fixtures: Path, scratch: Path) -> dict[str, list[str]]:
    """The named command lines (after ``probewise``) to run."""
    found: dict[str, list[str]] = {}
    for trace in sorted((fixtures / "traces").glob("*.json*")):
        found[f"kernels-{trace.name}"] = ["kernels", str(trace), "--json", "--salvage"]
    for table in sorted((fixtures / "profiler_tables").glob("*.txt")):
        found[f"kernels-{table.name}"] = ["kernels", str(table), "--json"]
    for name in ("llama3-8b", "mistral-7b", "qwen2.5-7b", "qwen3-8b", "gemma3-27b", "gemma4"):
        found[f"masks-{name}"] = ["masks", name, "--seq", "256", "--json"]
        found[f"masks-{name}-packed"] = ["masks", name, "--seq", "256", "--packed", "--json"]
    found["preflight-default"] = ["preflight", "--json"]
    found["preflight-packed"] = ["preflight", "--seq", "4096", "--packed", "--json"]
    lengths = scratch / "lengths.txt"
    lengths.write_text("".join(f"{(i * 7919) % 3000 + 17}\n" for i in range(2000)))
    found["lengths"] = [
        "lengths",
        str(lengths),
        "--batch-size",
        "16",
        "--sweep",
        "64,256,1024",
        "--vocab",
        "128256",
        "--budget",
        "8GiB",
        "--json",
    ]
    found["buckets"] = ["buckets", str(lengths), "--batch-size", "16", "--json"]
    found["fit"] = ["fit", "2048:0.236", "4096:0.584", "8192:1.665", "16384:5.715", "--json"]
    found["demo"] = ["demo", "--no-model", "--json"]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--fixtures", type=Path, default=ROOT.parent / "shared" / "fixtures")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    runs = {
        name: [sys.executable, "-m", "probewise.cli", *argv]
        for name, argv in cases(args.fixtures, out).items()
    }
    eval_script = ROOT / "scripts" / "eval_rubric.py"
    runs["eval_rubric"] = [sys.executable, str(eval_script), "--json"]
    for name, argv in runs.items():
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        (out / f"{name}.out").write_text(done.stdout)
        (out / f"{name}.err").write_text(done.stderr)
        (out / f"{name}.rc").write_text(f"{done.returncode}\n")
        print(f"{name}: exit {done.returncode}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
