"""How probewise's kernel total compares with HolisticTraceAnalysis (HTA), and how to make them agree.

    python benchmarks/hta_parity.py TRACE... --hta-python /tmp/hta-venv/bin/python

For each trace, prints the sum of kernel ``dur`` HTA keeps after ``TraceAnalysis``
loads the trace (the per-name sums of ``get_gpu_kernel_breakdown`` with memory
kernels left out, which add up to the same), under HTA's defaults and under
``include_last_profiler_step=True`` with ``HTA_DISABLE_NS_ROUNDING=1``, next to
``KernelTable.from_chrome_trace(trace).kernel_us``. HTA needs pandas and friends,
which this project does not: give the interpreter of a virtualenv that has it
(``pip install HolisticTraceAnalysis==0.5.0``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from probewise.throughput.kernels import KernelTable

_CHILD = """
import logging, os, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
path, include = sys.argv[1], sys.argv[2] == "1"
ta = TraceAnalysis(trace_files={0: os.path.basename(path)}, trace_dir=os.path.dirname(path),
                   include_last_profiler_step=include)
_, per_name = ta.get_gpu_kernel_breakdown(
    visualize=False, include_memory_kernels=False, num_kernels=2**30, duration_ratio=1.0
)
print(repr(float(per_name.iloc[:, 1].sum())))
"""


def hta_total(python: str, trace: Path, *, parity: bool) -> float:
    env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="1" if parity else "0")
    done = subprocess.run(
        [python, "-c", _CHILD, str(trace.resolve()), "1" if parity else "0"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--hta-python", required=True)
    args = parser.parse_args()
    print(
        "| trace | steps | HTA defaults (µs) | HTA, last step kept, no rounding (µs) "
        "| probewise `kernel_us` | probewise / HTA defaults |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for trace in args.traces:
        table = KernelTable.from_chrome_trace(trace)
        default = hta_total(args.hta_python, trace, parity=False)
        parity = hta_total(args.hta_python, trace, parity=True)
        ratio = table.kernel_us / default if default else float("nan")
        print(
            f"| {trace.name} | {len(table.steps)} | {default:,.3f} | {parity:,.3f} "
            f"| {table.kernel_us:,.3f} | {ratio:.3f} |"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
