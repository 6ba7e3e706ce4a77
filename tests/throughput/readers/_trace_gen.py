"""Generated Chrome trace events for the reader's differential tests (fast path, scanner)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from hypothesis import strategies as st

from probewise.errors import TraceFormatError
from probewise.throughput import KernelTable
from probewise.throughput.trace_sets import read_chrome_trace

_CATS = st.sampled_from(
    [
        "kernel", "Kernel", "gpu_memcpy", "Memset", "gpu_user_annotation", "cuda_sync",
        "cuda_runtime", "xpu_runtime", "cuda_driver", "cpu_op", "user_annotation",
        "python_function", "ac2g", "Trace", "it's", 'q"uote', "ü", "",
    ]
)  # fmt: skip
_PHASES = st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B", "E", "C", "Q", ""])
_NUMBERS = st.one_of(st.integers(-5, 10**6), st.floats(-1.0, 1e7, allow_nan=False), st.just(10**20))
_VALUES = st.one_of(_NUMBERS, st.none(), st.booleans(), st.text(max_size=3))


@st.composite
def events_of(draw: st.DrawFn, *, tidy: bool) -> dict[str, object]:
    """An event; a tidy one has what the fast path takes (it may still be odd in value)."""
    event: dict[str, object] = {}
    odd = st.nothing() if tidy else _VALUES
    if tidy or draw(st.integers(0, 9)):
        event["ph"] = draw(st.one_of(_PHASES.filter(lambda p: p not in ("Q", "")), odd))
    if tidy or draw(st.integers(0, 9)):
        event["cat"] = draw(st.one_of(_CATS, _CATS, _CATS, _CATS, odd))
    name = st.sampled_from(["gemm", "ProfilerStep#3", "ProfilerStep#12", '"a\\u00e9"'])
    event["name"] = draw(st.one_of(name, _VALUES))
    for key in ("ts", "dur"):
        if draw(st.integers(0, 6)):
            event[key] = draw(st.one_of(_NUMBERS, _NUMBERS, odd))
    if draw(st.integers(0, 3)):
        correlation = st.one_of(st.integers(0, 50), st.integers(0, 50), odd)
        args = st.one_of(
            st.fixed_dictionaries({"correlation": correlation}),
            st.fixed_dictionaries({"correlation": correlation, "stream": st.integers(0, 9)}),
            st.just(dict[str, int]()),
            odd,
            st.lists(st.integers(), max_size=2).filter(lambda _: not tidy),
        )
        event["args"] = draw(args)
    return event


def many_run_events() -> list[dict[str, object]]:
    """Several MiB of events: runs that end on a cut (not only the last run), with steps."""
    events: list[dict[str, object]] = [{"ph": "M", "name": "process_name", "pid": 1}]
    for i in range(60_000):
        ts = 1000.0 + i * 10
        if i % 5000 == 0:
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"ProfilerStep#{i // 5000}",
                    "ts": ts,
                    "dur": 9000.5,
                    "args": {},
                }
            )
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts, "dur": 3})
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": ts + 1,
                "dur": 2,
                "args": {"correlation": i, "cbid": 211},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"gemm_{i % 7}",
                "ts": ts + 5,
                "dur": 4.25,
                "args": {"correlation": i, "stream": 7},
            }
        )
        events.append({"ph": "f", "cat": "ac2g", "id": i, "ts": ts + 5, "bp": "e"})
        if i % 20_000 == 7:
            events.append({"ph": "i", "name": "Record Window End", "ts": ts, "s": "g"})
    return events


def write_many_run_trace(path: Path, events: list[dict[str, object]]) -> None:
    path.write_text(
        '{"traceEvents": [\n'
        + ",\n".join(map(json.dumps, events))
        + '\n], "displayTimeUnit": "ms"}'
    )
    assert path.stat().st_size > 4 << 20


GENERATED: Final = {
    "events": st.lists(st.one_of(events_of(tidy=True), events_of(tidy=False)), max_size=40),
    "pretty": st.booleans(),
    "damage": st.sampled_from(["", "cut", "garbage"]),
    "salvage": st.booleans(),
}
"""``@given(**GENERATED)``: the arguments of :func:`generated_trace`, and salvage or not."""


def generated_trace(
    tmp_path: Path, events: list[dict[str, object]], *, pretty: bool, damage: str
) -> Path:
    """A trace file of ``events``, pretty or compact, whole, cut short or with garbage."""
    body = (
        json.dumps({"traceEvents": events}, indent=2)
        if pretty
        else msgspec.json.encode({"traceEvents": events}).decode()
    )
    if damage == "cut":
        body = body[: len(body) * 2 // 3]
    elif damage == "garbage":
        middle = len(body) // 2
        body = body[:middle] + "}{" + body[middle:]
    path = tmp_path / "generated.json"
    path.write_text(body, encoding="utf-8")
    return path


Setup = Callable[[pytest.MonkeyPatch], None]
"""Patches that choose the reader's paths for one read."""


def read_or_error(path: Path, setup: Setup, *, salvage: bool = False) -> KernelTable | str:
    """The table (or the error's text), read with ``setup``'s paths."""
    with pytest.MonkeyPatch.context() as patch:
        setup(patch)
        try:
            return read_chrome_trace(path, workers=1, salvage=salvage)
        except TraceFormatError as error:
            return f"{type(error).__name__}: {error} [{error.kind}, {error.offset}]"


def assert_same_tables(path: Path, one: Setup, other: Setup, *, salvage: bool = False) -> None:
    first, second = (
        read_or_error(path, one, salvage=salvage),
        read_or_error(path, other, salvage=salvage),
    )
    assert first == second
    assert repr(first) == repr(second)  # the same rows, exclusions and steps in the same order


def counted(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str, size: Callable[[Any], int]
) -> list[int]:
    """Counts what goes through ``owner.name`` (its first argument's ``size``)."""
    count = [0]
    inner = getattr(owner, name)

    def counting(self: object, first: object, *rest: object) -> None:
        count[0] += size(first)
        inner(self, first, *rest)

    monkeypatch.setattr(owner, name, counting)
    return count
