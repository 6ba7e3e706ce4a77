"""KernelTable: where a step's device time went, and the diff of two tables.

``torch.profiler``'s ``key_averages()`` lists both the ATen op (``aten::mm``) and
the kernel it launched, each carrying the same self device time, so summing every
row double-counts. A :class:`KernelTable` sums device kernel rows only, keeps
memcpy and memset apart, says what it left out and why (:class:`Exclusion`), and
what the naive sum would have been (``naive_device_us``).

Durations are kept on a 1 ns grid (the resolution of Kineto traces and of printed
tables): every microsecond value is rounded to three decimals when an object is
built, and sums are taken over integer nanoseconds. That makes ``a + b`` exactly
associative and commutative (a commutative monoid with :meth:`KernelTable.empty`
as identity), so merging ranks or shards in any order gives the same table.

The parts a table is made of (:class:`KernelRow`, :class:`KernelKind`,
:class:`Exclusion`, :class:`StepBreakdown`, :class:`TraceSource`, :class:`Damage`)
live below it, in :mod:`probewise.throughput._kernel_rows`, and are re-exported here.
The readers (:mod:`probewise.throughput.readers`) import nothing of this module: each
returns :class:`~probewise.throughput._kernel_rows.TableParts`, and the table builds
itself from them (:meth:`KernelTable.of_parts`). The three reading doors
(:meth:`KernelTable.from_chrome_trace`, :meth:`~KernelTable.from_key_averages`,
:meth:`~KernelTable.from_profiler_table`) import their reader when called, so
importing the model does not import the readers' decoders.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Sequence
from functools import reduce
from os import PathLike
from typing import TYPE_CHECKING, Final, assert_never, final

import attrs

from probewise import _json
from probewise._validation import duration, optional_duration
from probewise.errors import ArgumentTypeError, DamageKind, InvalidInputError
from probewise.throughput._kernel_rows import (
    Damage,
    Exclusion,
    ExclusionReason,
    KernelKind,
    KernelRow,
    ProgressCallback,
    StepBreakdown,
    TableParts,
    TraceSource,
    to_ns,
    to_us,
    tuple_of,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = [
    "Damage",
    "DamageKind",
    "Exclusion",
    "ExclusionReason",
    "KernelChange",
    "KernelDiff",
    "KernelKind",
    "KernelRow",
    "KernelTable",
    "ProgressCallback",
    "StepBreakdown",
    "TraceSource",
]

_JSON_FORMAT: Final = "probewise.KernelTable/1"


def _non_negative(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = (
            value
            if isinstance(value, int) and not isinstance(value, bool)
            else type(value).__name__
        )
        raise InvalidInputError(f"{what} must be a non-negative int, got {shown}")
    return value


def _add_optional(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _source_key(source: TraceSource) -> tuple[int, int, str, int, str]:
    return (
        -1 if source.rank is None else source.rank,
        -1 if source.world_size is None else source.world_size,
        source.path,
        source.events,
        repr(source),
    )


# --------------------------------------------------------------------------- diff


@_json.shaped(
    _json.Shape(after={"delta_us": "after_us", "ratio": "delta_us"}, finite_or_none={"ratio"})
)
@final
@attrs.frozen(kw_only=True)
class KernelChange:
    """How one row changed between two tables (``before`` is ``self`` in ``self.diff(other)``)."""

    name: str
    kind: KernelKind
    before_us: float = attrs.field(converter=duration)
    after_us: float = attrs.field(converter=duration)
    before_calls: int | None
    after_calls: int | None

    @property
    def delta_us(self) -> float:
        """``after_us - before_us`` (negative when the kernel got faster or disappeared)."""
        return to_us(to_ns(self.after_us) - to_ns(self.before_us))

    @property
    def ratio(self) -> float:
        """``after_us / before_us``; ``inf`` for a new kernel, ``nan`` when both are zero."""
        if self.before_us == 0:
            return math.nan if self.after_us == 0 else math.inf
        return self.after_us / self.before_us

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values (an infinite or undefined ratio becomes ``None``)."""
        return _json.to_dict(self)


@_json.shaped(
    _json.Shape(after={"delta_kernel_us": "after_kernel_us", "changes": "delta_kernel_us"})
)
@final
@attrs.frozen(kw_only=True)
class KernelDiff:
    """Per-row changes between two tables, largest absolute change first."""

    changes: tuple[KernelChange, ...]
    before_kernel_us: float = attrs.field(converter=duration)
    after_kernel_us: float = attrs.field(converter=duration)

    @property
    def delta_kernel_us(self) -> float:
        """Change in ``kernel_us``."""
        return to_us(to_ns(self.after_kernel_us) - to_ns(self.before_kernel_us))

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


# --------------------------------------------------------------------------- table


def _row_key(row: KernelRow) -> tuple[int, str, str]:
    return (-to_ns(row.device_us), row.name, row.kind.value)


def _canonical_rows(rows: Iterable[KernelRow]) -> tuple[KernelRow, ...]:
    out = tuple_of(rows, KernelRow, "KernelTable.rows")
    return tuple(sorted(out, key=_row_key))


def _canonical_exclusions(items: Iterable[Exclusion]) -> tuple[Exclusion, ...]:
    out = tuple_of(items, Exclusion, "KernelTable.excluded")
    order = list(ExclusionReason)
    return tuple(sorted(out, key=lambda e: order.index(e.reason)))


def _canonical_steps(items: Iterable[StepBreakdown]) -> tuple[StepBreakdown, ...]:
    out = tuple_of(items, StepBreakdown, "KernelTable.steps")
    return tuple(sorted(out, key=lambda s: s.step))


def _canonical_sources(items: Iterable[TraceSource]) -> tuple[TraceSource, ...]:
    out = tuple_of(items, TraceSource, "KernelTable.sources")
    return tuple(sorted(out, key=_source_key))


def _unique(what: str, keys: Sequence[object]) -> None:
    if len(set(keys)) != len(keys):
        raise InvalidInputError(f"{what} must be unique; merge duplicates with KernelTable.of_rows")


@_json.shaped(
    _json.Shape(
        after={
            "format": None,
            "kernel_us": "format",
            "memcpy_us": "kernel_us",
            "memset_us": "memcpy_us",
            "naive_device_us": "memset_us",
            "missing_ranks": "sources",
        },
        constant={"format": _JSON_FORMAT},
    )
)
@final
@attrs.frozen(kw_only=True)
class KernelTable:
    """Device time by kernel, without double counting.

    ``rows`` hold every device row (kernels, copies, fills), largest first, one per
    ``(name, kind)``. ``kernel_us`` sums the kernel rows only; ``memcpy_us`` and
    ``memset_us`` sum the MEMCPY and MEMSET rows, kept apart. ``excluded`` says what
    was left out and why; ``naive_device_us`` is what summing every device-time row
    (or every span on the device lanes) would have given, None where the source does
    not allow it. ``steps`` is the per-``ProfilerStep#N`` breakdown when the source
    has those spans; ``sources`` names the files (ranks) the table came from.
    """

    rows: tuple[KernelRow, ...] = attrs.field(converter=_canonical_rows)
    excluded: tuple[Exclusion, ...] = attrs.field(default=(), converter=_canonical_exclusions)
    naive_device_us: float | None = attrs.field(default=None, converter=optional_duration)
    steps: tuple[StepBreakdown, ...] = attrs.field(default=(), converter=_canonical_steps)
    sources: tuple[TraceSource, ...] = attrs.field(default=(), converter=_canonical_sources)
    kernel_us: float = attrs.field(init=False)
    memcpy_us: float = attrs.field(init=False)
    memset_us: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        _unique("rows (by name and kind)", [(row.name, row.kind) for row in self.rows])
        _unique("excluded reasons", [item.reason for item in self.excluded])
        _unique("steps", [step.step for step in self.steps])
        totals = {"kernel": 0, "memcpy": 0, "memset": 0}
        for row in self.rows:
            match row.kind:
                case KernelKind.MEMCPY:
                    totals["memcpy"] += to_ns(row.device_us)
                case KernelKind.MEMSET:
                    totals["memset"] += to_ns(row.device_us)
                case (
                    KernelKind.GEMM
                    | KernelKind.ATTENTION
                    | KernelKind.ELEMENTWISE
                    | KernelKind.REDUCTION
                    | KernelKind.NORMALIZATION
                    | KernelKind.COMMUNICATION
                    | KernelKind.CONVOLUTION
                    | KernelKind.EMBEDDING
                    | KernelKind.OTHER
                ):
                    totals["kernel"] += to_ns(row.device_us)
                case _ as unreachable:
                    assert_never(unreachable)
        object.__setattr__(self, "kernel_us", to_us(totals["kernel"]))
        object.__setattr__(self, "memcpy_us", to_us(totals["memcpy"]))
        object.__setattr__(self, "memset_us", to_us(totals["memset"]))

    # ------------------------------------------------------------- construction

    @classmethod
    def empty(cls) -> KernelTable:
        """The identity of ``+``: no rows, nothing excluded, a naive sum of zero."""
        return cls(rows=(), naive_device_us=0.0)

    @classmethod
    def of_rows(
        cls,
        rows: Iterable[KernelRow],
        *,
        excluded: Iterable[Exclusion] = (),
        naive_device_us: float | None = None,
    ) -> KernelTable:
        """A table from rows that may repeat a ``(name, kind)``; repeats are summed."""
        merged = _merge_rows(rows)
        return cls(
            rows=merged,
            excluded=_merge_exclusions(excluded),
            naive_device_us=naive_device_us,
        )

    @classmethod
    def of_parts(cls, parts: TableParts) -> KernelTable:
        """The table of one reading's parts (what a reader returns): repeats are summed."""
        return cls(
            rows=_merge_rows(parts.rows),
            excluded=_merge_exclusions(parts.excluded),
            naive_device_us=parts.naive_device_us,
            steps=parts.steps,
            sources=parts.sources,
        )

    @classmethod
    def from_chrome_trace(
        cls,
        path: str | PathLike[str] | Sequence[str | PathLike[str]],
        *,
        salvage: bool = False,
        progress: ProgressCallback | None = None,
        workers: int | None = None,
        allow_mixed_jobs: bool = False,
        executor: Executor | None = None,
    ) -> KernelTable:
        """Read a Kineto / legacy Chrome trace (``.json`` or gzip, by content).

        A directory or a sequence of paths is read as the ranks of one job and the
        merged table is returned (see :func:`probewise.throughput.read_chrome_traces`
        for the per-rank tables; it takes the same keyword options). Raises
        :class:`~probewise.TraceFormatError` on damaged input unless ``salvage`` is
        true, in which case the table holds every complete event before the damage and
        ``sources[i].damage`` says what was lost. Files of different jobs raise
        :class:`~probewise.MixedJobsError` unless ``allow_mixed_jobs`` is true (then
        :meth:`jobs` tells them apart). ``workers`` is the number of processes that
        split one large plain trace. ``executor`` (any
        :class:`concurrent.futures.Executor`, e.g.
        ``distributed.Client(...).get_executor()``) reads each file as one task there
        and merges the tables here: the same table as the local read.
        """
        from probewise.throughput.readers.chrome_trace import read_traces

        ranks = read_traces(
            path,
            salvage=salvage,
            progress=progress,
            workers=workers,
            allow_mixed_jobs=allow_mixed_jobs,
            executor=executor,
        )
        tables = [cls.of_parts(parts) for parts in ranks]
        return tables[0] if len(tables) == 1 else reduce(operator.add, tables, cls.empty())

    @classmethod
    def from_key_averages(cls, events: Iterable[object]) -> KernelTable:
        """A table from a live ``prof.key_averages()`` (or any iterable of ``FunctionEventAvg``)."""
        from probewise.throughput.readers.key_averages import read_key_averages

        return cls.of_parts(read_key_averages(events))

    @classmethod
    def from_profiler_table(cls, text: str) -> KernelTable:
        """A table from the text ``key_averages().table()`` printed.

        :func:`probewise.throughput.read_profiler_tables` also returns how each printed
        row was labelled and how the sum reconciles with the footer.
        """
        from probewise.throughput.readers.profiler_table import read_table

        return cls.of_parts(read_table(text).parts)

    # ------------------------------------------------------------------ algebra

    def __add__(self, other: KernelTable) -> KernelTable:
        naive = (
            None
            if self.naive_device_us is None or other.naive_device_us is None
            else to_us(to_ns(self.naive_device_us) + to_ns(other.naive_device_us))
        )
        steps: dict[int, StepBreakdown] = {step.step: step for step in self.steps}
        for step in other.steps:
            steps[step.step] = steps[step.step] + step if step.step in steps else step
        return KernelTable(
            rows=_merge_rows((*self.rows, *other.rows)),
            excluded=_merge_exclusions((*self.excluded, *other.excluded)),
            naive_device_us=naive,
            steps=steps.values(),
            sources=(*self.sources, *other.sources),
        )

    # ---------------------------------------------------------------- questions

    @property
    def device_us(self) -> float:
        """``kernel_us + memcpy_us + memset_us``: all device work, each span counted once."""
        return to_us(to_ns(self.kernel_us) + to_ns(self.memcpy_us) + to_ns(self.memset_us))

    @property
    def kernel_rows(self) -> tuple[KernelRow, ...]:
        """The rows counted in ``kernel_us`` (everything but MEMCPY and MEMSET)."""
        return tuple(row for row in self.rows if not row.kind.is_transfer)

    def jobs(self) -> tuple[tuple[TraceSource, ...], ...]:
        """The sources grouped by the job they came from, as far as their metadata tells.

        Sources with different ``world_size`` are different jobs; within one world size,
        a rank seen again starts another job (the first source of each rank goes to the
        first job, the second to the second, and so on, in source order). Sources
        without a rank join the first job of their world size. A table read from the
        ranks of one job has a single job (none when it has no sources).
        """
        groups: dict[int | None, list[list[TraceSource]]] = {}
        for source in self.sources:
            jobs = groups.setdefault(source.world_size, [])
            for job in jobs:
                if source.rank is None or all(other.rank != source.rank for other in job):
                    job.append(source)
                    break
            else:
                jobs.append([source])
        order = sorted(groups, key=lambda size: -1 if size is None else size)
        return tuple(tuple(job) for size in order for job in groups[size])

    @property
    def world_size(self) -> int | None:
        """The largest ``distributedInfo.world_size`` among the sources, if any says.

        Sources from several jobs (``allow_mixed_jobs``) may disagree: see :meth:`jobs`.
        """
        sizes = [s.world_size for s in self.sources if s.world_size is not None]
        return max(sizes) if sizes else None

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks the sources came from, sorted."""
        return tuple(sorted({s.rank for s in self.sources if s.rank is not None}))

    @property
    def missing_ranks(self) -> tuple[int, ...]:
        """Ranks that ``world_size`` says exist but no source came from."""
        size = self.world_size
        if size is None:
            return ()
        present = set(self.ranks)
        return tuple(rank for rank in range(size) if rank not in present)

    @property
    def damaged(self) -> tuple[TraceSource, ...]:
        """The sources that were salvaged from damaged files."""
        return tuple(source for source in self.sources if source.damage is not None)

    def top(self, k: int) -> tuple[KernelRow, ...]:
        """The ``k`` rows with the most device time (all of them when there are fewer)."""
        return self.rows[: _non_negative(k, "k")]

    def by_kind(self) -> dict[KernelKind, float]:
        """Device µs per kind present in the table, largest first."""
        totals: dict[KernelKind, int] = {}
        for row in self.rows:
            totals[row.kind] = totals.get(row.kind, 0) + to_ns(row.device_us)
        order = list(KernelKind)
        ranked = sorted(totals.items(), key=lambda item: (-item[1], order.index(item[0])))
        return {kind: to_us(ns) for kind, ns in ranked}

    def exclusion(self, reason: ExclusionReason) -> Exclusion:
        """What was excluded for ``reason`` (zero events when nothing was)."""
        for item in self.excluded:
            if item.reason is reason:
                return item
        return Exclusion(reason=reason, events=0, total_us=0.0)

    def diff(self, other: KernelTable) -> KernelDiff:
        """Per-row change from ``self`` (before) to ``other`` (after), largest absolute change first."""
        before = {(row.name, row.kind): row for row in self.rows}
        after = {(row.name, row.kind): row for row in other.rows}
        changes: list[KernelChange] = []
        for key in before.keys() | after.keys():
            b, a = before.get(key), after.get(key)
            changes.append(
                KernelChange(
                    name=key[0],
                    kind=key[1],
                    before_us=0.0 if b is None else b.device_us,
                    after_us=0.0 if a is None else a.device_us,
                    before_calls=0 if b is None else b.calls,
                    after_calls=0 if a is None else a.calls,
                )
            )
        changes.sort(key=lambda c: (-abs(to_ns(c.delta_us)), c.name, c.kind.value))
        return KernelDiff(
            changes=tuple(changes),
            before_kernel_us=self.kernel_us,
            after_kernel_us=other.kernel_us,
        )

    # --------------------------------------------------------------------- JSON

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values (what :meth:`to_json` writes)."""
        return _json.to_dict(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """JSON text that :meth:`from_json` reads back into an equal table."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> KernelTable:
        """Read what :meth:`to_json` wrote; raises InvalidInputError on anything else
        (ArgumentTypeError on something that is not text)."""
        if not isinstance(text, str | bytes | bytearray):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeError(
                f"KernelTable.from_json takes a str or bytes, got a {type(text).__name__}"
            )
        try:
            data: object = json.loads(text)
        except RecursionError:
            raise InvalidInputError("not KernelTable JSON: it nests too deeply") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise InvalidInputError(f"not KernelTable JSON: {error}") from None
        try:
            return _json.structure(data, cls, ignore_unknown=True)
        except (TypeError, ValueError) as error:
            raise InvalidInputError(f"not KernelTable JSON: {error!r}") from None


# --------------------------------------------------------------------------- helpers


def _merge_rows(rows: Iterable[KernelRow]) -> tuple[KernelRow, ...]:
    totals: dict[tuple[str, KernelKind], tuple[int | None, int]] = {}
    for row in rows:
        key = (row.name, row.kind)
        if key in totals:
            calls, ns = totals[key]
            totals[key] = (_add_optional(calls, row.calls), ns + to_ns(row.device_us))
        else:
            totals[key] = (row.calls, to_ns(row.device_us))
    return tuple(
        KernelRow(name=name, calls=calls, device_us=to_us(ns), kind=kind)
        for (name, kind), (calls, ns) in totals.items()
    )


def _merge_exclusions(items: Iterable[Exclusion]) -> tuple[Exclusion, ...]:
    totals: dict[ExclusionReason, tuple[int, int]] = {}
    for item in items:
        events, ns = totals.get(item.reason, (0, 0))
        totals[item.reason] = (events + item.events, ns + to_ns(item.total_us))
    return tuple(
        Exclusion(reason=reason, events=events, total_us=to_us(ns))
        for reason, (events, ns) in totals.items()
    )
