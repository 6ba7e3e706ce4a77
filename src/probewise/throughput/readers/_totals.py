"""Events to a table: what each trace event counts as, summed in integer nanoseconds.

:class:`Totals` accumulates what the parser (:mod:`._events`) decodes, run by run, and
gives the file's :class:`~probewise.throughput._kernel_rows.TableParts` at the end (the
table builds itself from them). Which category counts as what is specified in
docs/reference/chrome-trace.md ("Categories").

A run of events reaches the totals by one of three paths, each where the one before
declines: the compiled scanner where it was built (:class:`._native.NativePath`, whose
``add_scanned`` adds what ``_scan.c`` found), the fast path (:class:`._fastpath.FastPath`,
which decodes the run once as a tagged union on ``cat`` and adds it with
``add_tagged``), and the exact path, which decodes every event into an :class:`Event`
for :meth:`Totals.add_exact`. All three give the same totals in the same order
(tests/throughput/readers/test_chrome_native.py and test_chrome_fastpath.py). A worker's
totals of another part of the file join by :meth:`Totals.add_segment`. Per run, the
work outside the decode is a few C-level passes (a ``Counter``, ``itertools.compress``
to pick the device-lane events and launches); only device events and launches reach
Python code, and the event structs are not tracked by the cyclic garbage collector.
"""

from __future__ import annotations

import json
import operator
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from typing import TYPE_CHECKING, Annotated, Final, cast, final

import msgspec

from probewise.errors import DamageKind, TraceFormatError
from probewise.throughput._kernel_rows import (
    Exclusion,
    ExclusionReason,
    KernelKind,
    KernelRow,
    StepBreakdown,
    TableParts,
    TraceSource,
)
from probewise.throughput.readers._spill import DEVICE, KEY, LAUNCH, Area, Store
from probewise.throughput.readers._steps import STEP_RAW, join, merge_steps, step_names

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DECODE_ANY",
    "DECODE_EVENTS",
    "K_ANNOTATION",
    "K_CPU",
    "K_KERNEL",
    "K_MEMCPY",
    "K_MEMSET",
    "K_OTHER",
    "K_RUNTIME",
    "K_SYNC",
    "Args64",
    "Event",
    "Totals",
    "add_row",
    "category",
    "role_of",
]


class Event(msgspec.Struct, gc=False):
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


DECODE_EVENTS: Final = msgspec.json.Decoder(list[Event])
"""The exact path's decoder: a JSON array of events."""


class _Args(msgspec.Struct):
    correlation: int | None = None


_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class Args64(msgspec.Struct):
    """``args`` where the correlation must be a 64-bit int (or absent/null)."""

    correlation: _Int64 | None = None


_DECODE_ARGS: Final = msgspec.json.Decoder(_Args)
_DECODE_ARGS_LIST: Final = msgspec.json.Decoder(list[Args64])
DECODE_ANY: Final = msgspec.json.Decoder(float_hook=float)
"""Any JSON value, as Python objects; a number past a float's range (``1e400``) is read
as Python's ``json`` reads it (an infinity), not refused as msgspec's typed decode does."""
_CORRELATION: Final = re.compile(rb'"correlation"[ \t\r\n]*+:[ \t\r\n]*+(-?[0-9]{1,19})(?![0-9])')
_CAT: Final = operator.attrgetter("cat")
_PH: Final = operator.attrgetter("ph")
_PH_CAT: Final = operator.attrgetter("ph", "cat")
_CORRELATION_OF: Final = operator.attrgetter("correlation")
_NAME: Final = operator.attrgetter("name")
_DUR: Final = operator.attrgetter("dur")
_TS: Final = operator.attrgetter("ts")
_ARGS: Final = operator.attrgetter("args")

# Category codes.
K_KERNEL, K_MEMCPY, K_MEMSET = 0, 1, 2
K_ANNOTATION, K_SYNC, K_CPU, K_RUNTIME, K_OTHER = 3, 4, 5, 6, 7
_CATEGORIES: Final[dict[str | None, int]] = {
    "kernel": K_KERNEL,
    "Kernel": K_KERNEL,
    "mtia_ccp_events": K_KERNEL,
    "gpu_memcpy": K_MEMCPY,
    "Memcpy": K_MEMCPY,
    "gpu_memset": K_MEMSET,
    "Memset": K_MEMSET,
    "gpu_user_annotation": K_ANNOTATION,
    "cuda_sync": K_SYNC,
    "cpu_op": K_CPU,
    "Operator": K_CPU,
    "user_annotation": K_CPU,
    "python_function": K_CPU,
    "cpu_instant_event": K_CPU,
    "cuda_runtime": K_RUNTIME,
    "cuda_driver": K_RUNTIME,
    "Runtime": K_RUNTIME,
}
_EXCLUSION_OF: Final = {
    K_ANNOTATION: ExclusionReason.GPU_USER_ANNOTATION,
    K_SYNC: ExclusionReason.STREAM_SYNC,
    K_CPU: ExclusionReason.CPU_OP,
    K_RUNTIME: ExclusionReason.RUNTIME_CALL,
    K_OTHER: ExclusionReason.OTHER,
}


_ROLE_LAUNCH: Final = 5  # _scan.c's ROLE_LAUNCH
_ROLE_COUNT: Final = -1


def role_of(cat: str | None, *, launches: bool) -> int:
    """What the compiled scanner makes of a category's events (``_scan.c``, ``role``).

    -1: only counted; 0-4: a device-lane code (kernel, copy, fill, GPU annotation,
    stream sync); 5: a launch, whose correlation id and start are kept (``launches``:
    the run may need them for the per-step breakdown).
    """
    code = category(cat)
    if code <= K_SYNC:
        return code
    return _ROLE_LAUNCH if code == K_RUNTIME and launches else _ROLE_COUNT


def category(cat: str | None) -> int:
    code = _CATEGORIES.get(cat)
    if code is not None:
        return code
    if cat is not None and cat.endswith("_runtime"):
        return K_RUNTIME
    return K_OTHER


@final
class Totals:
    """Everything one file contributes, accumulated in integer nanoseconds.

    Most events are host-side and only counted: one C-level ``Counter`` pass over
    ``(ph, cat)``. Only device-lane events (kernels, copies, fills, GPU annotations,
    syncs), launches (for steps) and ``ProfilerStep#N`` spans get a Python loop.
    """

    def __init__(self, *, always_launches: bool = False, area: Area | None = None) -> None:
        # code -> raw name -> [calls, ns]
        self.rows: dict[int, dict[bytes, list[int]]] = {K_KERNEL: {}, K_MEMCPY: {}, K_MEMSET: {}}
        self.cat_counts: Counter[str | None] = Counter()
        self.not_span_counts: Counter[str | None] = Counter()
        self.lane_ns: dict[int, int] = {}  # annotation / sync code -> ns
        self.malformed = 0
        self.naive_ns = 0
        self.steps: list[tuple[float, float, int]] = []  # (ts, dur, step number)
        # Launches are only needed for the per-step breakdown. Kineto writes the
        # ProfilerStep spans (host ops) before the runtime calls, so launches are
        # collected once a step has been seen; if a step turns up after launches
        # were skipped, the file is read again with always_launches (see _events.Parser).
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
        # Past area.limit bytes, the columns above go to disk (see _spill).
        self.area = Area() if area is None else area
        self.store = Store()
        self.events = 0
        self._name_crc = _CrcCache()

    def add_exact(self, events: list[Event], doc: bytes) -> None:
        """The exact path: add a run whose events were decoded one by one into :class:`Event`."""
        self.events += len(events)
        # One C-level pass counts (ph, cat); the per-category counts follow from it.
        cats: Counter[str | None] = Counter()
        for (ph, cat), n in Counter(map(_PH_CAT, events)).items():
            cats[cat] += n
            if ph != "X":
                self.not_span_counts[cat] += n
        self.cat_counts.update(cats)
        found = step_names(doc)  # one scan of the run's bytes
        if found:
            # One pass: only names of a step name's length (picked in C) are compared.
            names = list(map(_NAME, events))
            lengths = {len(target) for target in found}
            for at in compress(range(len(names)), map(lengths.__contains__, map(len, names))):
                if bytes(names[at]) in found:
                    self.add_step(events[at])
        lane_cats = {cat for cat in cats if category(cat) <= K_SYNC}
        runtime_cats = {cat for cat in cats if category(cat) == K_RUNTIME}
        if runtime_cats and not (self.steps or self.always_launches):
            self.skipped_launches += sum(cats[cat] for cat in runtime_cats)
            runtime_cats = set[str | None]()
        # The few events that need more than counting, picked in C (no Python loop).
        wanted = lane_cats | runtime_cats
        if not wanted:
            return
        picked = _select(events, wanted) if len(wanted) < len(cats) else events
        if lane_cats:
            self.add_lane(_select(picked, lane_cats) if runtime_cats else picked)
        if not runtime_cats:
            return
        launches = _select(picked, runtime_cats) if lane_cats else picked
        self.add_launches(_correlations(launches), list(map(_TS, launches)))

    def add_launches(self, corrs: list[int | None], times: list[int | float | None]) -> None:
        """Keep each launch's correlation id and start (those without one are dropped)."""
        if None not in corrs and None not in times:
            self.launch_corr.extend(cast("list[int]", corrs))
            self.launch_ts.extend(cast("list[float]", times))
        else:
            for corr, ts in zip(corrs, times, strict=True):
                if corr is not None and ts is not None:
                    self.launch_corr.append(corr)
                    self.launch_ts.append(ts)
        self.bound()

    def column_bytes(self) -> int:
        """Bytes the per-launch and per-device-event columns hold in memory."""
        return 16 * len(self.launch_corr) + 17 * len(self.device_corr) + 8 * len(self.device_keys)

    def bound(self) -> None:
        if self.column_bytes() > self.area.limit:
            self.spill()

    def spill(self) -> None:
        """Move the columns held in memory to disk (after those spilled before)."""
        import numpy as np

        store, area = self.store, self.area
        if self.launch_corr:
            store.write(area, LAUNCH, self._launch_columns())
            self.launch_corr, self.launch_ts = array("q"), array("d")
        if self.device_corr:
            store.write(area, DEVICE, self._device_columns())
            self.device_corr, self.device_code, self.device_ns = array("q"), array("b"), array("q")
        if self.device_keys:
            store.write(area, KEY, [np.frombuffer(self.device_keys, np.int64)])
            self.device_keys = array("q")

    def _launch_columns(self) -> list[npt.NDArray[np.generic]]:
        """Views of the launch columns (the arrays cannot grow while one is alive)."""
        import numpy as np

        return [np.frombuffer(self.launch_corr, np.int64), np.frombuffer(self.launch_ts)]

    def _device_columns(self) -> list[npt.NDArray[np.generic]]:
        import numpy as np

        return [
            np.frombuffer(self.device_corr, np.int64),
            np.frombuffer(self.device_code, np.int8),
            np.frombuffer(self.device_ns, np.int64),
        ]

    def finish_segment(self) -> None:
        """Worker side, before the totals are pickled back: hand back files, not big columns."""
        if self.store.batches or self.column_bytes() > self.area.limit // 4:
            self.spill()

    def add_segment(self, other: Totals) -> None:
        """The workers' path: add what a worker read from another part of the same file."""
        self.events += other.events
        for code, table in other.rows.items():
            for name, (calls, ns) in table.items():
                add_row(self.rows[code], name, calls, ns)
        self.cat_counts.update(other.cat_counts)
        self.not_span_counts.update(other.not_span_counts)
        for code, ns in other.lane_ns.items():
            self.lane_ns[code] = self.lane_ns.get(code, 0) + ns
        self.malformed += other.malformed
        self.naive_ns += other.naive_ns
        self.steps.extend(other.steps)
        if other.store.batches:  # its rows come after all of mine: spill mine first
            self.spill()
            self.store.batches.extend(other.store.batches)
        self.launch_corr.extend(other.launch_corr)
        self.launch_ts.extend(other.launch_ts)
        self.device_corr.extend(other.device_corr)
        self.device_code.extend(other.device_code)
        self.device_ns.extend(other.device_ns)
        self.device_keys.extend(other.device_keys)
        self.bound()

    def add_step(self, event: Event) -> None:
        if event.ph != "X" or event.ts is None or category(event.cat) not in (K_CPU, K_OTHER):
            return
        match = STEP_RAW.match(event.name)
        if match is not None:
            ns = max(_dur_ns(event.dur), 0)
            self.steps.append((float(event.ts), ns / 1000, int(match.group(1))))

    def add_lane(self, events: list[Event]) -> None:
        keep = bool(self.steps) or self.always_launches
        # Each code's spans in the order they come (two spellings of one kind, "Kernel"
        # and "kernel", interleave as in the file); a code seen only in non-spans too.
        code_of = {cat: category(cat) for cat in dict.fromkeys(map(_CAT, events))}
        spans = list(compress(events, map(operator.eq, map(_PH, events), repeat("X"))))
        codes = dict.fromkeys(code_of.values())
        by_code: dict[int, list[Event]] = {}
        if len(codes) == 1:
            by_code[next(iter(codes))] = spans
        else:
            span_codes = list(map(code_of.__getitem__, map(_CAT, spans)))
            for code in codes:
                by_code[code] = list(compress(spans, map(code.__eq__, span_codes)))
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
            if code > K_MEMSET:  # GPU annotation or stream sync
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
                        map(self._name_crc.__getitem__, names),
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
        self.bound()

    def _exclusions(self) -> list[Exclusion]:
        events: dict[ExclusionReason, int] = {}
        for cat, n in self.cat_counts.items():
            not_spans = self.not_span_counts.get(cat, 0)
            if not_spans:
                events[ExclusionReason.NOT_A_SPAN] = (
                    events.get(ExclusionReason.NOT_A_SPAN, 0) + not_spans
                )
            code = category(cat)
            if n == not_spans or code <= K_MEMSET:
                continue  # device rows (the malformed ones are counted below)
            reason = _EXCLUSION_OF[code]
            events[reason] = events.get(reason, 0) + n - not_spans
        if self.malformed:
            events[ExclusionReason.MALFORMED] = self.malformed
        ns_of = {
            ExclusionReason.GPU_USER_ANNOTATION: self.lane_ns.get(K_ANNOTATION, 0),
            ExclusionReason.STREAM_SYNC: self.lane_ns.get(K_SYNC, 0),
        }
        return [
            Exclusion(reason=reason, events=n, total_us=ns_of.get(reason, 0) / 1000)
            for reason, n in events.items()
        ]

    def duplicate_note(self) -> str | None:
        """A note when some device events are exact copies of others (None when none are)."""
        import numpy as np

        parts: Iterator[npt.NDArray[np.generic]]
        if self.store.batches:  # a key's copies are all in its partition
            self.spill()
            parts = (keys for (keys,) in self.store.partitions(KEY, self.area))
        else:
            parts = iter([np.frombuffer(self.device_keys, dtype=np.int64)])
        copies = sum(int(keys.size - np.unique(keys).size) for keys in parts)
        if not copies:
            return None
        return (
            f"{copies:,} kernel/copy/fill events are exact duplicates of another event (same "
            "name, args, start and duration); Kineto never records one activity twice, so the "
            "file was probably assembled twice (a merge or concatenation run again). They are "
            "summed as found, not dropped: check the file before trusting the totals"
        )

    def parts(self, source: TraceSource, path: str, *, lossy_names: bool) -> TableParts:
        """The file's rows (names decoded, kinds classified), exclusions and steps."""
        rows: list[KernelRow] = []
        for code, raw, (calls, ns) in (
            (code, raw, entry) for code, table in self.rows.items() for raw, entry in table.items()
        ):
            name = _decode_name(raw, path, lossy=lossy_names) or "(unnamed)"
            if code == K_MEMCPY:
                kind = KernelKind.MEMCPY
            elif code == K_MEMSET:
                kind = KernelKind.MEMSET
            else:
                kind = KernelKind.of(name)
                if kind.is_transfer:  # a kernel that copies is elementwise work
                    kind = KernelKind.ELEMENTWISE
            rows.append(KernelRow(name=name, calls=calls, device_us=ns / 1000, kind=kind))
        # Two spellings of one name (JSON escapes) are two rows here: the table sums them.
        excluded = self._exclusions()
        return TableParts(
            rows=tuple(rows),
            excluded=tuple(excluded),
            naive_device_us=self.naive_ns / 1000,
            steps=tuple(self._steps()),
            sources=(source,),
        )

    def _steps(self) -> list[StepBreakdown]:
        if not self.steps:
            return []
        import numpy as np

        spans = sorted(self.steps)
        starts = np.array([ts for ts, _, _ in spans], dtype=np.float64)
        ends = starts + np.array([dur for _, dur, _ in spans], dtype=np.float64)
        # Integer ns per (step, code) in int64 (codes are K_KERNEL, K_MEMCPY,
        # K_MEMSET: 0, 1, 2), and device events per step.
        totals = np.zeros(len(spans) * 3, dtype=np.int64)
        counts = np.zeros(len(spans), dtype=np.int64)
        if self.store.batches:  # one partition at a time: sums of integers, any grouping
            self.spill()
            for launches, device in self.store.joined((LAUNCH, DEVICE), self.area):
                join((starts, ends), launches, device, totals, counts)
        else:
            join((starts, ends), self._launch_columns(), self._device_columns(), totals, counts)
        out = [
            StepBreakdown(
                step=number,
                span_us=dur,
                kernel_us=int(totals[3 * i + K_KERNEL]) / 1000,
                memcpy_us=int(totals[3 * i + K_MEMCPY]) / 1000,
                memset_us=int(totals[3 * i + K_MEMSET]) / 1000,
                device_events=int(counts[i]),
            )
            for i, (_, dur, number) in enumerate(spans)
        ]
        return merge_steps(out)


def add_row(table: dict[bytes, list[int]], name: bytes, calls: int, ns: int) -> None:
    """Add ``calls`` events and ``ns`` to ``table``'s row of ``name`` (made where missing)."""
    entry = table.get(name)
    if entry is None:
        table[name] = [calls, ns]
    else:
        entry[0] += calls
        entry[1] += ns


def _durations_ns(events: list[Event]) -> list[int]:
    """Each event's duration in integer ns (-1 where it is unusable)."""
    durations: list[int | float | str | None] = list(map(_DUR, events))
    numbers = [d for d in durations if type(d) is float or type(d) is int]
    # Bounds first: a finite duration past 1.8e305 us is an infinity in ns.
    if len(numbers) == len(durations) and (not numbers or 0 <= min(numbers) <= max(numbers) < 1e15):
        return [round(d * 1000) for d in numbers]
    return [_dur_ns(d) for d in durations]


def _select(events: list[Event], cats: set[str | None]) -> list[Event]:
    """The events whose ``cat`` is in ``cats``, in order (one C-level pass)."""
    return list(compress(events, map(cats.__contains__, map(_CAT, events))))


def _correlations(events: list[Event]) -> list[int | None]:
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
        value = DECODE_ANY.decode(raw)
    except msgspec.DecodeError:
        if lossy:  # salvage: keep the row under a readable name
            return raw.decode("utf-8", "replace").strip('"')
        raise TraceFormatError(
            "an event name is not valid UTF-8 JSON text", path=path, kind=DamageKind.MALFORMED
        ) from None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


@final
class _CrcCache(dict[bytes, int]):
    """``zlib.crc32`` of each distinct kernel name, computed once per file."""

    def __missing__(self, key: bytes) -> int:
        value = self[key] = zlib.crc32(key)
        return value
