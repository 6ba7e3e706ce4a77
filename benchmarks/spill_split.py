"""The trace reader's spilled join with every partition split again, against the plain read.

Usage::

    python benchmarks/spill_split.py /tmp/big/rank0.json plain
    python benchmarks/spill_split.py /tmp/big/rank0.json split

``split`` sets a 1 MiB spill threshold and 8 KiB partitions, so the columns spill and
every partition is split again by the next byte of its hash before the join (what a
trace of hundreds of GB would need). Prints the wall time, the peak RSS, how many
partitions were split and a hash of the table's repr, which must be the plain read's.
"""

from __future__ import annotations

import hashlib
import resource
import sys
import time
from typing import Any

from probewise.throughput.readers import _spill
from probewise.throughput.trace_sets import read_chrome_trace


def main() -> None:
    path, mode = sys.argv[1], sys.argv[2]
    splits = [0]
    if mode == "split":
        _spill.SPILL_BYTES = 1 << 20  # type: ignore[misc]
        _spill.PARTITION_BYTES = 8 << 10  # type: ignore[misc]
        inner = _spill.Store._split  # pyright: ignore[reportPrivateUsage]

        def counting(self: _spill.Store, *args: Any) -> Any:
            splits[0] += 1
            return inner(self, *args)

        _spill.Store._split = counting  # type: ignore[method-assign]
    started = time.perf_counter()
    table = read_chrome_trace(path, workers=1)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    digest = hashlib.sha256(repr(table).encode()).hexdigest()[:16]
    print(f"{mode}: {seconds:.2f} s, peak {peak} MiB, {splits[0]} partitions split, {digest}")


if __name__ == "__main__":
    main()
