"""Read the text ``prof.key_averages().table()`` printed back into a :class:`KernelTable`.

``key_averages()`` lists both the ATen op (``aten::mm``) and the kernel it launched,
each with the same self device time, so summing the ``Self CUDA`` column counts the
same time twice. :func:`read_profiler_tables` reads the printed table, labels every
row (:class:`RowLabel`: kernel, op, annotation or ambiguous, with the reason), sums
the device kernel rows only, and checks that sum against the footer's
``Self <DEV> time total``.

Layout
    A table is framed by separator lines made of dash groups (``-----  -----``); the
    header line sits between the first two and the rows between the second and the
    third, then come the footer lines (``Self CPU time total: 1.720ms``,
    ``Self CUDA time total: 1.763ms``). Column boundaries are the dash groups of the
    separator under the header: every line is sliced by those spans, never split on
    whitespace (names are right-aligned and may contain spaces). A value wider than
    its column (``CUDA time avg`` in a 12-wide column, ``2499990.000us`` with
    ``time_unit="us"``) pushes the rest of its line to the right, as ``str.format``
    does; the slicer follows that shift. A missing top separator, a missing closing
    separator (the torch 0.4 layout had none) and trailing spaces or ``\\r\\n`` line
    ends are tolerated. Lines outside the frames (a ``header=`` banner, log lines)
    are ignored. Continuation lines of ``with_stack`` tables (no name, only a source
    location) and their blank separators are skipped.

Header dialects
    Columns are recognised by name, whatever their order; unknown ones are ignored
    (a note says which). ``<DEV>`` is the device word the header prints (``CUDA``,
    ``XPU``, ``MTIA``, ``HPU``, a PrivateUse1 backend's name, ``Device``...); it is
    what :attr:`ProfilerTableReading.device` reports.

    * modern (``torch.profiler``, and the autograd profiler since 2020):
      ``Self <DEV>`` is present; ``<DEV> total`` may be missing in a partial layout,
      and then rows are labelled by their names alone;
    * pre-2020 (torch ≤ 1.5 autograd profiler: ``Self CPU total``, ``CUDA total``,
      ``Number of Calls``; torch 0.4: ``CPU time``, ``CUDA time``, ``Calls``): there
      is no self device column, only the inclusive ``<DEV> total``. Those tables come
      from the CUDA-event (legacy) path, so rows are ops, not kernels. A row counts
      when it is a *leaf*: ``Self CPU total`` equals ``CPU total`` (nothing ran below
      it on the host), so its ``CUDA total`` is its own device time; every other row
      with device time includes its children's and is excluded. Without self CPU
      columns (torch 0.4) leaves cannot be told, and rows with device time are
      AMBIGUOUS. The old footer ``CUDA time total`` sums the inclusive column, so it
      is not used to reconcile;
    * CPU-only (no device columns): an empty table and a note, not an error;
    * memory (``CPU Mem``, ``Self CUDA Mem``...), FLOPs (``Total GFLOPs``...),
      ``Input Shapes``, ``Source Location``, ``Node ID``, ``Overload Name`` and the
      percentage and average columns are recognised and not read.

    Values are times with a unit (``12.979us``, ``1.737ms``, ``2.500s``; ``ns`` is also
    read), counts, or anything at all in the columns that are not read. A time that
    does not parse, in a column that is read, raises.

Labelling rules
    Tried in this order; the first that fires gives the label, and
    :attr:`LabelledRow.reason` says which. "sd" is the row's self device time, "dt" its
    device total, "host time" its ``CPU total`` (when printed).

    1. sd or dt negative (a profiler accounting artefact): AMBIGUOUS.
    2. a runtime or driver API call (``cudaLaunchKernel``, ``cuLaunchKernel``,
       ``hipMemcpyAsync``, ``zeCommandListAppend...``: a lowercase API prefix followed
       by a capital, one identifier): OP, excluded as ``RUNTIME_CALL``; AMBIGUOUS if it
       carries device time.
    3. ``Memcpy ...`` / ``Memset ...``: KERNEL (:meth:`KernelKind.of` makes them MEMCPY
       and MEMSET rows), unless its shape says otherwise (see 6).
    4. annotation names: ``ProfilerStep#N``, ``Optimizer.*``, ``enumerate(DataLoader)*``,
       ``nn.Module: *``, ``autograd::engine::evaluate_function: *``, Python functions
       (``file.py(12): name``, ``<built-in ...>``), c10d ranges (``nccl:all_reduce``),
       ``record_param_comms``, ``Torch-Compiled Region*``, ``CompiledFunction*``,
       ``## ... ##``: ANNOTATION.
    5. an op namespace (``aten::``, ``c10d::``, ``_c10d_functional::``, ``torch::``,
       ``autograd::``, ``prim::``, ``prims::``, ``profiler::``, ``quantized::``,
       ``inductor::``, ``fbgemm::``, ``torchvision::``...), or any ``ns::name`` made of
       identifiers only, without a signature (a registered custom op such as
       ``vllm::rms_norm``): OP.
    6. a kernel signature: ``void ...``, template arguments or a parameter list (``<``
       or ``(``), or a kernel-library word (``kernel``, ``gemm``/``gemv``, ``cutlass``,
       ``cublas``, ``cudnn``, ``xmma``, ``Cijk_``, ``nccl``/``rccl``, ``elementwise``,
       ``vectorized``, a leading ``ampere_``/``volta_``/``turing_``/``hopper_``/
       ``sm80_``-style arch prefix, ``triton_``, ``fmha``, ``flash``): KERNEL when its
       shape is a device row's (sd == dt, or no dt column, and no host time); with no
       sd but dt or host time below it, ANNOTATION (a host-side range named after its
       kernel, as Inductor's launchers are); otherwise AMBIGUOUS.
    7. sd > 0 and another printed row with the same name has sd == 0 and dt > 0: that
       one is a host-side ``record_function`` range and this one its span on the
       device timeline: ANNOTATION, excluded as ``GPU_USER_ANNOTATION``.
    8. shape alone, for names no rule recognised:
       sd == dt > 0 without host time: KERNEL (a leaf device row); with host time:
       AMBIGUOUS; sd == 0 < dt: ANNOTATION (a host range such as ``model_inference``);
       0 < sd < dt: AMBIGUOUS; no device time: OP (host side); sd > 0 with no dt
       column: KERNEL if a ``CPU total`` column shows no host time, else AMBIGUOUS.

    On a pre-2020 table rules 1, 2 and 4 give the labels, every other row is an OP, and
    the leaf rule above decides what counts.

What is counted
    KERNEL rows are the rows of the table (repeats of a name are summed: see
    "Truncation"). Everything else is excluded (:class:`Exclusion`) with the time it
    carried: OP rows as ``CPU_OP`` (``RUNTIME_CALL`` for runtime calls), ANNOTATION
    rows as ``GPU_USER_ANNOTATION`` when they carry self device time and ``CPU_OP``
    when they do not, AMBIGUOUS rows as ``OTHER``. AMBIGUOUS rows are never counted:
    they are reported (a note gives their time), and the footer check tells whether
    the printed kernels already account for the device time.

    **Legacy tables.** On the CUDA-event path (``is_legacy``) there are no kernel
    rows: the device time sits on the op rows, and the footer sums their self device
    time. A modern-layout table is read as legacy when no row is a KERNEL, some OP
    row carries self device time, and either its footer equals the sum of the rows'
    self device time or (without a footer) no AMBIGUOUS row carries device time. Then
    every row with self device time is counted, whatever its label
    (:attr:`LabelledRow.counted`). When the op rows do not add up to the footer, the
    kernels were most likely hidden (``row_limit``): nothing is counted and a note
    says so. Pre-2020 tables are always legacy.

    ``naive_device_us`` is the sum of the ``Self <DEV>`` column over every printed row
    (of ``<DEV> total`` on a pre-2020 table): what summing the column would have said.

Truncation
    ``table()`` cuts every name of ``max_name_column_width - 3`` characters or more
    (52 by default) to that many characters plus ``...``. A displayed name ending in
    ``...`` is :attr:`LabelledRow.truncated` and listed in
    :attr:`ProfilerTableReading.possible_collisions`. Two counted rows with the same
    displayed name are distinct kernels whose names collide: the table merges them
    (times and calls summed) and a note says so. Untruncated repeats (tables grouped
    by input shape or stack) are merged too, with their own note.

Footer and reconciliation
    ``kernel_sum_us`` is the sum of the counted rows, copies and fills included (the
    footer counts every device row). Each printed time is rounded to its last digit
    (1 ns for ``us``, 1 µs for ``ms``, 1 ms for ``s``), so each is off by at most half
    that digit. :attr:`ProfilerTableReading.tolerance_us` is the sum of those halves
    over the counted values and the footer, and the reading is
    :attr:`~ProfilerTableReading.reconciled` when the sum and the footer differ by no
    more. When the footer is larger, ``hidden_device_us`` is the difference: device
    time in rows the printout did not show (``row_limit``, ``top_level_events_only``)
    or in AMBIGUOUS rows.

Several tables
    :func:`read_profiler_tables` returns one reading per table, in order (the PyTorch
    profiler recipe prints a CUDA and an XPU table one after the other).
    :func:`read_profiler_table` requires exactly one and raises otherwise, rather than
    silently reading the first.

Errors
    Text without a table, a frame whose header has no ``Name`` column or no time
    column, columns for two devices, or a value that does not parse, in a column that
    is read, raise :class:`~probewise.TraceFormatError` with ``offset`` set to the
    character offset of the offending line (its ``kind`` is
    :attr:`~probewise.errors.DamageKind.NOT_A_TABLE` or ``MALFORMED``).
"""

from __future__ import annotations

import enum
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final, NoReturn, assert_never, final

import attrs

from probewise._validation import (
    checked_type,
    duration,
    non_blank_str,
    non_negative_int,
    optional_duration,
    optional_non_negative_int,
)
from probewise.errors import ArgumentTypeError, DamageKind, InvalidInputError, TraceFormatError
from probewise.throughput.kernels import (
    Exclusion,
    ExclusionReason,
    KernelRow,
    KernelTable,
)

__all__ = [
    "LabelledRow",
    "ProfilerTableReading",
    "RowLabel",
    "read_profiler_table",
    "read_profiler_tables",
]

_MAX_NS: Final = 10**18  # about 31 years: anything larger is not a printed duration


# --------------------------------------------------------------------------- validators


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


# --------------------------------------------------------------------------- public values


@enum.unique
class RowLabel(enum.Enum):
    """What a printed row is (see the module docstring for the rules)."""

    KERNEL = "kernel"
    """A device row: a kernel, a copy or a fill. Counted."""
    OP = "op"
    """A host-side op or runtime call; its self device time repeats its kernels'."""
    ANNOTATION = "annotation"
    """A range (``record_function``, ``ProfilerStep#N``) or its span on the device timeline."""
    AMBIGUOUS = "ambiguous"
    """Device time the rules cannot attribute; reported, never counted."""


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
        return {
            "name": self.name,
            "label": self.label.value,
            "reason": self.reason,
            "self_device_us": self.self_device_us,
            "device_total_us": self.device_total_us,
            "calls": self.calls,
            "truncated": self.truncated,
            "counted": self.counted,
        }


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
        return {
            "table": self.table.to_dict(),
            "device": self.device,
            "rows": [row.to_dict() for row in self.rows],
            "legacy": self.legacy,
            "footer_self_device_us": self.footer_self_device_us,
            "footer_self_cpu_us": self.footer_self_cpu_us,
            "kernel_sum_us": self.kernel_sum_us,
            "tolerance_us": self.tolerance_us,
            "hidden_device_us": self.hidden_device_us,
            "reconciled": self.reconciled,
            "possible_collisions": list(self.possible_collisions),
            "columns": list(self.columns),
            "offset": self.offset,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- entry points


def read_profiler_tables(text: str) -> tuple[ProfilerTableReading, ...]:
    """Every table in ``text`` (what ``key_averages().table()`` printed), in order.

    Raises :class:`~probewise.TraceFormatError` when the text holds no table, or when
    a table cannot be read (see the module docstring).
    """
    lines = _split_lines(text)
    frames = sorted(
        (frame for prefix, view in _views(lines) for frame in _find_frames(view, prefix)),
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


# --------------------------------------------------------------------------- lines and frames


@final
@attrs.frozen
class _Line:
    text: str
    offset: int
    cut: bool = False  # blanked: the line does not carry its view's comment prefix

    @property
    def blank(self) -> bool:
        return not self.text.strip()


_LINE_ENDS: Final = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_SEPARATOR: Final = re.compile(r"[ \t]*-{3,}(?:[ \t]+-{3,})+[ \t]*")
_DASHES: Final = re.compile(r"-+")
_FOOTER: Final = re.compile(r"[ \t]*(Self )?(\w+) time total:[ \t]*(\S*)[ \t]*", re.ASCII)
_GAP: Final = re.compile(r"\s\s")


def _split_lines(text: str) -> list[_Line]:
    offset = 0
    if text.startswith("\ufeff"):
        text = text[1:]
        offset = 1
    out: list[_Line] = []
    for raw in text.splitlines(keepends=True):
        out.append(_Line(raw.rstrip(_LINE_ENDS), offset))
        offset += len(raw)
    return out


def _is_separator(line: _Line) -> bool:
    return _SEPARATOR.fullmatch(line.text) is not None


_COMMENTED_SEPARATOR: Final = re.compile(r"([ \t]*(?:#|//|>))[ \t]*-{3,}(?:[ \t]+-{3,})+[ \t]*")


def _views(lines: Sequence[_Line]) -> list[tuple[str, list[_Line]]]:
    """The text as printed, plus one view per comment prefix a separator line carries.

    A table pasted into a Python comment, a C++ comment or a Markdown quote has the
    same prefix (``#``, ``//``, ``>``, with any indentation before it) on every line.
    In the view for a prefix, lines that start with it lose it (and nothing else, so
    the columns stay aligned) and every other line becomes blank and ``cut``, so a
    table can never run across a line without the prefix.
    """
    prefixes = dict.fromkeys(
        match.group(1)
        for match in map(_COMMENTED_SEPARATOR.fullmatch, (line.text for line in lines))
        if match is not None
    )
    views: list[tuple[str, list[_Line]]] = [("", list(lines))]
    for prefix in prefixes:
        view = [
            _Line(line.text[len(prefix) :], line.offset + len(prefix))
            if line.text.startswith(prefix)
            else _Line("", line.offset, cut=True)
            for line in lines
        ]
        views.append((prefix, view))
    return views


def _spans(separator: _Line) -> tuple[tuple[int, int], ...]:
    return tuple((m.start(), m.end()) for m in _DASHES.finditer(separator.text))


def _cells(line: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """Slice ``line`` by the column spans, following values wider than their column.

    ``str.format`` prints a value wider than its column in full, which moves the rest
    of the line right; a non-space where a column should end marks such a value, and
    the cell then runs to the next double space.
    """
    cells: list[str] = []
    start = 0
    shift = 0
    length = len(line)
    for _, end in spans:
        stop = end + shift
        if stop < length and not line[stop].isspace():
            gap = _GAP.search(line, stop)
            moved = length if gap is None else gap.start()
            shift += moved - stop
            stop = moved
        cells.append(line[start:stop].strip())
        start = stop
    return cells


@final
@attrs.frozen(kw_only=True)
class _Frame:
    header: _Line
    spans: tuple[tuple[int, int], ...]
    rows: tuple[_Line, ...]
    footer: tuple[_Line, ...]
    notes: tuple[str, ...]
    offset: int


def _looks_like_header(line: _Line, separator: _Line) -> bool:
    cells = _cells(line.text, _spans(separator))
    return bool(cells) and cells[0].lower() == "name"


def _starts_frame(lines: Sequence[_Line], at: int) -> bool:
    """Whether ``lines[at]`` is the top separator of a frame (separator, header, separator)."""
    return (
        at + 2 < len(lines)
        and _is_separator(lines[at])
        and not lines[at + 1].blank
        and not _is_separator(lines[at + 1])
        and _is_separator(lines[at + 2])
    )


def _find_frames(lines: Sequence[_Line], prefix: str = "") -> list[_Frame]:
    frames: list[_Frame] = []
    count = len(lines)
    i = 0
    while i < count:
        notes: list[str] = []
        if prefix:
            notes.append(
                f"the table was pasted with the comment prefix {prefix.strip()!r} on every "
                "line; read with it stripped"
            )
        line = lines[i]
        if _starts_frame(lines, i):
            top: _Line | None = line
            header_at = i + 1
        elif (
            not line.blank
            and not _is_separator(line)
            and i + 1 < count
            and _is_separator(lines[i + 1])
            and _looks_like_header(line, lines[i + 1])
        ):
            top = None
            header_at = i
            notes.append("no separator line above the header")
        else:
            i += 1
            continue
        header = lines[header_at]
        under = lines[header_at + 1]
        if top is not None and top.text.rstrip() != under.text.rstrip():
            notes.append(
                "the separator above the header differs from the one below; used the one below"
            )
        spans = _spans(under)
        stack = "source location" in (c.lower() for c in _cells(header.text, spans))
        j = header_at + 2
        rows: list[_Line] = []
        while j < count:
            current = lines[j]
            if _is_separator(current) or _FOOTER.fullmatch(current.text) is not None:
                break
            if current.cut:
                notes.append(
                    f"the table stops at character {current.offset}: that line does not "
                    f"carry the comment prefix {prefix.strip()!r} of the lines above it"
                )
                break
            if current.blank and not stack:
                break
            rows.append(current)
            j += 1
        if j < count and _is_separator(lines[j]):
            if _starts_frame(lines, j):
                notes.append("no closing separator line")
            else:
                j += 1
        elif j >= count or _FOOTER.fullmatch(lines[j].text) is None:
            notes.append("no closing separator line")
        footer: list[_Line] = []
        while j < count and _FOOTER.fullmatch(lines[j].text) is not None:
            footer.append(lines[j])
            j += 1
        frames.append(
            _Frame(
                header=header,
                spans=spans,
                rows=tuple(rows),
                footer=tuple(footer),
                notes=tuple(notes),
                offset=(top or header).offset,
            )
        )
        i = max(j, i + 1)
    return frames


# --------------------------------------------------------------------------- values


@final
@attrs.frozen
class _Time:
    """A printed duration: integer nanoseconds and the size of its last printed digit."""

    ns: int
    ulp_ns: int


_TIME: Final = re.compile(r"(-?)([0-9]{1,18})(?:\.([0-9]{0,12}))?[ ]?(ns|us|µs|μs|ms|s)")
_UNIT_NS: Final = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9}
_INTEGER: Final = re.compile(r"[0-9]{1,18}")


def _fail(message: str, line: _Line, kind: DamageKind = DamageKind.MALFORMED) -> NoReturn:
    raise TraceFormatError(message, offset=line.offset, kind=kind)


def _parse_time(cell: str, column: str, line: _Line) -> _Time:
    match = _TIME.fullmatch(cell)
    if match is None:
        _fail(f"{column!r} value {cell[:40]!r} is not a time such as '12.979us' or '1.737ms'", line)
    sign, whole, fraction, unit = match.groups()
    digits = fraction or ""
    scale = 10 ** len(digits)
    exact = int(whole + digits) * _UNIT_NS[unit]
    ns, remainder = divmod(exact, scale)
    if 2 * remainder >= scale:
        ns += 1
    if ns > _MAX_NS:
        _fail(f"{column!r} value {cell[:40]!r} is not a plausible duration", line)
    ulp = -(-_UNIT_NS[unit] // scale)
    return _Time(-ns if sign else ns, max(1, ulp))


def _parse_calls(cell: str, column: str, line: _Line) -> int:
    if _INTEGER.fullmatch(cell) is None:
        _fail(f"{column!r} value {cell[:40]!r} is not a count", line)
    return int(cell)


# --------------------------------------------------------------------------- header


@enum.unique
class _Role(enum.Enum):
    NAME = "name"
    SELF_CPU = "self_cpu"
    CPU_TOTAL = "cpu_total"
    CPU_OTHER = "cpu_other"
    SELF_DEVICE = "self_device"
    DEVICE_TOTAL = "device_total"
    DEVICE_OTHER = "device_other"
    CALLS = "calls"
    KNOWN = "known"
    UNKNOWN = "unknown"


_HEADER_RULES: Final[tuple[tuple[re.Pattern[str], _Role], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.ASCII), role)
    for pattern, role in (
        (r"name", _Role.NAME),
        (r"(?:# of |number of )?calls", _Role.CALLS),
        (r"(?:self )?\w+ mem", _Role.KNOWN),
        (
            r"(?:total )?[kmgtp]?flops|input shapes|source location|node id|overload name",
            _Role.KNOWN,
        ),
        (r"self cpu(?: total)?", _Role.SELF_CPU),
        (r"cpu total", _Role.CPU_TOTAL),
        (r"self cpu(?: total)? %|cpu total %|cpu time avg|cpu time", _Role.CPU_OTHER),
        (r"self (?P<device>\w+)(?: total)?", _Role.SELF_DEVICE),
        (r"(?P<device>\w+) total", _Role.DEVICE_TOTAL),
        (
            r"self (?P<device>\w+)(?: total)? %|(?P<device2>\w+) (?:total %|time avg|time)",
            _Role.DEVICE_OTHER,
        ),
    )
)


@enum.unique
class _Dialect(enum.Enum):
    MODERN = "modern"
    INCLUSIVE = "inclusive"  # pre-2020: <DEV> total only
    CPU_ONLY = "cpu_only"


@final
@attrs.frozen(kw_only=True)
class _Header:
    columns: tuple[str, ...]
    dialect: _Dialect
    device: str
    index: dict[_Role, int]
    notes: tuple[str, ...]

    def has(self, role: _Role) -> bool:
        return role in self.index


def _classify(column: str) -> tuple[_Role, str | None]:
    for pattern, role in _HEADER_RULES:
        match = pattern.fullmatch(column)
        if match is None:
            continue
        device = match.groupdict().get("device") or match.groupdict().get("device2")
        if device is not None and device.upper() == "CPU":
            return _Role.CPU_OTHER, None
        return role, device
    return _Role.UNKNOWN, None


def _read_header(frame: _Frame) -> _Header:
    line = frame.header
    columns = tuple(_cells(line.text, frame.spans))
    if not columns or columns[0].lower() != "name":
        first = columns[0][:40] if columns else ""
        _fail(
            f"the header of this table has no 'Name' first column (got {first!r})",
            line,
            DamageKind.NOT_A_TABLE,
        )
    index: dict[_Role, int] = {}
    devices: dict[str, str] = {}
    unknown: list[str] = []
    for at, column in enumerate(columns):
        role, device = _classify(column)
        match role:
            case _Role.KNOWN:
                pass
            case _Role.CPU_OTHER | _Role.DEVICE_OTHER:
                index.setdefault(role, at)
            case _Role.UNKNOWN:
                unknown.append(column)
            case (
                _Role.NAME
                | _Role.SELF_CPU
                | _Role.CPU_TOTAL
                | _Role.SELF_DEVICE
                | _Role.DEVICE_TOTAL
                | _Role.CALLS
            ):
                if role in index:
                    _fail(
                        f"the header has the column {column!r} twice", line, DamageKind.NOT_A_TABLE
                    )
                index[role] = at
            case _ as unreachable:
                assert_never(unreachable)
        if device is not None:
            devices.setdefault(device, column)
    if len(devices) > 1:
        _fail(
            "the header has columns for more than one device: "
            + ", ".join(repr(column) for column in devices.values()),
            line,
            DamageKind.NOT_A_TABLE,
        )
    notes: list[str] = []
    if unknown:
        notes.append("columns not read: " + ", ".join(repr(c) for c in unknown))
    device = next(iter(devices), "CPU")
    if _Role.SELF_DEVICE in index:
        dialect = _Dialect.MODERN
        if _Role.DEVICE_TOTAL not in index:
            notes.append(
                f"partial layout: no '{device} total' column, so rows are labelled by their names"
            )
    elif _Role.DEVICE_TOTAL in index:
        dialect = _Dialect.INCLUSIVE
        notes.append(
            f"pre-2020 layout: no 'Self {device}' column; a row counts when it is a leaf op "
            f"(self CPU time equals CPU total), with its '{device} total' as its device time"
        )
    elif _Role.DEVICE_OTHER in index:
        _fail(
            f"the header has {device} columns but neither 'Self {device}' nor "
            f"'{device} total': the device time cannot be read",
            line,
            DamageKind.NOT_A_TABLE,
        )
    elif _Role.SELF_CPU in index or _Role.CPU_TOTAL in index or _Role.CPU_OTHER in index:
        dialect = _Dialect.CPU_ONLY
        notes.append(
            "CPU-only table: no device columns, so no device time; the kernel table is empty"
        )
    else:
        _fail(
            "the header has no time column (no 'Self CPU', 'Self <DEV>' or '<DEV> total')",
            line,
            DamageKind.NOT_A_TABLE,
        )
    return _Header(columns=columns, dialect=dialect, device=device, index=index, notes=tuple(notes))


# --------------------------------------------------------------------------- rows


@final
@attrs.frozen(kw_only=True)
class _Parsed:
    name: str
    self_device: _Time | None
    device_total: _Time | None
    calls: int | None
    self_cpu: _Time | None
    cpu_total: _Time | None

    @property
    def host_time(self) -> bool | None:
        """Whether the row spent host time (None without a ``CPU total`` column)."""
        return None if self.cpu_total is None else self.cpu_total.ns > 0


_READ_ROLES: Final = (
    _Role.SELF_DEVICE,
    _Role.DEVICE_TOTAL,
    _Role.CALLS,
    _Role.SELF_CPU,
    _Role.CPU_TOTAL,
)


def _parse_rows(frame: _Frame, header: _Header) -> list[_Parsed]:
    out: list[_Parsed] = []
    read = [role for role in _READ_ROLES if header.has(role)]
    for line in frame.rows:
        if line.blank:
            continue
        cells = _cells(line.text, frame.spans)
        name = cells[0]
        values = {role: cells[header.index[role]] for role in read}
        if not name:
            if any(values.values()):
                _fail("a row has values but no name", line)
            continue  # a with_stack continuation line
        calls: int | None = None
        if _Role.CALLS in values:
            column = header.columns[header.index[_Role.CALLS]]
            if not values[_Role.CALLS]:
                _fail(f"the row {name[:60]!r} has no {column!r} value", line)
            calls = _parse_calls(values[_Role.CALLS], column, line)
        out.append(
            _Parsed(
                name=name,
                self_device=_row_time(values, _Role.SELF_DEVICE, header, name, line),
                device_total=_row_time(values, _Role.DEVICE_TOTAL, header, name, line),
                calls=calls,
                self_cpu=_row_time(values, _Role.SELF_CPU, header, name, line),
                cpu_total=_row_time(values, _Role.CPU_TOTAL, header, name, line),
            )
        )
    return out


def _row_time(
    values: dict[_Role, str], role: _Role, header: _Header, name: str, line: _Line
) -> _Time | None:
    if role not in values:
        return None
    cell = values[role]
    column = header.columns[header.index[role]]
    if not cell:
        _fail(f"the row {name[:60]!r} has no {column!r} value", line)
    return _parse_time(cell, column, line)


# --------------------------------------------------------------------------- labelling


_RUNTIME: Final = re.compile(
    r"(?:cuda|cu|hip|hsa|mtia|xpu|ze|ur|cudnn|cublas|cublasLt|cupti|nvtx|sycl)[A-Z]\w*", re.ASCII
)
_MEMORY_OP: Final = re.compile(r"Mem(?:cpy|set)", re.IGNORECASE)
_ANNOTATION: Final = re.compile(
    r"ProfilerStep[#*]|Optimizer\.|enumerate\(DataLoader\)|nn\.Module: "
    r"|autograd::engine::evaluate_function: |<built-in |\S+\.py\(\d+\): "
    r"|(?:nccl|gloo|mpi|ucc|xccl):\w|record_param_comms$|Torch-Compiled Region"
    r"|CompiledFunction|## .* ##$"
)
_OP_NAMESPACE: Final = re.compile(
    r"(aten|c10d|_c10d_functional|c10d_functional|_dtensor|torch|autograd|prim|prims|profiler"
    r"|quantized|_quantized|inductor|_inductor|fbgemm|torchvision|torchaudio|mkldnn|onednn"
    r"|xla|higher_order|_higher_order_ops|sparse|_sparse|_nested)::"
)
_QUALIFIED_OP: Final = re.compile(r"([A-Za-z_]\w*)(?:::[A-Za-z_]\w*)*::[A-Za-z_][\w.]*", re.ASCII)
_VOID: Final = re.compile(r"void\s")
_SIGNATURE: Final = re.compile(r"[<(]")
_KERNEL_WORD: Final = re.compile(
    r"kernel|gem[mv]|cutlass|cublas|cudnn|xmma|cijk_|nccl|rccl|elementwise|vectorized"
    r"|^(?:ampere|volta|turing|hopper|blackwell|maxwell|pascal|sm\d+|triton|fmha|flash)_?",
    re.IGNORECASE,
)


@final
@attrs.frozen
class _Verdict:
    label: RowLabel
    reason: str
    runtime: bool = False


def _is_annotation_shape(row: _Parsed) -> bool:
    sd, dt = row.self_device, row.device_total
    return sd is not None and dt is not None and sd.ns == 0 and dt.ns > 0


def _label_kernel_named(row: _Parsed, why: str) -> _Verdict:
    sd, dt = row.self_device, row.device_total
    host = row.host_time
    self_ns = 0 if sd is None else sd.ns
    if dt is not None and dt.ns < self_ns:
        return _Verdict(
            RowLabel.AMBIGUOUS, f"{why}, but its device total is below its self device time"
        )
    below = dt is not None and dt.ns > self_ns
    if self_ns == 0 and (below or host is True):
        return _Verdict(
            RowLabel.ANNOTATION,
            f"{why}, but with no self device time and "
            + ("device time below it" if below else "host time")
            + ": a host-side range named after its kernel",
        )
    if below:
        return _Verdict(RowLabel.AMBIGUOUS, f"{why}, but its device total exceeds its self time")
    if host is True:
        return _Verdict(RowLabel.AMBIGUOUS, f"{why}, but it also spent host time")
    return _Verdict(RowLabel.KERNEL, why)


def _label_modern(row: _Parsed, host_ranges: frozenset[str]) -> _Verdict:
    name = row.name
    sd, dt = row.self_device, row.device_total
    if (sd is not None and sd.ns < 0) or (dt is not None and dt.ns < 0):
        return _Verdict(RowLabel.AMBIGUOUS, "negative device time: a profiler accounting artefact")
    self_ns = 0 if sd is None else sd.ns
    if _RUNTIME.fullmatch(name) is not None:
        if self_ns > 0:
            return _Verdict(
                RowLabel.AMBIGUOUS, "runtime/driver API name, but it carries self device time"
            )
        return _Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True)
    if _MEMORY_OP.match(name) is not None:
        return _label_kernel_named(row, "Memcpy/Memset: a device copy or fill")
    if _ANNOTATION.match(name) is not None:
        return _Verdict(
            RowLabel.ANNOTATION,
            "annotation name (ProfilerStep#, Optimizer., record_function-style range)",
        )
    namespace = _OP_NAMESPACE.match(name)
    if namespace is not None:
        return _Verdict(RowLabel.OP, f"{namespace.group(1)}:: namespace: an op")
    qualified = _QUALIFIED_OP.fullmatch(name)
    if qualified is not None:
        return _Verdict(
            RowLabel.OP, f"{qualified.group(1)}::name without a signature: a registered op"
        )
    if _VOID.match(name) is not None:
        return _label_kernel_named(row, "'void ...' signature: a kernel")
    if _SIGNATURE.search(name) is not None:
        return _label_kernel_named(row, "template arguments or parameter list: a kernel signature")
    word = _KERNEL_WORD.search(name)
    if word is not None:
        return _label_kernel_named(row, f"kernel-library name ({word.group(0).rstrip('_')!r})")
    if self_ns > 0 and name in host_ranges:
        return _Verdict(
            RowLabel.ANNOTATION,
            "same name as a host-side range in this table: its span on the device timeline",
        )
    return _label_by_shape(row)


def _label_by_shape(row: _Parsed) -> _Verdict:
    sd, dt = row.self_device, row.device_total
    host = row.host_time
    self_ns = 0 if sd is None else sd.ns
    if dt is None:
        if self_ns == 0:
            return _Verdict(RowLabel.OP, "no self device time: host-side")
        if host is False:
            return _Verdict(RowLabel.KERNEL, "self device time and no host time: a device row")
        return _Verdict(
            RowLabel.AMBIGUOUS,
            "self device time, but no device-total column to tell a kernel from an op "
            "and a name that does not say",
        )
    if dt.ns == 0 and self_ns == 0:
        return _Verdict(RowLabel.OP, "no device time and no namespace: host-side")
    if self_ns == 0:
        return _Verdict(
            RowLabel.ANNOTATION,
            "no self device time but device time below it: a host-side range (record_function)",
        )
    if dt.ns == self_ns:
        if host is True:
            return _Verdict(
                RowLabel.AMBIGUOUS,
                "self device time equals its device total, but it also spent host time "
                "and has no namespace: a host op or a kernel",
            )
        return _Verdict(RowLabel.KERNEL, "leaf device row: self device time equals device total")
    if dt.ns > self_ns:
        return _Verdict(RowLabel.AMBIGUOUS, "device time of its own and below it, and no namespace")
    return _Verdict(RowLabel.AMBIGUOUS, "device total below its self device time")


def _label_inclusive(row: _Parsed) -> tuple[_Verdict, bool]:
    """Pre-2020 rows: the label and whether the row counts (a leaf op with device time)."""
    name = row.name
    dt = row.device_total
    total_ns = 0 if dt is None else dt.ns
    if total_ns < 0:
        return (
            _Verdict(RowLabel.AMBIGUOUS, "negative device time: a profiler accounting artefact"),
            False,
        )
    if _RUNTIME.fullmatch(name) is not None:
        if total_ns > 0:
            return (
                _Verdict(RowLabel.AMBIGUOUS, "runtime/driver API name, but it carries device time"),
                False,
            )
        return _Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True), False
    label = RowLabel.ANNOTATION if _ANNOTATION.match(name) is not None else RowLabel.OP
    what = "a range" if label is RowLabel.ANNOTATION else "an op"
    if total_ns == 0:
        return _Verdict(label, f"pre-2020 table: {what} with no device time"), False
    if row.self_cpu is None or row.cpu_total is None:
        return (
            _Verdict(
                RowLabel.AMBIGUOUS,
                "pre-2020 table without self CPU columns: cannot tell a leaf op from a parent",
            ),
            False,
        )
    if row.self_cpu.ns == row.cpu_total.ns:
        return (
            _Verdict(
                label,
                f"pre-2020 table: {what} with nothing below it (self CPU equals CPU total), "
                "so its device total is its own device time",
            ),
            True,
        )
    return (
        _Verdict(
            label,
            f"pre-2020 table: {what} with ops below it (self CPU below CPU total), "
            "so its device total includes theirs",
        ),
        False,
    )


def _label_cpu_only(row: _Parsed) -> _Verdict:
    if _RUNTIME.fullmatch(row.name) is not None:
        return _Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True)
    if _ANNOTATION.match(row.name) is not None:
        return _Verdict(RowLabel.ANNOTATION, "annotation name on a CPU-only table")
    return _Verdict(RowLabel.OP, "CPU-only table: a host-side op")


def _exclusion_reason(verdict: _Verdict, device_ns: int) -> ExclusionReason:
    match verdict.label:
        case RowLabel.OP:
            return ExclusionReason.RUNTIME_CALL if verdict.runtime else ExclusionReason.CPU_OP
        case RowLabel.ANNOTATION:
            return ExclusionReason.GPU_USER_ANNOTATION if device_ns > 0 else ExclusionReason.CPU_OP
        case RowLabel.AMBIGUOUS:
            return ExclusionReason.OTHER
        case RowLabel.KERNEL:
            raise AssertionError(
                "KERNEL rows are counted, never excluded"
            )  # internal: callers pass only excluded labels
        case _ as unreachable:
            assert_never(unreachable)


def _suffix(label: RowLabel, *, counted: bool, legacy: bool, device_ns: int) -> str:
    """What the row's time does, appended to the reason."""
    match label:
        case RowLabel.KERNEL:
            return ""
        case RowLabel.OP | RowLabel.ANNOTATION | RowLabel.AMBIGUOUS:
            if counted:
                return "; legacy table: its self device time is its own, so it is counted"
            if device_ns <= 0:
                return ""
            if label is RowLabel.OP:
                return "; excluded: " + (
                    "its device time includes its children's"
                    if legacy
                    else "its self device time repeats its kernels'"
                )
            if label is RowLabel.ANNOTATION:
                return "; excluded: its device time spans kernels counted elsewhere"
            return "; not counted"
        case _ as unreachable:
            assert_never(unreachable)


# --------------------------------------------------------------------------- one table


def _us(ns: int) -> float:
    return ns / 1000


def _fmt(ns: int) -> str:
    return f"{ns / 1000:.3f} µs"


def _self_ns(row: _Parsed) -> int:
    return 0 if row.self_device is None else row.self_device.ns


def _inclusive_ns(row: _Parsed) -> int:
    return 0 if row.device_total is None else row.device_total.ns


@final
@attrs.frozen(kw_only=True)
class _Footer:
    self_cpu: _Time | None
    self_device: _Time | None
    notes: tuple[str, ...]


def _read_footer(frame: _Frame, header: _Header) -> _Footer:
    self_cpu: _Time | None = None
    self_device: _Time | None = None
    notes: list[str] = []
    for line in frame.footer:
        match = _FOOTER.fullmatch(line.text)
        if match is None:  # pragma: no cover - frames only hold footer lines
            continue
        is_self, word, value = match.groups()
        column = f"{is_self or ''}{word} time total"
        parsed = _parse_time(value, column, line)
        if parsed.ns < 0:
            _fail(f"the footer {column!r} is negative", line)
        if is_self and word.upper() == "CPU":
            self_cpu = parsed
        elif is_self and word == header.device and header.dialect is not _Dialect.CPU_ONLY:
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
    parsed: Sequence[_Parsed], verdicts: Sequence[_Verdict], footer: _Footer, notes: list[str]
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


def _read_frame(frame: _Frame) -> ProfilerTableReading:
    header = _read_header(frame)
    parsed = _parse_rows(frame, header)
    footer = _read_footer(frame, header)
    notes: list[str] = [*frame.notes, *header.notes, *footer.notes]
    if not parsed:
        notes.append("the table has no rows")

    verdicts: list[_Verdict]
    counted: list[bool]
    legacy = False
    match header.dialect:
        case _Dialect.CPU_ONLY:
            verdicts = [_label_cpu_only(row) for row in parsed]
            counted = [False] * len(parsed)
        case _Dialect.INCLUSIVE:
            pairs = [_label_inclusive(row) for row in parsed]
            verdicts = [verdict for verdict, _ in pairs]
            counted = [count for _, count in pairs]
            legacy = True
        case _Dialect.MODERN:
            host_ranges = frozenset(row.name for row in parsed if _is_annotation_shape(row))
            verdicts = [_label_modern(row, host_ranges) for row in parsed]
            counted = [verdict.label is RowLabel.KERNEL for verdict in verdicts]
            legacy = _is_legacy(parsed, verdicts, footer, notes)
            if legacy:
                counted = [_self_ns(row) > 0 for row in parsed]
        case _ as unreachable:
            assert_never(unreachable)

    inclusive = header.dialect is _Dialect.INCLUSIVE
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
        elif header.dialect is not _Dialect.CPU_ONLY:
            excluded.append(
                Exclusion(
                    reason=_exclusion_reason(verdict, device_ns),
                    events=1,
                    total_us=_us(max(device_ns, 0)),
                )
            )
        suffix = _suffix(verdict.label, counted=count, legacy=legacy, device_ns=device_ns)
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

    if header.dialect is _Dialect.CPU_ONLY:
        table = KernelTable.empty()
    else:
        table = KernelTable.of_rows(kernel_rows, excluded=excluded, naive_device_us=_us(naive_ns))
    notes.extend(_merge_notes(labelled))
    if legacy and not inclusive:
        notes.append(
            "no kernel rows: a legacy (CUDA-event) table, whose op rows carry the device "
            f"time; the {sum(counted)} rows with self device time are counted"
        )
    sum_ns = round(table.device_us * 1000)
    footer_ns = None if footer.self_device is None else footer.self_device.ns
    tolerance2 = ulp_ns + (0 if footer.self_device is None else footer.self_device.ulp_ns)
    ambiguous_ns = sum(
        max(_self_ns(row), 0)
        for row, verdict in zip(parsed, verdicts, strict=True)
        if verdict.label is RowLabel.AMBIGUOUS
    )
    hidden_ns: int | None = None
    if footer_ns is None:
        if header.dialect is _Dialect.MODERN:
            notes.append(f"no 'Self {header.device} time total' footer: the sum cannot be checked")
    elif 2 * abs(footer_ns - sum_ns) <= tolerance2:
        hidden_ns = 0
    elif footer_ns > sum_ns:
        hidden_ns = footer_ns - sum_ns
        notes.append(
            f"the footer ({_fmt(footer_ns)}) exceeds the counted rows ({_fmt(sum_ns)}) by "
            f"{_fmt(hidden_ns)}: device rows the printout hid (row_limit)"
            + (" or rows left AMBIGUOUS" if ambiguous_ns > 0 else "")
        )
    else:
        notes.append(
            f"the counted rows ({_fmt(sum_ns)}) exceed the footer ({_fmt(footer_ns)}): "
            "some counted row is not device work the profiler counted"
        )
    if ambiguous_ns > 0 and not legacy:
        count_ambiguous = sum(1 for v in verdicts if v.label is RowLabel.AMBIGUOUS)
        notes.append(
            f"{count_ambiguous} AMBIGUOUS rows carry {_fmt(ambiguous_ns)} of self device "
            "time, not counted"
        )
    collisions = tuple(dict.fromkeys(row.name for row in labelled if row.truncated))
    return ProfilerTableReading(
        table=table,
        device=header.device,
        rows=labelled,
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
