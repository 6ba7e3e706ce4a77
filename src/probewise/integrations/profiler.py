"""A ``torch.profiler`` ``on_trace_ready`` that also writes the kernel table:
:func:`kernel_table_handler`.

::

    from probewise.integrations.profiler import kernel_table_handler

    with torch.profiler.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
        on_trace_ready=kernel_table_handler("traces"),
    ) as prof:
        for batch in loader:
            step(batch)
            prof.step()

Each time a trace is ready it is written as torch's own
``torch.profiler.tensorboard_trace_handler`` writes it
(``DIR/<worker>.<time_ns>.pt.trace.json``, gzipped with ``use_gzip``), then read back
with :meth:`~probewise.KernelTable.from_chrome_trace`, and the table is written beside
it as ``DIR/<worker>.<time_ns>.kernels.json``, in the format of ``probewise kernels
TRACE --json``. Every rank writes its own files, so ``probewise kernels DIR
--per-rank`` reads the folder as the ranks of the job (it skips the ``.kernels.json``
summaries). Nothing here imports torch: the profiler object is only asked to export
its trace.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from probewise.errors import InvalidInputError, TraceFormatError
from probewise.integrations.torch import LOGGER
from probewise.throughput.kernels import KernelTable
from probewise.throughput.readers.chrome_trace import SUMMARY_SUFFIX

__all__ = ["TraceExporter", "kernel_table_handler", "summary_path"]


class TraceExporter(Protocol):
    """What the handler needs of the profiler: ``torch.profiler.profile`` has it."""

    def export_chrome_trace(self, path: str) -> object:
        """Write the collected trace to ``path``."""
        ...


def summary_path(trace: str | os.PathLike[str]) -> Path:
    """Where the summary of ``trace`` goes: ``X.pt.trace.json[.gz]`` -> ``X.kernels.json``."""
    path = Path(trace)
    name = path.name
    for ending in (".gz", ".json", ".pt.trace"):
        name = name.removesuffix(ending)
    return path.with_name(name + SUMMARY_SUFFIX)


def kernel_table_handler(
    dir_name: str | os.PathLike[str],
    *,
    worker_name: str | None = None,
    use_gzip: bool = False,
) -> Callable[[TraceExporter], None]:
    """An ``on_trace_ready`` callable: torch's trace, and the kernel table beside it.

    Args:
        dir_name: the folder the traces go to (made when missing).
        worker_name: the file names' first part; default ``<hostname>_<pid>``, as torch's
            handler names them, so that ranks never write the same file.
        use_gzip: write ``.pt.trace.json.gz``, as torch's handler does.

    The summary is :meth:`KernelTable.to_dict` of the trace just written, as JSON. A
    trace that cannot be read is logged (on the ``probewise`` logger) and leaves no
    summary; the run goes on.
    """
    folder = Path(dir_name)
    if folder.exists() and not folder.is_dir():
        raise InvalidInputError(f"kernel_table_handler: {folder} exists and is not a folder")
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: TraceExporter) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # nanoseconds, as torch's handler: two traces of one worker never share a name
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        trace = folder / name
        prof.export_chrome_trace(str(trace))
        try:
            table = KernelTable.from_chrome_trace(trace)
        except TraceFormatError as error:
            LOGGER.warning("kernel_table_handler: no summary for %s: %s", trace, error)
            return
        text = json.dumps(table.to_dict(), indent=2, allow_nan=False)
        summary_path(trace).write_text(text + "\n", encoding="utf-8")

    return handler
