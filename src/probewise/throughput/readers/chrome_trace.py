# pyright: reportPrivateUsage=false
# (issue 22: still to fold, a private name used outside its module or class)
"""Readers of saved profiler output: Chrome traces, ``key_averages()``, printed tables.

Chrome traces (:func:`read_chrome_trace`, :func:`read_chrome_traces`)
    Streaming: the file is read in blocks of a few MiB and the ``traceEvents`` array
    is decoded in runs of whole events with msgspec (which validates every byte as
    JSON but only builds the handful of fields a kernel table needs), so peak memory
    does not grow with the size of the trace. The one exception is the per-step
    breakdown, which keeps 24 bytes per host launch and per device event until the
    end (a few MB for a 500 MB trace). gzip and zstd are detected from the content
    (the magic bytes), never from the file name; either is inflated on a background
    thread (gzip with python-isal or zlib-ng when one is installed, else zlib; zstd
    needs the ``zstd`` extra, ``zstandard``), so the parse does not wait for it.

    Per run of events, the work outside the decode is a few C-level passes
    (``Counter`` over ``(ph, cat)``, ``itertools.compress`` to pick the device-lane
    events and launches, one joined decode of their ``args``); only device events and
    launches reach Python code, and the event structs are not tracked by the cyclic
    garbage collector.

    Categories (``cat``) and what they count as:

    ========================================  ========================================
    ``kernel``, ``Kernel`` (old schema),       kernel rows (kind from the name)
    ``mtia_ccp_events`` (MTIA)
    ``gpu_memcpy``, ``Memcpy``                 MEMCPY rows
    ``gpu_memset``, ``Memset``                 MEMSET rows
    ``gpu_user_annotation``                    excluded: GPU_USER_ANNOTATION
    ``cuda_sync``                              excluded: STREAM_SYNC
    ``cpu_op``, ``Operator``,                  excluded: CPU_OP
    ``user_annotation``, ``python_function``
    ``cuda_runtime``, ``cuda_driver``,         excluded: RUNTIME_CALL (their
    ``Runtime``, ``*_runtime``                 ``args.correlation`` ties launches to steps)
    any other ``ph: "X"`` span                 excluded: OTHER
    instants, flows, counters, metadata        excluded: NOT_A_SPAN
    ========================================  ========================================

    ``ts`` and ``dur`` are microseconds whatever ``displayTimeUnit`` says (that key
    only tells a viewer how to display them). ``naive_device_us`` is the sum of every
    device-lane span: kernels, copies and fills plus GPU annotations and stream syncs,
    i.e. what a sum over every "GPU row" would have said (on the fixtures it equals
    the sum of every ``X`` span on the device ``pid``).

Damage
    Every failure is a :class:`~probewise.TraceFormatError` with a
    :class:`~probewise.errors.DamageKind` and the byte offset (in the decompressed
    JSON) where it was found. With ``salvage=True`` the reader returns the table of
    every complete event before the damage instead, and the source's
    :class:`~probewise.throughput.kernels.Damage` says what was lost.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import operator
import os
import pickle
import queue
import re
import stat
import threading
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from itertools import compress, repeat
from os import PathLike
from pathlib import Path
from typing import Annotated, BinaryIO, Final, NoReturn, Protocol, cast, final

import attrs
import msgspec
import regex

from probewise._extras import Extra, requires
from probewise.errors import (
    DamageKind,
    InvalidInputError,
    MissingExtraError,
    MixedJobsError,
    TraceFormatError,
)
from probewise.throughput.kernels import (
    Damage,
    Exclusion,
    ExclusionReason,
    KernelKind,
    KernelRow,
    KernelTable,
    StepBreakdown,
    TraceSource,
    _merge_rows,
)
from probewise.throughput.readers.profiler_table import (
    LabelledRow,
    ProfilerTableReading,
    RowLabel,
    read_profiler_table,
    read_profiler_tables,
)

__all__ = [
    "ChromeTraceSet",
    "LabelledRow",
    "ProfilerTableReading",
    "ProgressCallback",
    "RowLabel",
    "read_chrome_trace",
    "read_chrome_traces",
    "read_profiler_table",
    "read_profiler_tables",
    "table_from_key_averages",
]

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_read, total_bytes)`` (bytes of the file on disk)."""

_BLOCK: Final = 4 << 20  # bytes decompressed / read per block
# Target size of one run of events decoded at once: 1 MiB keeps a run's event structs
# in cache for the passes over them (measured faster than 4 MiB and than 256 KiB).
_RUN: Final = 1 << 20
_MAX_VALUE: Final = 256 << 20  # largest non-event top-level value held in memory
_MAX_WORLD_SIZE: Final = 1 << 20  # larger distributedInfo ranks/world sizes are ignored
_PARALLEL_MIN_BYTES: Final = 64 << 20  # plain files at least this big are split among workers
_GZIP_MAGIC: Final = b"\x1f\x8b"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_WS: Final = b" \t\r\n"


# ----------------------------------------------------------------- event decoding


class _Event(msgspec.Struct, gc=False):
    """The fields of one trace event a kernel table needs; everything else is skipped.

    ``gc=False``: the cyclic garbage collector does not track the millions of these a
    large trace makes (they hold no references that could form a cycle).
    """

    ph: str | None = None
    cat: str | None = None
    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _Args(msgspec.Struct):
    correlation: int | None = None


_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _Args64(msgspec.Struct):
    """``args`` where the correlation must be a 64-bit int (or absent/null)."""

    correlation: _Int64 | None = None


_DECODE_EVENTS: Final = msgspec.json.Decoder(list[_Event])
_DECODE_ARGS: Final = msgspec.json.Decoder(_Args)
_DECODE_ARGS_LIST: Final = msgspec.json.Decoder(list[_Args64])
_DECODE_ANY: Final = msgspec.json.Decoder()
_ERROR_BYTE: Final = regex.compile(r"\(byte (\d+)\)")
_CUT: Final = regex.compile(rb"\}[ \t\r\n]*+,[ \t\r\n]*+(?=\{)")
_CORRELATION: Final = re.compile(rb'"correlation"[ \t\r\n]*+:[ \t\r\n]*+(-?[0-9]{1,19})(?![0-9])')
_STEP_RAW: Final = re.compile(rb'"ProfilerStep#([0-9]{1,18})"')  # longer: not a step number
_CAT: Final = operator.attrgetter("cat")
_PH: Final = operator.attrgetter("ph")
_PH_CAT: Final = operator.attrgetter("ph", "cat")
_CORRELATION_OF: Final = operator.attrgetter("correlation")
_NAME: Final = operator.attrgetter("name")
_DUR: Final = operator.attrgetter("dur")
_TS: Final = operator.attrgetter("ts")
_ARGS: Final = operator.attrgetter("args")

# Category codes.
_K_KERNEL, _K_MEMCPY, _K_MEMSET = 0, 1, 2
_K_ANNOTATION, _K_SYNC, _K_CPU, _K_RUNTIME, _K_OTHER = 3, 4, 5, 6, 7
_CATEGORIES: Final[dict[str | None, int]] = {
    "kernel": _K_KERNEL,
    "Kernel": _K_KERNEL,
    "mtia_ccp_events": _K_KERNEL,
    "gpu_memcpy": _K_MEMCPY,
    "Memcpy": _K_MEMCPY,
    "gpu_memset": _K_MEMSET,
    "Memset": _K_MEMSET,
    "gpu_user_annotation": _K_ANNOTATION,
    "cuda_sync": _K_SYNC,
    "cpu_op": _K_CPU,
    "Operator": _K_CPU,
    "user_annotation": _K_CPU,
    "python_function": _K_CPU,
    "cpu_instant_event": _K_CPU,
    "cuda_runtime": _K_RUNTIME,
    "cuda_driver": _K_RUNTIME,
    "Runtime": _K_RUNTIME,
}
_EXCLUSION_OF: Final = {
    _K_ANNOTATION: ExclusionReason.GPU_USER_ANNOTATION,
    _K_SYNC: ExclusionReason.STREAM_SYNC,
    _K_CPU: ExclusionReason.CPU_OP,
    _K_RUNTIME: ExclusionReason.RUNTIME_CALL,
    _K_OTHER: ExclusionReason.OTHER,
}


def _category(cat: str | None) -> int:
    code = _CATEGORIES.get(cat)
    if code is not None:
        return code
    if cat is not None and cat.endswith("_runtime"):
        return _K_RUNTIME
    return _K_OTHER


# ------------------------------------------------------------------ byte source


class _Source:
    """Decompressed bytes of one file, block by block, with a sliding buffer.

    A compressed file (gzip, or zstd where ``zstandard`` is installed) is inflated on
    a background thread (:class:`_Inflater`), a block or two ahead of the parser.
    """

    def __init__(self, path: str, progress: ProgressCallback | None, *, salvage: bool) -> None:
        self.path = path
        self.salvage = salvage
        # Salvage: where the gzip stream broke (kind, message, offset); reading stops there.
        self.broken: tuple[DamageKind, str, int] | None = None
        self._file = open(path, "rb")  # noqa: SIM115 (closed by close())
        self._total = os.fstat(self._file.fileno()).st_size
        self._progress = progress
        head = self._file.read(4)
        self._file.seek(0)
        self._inflater: _Inflater | None = None
        if head.startswith(_GZIP_MAGIC):
            self._inflater = _Inflater(self._file, zstd=False)
        elif head == _ZSTD_MAGIC:
            try:
                with requires(Extra.ZSTD, "reading a zstd-compressed trace"):
                    import zstandard  # noqa: F401  # pyright: ignore[reportUnusedImport]
            except MissingExtraError:
                self._file.close()
                raise
            self._inflater = _Inflater(self._file, zstd=True)
        self._scratch = bytearray(_BLOCK)
        self._view = memoryview(self._scratch)
        self.buf = b""
        self.base = 0  # absolute offset of buf[0] in the decompressed stream
        self.eof = False

    def close(self) -> None:
        if self._inflater is not None:
            self._inflater.close()
        self._file.close()

    def _read_block(self) -> bytes | memoryview:
        if self._inflater is None:
            # Into one reused buffer: more() copies it once, into the sliding buffer.
            n = self._file.readinto(self._scratch)
            self._report(self._file.tell())
            if not n:
                self.eof = True
            return self._view[:n]
        piece = self._inflater.get()
        self._report(piece.position)
        if piece.error is not None:
            raise piece.error
        if piece.last:
            self.eof = True
        if piece.failure is not None:
            kind, message = piece.failure
            self._fail(kind, message, self.base + len(self.buf) + len(piece.data), piece.data)
        return piece.data

    def _report(self, position: int) -> None:
        if self._progress is not None:
            self._progress(position, self._total)

    def more(self) -> bool:
        """Append one block to the buffer (dropping what was consumed); False at EOF."""
        if self.eof:
            return False
        try:
            block = self._read_block()
        except _GzipBroken as broken:
            block = broken.partial
        if not block:
            return self.more()  # False once at EOF
        self.buf = b"".join((self.buf, block)) if self.buf else bytes(block)
        return True

    @property
    def seekable(self) -> bool:
        """Plain files can be read from any offset (gzip streams cannot)."""
        return self._inflater is None

    @property
    def size(self) -> int:
        return self._total

    def seek(self, offset: int) -> None:
        """Continue reading a plain file at ``offset`` (the buffer is dropped)."""
        self._file.seek(offset)
        self.buf = b""
        self.base = offset
        self.eof = False

    def peek_at(self, offset: int, length: int) -> bytes:
        """``length`` bytes of a plain file at ``offset``, without moving the buffer."""
        here = self._file.tell()
        try:
            self._file.seek(offset)
            return self._file.read(length)
        finally:
            self._file.seek(here)

    def compact(self, pos: int) -> int:
        """Drop ``buf[:pos]`` once that is worth a copy; returns the new index of ``pos``.

        The consumed bytes go when they are all of the buffer or at least one block:
        a run is smaller than a block, and copying the rest after every run would
        copy each byte several times.
        """
        if pos and (pos >= _BLOCK or pos >= len(self.buf)):
            self.buf = self.buf[pos:]
            self.base += pos
            return 0
        return pos

    def _fail(self, kind: DamageKind, message: str, offset: int, partial: bytes) -> NoReturn:
        if self.salvage:
            self.broken = (kind, message, offset)
            self.eof = True
            raise _GzipBroken(partial)
        raise TraceFormatError(message, path=self.path, offset=offset, kind=kind)


class _GzipBroken(Exception):
    """Internal: the compressed stream broke while salvaging; what was inflated is kept."""

    def __init__(self, partial: bytes) -> None:
        super().__init__()
        self.partial = partial


@final
@attrs.frozen
class _Piece:
    """One block from the inflating thread, as the parser's thread receives it."""

    data: bytes
    position: int  # bytes of the compressed file read so far (for progress)
    last: bool = False  # nothing follows
    failure: tuple[DamageKind, str] | None = None  # the stream broke after ``data``
    error: BaseException | None = None  # reading the file failed (raised as is)


def _fast_inflate() -> tuple[Callable[[], _Decompressor], tuple[type[BaseException], ...]]:
    """The fastest installed zlib-compatible inflater, and the errors it raises.

    python-isal (``isal.isal_zlib``) inflates about 2x faster than zlib; zlib-ng's
    ``zlib_ng`` also beats it. Neither is a dependency: the inflate runs on its own
    thread, so with a second core it is hidden behind the parse (measured in
    docs/measurements.md), and either one is used when it is installed.
    """
    for name in ("isal.isal_zlib", "zlib_ng.zlib_ng"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        error = cast("type[BaseException]", module.error)
        return functools.partial(
            cast("Callable[..., _Decompressor]", module.decompressobj), wbits=31
        ), (error, zlib.error)
    return functools.partial(zlib.decompressobj, wbits=31), (zlib.error,)


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


@final
class _Inflater:
    """Inflates a gzip (or zstd) file on a background thread, one or two blocks ahead.

    zlib, python-isal, zlib-ng and zstandard all release the GIL while they inflate,
    so on a machine with a free core the inflate costs the parser no time. The
    blocks (and where the stream broke) are exactly those the reader inflated on
    its own thread before, so damage offsets and salvage are unchanged.
    """

    def __init__(self, file: BinaryIO, *, zstd: bool) -> None:
        self._queue: queue.Queue[_Piece] = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        blocks = _zstd_blocks(file) if zstd else _gzip_blocks(file)
        self._thread = threading.Thread(
            target=self._run, args=(blocks, file), name="probewise-inflate", daemon=True
        )
        self._thread.start()

    def get(self) -> _Piece:
        return self._queue.get()

    def close(self) -> None:
        """Stop the thread (the parser is done, or gave up) and wait for it."""
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _put(self, piece: _Piece) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(piece, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def _run(self, blocks: Iterator[_Piece], file: BinaryIO) -> None:
        try:
            for piece in blocks:
                if not self._put(piece) or piece.last:
                    return
        except Exception as error:
            self._put(_Piece(data=b"", position=0, last=True, error=error))


def _gzip_blocks(file: BinaryIO) -> Iterator[_Piece]:
    """Inflate gzip members (several may follow each other, or zero padding) in blocks."""
    new, errors = _fast_inflate()
    inflate = new()
    pending = b""  # compressed input not yet inflated
    started = False
    while True:
        out: list[bytes] = []
        produced = 0
        while produced < _BLOCK:
            if not pending:
                pending = file.read(_BLOCK // 4)
                if not pending:
                    failure = None
                    if started:
                        failure = (
                            DamageKind.TRUNCATED_GZIP,
                            "the gzip stream ends before its end marker (the file was cut short)",
                        )
                    yield _Piece(
                        data=b"".join(out), position=file.tell(), last=True, failure=failure
                    )
                    return
            try:
                chunk = inflate.decompress(pending, _BLOCK - produced)
            except errors as error:
                yield _Piece(
                    data=b"".join(out),
                    position=file.tell(),
                    last=True,
                    failure=(DamageKind.TRUNCATED_GZIP, f"the gzip stream is corrupt ({error})"),
                )
                return
            out.append(chunk)
            produced += len(chunk)
            started = True
            if inflate.eof:  # a member ended; another may follow (or zero padding)
                pending = inflate.unused_data.lstrip(b"\x00")
                inflate = new()
                started = False
            else:
                pending = inflate.unconsumed_tail
        yield _Piece(data=b"".join(out), position=file.tell())


def _zstd_blocks(file: BinaryIO) -> Iterator[_Piece]:
    """Decompress zstd frames in blocks (``zstandard`` is imported by the caller's check)."""
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(
        file, read_size=_BLOCK // 4, read_across_frames=True
    )
    while True:
        try:
            data = reader.read(_BLOCK)
        except zstandard.ZstdError as error:
            yield _Piece(
                data=b"",
                position=file.tell(),
                last=True,
                failure=(DamageKind.TRUNCATED_GZIP, f"the zstd stream is corrupt ({error})"),
            )
            return
        yield _Piece(data=data, position=file.tell(), last=not data)
        if not data:
            return


# ---------------------------------------------------------------- accumulation


@final
class _Totals:
    """Everything one file contributes, accumulated in integer nanoseconds.

    Most events are host-side and only counted: one C-level ``Counter`` pass over
    ``(ph, cat)``. Only device-lane events (kernels, copies, fills, GPU annotations,
    syncs), launches (for steps) and ``ProfilerStep#N`` spans get a Python loop.
    """

    def __init__(self, *, always_launches: bool = False) -> None:
        # code -> raw name -> [calls, ns]
        self.rows: dict[int, dict[bytes, list[int]]] = {_K_KERNEL: {}, _K_MEMCPY: {}, _K_MEMSET: {}}
        self.cat_counts: Counter[str | None] = Counter()
        self.not_span_counts: Counter[str | None] = Counter()
        self.lane_ns: dict[int, int] = {}  # annotation / sync code -> ns
        self.malformed = 0
        self.naive_ns = 0
        self.steps: list[tuple[float, float, int]] = []  # (ts, dur, step number)
        # Launches are only needed for the per-step breakdown. Kineto writes the
        # ProfilerStep spans (host ops) before the runtime calls, so launches are
        # collected once a step has been seen; if a step turns up after launches
        # were skipped, the file is read again with always_launches (see _Parser).
        self.always_launches = always_launches
        self.skipped_launches = 0
        self.launch_corr = array("q")
        self.launch_ts = array("d")
        self.device_corr = array("q")
        self.device_code = array("b")
        self.device_ns = array("q")
        # One stable 64-bit key per kernel/copy/fill (name, args, start, duration), to
        # count events that are exact duplicates: 8 bytes per device event.
        self.device_keys = array("q")
        self.events = 0

    def add(self, events: list[_Event], doc: bytes) -> None:
        self.events += len(events)
        # One C-level pass counts (ph, cat); the per-category counts follow from it.
        cats: Counter[str | None] = Counter()
        for (ph, cat), n in Counter(map(_PH_CAT, events)).items():
            cats[cat] += n
            if ph != "X":
                self.not_span_counts[cat] += n
        self.cat_counts.update(cats)
        step_names = _step_names(doc)  # one scan of the run's bytes
        if step_names:
            # One pass: only names of a step name's length (picked in C) are compared.
            names = list(map(_NAME, events))
            lengths = {len(target) for target in step_names}
            for at in compress(range(len(names)), map(lengths.__contains__, map(len, names))):
                if bytes(names[at]) in step_names:
                    self._step(events[at])
        lane_cats = {cat for cat in cats if _category(cat) <= _K_SYNC}
        runtime_cats = {cat for cat in cats if _category(cat) == _K_RUNTIME}
        if runtime_cats and not (self.steps or self.always_launches):
            self.skipped_launches += sum(cats[cat] for cat in runtime_cats)
            runtime_cats = set[str | None]()
        # The few events that need more than counting, picked in C (no Python loop).
        wanted = lane_cats | runtime_cats
        if not wanted:
            return
        picked = _select(events, wanted) if len(wanted) < len(cats) else events
        if lane_cats:
            self._lane(_select(picked, lane_cats) if runtime_cats else picked)
        if not runtime_cats:
            return
        launches = _select(picked, runtime_cats) if lane_cats else picked
        corrs = _correlations(launches)
        times = list(map(_TS, launches))
        if None not in corrs and None not in times:
            self.launch_corr.extend(cast("list[int]", corrs))
            self.launch_ts.extend(cast("list[float]", times))
            return
        for corr, ts in zip(corrs, times, strict=True):
            if corr is not None and ts is not None:
                self.launch_corr.append(corr)
                self.launch_ts.append(ts)

    def merge(self, other: _Totals) -> None:
        """Add what a worker read from another part of the same file."""
        self.events += other.events
        for code, table in other.rows.items():
            mine = self.rows[code]
            for name, (calls, ns) in table.items():
                entry = mine.get(name)
                if entry is None:
                    mine[name] = [calls, ns]
                else:
                    entry[0] += calls
                    entry[1] += ns
        self.cat_counts.update(other.cat_counts)
        self.not_span_counts.update(other.not_span_counts)
        for code, ns in other.lane_ns.items():
            self.lane_ns[code] = self.lane_ns.get(code, 0) + ns
        self.malformed += other.malformed
        self.naive_ns += other.naive_ns
        self.steps.extend(other.steps)
        self.launch_corr.extend(other.launch_corr)
        self.launch_ts.extend(other.launch_ts)
        self.device_corr.extend(other.device_corr)
        self.device_code.extend(other.device_code)
        self.device_ns.extend(other.device_ns)
        self.device_keys.extend(other.device_keys)

    def _step(self, event: _Event) -> None:
        if event.ph != "X" or event.ts is None or _category(event.cat) not in (_K_CPU, _K_OTHER):
            return
        match = _STEP_RAW.match(event.name)
        if match is not None:
            ns = max(_dur_ns(event.dur), 0)
            self.steps.append((float(event.ts), ns / 1000, int(match.group(1))))

    def _lane(self, events: list[_Event]) -> None:
        keep = bool(self.steps) or self.always_launches
        by_code: dict[int, list[_Event]] = {}
        cats = set(map(_CAT, events))
        spans = list(compress(events, map(operator.eq, map(_PH, events), repeat("X"))))
        for cat in cats:
            code = _category(cat)
            mine = spans if len(cats) == 1 else _select(spans, {cat})
            by_code.setdefault(code, []).extend(mine)
        for code, all_spans in by_code.items():
            spans = all_spans
            ns_list = _durations_ns(spans)
            if min(ns_list, default=0) < 0:  # drop (and count) events without a usable duration
                good = [i for i, ns in enumerate(ns_list) if ns >= 0]
                self.malformed += len(ns_list) - len(good)
                spans = [spans[i] for i in good]
                ns_list = [ns_list[i] for i in good]
            total = sum(ns_list)
            self.naive_ns += total
            if code > _K_MEMSET:  # GPU annotation or stream sync
                self.lane_ns[code] = self.lane_ns.get(code, 0) + total
                continue
            table = self.rows[code]
            names = list(map(bytes, map(_NAME, spans)))
            self.device_keys.extend(
                # crc32 and int/float hashes do not depend on PYTHONHASHSEED, so the keys
                # of worker processes and of this one agree. All in C: map over zip.
                map(
                    hash,
                    zip(
                        repeat(code),
                        map(zlib.crc32, names),
                        map(zlib.crc32, map(_ARGS, spans)),
                        map(_TS, spans),
                        ns_list,
                        strict=False,  # repeat() never ends; the rest have one length
                    ),
                )
            )
            for name, ns in zip(names, ns_list, strict=True):
                entry = table.get(name)
                if entry is None:
                    table[name] = [1, ns]
                else:
                    entry[0] += 1
                    entry[1] += ns
            if not keep:
                self.skipped_launches += len(spans)
                continue
            corrs = _correlations(spans)
            if None not in corrs:
                self.device_corr.extend(cast("list[int]", corrs))
                self.device_code.extend(array("b", [code]) * len(corrs))
                self.device_ns.extend(ns_list)
                continue
            for corr, ns in zip(corrs, ns_list, strict=True):
                if corr is not None:
                    self.device_corr.append(corr)
                    self.device_code.append(code)
                    self.device_ns.append(ns)

    def _exclusions(self) -> list[Exclusion]:
        events: dict[ExclusionReason, int] = {}
        for cat, n in self.cat_counts.items():
            not_spans = self.not_span_counts.get(cat, 0)
            if not_spans:
                events[ExclusionReason.NOT_A_SPAN] = (
                    events.get(ExclusionReason.NOT_A_SPAN, 0) + not_spans
                )
            code = _category(cat)
            if n == not_spans or code <= _K_MEMSET:
                continue  # device rows (the malformed ones are counted below)
            reason = _EXCLUSION_OF[code]
            events[reason] = events.get(reason, 0) + n - not_spans
        if self.malformed:
            events[ExclusionReason.MALFORMED] = self.malformed
        ns_of = {
            ExclusionReason.GPU_USER_ANNOTATION: self.lane_ns.get(_K_ANNOTATION, 0),
            ExclusionReason.STREAM_SYNC: self.lane_ns.get(_K_SYNC, 0),
        }
        return [
            Exclusion(reason=reason, events=n, total_us=ns_of.get(reason, 0) / 1000)
            for reason, n in events.items()
        ]

    def duplicate_note(self) -> str | None:
        """A note when some device events are exact copies of others (None when none are)."""
        if not self.device_keys:
            return None
        import numpy as np

        keys = np.frombuffer(self.device_keys, dtype=np.int64)
        copies = int(keys.size - np.unique(keys).size)
        if not copies:
            return None
        return (
            f"{copies:,} kernel/copy/fill events are exact duplicates of another event (same "
            "name, args, start and duration); Kineto never records one activity twice, so the "
            "file was probably assembled twice (a merge or concatenation run again). They are "
            "summed as found, not dropped: check the file before trusting the totals"
        )

    def table(self, source: TraceSource, path: str, *, lossy_names: bool) -> KernelTable:
        rows: list[KernelRow] = []
        for code, raw, (calls, ns) in (
            (code, raw, entry) for code, table in self.rows.items() for raw, entry in table.items()
        ):
            name = _decode_name(raw, path, lossy=lossy_names) or "(unnamed)"
            if code == _K_MEMCPY:
                kind = KernelKind.MEMCPY
            elif code == _K_MEMSET:
                kind = KernelKind.MEMSET
            else:
                kind = KernelKind.of(name)
                if kind.is_transfer:  # a kernel that copies is elementwise work
                    kind = KernelKind.ELEMENTWISE
            rows.append(KernelRow(name=name, calls=calls, device_us=ns / 1000, kind=kind))
        return KernelTable(
            rows=_merge_rows(rows),  # two spellings of one name (JSON escapes) become one row
            excluded=self._exclusions(),
            naive_device_us=self.naive_ns / 1000,
            steps=self._steps(),
            sources=(source,),
        )

    def _steps(self) -> list[StepBreakdown]:
        if not self.steps:
            return []
        import numpy as np

        spans = sorted(self.steps)
        starts = np.array([ts for ts, _, _ in spans], dtype=np.float64)
        ends = starts + np.array([dur for _, dur, _ in spans], dtype=np.float64)
        launch_corr = np.frombuffer(self.launch_corr, dtype=np.int64)
        launch_ts = np.frombuffer(self.launch_ts, dtype=np.float64)
        order = np.argsort(launch_corr, kind="stable")
        launch_corr, launch_ts = launch_corr[order], launch_ts[order]
        corr = np.frombuffer(self.device_corr, dtype=np.int64)
        code = np.frombuffer(self.device_code, dtype=np.int8)
        ns = np.frombuffer(self.device_ns, dtype=np.int64)
        at = np.searchsorted(launch_corr, corr)
        found = at < len(launch_corr)
        found[found] = launch_corr[at[found]] == corr[found]
        if len(launch_ts) == 0:  # device events but no launch events (a damaged trace)
            launched = np.full(corr.shape, np.nan)
        else:
            launched = np.where(found, launch_ts[np.minimum(at, len(launch_ts) - 1)], np.nan)
        index = np.searchsorted(starts, launched, side="right") - 1
        inside = found & (index >= 0)
        inside[inside] = launched[inside] <= ends[index[inside]]
        out: list[StepBreakdown] = []
        for i, (_, dur, number) in enumerate(spans):
            mine = inside & (index == i)
            totals = [int(ns[mine & (code == c)].sum()) for c in (_K_KERNEL, _K_MEMCPY, _K_MEMSET)]
            out.append(
                StepBreakdown(
                    step=number,
                    span_us=dur,
                    kernel_us=totals[0] / 1000,
                    memcpy_us=totals[1] / 1000,
                    memset_us=totals[2] / 1000,
                    device_events=int(mine.sum()),
                )
            )
        return _merge_steps(out)


def _merge_steps(steps: list[StepBreakdown]) -> list[StepBreakdown]:
    """One entry per step number (a number repeated within a file is summed)."""
    merged: dict[int, StepBreakdown] = {}
    for step in steps:
        merged[step.step] = merged[step.step] + step if step.step in merged else step
    return list(merged.values())


def _durations_ns(events: list[_Event]) -> list[int]:
    """Each event's duration in integer ns (-1 where it is unusable)."""
    durations: list[int | float | str | None] = list(map(_DUR, events))
    numbers = [d for d in durations if type(d) is float or type(d) is int]
    if len(numbers) == len(durations):
        ns_list = [round(d * 1000) for d in numbers]
        if not ns_list or (min(ns_list) >= 0 and max(ns_list) < 10**18):
            return ns_list
    return [_dur_ns(d) for d in durations]


_STEP_PREFIX: Final = b'"ProfilerStep'
_MANY_HASHES: Final = 4096


def _step_names(doc: bytes) -> set[bytes]:
    """The distinct ``"ProfilerStep#N"`` name strings (quoted) that occur in ``doc``."""
    found: set[bytes] = set()
    # '#' is found with memchr, far faster than the whole needle, and is rare in a
    # trace; where it is not (over _MANY_HASHES in a run) the rest is searched whole.
    width = len(_STEP_PREFIX)
    at = doc.find(b"#", width)
    for _ in range(_MANY_HASHES):
        if at < 0:
            return found
        if doc.startswith(_STEP_PREFIX, at - width):
            match = _STEP_RAW.match(doc, at - width)
            if match is not None:
                found.add(match.group(0))
        at = doc.find(b"#", at + 1)
    at = doc.find(b'"ProfilerStep#', max(0, at - width))
    while at >= 0:
        match = _STEP_RAW.match(doc, at)
        if match is not None:
            found.add(match.group(0))
        at = doc.find(b'"ProfilerStep#', at + 1)
    return found


def _select(events: list[_Event], cats: set[str | None]) -> list[_Event]:
    """The events whose ``cat`` is in ``cats``, in order (one C-level pass)."""
    return list(compress(events, map(cats.__contains__, map(_CAT, events))))


def _correlations(events: list[_Event]) -> list[int | None]:
    """``args.correlation`` of each event (None where it has none, or not a 64-bit int)."""
    if not events:
        return []
    try:  # every args at once, as one JSON array (an int64 range check included)
        joined = b"".join((b"[", b",".join(map(_ARGS, events)), b"]"))
        return list(map(_CORRELATION_OF, _DECODE_ARGS_LIST.decode(joined)))
    except msgspec.DecodeError:  # also ValidationError: odd args somewhere; as before
        pass
    try:
        found = [a.correlation for a in map(_DECODE_ARGS.decode, map(_ARGS, events))]
    except msgspec.DecodeError:  # also ValidationError: odd args somewhere; one by one
        found = [_correlation(e.args) for e in events]
    return [c if c is None or _INT64_MIN <= c <= _INT64_MAX else None for c in found]


_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def _correlation(args: msgspec.Raw) -> int | None:
    try:
        return _DECODE_ARGS.decode(args).correlation
    except msgspec.DecodeError:
        match = _CORRELATION.search(args)
        return None if match is None else int(match.group(1))


def _dur_ns(dur: int | float | str | None) -> int:
    """A duration in integer ns; -1 when it is missing, not a number, negative or not finite."""
    if isinstance(dur, int | float) and not isinstance(dur, bool) and 0 <= dur < 1e15:
        return round(dur * 1000)
    return -1


def _decode_name(raw: bytes, path: str | None = None, *, lossy: bool = False) -> str:
    try:
        value = _DECODE_ANY.decode(raw)
    except msgspec.DecodeError:
        if lossy:  # salvage: keep the row under a readable name
            return raw.decode("utf-8", "replace").strip('"')
        raise TraceFormatError(
            "an event name is not valid UTF-8 JSON text", path=path, kind=DamageKind.MALFORMED
        ) from None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


# ---------------------------------------------------------------------- parser


class _Salvaged(Exception):
    """Internal: damage found while salvaging; carries it to the top."""

    def __init__(self, damage: Damage) -> None:
        super().__init__(damage.message)
        self.damage = damage


@final
class _Parser:
    def __init__(
        self,
        path: str,
        *,
        salvage: bool,
        progress: ProgressCallback | None,
        always_launches: bool = False,
        workers: int = 1,
    ) -> None:
        self.path = path
        self.progress = progress
        self.workers = workers
        # A segment ends at this boundary (absolute: end of '}', start of next '{').
        self.stop: tuple[int, int] | None = None
        self.landed = False
        self.src = _Source(path, progress, salvage=salvage)
        self.salvage = salvage
        self.totals = _Totals(always_launches=always_launches)
        self.pos = 0
        self.rank: int | None = None
        self.world_size: int | None = None
        self.devices: tuple[str, ...] = ()
        self.display_time_unit: str | None = None
        self.base_time_ns: int | None = None
        self.saw_events = False
        self.notes: list[str] = []

    # -- low-level helpers

    def _fail(self, kind: DamageKind, message: str, offset: int) -> NoReturn:
        broken = self.src.broken
        if broken is not None and kind in (DamageKind.TRUNCATED, DamageKind.EMPTY):
            kind, message, offset = broken  # the JSON ends early because the gzip broke
        if self.salvage:
            raise _Salvaged(
                Damage(kind=kind, offset=offset, message=message, events_kept=self.totals.events)
            )
        raise TraceFormatError(message, path=self.path, offset=offset, kind=kind)

    def _peek(self) -> int | None:
        """The next non-whitespace byte (consuming the whitespace), None at EOF."""
        src = self.src
        while True:
            buf = src.buf
            n = len(buf)
            pos = self.pos
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            self.pos = src.compact(pos)
            if not src.more():
                return None

    def _expect(self, byte: bytes, what: str) -> None:
        got = self._peek()
        if got is None:
            self._fail(
                DamageKind.TRUNCATED, f"the trace ends where {what} was expected", self._at()
            )
        if got != byte[0]:
            self._fail(DamageKind.MALFORMED, f"expected {what}", self._at())
        self.pos += 1

    def _at(self) -> int:
        return self.src.base + self.pos

    # -- top level

    def parse(self) -> KernelTable:
        damage: Damage | None = None
        try:
            try:
                self._document()
            finally:
                self.src.close()
        except _Salvaged as salvaged:
            damage = salvaged.damage
        if damage is None and self.src.broken is not None:
            kind, message, offset = self.src.broken
            damage = Damage(
                kind=kind, offset=offset, message=message, events_kept=self.totals.events
            )
        totals = self.totals
        if totals.steps and totals.skipped_launches and not totals.always_launches:
            # A ProfilerStep span came after launches that were not kept: read again.
            again = _Parser(
                self.path,
                salvage=self.salvage,
                progress=self.progress,
                always_launches=True,
                workers=self.workers,
            )
            return again.parse()
        source = TraceSource(
            path=self.path,
            rank=self.rank,
            world_size=self.world_size,
            events=self.totals.events,
            devices=self.devices,
            display_time_unit=self.display_time_unit,
            base_time_ns=self.base_time_ns,
            damage=damage,
            notes=tuple(filter(None, [*self.notes, self.totals.duplicate_note()])),
        )
        return self.totals.table(source, self.path, lossy_names=self.salvage)

    def _document(self) -> None:
        src = self.src
        if not src.more():
            self._fail(DamageKind.EMPTY, "the file is empty", 0)
        if src.buf.startswith(b"\xef\xbb\xbf"):
            self.pos = 3
        first = self._peek()
        if first is None:
            self._fail(DamageKind.EMPTY, "the file holds only whitespace", self._at())
        if first == ord("["):
            self.pos += 1
            self._events()
        elif first == ord("{"):
            self.pos += 1
            self._object()
        else:
            self._fail(
                DamageKind.NOT_JSON,
                "not a Chrome trace: the content starts neither with '{' nor '[' (nor gzip)",
                self._at(),
            )
        if self._peek() is not None:
            self._fail(DamageKind.MALFORMED, "unexpected data after the trace", self._at())
        if not self.saw_events:
            self._fail(DamageKind.WRONG_STRUCTURE, "the trace has no traceEvents array", 0)

    def _object(self) -> None:
        if self._peek() == ord("}"):
            self.pos += 1
            return
        while True:
            key = self._value("a key")
            if not isinstance(key, str):
                self._fail(DamageKind.MALFORMED, "expected a quoted key", self._at())
            self._expect(b":", "':' after a key")
            if key == "traceEvents":
                if self.saw_events:
                    self._drop_earlier_events()
                if self._peek() != ord("["):
                    self._fail(
                        DamageKind.WRONG_STRUCTURE, "traceEvents is not an array", self._at()
                    )
                self.pos += 1
                self._events()
            else:
                self._metadata(key, self._value(f"the value of {key!r}"))
            got = self._peek()
            if got == ord(","):
                self.pos += 1
                continue
            if got == ord("}"):
                self.pos += 1
                return
            if got is None:
                self._fail(
                    DamageKind.TRUNCATED, "the trace ends inside its top-level object", self._at()
                )
            self._fail(
                DamageKind.MALFORMED, "expected ',' or '}' between top-level keys", self._at()
            )

    def _drop_earlier_events(self) -> None:
        """A second ``traceEvents`` key: JSON's last-wins rule, so the earlier array goes."""
        earlier = self.totals.events
        self.totals = _Totals(always_launches=self.totals.always_launches)
        self.notes.append(
            f"the file has more than one 'traceEvents' key; as JSON parsers do (Python's "
            f"json, JavaScript's JSON.parse), the last one wins: the {earlier:,} events of "
            "the earlier array are not counted"
        )

    def _metadata(self, key: str, value: object) -> None:
        if key == "displayTimeUnit" and isinstance(value, str):
            self.display_time_unit = value
        elif (
            key == "baseTimeNanoseconds" and isinstance(value, int) and not isinstance(value, bool)
        ):
            self.base_time_ns = value if value >= 0 else None
        elif key == "deviceProperties" and isinstance(value, list):
            names = [d.get("name") for d in value if isinstance(d, dict)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            self.devices = tuple(n for n in names if isinstance(n, str))  # pyright: ignore[reportUnknownVariableType]
        if key == "distributedInfo" and isinstance(value, dict):
            info = cast("dict[str, object]", value)
            rank, size = info.get("rank"), info.get("world_size")
            if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
                self.rank = rank if rank < _MAX_WORLD_SIZE else None
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                self.world_size = size if size <= _MAX_WORLD_SIZE else None
            if (isinstance(rank, int) and rank >= _MAX_WORLD_SIZE) or (
                isinstance(size, int) and size > _MAX_WORLD_SIZE
            ):
                # missing_ranks lists every absent rank: a value must not set the memory.
                self.notes.append(
                    f"distributedInfo says rank {str(rank)[:24]} of world size {str(size)[:24]}; "
                    f"values above {_MAX_WORLD_SIZE:,} are not plausible and were ignored"
                )

    def _value(self, what: str) -> object:
        """Decode one small JSON value (a key, or a top-level value other than traceEvents)."""
        if self._peek() is None:
            self._fail(
                DamageKind.TRUNCATED, f"the trace ends where {what} was expected", self._at()
            )
        decoder = json.JSONDecoder(parse_constant=_reject_constant)
        while True:
            src = self.src
            text = src.buf[self.pos :].decode("utf-8", "surrogateescape")
            try:
                value, end = decoder.raw_decode(text)
            except RecursionError:
                self._fail(
                    DamageKind.MALFORMED,
                    f"{what} nests arrays or objects too deeply to decode",
                    self._at(),
                )
            except ValueError as error:
                err_pos = error.pos if isinstance(error, json.JSONDecodeError) else 0
                near_end = err_pos >= len(text) - 1
                if near_end and not src.eof and len(src.buf) - self.pos < _MAX_VALUE:
                    self.pos = src.compact(self.pos)
                    src.more()
                    continue
                offset = self._at() + len(text[:err_pos].encode("utf-8", "surrogateescape"))
                kind = DamageKind.TRUNCATED if near_end and src.eof else DamageKind.MALFORMED
                self._fail(kind, f"invalid JSON in {what}: {_first_line(error)}", offset)
            self.pos += len(text[:end].encode("utf-8", "surrogateescape"))
            return value

    # -- the events array

    def _events(self) -> None:
        self.saw_events = True
        if self._peek() == ord("]"):
            self.pos += 1
            return
        pool = self._start_workers()
        try:
            self._loop()
            if pool:
                self._join_workers(pool)
        finally:
            for worker in pool:
                worker.cancel()

    def _loop(self) -> None:
        src = self.src
        while True:
            self.pos = src.compact(self.pos)
            while len(src.buf) - self.pos < _RUN and src.more():
                pass
            if self.stop is not None:
                while len(src.buf) < self.stop[0] - src.base and len(src.buf) - self.pos < 2 * _RUN:
                    if not src.more():
                        break
            if self._run():
                return

    # -- parallel reading of large plain files

    def _start_workers(self) -> list[_Worker]:
        """Split the rest of a large plain file among worker processes (none when small)."""
        src = self.src
        if self.workers < 2 or self.salvage or not src.seekable:
            return []
        start = self._at()
        rest = src.size - start
        if rest < _PARALLEL_MIN_BYTES:
            return []
        bounds: list[tuple[int, int]] = []
        for j in range(1, self.workers):
            nominal = start + rest * j // self.workers
            window = src.peek_at(nominal, 1 << 20)
            match = _CUT.search(window)
            if match is None:
                return []
            bound = (nominal + match.start() + 1, nominal + match.end())
            if bounds and bound[0] <= bounds[-1][1]:
                return []
            bounds.append(bound)
        pool: list[_Worker] = []
        for j, bound in enumerate(bounds):
            stop = bounds[j + 1] if j + 1 < len(bounds) else None
            pool.append(_Worker(self.path, bound[1], stop))
        self.stop = bounds[0]
        return pool

    def _join_workers(self, pool: list[_Worker]) -> None:
        """Merge the workers' parts, in file order, while each started on a real boundary."""
        if not self.landed:
            return  # the first split point was not a boundary: this process read it all
        end: int | None = None
        for worker in pool:
            result = worker.result()
            if result.error is not None:
                kind, message, offset = result.error
                raise TraceFormatError(message, path=self.path, offset=offset, kind=kind)
            assert result.totals is not None
            self.totals.merge(result.totals)
            if not result.landed:
                end = result.end
                break
        if end is None:  # pragma: no cover - the last worker has no stop, so it never lands
            raise AssertionError("no worker reached the end of traceEvents")  # internal: see above
        self.src.seek(end)
        self.pos = 0

    def segment(self, start: int, stop: tuple[int, int] | None) -> _WorkerResult:
        """Worker side: read events from ``start`` until ``stop`` or the array's end."""
        self.src.seek(start)
        self.pos = 0
        self.stop = stop
        try:
            try:
                self._loop()
            finally:
                self.src.close()
        except TraceFormatError as error:
            kind = error.kind if error.kind is not None else DamageKind.MALFORMED
            message = str(error.args[0]) if error.args else str(error)
            message = message.split(" (")[0] if error.path is not None else message
            return _WorkerResult(
                totals=None, landed=False, end=None, error=(kind, message, error.offset or 0)
            )
        return _WorkerResult(
            totals=self.totals,
            landed=self.landed,
            end=None if self.landed else self.src.base + self.pos,
            error=None,
        )

    def _run(self) -> bool:
        """Decode one run of events from ``pos``; True when the array (or segment) ended."""
        src = self.src
        buf = src.buf
        pos = self.pos
        if self.stop is not None:
            stop_cut = self.stop[0] - src.base
            if stop_cut < pos:
                self.stop = None  # read past it: it was not a boundary
            elif stop_cut - pos <= _RUN and stop_cut <= len(buf):
                outcome = self._try(pos, stop_cut)
                if outcome is _OK:
                    self.pos = self.stop[1] - src.base
                    self.landed = True
                    return True
                self.stop = None  # not a boundary after all: read on without it
                return outcome is _CLOSED
        limit = len(buf) if src.eof else min(len(buf), pos + _RUN)
        if self.stop is not None:
            limit = min(limit, self.stop[0] - src.base)
        if src.eof and limit - pos <= _RUN:
            return self._final_run()
        cuts = self._cuts(pos, limit)
        while True:
            for cut_end, next_start in reversed(cuts):
                outcome = self._try(pos, cut_end)
                if outcome is _WRONG_CUT:
                    continue
                if outcome is _CLOSED:
                    return True
                self.pos = next_start
                return False
            # No usable cut in this window: widen it.
            if src.eof and limit >= len(buf):
                return self._final_run()
            while len(src.buf) < limit * 2 - pos and src.more():
                pass
            buf = src.buf
            new_limit = min(len(buf), pos + (limit - pos) * 2)
            cuts = self._cuts(limit - 1 if limit > pos else pos, new_limit)
            limit = new_limit
            if not cuts and src.eof and limit >= len(buf):
                return self._final_run()

    def _cuts(self, start: int, end: int) -> list[tuple[int, int]]:
        """Candidate event boundaries in buf[start:end]: (end of '}', start of next '{')."""
        buf = self.src.buf
        window = max(start, end - (1 << 16))
        found: list[tuple[int, int]] = []
        while True:
            found = [(m.start() + 1, m.end()) for m in _CUT.finditer(buf, window, end)]
            if found or window <= start:
                return found
            window = max(start, window - (end - window) * 4)

    def _final_run(self) -> bool:
        """Everything left is in the buffer: decode to the end of the array."""
        src = self.src
        self._try(self.pos, len(src.buf), final=True)  # _CLOSED, or it fails
        return True

    def _try(self, start: int, end: int, *, final: bool = False) -> object:
        """Decode buf[start:end] as events; returns _OK, _CLOSED or _WRONG_CUT (or fails)."""
        src = self.src
        # One copy of the run (a join of a view), not a slice and two concatenations.
        body = memoryview(src.buf)[start:end]
        doc = b"".join((b"[", body) if final else (b"[", body, b"]"))
        body.release()
        try:
            events = self._decode(doc, start)
        except RecursionError:
            self._too_deep(start, end)
        except msgspec.DecodeError as error:
            message = _first_line(error)
            byte = _error_byte(message)
            if "trailing characters" in message and byte is not None:
                # The array closed inside this run: decode up to its ']' (msgspec
                # reports the byte after the first trailing character).
                close = doc.rfind(b"]", 0, byte)
                head = doc[: close + 1]
                try:
                    events = self._decode(head, start)
                except RecursionError:
                    self._too_deep(start, start + close)
                except msgspec.DecodeError as inner:
                    return self._damage(start, end, inner, final=final)
                self.totals.add(events, head)
                self.pos = start + close  # doc index i is buf index start + i - 1
                return _CLOSED
            if not final and (byte is None or byte >= len(doc) - 1):
                return _WRONG_CUT
            return self._damage(start, end, error, final=final)
        self.totals.add(events, doc)
        if final:
            self.pos = end
            return _CLOSED
        return _OK

    def _decode(self, doc: bytes, start: int) -> list[_Event]:
        """Typed decode; events with unexpected field types go one by one.

        Raises msgspec.DecodeError for invalid JSON (never ValidationError).
        """
        try:
            return _DECODE_EVENTS.decode(doc)
        except msgspec.ValidationError:
            items: object = _DECODE_ANY.decode(doc)  # DecodeError here is invalid JSON
        if not isinstance(items, list):  # pragma: no cover - doc is an array
            self._fail(DamageKind.WRONG_STRUCTURE, "traceEvents is not an array", self._abs(start))
        out: list[_Event] = []
        for index, item in enumerate(items):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            if not isinstance(item, dict):
                self._fail(
                    DamageKind.WRONG_STRUCTURE,
                    f"traceEvents[{self.totals.events + index}] is not an object",
                    self._abs(start),
                )
            out.append(_event_from_dict(item))  # pyright: ignore[reportUnknownArgumentType]
        return out

    def _abs(self, start: int) -> int:
        return self.src.base + start

    def _damage(self, start: int, end: int, error: msgspec.DecodeError, *, final: bool) -> object:
        message = _first_line(error)
        byte = _error_byte(message)
        if byte is None or "truncated" in message:
            kind = DamageKind.TRUNCATED
            text = "the trace stops mid-event (was the profiler killed while writing?)"
            offset = self.src.base + end
        else:
            kind = DamageKind.MALFORMED
            text = f"invalid JSON in traceEvents: {message.split(' (byte')[0]}"
            offset = self.src.base + start + byte - 1
        if self.salvage:
            self._keep_before(start, offset - self.src.base)
        self._fail(kind, text, offset)

    def _too_deep(self, start: int, end: int) -> NoReturn:
        """An event in buf[start:end] nests deeper than the decoder can recurse.

        The events before it are found by bisecting the event boundaries (a prefix
        decodes exactly when it ends before the deep event), so the damage offset is
        the start of that event, and salvage keeps every event before it.
        """
        cuts = self._cuts_all(start, end)
        best: tuple[int, list[_Event], bytes] | None = None
        low, high = 1, len(cuts)
        while low <= high:
            middle = (low + high) // 2
            doc = b"[" + self.src.buf[start : cuts[middle - 1][0]] + b"]"
            try:
                events = self._decode(doc, start)
            except (msgspec.DecodeError, RecursionError, TraceFormatError, _Salvaged):
                high = middle - 1
                continue
            best = (middle, events, doc)
            low = middle + 1
        damage_at = start if best is None else cuts[best[0] - 1][1]
        if self.salvage and best is not None:
            self.totals.add(best[1], best[2])
        self._fail(
            DamageKind.MALFORMED,
            "an event nests arrays or objects too deeply to decode (no profiler writes that)",
            self.src.base + damage_at,
        )

    def _keep_before(self, start: int, damage_at: int) -> None:
        """Salvage: add every complete event in buf[start:damage_at]."""
        for cut_end, _ in reversed(self._cuts_all(start, damage_at)):
            doc = b"[" + self.src.buf[start:cut_end] + b"]"
            try:
                events = self._decode(doc, start)
            except (msgspec.DecodeError, RecursionError, _Salvaged):
                continue
            self.totals.add(events, doc)
            return

    def _cuts_all(self, start: int, end: int) -> list[tuple[int, int]]:
        buf = self.src.buf
        cuts = [(m.start() + 1, m.end()) for m in _CUT.finditer(buf, start, max(start, end))]
        # The last event before the damage may be followed directly by it.
        return cuts


_OK: Final = object()
_CLOSED: Final = object()
_WRONG_CUT: Final = object()


def _reject_constant(name: str) -> NoReturn:
    raise InvalidInputError(f"{name} is not valid JSON")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _error_byte(message: str) -> int | None:
    match = _ERROR_BYTE.search(message)
    return None if match is None else int(match.group(1))


def _event_from_dict(item: dict[object, object]) -> _Event:
    def text(key: str) -> str | None:
        value = item.get(key)
        return value if isinstance(value, str) else None

    def number(key: str) -> int | float | None:
        value = item.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value

    dur = item.get("dur")
    return _Event(
        ph=text("ph"),
        cat=text("cat"),
        name=msgspec.Raw(msgspec.json.encode(item.get("name"))),
        ts=number("ts"),
        dur=dur if isinstance(dur, int | float | str) and not isinstance(dur, bool) else None,
        args=msgspec.Raw(msgspec.json.encode(item.get("args"))),
    )


@final
@attrs.frozen
class _WorkerResult:
    totals: _Totals | None
    landed: bool
    end: int | None
    error: tuple[DamageKind, str, int] | None


@final
class _Worker:
    """One child process reading a segment of a plain trace (``python -m ..._trace_worker``)."""

    def __init__(self, path: str, start: int, stop: tuple[int, int] | None) -> None:
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
        self._process.stdin.write(pickle.dumps((path, start, stop)))
        self._process.stdin.close()

    def result(self) -> _WorkerResult:
        assert self._process.stdout is not None
        data = self._process.stdout.read()
        self._process.wait()
        if self._process.returncode != 0 or not data:
            raise TraceFormatError(
                f"a trace worker process failed (exit status {self._process.returncode})"
            )
        result = pickle.loads(data)
        if not isinstance(result, _WorkerResult):  # pragma: no cover - defensive
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

    path, start, stop = pickle.loads(sys.stdin.buffer.read())
    parser = _Parser(path, salvage=False, progress=None, always_launches=True)
    result = parser.segment(start, stop)
    sys.stdout.buffer.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


# ---------------------------------------------------------------- public readers


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
        return _Parser(name, salvage=salvage, progress=progress, workers=count).parse()
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
    rest of the machine keeps busy; where it is unknown (Windows) every core counts
    as idle.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - Windows
        load = 0.0
    return max(1, min(4, cpus, int(cpus - load)))


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
    files = list(_trace_files(paths))
    if not files:
        shown = (
            os.fspath(paths) if isinstance(paths, str | PathLike) else ", ".join(map(str, paths))
        )
        raise TraceFormatError("no trace files found", path=shown)
    tables = (
        [read_chrome_trace(f, salvage=salvage, progress=progress, workers=workers) for f in files]
        if executor is None
        else _read_on(executor, files, salvage=salvage, progress=progress, workers=workers)
    )
    tables.sort(key=_rank_key)
    if not allow_mixed_jobs:
        _refuse_mixed_jobs([table.sources[0] for table in tables])
    merged = KernelTable.empty()
    for table in tables:
        merged = merged + table
    if len(tables) == 1:
        merged = tables[0]
    return ChromeTraceSet(per_rank=tuple(tables), merged=merged)


@final
@attrs.frozen
class _Raised:
    """What a task's own read raised, returned as a value so that it is told apart from
    a failure of the executor (which ``Future.result()`` raises)."""

    error: Exception


def _read_task(path: str, salvage: bool, workers: int) -> KernelTable | _Raised:
    """One file's table, read where the executor runs it (top level: it must pickle)."""
    try:
        return read_chrome_trace(path, salvage=salvage, workers=workers)
    except Exception as error:  # re-raised by _read_on, on the caller's side
        return _Raised(error)


def _read_on(
    executor: Executor,
    files: Sequence[str],
    *,
    salvage: bool,
    progress: ProgressCallback | None,
    workers: int | None,
) -> list[KernelTable]:
    """Every file's table read through ``executor``, in the order of ``files``."""
    if not isinstance(executor, Executor):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise InvalidInputError(
            f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}"
        )
    count = 1 if workers is None else _worker_count(workers)
    futures: list[Future[KernelTable | _Raised]] = []
    try:
        for path in files:
            try:
                futures.append(executor.submit(_read_task, path, salvage, count))
            except Exception as error:
                raise _executor_error("refused", path, error) from error
        tables: list[KernelTable] = []
        for path, future in zip(files, futures, strict=True):
            try:
                result = future.result()
            except Exception as error:
                raise _executor_error("lost", path, error) from error
            if isinstance(result, _Raised):
                raise result.error
            tables.append(result)
            if progress is not None:
                size = _size(path)
                progress(0, size)
                progress(size, size)
        return tables
    finally:
        for future in futures:
            future.cancel()


def _executor_error(what: str, path: str, error: BaseException) -> TraceFormatError:
    return TraceFormatError(
        f"the executor {what} the read: {type(error).__name__}: {_first_line(error)}", path=path
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


def _rank_key(table: KernelTable) -> tuple[int, str]:
    source = table.sources[0]
    return (source.rank if source.rank is not None else 1 << 30, source.path)


def _trace_files(paths: str | PathLike[str] | Sequence[str | PathLike[str]]) -> Iterator[str]:
    items: Iterable[str | PathLike[str]] = [paths] if isinstance(paths, str | PathLike) else paths
    for item in items:
        name = os.fspath(item)
        if os.path.isdir(name):
            for child in sorted(Path(name).iterdir()):
                if child.is_file() and _looks_like_trace(child):
                    yield str(child)
        else:
            yield name


def _looks_like_trace(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    if head.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)):
        return True
    stripped = head.lstrip(b"\xef\xbb\xbf").lstrip(_WS)
    return stripped[:1] in (b"{", b"[")


# -------------------------------------------------------------- key_averages()


def table_from_key_averages(events: Iterable[object]) -> KernelTable:
    """A KernelTable from ``prof.key_averages()`` (``FunctionEventAvg`` objects).

    Kernel rows are the device rows: ``device_type`` other than CPU (CUDA, XPU,
    MTIA, PrivateUse1...), user annotations left out. On the legacy profiler path
    (``is_legacy``: CUDA-event timing, no kernel rows) the CPU op rows carry the
    device time, so they are the rows. ``naive_device_us`` is the sum of self
    device time over every row: what summing the column would have said.
    """
    items = list(events)
    converted = [_averaged(item) for item in items]
    legacy = any(c.legacy for c in converted) and not any(c.on_device for c in converted)
    rows: list[KernelRow] = []
    excluded: list[Exclusion] = []
    naive = 0
    for c in converted:
        naive += c.self_ns
        if c.annotation:
            reason = ExclusionReason.GPU_USER_ANNOTATION if c.on_device else ExclusionReason.CPU_OP
            excluded.append(Exclusion(reason=reason, events=1, total_us=c.self_ns / 1000))
        elif c.on_device or (legacy and c.self_ns > 0):
            rows.append(KernelRow.named(c.name, calls=c.calls, device_us=c.self_ns / 1000))
        elif _RUNTIME_NAME.match(c.name):
            excluded.append(
                Exclusion(reason=ExclusionReason.RUNTIME_CALL, events=1, total_us=c.self_ns / 1000)
            )
        else:
            excluded.append(
                Exclusion(reason=ExclusionReason.CPU_OP, events=1, total_us=c.self_ns / 1000)
            )
    return KernelTable.of_rows(rows, excluded=excluded, naive_device_us=naive / 1000)


_RUNTIME_NAME: Final = regex.compile(r"(?:cuda|cu|hip|hsa|mtia|xpu|ze|ur)[A-Z]")


@final
@attrs.frozen(kw_only=True)
class _Averaged:
    name: str
    calls: int
    self_ns: int
    on_device: bool
    legacy: bool
    annotation: bool


def _averaged(item: object) -> _Averaged:
    name = getattr(item, "key", None)
    if not isinstance(name, str) or not name:
        raise TraceFormatError(
            f"not a key_averages() event: {type(item).__name__} has no string 'key'"
        )
    count = getattr(item, "count", 0)
    self_us = getattr(item, "self_device_time_total", None)
    if self_us is None:
        self_us = getattr(item, "self_cuda_time_total", 0.0)
    if isinstance(self_us, bool) or not isinstance(self_us, int | float) or self_us < 0:
        raise TraceFormatError(f"{name!r} has no usable self device time ({self_us!r})")
    device_type = getattr(item, "device_type", None)
    device_name = getattr(device_type, "name", "CPU")
    return _Averaged(
        name=name,
        calls=count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0,
        self_ns=round(float(self_us) * 1000),
        on_device=isinstance(device_name, str) and device_name != "CPU",
        legacy=getattr(item, "is_legacy", False) is True,
        annotation=getattr(item, "is_user_annotation", False) is True,
    )
