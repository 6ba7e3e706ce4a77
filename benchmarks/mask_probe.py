"""The mask probe on a 62-layer config (Gemma 3 27B's shape) at 8,192 tokens, batch 2.

Target (issue 6): under 5 s and 1.5 GB on a 2-core CPU machine, whatever the real
model's size. Each measurement runs in a fresh process, so the peak RSS is the
probe's own (it includes importing torch and transformers) and the first call pays
for importing the model's transformers module; ``--repeat`` calls the probe again in
the same process to show the warm cost.

    .venv/bin/python benchmarks/mask_probe.py [--config gemma3-27b] [--seq 8192] [--batch 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch, transformers
from probewise import MaskScenario, probe_masks
t1 = time.perf_counter()
config, seq, batch, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
calls = []
for _ in range(repeat):
    start = time.perf_counter()
    report = probe_masks(config, MaskScenario(seq_len=seq, batch=batch), dtype="bfloat16")
    calls.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"import_s": t1 - t0, "calls_s": calls, "peak_rss_bytes": peak,
                  "layers": len(report.layers), "mask_bytes": report.mask_bytes,
                  "torch": torch.__version__, "transformers": transformers.__version__}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gemma3-27b")
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="probe calls in the process (2)")
    args = parser.parse_args()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            args.config,
            str(args.seq),
            str(args.batch),
            str(args.repeat),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    first, *rest = result["calls_s"]
    print(
        f"{args.config}: {result['layers']} layers, batch {args.batch} x {args.seq} tokens, bf16 "
        f"(torch {result['torch']}, transformers {result['transformers']})"
    )
    print(f"  import torch + transformers + probewise: {result['import_s']:.2f} s")
    print(f"  probe, first call (imports the model module): {first:.2f} s")
    for i, seconds in enumerate(rest, start=2):
        print(f"  probe, call {i}: {seconds:.2f} s")
    print(f"  masks built: {result['mask_bytes'] / (1 << 20):,.0f} MiB")
    print(f"  peak RSS of the process: {result['peak_rss_bytes'] / (1 << 20):,.0f} MiB")
    total = result["import_s"] + first
    ok = total < 5.0 and result["peak_rss_bytes"] < 1.5 * (1 << 30)
    print(
        f"  import + first call {total:.2f} s; target < 5 s and < 1.5 GB: {'met' if ok else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
