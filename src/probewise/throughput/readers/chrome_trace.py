"""Read Chrome traces (Kineto and legacy dialects) into a table's parts: files, ranks, executors.

:func:`read_trace` reads one file, :func:`read_traces` one file, a directory of rank
files or several files as the ranks of one job (locally or through any
:class:`concurrent.futures.Executor`), each file into its
:class:`~probewise.throughput._kernel_rows.TableParts`; the tables are built above, by
``KernelTable.from_chrome_trace`` and :mod:`probewise.throughput.trace_sets`. The stages
live beside this module: ``_source`` (bytes, gzip, zstd), ``_events`` (streaming JSON,
damage, salvage), ``_native`` and ``_fastpath`` (the compiled and the fast path over a
run of events), ``_totals`` (events to a table's parts), ``_spill`` (its per-event
columns on disk, past a threshold) and ``_workers`` (worker processes). What each event
category counts as, how time units are read and what damage and salvage mean:
docs/reference/chrome-trace.md.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future
from os import PathLike
from pathlib import Path
from typing import cast, final

import attrs

from probewise.errors import (
    ArgumentTypeError,
    ArgumentTypeValueError,
    InvalidInputError,
    MixedJobsError,
    SpillError,
    TraceFormatError,
)
from probewise.throughput._kernel_rows import ProgressCallback, TableParts, TraceSource
from probewise.throughput.readers import _native
from probewise.throughput.readers._events import Parser, first_line
from probewise.throughput.readers._source import GZIP_MAGIC, WHITESPACE, ZSTD_MAGIC
from probewise.throughput.readers._workers import Worker

__all__ = [
    "SUMMARY_SUFFIX",
    "ProgressCallback",
    "TraceReader",
    "read_trace",
    "read_traces",
    "require_regular_file",
    "trace_reader",
]


class TraceReader(enum.Enum):
    """Which reader reads a Chrome trace's runs of events in this install: the compiled
    scanner, or the pure-Python paths (the same tables, about 1.7 times slower)."""

    COMPILED = "compiled scanner"
    """The C scanner that ``pip install`` built where it found a C compiler."""
    NOT_BUILT = "pure Python, the compiled scanner was not built"
    """The install found no C compiler, or its build failed."""
    TURNED_OFF = "pure Python, PROBEWISE_PURE_PYTHON is set"
    """The scanner is built but ``PROBEWISE_PURE_PYTHON`` turned it off."""


def trace_reader() -> TraceReader:
    """The reader :func:`~probewise.throughput.read_chrome_traces` uses now (``probewise --version`` prints it)."""
    if _native.SCAN is not None:
        return TraceReader.COMPILED
    return TraceReader.TURNED_OFF if _native.BUILT else TraceReader.NOT_BUILT


def read_trace(
    path: str | PathLike[str],
    *,
    salvage: bool = False,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
) -> TableParts:
    """Read one Chrome trace file (JSON or gzip, by content) into its table's parts.

    ``workers`` is the number of processes that read a large (64 MiB or more) plain
    JSON trace in parallel, each a part of the file; None means one per core that is
    idle when the read starts (by the load average), at least 1 and at most 4: a
    second process only pays where its core is free. Compressed streams and salvage
    reads always use one (a gzip or zstd file is inflated on a background thread
    instead). The result does not depend on it.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise TraceFormatError("a directory holds ranks: use read_chrome_traces", path=name)
    require_regular_file(name)
    count = _worker_count(workers)
    try:
        return Parser(name, salvage=salvage, progress=progress, workers=count, spawn=Worker).parse()
    except SpillError:
        raise  # the temporary directory, not the trace: its own message says so
    except OSError as error:
        raise TraceFormatError(f"cannot read the file: {error.strerror}", path=name) from None


def require_regular_file(path: str) -> None:
    """Raise TraceFormatError unless ``path`` is a regular file (or a link to one).

    A FIFO, socket or device given as a file would block the reader forever (or never
    end), so it is refused before it is opened. A missing file is reported the same way
    as one that cannot be read.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise TraceFormatError(f"cannot read the file: {error.strerror}", path=path) from None
    if stat.S_ISREG(mode):
        return
    what = (
        "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a directory"
        if stat.S_ISDIR(mode)
        else "not a regular file"
    )
    raise TraceFormatError(
        f"{what} is not read: give a regular file (reading it could block forever)", path=path
    )


def _worker_count(workers: object) -> int:
    if workers is None:
        return _idle_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"workers must be a positive int or None, got {workers!r}")
    return workers


def _idle_workers() -> int:
    """The worker count for ``workers=None``: the cores idle now, at least 1, at most 4.

    A second process pays only where its core is free: on a loaded 2-core machine it
    took 0.72x to 1.17x the one-process time (docs/measurements.md), so the file
    size alone cannot decide. The one-minute load average says how many cores the
    rest of the machine keeps busy, rounded to the nearest core (a load of 0.3 is an
    idle machine with a daemon ticking, not a busy core); where it is unknown
    (Windows) every core counts as idle. On an idle 2-core machine two processes read a
    407 MiB trace in the wall time of a whole-file typed msgspec decode.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - Windows
        load = 0.0
    return max(1, min(4, cpus, round(cpus - load)))


def read_traces(
    paths: str | PathLike[str] | Sequence[str | PathLike[str]],
    *,
    salvage: bool = False,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
    allow_mixed_jobs: bool = False,
    executor: Executor | None = None,
) -> tuple[TableParts, ...]:
    """Each file's parts, as :func:`probewise.throughput.read_chrome_traces` reads them.

    One trace, a directory of rank traces, or several files, read as the ranks of one
    job (locally or through ``executor``), sorted by rank (files without one last), and
    refused as :class:`~probewise.errors.MixedJobsError` unless ``allow_mixed_jobs``
    when they cannot be ranks of one job. The options are described there.
    """
    files = list(_trace_files(paths))
    if not files:
        shown = (
            os.fspath(paths) if isinstance(paths, str | PathLike) else ", ".join(map(str, paths))
        )
        raise TraceFormatError("no trace files found", path=shown)
    ranks = (
        [read_trace(f, salvage=salvage, progress=progress, workers=workers) for f in files]
        if executor is None
        else _read_on(executor, files, salvage=salvage, progress=progress, workers=workers)
    )
    ranks.sort(key=_rank_key)
    if not allow_mixed_jobs:
        _refuse_mixed_jobs([parts.sources[0] for parts in ranks])
    return tuple(ranks)


@final
@attrs.frozen
class _Raised:
    """What a task's own read raised, returned as a value so that it is told apart from
    a failure of the executor (which ``Future.result()`` raises)."""

    error: Exception


def _read_task(path: str, salvage: bool, workers: int) -> TableParts | _Raised:
    """One file's parts, read where the executor runs it (top level: it must pickle)."""
    try:
        return read_trace(path, salvage=salvage, workers=workers)
    except Exception as error:  # re-raised by _read_on, on the caller's side
        return _Raised(error)


def _read_on(
    executor: Executor,
    files: Sequence[str],
    *,
    salvage: bool,
    progress: ProgressCallback | None,
    workers: int | None,
) -> list[TableParts]:
    """Every file's parts read through ``executor``, in the order of ``files``."""
    if not isinstance(executor, Executor):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeValueError(
            f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}"
        )
    count = 1 if workers is None else _worker_count(workers)
    futures: list[Future[TableParts | _Raised]] = []
    try:
        for path in files:
            try:
                futures.append(executor.submit(_read_task, path, salvage, count))
            except Exception as error:
                raise _executor_error("refused", path, error) from error
        ranks: list[TableParts] = []
        for path, future in zip(files, futures, strict=True):
            try:
                result = future.result()
            except Exception as error:
                raise _executor_error("lost", path, error) from error
            if isinstance(result, _Raised):
                raise result.error
            ranks.append(result)
            if progress is not None:
                size = _size(path)
                progress(0, size)
                progress(size, size)
        return ranks
    finally:
        for future in futures:
            future.cancel()


def _executor_error(what: str, path: str, error: BaseException) -> TraceFormatError:
    return TraceFormatError(
        f"the executor {what} the read: {type(error).__name__}: {first_line(error)}", path=path
    )


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _refuse_mixed_jobs(sources: Sequence[TraceSource]) -> None:
    sizes: dict[int, list[str]] = {}
    ranks: dict[int, list[str]] = {}
    for source in sources:
        if source.world_size is not None:
            sizes.setdefault(source.world_size, []).append(source.path)
        if source.rank is not None:
            ranks.setdefault(source.rank, []).append(source.path)
    problems: list[str] = []
    paths: list[str] = []
    if len(sizes) > 1:
        problems.append(
            "they disagree on world size ("
            + "; ".join(f"{size} in {', '.join(names)}" for size, names in sorted(sizes.items()))
            + ")"
        )
        paths.extend(name for names in sizes.values() for name in names)
    repeated = {rank: names for rank, names in sorted(ranks.items()) if len(names) > 1}
    if repeated:
        problems.append(
            "they repeat a rank ("
            + "; ".join(f"rank {rank} in {', '.join(names)}" for rank, names in repeated.items())
            + ")"
        )
        paths.extend(name for names in repeated.values() for name in names)
    if problems:
        raise MixedJobsError(
            "these traces are not the ranks of one job: "
            + " and ".join(problems)
            + "; pass allow_mixed_jobs=True (--allow-mixed-jobs) to sum them anyway",
            paths=tuple(dict.fromkeys(paths)),
        )


def _rank_key(parts: TableParts) -> tuple[int, str]:
    source = parts.sources[0]
    return (source.rank if source.rank is not None else 1 << 30, source.path)


SUMMARY_SUFFIX = ".kernels.json"
"""The name ending of a kernel table summary written beside its trace (as
``kernel_table_handler`` does): a directory read as the ranks of a job skips them."""


def _trace_files(paths: str | PathLike[str] | Sequence[str | PathLike[str]]) -> Iterator[str]:
    items = cast("object", [paths] if isinstance(paths, str | PathLike) else paths)
    if isinstance(items, bytes | bytearray) or not isinstance(items, Sequence):
        raise ArgumentTypeError(
            "a trace path must be a str, an os.PathLike or a sequence of them, "
            f"got a {type(items).__name__}"
        )
    for item in cast("Sequence[object]", items):
        if not isinstance(item, str | PathLike):
            raise ArgumentTypeError(
                f"a trace path must be a str or an os.PathLike, got a {type(item).__name__}"
            )
        name = os.fspath(cast("str | PathLike[str]", item))
        if os.path.isdir(name):
            for child in sorted(Path(name).iterdir()):
                if (
                    child.is_file()
                    and not child.name.endswith(SUMMARY_SUFFIX)
                    and _looks_like_trace(child)
                ):
                    yield str(child)
        else:
            yield name


def _looks_like_trace(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    if head.startswith((GZIP_MAGIC, ZSTD_MAGIC)):
        return True
    stripped = head.lstrip(b"\xef\xbb\xbf").lstrip(WHITESPACE)
    return stripped[:1] in (b"{", b"[")
