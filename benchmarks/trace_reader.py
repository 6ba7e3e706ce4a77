"""The Chrome trace reader against its floors, side by side in one run.

Usage::

    python benchmarks/make_big_trace.py --source ../shared/fixtures/traces/nccl_data.json.gz \\
        --target-mb 400 --out /tmp/big/rank0.json
    gzip -k /tmp/big/rank0.json
    python benchmarks/trace_reader.py /tmp/big/rank0.json --repeat 5

Every contender runs in a fresh child process (so each one's peak RSS is its own, read
from ``wait4``), and the rounds are interleaved: round 1 runs every contender once,
then round 2, and so on, so that a machine whose load changes during the run treats
them alike. The time is the wall time of the work inside the child (the interpreter's
start-up is left out). Reported: best and median of the rounds, and each median as a
ratio of the typed msgspec decode's (plain) or of the reader's plain-file time (gzip).

Plain contenders (on ``TRACE``):

``read``          the raw read floor: ``readinto`` a 4 MiB buffer until EOF
``json``          ``json.load`` of the whole file (``--no-json`` leaves it out: it needs
                  about 8x the file size in memory)
``msgspec``       a typed ``msgspec.json.decode`` of the whole file into a Struct with the
                  fields the reader uses (``ph``, ``cat``, ``name``, ``ts``, ``dur``,
                  ``args``; ``name`` and ``args`` as ``msgspec.Raw``, as the reader has them)
``probewise``     ``read_chrome_trace(TRACE, workers=1)`` (with the compiled scanner
                  where the install built it)
``probewise-pure``  the same with ``PROBEWISE_PURE_PYTHON=1`` (no compiled scanner: the
                  fast path, and the exact path where it declines)
``probewise-exact``  the same with the fast path declining every run too (the exact path
                  alone, as the reader was before the fast path)
``probewise-2w``  ``read_chrome_trace(TRACE, workers=2)``

gzip contenders (on ``TRACE.gz`` when it exists, or ``--gz PATH``):

``zcat``          ``zcat TRACE.gz > /dev/null``
``inflate``       a Python ``zlib`` inflate of the whole stream in 1 MiB reads, output dropped
``inflate-isal``  the same with ``isal.isal_zlib`` (only when python-isal is installed)
``probewise-gz``  ``read_chrome_trace(TRACE.gz, workers=1)`` (python-isal or zlib-ng when
                  installed)
``probewise-gz-zlib``  the same with the standard library's zlib, whatever is installed
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
from typing import Any

import msgspec

PLAIN = (
    "read",
    "json",
    "msgspec",
    "probewise",
    "probewise-pure",
    "probewise-exact",
    "probewise-2w",
)
GZIP = ("zcat", "inflate", "inflate-isal", "probewise-gz", "probewise-gz-zlib")


class _Event(msgspec.Struct):
    """The fields the reader uses, typed as the reader types them."""

    ph: str | None = None
    cat: str | None = None
    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _Doc(msgspec.Struct):
    traceEvents: list[_Event]


def _work(kind: str, path: str) -> dict[str, Any]:
    if kind == "read":
        buf = bytearray(4 << 20)
        total = 0
        with open(path, "rb", buffering=0) as handle:
            while n := handle.readinto(buf):
                total += n
        return {"bytes": total}
    if kind == "json":
        with open(path, "rb") as handle:
            doc = json.load(handle)
        return {"events": len(doc["traceEvents"])}
    if kind == "msgspec":
        with open(path, "rb") as handle:
            data = handle.read()
        doc = msgspec.json.decode(data, type=_Doc)
        return {"events": len(doc.traceEvents)}
    if kind.startswith("probewise"):
        import functools
        import zlib

        if kind in ("probewise-pure", "probewise-exact"):
            os.environ["PROBEWISE_PURE_PYTHON"] = "1"  # read when the reader is imported
        from probewise.throughput.readers import _source as source
        from probewise.throughput.trace_sets import read_chrome_trace

        if kind == "probewise-exact":
            from probewise.throughput.readers import _fastpath

            _fastpath.FastPath.add = lambda self, totals, doc: False  # type: ignore[method-assign]  # pyright: ignore[reportPrivateUsage]
        if kind == "probewise-gz-zlib":
            source._fast_inflate = lambda: (  # pyright: ignore[reportPrivateUsage]
                functools.partial(zlib.decompressobj, wbits=31),
                (zlib.error,),
            )

        table = read_chrome_trace(path, workers=2 if kind == "probewise-2w" else 1)
        return {"events": table.sources[0].events, "device_us": table.device_us}
    if kind == "zcat":
        with open(os.devnull, "wb") as sink:
            subprocess.run(["zcat", path], stdout=sink, check=True)
        return {}
    if kind in ("inflate", "inflate-isal"):
        if kind == "inflate":
            import zlib as z
        else:
            from isal import isal_zlib as z  # type: ignore[import-not-found, no-redef]
        total = 0
        inflate = z.decompressobj(wbits=31)
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                total += len(inflate.decompress(chunk))
        return {"bytes": total}
    raise SystemExit(f"unknown contender {kind}")


def _cpu() -> float:
    """CPU seconds of this process and of its waited-for children (workers, zcat)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def child_main(kind: str, path: str) -> int:
    started, cpu = time.perf_counter(), _cpu()
    result = _work(kind, path)
    result["seconds"] = time.perf_counter() - started
    result["cpu_seconds"] = _cpu() - cpu
    print(json.dumps(result))
    return 0


def run_child(kind: str, path: str) -> dict[str, Any]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, path], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{kind} failed (status {status})")
    result: dict[str, Any] = json.loads(out)
    result["peak_mib"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def _available(kind: str) -> bool:
    if kind == "inflate-isal":
        try:
            import isal  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", type=Path, help="plain Chrome trace (JSON)")
    parser.add_argument("--gz", type=Path, help="its gzip copy (default TRACE.gz if it exists)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (best and median shown)")
    parser.add_argument("--only", nargs="+", choices=PLAIN + GZIP, help="run just these")
    parser.add_argument("--no-json", action="store_true", help="leave json.load out")
    parser.add_argument("--json", dest="json_out", type=Path, help="write every run here")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(*args.child)
    if args.trace is None:
        parser.error("give a trace")
    gz = args.gz or Path(str(args.trace) + ".gz")
    kinds = [k for k in args.only or PLAIN + GZIP if _available(k)]
    if args.no_json and "json" in kinds:
        kinds.remove("json")
    if not gz.exists():
        kinds = [k for k in kinds if k not in GZIP]
    target = {k: str(gz if k in GZIP else args.trace) for k in kinds}
    for path in set(target.values()):  # warm the page cache
        _work("read", path)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for round_ in range(args.repeat):
        for kind in kinds:
            runs[kind].append(run_child(kind, target[kind]))
            print(
                f"round {round_ + 1}: {kind:<13} {runs[kind][-1]['seconds']:7.3f} s",
                file=sys.stderr,
            )
    size = args.trace.stat().st_size / (1 << 20)
    median = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    cpu = {k: statistics.median(r.get("cpu_seconds", 0.0) for r in v) for k, v in runs.items()}
    print(
        f"{args.trace}: {size:.1f} MiB plain, {args.repeat} interleaved rounds, python {sys.version.split()[0]}"
    )
    print(
        f"{'contender':<14}{'best s':>8}{'median s':>10}{'MiB/s (med)':>12}"
        f"{'CPU s (med)':>12}{'peak MiB':>10}{'ratio':>8}{'CPU ratio':>10}"
    )
    for kind, items in runs.items():
        seconds = [r["seconds"] for r in items]
        base = median.get("probewise" if kind in GZIP else "msgspec")
        base_cpu = cpu.get("probewise" if kind in GZIP else "msgspec")
        ratio = f"{median[kind] / base:.2f}" if base else "-"
        cpu_ratio = f"{cpu[kind] / base_cpu:.2f}" if base_cpu else "-"
        print(
            f"{kind:<14}{min(seconds):>8.3f}{median[kind]:>10.3f}{size / median[kind]:>12.0f}"
            f"{cpu[kind]:>12.3f}{max(r['peak_mib'] for r in items):>10.0f}{ratio:>8}"
            f"{cpu_ratio:>10}"
        )
    print(
        "ratio: median wall (CPU) time / that of msgspec (plain rows) or of probewise on the"
        " plain file (gzip rows); CPU includes worker processes and background threads"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
