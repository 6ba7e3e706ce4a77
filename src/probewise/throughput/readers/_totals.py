"""Events to a table: what each trace event counts as, summed in integer nanoseconds.

:class:`Totals` accumulates what the parser (:mod:`._events`) decodes, run by run, and
gives the file's :class:`~probewise.throughput._kernel_rows.TableParts` at the end (the
table builds itself from them). Which category counts as what is specified in
docs/reference/chrome-trace.md ("Categories").

A run of events is first offered to the compiled scanner where it was built
(``_native``, ``_scan.c``; what it finds is added by :meth:`Totals.absorb`), then to
:class:`FastPath`, which decodes it once as a tagged union on ``cat`` (host events
keep only ``ph``; launches keep ``ts`` and their correlation) and hands it to
:meth:`Totals.tally`; where its decode raises, the exact path decodes every event into
an :class:`Event` for :meth:`Totals.add`. All three give the same totals in the same
order (tests/throughput/readers/test_chrome_native.py and test_chrome_fastpath.py). Per run, the
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
from typing import TYPE_CHECKING, Annotated, ClassVar, Final, Literal, Union, cast, final

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

    from probewise.throughput.readers._scan import Scanned

__all__ = ["DECODE_ANY", "DECODE_EVENTS", "Event", "FastPath", "Totals", "role_of"]


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


class _Args64(msgspec.Struct):
    """``args`` where the correlation must be a 64-bit int (or absent/null)."""

    correlation: _Int64 | None = None


_DECODE_ARGS: Final = msgspec.json.Decoder(_Args)
_DECODE_ARGS_LIST: Final = msgspec.json.Decoder(list[_Args64])
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


_ROLE_LAUNCH: Final = 5  # _scan.c's ROLE_LAUNCH
_ROLE_COUNT: Final = -1


def role_of(cat: str | None, *, launches: bool) -> int:
    """What the compiled scanner makes of a category's events (``_scan.c``, ``role``).

    -1: only counted; 0-4: a device-lane code (kernel, copy, fill, GPU annotation,
    stream sync); 5: a launch, whose correlation id and start are kept (``launches``:
    the run may need them for the per-step breakdown).
    """
    code = _category(cat)
    if code <= _K_SYNC:
        return code
    return _ROLE_LAUNCH if code == _K_RUNTIME and launches else _ROLE_COUNT


def _category(cat: str | None) -> int:
    code = _CATEGORIES.get(cat)
    if code is not None:
        return code
    if cat is not None and cat.endswith("_runtime"):
        return _K_RUNTIME
    return _K_OTHER


@final
class Totals:
    """Everything one file contributes, accumulated in integer nanoseconds.

    Most events are host-side and only counted: one C-level ``Counter`` pass over
    ``(ph, cat)``. Only device-lane events (kernels, copies, fills, GPU annotations,
    syncs), launches (for steps) and ``ProfilerStep#N`` spans get a Python loop.
    """

    def __init__(self, *, always_launches: bool = False, area: Area | None = None) -> None:
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

    def add(self, events: list[Event], doc: bytes) -> None:
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
        self._launches(_correlations(launches), list(map(_TS, launches)))

    def _launches(self, corrs: list[int | None], times: list[int | float | None]) -> None:
        """Keep each launch's correlation id and start (those without one are dropped)."""
        if None not in corrs and None not in times:
            self.launch_corr.extend(cast("list[int]", corrs))
            self.launch_ts.extend(cast("list[float]", times))
        else:
            for corr, ts in zip(corrs, times, strict=True):
                if corr is not None and ts is not None:
                    self.launch_corr.append(corr)
                    self.launch_ts.append(ts)
        self._bound()

    def column_bytes(self) -> int:
        """Bytes the per-launch and per-device-event columns hold in memory."""
        return 16 * len(self.launch_corr) + 17 * len(self.device_corr) + 8 * len(self.device_keys)

    def _bound(self) -> None:
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

    def tally(
        self, events: list[_Tagged], codes: dict[type[_Tagged], int], steps: set[bytes]
    ) -> None:
        """:meth:`add` for the events of the fast path (:class:`FastPath`), in the same order.

        ``codes`` maps each event class to its category code; ``steps`` holds the step
        names the run's bytes contain (the host ops are then :class:`_Named`).
        """
        self.events += len(events)
        classes = cast("Iterator[type[_Tagged]]", map(type, events))
        by_class = Counter(classes)  # first-seen order, as the exact path's cats
        cats: Counter[str | None] = Counter()
        for cls, n in by_class.items():
            cats[cls.cat] += n
        self.cat_counts.update(cats)
        phases = list(map(_PH, events))
        if phases.count("X") != len(phases):
            not_spans = compress(events, map(operator.ne, phases, repeat("X")))
            for cls, n in Counter(cast("Iterator[type[_Tagged]]", map(type, not_spans))).items():
                self.not_span_counts[cls.cat] += n
        named = {cls for cls in by_class if issubclass(cls, _Named)}
        if steps and named:
            ops = list(compress(events, map(named.__contains__, map(type, events))))
            names = list(map(_NAME, ops))
            lengths = {len(target) for target in steps}
            for at in compress(range(len(names)), map(lengths.__contains__, map(len, names))):
                if bytes(names[at]) in steps:
                    self._step(cast("Event", ops[at]))
        lane = {cls for cls in by_class if codes[cls] <= _K_SYNC}
        runtime = {cls for cls in by_class if codes[cls] == _K_RUNTIME}
        if runtime and not (self.steps or self.always_launches):
            self.skipped_launches += sum(by_class[cls] for cls in runtime)
            runtime = set[type[_Tagged]]()
        if lane:
            picked = events if len(lane) == len(by_class) else _pick(events, lane)
            self._lane(cast("list[Event]", picked))
        if runtime:
            launches = cast(
                "list[_Launch]",
                events if len(runtime) == len(by_class) else _pick(events, runtime),
            )
            self._launches(
                list(map(_CORRELATION_OF, map(_ARGS, launches))), list(map(_TS, launches))
            )

    def absorb(self, scanned: Scanned, step_events: list[Event], steps: set[bytes]) -> None:
        """:meth:`add` for a run the compiled scanner read (``_native``), with its results.

        ``step_events`` are the run's events named ``"ProfilerStep#..."`` (decoded by the
        exact path's decoder), ``steps`` the step names in the run's bytes.
        """
        (events, counts, _, rows, lane, spans, keys) = scanned[:7]
        self.events += events
        runtime = 0
        for cat, n, not_x in counts:  # in first-seen order, as add's Counter
            self.cat_counts[cat] += n
            if not_x:
                self.not_span_counts[cat] += not_x
            if _category(cat) == _K_RUNTIME:
                runtime += n
        for event in step_events:
            if bytes(event.name) in steps:
                self._step(event)
        keep = bool(self.steps) or self.always_launches
        for code, ns in lane:
            self.naive_ns += ns
            if code > _K_MEMSET:
                self.lane_ns[code] = self.lane_ns.get(code, 0) + ns
        for code, name, calls, ns in rows:
            _add_row(self.rows[code], name, calls, ns)
        self.device_keys.frombytes(keys)
        device_corr, device_code, device_ns, launch_corr, launch_ts = scanned[7:12]
        if keep:
            self.device_corr.frombytes(device_corr)
            self.device_code.frombytes(device_code)
            self.device_ns.frombytes(device_ns)
            self.launch_corr.frombytes(launch_corr)
            self.launch_ts.frombytes(launch_ts)
        else:
            self.skipped_launches += spans + runtime
        self._bound()

    def merge(self, other: Totals) -> None:
        """Add what a worker read from another part of the same file."""
        self.events += other.events
        for code, table in other.rows.items():
            for name, (calls, ns) in table.items():
                _add_row(self.rows[code], name, calls, ns)
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
        self._bound()

    def _step(self, event: Event) -> None:
        if event.ph != "X" or event.ts is None or _category(event.cat) not in (_K_CPU, _K_OTHER):
            return
        match = STEP_RAW.match(event.name)
        if match is not None:
            ns = max(_dur_ns(event.dur), 0)
            self.steps.append((float(event.ts), ns / 1000, int(match.group(1))))

    def _lane(self, events: list[Event]) -> None:
        keep = bool(self.steps) or self.always_launches
        # Each code's spans in the order they come (two spellings of one kind, "Kernel"
        # and "kernel", interleave as in the file); a code seen only in non-spans too.
        code_of = {cat: _category(cat) for cat in dict.fromkeys(map(_CAT, events))}
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
        self._bound()

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
            if code == _K_MEMCPY:
                kind = KernelKind.MEMCPY
            elif code == _K_MEMSET:
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
        # Integer ns per (step, code) in int64 (codes are _K_KERNEL, _K_MEMCPY,
        # _K_MEMSET: 0, 1, 2), and device events per step.
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
                kernel_us=int(totals[3 * i + _K_KERNEL]) / 1000,
                memcpy_us=int(totals[3 * i + _K_MEMCPY]) / 1000,
                memset_us=int(totals[3 * i + _K_MEMSET]) / 1000,
                device_events=int(counts[i]),
            )
            for i, (_, dur, number) in enumerate(spans)
        ]
        return merge_steps(out)


def _add_row(table: dict[bytes, list[int]], name: bytes, calls: int, ns: int) -> None:
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


# ------------------------------------------------------------------------ fast path
#
# The exact path (Totals.add) decodes every event of a run into an Event and then
# counts (ph, cat) and picks the device events and launches out of them. Most events
# (host ops, flows) are only counted, so building their name, ts, dur and args is
# wasted. FastPath decodes a run once as a msgspec tagged union on ``cat``, with one
# struct class per category seen so far in the file: host categories keep only ``ph``
# (msgspec skips, and still validates, the rest); device-lane categories keep the
# Event fields; runtime categories keep ``ts`` and a typed ``args`` (the correlation,
# so their args need no second decode). ``ph`` is a literal of the phases the trace
# format defines, so it allocates nothing, and counting is a Counter over classes. In
# a run whose bytes hold a "ProfilerStep#N" string, host ops also keep name, ts and
# dur (a second union over the same categories): a step span is a host op.
#
# It never decides what it is not sure of: wherever its decode raises (invalid JSON, a
# field of an unexpected type, a ``ph`` outside the format, an event without ``cat`` or
# with a non-string one, a run that closes the array, nesting too deep) the parser runs
# the exact path on the same bytes, so damage, salvage and every total are the exact
# path's. A category not seen before gets its classes and the run is decoded again (a
# trace has a few tens of categories).

_Phase = Literal[
    "B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D",
    "M", "V", "v", "R", "c", "S", "T", "p", "F",
]  # fmt: skip
"""Every ``ph`` the Chrome trace event format defines (and its deprecated aliases)."""


class _Tagged(msgspec.Struct, gc=False, tag_field="cat"):
    """An event of a category that is only counted (``cat``: a class attribute)."""

    cat: ClassVar[str]
    ph: _Phase | None = None


class _Device(_Tagged):
    """A device-lane event: the fields :meth:`Totals._lane` reads."""

    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _Named(_Tagged):
    """A host op in a run that holds a step name: the fields :meth:`Totals._step` reads."""

    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None


class _Launch(_Tagged):
    """A runtime call: its start and correlation id (``None`` where it has none)."""

    ts: int | float | None = None
    args: _Args64 = msgspec.field(default_factory=_Args64)


_UNKNOWN_CAT: Final = re.compile(r"Invalid value '(.*)' - at `\$\[\d+\]\.cat`", re.DOTALL)
_NO_CATEGORY: Final = "\x00probewise: no category yet"  # a tag no trace uses


@final
class FastPath:
    """Decodes runs of events for :meth:`Totals.tally`; one per file (it learns its categories)."""

    def __init__(self) -> None:
        # [plain, with step names]: category -> class
        self._classes: tuple[dict[str, type[_Tagged]], dict[str, type[_Tagged]]] = ({}, {})
        self._codes: dict[type[_Tagged], int] = {}
        self._decoders: list[msgspec.json.Decoder[list[_Tagged]] | None] = [None, None]

    def add(self, totals: Totals, doc: bytes) -> bool:
        """Add the events of ``doc`` (a JSON array) to ``totals``; False: nothing was added,
        the exact path decides."""
        steps = step_names(doc)
        events = self._decode(doc, steps=bool(steps))
        if events is None:
            return False
        if events:
            totals.tally(events, self._codes, steps)
        return True

    def _decode(self, doc: bytes, *, steps: bool) -> list[_Tagged] | None:
        for _ in range(64):  # a new category per try
            decoder = self._decoders[steps] or self._rebuild(steps=steps)
            try:
                return decoder.decode(doc)
            except msgspec.ValidationError as error:
                unknown = _UNKNOWN_CAT.fullmatch(str(error))
                if unknown is None or not self._learn(unknown.group(1)):
                    return None
            except (msgspec.DecodeError, RecursionError):
                return None
        return None  # pragma: no cover - over 64 new categories in one run

    def _learn(self, cat: str) -> bool:
        """Make the classes of a new category (False: known, so it failed for another reason)."""
        if cat in self._classes[0]:
            return False
        code = _category(cat)
        for steps, classes in enumerate(self._classes):
            base = (
                _Device
                if code <= _K_SYNC
                else _Launch
                if code == _K_RUNTIME
                else _Named
                if steps and code in (_K_CPU, _K_OTHER)
                else _Tagged
            )
            cls = cast(
                "type[_Tagged]",
                msgspec.defstruct(
                    f"_Category{len(self._codes)}",
                    [],
                    bases=(base,),
                    tag=cat,
                    gc=False,
                    namespace={"cat": cat},
                ),
            )
            classes[cat] = cls
            self._codes[cls] = code
        self._decoders = [None, None]
        return True

    def _rebuild(self, *, steps: bool) -> msgspec.json.Decoder[list[_Tagged]]:
        if not self._classes[0]:
            self._learn(_NO_CATEGORY)  # a union needs a class before any is seen
        classes = tuple(self._classes[steps].values())
        union = classes[0] if len(classes) == 1 else Union[classes]  # noqa: UP007
        decoder = cast(
            "msgspec.json.Decoder[list[_Tagged]]",
            msgspec.json.Decoder(list[union]),  # type: ignore[valid-type]
        )
        self._decoders[steps] = decoder
        return decoder


def _pick(events: list[_Tagged], classes: set[type[_Tagged]]) -> list[_Tagged]:
    """The events of these classes, in order (one C-level pass)."""
    return list(compress(events, map(classes.__contains__, map(type, events))))
