"""Spilling the per-event columns of a large trace to disk, hash-partitioned.

:class:`._totals.Totals` keeps one launch (correlation id, start) per runtime call and
one device event (correlation id, category code, ns) plus one 64-bit duplicate key per
kernel/copy/fill until the end, where it joins them for the per-step breakdown. That is
about 25 bytes per device event and 16 per launch: past :data:`SPILL_BYTES` of columns
they go to a private temporary directory (:class:`Area`), in batches. A batch holds one
kind of column, its rows sorted (stably) by partition: launches and device events by a
hash of their correlation id, so one correlation's launches and device events land in
the same partition; duplicate keys by a hash of the key. At the end the join runs one
partition at a time (:meth:`Store.joined`), so it holds about 1/:data:`PARTITIONS`
of the columns, and a partition over :data:`PARTITION_BYTES` is split again by the next
byte of the hash first (any trace size then joins in bounded memory); sums of integer ns and counts are the same in any grouping, and within
a partition the rows keep their order (the first launch of a correlation id wins, as
in memory), so the result is exactly the in-memory one.

Worker processes spill into the same area (the parent passes its directory) and hand
back their batches, which the parent lists after its own: no file is copied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from contextlib import ExitStack
from typing import TYPE_CHECKING, BinaryIO, Final, final

import attrs

from probewise.errors import SpillError

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator, Mapping, Sequence

    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEVICE",
    "KEY",
    "LAUNCH",
    "PARTITIONS",
    "PARTITION_BYTES",
    "SPILL_BYTES",
    "Area",
    "Batch",
    "Store",
]

SPILL_BYTES: Final = 32 << 20
"""Bytes of columns a :class:`~._totals.Totals` holds before it spills them (patchable).

The reader's own peak is about 80 MiB without the columns (docs/measurements.md), and a
spill needs about 20 MiB more for one chunk's sort: 32 MiB keeps the whole under the
200 MiB ceiling with room to spare, and a trace like the fixtures spills only past
about 1.2 GB (about 6 bytes of columns per event)."""
PARTITIONS: Final = 256
"""Partitions of the spilled columns; the final join holds one at a time."""
PARTITION_BYTES: Final = 16 << 20
"""A partition whose columns hold more than this is split again before it is read
(patchable): its rows go to a store of the next level, partitioned by the next byte of
the same hash, so the join holds at most about this much at any trace size."""
_LEVELS: Final = 8  # the bytes of the 64-bit hash: at most 8 levels of partitions
_CHUNK: Final = 1 << 19  # rows sorted into partitions at once (bounds the sort's memory)
_MIX: Final = 0x9E3779B97F4A7C15  # Fibonacci hashing: the top byte of id * _MIX

LAUNCH, DEVICE, KEY = 0, 1, 2
_WIDTHS: Final = {LAUNCH: (8, 8), DEVICE: (8, 1, 8), KEY: (8,)}  # bytes per column
_DTYPES: Final = {LAUNCH: ("<i8", "<f8"), DEVICE: ("<i8", "i1", "<i8"), KEY: ("<i8",)}


@final
class Area:
    """The private temporary directory spills go to, made on first use.

    The reading process owns it and removes it (:meth:`remove`); a worker process is
    given the owner's directory and its threshold, and never removes it.
    """

    def __init__(self, root: str | None = None, limit: int | None = None) -> None:
        self._root = root
        self._owned = root is None
        self.limit = SPILL_BYTES if limit is None else limit

    def root(self) -> str:
        if self._root is None:
            self._root = tempfile.mkdtemp(prefix="probewise-spill-")
        return self._root

    def root_or_default(self) -> str:
        """Where the spill files are, or would be made."""
        return self._root if self._root is not None else tempfile.gettempdir()

    def new_file(self) -> str:
        handle, path = tempfile.mkstemp(suffix=".cols", dir=self.root())
        os.close(handle)
        return path

    def remove(self) -> None:
        if self._owned and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __getstate__(self) -> tuple[str | None, int]:
        return (self._root, self.limit)  # a worker's area: never the owner in the parent

    def __setstate__(self, state: tuple[str | None, int]) -> None:
        self._root, self.limit = state
        self._owned = False


@final
@attrs.frozen
class Batch:
    """Rows of one kind in ``path`` from byte ``offset``, column after column.

    ``starts[p]`` is the first row of partition ``p`` (``starts[PARTITIONS]``: the rows).
    """

    kind: int
    path: str
    offset: int
    starts: tuple[int, ...]


@final
class Store:
    """The batches spilled so far, in the order of the rows they hold."""

    def __init__(self, level: int = 0) -> None:
        self.batches: list[Batch] = []
        self.level = level  # which byte of the hash partitions the rows (0: the top one)
        self._path: str | None = None
        self._size = 0

    def write(self, area: Area, kind: int, columns: Sequence[npt.NDArray[np.generic]]) -> None:
        """Spill rows (columns of one length), partitioned by the first column's hash."""
        with _scratch(area.root_or_default()):
            self._write(area, kind, columns)

    def _write(self, area: Area, kind: int, columns: Sequence[npt.NDArray[np.generic]]) -> None:
        import numpy as np

        rows = len(columns[0])
        for first in range(0, rows, _CHUNK):
            part = [column[first : first + _CHUNK] for column in columns]
            partition = _partition(part[0], self.level)
            order = np.argsort(partition, kind="stable")
            counts = np.bincount(partition, minlength=PARTITIONS)
            del partition
            starts = (0, *np.cumsum(counts).tolist())
            if self._path is None:
                self._path = area.new_file()
            with open(self._path, "ab") as handle:
                for column in part:
                    handle.write(np.ascontiguousarray(column[order]).data)
            self.batches.append(Batch(kind=kind, path=self._path, offset=self._size, starts=starts))
            self._size += sum(_WIDTHS[kind]) * len(order)

    def partitions(self, kind: int, area: Area) -> Iterator[list[npt.NDArray[np.generic]]]:
        """Each partition's rows of ``kind`` (its columns), in the order they were added."""
        for (rows,) in self.joined((kind,), area):
            yield rows

    def joined(
        self, kinds: tuple[int, ...], area: Area
    ) -> Iterator[tuple[list[npt.NDArray[np.generic]], ...]]:
        """Each non-empty partition's rows of every kind in ``kinds`` at once (rows with
        one id are in one partition whatever their kind), in the order they were added.

        A partition over :data:`PARTITION_BYTES` is split again (:meth:`_split`) and its
        parts come in its place.
        """
        by_kind = {kind: [batch for batch in self.batches if batch.kind == kind] for kind in kinds}
        every = [batch for kind in kinds for batch in by_kind[kind]]
        where = os.path.dirname(every[0].path) if every else tempfile.gettempdir()
        with ExitStack() as stack:
            with _scratch(where):
                files = {
                    path: stack.enter_context(open(path, "rb")) for path in {b.path for b in every}
                }
            for p in range(PARTITIONS):
                size = sum(sum(_WIDTHS[b.kind]) * (b.starts[p + 1] - b.starts[p]) for b in every)
                if not size:
                    continue
                if size > PARTITION_BYTES and self.level + 1 < _LEVELS:
                    yield from self._split(p, kinds, by_kind, files, area)
                    continue
                with _scratch(where):
                    rows = tuple(_read_partition(kind, p, by_kind[kind], files) for kind in kinds)
                yield rows

    def _split(
        self,
        p: int,
        kinds: tuple[int, ...],
        by_kind: Mapping[int, list[Batch]],
        files: Mapping[str, BinaryIO],
        area: Area,
    ) -> Iterator[tuple[list[npt.NDArray[np.generic]], ...]]:
        """Partition ``p``'s rows, one batch's share at a time, through a store of the next
        level (the same order within each part), whose file goes when they are read."""
        child = Store(self.level + 1)
        with _scratch(area.root_or_default()):
            for kind in kinds:
                for batch in by_kind[kind]:
                    if batch.starts[p + 1] > batch.starts[p]:
                        child._write(area, kind, _read_partition(kind, p, [batch], files))
        try:
            yield from child.joined(kinds, area)
        finally:
            if child._path is not None:
                with contextlib.suppress(OSError):
                    os.remove(child._path)


@contextlib.contextmanager
def _scratch(where: str) -> Generator[None]:
    """Turn an OSError of the spill files under ``where`` (a full or read-only disk) into
    a SpillError that names the place."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise SpillError(
            f"the trace reader could not use its temporary spill files under {where}: "
            f"{reason}; set TMPDIR to a directory with room (about 6 bytes per event)"
        ) from None


def _read_partition(
    kind: int, p: int, batches: list[Batch], files: Mapping[str, BinaryIO]
) -> list[npt.NDArray[np.generic]]:
    import numpy as np

    pieces: list[list[npt.NDArray[np.generic]]] = [[] for _ in _WIDTHS[kind]]
    for batch in batches:
        low, high = batch.starts[p], batch.starts[p + 1]
        if low == high:
            continue
        handle, at, rows = files[batch.path], batch.offset, batch.starts[-1]
        for piece, width, dtype in zip(pieces, _WIDTHS[kind], _DTYPES[kind], strict=True):
            handle.seek(at + low * width)
            piece.append(np.frombuffer(handle.read((high - low) * width), dtype=dtype))
            at += rows * width
    return [
        np.concatenate(piece) if piece else np.empty(0, dtype=dtype)
        for piece, dtype in zip(pieces, _DTYPES[kind], strict=True)
    ]


def _partition(ids: npt.NDArray[np.generic], level: int = 0) -> npt.NDArray[np.intp]:
    """Each 64-bit id's partition: byte ``level`` (from the top) of a multiplicative hash."""
    import numpy as np

    mixed = ids.view(np.uint64) * np.uint64(_MIX)
    return ((mixed >> np.uint64(56 - 8 * level)) & np.uint64(0xFF)).astype(np.intp)
