"""A printed table's header (which column is which, the dialect) and its rows, parsed.

Columns are recognised by name, whatever their order; the dialects (modern, pre-2020,
CPU-only) are specified in docs/reference/profiler-table.md ("Header dialects").
"""

from __future__ import annotations

import enum
import re
from typing import Final, assert_never, final

import attrs

from probewise.errors import DamageKind
from probewise.throughput.readers._table_frames import (
    Frame,
    Line,
    Time,
    fail,
    parse_calls,
    parse_time,
    slice_cells,
)

__all__ = ["Dialect", "Header", "Parsed", "parse_rows", "read_header"]


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
class Dialect(enum.Enum):
    MODERN = "modern"
    INCLUSIVE = "inclusive"  # pre-2020: <DEV> total only
    CPU_ONLY = "cpu_only"


@final
@attrs.frozen(kw_only=True)
class Header:
    columns: tuple[str, ...]
    dialect: Dialect
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


def read_header(frame: Frame) -> Header:
    line = frame.header
    columns = tuple(slice_cells(line.text, frame.spans))
    if not columns or columns[0].lower() != "name":
        first = columns[0][:40] if columns else ""
        fail(
            f"the header of this table has no 'Name' first column (got {first!r})",
            line,
            DamageKind.NOT_A_TABLE,
        )
    index, devices, unknown = _index_columns(columns, line)
    notes: list[str] = []
    if unknown:
        notes.append("columns not read: " + ", ".join(repr(c) for c in unknown))
    device = next(iter(devices), "CPU")
    dialect = _dialect(index, device, line, notes)
    return Header(columns=columns, dialect=dialect, device=device, index=index, notes=tuple(notes))


def _index_columns(
    columns: tuple[str, ...], line: Line
) -> tuple[dict[_Role, int], dict[str, str], list[str]]:
    """Where each read column is, the device word of each device column, and the unknown ones."""
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
                    fail(
                        f"the header has the column {column!r} twice", line, DamageKind.NOT_A_TABLE
                    )
                index[role] = at
            case _ as unreachable:
                assert_never(unreachable)
        if device is not None:
            devices.setdefault(device, column)
    if len(devices) > 1:
        fail(
            "the header has columns for more than one device: "
            + ", ".join(repr(column) for column in devices.values()),
            line,
            DamageKind.NOT_A_TABLE,
        )
    return index, devices, unknown


def _dialect(index: dict[_Role, int], device: str, line: Line, notes: list[str]) -> Dialect:
    """Which layout the header is (a note says what that means), from its time columns."""
    if _Role.SELF_DEVICE in index:
        dialect = Dialect.MODERN
        if _Role.DEVICE_TOTAL not in index:
            notes.append(
                f"partial layout: no '{device} total' column, so rows are labelled by their names"
            )
    elif _Role.DEVICE_TOTAL in index:
        dialect = Dialect.INCLUSIVE
        notes.append(
            f"pre-2020 layout: no 'Self {device}' column; a row counts when it is a leaf op "
            f"(self CPU time equals CPU total), with its '{device} total' as its device time"
        )
    elif _Role.DEVICE_OTHER in index:
        fail(
            f"the header has {device} columns but neither 'Self {device}' nor "
            f"'{device} total': the device time cannot be read",
            line,
            DamageKind.NOT_A_TABLE,
        )
    elif _Role.SELF_CPU in index or _Role.CPU_TOTAL in index or _Role.CPU_OTHER in index:
        dialect = Dialect.CPU_ONLY
        notes.append(
            "CPU-only table: no device columns, so no device time; the kernel table is empty"
        )
    else:
        fail(
            "the header has no time column (no 'Self CPU', 'Self <DEV>' or '<DEV> total')",
            line,
            DamageKind.NOT_A_TABLE,
        )
    return dialect


@final
@attrs.frozen(kw_only=True)
class Parsed:
    name: str
    self_device: Time | None
    device_total: Time | None
    calls: int | None
    self_cpu: Time | None
    cpu_total: Time | None

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


def parse_rows(frame: Frame, header: Header) -> list[Parsed]:
    out: list[Parsed] = []
    read = [role for role in _READ_ROLES if header.has(role)]
    for line in frame.rows:
        if line.blank:
            continue
        cells = slice_cells(line.text, frame.spans)
        name = cells[0]
        values = {role: cells[header.index[role]] for role in read}
        if not name:
            if any(values.values()):
                fail("a row has values but no name", line)
            continue  # a with_stack continuation line
        calls: int | None = None
        if _Role.CALLS in values:
            column = header.columns[header.index[_Role.CALLS]]
            if not values[_Role.CALLS]:
                fail(f"the row {name[:60]!r} has no {column!r} value", line)
            calls = parse_calls(values[_Role.CALLS], column, line)
        out.append(
            Parsed(
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
    values: dict[_Role, str], role: _Role, header: Header, name: str, line: Line
) -> Time | None:
    if role not in values:
        return None
    cell = values[role]
    column = header.columns[header.index[role]]
    if not cell:
        fail(f"the row {name[:60]!r} has no {column!r} value", line)
    return parse_time(cell, column, line)
