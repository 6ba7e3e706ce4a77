"""Read the text ``prof.key_averages().table()`` printed back into a :class:`KernelTable`.

``key_averages()`` lists both the ATen op (``aten::mm``) and the kernel it launched,
each with the same self device time, so summing the ``Self CUDA`` column counts the
same time twice. :func:`read_profiler_tables` reads the printed table, labels every
row (:class:`RowLabel`: kernel, op, annotation or ambiguous, with the reason), sums
the device kernel rows only, and checks that sum against the footer's
``Self <DEV> time total``.

The format, the header dialects, the labelling rules, what is counted, truncation, the
footer check and the errors are specified in docs/reference/profiler-table.md. The
stages live beside this module: ``_table_frames`` (lines, frames, printed values),
``_table_rows`` (header and rows) and ``_table_labels`` (the labelling rules).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import assert_never, cast, final

import attrs

from probewise import _json
from probewise._validation import (
    checked_type,
    duration,
    non_blank_str,
    non_negative_int,
    optional_duration,
    optional_non_negative_int,
)
from probewise.errors import ArgumentTypeError, DamageKind, InvalidInputError, TraceFormatError
from probewise.throughput.kernels import Exclusion, KernelRow, KernelTable
from probewise.throughput.readers._table_frames import (
    FOOTER,
    Frame,
    Time,
    fail,
    find_frames,
    parse_time,
    split_lines,
    views,
)
from probewise.throughput.readers._table_labels import (
    RowLabel,
    Verdict,
    exclusion_reason,
    is_annotation_shape,
    label_cpu_only,
    label_inclusive,
    label_modern,
    reason_suffix,
)
from probewise.throughput.readers._table_rows import (
    Dialect,
    Header,
    Parsed,
    parse_rows,
    read_header,
)

__all__ = [
    "LabelledRow",
    "ProfilerTableReading",
    "RowLabel",
    "decode_table_bytes",
    "read_profiler_table",
    "read_profiler_tables",
]


def _finite_or_none(
    _instance: object, attribute: attrs.Attribute[float | None], value: object
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
            f"{attribute.name} must be a finite number or None, got {type(value).__name__}"
        )
    if not math.isfinite(value):
        raise InvalidInputError(f"{attribute.name} must be a finite number or None, got {value!r}")


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
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


@final
@attrs.frozen(kw_only=True)
class LabelledRow:
    """One printed row, with its label and why.

    ``self_device_us`` is the ``Self <DEV>`` value and ``device_total_us`` the
    ``<DEV> total`` value, each None when the layout has no such column (negative
    values are kept as printed); ``calls`` is None without a calls column.
    ``truncated`` is true when the displayed name ends in ``...`` (the profiler cut
    it). ``counted`` says whether the row's time is in the table: always for KERNEL,
    and for the op rows of a legacy table.
    """

    name: str = attrs.field(validator=non_blank_str)
    label: RowLabel = attrs.field(validator=checked_type(RowLabel))
    reason: str = attrs.field(validator=non_blank_str)
    self_device_us: float | None = attrs.field(validator=_finite_or_none)
    device_total_us: float | None = attrs.field(validator=_finite_or_none)
    calls: int | None = attrs.field(validator=optional_non_negative_int)
    truncated: bool = attrs.field(validator=checked_type(bool))
    counted: bool = attrs.field(validator=checked_type(bool))

    def __attrs_post_init__(self) -> None:
        if self.label is RowLabel.KERNEL and not self.counted:
            raise InvalidInputError("LabelledRow: a KERNEL row is always counted")

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


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
    given = cast("object", text)
    if not isinstance(given, str):
        hint = " (decode it first, or use probewise kernels FILE)"
        raise ArgumentTypeError(
            f"a printed profiler table must be a str, got a {type(given).__name__}"
            + (hint if isinstance(given, bytes) else "")
        )
    lines = split_lines(text)
    frames = sorted(
        (frame for prefix, view in views(lines) for frame in find_frames(view, prefix)),
        key=lambda frame: frame.offset,
    )
    if not frames:
        raise TraceFormatError(
            "no printed key_averages() table found: expected a header line framed by "
            "dashed separator lines ('-----  -----')",
            offset=0,
            kind=DamageKind.NOT_A_TABLE,
        )
    return tuple(_read_frame(frame) for frame in frames)


def decode_table_bytes(data: bytes) -> tuple[str, str | None]:
    """The text of a printed table file, and a note when it was not UTF-8.

    UTF-8 (with or without a byte-order mark) is read as such. Anything else is
    decoded as Latin-1, which maps every byte to one character, so names keep their
    bytes instead of turning into U+FFFD and the columns stay aligned; the note says
    so and names the first byte that is not UTF-8.
    """
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return data.decode("latin-1"), (
            f"the file is not UTF-8 (byte {error.start} is 0x{data[error.start]:02x}): "
            "decoded as Latin-1 (ISO-8859-1), so a name with non-ASCII characters may "
            "read differently from how it was printed"
        )


def read_profiler_table(text: str) -> ProfilerTableReading:
    """The one table in ``text``; raises TraceFormatError if there are none or several.

    A text with several tables (the profiler recipe prints a CUDA and an XPU one) is
    rejected with the offset of the second, rather than read in part: use
    :func:`read_profiler_tables` for it.
    """
    first, *others = read_profiler_tables(text)
    if others:
        raise TraceFormatError(
            f"the text holds {1 + len(others)} printed tables; read them with "
            "read_profiler_tables(), which returns one reading per table",
            offset=others[0].offset,
        )
    return first


def _us(ns: int) -> float:
    return ns / 1000


def _fmt(ns: int) -> str:
    return f"{ns / 1000:.3f} µs"


def _self_ns(row: Parsed) -> int:
    return 0 if row.self_device is None else row.self_device.ns


def _inclusive_ns(row: Parsed) -> int:
    return 0 if row.device_total is None else row.device_total.ns


@final
@attrs.frozen(kw_only=True)
class _Footer:
    self_cpu: Time | None
    self_device: Time | None
    notes: tuple[str, ...]


def _read_footer(frame: Frame, header: Header) -> _Footer:
    self_cpu: Time | None = None
    self_device: Time | None = None
    notes: list[str] = []
    for line in frame.footer:
        match = FOOTER.fullmatch(line.text)
        if match is None:  # pragma: no cover - frames only hold footer lines
            continue
        is_self, word, value = match.groups()
        column = f"{is_self or ''}{word} time total"
        parsed = parse_time(value, column, line)
        if parsed.ns < 0:
            fail(f"the footer {column!r} is negative", line)
        if is_self and word.upper() == "CPU":
            self_cpu = parsed
        elif is_self and word == header.device and header.dialect is not Dialect.CPU_ONLY:
            self_device = parsed
        elif not is_self and word == header.device:
            notes.append(
                f"the footer's '{word} time total' ({_fmt(parsed.ns)}) sums the inclusive "
                f"'{word} total' column, so it is not used to reconcile"
            )
        else:
            notes.append(
                f"footer line {line.text.strip()[:80]!r} does not match the header's device; "
                "ignored"
            )
    return _Footer(self_cpu=self_cpu, self_device=self_device, notes=tuple(notes))


def _is_legacy(
    parsed: Sequence[Parsed], verdicts: Sequence[Verdict], footer: _Footer, notes: list[str]
) -> bool:
    if any(verdict.label is RowLabel.KERNEL for verdict in verdicts):
        return False
    carrying = [
        (row, verdict) for row, verdict in zip(parsed, verdicts, strict=True) if _self_ns(row) > 0
    ]
    if not any(verdict.label is RowLabel.OP for _, verdict in carrying):
        return False
    total = sum(_self_ns(row) for row, _ in carrying)
    if footer.self_device is None:
        if any(verdict.label is RowLabel.AMBIGUOUS for _, verdict in carrying):
            notes.append(
                "no kernel rows, no footer, and AMBIGUOUS rows with device time: not read "
                "as a legacy table, nothing counted"
            )
            return False
        return True
    tolerance2 = footer.self_device.ulp_ns + sum(
        row.self_device.ulp_ns for row, _ in carrying if row.self_device is not None
    )
    if 2 * abs(total - footer.self_device.ns) <= tolerance2:
        return True
    notes.append(
        f"no kernel rows, and the op rows' self device time ({_fmt(total)}) does not add up "
        f"to the footer ({_fmt(footer.self_device.ns)}): the kernels were probably hidden "
        "(row_limit), so this is not read as a legacy table and nothing is counted"
    )
    return False


def _merge_notes(rows: Sequence[LabelledRow]) -> list[str]:
    repeats = Counter(row.name for row in rows if row.counted)
    notes: list[str] = []
    for name, times in repeats.items():
        if times < 2:
            continue
        if name.endswith("..."):
            notes.append(
                f"{times} printed rows share the truncated name {name!r}: distinct kernels whose "
                "names were cut to the same text collide, and are merged into one row"
            )
        else:
            notes.append(
                f"{times} printed rows share the name {name!r} (grouped by input shape, stack "
                "or overload): merged into one row"
            )
    return notes


def _read_frame(frame: Frame) -> ProfilerTableReading:
    header = read_header(frame)
    parsed = parse_rows(frame, header)
    footer = _read_footer(frame, header)
    notes: list[str] = [*frame.notes, *header.notes, *footer.notes]
    if not parsed:
        notes.append("the table has no rows")
    verdicts, counted, legacy = _label_rows(header, parsed, footer, notes)
    tally = _tally(header, parsed, verdicts, counted, legacy=legacy)
    if header.dialect is Dialect.CPU_ONLY:
        table = KernelTable.empty()
    else:
        table = KernelTable.of_rows(
            tally.kernel_rows, excluded=tally.excluded, naive_device_us=_us(tally.naive_ns)
        )
    notes.extend(_merge_notes(tally.labelled))
    inclusive = header.dialect is Dialect.INCLUSIVE
    if legacy and not inclusive:
        notes.append(
            "no kernel rows: a legacy (CUDA-event) table, whose op rows carry the device "
            f"time; the {sum(counted)} rows with self device time are counted"
        )
    footer_ns = None if footer.self_device is None else footer.self_device.ns
    tolerance2 = tally.ulp_ns + (0 if footer.self_device is None else footer.self_device.ulp_ns)
    ambiguous_ns = _ambiguous_ns(parsed, verdicts)
    hidden_ns = _reconcile(
        header,
        table,
        footer_ns=footer_ns,
        tolerance2=tolerance2,
        ambiguous_ns=ambiguous_ns,
        notes=notes,
    )
    if ambiguous_ns > 0 and not legacy:
        count_ambiguous = sum(1 for v in verdicts if v.label is RowLabel.AMBIGUOUS)
        notes.append(
            f"{count_ambiguous} AMBIGUOUS rows carry {_fmt(ambiguous_ns)} of self device "
            "time, not counted"
        )
    collisions = tuple(dict.fromkeys(row.name for row in tally.labelled if row.truncated))
    return ProfilerTableReading(
        table=table,
        device=header.device,
        rows=tally.labelled,
        legacy=legacy,
        footer_self_device_us=None if footer_ns is None else _us(footer_ns),
        footer_self_cpu_us=None if footer.self_cpu is None else _us(footer.self_cpu.ns),
        kernel_sum_us=table.device_us,
        tolerance_us=tolerance2 / 2000,
        hidden_device_us=None if hidden_ns is None else _us(hidden_ns),
        possible_collisions=collisions,
        columns=header.columns,
        offset=frame.offset,
        notes=tuple(notes),
    )


def _label_rows(
    header: Header, parsed: Sequence[Parsed], footer: _Footer, notes: list[str]
) -> tuple[list[Verdict], list[bool], bool]:
    """Each row's verdict, whether it counts, and whether the table is legacy."""
    verdicts: list[Verdict]
    counted: list[bool]
    legacy = False
    match header.dialect:
        case Dialect.CPU_ONLY:
            verdicts = [label_cpu_only(row) for row in parsed]
            counted = [False] * len(parsed)
        case Dialect.INCLUSIVE:
            pairs = [label_inclusive(row) for row in parsed]
            verdicts = [verdict for verdict, _ in pairs]
            counted = [count for _, count in pairs]
            legacy = True
        case Dialect.MODERN:
            host_ranges = frozenset(row.name for row in parsed if is_annotation_shape(row))
            verdicts = [label_modern(row, host_ranges) for row in parsed]
            counted = [verdict.label is RowLabel.KERNEL for verdict in verdicts]
            legacy = _is_legacy(parsed, verdicts, footer, notes)
            if legacy:
                counted = [_self_ns(row) > 0 for row in parsed]
        case _ as unreachable:
            assert_never(unreachable)
    return verdicts, counted, legacy


@final
@attrs.frozen(kw_only=True)
class _Tally:
    """The rows of one table sorted out: labelled, counted, excluded, and the sums."""

    labelled: list[LabelledRow]
    kernel_rows: list[KernelRow]
    excluded: list[Exclusion]
    naive_ns: int
    ulp_ns: int  # twice the tolerance of the counted values, in ns


def _tally(
    header: Header,
    parsed: Sequence[Parsed],
    verdicts: Sequence[Verdict],
    counted: Sequence[bool],
    *,
    legacy: bool,
) -> _Tally:
    inclusive = header.dialect is Dialect.INCLUSIVE
    labelled: list[LabelledRow] = []
    kernel_rows: list[KernelRow] = []
    excluded: list[Exclusion] = []
    naive_ns = 0
    ulp_ns = 0
    for row, verdict, count in zip(parsed, verdicts, counted, strict=True):
        device_ns = _inclusive_ns(row) if inclusive else _self_ns(row)
        naive_ns += max(device_ns, 0)
        if count:
            kernel_rows.append(KernelRow.named(row.name, calls=row.calls, device_us=_us(device_ns)))
            value = row.device_total if inclusive else row.self_device
            ulp_ns += 0 if value is None else value.ulp_ns
        elif header.dialect is not Dialect.CPU_ONLY:
            excluded.append(
                Exclusion(
                    reason=exclusion_reason(verdict, device_ns),
                    events=1,
                    total_us=_us(max(device_ns, 0)),
                )
            )
        suffix = reason_suffix(verdict.label, counted=count, legacy=legacy, device_ns=device_ns)
        labelled.append(
            LabelledRow(
                name=row.name,
                label=verdict.label,
                reason=verdict.reason + suffix,
                self_device_us=None if row.self_device is None else _us(row.self_device.ns),
                device_total_us=None if row.device_total is None else _us(row.device_total.ns),
                calls=row.calls,
                truncated=row.name.endswith("..."),
                counted=count,
            )
        )
    return _Tally(
        labelled=labelled,
        kernel_rows=kernel_rows,
        excluded=excluded,
        naive_ns=naive_ns,
        ulp_ns=ulp_ns,
    )


def _ambiguous_ns(parsed: Sequence[Parsed], verdicts: Sequence[Verdict]) -> int:
    """The self device time the AMBIGUOUS rows carry (never counted)."""
    return sum(
        max(_self_ns(row), 0)
        for row, verdict in zip(parsed, verdicts, strict=True)
        if verdict.label is RowLabel.AMBIGUOUS
    )


def _reconcile(
    header: Header,
    table: KernelTable,
    *,
    footer_ns: int | None,
    tolerance2: int,
    ambiguous_ns: int,
    notes: list[str],
) -> int | None:
    """The device time the footer has beyond the counted rows (0 when they reconcile).

    None without a footer or when the rows exceed it; a note says what the gap means.
    """
    sum_ns = round(table.device_us * 1000)
    if footer_ns is None:
        if header.dialect is Dialect.MODERN:
            notes.append(f"no 'Self {header.device} time total' footer: the sum cannot be checked")
        return None
    if 2 * abs(footer_ns - sum_ns) <= tolerance2:
        return 0
    if footer_ns > sum_ns:
        hidden_ns = footer_ns - sum_ns
        notes.append(
            f"the footer ({_fmt(footer_ns)}) exceeds the counted rows ({_fmt(sum_ns)}) by "
            f"{_fmt(hidden_ns)}: device rows the printout hid (row_limit)"
            + (" or rows left AMBIGUOUS" if ambiguous_ns > 0 else "")
        )
        return hidden_ns
    notes.append(
        f"the counted rows ({_fmt(sum_ns)}) exceed the footer ({_fmt(footer_ns)}): "
        "some counted row is not device work the profiler counted"
    )
    return None
