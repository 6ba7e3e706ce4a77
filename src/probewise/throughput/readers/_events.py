"""Streaming JSON: the ``traceEvents`` array decoded in runs of whole events; damage, salvage.

The file is read in blocks of a few MiB (:mod:`._source`) and the ``traceEvents``
array is decoded in runs of whole events with msgspec (which validates every byte as
JSON but only builds the handful of fields a kernel table needs), so peak memory does
not grow with the size of the trace; :mod:`._totals` sums each run. Every failure is a
:class:`~probewise.TraceFormatError` with a :class:`~probewise.errors.DamageKind` and
the byte offset where it was found; a salvaging read keeps every complete event before
the damage instead. A large plain file may be split among worker processes
(:class:`Parser` takes how to start one, ``spawn``: see :mod:`._workers`). The format
and the damage rules are specified in docs/reference/chrome-trace.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final, NoReturn, Protocol, cast, final

import attrs
import msgspec
import regex

from probewise.errors import DamageKind, InvalidInputError, SpillError, TraceFormatError
from probewise.throughput._kernel_rows import Damage, ProgressCallback, TableParts, TraceSource
from probewise.throughput.readers._fastpath import FastPath
from probewise.throughput.readers._native import NativePath
from probewise.throughput.readers._source import Source
from probewise.throughput.readers._spill import Area
from probewise.throughput.readers._totals import DECODE_ANY, DECODE_EVENTS, Event, Totals

__all__ = ["Parser", "Segment", "Spawn", "WorkerResult", "first_line"]

# Target size of one run of events decoded at once: 1 MiB keeps a run's event structs
# in cache for the passes over them (measured faster than 4 MiB and than 256 KiB).
_RUN: Final = 1 << 20
_MAX_VALUE: Final = 256 << 20  # largest non-event top-level value held in memory
# Largest span searched for the end of one event: no profiler writes an event this big,
# and the window that looks for its end must not grow with the file.
_MAX_EVENT: Final = 64 << 20
_TRIES: Final = 8  # candidate cuts tried per window before it is widened
# A string (to its closing quote, or to the end of the window) or a brace: what
# _last_boundary walks to find where events end, '},{' inside strings skipped.
_TOKEN: Final = regex.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\Z)|[{}]')
_NOT_WHITESPACE: Final = regex.compile(rb"[^ \t\r\n]")
_MAX_WORLD_SIZE: Final = 1 << 20  # larger distributedInfo ranks/world sizes are ignored
_PARALLEL_MIN_BYTES: Final = 64 << 20  # plain files at least this big are split among workers
_ERROR_BYTE: Final = regex.compile(r"\(byte (\d+)\)")
_CUT: Final = regex.compile(rb"\}[ \t\r\n]*+,[ \t\r\n]*+(?=\{)")


@final
@attrs.frozen
class WorkerResult:
    """What a worker read from its part of the file (pickled back to the parent)."""

    totals: Totals | None
    landed: bool
    end: int | None
    error: tuple[DamageKind, str, int] | None
    spill_error: str | None = None  # its spill files failed: the parent raises SpillError


class Segment(Protocol):
    """A part of the file being read elsewhere (a worker process: :class:`._workers.Worker`)."""

    def result(self) -> WorkerResult:
        """Wait for the part's totals (or where it failed)."""
        ...

    def cancel(self) -> None:
        """Stop reading the part (the parser is done with it, or gave up)."""
        ...


Spawn = Callable[[str, int, tuple[int, int] | None, Area], Segment]
"""Start reading ``path`` from a byte offset to a stop boundary (None: the array's end),
spilling into the reader's area (:mod:`._spill`)."""


class _Salvaged(Exception):
    """Internal: damage found while salvaging; carries it to the top."""

    def __init__(self, damage: Damage) -> None:
        super().__init__(damage.message)
        self.damage = damage


@final
class Parser:
    def __init__(
        self,
        path: str,
        *,
        salvage: bool,
        progress: ProgressCallback | None,
        always_launches: bool = False,
        workers: int = 1,
        spawn: Spawn | None = None,
        area: Area | None = None,
    ) -> None:
        self.path = path
        # Where the totals spill their columns: this parser's own (removed when parse()
        # returns or raises), or, in a worker process, the parent's.
        self.area = Area() if area is None else area
        self.progress = progress
        self.workers = workers
        self.spawn = spawn
        # A segment ends at this boundary (absolute: end of '}', start of next '{').
        self.stop: tuple[int, int] | None = None
        self.landed = False
        self.src = Source(path, progress, salvage=salvage)
        self.salvage = salvage
        self.totals = Totals(always_launches=always_launches, area=self.area)
        # Tried on every run in this order, each where the one before declines: the
        # compiled scanner (where it was built), the fast path, the exact path.
        self.native = NativePath()
        self.fast = FastPath()
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
            found = _NOT_WHITESPACE.search(buf, self.pos)  # one C pass, not a byte at a time
            if found is not None:
                self.pos = found.start()
                return buf[self.pos]
            pos = self.pos = len(buf)
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

    def parse(self) -> TableParts:
        try:
            parts = self._parse()
        finally:
            self.area.remove()
        if parts is None:
            # A ProfilerStep span came after launches that were not kept: read again.
            again = Parser(
                self.path,
                salvage=self.salvage,
                progress=self.progress,
                always_launches=True,
                workers=self.workers,
                spawn=self.spawn,
            )
            return again.parse()
        return parts

    def _parse(self) -> TableParts | None:
        """The parts of the table; None when the file must be read again, keeping every launch."""
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
            return None
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
        return self.totals.parts(source, self.path, lossy_names=self.salvage)

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
        self.totals = Totals(always_launches=self.totals.always_launches, area=self.area)
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
                # json names where an unterminated string starts, not where the text ended.
                unterminated = str(error).startswith("Unterminated string")
                near_end = unterminated or err_pos >= len(text) - 1
                held = len(src.buf) - self.pos
                if near_end and not src.eof and held < _MAX_VALUE:
                    self.pos = src.compact(self.pos)
                    # Double what is held before decoding again: linear, not quadratic.
                    while len(src.buf) - self.pos < 2 * held and src.more():
                        pass
                    continue
                if near_end and not src.eof:
                    self._fail(
                        DamageKind.MALFORMED,
                        f"{what} is larger than {_MAX_VALUE >> 20} MiB (no profiler writes that)",
                        self._at(),
                    )
                offset = self._at() + len(text[:err_pos].encode("utf-8", "surrogateescape"))
                kind = DamageKind.TRUNCATED if near_end and src.eof else DamageKind.MALFORMED
                self._fail(kind, f"invalid JSON in {what}: {first_line(error)}", offset)
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

    def _start_workers(self) -> list[Segment]:
        """Split the rest of a large plain file among worker processes (none when small)."""
        src = self.src
        spawn = self.spawn
        if self.workers < 2 or spawn is None or self.salvage or not src.seekable:
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
        pool: list[Segment] = []
        self.area.root()  # made here, so that the workers spill into it
        for j, bound in enumerate(bounds):
            stop = bounds[j + 1] if j + 1 < len(bounds) else None
            pool.append(spawn(self.path, bound[1], stop, self.area))
        self.stop = bounds[0]
        return pool

    def _join_workers(self, pool: list[Segment]) -> None:
        """Merge the workers' parts, in file order, while each started on a real boundary."""
        if not self.landed:
            return  # the first split point was not a boundary: this process read it all
        end: int | None = None
        for worker in pool:
            result = worker.result()
            if result.spill_error is not None:
                raise SpillError(result.spill_error)
            if result.error is not None:
                kind, message, offset = result.error
                raise TraceFormatError(message, path=self.path, offset=offset, kind=kind)
            assert result.totals is not None
            self.totals.add_segment(result.totals)
            if not result.landed:
                end = result.end
                break
        if end is None:  # pragma: no cover - the last worker has no stop, so it never lands
            raise AssertionError("no worker reached the end of traceEvents")  # internal: see above
        self.src.seek(end)
        self.pos = 0

    def segment(self, start: int, stop: tuple[int, int] | None) -> WorkerResult:
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
            return WorkerResult(
                totals=None, landed=False, end=None, error=(kind, message, error.offset or 0)
            )
        except SpillError as error:  # the temporary directory, not the trace
            return WorkerResult(
                totals=None, landed=False, end=None, error=None, spill_error=str(error)
            )
        self.totals.finish_segment()
        return WorkerResult(
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
            # The last few candidates only: where they all fall inside one string (a name
            # full of '},{'), trying every one would be quadratic; widening finds its end.
            for cut_end, next_start in reversed(cuts[-_TRIES:]):
                outcome = self._try(pos, cut_end)
                if outcome is _WRONG_CUT:
                    continue
                if outcome is _CLOSED:
                    return True
                self.pos = next_start
                return False
            # No usable cut in this window: widen it, up to _MAX_EVENT.
            if src.eof and limit >= len(buf) and limit - pos <= _MAX_EVENT:
                return self._final_run()
            if limit - pos >= _MAX_EVENT:
                return self._at_cap(pos, limit)
            while len(src.buf) < limit * 2 - pos and src.more():
                pass
            buf = src.buf
            new_limit = min(len(buf), pos + (limit - pos) * 2)
            cuts = self._cuts(limit - 1 if limit > pos else pos, new_limit)
            limit = new_limit
            if not cuts and src.eof and limit >= len(buf) and limit - pos <= _MAX_EVENT:
                return self._final_run()

    def _at_cap(self, pos: int, limit: int) -> bool:
        """The window reached _MAX_EVENT: the array may end inside it (space follows);
        else the events before the one that does not end are read, and that one is
        refused at its start, not held whole."""
        buf = self.src.buf
        end = pos + len(buf[pos:limit].rstrip(b" \t\r\n"))
        if end > pos and buf[end - 1] == ord("]") and self._try(pos, end - 1) is _OK:
            self.pos = end  # the array ends, and only space follows so far
            return True
        outcome = self._try(pos, limit)
        if outcome is _CLOSED:
            return True
        if outcome is _OK:  # the window ended exactly where an event does
            self.pos = limit
            after = self._peek()
            self.pos += 1
            if after == ord(","):
                return False
            if after != ord("]"):
                self.pos -= 1
                self._fail(DamageKind.MALFORMED, "expected ',' or ']' after an event", self._at())
            return True
        boundary = self._last_boundary(pos, limit)
        if boundary is not None and self._try(pos, boundary[0]) is _OK:
            self.pos = boundary[1]
            return False
        self._fail(
            DamageKind.MALFORMED,
            f"no event ends within {_MAX_EVENT >> 20} MiB: an event (a name, a string, "
            "or space between events) is larger than any profiler writes",
            self._at(),
        )

    def _last_boundary(self, start: int, end: int) -> tuple[int, int] | None:
        """The last (end of '}', start of next '{') in buf[start:end] at depth 0, in
        one pass that steps over strings; None where no event ends before ``end``."""
        buf = self.src.buf
        depth = 0
        last: int | None = None
        for match in _TOKEN.finditer(buf, start, end):
            token = buf[match.start()]
            if token == ord("{"):
                depth += 1
            elif token == ord("}"):
                depth -= 1
                if depth == 0:
                    last = match.end()
        if last is None:
            return None
        found = _CUT.match(buf, last - 1, end)
        return None if found is None else (last, found.end())

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
        if not final and self.native.add(self.totals, src.buf, start, end):
            return _OK
        # One copy of the run (a join of a view), not a slice and two concatenations.
        body = memoryview(src.buf)[start:end]
        doc = b"".join((b"[", body) if final else (b"[", body, b"]"))
        body.release()
        if not final and self.fast.add(self.totals, doc):
            return _OK
        try:
            events = self._decode(doc, start)
        except RecursionError:
            self._too_deep(start, end)
        except msgspec.DecodeError as error:
            message = first_line(error)
            byte = _error_byte(message)
            if "trailing characters" in message and byte is not None:
                # The array closed inside this run: decode up to its ']' (msgspec
                # reports the byte after the first trailing character).
                close = doc.rfind(b"]", 0, byte)
                head = doc[: close + 1]
                if self.fast.add(self.totals, head):
                    self.pos = start + close
                    return _CLOSED
                try:
                    events = self._decode(head, start)
                except RecursionError:
                    self._too_deep(start, start + close)
                except msgspec.DecodeError as inner:
                    return self._damage(start, end, inner, final=final)
                self.totals.add_exact(events, head)
                self.pos = start + close  # doc index i is buf index start + i - 1
                return _CLOSED
            if not final and (byte is None or byte >= len(doc) - 1):
                return _WRONG_CUT
            return self._damage(start, end, error, final=final)
        self.totals.add_exact(events, doc)
        if final:
            self.pos = end
            return _CLOSED
        return _OK

    def _decode(self, doc: bytes, start: int) -> list[Event]:
        """Typed decode; events with unexpected field types go one by one.

        Raises msgspec.DecodeError for invalid JSON (never ValidationError).
        """
        try:
            return DECODE_EVENTS.decode(doc)
        except msgspec.ValidationError:
            items: object = DECODE_ANY.decode(doc)  # DecodeError here is invalid JSON
        if not isinstance(items, list):  # pragma: no cover - doc is an array
            self._fail(DamageKind.WRONG_STRUCTURE, "traceEvents is not an array", self._abs(start))
        out: list[Event] = []
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
        message = first_line(error)
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
        best: tuple[int, list[Event], bytes] | None = None
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
            self.totals.add_exact(best[1], best[2])
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
            self.totals.add_exact(events, doc)
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


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _error_byte(message: str) -> int | None:
    match = _ERROR_BYTE.search(message)
    return None if match is None else int(match.group(1))


def _event_from_dict(item: dict[object, object]) -> Event:
    def text(key: str) -> str | None:
        value = item.get(key)
        return value if isinstance(value, str) else None

    def number(key: str) -> int | float | None:
        value = item.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return value

    dur = item.get("dur")
    return Event(
        ph=text("ph"),
        cat=text("cat"),
        name=msgspec.Raw(msgspec.json.encode(item.get("name"))),
        ts=number("ts"),
        dur=dur if isinstance(dur, int | float | str) and not isinstance(dur, bool) else None,
        args=msgspec.Raw(msgspec.json.encode(item.get("args"))),
    )
