"""The mask probe on a 62-layer config (Gemma 3 27B's shape), batch 2, over a sweep of lengths.

Targets: 8,192 x 2 under 5 s and 1.5 GB (issue 6); 131,072 x 2 under 10 s and 2 GiB
(issue 20), on a 2-core CPU machine, whatever the real model's size. Every run is a
fresh process, so its peak RSS is the probe's own (importing torch and transformers
included) and its call pays for importing the model's transformers module; each
length runs ``--runs`` times, interleaved with the others, and is reported as
best / median / worst.

The probe reads each mask as row intervals from the mask function transformers
composed, so its cost grows linearly with the length (O(batch x length) per distinct
mask, and a few distinct masks per forward) and linearly with the number of layers
(each layer's forward runs on the meta device); the bytes it reports are those
transformers would allocate, which grow with the square of the length. With
``--dense-up-to L`` the dense reading (transformers builds every mask, the probe
scans it: the ground truth, and the probe before issue 20) runs too, at lengths up to
L, side by side. ``--attn-implementation NAME`` (repeatable) probes under other
attention implementations too (eager, flex_attention, flash_attention_2, ...); the
131,072-token target is SDPA's.

    .venv/bin/python benchmarks/mask_probe.py [--config gemma3-27b] \\
        [--seq 8192 --seq 32768 --seq 131072] [--batch 2] [--runs 3] [--dense-up-to 8192] \\
        [--attn-implementation sdpa --attn-implementation eager ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch, transformers
from probewise.throughput.attention.masks import MaskScenario, _probe
t1 = time.perf_counter()
config, seq, batch, padding, dense = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "dense"
implementation = sys.argv[6]
start = time.perf_counter()
scenario = MaskScenario(seq_len=seq, batch=batch, padding=padding, attn_implementation=implementation)
report = _probe(config, scenario, dtype="bfloat16", dense_masks=dense)
call = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"import_s": t1 - t0, "call_s": call, "peak_rss_bytes": peak,
                  "layers": len(report.layers), "mask_bytes": report.mask_bytes,
                  "largest_mask": max(layer.mask_bytes for layer in report.layers),
                  "masked_layers": sum(1 for layer in report.layers if layer.mask_bytes),
                  "torch": torch.__version__, "transformers": transformers.__version__}))
"""

_GIB = 1 << 30


def _run(
    config: str, seq: int, batch: int, padding: str, dense: bool, *, implementation: str
) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            config,
            str(seq),
            str(batch),
            padding,
            "dense" if dense else "structured",
            implementation,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"failed": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float], fmt: str) -> str:
    return (
        f"{format(min(values), fmt)} / {format(statistics.median(values), fmt)} / "
        f"{format(max(values), fmt)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gemma3-27b")
    parser.add_argument(
        "--seq", type=int, action="append", help="a length (repeatable; 8192, 32768, 131072)"
    )
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--padding", default="none", choices=["none", "right", "left"])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per length (3)")
    parser.add_argument(
        "--dense-up-to",
        type=int,
        default=0,
        metavar="L",
        help="also run the dense reading at lengths <= L (0: never)",
    )
    parser.add_argument(
        "--attn-implementation",
        action="append",
        metavar="NAME",
        help="an attention implementation to probe under (repeatable; sdpa)",
    )
    args = parser.parse_args()
    lengths: list[int] = args.seq or [8192, 32768, 131072]
    implementations: list[str] = args.attn_implementation or ["sdpa"]
    modes = [(seq, False, name) for name in implementations for seq in lengths] + [
        (seq, True, name) for name in implementations for seq in lengths if seq <= args.dense_up_to
    ]
    results: dict[tuple[int, bool, str], list[dict[str, object]]] = {mode: [] for mode in modes}
    for _ in range(args.runs):  # interleaved, so drift in the machine's load hits all alike
        for seq, dense, name in modes:
            results[seq, dense, name].append(
                _run(args.config, seq, args.batch, args.padding, dense, implementation=name)
            )
    print(
        f"{args.config}, batch {args.batch}, padding {args.padding}, bf16, {args.runs} fresh "
        "processes per row; best / median / worst"
    )
    ok = True
    for (seq, dense, implementation), runs in results.items():
        good = [r for r in runs if "failed" not in r]
        name = f"{implementation:>17} {seq:>7,} {'dense' if dense else 'structured':>10}"
        if len(good) < len(runs):
            print(f"  {name}: {len(runs) - len(good)} of {len(runs)} runs failed: {runs[0]}")
            ok = ok and dense
            continue
        first = good[0]
        calls = [float(str(r["call_s"])) for r in good]
        totals = [float(str(r["import_s"])) + float(str(r["call_s"])) for r in good]
        peaks = [float(str(r["peak_rss_bytes"])) / _GIB for r in good]
        print(
            f"  {name}: probe {_spread(calls, '.2f')} s, import + probe {_spread(totals, '.2f')} s, "
            f"peak RSS {_spread(peaks, '.2f')} GiB; {first['layers']} layers, "
            f"{first['masked_layers']} with a mask, largest "
            f"{float(str(first['largest_mask'])) / _GIB:,.2f} GiB, all distinct masks "
            f"{float(str(first['mask_bytes'])) / _GIB:,.2f} GiB"
        )
        if seq == 131_072 and not dense and implementation == "sdpa":
            met = max(totals) < 10 and max(peaks) < 2
            ok = ok and met
            print(
                f"    131,072 target (< 10 s and < 2 GiB, worst run): {'met' if met else 'NOT met'}"
            )
    first_ok = next((r for runs in results.values() for r in runs if "torch" in r), None)
    if first_ok is not None:
        print(f"torch {first_ok['torch']}, transformers {first_ok['transformers']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
