"""The Chrome trace reader with its columns spilled to disk, against the in-memory read.

Past ``_spill.SPILL_BYTES`` of per-launch and per-device-event columns, ``Totals``
spills them to a private temporary directory, hash-partitioned, and joins one
partition at a time at the end. With the threshold patched tiny, every table (rows,
steps, notes, damage) must equal the unspilled one, with and without worker
processes, and the directory must be gone afterwards, also when the read raises.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probewise.errors import TraceFormatError
from probewise.throughput import KernelTable

# Private: the spill threshold is lowered and its store counted, to reach it on small traces.
from probewise.throughput.readers import _events, _spill, _totals
from probewise.throughput.trace_sets import read_chrome_trace


def test_a_workers_full_disk_is_the_same_spill_error(
    tmp_path: Path, spill_area: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker process whose spill files fail: the parent raises SpillError naming the
    place, not a trace error (the worker's spill directory is gone before it writes)."""
    from probewise.errors import SpillError

    gone = tmp_path / "gone"
    monkeypatch.setattr(_spill, "SPILL_BYTES", 1)
    monkeypatch.setattr(_events, "_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(_spill.Area, "__getstate__", lambda self: (str(gone), 1))
    path = tmp_path / "t.json"
    events = [_kernel(i, i, 1.0) for i in range(2000)] + [_launch(i, i) for i in range(2000)]
    path.write_text(json.dumps({"traceEvents": [_step(1, 0, 100), *events]}), encoding="utf-8")
    with pytest.raises(SpillError, match="TMPDIR") as caught:
        read_chrome_trace(path, workers=2)
    assert str(gone) in str(caught.value)
    assert not any(spill_area.iterdir())


def _read(path: Path, *, workers: int, salvage: bool = False) -> KernelTable | str:
    try:
        return read_chrome_trace(path, workers=workers, salvage=salvage)
    except TraceFormatError as error:
        return f"{type(error).__name__}: {error} [{error.kind}, {error.offset}]"


@pytest.fixture
def spill_area(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temporary files go to a folder of their own, to see that nothing is left there."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def spills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many batches this process spilled (so that no comparison here is vacuous)."""
    count = [0]
    write = _spill.Store.write

    def counting(self: _spill.Store, *args: object) -> None:
        before = len(self.batches)
        write(self, *args)  # pyright: ignore[reportArgumentType]
        count[0] += len(self.batches) - before

    monkeypatch.setattr(_spill.Store, "write", counting)
    return count


def _spilled_and_not(
    path: Path, *, workers: int, limit: int, salvage: bool = False
) -> tuple[KernelTable | str, KernelTable | str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_spill, "SPILL_BYTES", limit)
        spilled = _read(path, workers=workers, salvage=salvage)
    return spilled, _read(path, workers=workers, salvage=salvage)


def _same(path: Path, *, workers: int, limit: int, salvage: bool = False) -> None:
    spilled, unspilled = _spilled_and_not(path, workers=workers, limit=limit, salvage=salvage)
    assert spilled == unspilled
    assert repr(spilled) == repr(unspilled)  # rows, exclusions, steps and notes in order


@pytest.mark.fixtures
@pytest.mark.parametrize("workers", [1, 2])
def test_fixture_tables_are_the_unspilled_ones(
    shared_fixtures: Path,
    tmp_path: Path,
    spill_area: Path,
    spills: list[int],
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
) -> None:
    # Worker processes start on any plain file, and runs are small (many spills).
    monkeypatch.setattr(_events, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(_events, "_RUN", 1 << 16)
    handed_back = [0]  # batches worker processes spilled and handed back
    merge = _totals.Totals.add_segment

    def counting(self: _totals.Totals, other: _totals.Totals) -> None:
        handed_back[0] += len(other.store.batches)
        merge(self, other)

    monkeypatch.setattr(_totals.Totals, "add_segment", counting)
    with_steps = 0
    for trace in sorted((shared_fixtures / "traces").glob("*.json*")):
        data = trace.read_bytes()
        plain = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        for name, body in (("plain.json", plain), ("zipped.json.gz", gzip.compress(plain, 1))):
            path = tmp_path / name
            path.write_bytes(body)
            _same(path, workers=workers, limit=1 << 12)
            table = read_chrome_trace(path, workers=1)
            with_steps += bool(table.steps)
    assert with_steps >= 4  # the step join ran spilled on several traces
    assert spills[0] > 50
    assert (handed_back[0] > 10) == (workers > 1)
    assert not any(spill_area.iterdir())


@pytest.mark.fixtures
@pytest.mark.parametrize("salvage", [False, True])
def test_damaged_fixture_reads_are_the_unspilled_ones_and_leave_nothing(
    shared_fixtures: Path, tmp_path: Path, spill_area: Path, spills: list[int], salvage: bool
) -> None:
    plain = gzip.decompress((shared_fixtures / "traces" / "nccl_data.json.gz").read_bytes())
    for cut in (len(plain) // 3, len(plain) * 3 // 4):
        path = tmp_path / "cut.json"
        path.write_bytes(plain[:cut])  # truncated mid-file
        spilled, unspilled = _spilled_and_not(path, workers=1, limit=1 << 10, salvage=salvage)
        assert spilled == unspilled
        assert isinstance(spilled, KernelTable) == salvage
        assert not any(spill_area.iterdir())
    assert spills[0] > 0


def test_a_failed_read_removes_its_spill_folder(
    tmp_path: Path, spill_area: Path, spills: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_spill, "SPILL_BYTES", 1)
    monkeypatch.setattr(_events, "_RUN", 256)  # runs before the damage are added (spilled)
    path = tmp_path / "bad.json"
    events = [_kernel(i, i, 1.0) for i in range(50)] + [_launch(i, i) for i in range(50)]
    text = json.dumps({"traceEvents": [_step(1, 0, 100), *events]})
    path.write_text(text[:-40] + '"x": 1}', encoding="utf-8")  # invalid near the end
    with pytest.raises(TraceFormatError):
        read_chrome_trace(path, workers=1)
    assert spills[0] > 0
    assert not any(spill_area.iterdir())


def _step(number: int, ts: float, dur: float) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{number}", "ts": ts, "dur": dur}


def _launch(corr: int, ts: float) -> dict[str, object]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
            "args": {"correlation": corr}}  # fmt: skip


def _kernel(corr: int, ts: float, dur: float, cat: str = "kernel") -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": f"k{corr % 5}", "ts": ts, "dur": dur,
            "args": {"correlation": corr}}  # fmt: skip


_TIMES = st.one_of(
    st.integers(0, 400), st.floats(0, 400, allow_nan=False).map(lambda t: round(t, 3))
)


@st.composite
def _trace_events(draw: st.DrawFn) -> list[dict[str, object]]:
    """Steps, launches and their kernels/copies/fills, with shared and missing ids and copies."""
    events: list[dict[str, object]] = []
    for _ in range(draw(st.integers(0, 25))):
        corr = draw(st.integers(0, 30))
        kind = draw(st.integers(0, 9))
        if kind < 2:
            events.append(_step(draw(st.integers(1, 6)), draw(_TIMES), draw(_TIMES)))
        elif kind < 5:
            events.append(_launch(corr, draw(_TIMES)))
        else:
            cat = draw(st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "Kernel"]))
            event = _kernel(corr, draw(_TIMES), draw(_TIMES), cat)
            events.extend([event] * draw(st.sampled_from([1, 1, 1, 2])))  # exact copies
    return events


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=_trace_events(),
    run=st.sampled_from([64, 256, 1 << 20]),
    limit=st.sampled_from([0, 40, 400]),
    damage=st.booleans(),
    salvage=st.booleans(),
)
def test_generated_traces_read_spilled_as_unspilled(
    tmp_path: Path,
    spill_area: Path,
    events: list[dict[str, object]],
    run: int,
    limit: int,
    damage: bool,
    salvage: bool,
) -> None:
    body = msgspec.json.encode({"traceEvents": events}).decode()
    if damage:
        body = body[: len(body) * 3 // 4]
    path = tmp_path / "generated.json"
    path.write_text(body, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_events, "_RUN", run)
        _same(path, workers=1, limit=limit, salvage=salvage)
    assert not any(spill_area.iterdir())


@pytest.mark.parametrize("split", [False, True])
def test_generated_steps_are_joined_across_partitions(
    tmp_path: Path,
    spill_area: Path,
    spills: list[int],
    monkeypatch: pytest.MonkeyPatch,
    split: bool,
) -> None:
    """Many correlation ids (every partition used), shared ids, copies: spilled as in memory,
    and so when big partitions are split again before they are joined."""
    monkeypatch.setattr(_events, "_RUN", 1 << 14)
    splits = [0]
    if split:
        monkeypatch.setattr(_spill, "PARTITION_BYTES", 600)
        inner = _spill.Store._split  # pyright: ignore[reportPrivateUsage]

        def counting(self: _spill.Store, *args: Any) -> Any:
            splits[0] += 1
            return inner(self, *args)

        monkeypatch.setattr(_spill.Store, "_split", counting)
    events: list[dict[str, object]] = [_step(n, n * 100.0, 99.5) for n in range(1, 40)]
    for i in range(6_000):
        corr = (i * 7919) % 5_000
        events.append(_launch(corr, (i % 4_000) + 0.25))
        events.append(_kernel(corr, i, 1.5 + (i % 3), ["kernel", "gpu_memcpy"][i % 2]))
    events.extend(events[-50:])  # exact copies: a duplicate note
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    _same(path, workers=1, limit=1 << 12)
    table = read_chrome_trace(path, workers=1)
    assert table.steps
    assert table.sources[0].notes
    assert spills[0] > 10
    assert (splits[0] > 20) == split
    assert not any(spill_area.iterdir())


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 30), max_size=300),
    limit=st.sampled_from([0, 64, 1 << 20]),
)
def test_split_partitions_keep_each_ids_rows_together_and_in_order(
    tmp_path_factory: pytest.TempPathFactory, ids: list[int], limit: int
) -> None:
    """Store.joined at any PARTITION_BYTES (0: every partition split down to the last
    level): every row once, one id's launches and device rows in one part, in order."""
    import numpy as np

    area = _spill.Area(root=str(tmp_path_factory.mktemp("area")))
    store = _spill.Store()
    corr = np.array(ids, dtype=np.int64)
    order = np.arange(len(ids), dtype=np.float64)  # a launch's "start": its row number
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_spill, "PARTITION_BYTES", limit)
        if ids:
            store.write(area, _spill.LAUNCH, [corr, order])
            code = np.zeros(len(ids), dtype=np.int8)
            store.write(area, _spill.DEVICE, [corr[::-1].copy(), code, np.arange(len(ids))])
        parts = list(store.joined((_spill.LAUNCH, _spill.DEVICE), area))
    launches = [(int(c), float(t)) for (lc, lt), _ in parts for c, t in zip(lc, lt, strict=True)]
    assert sorted(launches) == sorted(zip(ids, order.tolist(), strict=True))
    part_of: dict[int, int] = {}
    for index, ((launch_corr, starts), (device_corr, _, _)) in enumerate(parts):
        for c in {*launch_corr.tolist(), *device_corr.tolist()}:
            assert part_of.setdefault(c, index) == index  # one id, one part
        for c in set(launch_corr.tolist()):  # in the order they were added
            mine = starts[launch_corr == c]
            assert list(mine) == sorted(mine)
    assert sum(len(device[0]) for _, device in parts) == len(ids)
    assert sorted(os.listdir(area.root())) == sorted(
        {b.path.rsplit("/", 1)[-1] for b in store.batches}
    )


@pytest.mark.parametrize("failing", ["mkdtemp", "mkstemp"])
def test_a_full_disk_is_a_spill_error_naming_the_place(
    tmp_path: Path, spill_area: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    import errno
    import os
    import tempfile

    from probewise.errors import ProbewiseError, SpillError

    def full(*_args: object, **_kwargs: object) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_spill, "SPILL_BYTES", 1)
    monkeypatch.setattr(tempfile, failing, full)
    path = tmp_path / "t.json"
    events = [_kernel(i, i, 1.0) for i in range(50)] + [_launch(i, i) for i in range(50)]
    path.write_text(json.dumps({"traceEvents": [_step(1, 0, 100), *events]}), encoding="utf-8")
    with pytest.raises(SpillError) as caught:
        read_chrome_trace(path, workers=1)
    assert isinstance(caught.value, ProbewiseError)
    assert isinstance(caught.value, OSError)  # code catching OSError around reading still does
    message = str(caught.value)
    assert os.strerror(errno.ENOSPC) in message
    assert str(spill_area) in message
    assert "TMPDIR" in message
    assert caught.value.__cause__ is None
    assert not any(spill_area.iterdir())
