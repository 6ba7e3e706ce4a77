"""Reader-level fuzzing of the length readers (issue 19).

Whatever bytes a lengths file holds, :func:`read_lengths` either returns lengths that
are all in ``1..2**40`` or raises a typed error (:class:`LengthInputError` for the
content, :class:`InputFileError` for the file); and any valid lengths written in any
of the accepted shapes (text or JSONL, gzip or not, a byte-order mark, ``\\r\\n``
line ends) read back exactly.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise.errors import InputFileError, InvalidInputError, LengthInputError
from probewise.throughput.data.length_input import (
    MAX_LENGTH,
    LengthInput,
    as_lengths,
    read_lengths,
)

_ODD_LINES = st.sampled_from(
    [
        "nan",
        "NaN",
        "inf",
        "-Infinity",
        "1e3",
        "2.5",
        "0",
        "-0",
        "+5",
        " 7 ",
        "",
        "\x00",
        "1_000",
        "\u0663",
        str(MAX_LENGTH),
        str(MAX_LENGTH + 1),
        str(10**30),
        "9" * 5000,
        "\ufeff12",
    ]
)

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)

_LINES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    _ODD_LINES,
    st.text(max_size=12),
    _JSON_VALUES.map(lambda value: json.dumps({"length": value})),
    st.sampled_from([10, 2_000, 100_000]).map(
        lambda depth: '{"length": ' + "[" * depth + "]" * depth + "}"
    ),
)


@st.composite
def damaged_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_LINES, max_size=10))
    separator = draw(st.sampled_from(["\n", "\r\n", "\r", "\x0c", "\u2028"]))
    data = separator.join(lines).encode("utf-8", errors="surrogatepass")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    match draw(st.sampled_from(["plain", "gzip", "truncated_gzip", "raw"])):
        case "gzip":
            data = gzip.compress(data)
        case "truncated_gzip":
            whole = gzip.compress(data)
            data = whole[: draw(st.integers(min_value=0, max_value=len(whole) - 1))]
        case "raw":
            data = draw(st.binary(max_size=64))
        case _:
            pass
    return data


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-lengths")


@settings(max_examples=300)
@given(data=damaged_files())
def test_any_bytes_give_bounded_lengths_or_a_typed_error(scratch: Path, data: bytes) -> None:
    path = scratch / "lengths"
    path.write_bytes(data)
    try:
        values = read_lengths(path).lengths
    except LengthInputError as caught:
        message = str(caught)
    else:
        assert values.dtype == np.int64
        assert values.size > 0
        assert int(values.min()) >= 1
        assert int(values.max()) <= MAX_LENGTH
        return
    assert str(path) in message
    assert "\n" not in message


@given(
    lengths=st.lists(st.integers(min_value=1, max_value=MAX_LENGTH), min_size=1, max_size=20),
    jsonl=st.booleans(),
    compress=st.booleans(),
    bom=st.booleans(),
    line_end=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_valid_lengths_round_trip_in_every_shape(
    scratch: Path, lengths: list[int], jsonl: bool, compress: bool, bom: bool, line_end: str
) -> None:
    rows = [json.dumps({"length": n}) if jsonl else str(n) for n in lengths]
    data = (("\ufeff" if bom else "") + line_end.join(rows) + line_end).encode()
    path = scratch / "valid"
    path.write_bytes(gzip.compress(data) if compress else data)
    assert read_lengths(path).lengths.tolist() == lengths


@given(
    st.lists(
        st.one_of(
            st.integers(min_value=-(2**70), max_value=2**70),
            st.floats(allow_nan=True, allow_infinity=True),
            st.booleans(),
            st.none(),
            st.text(max_size=3),
        ),
        max_size=8,
    )
)
def test_as_lengths_accepts_bounded_positive_integers_only(values: list[object]) -> None:
    def usable(value: object) -> bool:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return False
        if isinstance(value, float):
            return (
                value == value
                and abs(value) != float("inf")
                and value.is_integer()
                and 1 <= value <= MAX_LENGTH
            )
        assert isinstance(value, int)
        return 1 <= value <= MAX_LENGTH

    try:
        result = as_lengths(values)  # type: ignore[arg-type]  # fuzzing the wrong types too
    except LengthInputError as caught:
        index = caught.index
    else:
        assert all(usable(v) for v in values)
        assert result.tolist() == [int(v) for v in values]  # type: ignore[call-overload]
        return
    if values:
        assert index is not None
        assert not usable(values[index])
        assert all(usable(v) for v in values[:index])


def test_missing_and_special_files_are_input_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        read_lengths(tmp_path / "missing")
    with pytest.raises(InputFileError, match="a device"):
        read_lengths("/dev/null")


@pytest.mark.parametrize("codes", [[0, 0], "ab", 3])
def test_source_codes_of_the_wrong_type_are_invalid_input(codes: object) -> None:
    with pytest.raises(InvalidInputError, match="source_codes must be an int32 numpy array"):
        LengthInput(lengths=[1, 2], source_codes=codes, source_names=("a",))  # type: ignore[arg-type]
