"""Reading the JSON Lines files two commands take (``arms`` prompts, ``calibrate`` labels).

One door for both: the file must be a regular file (a FIFO or a device is refused, never
read: :func:`probewise._files.read_regular_file`) of UTF-8 text, and an error names the
file, the line and what was wrong, never a line's content (a labels file holds model
replies, which must not reach stderr).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from probewise._files import read_regular_file
from probewise.errors import InvalidInputError

__all__ = ["json_object", "numbered_lines"]


def numbered_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of ``path`` that are not blank, with their numbers (from 1)."""
    data = read_regular_file(path)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InvalidInputError(f"cannot read {path}: it is not UTF-8") from None
    return [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]


def json_object(path: Path, number: int, line: str) -> dict[str, object]:
    """The JSON object on line ``number`` of ``path``."""
    try:
        record: object = json.loads(line)
    except (ValueError, RecursionError):
        raise InvalidInputError(f"{path}:{number}: not a JSON object") from None
    if not isinstance(record, dict):
        raise InvalidInputError(f"{path}:{number}: not a JSON object")
    return cast("dict[str, object]", record)
