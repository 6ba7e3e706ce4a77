"""Benchmark reading total GPU kernel time from one large Chrome trace, side by side.

Usage::

    python benchmarks/make_big_trace.py --source ../shared/fixtures/traces/nccl_data.json.gz \\
        --target-mb 500 --out /tmp/big/rank0.json
    python benchmarks/kernel_table.py /tmp/big/rank0.json [--hta-python /tmp/hta-venv/bin/python] \\
        [--repeat 1] [--json OUT] [--only NAME ...]

Contenders, each in a fresh subprocess so that its memory is its own:

``json.load + sum``
    ``json.load`` of the whole file, then ``sum`` of ``dur`` over the events whose
    ``cat`` is ``kernel`` (and ``gpu_memcpy``, ``gpu_memset``): the baseline.
``probewise``
    ``KernelTable.from_chrome_trace(path).kernel_us`` (run with this interpreter,
    which must be able to import probewise).
``HTA``
    HolisticTraceAnalysis, only with ``--hta-python PATH`` (an interpreter of its own
    virtualenv; HTA needs pandas and friends, which this project does not).
    ``TraceAnalysis(trace_dir=D, include_last_profiler_step=True)`` on a temporary
    directory ``D`` holding only a symlink to the trace, then
    ``get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
    num_kernels=2**30, duration_ratio=1.0)``; its kernel total is the sum of
    ``sum (us)`` over the COMPUTATION and COMMUNICATION rows (MEMORY rows give
    memcpy + memset). ``include_last_profiler_step=True`` because by default HTA drops
    every kernel launched at or after the start of the last ``ProfilerStep``; the
    other two arguments stop it folding small kernels into "others" (harmless for the
    total, but it is what a reader of the table wants). HTA rounds every event to whole
    microseconds (``ceil(ts)`` .. ``floor(ts + dur)``), so its total is expected to
    differ from the exact one; ``make_big_trace.py`` also computes that rounded total,
    and the report says whether HTA matches it.

What is measured, per contender:

``seconds``
    ``time.perf_counter`` around the work inside the child, after its imports: the
    number the ratios use. Ratios are to ``json.load + sum`` in the same invocation.
``wall s``
    the child's whole life as the parent sees it: interpreter start, imports, the
    work, freeing and exit.
``peak RSS MB``
    (MiB) the larger of the child's own ``ru_maxrss`` (``getrusage(RUSAGE_SELF)`` at
    the end of the work) and the peak of the summed RSS of the child and all its
    descendants, sampled by the parent every 20 ms. The sum matters for readers that
    fan out to worker processes (probewise does for large plain files; HTA forks a
    parsing pool), whose memory ``RUSAGE_SELF`` does not see and ``RUSAGE_CHILDREN``
    only reports as the largest single child. The sampled sum may miss a spike
    shorter than the interval and counts pages shared after a ``fork`` twice.
``import MB`` / ``peak-import MB``
    the child's ``ru_maxrss`` right after its imports (before it opens the trace),
    and the peak minus that: the memory the reading itself needs. The targets use
    the raw peak, which is what a user's process needs.

Totals are checked against ``TRACE.expected.json`` (written by
``make_big_trace.py``; ``--expected`` names another) with a relative tolerance of
``1e-9``; without one they are checked against the ``json.load + sum`` contender.

Before the first run the parent reads the whole file once, so that every contender
finds it in the page cache. ``--repeat N`` runs the contenders round-robin N times and
reports the best seconds and the largest peak of each.

The targets printed under the table are probewise at most 0.25x the seconds of
``json.load + sum`` and at most 200 MB peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RESULT_MARK = "@@kernels-benchmark-result@@ "
JSON_NAME = "json.load + sum"
OURS = "probewise"
HTA = "HTA"
CONTENDERS = (JSON_NAME, OURS, HTA)
CHILD_KEYS = {JSON_NAME: "json", OURS: "probewise", HTA: "hta"}
TOLERANCE = 1e-9
TARGET_RATIO = 0.25
TARGET_RSS_MB = 200.0
SAMPLE_SECONDS = 0.02


# ---------------------------------------------------------------- child side


def _maxrss_mb(who: int) -> float:
    value = resource.getrusage(who).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return value / (1 << 20) if sys.platform == "darwin" else value / 1024


def _child_json(path: str) -> dict[str, Any]:
    import_mb = _maxrss_mb(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with open(path, "rb") as fh:
        doc = json.load(fh)
    kernel = memcpy = memset = 0.0
    for event in doc["traceEvents"]:
        cat = event.get("cat")
        if cat == "kernel":
            kernel += event["dur"]
        elif cat == "gpu_memcpy":
            memcpy += event["dur"]
        elif cat == "gpu_memset":
            memset += event["dur"]
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "import_mb": import_mb,
        "kernel_us": kernel,
        "memcpy_us": memcpy,
        "memset_us": memset,
        "versions": {},
    }


def _child_probewise(path: str) -> dict[str, Any]:
    from importlib import metadata

    from probewise.throughput.kernels import KernelTable

    import_mb = _maxrss_mb(resource.RUSAGE_SELF)
    start = time.perf_counter()
    table = KernelTable.from_chrome_trace(path)
    kernel = table.kernel_us
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "import_mb": import_mb,
        "kernel_us": kernel,
        "memcpy_us": table.memcpy_us,
        "memset_us": table.memset_us,
        "versions": {"probewise": metadata.version("probewise")},
    }


def _child_hta(trace_dir: str) -> dict[str, Any]:
    from importlib import metadata

    from hta.trace_analysis import TraceAnalysis

    import_mb = _maxrss_mb(resource.RUSAGE_SELF)
    start = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    by_type, by_kernel = analysis.get_gpu_kernel_breakdown(
        visualize=False, include_memory_kernels=True, num_kernels=1 << 30, duration_ratio=1.0
    )
    sums = by_kernel.groupby("kernel_type")["sum (us)"].sum()
    kernel = float(sums.get("COMPUTATION", 0.0)) + float(sums.get("COMMUNICATION", 0.0))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "import_mb": import_mb,
        "kernel_us": kernel,
        "memory_us": float(sums.get("MEMORY", 0.0)),
        "busy_us_by_type": {
            str(k): float(v) for k, v in zip(by_type["kernel_type"], by_type["sum"], strict=True)
        },
        "versions": {
            name: metadata.version(name) for name in ("HolisticTraceAnalysis", "pandas", "numpy")
        },
    }


def child_main(kind: str, target: str) -> int:
    run = {"json": _child_json, "probewise": _child_probewise, "hta": _child_hta}[kind]
    result = run(target)
    result["self_maxrss_mb"] = _maxrss_mb(resource.RUSAGE_SELF)
    result["children_maxrss_mb"] = _maxrss_mb(resource.RUSAGE_CHILDREN)
    result["python"] = platform.python_version()
    result["executable"] = sys.executable
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------- parent side


class TreeSampler:
    """Peak of the summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_bytes = 0
        self.samples = 0
        self._stop = threading.Event()
        self._psutil: Any = None
        with contextlib.suppress(ImportError):
            import psutil

            self._psutil = psutil
        self.method = "psutil" if self._psutil is not None else "procfs"
        if self._psutil is None and not Path(f"/proc/{pid}/statm").exists():
            self.method = "none"
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeSampler:
        if self.method != "none":
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            total = self._sample()
            if total:
                self.samples += 1
                self.peak_bytes = max(self.peak_bytes, total)
            self._stop.wait(SAMPLE_SECONDS)

    def _sample(self) -> int:
        if self._psutil is not None:
            psutil = self._psutil
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                return 0
            total = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            return int(total)
        total = 0
        pending = [self.pid]
        while pending:
            pid = pending.pop()
            try:
                with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
                    total += int(fh.read().split()[1]) * self._page
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                        pending.extend(int(p) for p in fh.read().split())
            except (OSError, ValueError, IndexError):
                continue
        return total


def run_child(
    name: str, python: str, target: str, *, timeout: float, log_dir: Path, index: int
) -> dict[str, Any]:
    kind = CHILD_KEYS[name]
    cmd = [python, str(Path(__file__).resolve()), "--child", kind, target]
    log = log_dir / f"{kind}-{index}.stderr"
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    with log.open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, cwd=log_dir, env=env, text=True
        )
        with TreeSampler(proc.pid) as sampler:
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                out += "\n(timed out)"
        wall = time.perf_counter() - start
    lines = [ln for ln in out.splitlines() if ln.startswith(RESULT_MARK)]
    if proc.returncode != 0 or not lines:
        tail = log.read_text(errors="replace")[-3000:]
        return {
            "name": name,
            "error": f"exit status {proc.returncode}",
            "stderr_tail": tail,
            "stdout_tail": out[-1000:],
            "wall_s": wall,
            "tree_peak_mb": sampler.peak_bytes / (1 << 20),
        }
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    result["name"] = name
    result["wall_s"] = wall
    result["tree_peak_mb"] = sampler.peak_bytes / (1 << 20)
    result["rss_samples"] = sampler.samples
    result["rss_method"] = sampler.method
    result["peak_mb"] = max(result["self_maxrss_mb"], result["tree_peak_mb"])
    if sampler.method == "none":  # no sampling: an upper bound from getrusage
        result["peak_mb"] = result["self_maxrss_mb"] + result["children_maxrss_mb"]
    return result


def warm_cache(path: Path) -> float:
    start = time.perf_counter()
    with path.open("rb", buffering=0) as fh:
        while fh.read(16 << 20):
            pass
    return time.perf_counter() - start


def rel_diff(found: float, expected: float) -> float:
    if expected == 0:
        return 0.0 if found == 0 else math.inf
    return abs(found - expected) / abs(expected)


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    best = dict(min(ok, key=lambda r: r["seconds"]))
    best["wall_s"] = min(r["wall_s"] for r in ok)
    for key in ("peak_mb", "tree_peak_mb", "self_maxrss_mb", "children_maxrss_mb"):
        best[key] = max(r[key] for r in ok)
    best["import_mb"] = min(r["import_mb"] for r in ok)
    best["runs"] = len(ok)
    best["all_seconds"] = [r["seconds"] for r in ok]
    return best


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return " | ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(OSError, ValueError, IndexError):
        for raw in Path("/proc/meminfo").read_text().splitlines():
            if raw.startswith("MemTotal:"):
                info["mem_total_gib"] = round(int(raw.split()[1]) / (1 << 20), 1)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, nargs="?", help="plain or gzip Chrome trace")
    parser.add_argument("--hta-python", help="interpreter with HolisticTraceAnalysis installed")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (best seconds reported)")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--expected", type=Path, help="totals (default TRACE.expected.json)")
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, help="run just these")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per child, seconds")
    parser.add_argument("--no-warm", action="store_true", help="skip reading the file first")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "TARGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(*args.child)
    if args.trace is None:
        parser.error("TRACE is required")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    trace: Path = args.trace.resolve()
    if not trace.is_file():
        parser.error(f"{trace}: no such file")

    names = [n for n in CONTENDERS if args.only is None or n in args.only]
    if HTA in names and not args.hta_python:
        names.remove(HTA)
        if args.only and HTA in args.only:
            parser.error("HTA needs --hta-python")
    if not names:
        parser.error("nothing to run")

    expected_path = args.expected or trace.with_name(trace.name + ".expected.json")
    expected: dict[str, Any] | None = None
    if expected_path.is_file():
        expected = json.loads(expected_path.read_text(encoding="utf-8"))

    size = trace.stat().st_size
    print(f"trace: {trace} ({size / (1 << 20):,.1f} MiB)")
    if expected is not None:
        print(f"expected totals: {expected_path} (kernel_us {expected['kernel_us']!r})")
    else:
        print("expected totals: none found; checking against json.load + sum")
    if not args.no_warm:
        print(f"page cache warmed in {warm_cache(trace):.1f} s")

    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="kernels-bench-") as tmp:
        tmp_path = Path(tmp)
        hta_dir = tmp_path / "hta-trace"
        hta_dir.mkdir()
        suffix = ".json.gz" if trace.name.endswith(".gz") else ".json"
        (hta_dir / f"rank0{suffix}").symlink_to(trace)
        logs = tmp_path / "logs"
        logs.mkdir()
        for round_index in range(args.repeat):
            for name in names:
                python = args.hta_python if name == HTA else sys.executable
                target = str(hta_dir) if name == HTA else str(trace)
                print(f"[round {round_index + 1}/{args.repeat}] {name} ...", end=" ", flush=True)
                result = run_child(
                    name, python, target, timeout=args.timeout, log_dir=logs, index=round_index
                )
                runs[name].append(result)
                if "error" in result:
                    print(f"FAILED ({result['error']})")
                    print(result["stderr_tail"])
                else:
                    print(f"{result['seconds']:.2f} s, peak {result['peak_mb']:,.0f} MB")

    best = {n: best_of(r) for n, r in runs.items()}
    baseline = best.get(JSON_NAME)
    base_seconds = baseline["seconds"] if baseline and "error" not in baseline else None
    if expected is not None:
        reference = float(expected["kernel_us"])
        reference_src = "expected.json"
    elif base_seconds is not None:
        reference = float(best[JSON_NAME]["kernel_us"])
        reference_src = JSON_NAME
    else:
        reference, reference_src = math.nan, "none"

    rows: list[list[str]] = []
    detail: list[list[str]] = []
    for name in names:
        r = best[name]
        if "error" in r:
            rows.append([name, "failed", "-", "-", "-", "-"])
            continue
        ratio = r["seconds"] / base_seconds if base_seconds else math.nan
        diff = rel_diff(r["kernel_us"], reference)
        r["ratio"] = ratio
        r["rel_diff"] = diff
        r["agrees"] = diff < TOLERANCE
        rows.append(
            [
                name,
                f"{r['seconds']:.2f}",
                f"{ratio:.3f}x",
                f"{r['peak_mb']:,.0f}",
                f"{r['kernel_us']:,.3f}",
                f"{'yes' if r['agrees'] else 'NO'} ({diff:.1e})",
            ]
        )
        detail.append(
            [
                name,
                f"{r['wall_s']:.2f}",
                f"{r['self_maxrss_mb']:,.0f}",
                f"{r['children_maxrss_mb']:,.0f}",
                f"{r['tree_peak_mb']:,.0f}",
                f"{r['import_mb']:,.0f}",
                f"{r['peak_mb'] - r['import_mb']:,.0f}",
                ", ".join(f"{k} {v}" for k, v in r["versions"].items()) or "-",
            ]
        )

    print()
    print(
        format_table(
            [
                "contender",
                "seconds",
                "ratio to json.load",
                "peak RSS MB",
                "kernel total µs",
                "agrees",
            ],
            rows,
        )
    )
    print()
    print(
        format_table(
            [
                "contender",
                "wall s",
                "self maxrss MB",
                "children maxrss MB",
                "tree peak MB",
                "import MB",
                "peak-import MB",
                "versions",
            ],
            detail,
        )
    )
    print()
    print(f"agrees: |kernel total - {reference_src}| / {reference_src} < {TOLERANCE:g}")
    if expected is not None:
        for name in names:
            r = best[name]
            if "error" in r or name == HTA:
                continue
            for key in ("memcpy_us", "memset_us"):
                d = rel_diff(r[key], float(expected[key]))
                if d >= TOLERANCE:
                    print(f"  {name}: {key} {r[key]!r} vs expected {expected[key]!r} (rel {d:.1e})")
        hta = best.get(HTA)
        rounded = expected.get("hta_rounded")
        if hta is not None and "error" not in hta and rounded:
            d_k = rel_diff(hta["kernel_us"], float(rounded["kernel_us"]))
            memory = float(rounded["memcpy_us"]) + float(rounded["memset_us"])
            d_m = rel_diff(hta["memory_us"], memory)
            print(
                f"  HTA vs its own whole-µs rounding of the expected events: kernel"
                f" {hta['kernel_us']:,.0f} vs {rounded['kernel_us']:,} (rel {d_k:.1e}),"
                f" memory {hta['memory_us']:,.0f} vs {memory:,.0f} (rel {d_m:.1e})"
            )
    ours = best.get(OURS)
    if ours is not None and "error" not in ours:
        print()
        print("targets:")
        ratio = ours.get("ratio", math.nan)
        if not math.isnan(ratio):
            verdict = "met" if ratio <= TARGET_RATIO else f"MISSED by {ratio / TARGET_RATIO:.2f}x"
            print(f"  probewise seconds <= {TARGET_RATIO}x json.load: {ratio:.3f}x -> {verdict}")
        peak = ours["peak_mb"]
        verdict = "met" if peak <= TARGET_RSS_MB else f"MISSED by {peak - TARGET_RSS_MB:,.0f} MB"
        print(f"  probewise peak RSS <= {TARGET_RSS_MB:.0f} MB: {peak:,.0f} MB -> {verdict}")
    info = machine_info()
    print()
    print(
        f"machine: {info['platform']}, {info['cpus']} CPUs, {info.get('mem_total_gib', '?')} GiB;"
        f" python {info['python']} ({sys.executable});"
        f" RSS sampling: {next((r.get('rss_method') for r in best.values() if 'rss_method' in r), '-')}"
    )
    if args.json:
        report = {
            "trace": str(trace),
            "bytes": size,
            "expected": expected,
            "reference": reference_src,
            "machine": info,
            "best": best,
            "runs": runs,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    failed = any("error" in b for b in best.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
