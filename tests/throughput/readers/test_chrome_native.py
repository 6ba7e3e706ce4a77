"""The compiled trace scanner (``_scan.c``) against the pure-Python paths.

Where the install built it, the reader offers every run of events to the scanner first;
what it accepts it must read exactly as the exact path does (``Totals.add_exact``), and what it
is not sure of it must decline. Held here at three levels: whole tables (every fixture,
a many-run trace, generated and damaged traces, read with the scanner and without), one
run at a time (generated runs, compared field by field with the exact path's totals),
and bytes (random and mutated runs must never crash it, and it accepts only what msgspec
and the exact path's typed decode accept).
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from _trace_gen import (
    GENERATED,
    assert_same_tables,
    counted,
    events_of,
    generated_trace,
    many_run_events,
    write_many_run_trace,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

# Private: the compiled scan is held to the pure-Python path it stands in for.
from probewise.throughput.readers import _native, _totals
from probewise.throughput.readers._native import Scan
from probewise.throughput.readers._steps import step_names

_MISSING = "the compiled trace scanner was not built here (or PROBEWISE_PURE_PYTHON is set)"


@pytest.fixture(scope="module")
def scan() -> Scan:
    """The scanner; skips where it was not built, fails where CI requires it."""
    if _native.SCAN is None:
        if os.environ.get("PROBEWISE_REQUIRE_NATIVE") == "1":
            pytest.fail(_MISSING)
        pytest.skip(_MISSING)
    return _native.SCAN


@pytest.fixture
def absorbed(monkeypatch: pytest.MonkeyPatch, scan: Scan) -> list[int]:
    """How many events the scanner read (so that no table test here is vacuous)."""
    return counted(monkeypatch, _native.NativePath, "add_scanned", operator.itemgetter(0))


def _native_on(patch: pytest.MonkeyPatch) -> None:
    """The scanner as built."""


def _pure(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(_native, "SCAN", None)


def _same(path: Path, *, salvage: bool = False) -> None:
    assert_same_tables(path, _native_on, _pure, salvage=salvage)


@pytest.mark.fixtures
def test_fixture_tables_are_the_pure_pythons(shared_fixtures: Path, absorbed: list[int]) -> None:
    paths = sorted((shared_fixtures / "traces").glob("*.json*"))
    assert len(paths) >= 10
    scanned = 0
    for path in paths:
        before = absorbed[0]
        _same(path)
        scanned += absorbed[0] > before
    # Runs that close the events array go the pure-Python way, and a small fixture is
    # one such run; the larger ones are several runs.
    assert scanned >= 4


def test_a_many_run_trace_is_read_as_the_pure_paths_read_it(
    tmp_path: Path, absorbed: list[int]
) -> None:
    events = many_run_events()
    path = tmp_path / "many.json"
    write_many_run_trace(path, events)
    _same(path)
    assert absorbed[0] > len(events) // 2


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(**GENERATED)
def test_generated_traces_are_read_as_the_pure_paths_read_them(
    tmp_path: Path,
    scan: Scan,
    events: list[dict[str, object]],
    pretty: bool,
    damage: str,
    salvage: bool,
) -> None:
    _same(generated_trace(tmp_path, events, pretty=pretty, damage=damage), salvage=salvage)


# ------------------------------------------------------------------ one run at a time


def _totals_for(before: str) -> _totals.Totals:
    """Totals as a run finds them: fresh, after a step was seen, or keeping every launch."""
    totals = _totals.Totals(always_launches=before == "always")
    if before == "steps":
        totals.steps.append((0.0, 1e12, 1))
    return totals


def _state(totals: _totals.Totals) -> dict[str, object]:
    """Everything a run adds to ``totals``; columns whose order is a set's are sorted."""
    return {
        "events": totals.events,
        "cats": list(totals.cat_counts.items()),
        "not_spans": dict(totals.not_span_counts),
        "rows": {code: list(rows.items()) for code, rows in totals.rows.items()},  # in order
        "lane_ns": dict(totals.lane_ns),
        "naive_ns": totals.naive_ns,
        "malformed": totals.malformed,
        "steps": list(totals.steps),
        "skipped": totals.skipped_launches,
        "keys": sorted(totals.device_keys),
        "device": sorted(
            zip(totals.device_corr, totals.device_code, totals.device_ns, strict=True)
        ),
        "launches": list(zip(totals.launch_corr, totals.launch_ts, strict=True)),
    }


def _check_run(body: bytes, before: str) -> bool:
    """Offer ``body`` (the inside of an events array) to the scanner; where it accepts, its
    totals must be the exact path's. True: it accepted."""
    buf = b" [" + body + b"] "  # the run does not start at 0 nor end at len(buf)
    native = _totals_for(before)
    untouched = _state(native)
    if not _native.NativePath().add(native, buf, 2, 2 + len(body)):
        assert _state(native) == untouched, "a declined run changed the totals"
        return False
    doc = b"[" + body + b"]"
    events = _totals.DECODE_EVENTS.decode(doc)  # must not raise: the scanner checked it
    exact = _totals_for(before)
    exact.add_exact(events, doc)
    assert _state(native) == _state(exact)
    return True


_BEFORE = st.sampled_from(["fresh", "steps", "always"])


def _encode(events: list[dict[str, object]], style: str) -> bytes:
    if style == "compact":
        return b",".join(msgspec.json.encode(event) for event in events)
    if style == "ascii":
        return ",\n ".join(json.dumps(event, ensure_ascii=True) for event in events).encode()
    return ",\t".join(json.dumps(event, ensure_ascii=False, indent=1) for event in events).encode()


_STYLES = st.sampled_from(["compact", "ascii", "pretty"])


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(st.one_of(events_of(tidy=True), events_of(tidy=False)), max_size=30),
    style=_STYLES,
    before=_BEFORE,
)
def test_a_run_it_takes_is_added_as_the_exact_path_adds_it(
    scan: Scan, events: list[dict[str, object]], style: str, before: str
) -> None:
    _check_run(_encode(events, style), before)


_CLEAN_CATS = st.sampled_from(
    ["kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "cuda_runtime",
     "cuda_driver", "xpu_runtime", "cpu_op", "python_function", "ac2g", "Trace"]
)  # fmt: skip


@st.composite
def _clean_events(draw: st.DrawFn) -> dict[str, object]:
    """An event as profilers write them: the scanner must take every run of these."""
    event: dict[str, object] = {
        "ph": draw(st.sampled_from(["X", "X", "X", "i", "s", "f", "M"])),
        "cat": draw(_CLEAN_CATS),
        "name": draw(st.sampled_from(["gemm", "ProfilerStep#3", "aten::mm", "ncclKernel é"])),
        "ts": draw(st.one_of(st.integers(0, 10**15), st.floats(0, 1e13, allow_nan=False))),
        "dur": draw(st.one_of(st.integers(0, 10**9), st.floats(0, 1e9, allow_nan=False))),
    }
    if draw(st.booleans()):
        event["args"] = {"correlation": draw(st.integers(-(2**63), 2**63 - 1)), "stream": 7}
    return event


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_clean_events(), max_size=30), style=_STYLES, before=_BEFORE)
def test_it_takes_every_run_of_tidy_events(
    scan: Scan, events: list[dict[str, object]], style: str, before: str
) -> None:
    assert _check_run(_encode(events, style), before)


@pytest.mark.parametrize(
    "body",
    [
        rb'{"c\u0061t": "kernel", "ph": "X", "ts": 1, "dur": 2}',  # an escaped key
        b'{"cat": "kernel", "cat": "cpu_op", "ph": "X", "ts": 1, "dur": 2}',  # a repeated key
        b'{"cat": "kern\\u0065l", "ph": "X", "ts": 1, "dur": 2}',  # an escaped category
        b'{"cat": "kernel", "ph": "X", "ts": true, "dur": 2}',  # a start of the wrong type
        b'{"cat": "cpu_op", "ph": "X", "ts": 1e400}',  # out of a float's range
        b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": -2}',  # malformed: the exact path counts it
        b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": "2"}',
        b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": 2, "args": []}',
        b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": 2, "args": {"correlation": 1.5}}',
        b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": 2, "args": {"correlation": 9223372036854775808}}',
        b'{"cat": "cpu_op", "args": {"x": "\\ud800"}}',  # a lone surrogate
        b'{"cat": "cpu_op", "args": ' + b"[" * 70 + b"]" * 70 + b"}",  # nests deeper than 64
        b'{"cat": "cpu_op"}, 1',  # not an object
        b'{"cat": "cpu_op"},',
        b'{"cat": "cpu_op", "x": 01}',
        b'{"cat": "cpu_op", "x": "a\x01"}',
        b'{"cat": "cpu_op"} {"cat": "cpu_op"}',
    ],
)
def test_what_it_is_not_sure_of_it_declines(scan: Scan, body: bytes) -> None:
    assert not _check_run(body, "steps")


def test_sums_past_64_bits_and_integers_past_64_bits_are_declined(scan: Scan) -> None:
    """The exact path sums Python ints and msgspec refuses integers of thousands of
    digits: the scanner declines both (a damaged or crafted trace, never a real one)."""
    span = b'{"cat":"%s","ph":"X","ts":1,"dur":999999999999999,"name":"k"}'
    for cat in (b"kernel", b"gpu_user_annotation"):
        assert not _check_run(b",".join([span % cat] * 10), "fresh")
    huge = b"1" + b"0" * 4300
    for body in (
        b'{"cat":"cpu_op","ts":' + huge + b"}",
        b'{"cat":"gpu_user_annotation","ph":"X","ts":' + huge + b',"dur":1}',
        b'{"cat":"cuda_runtime","ph":"X","ts":' + huge + b"}",
        b'{"cat":"cpu_op","dur":12345678901234567890}',
    ):
        assert not _check_run(body, "steps")


def test_rows_of_two_spellings_of_one_kind_are_in_first_seen_order(scan: Scan) -> None:
    """Both paths add a run's rows in the order their events come (the exact path went
    category by category, in a set's order, which varied with the hash seed)."""
    body = b",".join(
        b'{"cat":"%s","ph":"X","ts":%d,"dur":1,"name":"%s"}' % (cat, i, name)
        for i, (cat, name) in enumerate([(b"Kernel", b"b"), (b"kernel", b"a"), (b"Kernel", b"c")])
    )
    assert _check_run(body, "fresh")
    exact = _totals.Totals()
    exact.add_exact(_totals.DECODE_EVENTS.decode(b"[" + body + b"]"), body)
    assert list(exact.rows[0]) == [b'"b"', b'"a"', b'"c"']


def test_a_run_of_thousands_of_distinct_names_is_read(scan: Scan) -> None:
    """torch.compile traces can hold thousands of distinct Triton kernels: the scanner's
    name table grows (it held 2,048 before it declined)."""
    body = b",".join(
        b'{"cat":"kernel","ph":"X","ts":%d,"dur":1.5,"name":"triton_%d","args":{"correlation":%d}}'
        % (i, i % 5000, i)
        for i in range(12_000)
    )
    assert _check_run(body, "steps")


def test_every_way_a_category_is_missing_is_one_category(scan: Scan) -> None:
    body = b'{"ph": "X"}, {"cat": null, "ph": "i"}, {}, {"cat": "", "ph": "X"}'
    assert _check_run(body, "fresh")


# ------------------------------------------------------------------ bytes


def _role(cat: str | None) -> int:
    return _totals.role_of(cat, launches=True)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
@example(data=b"")
@example(data=b'{"cat": "kernel", "ph": "X", "ts": 1, "dur": 2, "name": "\xff\xfe"}')
def test_random_bytes_never_break_it(scan: Scan, data: bytes) -> None:
    result = scan(data, 0, len(data), _role)
    if result is not None:  # then it is valid JSON that the exact path reads
        _totals.DECODE_EVENTS.decode(b"[" + data + b"]")


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(_clean_events(), min_size=1, max_size=12),
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.binary(max_size=3)),
        min_size=1,
        max_size=4,
    ),
    before=_BEFORE,
)
def test_damaged_runs_are_declined_or_read_exactly(
    scan: Scan, events: list[dict[str, object]], edits: list[tuple[int, int, bytes]], before: str
) -> None:
    body = bytearray(_encode(events, "compact"))
    for where, drop, insert in edits:
        at = where % (len(body) + 1)
        body[at : at + drop] = insert
    try:
        accepted = _check_run(bytes(body), before)
    except msgspec.DecodeError:
        pytest.fail("the scanner accepted a run that the exact path cannot decode")
    if not accepted:  # and the reader then reads it as the pure-Python paths do
        assert scan(bytes(body), 0, len(body), _role) is None


@given(data=st.binary(max_size=300))
def test_its_crc32_is_zlibs(data: bytes) -> None:
    # Private: the compiled module's own crc32, against zlib's.
    from probewise.throughput.readers import _scan

    assert _scan.crc32(data) == zlib.crc32(data)


def test_its_arguments_are_checked(scan: Scan) -> None:
    with pytest.raises(ValueError, match="start <= end"):
        scan(b"{}", 2, 1, _role)
    with pytest.raises(ValueError, match="start <= end"):
        scan(b"{}", 0, 3, _role)
    for odd in (9, -2):
        with pytest.raises(ValueError, match="role"):
            scan(b'{"cat": "x"}', 0, 12, lambda cat, odd=odd: odd)
    assert scan(memoryview(b""), 0, 0, _role) == (0, [], None, [], [], 0, *[b""] * 6)

    def broken(cat: str | None) -> int:
        raise LookupError(cat)

    with pytest.raises(LookupError):
        scan(b'{"cat": "x"}', 0, 12, broken)


def test_step_names_are_found_within_the_run_only() -> None:
    buf = b'"ProfilerStep#1" {"name": "ProfilerStep#2"} "ProfilerStep#3"'
    assert step_names(buf, 17, 44) == {b'"ProfilerStep#2"'}
    assert step_names(buf) == {b'"ProfilerStep#1"', b'"ProfilerStep#2"', b'"ProfilerStep#3"'}


def test_pure_python_turns_it_off() -> None:
    code = "from probewise.throughput.readers import _native; print(_native.SCAN is None)"
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
    env = {**os.environ, "PROBEWISE_PURE_PYTHON": "1"}
    out = run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
