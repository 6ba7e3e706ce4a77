"""Trace numbers and sizes from the input's size, never from its values (issue 30).

Each case runs on both readers: the compiled scanner (where this install built it) and
the pure-Python paths. A finite ``dur`` near a float's top overflowed when turned into
nanoseconds; one ``1e400`` made every candidate cut fail, so the read went quadratic
and ended with "the trace stops mid-event"; whitespace was skipped a byte at a time
(2 GiB of it took minutes); and one huge event widened the window without end.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probewise import KernelKind, KernelTable, ProbewiseError, TraceFormatError
from probewise.errors import DamageKind

# Private: each bound is read by the compiled scanner and, with it patched out, by pure Python.
from probewise.throughput.readers import _native

_STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 1}
_LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1}


def _kernel(i: int, dur: str = "1.5") -> str:
    head = json.dumps({"ph": "X", "cat": "kernel", "name": f"k{i % 50}", "pid": 0, "tid": 7})
    return head[:-1] + f', "ts": {i}, "dur": {dur}}}'


@pytest.fixture(params=["compiled", "pure"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "compiled":
        if _native.SCAN is None:
            pytest.skip("the compiled trace scanner was not built here")
    else:
        monkeypatch.setattr(_native, "SCAN", None)
    return str(request.param)


def _write(path: Path, events: list[str], *, head: bytes = b"") -> Path:
    path.write_bytes(head + b'{"traceEvents": [' + ",".join(events).encode() + b"]}")
    return path


@pytest.mark.parametrize("value", ["1.8e305", "1.7976931348623157e308", "1e400", "1e300"])
@pytest.mark.parametrize("field", ["dur", "ts"])
def test_a_huge_number_is_an_unusable_event_not_a_crash(
    tmp_path: Path, reader: str, value: str, field: str
) -> None:
    events = [_kernel(i) for i in range(4)]
    bad = json.loads(_kernel(9))
    bad[field] = "@"
    events.insert(2, json.dumps(bad).replace('"@"', value))
    table = KernelTable.from_chrome_trace(_write(tmp_path / "t.json", events))
    assert table.sources[0].damage is None
    assert sum(row.calls or 0 for row in table.rows) >= 4  # the four good kernels count


def test_one_out_of_range_number_reads_in_linear_time(tmp_path: Path, reader: str) -> None:
    # Over one 1 MiB run, with the bad event in the middle: every cut used to fail.
    events = [_kernel(i) for i in range(24_000)]
    events.insert(12_000, _kernel(1, dur="1e400"))
    path = _write(tmp_path / "t.json", events)
    assert path.stat().st_size > 1 << 21
    start = time.monotonic()
    table = KernelTable.from_chrome_trace(path)
    assert time.monotonic() - start < 30  # was 37 s for 1.7 MB, ending in a false diagnosis
    assert table.sources[0].events == 24_001
    assert sum(row.calls or 0 for row in table.rows) == 24_000


def _gzip(path: Path, *parts: bytes | tuple[bytes, int]) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as out:
        for part in parts:
            if isinstance(part, tuple):
                block, times = part
                for _ in range(times):
                    out.write(block)
            else:
                out.write(part)
    return path


def _spaces(mib: int) -> tuple[bytes, int]:
    return (b" " * (1 << 20), mib)


def test_whitespace_is_skipped_in_one_pass(tmp_path: Path, reader: str) -> None:
    event = _kernel(1).encode()
    path = _gzip(tmp_path / "w.json.gz", _spaces(128), b'{"traceEvents":[', event, b"]}")
    start = time.monotonic()
    gzip.decompress(path.read_bytes())
    inflate = time.monotonic() - start
    start = time.monotonic()
    table = KernelTable.from_chrome_trace(path)
    # About 4 times the bare inflate now; 25 to 40 times when skipped a byte at a time.
    assert time.monotonic() - start < 1 + 10 * inflate
    assert table.sources[0].events == 1
    only = _gzip(tmp_path / "only.json.gz", _spaces(8))
    with pytest.raises(TraceFormatError, match="only whitespace") as info:
        KernelTable.from_chrome_trace(only)
    assert info.value.kind is DamageKind.EMPTY


@pytest.mark.parametrize("inside", [b"a", b"ab},{"])
def test_an_event_past_the_window_cap_is_refused_not_held(
    tmp_path: Path, reader: str, inside: bytes
) -> None:
    head = b'{"traceEvents":[' + _kernel(1).encode() + b',{"ph":"X","cat":"kernel","name":"'
    mib = (inside * ((1 << 20) // len(inside)), 70)
    path = _gzip(tmp_path / "big.json.gz", head, mib, b'","ts":1,"dur":2}]}')
    start = time.monotonic()
    with pytest.raises(TraceFormatError, match="no event ends within 64 MiB") as info:
        KernelTable.from_chrome_trace(path)
    assert time.monotonic() - start < 60
    assert info.value.kind is DamageKind.MALFORMED
    assert info.value.offset == len(head) - len(b'{"ph":"X","cat":"kernel","name":"')  # its start
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("after", "rest"), [(b"]", b"}"), (b"],", b'"x": 1}')])
def test_space_after_the_array_past_the_cap_still_reads(
    tmp_path: Path, reader: str, after: bytes, rest: bytes
) -> None:
    head = b'{"traceEvents":[' + _kernel(1).encode() + after
    path = _gzip(tmp_path / "after.json.gz", head, _spaces(70), rest)
    assert KernelTable.from_chrome_trace(path).sources[0].events == 1


def test_a_long_top_level_value_is_read_not_called_unterminated(tmp_path: Path) -> None:
    # json names where an unterminated string starts: the reader took that for damage.
    path = _gzip(
        tmp_path / "v.json.gz",
        b'{"x":"',
        (b"a" * (1 << 20), 9),
        b'","traceEvents":[',
        _kernel(1).encode(),
        b"]}",
    )
    assert KernelTable.from_chrome_trace(path).sources[0].events == 1


def test_kernel_kind_of_a_huge_name_is_fast() -> None:
    start = time.monotonic()
    assert KernelKind.of("a" * (16 << 20)) is KernelKind.OTHER
    assert KernelKind.of("gemm_" + "a" * (16 << 20)) is KernelKind.GEMM
    assert time.monotonic() - start < 5  # was about 3 s per MiB


_NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["1e400", "-1e400", "1e-400", "1.8e305", "9223372036854775808"]),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    numbers=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["ts", "dur"]), _NUMBERS), max_size=4
    )
)
def test_fuzz_numbers_anywhere_read_or_refuse_in_one_line(
    tmp_path: Path, reader: str, numbers: list[tuple[int, str, str]]
) -> None:
    events: list[dict[str, object]] = [
        {**_STEP, "ts": 0, "dur": 100},
        {**_LAUNCH, "ts": 5, "dur": 2, "args": {"correlation": 7}},
        json.loads(_kernel(10)) | {"args": {"correlation": 7}},
        json.loads(_kernel(20)),
    ]
    for index, field, _ in numbers:
        events[index][field] = f"@{field}"
    text = json.dumps(events)
    for _, field, value in numbers:
        text = text.replace(f'"@{field}"', value, 1)
    path = tmp_path / "fuzz.json"
    path.write_text('{"traceEvents": ' + text + "}")
    error: ProbewiseError | None = None
    try:
        KernelTable.from_chrome_trace(path)
    except ProbewiseError as refused:  # anything else fails the test
        error = refused
    assert error is None or "\n" not in str(error)
