"""The bytes of one trace file: plain, gzip or zstd (by content), inflated on a thread.

:class:`Source` hands the parser (:mod:`._events`) the decompressed bytes block by
block in a sliding buffer. gzip and zstd are detected from the magic bytes, never from
the file name; either is inflated on a background thread (:class:`_Inflater`; gzip with
python-isal or zlib-ng when one is installed, else zlib; zstd needs the ``zstd`` extra,
``zstandard``), so the parse does not wait for it. Where the compressed stream breaks,
a salvaging read keeps what was inflated and :attr:`Source.broken` says where.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, Final, NoReturn, Protocol, cast, final

import attrs

from probewise._extras import Extra, requires
from probewise.errors import DamageKind, MissingExtraError, TraceFormatError
from probewise.throughput._kernel_rows import ProgressCallback

__all__ = ["GZIP_MAGIC", "WHITESPACE", "ZSTD_MAGIC", "Source"]

_BLOCK: Final = 4 << 20  # bytes decompressed / read per block
GZIP_MAGIC: Final = b"\x1f\x8b"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
WHITESPACE: Final = b" \t\r\n"
"""The bytes JSON allows between tokens."""


class Source:
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
        if head.startswith(GZIP_MAGIC):
            self._inflater = _Inflater(self._file, zstd=False)
        elif head == ZSTD_MAGIC:
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

    python-isal (``isal.isal_zlib``, the ``gzip`` extra) inflates about 2.4x faster
    than zlib; zlib-ng's ``zlib_ng`` also beats it. Neither is a dependency: the
    inflate runs on its own thread, so with a second core it is hidden behind the
    parse, and only a machine with no free core sees its CPU (docs/measurements.md);
    either one is used when it is installed.
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
