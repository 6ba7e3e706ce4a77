"""Printed profiler tables into KernelTables: :class:`ProfilerTableReading`, one per table.

Above both the model (:mod:`probewise.throughput.kernels`) and the reader
(:mod:`probewise.throughput.readers.profiler_table`): the reader returns each printed
table with its kernel rows as parts; here they become the table, whose sum the footer is
checked against (``KernelTable.from_profiler_table`` builds the same table from the same
parts). The rules are specified in docs/reference/profiler-table.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import final

import attrs

from probewise import _json
from probewise._validation import (
    checked_type,
    duration,
    non_blank_str,
    non_negative_int,
    optional_duration,
)
from probewise.errors import ArgumentTypeError, ArgumentTypeValueError, InvalidInputError
from probewise.throughput.kernels import KernelTable
from probewise.throughput.readers.profiler_table import (
    LabelledRow,
    PrintedTable,
    RowLabel,
    read_table,
    read_tables,
)

__all__ = ["ProfilerTableReading", "read_profiler_table", "read_profiler_tables"]


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a finite number >= 0, got {type(value).__name__}"
        )
    if not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def _strings(value: Iterable[object]) -> tuple[str, ...]:
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ArgumentTypeError(f"expected str, got {type(item).__name__}")
        out.append(item)
    return tuple(out)


def _labelled_rows(value: Iterable[object]) -> tuple[LabelledRow, ...]:
    out: list[LabelledRow] = []
    for item in value:
        if not isinstance(item, LabelledRow):
            raise ArgumentTypeError(f"rows must be LabelledRow, got {type(item).__name__}")
        out.append(item)
    return tuple(out)


@_json.shaped(_json.Shape(after={"reconciled": "hidden_device_us"}))
@final
@attrs.frozen(kw_only=True)
class ProfilerTableReading:
    """One printed table, read: the kernel table, every row labelled, and the footer check.

    ``device`` is the device word of the header (``"CUDA"``, ``"XPU"``, ``"MTIA"``,
    a PrivateUse1 backend's name; ``"CPU"`` for a CPU-only table). ``rows`` are the
    printed rows in printed order. ``legacy`` is true when the op rows carry the device
    time (the CUDA-event path, and every pre-2020 table). ``footer_self_device_us`` and
    ``footer_self_cpu_us`` are the footer's ``Self <DEV> time total`` and
    ``Self CPU time total`` (None when absent; the pre-2020 ``CUDA time total`` is not
    a self-time footer and is left out). ``kernel_sum_us`` is the sum of the counted
    rows, copies and fills included (``table.device_us``). ``tolerance_us`` is how far
    that sum may honestly sit from the footer given the printed precision (half the
    last printed digit of each counted value and of the footer; not rounded to the
    1 ns grid). ``hidden_device_us`` is the footer minus the sum when the footer is
    larger beyond that tolerance, 0.0 when they reconcile, None without a footer or
    when the sum exceeds it. ``possible_collisions`` lists the truncated display
    names, ``columns`` the header as printed, ``offset`` the character offset of the
    table in the text, and ``notes`` whatever a reader should know (dialect, legacy,
    merges, the footer gap).
    """

    table: KernelTable = attrs.field(validator=checked_type(KernelTable))
    device: str = attrs.field(validator=non_blank_str)
    rows: tuple[LabelledRow, ...] = attrs.field(converter=_labelled_rows)
    legacy: bool = attrs.field(validator=checked_type(bool))
    footer_self_device_us: float | None = attrs.field(converter=optional_duration)
    footer_self_cpu_us: float | None = attrs.field(converter=optional_duration)
    kernel_sum_us: float = attrs.field(converter=duration)
    tolerance_us: float = attrs.field(validator=_non_negative)
    hidden_device_us: float | None = attrs.field(converter=optional_duration)
    possible_collisions: tuple[str, ...] = attrs.field(converter=_strings)
    columns: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    offset: int = attrs.field(default=0, validator=non_negative_int)
    notes: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def __attrs_post_init__(self) -> None:
        if round(self.kernel_sum_us * 1000) != round(self.table.device_us * 1000):
            raise InvalidInputError(
                f"ProfilerTableReading: kernel_sum_us ({self.kernel_sum_us}) must equal table.device_us "
                f"({self.table.device_us})"
            )
        if self.hidden_device_us is not None and self.footer_self_device_us is None:
            raise InvalidInputError("ProfilerTableReading: hidden_device_us needs a footer")

    @property
    def reconciled(self) -> bool:
        """True when there is a footer and the counted rows add up to it.

        "Add up" means within :attr:`tolerance_us`: half the last printed digit of
        every counted value and of the footer.
        """
        if self.footer_self_device_us is None:
            return False
        gap_ns = abs(round(self.footer_self_device_us * 1000) - round(self.kernel_sum_us * 1000))
        return 2 * gap_ns <= round(self.tolerance_us * 2000)

    @property
    def ambiguous(self) -> tuple[LabelledRow, ...]:
        """The AMBIGUOUS rows (never counted; check them when the sum is short)."""
        return tuple(row for row in self.rows if row.label is RowLabel.AMBIGUOUS)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


def read_profiler_tables(text: str) -> tuple[ProfilerTableReading, ...]:
    """Every table in ``text`` (what ``key_averages().table()`` printed), in order.

    Raises :class:`~probewise.TraceFormatError` when the text holds no table, or when
    a table cannot be read (see docs/reference/profiler-table.md, "Errors").
    """
    return tuple(_reading(printed) for printed in read_tables(text))


def read_profiler_table(text: str) -> ProfilerTableReading:
    """The one table in ``text``; raises TraceFormatError if there are none or several.

    A text with several tables (the profiler recipe prints a CUDA and an XPU one) is
    rejected with the offset of the second, rather than read in part: use
    :func:`read_profiler_tables` for it.
    """
    return _reading(read_table(text))


def _reading(printed: PrintedTable) -> ProfilerTableReading:
    table = KernelTable.of_parts(printed.parts)
    hidden_ns, notes = printed.check_footer(round(table.device_us * 1000))
    footer_ns, cpu_ns = printed.footer_self_device_ns, printed.footer_self_cpu_ns
    return ProfilerTableReading(
        table=table,
        device=printed.device,
        rows=printed.rows,
        legacy=printed.legacy,
        footer_self_device_us=None if footer_ns is None else footer_ns / 1000,
        footer_self_cpu_us=None if cpu_ns is None else cpu_ns / 1000,
        kernel_sum_us=table.device_us,
        tolerance_us=printed.tolerance2_ns / 2000,
        hidden_device_us=None if hidden_ns is None else hidden_ns / 1000,
        possible_collisions=printed.possible_collisions,
        columns=printed.columns,
        offset=printed.offset,
        notes=notes,
    )
