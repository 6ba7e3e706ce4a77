"""Chrome trace reader: real fixtures, dialects, ranks, steps, damage, salvage, fuzzing."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probewise.errors import DamageKind, MixedJobsError, TraceFormatError
from probewise.throughput.kernels import ExclusionReason, KernelKind, KernelTable
from probewise.throughput.trace_sets import read_chrome_trace, read_chrome_traces

# (file, kernel µs, memcpy µs, memset µs) from ../shared/fixtures/traces/PROVENANCE.md
TOTALS = [
    ("benchmark_result_493459_1694039959_trace.json.gz", 10_728.0, 39_080.0, 8.0),
    ("nccl_data.json.gz", 162_532.34, 2_262.781, 390.717),
    ("sampled_rank-0.json.gz", 606_519.0, 1_297.0, 28.0),
    ("sampled_rank-1.json.gz", 651_026.0, 16_473.0, 31.0),
    ("mi250_minitoy_train_ROCm6_2_kineto.json.gz", 110.881, 38.161, 0.0),
    ("inference_rank_1.json.gz", 30.0, 0.0, 0.0),
    ("triton_example.json.gz", 1.76, 0.0, 0.0),
    ("backward_thread.json", 45.0, 0.0, 0.0),
    ("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 0.0, 0.0, 0.0),
    ("rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 468_153.602, 3_715.404, 585.435),
    ("mtia_inference_rank_0.json.gz", 812_125.17, 0.0, 0.0),
    ("worker0.1623143089861.pt.trace.json.gz", 591_532.0, 11_492.0, 534.0),
]


def _keyword_options(function: object) -> list[tuple[str, object, object]]:
    import inspect

    assert callable(function)
    return [
        (parameter.name, parameter.default, parameter.annotation)
        for parameter in inspect.signature(function).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]


def test_the_reading_door_and_read_chrome_traces_take_the_same_options() -> None:
    """One reading door: the model's classmethod and the reader cannot drift apart."""
    door = _keyword_options(KernelTable.from_chrome_trace)
    assert [name for name, _, _ in door] == [
        "salvage",
        "progress",
        "workers",
        "allow_mixed_jobs",
        "executor",
    ]
    assert door == _keyword_options(read_chrome_traces)


def close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def traces(shared_fixtures: Path) -> Path:
    return shared_fixtures / "traces"


@pytest.mark.fixtures
@pytest.mark.parametrize(("name", "kernel", "memcpy", "memset"), TOTALS)
def test_fixture_totals(
    traces: Path, name: str, kernel: float, memcpy: float, memset: float
) -> None:
    table = KernelTable.from_chrome_trace(traces / name)
    assert close(table.kernel_us, kernel), (table.kernel_us, kernel)
    assert close(table.memcpy_us, memcpy), (table.memcpy_us, memcpy)
    assert close(table.memset_us, memset), (table.memset_us, memset)


@pytest.mark.fixtures
def test_every_provenance_file_has_expected_totals(traces: Path) -> None:
    listed = {p.name for p in traces.iterdir() if p.name != "PROVENANCE.md"}
    assert listed == {name for name, *_ in TOTALS}


@pytest.mark.fixtures
def test_naive_sum_annotations_and_syncs(traces: Path) -> None:
    simple = read_chrome_trace(traces / "benchmark_result_493459_1694039959_trace.json.gz")
    assert close(simple.naive_device_us or 0.0, 50_487.0)  # every X span on pid 0
    sync = simple.exclusion(ExclusionReason.STREAM_SYNC)
    assert sync.events == 41
    nccl = read_chrome_trace(traces / "nccl_data.json.gz")
    annotations = nccl.exclusion(ExclusionReason.GPU_USER_ANNOTATION)
    assert annotations.events == 30
    assert close(annotations.total_us, 369_790.213)
    assert close(nccl.naive_device_us or 0.0, 534_976.051)
    assert nccl.exclusion(ExclusionReason.CPU_OP).events > 0
    assert nccl.exclusion(ExclusionReason.RUNTIME_CALL).events == 8_740
    comm = [r for r in nccl.rows if r.kind is KernelKind.COMMUNICATION]
    assert sum(r.calls or 0 for r in comm) == 21
    rocm = read_chrome_trace(traces / "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert close(rocm.exclusion(ExclusionReason.GPU_USER_ANNOTATION).total_us, 1_039.851)
    v100 = read_chrome_trace(traces / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    assert close(v100.exclusion(ExclusionReason.GPU_USER_ANNOTATION).total_us, 160_049.337)


@pytest.mark.fixtures
def test_counts_and_metadata_after_trace_events(traces: Path) -> None:
    nccl = read_chrome_trace(traces / "nccl_data.json.gz")
    source = nccl.sources[0]
    assert (source.rank, source.world_size, source.events) == (0, 2, 40_573)
    assert nccl.missing_ranks == (1,)
    kernels = sum(r.calls or 0 for r in nccl.kernel_rows)
    assert kernels == 2_700
    worker = read_chrome_trace(traces / "worker0.1623143089861.pt.trace.json.gz")
    assert sum(r.calls or 0 for r in worker.kernel_rows) == 8_772
    mtia = read_chrome_trace(traces / "mtia_inference_rank_0.json.gz")
    assert sum(r.calls or 0 for r in mtia.kernel_rows) == 1_313
    cpu_only = read_chrome_trace(traces / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert cpu_only.rows == ()
    assert cpu_only.world_size == 300
    assert len(cpu_only.missing_ranks) == 299


@pytest.mark.fixtures
def test_per_step_breakdown(traces: Path) -> None:
    nccl = read_chrome_trace(traces / "nccl_data.json.gz")
    assert [s.step for s in nccl.steps] == [4, 5, 6]
    attributed = sum(round(s.kernel_us * 1000) for s in nccl.steps)
    assert 0 < attributed <= round(nccl.kernel_us * 1000)
    assert all(s.device_events > 0 and s.span_us > 0 for s in nccl.steps)
    worker = read_chrome_trace(traces / "worker0.1623143089861.pt.trace.json.gz")
    assert [s.step for s in worker.steps] == [5, 6, 7, 8, 9, 10]
    no_steps = read_chrome_trace(traces / "benchmark_result_493459_1694039959_trace.json.gz")
    assert no_steps.steps == ()


@pytest.mark.fixtures
def test_ranks_from_a_directory(traces: Path, tmp_path: Path) -> None:
    for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        shutil.copy(traces / name, tmp_path / name)
    (tmp_path / "README.md").write_text("not a trace\n")
    ranks = read_chrome_traces(tmp_path)
    assert [t.sources[0].rank for t in ranks.per_rank] == [0, 1]
    assert close(ranks.merged.kernel_us, 606_519.0 + 651_026.0)
    assert ranks.world_size == 128
    assert ranks.missing_ranks == tuple(range(2, 128))
    assert ranks.merged == ranks.per_rank[0] + ranks.per_rank[1]
    merged = KernelTable.from_chrome_trace(
        [tmp_path / "sampled_rank-1.json.gz", tmp_path / "sampled_rank-0.json.gz"]
    )
    assert merged == ranks.merged


@pytest.mark.fixtures
def test_gzip_is_detected_by_content(traces: Path, tmp_path: Path) -> None:
    plain = tmp_path / "trace.json.gz"  # plain JSON under a gzip name
    plain.write_bytes(gzip.decompress((traces / "triton_example.json.gz").read_bytes()))
    squeezed = tmp_path / "trace.txt"  # gzip under a neutral name
    squeezed.write_bytes((traces / "triton_example.json.gz").read_bytes())
    assert read_chrome_trace(plain).kernel_us == 1.76
    assert read_chrome_trace(squeezed).kernel_us == 1.76


def write(tmp_path: Path, data: bytes, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def event(**fields: object) -> dict[str, object]:
    return {"ph": "X", "pid": 0, "tid": 7, "ts": 1.0, **fields}


def test_top_level_array_and_display_units(tmp_path: Path) -> None:
    events = [
        event(cat="kernel", name="k", dur=2.5),
        event(cat="gpu_memset", name="Memset (Device)", dur=1),
    ]
    array = write(tmp_path, json.dumps(events).encode(), "array.json")
    assert read_chrome_trace(array).kernel_us == 2.5
    ns = {"traceEvents": events, "displayTimeUnit": "ns", "baseTimeNanoseconds": 1}
    table = read_chrome_trace(write(tmp_path, json.dumps(ns).encode(), "ns.json"))
    assert table.kernel_us == 2.5  # µs whatever displayTimeUnit says
    assert table.memset_us == 1.0


def test_old_schema_dialect(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "sgemm",
            "pid": 0,
            "tid": "stream 7",
            "ts": 5,
            "dur": 7,
            "args": {"correlation": 3, "external id": 1},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1,
            "dur": 2,
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1,
            "dur": 1,
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#3",
            "pid": 9,
            "tid": "9",
            "ts": 0,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 9,
            "tid": "9",
            "ts": 2,
            "dur": 1,
            "args": {"correlation": 3, "external id": 1},
        },
    ]
    table = read_chrome_trace(write(tmp_path, json.dumps({"traceEvents": events}).encode()))
    assert (table.kernel_us, table.memcpy_us, table.memset_us) == (7.0, 2.0, 1.0)
    assert [(s.step, s.kernel_us, s.device_events) for s in table.steps] == [(3, 7.0, 1)]


def test_steps_seen_after_launches_are_still_attributed(tmp_path: Path) -> None:
    events = [
        event(
            cat="cuda_runtime",
            name="cudaLaunchKernel",
            ts=12.0,
            dur=1,
            pid=5,
            args={"correlation": 1},
        ),
        event(cat="kernel", name="k", ts=20.0, dur=4, args={"correlation": 1}),
        event(cat="user_annotation", name="ProfilerStep#7", ts=10.0, dur=10, pid=5),
    ]
    table = read_chrome_trace(write(tmp_path, json.dumps({"traceEvents": events}).encode()))
    assert [(s.step, s.kernel_us) for s in table.steps] == [(7, 4.0)]


def test_odd_field_types_are_read_not_fatal(tmp_path: Path) -> None:
    events = [
        event(cat="kernel", name="k", dur=3),
        event(cat=5, name=["odd"], dur="N/A"),  # valid JSON, odd types: an OTHER span
        event(cat="kernel", name="k", dur="N/A"),  # a kernel without a usable duration
        event(cat="kernel", name="k", dur=-2),
        {"ph": "M", "name": "process_name", "args": {"name": "x"}},
    ]
    table = read_chrome_trace(write(tmp_path, json.dumps({"traceEvents": events}).encode()))
    assert table.kernel_us == 3.0
    assert table.exclusion(ExclusionReason.MALFORMED).events == 2
    assert table.exclusion(ExclusionReason.NOT_A_SPAN).events == 1
    assert table.exclusion(ExclusionReason.OTHER).events == 1


def sample(traces_dir: Path) -> bytes:
    return gzip.decompress((traces_dir / "nccl_data.json.gz").read_bytes())


DAMAGE: list[tuple[str, DamageKind]] = [
    ("empty", DamageKind.EMPTY),
    ("whitespace", DamageKind.EMPTY),
    ("not_json", DamageKind.NOT_JSON),
    ("no_trace_events", DamageKind.WRONG_STRUCTURE),
    ("trace_events_not_array", DamageKind.WRONG_STRUCTURE),
    ("events_not_objects", DamageKind.WRONG_STRUCTURE),
    ("cut_mid_write", DamageKind.TRUNCATED),
    ("unquoted_na", DamageKind.MALFORMED),
    ("control_character", DamageKind.MALFORMED),
    ("unescaped_quote", DamageKind.MALFORMED),
    ("truncated_gzip", DamageKind.TRUNCATED_GZIP),
    ("trailing_garbage", DamageKind.MALFORMED),
]


def damaged(kind: str, good: bytes) -> tuple[bytes, int | None]:
    """A damaged trace and the byte offset where the damage starts (None: not exact)."""
    kernel_at = good.index(b'"cat": "kernel"', len(good) // 2)
    name_at = good.index(b'"name": "', kernel_at) + len(b'"name": "')
    dur_at = good.index(b'"dur": ', kernel_at) + len(b'"dur": ')
    match kind:
        case "empty":
            return b"", 0
        case "whitespace":
            return b" \n\t ", None
        case "not_json":
            return b"PK\x03\x04 not a trace", 0
        case "no_trace_events":
            return b'{"schemaVersion": 1, "deviceProperties": []}', None
        case "trace_events_not_array":
            return b'{"traceEvents": {"ph": "X"}}', 16
        case "events_not_objects":
            return b'{"traceEvents": [1, 2, 3]}', None
        case "cut_mid_write":
            return good[: len(good) * 2 // 3], None
        case "unquoted_na":
            end = good.index(b",", dur_at)
            return good[:dur_at] + b"N/A" + good[end:], dur_at
        case "control_character":
            return good[:name_at] + b"\x07" + good[name_at:], name_at
        case "unescaped_quote":
            return good[: name_at + 3] + b'"' + good[name_at + 3 :], None
        case "truncated_gzip":
            squeezed = gzip.compress(good)
            return squeezed[: len(squeezed) // 2], None
        case "trailing_garbage":
            return good + b"\n{}", len(good) + 1
        case _:
            raise AssertionError(kind)


@pytest.mark.fixtures
@pytest.mark.parametrize(("case", "kind"), DAMAGE)
def test_damaged_input_raises_with_kind_and_offset(
    traces: Path, tmp_path: Path, case: str, kind: DamageKind
) -> None:
    data, offset = damaged(case, sample(traces))
    path = write(tmp_path, data)
    with pytest.raises(TraceFormatError) as caught:
        read_chrome_trace(path)
    error = caught.value
    assert error.kind is kind
    assert error.path == str(path)
    assert error.offset is not None
    if offset is not None:
        assert abs(error.offset - offset) <= 1, (error.offset, offset)
    assert f"byte {error.offset}" in str(error)


@pytest.mark.fixtures
@pytest.mark.parametrize(("case", "kind"), DAMAGE)
def test_salvage_keeps_what_came_before(
    traces: Path, tmp_path: Path, case: str, kind: DamageKind
) -> None:
    good = sample(traces)
    data, _ = damaged(case, good)
    table = read_chrome_trace(write(tmp_path, data), salvage=True)
    source = table.sources[0]
    assert source.damage is not None
    assert source.damage.kind is kind
    assert source.damage.events_kept == source.events
    full = read_chrome_trace(write(tmp_path, good, "good.json"))
    assert table.kernel_us <= full.kernel_us
    if case in ("cut_mid_write", "unquoted_na", "control_character", "truncated_gzip"):
        assert 0 < source.events < full.sources[0].events
        assert table.damaged == (source,)


@pytest.mark.fixtures
def test_salvage_of_a_complete_cut_keeps_every_complete_event(traces: Path, tmp_path: Path) -> None:
    good = sample(traces)
    events = json.loads(good)["traceEvents"]
    cut = good.index(b"\n  },\n  {", len(good) // 2) + len(b"\n  }")
    kept = good[:cut].count(b'"ph": ')
    table = read_chrome_trace(write(tmp_path, good[: cut + 5]), salvage=True)
    assert table.sources[0].events == kept
    expected = sum(round(e["dur"] * 1000) for e in events[:kept] if e.get("cat") == "kernel")
    assert round(table.kernel_us * 1000) == expected


@pytest.mark.fixtures
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_truncated_and_mutated_fixtures(
    traces: Path, tmp_path: Path, data: st.DataObject
) -> None:
    name = data.draw(
        st.sampled_from(
            [
                "backward_thread.json",
                "triton_example.json.gz",
                "inference_rank_1.json.gz",
                "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
            ]
        )
    )
    raw = (traces / name).read_bytes()
    plain = raw if not raw.startswith(b"\x1f\x8b") else gzip.decompress(raw)
    blob = data.draw(st.sampled_from([raw, plain]))
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, max(len(blob) - 1, 0)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        byte = bytes([data.draw(st.integers(0, 255))])
        if action == "flip":
            blob = blob[:at] + byte + blob[at + 1 :]
        elif action == "insert":
            blob = blob[:at] + byte + blob[at:]
        else:
            blob = blob[:at] + blob[at + 1 :]
    blob = blob[: data.draw(st.integers(0, len(blob)))]
    path = write(tmp_path, blob, "fuzzed")
    salvage = data.draw(st.booleans())
    outcome: KernelTable | TraceFormatError
    try:
        outcome = read_chrome_trace(path, salvage=salvage)
    except TraceFormatError as error:
        outcome = error
    if isinstance(outcome, TraceFormatError):
        assert outcome.kind is not None, outcome
    else:
        assert outcome.kernel_us >= 0


def test_memory_does_not_grow_with_the_trace(tmp_path: Path) -> None:
    def build(copies: int) -> Path:
        path = tmp_path / f"t{copies}.json"
        with path.open("w") as handle:
            handle.write('{"traceEvents": [\n')
            for i in range(copies):
                sep = ",\n" if i else ""
                handle.write(
                    sep
                    + json.dumps(
                        event(cat="cpu_op", name="aten::mm", ts=i, dur=3, args={"x": "y" * 200})
                    )
                )
                handle.write(
                    ",\n" + json.dumps(event(cat="kernel", name=f"k{i % 50}", ts=i, dur=1.5))
                )
            handle.write("\n]}")
        return path

    peaks = []
    for copies in (20_000, 80_000):
        path = build(copies)
        tracemalloc.start()
        table = read_chrome_trace(path)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert table.kernel_us == copies * 1.5
    size_ratio = 4
    assert peaks[1] < peaks[0] * size_ratio / 2, peaks  # far from growing with the file


def test_missing_file_is_a_trace_format_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="cannot read"):
        read_chrome_trace(tmp_path / "absent.json")
    with pytest.raises(TraceFormatError, match="no trace files"):
        read_chrome_traces(tmp_path)


def big_trace(path: Path, copies: int, *, poison: bytes = b"") -> Path:
    """A trace in Kineto's layout; ``poison`` is spliced into the middle event's name."""
    with path.open("wb") as handle:
        handle.write(b'{"schemaVersion": 1, "traceEvents": [\n')
        for i in range(copies):
            if i:
                handle.write(b",\n")
            name = f"k{i % 7}".encode()
            if i == copies // 2 and poison:
                name += poison
            handle.write(
                b'  {\n    "ph": "X", "cat": "kernel", "name": "'
                + name
                + b'", "pid": 0, "tid": 7,\n'
                b'    "ts": ' + str(i).encode() + b', "dur": 1.25,\n'
                b'    "args": {"correlation": ' + str(i).encode() + b', "grid": [1, 1, 1]}\n  }'
            )
            handle.write(
                b',\n  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": '
                + str(i).encode()
                + b', "dur": 3, "args": {"x": "'
                + b"y" * 100
                + b'"}}'
            )
        handle.write(
            b'\n  ],\n  "displayTimeUnit": "ms",\n  "distributedInfo": {"rank": 3, "world_size": 4}\n}\n'
        )
    return path


@pytest.fixture
def parallel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    # Private: the parallel read's thresholds are lowered, so small traces take it.
    import probewise.throughput.readers._events as traces_module

    monkeypatch.setattr(traces_module, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(traces_module, "_RUN", 1 << 16)


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("workers", [2, 3])
def test_parallel_read_equals_serial(tmp_path: Path, workers: int) -> None:
    path = big_trace(tmp_path / "big.json", 3_000)
    serial = read_chrome_trace(path, workers=1)
    parallel = read_chrome_trace(path, workers=workers)
    assert parallel == serial
    assert serial.kernel_us == 3_000 * 1.25
    assert serial.sources[0].rank == 3  # metadata after traceEvents, read after the workers


@pytest.mark.usefixtures("parallel_everywhere")
def test_parallel_read_falls_back_when_a_split_is_inside_a_string(tmp_path: Path) -> None:
    fake_boundaries = b"}, {" * 40_000  # looks like event boundaries, inside a name string
    path = big_trace(tmp_path / "poisoned.json", 400, poison=fake_boundaries)
    serial = read_chrome_trace(path, workers=1)
    assert read_chrome_trace(path, workers=2) == serial
    assert serial.kernel_us == 400 * 1.25


@pytest.mark.usefixtures("parallel_everywhere")
def test_parallel_read_reports_damage_like_serial(tmp_path: Path) -> None:
    path = big_trace(tmp_path / "damaged.json", 3_000)
    data = path.read_bytes()
    at = data.index(b'"dur": 1.25', len(data) * 3 // 4) + len(b'"dur": ')
    path.write_bytes(data[:at] + b"N/A" + data[at + 4 :])
    errors = []
    for workers in (1, 2):
        with pytest.raises(TraceFormatError) as caught:
            read_chrome_trace(path, workers=workers)
        errors.append((caught.value.kind, caught.value.offset))
    assert errors[0] == errors[1] == (DamageKind.MALFORMED, at)


def test_workers_must_be_positive(tmp_path: Path) -> None:
    path = big_trace(tmp_path / "t.json", 3)
    with pytest.raises(ValueError, match="workers"):
        read_chrome_trace(path, workers=0)


def test_steps_with_kernels_but_no_launch_events(tmp_path: Path) -> None:
    # Found by the fuzz test: a damaged trace kept a ProfilerStep span and a kernel
    # but lost every cudaLaunchKernel event; matching kernels to steps indexed an
    # empty array.
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "ts": 0,
            "dur": 100,
            "pid": 1,
            "tid": 1,
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "ts": 10,
            "dur": 5,
            "pid": 0,
            "tid": 7,
            "args": {"correlation": 3},
        },
    ]
    path = write(tmp_path, json.dumps({"traceEvents": events}).encode(), "no-launches")
    table = read_chrome_trace(path)
    assert table.kernel_us == 5.0
    assert [(s.step, s.kernel_us, s.device_events) for s in table.steps] == [(1, 0.0, 0)]


# ----------------------------------------------------------- issue 19: hostile traces

DEEP = 200_000


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "shape",
    [
        '{"traceEvents": [%s]}',  # an event that is an array nested 200,000 deep
        '{"meta": %s, "traceEvents": []}',  # a metadata value
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": 1, "args": %s}]}',
        "%s",  # a top-level array
    ],
)
def test_deep_nesting_is_a_trace_format_error_not_a_recursion_error(
    tmp_path: Path, shape: str
) -> None:
    path = write(tmp_path, (shape % _deep(DEEP)).encode(), "deep.json")
    with pytest.raises(TraceFormatError) as raised:
        read_chrome_trace(path)
    assert raised.value.kind is DamageKind.MALFORMED
    assert "too deeply" in str(raised.value)
    salvaged = read_chrome_trace(path, salvage=True)
    assert salvaged.sources[0].damage is not None
    assert salvaged.kernel_us == 0


def test_salvage_keeps_the_events_before_a_deep_one(tmp_path: Path) -> None:
    good = [event(cat="kernel", name="k", ts=float(i), dur=2) for i in range(10)]
    body = ",".join(json.dumps(e) for e in good)
    text = '{"traceEvents": [' + body + ', {"args": ' + _deep(DEEP) + "}]}"
    path = write(tmp_path, text.encode(), "deep.json")
    with pytest.raises(TraceFormatError) as raised:
        read_chrome_trace(path)
    assert raised.value.offset == len('{"traceEvents": [' + body + ", ")
    salvaged = read_chrome_trace(path, salvage=True)
    damage = salvaged.sources[0].damage
    assert damage is not None
    assert damage.events_kept == 10
    assert salvaged.kernel_us == 20


def test_two_trace_events_keys_follow_the_last_wins_rule(tmp_path: Path) -> None:
    first = [event(cat="kernel", name="a", dur=5)]
    last = [event(cat="kernel", name="b", dur=7), event(cat="kernel", name="b", ts=2.0, dur=1)]
    text = f'{{"traceEvents": {json.dumps(first)}, "x": 1, "traceEvents": {json.dumps(last)}}}'
    assert json.loads(text)["traceEvents"] == last  # what JSON itself says
    table = read_chrome_trace(write(tmp_path, text.encode(), "twice.json"))
    assert table.kernel_us == 8
    assert [row.name for row in table.rows] == ["b"]
    assert table.sources[0].events == 2
    (note,) = table.sources[0].notes
    assert "last one wins" in note
    assert "1 events" in note
    assert KernelTable.from_json(table.to_json()) == table


def test_identical_duplicated_kernel_events_are_noted_and_summed(tmp_path: Path) -> None:
    kernel = event(cat="kernel", name="k", ts=5.0, dur=3, args={"correlation": 9})
    other = event(cat="kernel", name="k", ts=6.0, dur=3, args={"correlation": 10})
    text = json.dumps({"traceEvents": [kernel, other, kernel, kernel]})
    table = read_chrome_trace(write(tmp_path, text.encode(), "dup.json"))
    assert table.kernel_us == 12  # summed as found: the decision is documented
    (note,) = table.sources[0].notes
    assert note.startswith("2 kernel/copy/fill events are exact duplicates")
    clean = read_chrome_trace(
        write(tmp_path, json.dumps({"traceEvents": [kernel, other]}).encode())
    )
    assert clean.sources[0].notes == ()


@pytest.mark.fixtures
def test_no_fixture_has_duplicate_events_or_notes(traces: Path) -> None:
    for name, *_ in TOTALS:
        assert read_chrome_trace(traces / name).sources[0].notes == (), name


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    code = (
        "import sys\n"
        "from probewise.errors import TraceFormatError\n"
        "from probewise.throughput.trace_sets import read_chrome_trace\n"
        "try:\n"
        "    read_chrome_trace(sys.argv[1])\n"
        "except TraceFormatError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "named pipe (FIFO)" in done.stdout, done.stderr[-500:]


def _ranked(tmp_path: Path, name: str, rank: int, world_size: int) -> Path:
    document = {
        "distributedInfo": {"rank": rank, "world_size": world_size},
        "traceEvents": [event(cat="kernel", name="k", dur=world_size)],
    }
    return write(tmp_path, json.dumps(document).encode(), name)


def test_traces_of_different_jobs_are_refused_unless_allowed(tmp_path: Path) -> None:
    two = _ranked(tmp_path, "two.json", 0, 2)
    one = _ranked(tmp_path, "one.json", 0, 1)
    with pytest.raises(MixedJobsError) as raised:
        read_chrome_traces([two, one])
    assert set(raised.value.paths) == {str(two), str(one)}
    assert "world size" in str(raised.value)
    assert "rank 0" in str(raised.value)
    mixed = read_chrome_traces([two, one], allow_mixed_jobs=True)
    assert mixed.merged.kernel_us == 3
    assert [(s.path, s.rank, s.world_size) for s in mixed.merged.sources] == [
        (str(one), 0, 1),
        (str(two), 0, 2),
    ]
    assert [[s.path for s in job] for job in mixed.merged.jobs()] == [[str(one)], [str(two)]]


def test_a_repeated_rank_is_refused_and_one_job_is_not(tmp_path: Path) -> None:
    a = _ranked(tmp_path, "a.json", 1, 4)
    b = _ranked(tmp_path, "b.json", 1, 4)
    c = _ranked(tmp_path, "c.json", 2, 4)
    with pytest.raises(MixedJobsError, match="rank 1 in"):
        read_chrome_traces([a, b, c])
    one_job = read_chrome_traces([a, c])
    assert len(one_job.merged.jobs()) == 1
    two_jobs = read_chrome_traces([a, b, c], allow_mixed_jobs=True).merged.jobs()
    assert [[s.path for s in job] for job in two_jobs] == [[str(a), str(c)], [str(b)]]


def test_an_implausible_world_size_does_not_set_the_memory(tmp_path: Path) -> None:
    document = {
        "distributedInfo": {"rank": 0, "world_size": 10**15},
        "traceEvents": [event(cat="kernel", name="k", dur=2)],
    }
    path = write(tmp_path, json.dumps(document).encode(), "huge.json")
    tracemalloc.start()
    table = read_chrome_trace(path)
    missing = table.missing_ranks
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert table.world_size is None
    assert missing == ()
    assert peak < 64 << 20
    assert "not plausible" in table.sources[0].notes[0]


@pytest.mark.parametrize("correlation", ["9" * 5000, "99999999999999999999", "-5", "1e400", '"12"'])
def test_huge_or_odd_numbers_in_steps_and_correlations_are_not_fatal(
    tmp_path: Path, correlation: str
) -> None:
    step = json.dumps(event(cat="cpu_op", name="ProfilerStep#1", ts=0.0, dur=10))
    long_step = json.dumps(event(cat="cpu_op", name="ProfilerStep#" + "9" * 5000, dur=10))
    launch = event(cat="cuda_runtime", name="cudaLaunchKernel", dur=1)
    kernel = event(cat="kernel", name="k", dur=2)
    launch_text = json.dumps(launch)[:-1] + f', "args": {{"correlation": {correlation}}}}}'
    kernel_text = json.dumps(kernel)[:-1] + f', "args": {{"correlation": {correlation}}}}}'
    text = '{"traceEvents": [' + ",".join([step, long_step, launch_text, kernel_text]) + "]}"
    table = read_chrome_trace(write(tmp_path, text.encode()))
    assert table.kernel_us == 2
    assert [s.step for s in table.steps] == [1]


# ------------------------------------------- compressed input: inflate thread, zstd


def same_reading(a: KernelTable, b: KernelTable) -> None:
    assert a.rows == b.rows
    assert a.excluded == b.excluded
    assert a.steps == b.steps
    assert a.naive_device_us == b.naive_device_us
    assert a.sources[0].events == b.sources[0].events


def inflate_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "probewise-inflate"]


@pytest.mark.fixtures
@pytest.mark.parametrize("fast", [True, False], ids=["fastest-installed", "stdlib-zlib"])
def test_gzip_reads_as_plain_and_damage_is_the_same_with_any_inflater(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    import functools
    import zlib

    # Private: the worker count a read picks is checked apart from the read.
    from probewise.throughput.readers import _source as reader

    if not fast:  # python-isal or zlib-ng may be installed: check stdlib zlib too
        monkeypatch.setattr(
            reader,
            "_fast_inflate",
            lambda: (functools.partial(zlib.decompressobj, wbits=31), (zlib.error,)),
        )
    good = sample(traces)
    plain = read_chrome_trace(write(tmp_path, good))
    same_reading(read_chrome_trace(write(tmp_path, gzip.compress(good), "t.json.gz")), plain)
    # two members, then zero padding: still one stream
    half = len(good) // 2
    members = gzip.compress(good[:half]) + gzip.compress(good[half:]) + b"\0" * 64
    same_reading(read_chrome_trace(write(tmp_path, members, "m.json.gz")), plain)
    cut, _ = damaged("truncated_gzip", good)
    path = write(tmp_path, cut, "cut.json.gz")
    with pytest.raises(TraceFormatError) as caught:
        read_chrome_trace(path)
    assert caught.value.kind is DamageKind.TRUNCATED_GZIP
    salvaged = read_chrome_trace(path, salvage=True)
    damage = salvaged.sources[0].damage
    assert damage is not None
    assert damage.kind is DamageKind.TRUNCATED_GZIP
    assert damage.offset == caught.value.offset
    assert 0 < salvaged.sources[0].events < plain.sources[0].events
    assert not inflate_threads()  # the background thread ended with each read


@pytest.mark.fixtures
def test_gzip_progress_reaches_the_file_size(traces: Path, tmp_path: Path) -> None:
    path = write(tmp_path, gzip.compress(sample(traces)), "t.json.gz")
    seen: list[tuple[int, int]] = []
    read_chrome_trace(path, progress=lambda done, total: seen.append((done, total)))
    size = path.stat().st_size
    assert seen
    assert seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


@pytest.mark.fixtures
def test_zstd_trace_reads_as_plain(traces: Path, tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    good = sample(traces)
    plain = read_chrome_trace(write(tmp_path, good))
    squeezed = zstandard.ZstdCompressor().compress(good)
    path = write(tmp_path, squeezed, "t.json.zst")
    same_reading(read_chrome_trace(path), plain)
    # a directory picks the .zst file up as a trace
    (tmp_path / "ranks").mkdir()
    shutil.copy(path, tmp_path / "ranks" / "rank0.json.zst")
    same_reading(read_chrome_traces(tmp_path / "ranks").merged, plain)
    # cut short: damage, and salvage keeps what came before
    cut = write(tmp_path, squeezed[: len(squeezed) // 2], "cut.json.zst")
    with pytest.raises(TraceFormatError) as caught:
        read_chrome_trace(cut)
    assert caught.value.offset is not None
    assert caught.value.offset > 0
    kept = read_chrome_trace(cut, salvage=True).sources[0]
    assert kept.damage is not None
    assert 0 < kept.events < plain.sources[0].events
    assert not inflate_threads()


def test_zstd_without_zstandard_is_a_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from probewise.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "zstandard", None)  # import fails: ModuleNotFoundError
    path = write(tmp_path, b"\x28\xb5\x2f\xfd" + b"\0" * 16, "t.json.zst")
    with pytest.raises(MissingExtraError) as caught:
        read_chrome_trace(path)
    assert caught.value.extra == "zstd"
    assert "pip install 'probewise[zstd]'" in str(caught.value)


@given(load=st.floats(min_value=0.0, max_value=64.0), cpus=st.integers(min_value=1, max_value=64))
def test_default_workers_follow_idle_cores(load: float, cpus: int) -> None:
    from unittest import mock

    from probewise.throughput.readers import chrome_trace as reader

    with (
        mock.patch.object(os, "getloadavg", return_value=(load, load, load)),
        mock.patch.object(os, "sched_getaffinity", return_value=set(range(cpus)), create=True),
    ):
        count = reader._worker_count(None)  # pyright: ignore[reportPrivateUsage]
    assert 1 <= count <= min(4, cpus)
    if load < 0.5:  # an idle machine (less than half a core busy): every core, up to 4
        assert count == min(4, cpus)
    if load >= cpus - 1:  # no core beyond the reader's own is idle: one process
        assert count == 1


@pytest.mark.fixtures
def test_cli_reads_a_zstd_trace_as_a_trace(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zstandard = pytest.importorskip("zstandard")
    from probewise.cli import main

    squeezed = zstandard.ZstdCompressor().compress(sample(traces))
    path = write(tmp_path, squeezed, "t.json.zst")
    assert main(["kernels", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    plain = read_chrome_trace(traces / "nccl_data.json.gz")
    assert document["kernel_us"] == plain.kernel_us
    assert document["memcpy_us"] == plain.memcpy_us
