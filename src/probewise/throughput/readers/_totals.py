"""Events to a table: what each trace event counts as, summed in integer nanoseconds.

:class:`Totals` accumulates what the parser (:mod:`._events`) decodes, run by run, and
builds the :class:`~probewise.throughput.kernels.KernelTable` at the end. Which
category counts as what is specified in docs/reference/chrome-trace.md ("Categories").

Per run of events, the work outside the decode is a few C-level passes (``Counter``
over ``(ph, cat)``, ``itertools.compress`` to pick the device-lane events and
launches, one joined decode of their ``args``); only device events and launches reach
Python code, and the event structs are not tracked by the cyclic garbage collector.
"""

from __future__ import annotations

import json
import operator
import re
import zlib
from array import array
from collections import Counter
from itertools import compress, repeat
from typing import Annotated, Final, cast, final

import attrs
import msgspec

from probewise.errors import DamageKind, TraceFormatError
from probewise.throughput.kernels import (
    Exclusion,
    ExclusionReason,
    KernelKind,
    KernelRow,
    KernelTable,
    StepBreakdown,
    TraceSource,
)

__all__ = ["DECODE_ANY", "Event", "Totals"]


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


class _Args(msgspec.Struct):
    correlation: int | None = None


_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _Args64(msgspec.Struct):
    """``args`` where the correlation must be a 64-bit int (or absent/null)."""

    correlation: _Int64 | None = None


_DECODE_ARGS: Final = msgspec.json.Decoder(_Args)
_DECODE_ARGS_LIST: Final = msgspec.json.Decoder(list[_Args64])
DECODE_ANY: Final = msgspec.json.Decoder()
"""Any JSON value, as Python objects."""
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


@final
class Totals:
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
        self.events = 0

    def add(self, events: list[Event], doc: bytes) -> None:
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

    def merge(self, other: Totals) -> None:
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

    def _step(self, event: Event) -> None:
        if event.ph != "X" or event.ts is None or _category(event.cat) not in (_K_CPU, _K_OTHER):
            return
        match = _STEP_RAW.match(event.name)
        if match is not None:
            ns = max(_dur_ns(event.dur), 0)
            self.steps.append((float(event.ts), ns / 1000, int(match.group(1))))

    def _lane(self, events: list[Event]) -> None:
        keep = bool(self.steps) or self.always_launches
        by_code: dict[int, list[Event]] = {}
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
        # of_rows: two spellings of one name (JSON escapes) become one row.
        table = KernelTable.of_rows(
            rows, excluded=self._exclusions(), naive_device_us=self.naive_ns / 1000
        )
        return attrs.evolve(table, steps=self._steps(), sources=(source,))

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


def _durations_ns(events: list[Event]) -> list[int]:
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
