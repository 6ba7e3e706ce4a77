"""Benchmark start-up: probewise's ``--help`` and first imports against a bare argparse help.

Usage::

    python benchmarks/startup.py [--rounds 15] [--baseline OTHER/src] [--json OUT]

Each contender runs in a fresh interpreter (``sys.executable``), the contenders
interleaved round by round (so that a change in the machine's load falls on all of
them alike), after one warm-up round that is not counted (it writes the bytecode
caches). ``seconds`` is the wall time of the whole process, from the parent
(``time.perf_counter`` around ``subprocess.run``); for ``Rubric.default()`` the
table also gives the call's own time, measured inside the child. Figures are the
best and the median of ``--rounds``.

``--baseline OTHER/src`` runs every contender a second time, in the same rounds, with
``PYTHONPATH=OTHER/src``: the probewise of another checkout (e.g. a ``git worktree``
of main, for before and after). The contenders:

``python -c pass``
    the interpreter's own start-up, the floor;
``bare argparse --help``
    a one-option ``argparse`` parser printing its help;
``probewise --help``, ``probewise kernels --help``, ``probewise masks --help``
    ``probewise.cli.main([...])`` as the console script calls it;
``import probewise``
    the package alone;
``Rubric.default()``
    ``from probewise import Rubric; Rubric.default()``: the first default rubric.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CLI = "import sys; from probewise.cli import main; sys.exit(main(sys.argv[1:]))"
BARE = (
    "import argparse; p = argparse.ArgumentParser(prog='bare'); "
    "p.add_argument('--x', help='an option'); p.parse_args(['--help'])"
)
RUBRIC = (
    "import time; from probewise import Rubric; t = time.perf_counter(); Rubric.default(); "
    "print(time.perf_counter() - t)"
)
CONTENDERS: tuple[tuple[str, list[str], bool], ...] = (
    # (name, arguments after the interpreter, runs probewise)
    ("python -c pass", ["-c", "pass"], False),
    ("bare argparse --help", ["-c", BARE], False),
    ("probewise --help", ["-c", CLI, "--help"], True),
    ("probewise kernels --help", ["-c", CLI, "kernels", "--help"], True),
    ("probewise masks --help", ["-c", CLI, "masks", "--help"], True),
    ("import probewise", ["-c", "import probewise"], True),
    ("Rubric.default()", ["-c", RUBRIC], True),
)


def _run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{args!r} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", type=Path, metavar="OTHER/src")
    parser.add_argument("--json", type=Path, metavar="OUT")
    options = parser.parse_args()
    here = dict(os.environ)
    here.pop("PYTHONPATH", None)
    trees: dict[str, dict[str, str]] = {"this tree": here}
    if options.baseline is not None:
        trees["baseline"] = {**here, "PYTHONPATH": str(options.baseline.resolve())}
    for tree, env in trees.items():  # which probewise each tree imports
        _, where = _run(["-c", "import probewise; print(probewise.__file__)"], env)
        print(f"{tree}: {where.strip()}")
    times: dict[tuple[str, str], list[float]] = {}
    calls: dict[str, list[float]] = {}
    for round_number in range(options.rounds + 1):
        for name, args, uses_probewise in CONTENDERS:
            for tree, env in trees.items():
                if tree != "this tree" and not uses_probewise:
                    continue
                seconds, out = _run(args, env)
                if round_number == 0:
                    continue  # warm-up: bytecode caches
                times.setdefault((name, tree), []).append(seconds)
                if name == "Rubric.default()":
                    calls.setdefault(tree, []).append(float(out))
    rows: list[dict[str, object]] = []
    print(f"\n{options.rounds} rounds, seconds (best / median), {sys.executable}")
    print(f"{'contender':<34} {'tree':<10} {'best':>7} {'median':>7}")
    for (name, tree), values in times.items():
        row = {"contender": name, "tree": tree, "best": min(values)}
        row["median"] = statistics.median(values)
        rows.append(row)
        print(f"{name:<34} {tree:<10} {min(values):7.3f} {statistics.median(values):7.3f}")
    for tree, values in calls.items():
        name = "  the Rubric.default() call alone"
        rows.append({"contender": name.strip(), "tree": tree, "best": min(values)})
        rows[-1]["median"] = statistics.median(values)
        print(f"{name:<34} {tree:<10} {min(values):7.3f} {statistics.median(values):7.3f}")
    if options.json is not None:
        options.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
