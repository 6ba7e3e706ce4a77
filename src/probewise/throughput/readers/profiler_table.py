"""Read the text ``prof.key_averages().table()`` printed back into a table's parts.

``key_averages()`` lists both the ATen op (``aten::mm``) and the kernel it launched,
each with the same self device time, so summing the ``Self CUDA`` column counts the
same time twice. :func:`read_tables` reads the printed table, labels every row
(:class:`RowLabel`: kernel, op, annotation or ambiguous, with the reason), keeps the
device kernel rows only (:class:`PrintedTable`, whose ``parts`` the table builds itself
from), and checks their sum against the footer's ``Self <DEV> time total``
(:meth:`PrintedTable.check_footer`). :mod:`probewise.throughput.table_readings` makes
the public :class:`~probewise.throughput.ProfilerTableReading` of it.

The format, the header dialects, the labelling rules, what is counted, truncation, the
footer check and the errors are specified in docs/reference/profiler-table.md. The
stages live beside this module: ``_table_frames`` (lines, frames, printed values),
``_table_rows`` (header and rows) and ``_table_labels`` (the labelling rules).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import assert_never, cast, final

import attrs

from probewise import _json
from probewise._validation import (
    checked_type,
    non_blank_str,
    non_negative_int,
    optional,
)
from probewise.errors import (
    ArgumentTypeError,
    ArgumentTypeValueError,
    DamageKind,
    InvalidInputError,
    TraceFormatError,
)
from probewise.throughput._kernel_rows import Exclusion, KernelRow, TableParts
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
    "PrintedTable",
    "RowLabel",
    "decode_table_bytes",
    "read_table",
    "read_tables",
]


def _finite_or_none(
    _instance: object, attribute: attrs.Attribute[float | None], value: object
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a finite number or None, got {type(value).__name__}"
        )
    if not math.isfinite(value):
        raise InvalidInputError(f"{attribute.name} must be a finite number or None, got {value!r}")


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
    calls: int | None = attrs.field(validator=optional(non_negative_int))
    truncated: bool = attrs.field(validator=checked_type(bool))
    counted: bool = attrs.field(validator=checked_type(bool))

    def __attrs_post_init__(self) -> None:
        if self.label is RowLabel.KERNEL and not self.counted:
            raise InvalidInputError("LabelledRow: a KERNEL row is always counted")

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


@final
@attrs.frozen(kw_only=True)
class PrintedTable:
    """One printed table, read: what :class:`~probewise.throughput.ProfilerTableReading`
    holds, with the kernel table still as its parts and the footer not yet checked.

    ``tolerance2_ns`` is twice the tolerance (in ns) of the counted values and of the
    footer; ``ambiguous_ns`` the self device time of the AMBIGUOUS rows; ``modern``
    whether the header is of the modern dialect. ``notes`` are the notes up to the
    footer check, which :meth:`check_footer` adds.
    """

    parts: TableParts
    device: str
    rows: tuple[LabelledRow, ...]
    legacy: bool
    modern: bool
    footer_self_device_ns: int | None
    footer_self_cpu_ns: int | None
    tolerance2_ns: int
    ambiguous_ns: int
    possible_collisions: tuple[str, ...]
    columns: tuple[str, ...]
    offset: int
    notes: tuple[str, ...]

    def check_footer(self, sum_ns: int) -> tuple[int | None, tuple[str, ...]]:
        """The footer's device time beyond the counted rows (``sum_ns``: the table's
        ``device_us`` in ns), and every note, the footer check's included.

        0 when they reconcile; None without a footer or when the rows exceed it.
        """
        notes = list(self.notes)
        hidden_ns = _reconcile(
            sum_ns,
            self.device,
            modern=self.modern,
            footer_ns=self.footer_self_device_ns,
            tolerance2=self.tolerance2_ns,
            ambiguous_ns=self.ambiguous_ns,
            notes=notes,
        )
        if self.ambiguous_ns > 0 and not self.legacy:
            count_ambiguous = sum(1 for row in self.rows if row.label is RowLabel.AMBIGUOUS)
            notes.append(
                f"{count_ambiguous} AMBIGUOUS rows carry {_fmt(self.ambiguous_ns)} of self device "
                "time, not counted"
            )
        return hidden_ns, tuple(notes)


def read_tables(text: str) -> tuple[PrintedTable, ...]:
    """Every table in ``text`` (what ``key_averages().table()`` printed), in order, read.

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


def read_table(text: str) -> PrintedTable:
    """The one table in ``text``; raises TraceFormatError if there are none or several.

    A text with several tables (the profiler recipe prints a CUDA and an XPU one) is
    rejected with the offset of the second, rather than read in part: use
    :func:`read_tables` for it.
    """
    first, *others = read_tables(text)
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


def _read_frame(frame: Frame) -> PrintedTable:
    header = read_header(frame)
    parsed = parse_rows(frame, header)
    footer = _read_footer(frame, header)
    notes: list[str] = [*frame.notes, *header.notes, *footer.notes]
    if not parsed:
        notes.append("the table has no rows")
    verdicts, counted, legacy = _label_rows(header, parsed, footer, notes)
    tally = _tally(header, parsed, verdicts, counted, legacy=legacy)
    if header.dialect is Dialect.CPU_ONLY:
        parts = TableParts(rows=(), naive_device_us=0.0)  # the empty table
    else:
        parts = TableParts(
            rows=tuple(tally.kernel_rows),
            excluded=tuple(tally.excluded),
            naive_device_us=_us(tally.naive_ns),
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
    collisions = tuple(dict.fromkeys(row.name for row in tally.labelled if row.truncated))
    return PrintedTable(
        parts=parts,
        device=header.device,
        rows=tuple(tally.labelled),
        legacy=legacy,
        modern=header.dialect is Dialect.MODERN,
        footer_self_device_ns=footer_ns,
        footer_self_cpu_ns=None if footer.self_cpu is None else footer.self_cpu.ns,
        tolerance2_ns=tolerance2,
        ambiguous_ns=_ambiguous_ns(parsed, verdicts),
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
    sum_ns: int,
    device: str,
    *,
    modern: bool,
    footer_ns: int | None,
    tolerance2: int,
    ambiguous_ns: int,
    notes: list[str],
) -> int | None:
    """The device time the footer has beyond the counted rows (0 when they reconcile).

    None without a footer or when the rows exceed it; a note says what the gap means.
    """
    if footer_ns is None:
        if modern:
            notes.append(f"no 'Self {device} time total' footer: the sum cannot be checked")
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
