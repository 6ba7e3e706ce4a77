"""Peak memory of one trace read: ``read_chrome_trace(TRACE, workers=W)`` in this process.

Usage::

    /usr/bin/time -v python benchmarks/trace_peak_rss.py /tmp/rss-big/rank0.json 1

Run it as a fresh process per read (the peak is the process's whole life). It prints
the wall and CPU seconds of the read, the peak RSS of this process and of its largest
waited-for child (the worker processes), the kernel total, the step count and the
first 16 hex digits of ``sha256(repr(table))``, so that two reads (two branches: put
``PYTHONPATH`` at an exported copy of the other's ``src``) can be compared exactly.
"""

from __future__ import annotations

import hashlib
import resource
import sys
import time

from probewise.throughput.trace_sets import read_chrome_trace


def main() -> None:
    path, workers = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    wall, cpu = time.perf_counter(), time.process_time()
    table = read_chrome_trace(path, workers=workers)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    digest = hashlib.sha256(repr(table).encode()).hexdigest()[:16]
    print(
        f"wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {mine:.1f} MiB "
        f"(largest child {children:.1f} MiB), kernel {table.kernel_us} us, "
        f"{len(table.steps)} steps, table sha256 {digest}"
    )


if __name__ == "__main__":
    main()
