"""``probewise kernels``: where the device time went, from saved profiler output.

Each PATH is a Chrome trace (JSON or gzip, detected by content), a directory of
rank traces, or a text file holding a printed ``key_averages().table()``. Several
traces are read as the ranks of one job and merged. ``--dask-scheduler ADDRESS``
reads each trace file as a task on that Dask cluster (the ``[dask]`` extra) and
merges the tables here: the same output as the local read.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from probewise._extras import Extra, requires
from probewise.errors import InvalidInputError, TraceFormatError

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from probewise.throughput.kernels import KernelDiff, KernelTable
    from probewise.throughput.table_readings import ProfilerTableReading
    from probewise.throughput.trace_sets import ChromeTraceSet

HELP = "device kernel time from Chrome traces or printed key_averages() tables"
DESCRIPTION = (
    "Sum device kernel time without double counting: kernels only, memcpy and "
    "memset apart, annotations / syncs / CPU ops excluded and counted. PATH is a "
    "trace (.json or gzip), a directory of rank traces, or a printed table (.txt)."
)
RAW_DESCRIPTION = False

_PROGRESS_MIN_BYTES = 64 << 20  # show a progress bar only for inputs at least this big
_NAME_WIDTH = 72


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace, directory or table")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="rows to show (20)")
    parser.add_argument("--by-kind", action="store_true", help="totals per kernel kind")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument(
        "--salvage",
        action="store_true",
        help="read damaged traces up to the damage and report what was lost",
    )
    parser.add_argument(
        "--diff", metavar="OTHER", help="compare with OTHER (a trace, directory or table)"
    )
    parser.add_argument("--per-rank", action="store_true", help="one summary line per rank")
    parser.add_argument(
        "--allow-mixed-jobs",
        action="store_true",
        help=(
            "sum traces that disagree on world size or repeat a rank (refused by default: "
            "they come from different jobs); the output says which job each file came from"
        ),
    )
    parser.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help=(
            "read each trace file as a task on this Dask cluster (tcp://HOST:PORT; the "
            "paths must be the same files on every worker) and merge here; needs "
            "probewise[dask]"
        ),
    )


def run(args: argparse.Namespace) -> int:
    top = int(args.top)
    if top < 0:
        raise InvalidInputError(f"--top must be >= 0, got {top}")
    paths = [str(p) for p in args.paths]
    salvage = bool(args.salvage)
    mixed = bool(args.allow_mixed_jobs)
    scheduler = None if args.dask_scheduler is None else str(args.dask_scheduler)
    with _executor(scheduler) as executor:
        inputs = _read(paths, salvage=salvage, allow_mixed_jobs=mixed, executor=executor)
        other = (
            None
            if args.diff is None
            else _read([str(args.diff)], salvage=salvage, allow_mixed_jobs=mixed, executor=executor)
        )
    tables = inputs.traces
    table = tables.merged
    diff = None if other is None else table.diff(other.traces.merged)
    readings = (*inputs.readings, *(() if other is None else other.readings))
    clean = all(reading.reconciled for _, reading in readings)
    if args.json:
        document: dict[str, object] = table.to_dict()
        if args.per_rank:
            document["per_rank"] = [t.to_dict() for t in tables.per_rank]
        if diff is not None:
            document["diff"] = diff.to_dict()
        if readings:
            document["printed_tables"] = [_reading_dict(path, r) for path, r in readings]
            document["reconciled"] = clean
        if mixed:
            document["jobs"] = [
                {"job": number, "paths": [source.path for source in job]}
                for number, job in enumerate(table.jobs(), start=1)
            ]
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0 if clean else 1
    _print_readings(readings)
    _print_summary(table, tables, per_rank=bool(args.per_rank), jobs=mixed)
    if args.by_kind:
        _print_kinds(table)
    if diff is not None:
        _print_diff(diff, top)
    else:
        _print_rows(table, top)
    if not clean:
        print(
            "NOT A CLEAN TOTAL: a printed table does not reconcile with its footer "
            "(see UNRECONCILED above); exit status 1"
        )
    return 0 if clean else 1


_CONNECT_TIMEOUT_S = 30  # how long to wait for the Dask scheduler to answer


@contextmanager
def _executor(scheduler: str | None) -> Generator[Executor | None]:
    """A Dask client's executor for ``--dask-scheduler`` (closed on the way out), or None."""
    if scheduler is None:
        yield None
        return
    with requires(Extra.DASK, "--dask-scheduler"):
        from distributed import Client
    _reach(scheduler)
    try:
        client = Client(scheduler, timeout=_CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, ValueError) as error:  # unreachable, refused, timed out, bad address
        raise _unreachable(scheduler, error) from None
    try:
        # pure=False: a file read twice (PATH and --diff) is read again, never a cached task
        yield client.get_executor(pure=False)
    finally:
        client.close()


def _reach(scheduler: str) -> None:
    """Refuse an address that nothing answers on, before a Client is made.

    A Client that fails to start (distributed 2026.8) retries until its timeout and
    then blocks the interpreter's exit in its ``__del__`` for twice that, so the
    address is checked first with one plain TCP connection, which fails in one line.
    Only the TCP-based protocols are taken (tcp, tls, ws, wss; none means tcp): ucx
    and inproc are for the library's ``executor=``, with a Client made by the caller.
    """
    import socket

    protocol, _, rest = scheduler.rpartition("://")
    if protocol not in ("", "tcp", "tls", "ws", "wss"):
        raise InvalidInputError(
            f"--dask-scheduler: protocol {protocol!r} is not taken here (tcp, tls, ws, wss); "
            "for others pass a Client's executor to read_chrome_traces(executor=...)"
        )
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidInputError(
            f"--dask-scheduler: give tcp://HOST:PORT (the scheduler's address), got {scheduler!r}"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), _CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise _unreachable(scheduler, error) from None


def _unreachable(scheduler: str, error: Exception) -> InvalidInputError:
    return InvalidInputError(
        f"--dask-scheduler: cannot connect to {scheduler}: {type(error).__name__}: "
        + (str(error).strip().splitlines() or [""])[0]
    )


class _Inputs(NamedTuple):
    """What the PATHs held: the traces (as ranks) and every printed table, with its path."""

    traces: ChromeTraceSet
    readings: tuple[tuple[str, ProfilerTableReading], ...]


def _read(
    paths: Sequence[str], *, salvage: bool, allow_mixed_jobs: bool, executor: Executor | None
) -> _Inputs:
    """Traces and directories as ranks; printed tables (by content) as tables."""
    import attrs

    from probewise.throughput.kernels import KernelTable
    from probewise.throughput.readers.chrome_trace import require_regular_file
    from probewise.throughput.readers.profiler_table import decode_table_bytes
    from probewise.throughput.table_readings import read_profiler_tables
    from probewise.throughput.trace_sets import ChromeTraceSet, read_chrome_traces

    trace_paths: list[str] = []
    readings: list[tuple[str, ProfilerTableReading]] = []
    for path in paths:
        if not os.path.isdir(path):
            require_regular_file(path)
        if not os.path.isdir(path) and _is_printed_table(path):
            try:
                data = Path(path).read_bytes()
            except OSError as error:
                raise TraceFormatError(
                    f"cannot read the file: {error.strerror}", path=path
                ) from None
            text, note = decode_table_bytes(data)
            try:
                found = read_profiler_tables(text)
            except TraceFormatError as error:
                raise TraceFormatError(str(error), path=path, kind=error.kind) from None
            readings.extend(
                (
                    path,
                    reading
                    if note is None
                    else attrs.evolve(reading, notes=(note, *reading.notes)),
                )
                for reading in found
            )
        else:
            trace_paths.append(path)
    merged = KernelTable.empty()
    per_rank: list[KernelTable] = []
    if trace_paths:
        with _progress(trace_paths) as callback:
            traces = read_chrome_traces(
                trace_paths,
                salvage=salvage,
                progress=callback,
                allow_mixed_jobs=allow_mixed_jobs,
                executor=executor,
            )
        per_rank.extend(traces.per_rank)
        merged = traces.merged
    for _, reading in readings:
        merged = merged + reading.table
    if not trace_paths and len(readings) == 1:
        merged = readings[0][1].table
    return _Inputs(
        traces=ChromeTraceSet(per_rank=tuple(per_rank), merged=merged), readings=tuple(readings)
    )


def _unaccounted_us(reading: ProfilerTableReading) -> float | None:
    """Footer minus the counted rows (negative when the rows exceed it); None without a footer."""
    footer = reading.footer_self_device_us
    if footer is None:
        return None
    return (round(footer * 1000) - round(reading.kernel_sum_us * 1000)) / 1000


def _reading_dict(path: str, reading: ProfilerTableReading) -> dict[str, object]:
    return {
        "path": path,
        "offset": reading.offset,
        "device": reading.device,
        "reconciled": reading.reconciled,
        "legacy": reading.legacy,
        "kernel_sum_us": reading.kernel_sum_us,
        "footer_self_device_us": reading.footer_self_device_us,
        "unaccounted_device_us": _unaccounted_us(reading),
        "tolerance_us": reading.tolerance_us,
        "notes": list(reading.notes),
    }


def _print_readings(readings: Sequence[tuple[str, ProfilerTableReading]]) -> None:
    for path, reading in readings:
        where = f"{path} (table at character {reading.offset}, {reading.device})"
        footer = reading.footer_self_device_us
        unaccounted = _unaccounted_us(reading)
        if reading.reconciled:
            print(f"table {where}: counted rows add up to the footer ({_ms(footer or 0.0)} ms)")
        elif footer is None or unaccounted is None:
            print(
                f"UNRECONCILED table {where}: no 'Self {reading.device} time total' footer, "
                f"so the counted {_ms(reading.kernel_sum_us)} ms cannot be checked"
            )
        elif unaccounted > 0:
            print(
                f"UNRECONCILED table {where}: {_ms(unaccounted)} ms of device time unaccounted "
                f"(footer {_ms(footer)} ms, counted rows {_ms(reading.kernel_sum_us)} ms)"
            )
        else:
            print(
                f"UNRECONCILED table {where}: the counted rows ({_ms(reading.kernel_sum_us)} ms) "
                f"exceed the footer ({_ms(footer)} ms) by {_ms(-unaccounted)} ms"
            )
        for note in reading.notes:
            print(f"  note: {note}")


def _is_printed_table(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return False  # let the trace reader report it
    if head.startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):  # gzip, zstd: a trace
        return False
    stripped = head.lstrip(b"\xef\xbb\xbf").lstrip()
    return bool(stripped) and stripped[:1] not in (b"{", b"[")


@contextmanager
def _progress(paths: Sequence[str]) -> Generator[Callable[[int, int], None] | None]:
    from probewise._progress import progress_bar

    total = 0
    for path in paths:
        candidates = list(Path(path).iterdir()) if os.path.isdir(path) else [Path(path)]
        for candidate in candidates:
            try:
                total += candidate.stat().st_size if candidate.is_file() else 0
            except OSError:
                continue
    if total < _PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        yield None
        return
    bar = progress_bar(total=total, unit="B", unit_scale=True, desc="reading traces", leave=False)
    last = [0]

    def update(done: int, _file_total: int) -> None:
        if done < last[0]:  # the next file (or a second pass) started
            last[0] = 0
        bar.update(done - last[0])
        last[0] = done

    try:
        yield update
    finally:
        bar.close()


def _ms(us: float) -> str:
    return f"{us / 1000:,.3f}"


def _print_summary(
    table: KernelTable, tables: ChromeTraceSet, *, per_rank: bool, jobs: bool = False
) -> None:
    sources = table.sources
    if jobs:
        for number, job in enumerate(table.jobs(), start=1):
            size = job[0].world_size  # one world size per job
            shown = "unknown world size" if size is None else f"world size {size}"
            for source in job:
                rank = "?" if source.rank is None else str(source.rank)
                print(f"job {number} ({shown}): rank {rank}  {source.path}")
    if sources:
        ranks = table.ranks
        line = f"{len(sources)} trace file{'s' if len(sources) != 1 else ''}"
        if ranks:
            line += f", rank{'s' if len(ranks) != 1 else ''} {_ranges(ranks)}"
        if table.world_size is not None:
            line += f" of world size {table.world_size}"
        print(line)
        missing = table.missing_ranks
        if missing:
            print(f"missing ranks: {_ranges(missing)} ({len(missing)} not read)")
        for source in sources:
            for note in source.notes:
                print(f"note ({source.path}): {note}")
        for source in table.damaged:
            damage = source.damage
            assert damage is not None
            print(
                f"DAMAGED {source.path}: {damage.message} at byte {damage.offset}; "
                f"kept the {damage.events_kept:,} complete events before it, the rest is lost"
            )
    print(
        f"kernel {_ms(table.kernel_us)} ms   memcpy {_ms(table.memcpy_us)} ms   "
        f"memset {_ms(table.memset_us)} ms"
    )
    naive = table.naive_device_us
    if naive is not None and naive > 0 and table.kernel_us > 0:
        print(
            f"naive sum of every device row: {_ms(naive)} ms "
            f"({naive / table.kernel_us:.2f}x the kernel time)"
        )
    excluded = [e for e in table.excluded if e.events]
    if excluded:
        parts: list[str] = []
        for item in excluded:
            part = f"{item.reason.value} {item.events:,}"
            if item.total_us:
                part += f" ({_ms(item.total_us)} ms)"
            parts.append(part)
        print("excluded: " + ", ".join(parts))
    if table.steps:
        print("steps:")
        print(
            f"  {'step':>8}  {'span ms':>12}  {'kernel ms':>12}  {'memcpy ms':>10}  {'events':>8}"
        )
        for step in table.steps:
            print(
                f"  {step.step:>8}  {_ms(step.span_us):>12}  {_ms(step.kernel_us):>12}  "
                f"{_ms(step.memcpy_us):>10}  {step.device_events:>8,}"
            )
    if per_rank and len(tables.per_rank) > 1:
        print("per rank:")
        for rank_table in tables.per_rank:
            source = rank_table.sources[0]
            rank = "?" if source.rank is None else str(source.rank)
            print(f"  rank {rank:>5}  kernel {_ms(rank_table.kernel_us):>14} ms  {source.path}")


def _ranges(values: Sequence[int]) -> str:
    out: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    out.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def _short(name: str) -> str:
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 3] + "..."


def _print_rows(table: KernelTable, top: int) -> None:
    rows = table.top(top)
    if not rows:
        print("no device rows")
        return
    total = table.device_us or 1.0
    print()
    print(f"{'device ms':>12}  {'share':>6}  {'calls':>8}  {'kind':<13}  name")
    for row in rows:
        calls = "?" if row.calls is None else f"{row.calls:,}"
        print(
            f"{_ms(row.device_us):>12}  {row.device_us / total:>6.1%}  {calls:>8}  "
            f"{row.kind.value:<13}  {_short(row.name)}"
        )
    hidden = len(table.rows) - len(rows)
    if hidden:
        print(f"... {hidden:,} more rows (--top N to show more)")


def _print_kinds(table: KernelTable) -> None:
    total = table.device_us or 1.0
    print()
    print(f"{'device ms':>12}  {'share':>6}  kind")
    for kind, us in table.by_kind().items():
        print(f"{_ms(us):>12}  {us / total:>6.1%}  {kind.value}")


def _print_diff(diff: KernelDiff, top: int) -> None:
    print()
    print(
        f"kernel time {_ms(diff.before_kernel_us)} ms -> {_ms(diff.after_kernel_us)} ms "
        f"({'+' if diff.delta_kernel_us >= 0 else ''}{_ms(diff.delta_kernel_us)} ms)"
    )
    print(f"{'before ms':>12}  {'after ms':>12}  {'change ms':>12}  {'ratio':>7}  name")
    for change in diff.changes[:top]:
        ratio = change.ratio
        shown = f"{ratio:.2f}x" if math.isfinite(ratio) else "new"
        if change.before_us == 0 and change.after_us == 0:
            shown = "-"
        delta = f"{'+' if change.delta_us >= 0 else ''}{_ms(change.delta_us)}"
        print(
            f"{_ms(change.before_us):>12}  {_ms(change.after_us):>12}  {delta:>12}  {shown:>7}  "
            f"{_short(change.name)}"
        )
    hidden = len(diff.changes) - min(top, len(diff.changes))
    if hidden:
        print(f"... {hidden:,} more changes (--top N to show more)")
