"""Benchmark a whole bucket-size sweep against HF's length grouping, side by side.

Usage::

    python benchmarks/buckets.py [--n 10000000] [--batch-size 16] [--sources 8]
        [--sizes 16,32,64,128,256,512,1024,4096] [--json OUT]

For each of two length distributions (a log-normal, ``exp(N(6, 1))``, mean about
660 tokens; and a bimodal mix, 70 % around 200 and 30 % around 3000 tokens, both
log-normal with sigma 0.3; every length clipped to 1 .. 32,768), each contender
runs in a fresh subprocess so its peak memory is its own:

``probewise``
    ``sweep_buckets(lengths, batch_size=B, bucket_sizes=SIZES, sources=codes)``:
    the random baseline, HF-style megabatch grouping and one row per bucket size,
    each row with every metric (waste, gain, short batches, consecutive-batch
    length correlation, real tokens per step, and the source figures over
    ``--sources`` sources drawn uniformly). ``per row`` is the sweep's time over its
    rows (``len(SIZES) + 2``), the no-op guard included.
``HF get_length_grouped_indices``
    ``transformers.trainer_pt_utils.get_length_grouped_indices(lengths_list, B)``,
    one call, as the HF trainer makes it once per epoch. It computes no metric; the
    list conversion is outside the timing (the trainer holds a list already).

``seconds`` is ``time.perf_counter`` around the work inside the child, after its
imports and the draw of the lengths; ``peak RSS MiB`` is the child's ``ru_maxrss``.
The target: a row in at most the time of one HF call (ratio ``per row / HF`` <= 1),
and the sweep's child under 2 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

DISTRIBUTIONS = ("lognormal", "bimodal")


def draw(name: str, n: int, seed: int = 0) -> object:
    import numpy as np

    rng = np.random.default_rng(seed)
    if name == "lognormal":
        raw = rng.lognormal(6.0, 1.0, n)
    else:
        short = rng.random(n) < 0.7
        raw = np.where(
            short, rng.lognormal(np.log(200), 0.3, n), rng.lognormal(np.log(3000), 0.3, n)
        )
    return np.clip(raw.astype(np.int64), 1, 32_768)


def child(
    kind: str, dist: str, *, n: int, batch_size: int, sizes: list[int], n_sources: int
) -> None:
    import numpy as np

    lengths = draw(dist, n)
    assert isinstance(lengths, np.ndarray)
    result: dict[str, object]
    if kind == "probewise":
        from probewise import sweep_buckets

        codes = np.random.default_rng(1).integers(0, n_sources, n)
        start = time.perf_counter()
        sweep = sweep_buckets(lengths, batch_size=batch_size, bucket_sizes=sizes, sources=codes)
        seconds = time.perf_counter() - start
        rows = len(sweep.rows) + 2
        result = {
            "seconds": seconds,
            "rows": rows,
            "per_row": seconds / rows,
            "random_waste": sweep.random.waste_share,
            "megabatch_waste": sweep.megabatch.waste_share,
            "row_waste": {str(r.bucket_size): r.waste_share for r in sweep.rows},
        }
    else:
        import torch
        from transformers.trainer_pt_utils import get_length_grouped_indices

        as_list = lengths.tolist()
        generator = torch.Generator().manual_seed(0)
        start = time.perf_counter()
        indices = get_length_grouped_indices(as_list, batch_size, generator=generator)
        seconds = time.perf_counter() - start
        assert len(indices) == n
        result = {"seconds": seconds}
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run_child(args: argparse.Namespace, kind: str, dist: str) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--dist",
        dist,
        "--n",
        str(args.n),
        "--batch-size",
        str(args.batch_size),
        "--sizes",
        args.sizes,
        "--sources",
        str(args.sources),
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    parsed: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return parsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sizes", default="16,32,64,128,256,512,1024,4096")
    parser.add_argument("--sources", type=int, default=8)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--child", choices=("probewise", "hf"))
    parser.add_argument("--dist", choices=DISTRIBUTIONS, default="lognormal")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        child(
            args.child,
            args.dist,
            n=args.n,
            batch_size=args.batch_size,
            sizes=sizes,
            n_sources=args.sources,
        )
        return
    report: dict[str, object] = {"n": args.n, "batch_size": args.batch_size, "sizes": sizes}
    print(
        f"{args.n:,} lengths, batch size {args.batch_size}, {len(sizes)} bucket sizes, {args.sources} sources"
    )
    print(
        f"{'distribution':<12} {'contender':<32} {'seconds':>8} {'per row':>8} {'row/HF':>7} {'peak RSS MiB':>13}"
    )
    for dist in DISTRIBUTIONS:
        ours = run_child(args, "probewise", dist)
        hf = run_child(args, "hf", dist)
        ratio = ours["per_row"] / hf["seconds"]
        print(
            f"{dist:<12} {'probewise sweep_buckets':<32} {ours['seconds']:>8.2f} "
            f"{ours['per_row']:>8.2f} {ratio:>7.2f} {ours['peak_rss_mib']:>13.0f}"
        )
        print(
            f"{dist:<12} {'HF get_length_grouped_indices':<32} {hf['seconds']:>8.2f} "
            f"{'':>8} {'':>7} {hf['peak_rss_mib']:>13.0f}"
        )
        report[dist] = {"probewise": ours, "hf": hf, "row_over_hf": ratio}
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
