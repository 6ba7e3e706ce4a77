"""read_lengths streams its input (issue 30): a gzip of newlines or of lengths is
inflated, decoded and split a piece at a time, and the lines and line numbers are the
ones the whole-file reading gave, wherever the pieces break."""

from __future__ import annotations

import gzip
import re
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise import LengthInputError, read_lengths
from probewise.throughput.data import length_input


def _whole(text: str) -> list[str]:
    """The lines as the reader before streaming had them: split, trailing blanks dropped."""
    lines = re.split(r"\r\n|\r|\n", text)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


_TEXT = st.lists(
    st.sampled_from(["1", "22", " 3 ", "", " ", "\t", "x", "{", "\x0c", "é"]), max_size=12
).flatmap(
    lambda parts: st.lists(
        st.sampled_from(["\n", "\r", "\r\n"]), min_size=len(parts), max_size=len(parts)
    ).map(lambda breaks: "".join(p + b for p, b in zip(parts, breaks, strict=True)))
)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.booleans(), st.booleans(), st.integers(1, 7))
def test_streamed_lines_match_the_whole_file_reading(
    text: str, trailing: bool, zipped: bool, piece: int
) -> None:
    import tempfile

    if trailing:
        text = text.rstrip("\r\n") + "5"  # a last line without its newline
    whole = _whole(text)
    data = text.encode()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lengths.txt"
        path.write_bytes(gzip.compress(data) if zipped else data)
        original = length_input._PIECE
        length_input._PIECE = piece  # pieces break everywhere, \r\n included
        try:
            streamed = list(length_input._numbered(length_input._line_batches(path)))
        finally:
            length_input._PIECE = original
    first_blank = next((i for i, line in enumerate(whole) if not line.strip()), None)
    if first_blank is None:
        assert streamed == list(enumerate(whole, start=1))
    else:  # every reader stops at the first blank line: it comes back, numbered right
        assert streamed[:first_blank] == list(enumerate(whole[:first_blank], start=1))
        number, line = streamed[first_blank]
        assert number == first_blank + 1
        assert not line.strip()


def test_a_gzip_of_newlines_is_read_in_bounded_memory_and_time(tmp_path: Path) -> None:
    path = tmp_path / "newlines.txt.gz"
    path.write_bytes(gzip.compress(b"\n" * (64 * 1024 * 1024), compresslevel=9))
    assert path.stat().st_size < 1024 * 1024
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(LengthInputError, match="the file is empty"):
            read_lengths(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 * 1024 * 1024, f"peak {peak} bytes"
    assert time.monotonic() - start < 30


def test_newlines_then_a_length_name_the_first_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "late.txt.gz"
    path.write_bytes(gzip.compress(b"7\n" + b"\n" * (64 * 1024 * 1024) + b"5\n"))
    with pytest.raises(LengthInputError, match=r"late\.txt\.gz:2\)$"):
        read_lengths(path)


def test_a_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "two.txt.gz"
    path.write_bytes(gzip.compress(b"1\n2\n") + gzip.compress(b"3\n"))
    assert read_lengths(path).lengths.tolist() == [1, 2, 3]
