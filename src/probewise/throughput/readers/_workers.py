"""Worker processes that read parts of one large plain trace (``python -m ..._trace_worker``).

The parser (:class:`._events.Parser`) picks the split points; :class:`Worker` starts
one child process per part, which reads it with a parser of its own
(:func:`worker_main`) and pickles its :class:`._events.WorkerResult` back (parent and
child are the same installation).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import final

from probewise.errors import TraceFormatError
from probewise.throughput.readers._events import Parser, WorkerResult
from probewise.throughput.readers._spill import Area

__all__ = ["Worker", "worker_main"]


@final
class Worker:
    """One child process reading a segment of a plain trace (``python -m ..._trace_worker``)."""

    def __init__(self, path: str, start: int, stop: tuple[int, int] | None, area: Area) -> None:
        import subprocess
        import sys

        package_root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, [env.get("PYTHONPATH", "")])]
        )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "probewise.throughput.readers._trace_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._process.stdin is not None
        self._process.stdin.write(pickle.dumps((path, start, stop, area)))
        self._process.stdin.close()

    def result(self) -> WorkerResult:
        assert self._process.stdout is not None
        data = self._process.stdout.read()
        self._process.wait()
        if self._process.returncode != 0 or not data:
            raise TraceFormatError(
                f"a trace worker process failed (exit status {self._process.returncode})"
            )
        result = pickle.loads(data)
        if not isinstance(result, WorkerResult):  # pragma: no cover - defensive
            raise TraceFormatError("a trace worker process returned something unexpected")
        return result

    def cancel(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


def worker_main() -> None:
    """Internal: the entry point of ``python -m probewise.throughput.readers._trace_worker``."""
    import sys

    path, start, stop, area = pickle.loads(sys.stdin.buffer.read())
    parser = Parser(path, salvage=False, progress=None, always_launches=True, area=area)
    result = parser.segment(start, stop)
    sys.stdout.buffer.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
