"""Read many rank traces here and on a local Dask cluster; check the tables are equal.

Usage::

    python benchmarks/many_ranks.py --ranks 1000 --missing 3 --events 500 --out /tmp/ranks

Writes ``--ranks`` small Kineto-style traces (``distributedInfo`` rank ``r`` of world
size ``--ranks``, ``--events`` kernel events each over a handful of kernel names,
plus one memcpy per ten kernels), leaving out the last ``--missing`` ranks, into
``--out``. Then reads the directory three ways, each timed once:

* ``read_chrome_traces(out)``: the local read, one process;
* on a ``distributed.LocalCluster`` of ``--workers`` worker processes (one thread
  each) started by this script, through ``Client.get_executor()``; the cluster's
  start is timed apart;

and checks that the cluster's result equals the local one (``==``) and that the
missing ranks are the ones left out. Prints one JSON document: the figures, the peak
RSS of this process and of each worker (``ru_maxrss``), and the merged totals.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from distributed import Client, LocalCluster

from probewise.throughput.trace_sets import read_chrome_traces

KERNELS = (
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "flash_fwd_kernel",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "void at::native::reduce_kernel<512, 1>",
)


def write_ranks(out: Path, ranks: int, missing: int, events: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    size = 0
    for rank in range(ranks - missing):
        items: list[dict[str, object]] = []
        ts = 1_000_000.0
        for i in range(events):
            name = KERNELS[(i + rank) % len(KERNELS)]
            dur = 3.0 + (i * 7 + rank) % 40
            items.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": ts,
                    "dur": dur,
                    "args": {"correlation": i + 1},
                }
            )
            if i % 10 == 0:
                items.append(
                    {
                        "ph": "X",
                        "cat": "gpu_memcpy",
                        "name": "Memcpy HtoD (Pageable -> Device)",
                        "pid": 0,
                        "tid": 8,
                        "ts": ts,
                        "dur": 2.0,
                    }
                )
            ts += dur + 1.0
        path = out / f"rank-{rank:04d}.json"
        path.write_text(
            json.dumps(
                {
                    "distributedInfo": {"rank": rank, "world_size": ranks},
                    "traceEvents": items,
                }
            )
        )
        size += path.stat().st_size
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=1000)
    parser.add_argument("--missing", type=int, default=3)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    size = write_ranks(args.out, args.ranks, args.missing, args.events)

    start = time.perf_counter()
    local = read_chrome_traces(args.out, workers=1)
    local_s = time.perf_counter() - start

    start = time.perf_counter()
    cluster = LocalCluster(
        n_workers=args.workers,
        processes=True,
        threads_per_worker=1,
        dashboard_address=None,
        host="127.0.0.1",
    )
    client = Client(cluster)
    startup_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        remote = read_chrome_traces(args.out, executor=client.get_executor())
        cluster_s = time.perf_counter() - start
        worker_rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    finally:
        client.close()
        cluster.close()

    expected_missing = tuple(range(args.ranks - args.missing, args.ranks))
    print(
        json.dumps(
            {
                "files": len(local.per_rank),
                "bytes": size,
                "equal": remote == local,
                "missing_ranks_as_left_out": remote.missing_ranks == expected_missing,
                "local_s": round(local_s, 2),
                "cluster_start_s": round(startup_s, 2),
                "cluster_read_s": round(cluster_s, 2),
                "client_peak_rss_mib": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
                ),
                "worker_peak_rss_mib": sorted(round(v / 1024, 1) for v in worker_rss.values()),
                "kernel_us": remote.merged.kernel_us,
                "memcpy_us": remote.merged.memcpy_us,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
