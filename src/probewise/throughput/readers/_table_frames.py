"""A printed table's text: its lines, the frames (separator, header, separator, rows,
footer) found in it, and the printed values (times with a unit, counts).

Columns are the dash groups of the separator under the header: every line is sliced by
those spans (:func:`slice_cells`), never split on whitespace. The layout is specified in
docs/reference/profiler-table.md ("Layout").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, NoReturn, final

import attrs

from probewise.errors import DamageKind, TraceFormatError

__all__ = [
    "FOOTER",
    "Frame",
    "Line",
    "Time",
    "fail",
    "find_frames",
    "parse_calls",
    "parse_time",
    "slice_cells",
    "split_lines",
    "views",
]

_MAX_NS: Final = 10**18  # about 31 years: anything larger is not a printed duration


@final
@attrs.frozen
class Line:
    text: str
    offset: int
    cut: bool = False  # blanked: the line does not carry its view's comment prefix

    @property
    def blank(self) -> bool:
        return not self.text.strip()


_LINE_ENDS: Final = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_SEPARATOR: Final = re.compile(r"[ \t]*-{3,}(?:[ \t]+-{3,})+[ \t]*")
_DASHES: Final = re.compile(r"-+")
FOOTER: Final = re.compile(r"[ \t]*(Self )?(\w+) time total:[ \t]*(\S*)[ \t]*", re.ASCII)
_GAP: Final = re.compile(r"\s\s")


def split_lines(text: str) -> list[Line]:
    offset = 0
    if text.startswith("\ufeff"):
        text = text[1:]
        offset = 1
    out: list[Line] = []
    for raw in text.splitlines(keepends=True):
        out.append(Line(raw.rstrip(_LINE_ENDS), offset))
        offset += len(raw)
    return out


def _is_separator(line: Line) -> bool:
    return _SEPARATOR.fullmatch(line.text) is not None


_COMMENTED_SEPARATOR: Final = re.compile(r"([ \t]*(?:#|//|>))[ \t]*-{3,}(?:[ \t]+-{3,})+[ \t]*")


def views(lines: Sequence[Line]) -> list[tuple[str, list[Line]]]:
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
    views: list[tuple[str, list[Line]]] = [("", list(lines))]
    for prefix in prefixes:
        view = [
            Line(line.text[len(prefix) :], line.offset + len(prefix))
            if line.text.startswith(prefix)
            else Line("", line.offset, cut=True)
            for line in lines
        ]
        views.append((prefix, view))
    return views


def _spans(separator: Line) -> tuple[tuple[int, int], ...]:
    return tuple((m.start(), m.end()) for m in _DASHES.finditer(separator.text))


def slice_cells(line: str, spans: Sequence[tuple[int, int]]) -> list[str]:
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
class Frame:
    header: Line
    spans: tuple[tuple[int, int], ...]
    rows: tuple[Line, ...]
    footer: tuple[Line, ...]
    notes: tuple[str, ...]
    offset: int


def _looks_like_header(line: Line, separator: Line) -> bool:
    cells = slice_cells(line.text, _spans(separator))
    return bool(cells) and cells[0].lower() == "name"


def _starts_frame(lines: Sequence[Line], at: int) -> bool:
    """Whether ``lines[at]`` is the top separator of a frame (separator, header, separator)."""
    return (
        at + 2 < len(lines)
        and _is_separator(lines[at])
        and not lines[at + 1].blank
        and not _is_separator(lines[at + 1])
        and _is_separator(lines[at + 2])
    )


def find_frames(lines: Sequence[Line], prefix: str = "") -> list[Frame]:
    frames: list[Frame] = []
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
            top: Line | None = line
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
        stack = "source location" in (c.lower() for c in slice_cells(header.text, spans))
        j = header_at + 2
        rows: list[Line] = []
        while j < count:
            current = lines[j]
            if _is_separator(current) or FOOTER.fullmatch(current.text) is not None:
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
        elif j >= count or FOOTER.fullmatch(lines[j].text) is None:
            notes.append("no closing separator line")
        footer: list[Line] = []
        while j < count and FOOTER.fullmatch(lines[j].text) is not None:
            footer.append(lines[j])
            j += 1
        frames.append(
            Frame(
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


@final
@attrs.frozen
class Time:
    """A printed duration: integer nanoseconds and the size of its last printed digit."""

    ns: int
    ulp_ns: int


_TIME: Final = re.compile(r"(-?)([0-9]{1,18})(?:\.([0-9]{0,12}))?[ ]?(ns|us|µs|μs|ms|s)")
_UNIT_NS: Final = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9}
_INTEGER: Final = re.compile(r"[0-9]{1,18}")


def fail(message: str, line: Line, kind: DamageKind = DamageKind.MALFORMED) -> NoReturn:
    raise TraceFormatError(message, offset=line.offset, kind=kind)


def parse_time(cell: str, column: str, line: Line) -> Time:
    match = _TIME.fullmatch(cell)
    if match is None:
        fail(f"{column!r} value {cell[:40]!r} is not a time such as '12.979us' or '1.737ms'", line)
    sign, whole, fraction, unit = match.groups()
    digits = fraction or ""
    scale = 10 ** len(digits)
    exact = int(whole + digits) * _UNIT_NS[unit]
    ns, remainder = divmod(exact, scale)
    if 2 * remainder >= scale:
        ns += 1
    if ns > _MAX_NS:
        fail(f"{column!r} value {cell[:40]!r} is not a plausible duration", line)
    ulp = -(-_UNIT_NS[unit] // scale)
    return Time(-ns if sign else ns, max(1, ulp))


def parse_calls(cell: str, column: str, line: Line) -> int:
    if _INTEGER.fullmatch(cell) is None:
        fail(f"{column!r} value {cell[:40]!r} is not a count", line)
    return int(cell)
