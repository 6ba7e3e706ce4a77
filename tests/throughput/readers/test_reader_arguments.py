"""Readers given the wrong kind of argument, or JSON nested past the stack: a one-line
ProbewiseError each, never a bare TypeError or RecursionError (issue 30)."""

from __future__ import annotations

import pytest

from probewise import ArgumentTypeError, InvalidInputError, KernelTable, ProbewiseError


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_deep_nesting_in_kernel_table_json_is_invalid_input(depth: int) -> None:
    for text in ("[" * depth + "]" * depth, ("[" * depth + "]" * depth).encode()):
        with pytest.raises(InvalidInputError, match="nests too deeply"):
            KernelTable.from_json(text)


@pytest.mark.parametrize("value", [None, 7, ["[]"], {"rows": []}])
def test_kernel_table_json_that_is_not_text_is_an_argument_type_error(value: object) -> None:
    with pytest.raises(ArgumentTypeError, match=f"got a {type(value).__name__}$"):
        KernelTable.from_json(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 3, b"trace.json", [None], ["ok.json", 5]])
def test_a_trace_path_of_the_wrong_type_is_an_argument_type_error(value: object) -> None:
    with pytest.raises(ArgumentTypeError, match="a trace path must be"):
        KernelTable.from_chrome_trace(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [b"----", None, ["a table"]])
def test_a_profiler_table_that_is_not_str_is_an_argument_type_error(value: object) -> None:
    with pytest.raises(ArgumentTypeError) as info:
        KernelTable.from_profiler_table(value)  # type: ignore[arg-type]
    assert isinstance(info.value, ProbewiseError)
    assert "\n" not in str(info.value)
