"""Chrome traces into KernelTables: one file, or the ranks of one job (:class:`ChromeTraceSet`).

Above both the model (:mod:`probewise.throughput.kernels`) and the trace reader
(:mod:`probewise.throughput.readers.chrome_trace`): the reader returns each file's parts,
and each becomes a table here, as ``KernelTable.from_chrome_trace`` builds its one merged
table from the same parts.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import reduce
from os import PathLike
from typing import TYPE_CHECKING, final

import attrs

from probewise.throughput.kernels import KernelTable
from probewise.throughput.readers.chrome_trace import ProgressCallback, read_trace, read_traces

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["ChromeTraceSet", "read_chrome_trace", "read_chrome_traces"]


@final
@attrs.frozen(kw_only=True)
class ChromeTraceSet:
    """The tables of several trace files read as the ranks of one job.

    ``per_rank`` holds one table per file (sorted by rank, files without a rank
    last); ``merged`` is their sum. ``missing_ranks`` are ranks that
    ``distributedInfo.world_size`` says exist but no file came from.
    """

    per_rank: tuple[KernelTable, ...]
    merged: KernelTable

    @property
    def world_size(self) -> int | None:
        """The largest world size any file states."""
        return self.merged.world_size

    @property
    def missing_ranks(self) -> tuple[int, ...]:
        """Ranks the job had that no file covers."""
        return self.merged.missing_ranks


def read_chrome_trace(
    path: str | PathLike[str],
    *,
    salvage: bool = False,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
) -> KernelTable:
    """Read one Chrome trace file (JSON or gzip, by content) into a KernelTable.

    ``workers`` (processes that split a large plain trace; None: one per idle core, at
    most 4) and the other options are described at
    :func:`probewise.throughput.readers.chrome_trace.read_trace`.
    """
    parts = read_trace(path, salvage=salvage, progress=progress, workers=workers)
    return KernelTable.of_parts(parts)


def read_chrome_traces(
    paths: str | PathLike[str] | Sequence[str | PathLike[str]],
    *,
    salvage: bool = False,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
    allow_mixed_jobs: bool = False,
    executor: Executor | None = None,
) -> ChromeTraceSet:
    """Read one trace, a directory of rank traces, or several files, as ranks of one job.

    A directory contributes every regular file in it whose content starts like a
    trace (gzip magic, or ``{`` / ``[`` after whitespace); other files (a README)
    are skipped. Files are sorted by ``distributedInfo.rank``. ``salvage``,
    ``progress`` and ``workers`` are as for :func:`read_chrome_trace`.

    ``executor`` (any :class:`concurrent.futures.Executor`: a process pool, or
    ``distributed.Client(...).get_executor()`` for a Dask cluster) reads each file as
    one task there; the per-file tables come back and are sorted and merged here
    exactly as in a local read, so the result is equal (``==``) to it. The paths
    must name the same files on every worker (a shared filesystem); directories are
    listed here. With an executor, ``workers=None`` means one process per file (the
    executor's own tasks are the parallelism), and ``progress`` is called here as each
    file's table arrives, ``progress(0, size)`` then ``progress(size, size)``. A worker's
    exception is raised here as it was raised there (the same typed error as a local
    read, for the first failing file in the order given); a task the executor itself
    loses (a worker that died, a cancelled future, a result that could not travel)
    is a :class:`~probewise.TraceFormatError` naming the file.

    Files that cannot be ranks of one job (their ``distributedInfo.world_size``
    values differ, or two claim the same rank) raise
    :class:`~probewise.errors.MixedJobsError` naming them, unless
    ``allow_mixed_jobs`` is true; then they are summed and
    :meth:`KernelTable.jobs <probewise.throughput.kernels.KernelTable.jobs>` says
    which job each file came from. Files without ``distributedInfo`` never conflict.
    """
    ranks = read_traces(
        paths,
        salvage=salvage,
        progress=progress,
        workers=workers,
        allow_mixed_jobs=allow_mixed_jobs,
        executor=executor,
    )
    tables = tuple(KernelTable.of_parts(parts) for parts in ranks)
    merged = tables[0] if len(tables) == 1 else reduce(operator.add, tables, KernelTable.empty())
    return ChromeTraceSet(per_rank=tables, merged=merged)
