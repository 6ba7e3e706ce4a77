"""Reading traces through a concurrent.futures.Executor: a Dask cluster, pools, the CLI.

The Dask tests start a ``distributed.LocalCluster`` of two worker processes on
127.0.0.1 once for the module and close it at teardown. Every check compares with
the local read of the same real fixture traces: equal tables (``==``), equal
errors, equal CLI output.
"""

from __future__ import annotations

import functools
import gzip
import inspect
import json
import multiprocessing
import operator
import pickle
import shutil
import socket
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, cast

import pytest
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise import ArmTally, Rubric, Rule, classify, run_arm
from probewise.cli import kernels as cli_kernels
from probewise.cli import main
from probewise.errors import InvalidInputError, MixedJobsError, TraceFormatError
from probewise.responses import run_arm_shards
from probewise.throughput.kernels import KernelTable
from probewise.throughput.trace_sets import read_chrome_traces

RANKS = ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz")  # 2 ranks of a 128-rank job
OTHER_JOB = "nccl_data.json.gz"  # world size 2


@pytest.fixture(scope="module")
def traces(shared_fixtures: Path) -> Path:
    return shared_fixtures / "traces"


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Client]:
    """Two worker processes, one thread each, on 127.0.0.1; closed at teardown."""
    cluster = LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        # The scheduler serves HTTP (health, metrics) whatever the dashboard: on port
        # 8787 by default, which a second test run on the machine may hold (seen with two
        # suites at once). Any free port on loopback instead.
        dashboard_address="127.0.0.1:0",
        host="127.0.0.1",
    )
    try:
        client = Client(cluster, timeout=60, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@pytest.fixture
def ranks(traces: Path, tmp_path: Path) -> Path:
    """A directory holding two ranks of one job (and a README, which is skipped)."""
    for name in RANKS:
        shutil.copy(traces / name, tmp_path / name)
    (tmp_path / "README.md").write_text("not a trace\n")
    return tmp_path


def raised(read: Callable[[], object]) -> Exception:
    """What ``read`` raised (failing the test when it raised nothing)."""
    try:
        read()
    except Exception as error:
        return error
    pytest.fail("no exception")


def same_error(a: Exception, b: Exception) -> None:
    assert type(a) is type(b)
    assert str(a) == str(b)
    assert vars(a) == vars(b)


# -------------------------------------------------------------------- Dask cluster


@pytest.mark.fixtures
def test_dask_read_of_every_fixture_equals_the_local_read(
    traces: Path, dask_client: Client
) -> None:
    local = read_chrome_traces(traces, allow_mixed_jobs=True)
    executor = dask_client.get_executor()
    remote = read_chrome_traces(traces, allow_mixed_jobs=True, executor=executor)
    assert remote == local
    assert len(remote.per_rank) == 12
    assert len(remote.merged.jobs()) > 1


@pytest.mark.fixtures
def test_dask_ranks_missing_ranks_and_mixed_jobs(
    ranks: Path, traces: Path, dask_client: Client
) -> None:
    executor = dask_client.get_executor()
    remote = read_chrome_traces(ranks, executor=executor)
    assert remote == read_chrome_traces(ranks)
    assert [t.sources[0].rank for t in remote.per_rank] == [0, 1]
    assert remote.missing_ranks == tuple(range(2, 128))
    assert KernelTable.from_chrome_trace(ranks, executor=executor) == remote.merged
    mixed = [traces / OTHER_JOB, traces / RANKS[0]]
    local_error = raised(lambda: read_chrome_traces(mixed))
    remote_error = raised(lambda: read_chrome_traces(mixed, executor=executor))
    assert isinstance(remote_error, MixedJobsError)
    same_error(remote_error, local_error)
    assert read_chrome_traces(mixed, allow_mixed_jobs=True, executor=executor) == (
        read_chrome_traces(mixed, allow_mixed_jobs=True)
    )


@pytest.mark.fixtures
def test_dask_damage_salvage_and_missing_files(
    traces: Path, tmp_path: Path, dask_client: Client
) -> None:
    executor = dask_client.get_executor()
    whole = gzip.decompress((traces / RANKS[0]).read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: len(whole) // 2])
    twice = tmp_path / "twice.json"  # a kernel recorded twice: the reader notes it
    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
    twice.write_text(json.dumps({"traceEvents": [kernel, kernel]}))
    files = [traces / RANKS[1], cut, twice]
    salvaged = read_chrome_traces(files, salvage=True, executor=executor)
    assert salvaged == read_chrome_traces(files, salvage=True)
    assert [source.path for source in salvaged.merged.damaged] == [str(cut)]
    assert [source.path for source in salvaged.merged.sources if source.notes] == [str(twice)]
    local_error = raised(lambda: read_chrome_traces(files))
    remote_error = raised(lambda: read_chrome_traces(files, executor=executor))
    assert isinstance(remote_error, TraceFormatError)
    assert remote_error.kind is not None
    same_error(remote_error, local_error)
    absent = [traces / RANKS[1], tmp_path / "absent.json"]
    same_error(
        raised(lambda: read_chrome_traces(absent, executor=executor)),
        raised(lambda: read_chrome_traces(absent)),
    )


# -------------------------------------------------------------- other executors


@pytest.mark.fixtures
def test_thread_and_process_pools_equal_the_local_read(ranks: Path) -> None:
    local = read_chrome_traces(ranks)
    with ThreadPoolExecutor(2) as threads:
        assert read_chrome_traces(ranks, executor=threads) == local
        assert KernelTable.from_chrome_trace(ranks, executor=threads) == local.merged
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as processes:
        assert read_chrome_traces(ranks, executor=processes, workers=1) == local


@pytest.fixture(scope="module")
def small_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Five tiny ranks of an 8-rank job (ranks 0, 2, 3, 5, 6), one kernel name shared."""
    root = tmp_path_factory.mktemp("small_ranks")
    files: list[Path] = []
    for rank in (0, 2, 3, 5, 6):
        events = [
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": i, "dur": dur}
            for i, (name, dur) in enumerate(
                [("gemm", 1.5 + rank), (f"only_rank_{rank}", 0.001 * (rank + 1))]
            )
        ]
        path = root / f"r{rank}.json"
        path.write_text(
            json.dumps({"distributedInfo": {"rank": rank, "world_size": 8}, "traceEvents": events})
        )
        files.append(path)
    return files


@settings(max_examples=12, deadline=None)
@given(order=st.data())
def test_the_order_of_paths_and_of_completion_changes_nothing(
    small_ranks: list[Path], order: st.DataObject
) -> None:
    shuffled = order.draw(st.permutations(small_ranks))
    local = read_chrome_traces(small_ranks)
    with ThreadPoolExecutor(3) as pool:  # tasks finish in whatever order the threads do
        remote = read_chrome_traces(shuffled, executor=pool)
    assert remote == local
    assert remote.missing_ranks == (1, 4, 7)


@pytest.mark.fixtures
def test_progress_is_called_as_each_file_arrives(ranks: Path) -> None:
    calls: list[tuple[int, int]] = []
    with ThreadPoolExecutor(2) as pool:
        read_chrome_traces(
            ranks, executor=pool, progress=lambda done, total: calls.append((done, total))
        )
    sizes = [(ranks / name).stat().st_size for name in sorted(RANKS)]
    assert calls == [pair for size in sizes for pair in ((0, size), (size, size))]


class _LosingExecutor(Executor):
    """Every task is lost, as when a pool's worker process dies."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(BrokenProcessPool("a worker died"))
        return future


@pytest.mark.fixtures
def test_executor_failures_are_trace_format_errors_naming_the_file(ranks: Path) -> None:
    first = str(ranks / sorted(RANKS)[0])
    lost = raised(lambda: read_chrome_traces(ranks, executor=_LosingExecutor()))
    assert isinstance(lost, TraceFormatError)
    assert lost.path == first
    assert str(lost) == (f"the executor lost the read: BrokenProcessPool: a worker died ({first})")
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    refused = raised(lambda: read_chrome_traces(ranks, executor=pool))
    assert isinstance(refused, TraceFormatError)
    assert refused.path == first
    assert "the executor refused the read: RuntimeError" in str(refused)


@pytest.mark.fixtures
def test_bad_options_are_refused_as_in_a_local_read(ranks: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"executor must be a concurrent\.futures"):
        read_chrome_traces(ranks, executor=cast(Any, object()))
    with ThreadPoolExecutor(1) as pool:
        same_error(
            raised(lambda: read_chrome_traces(ranks, workers=0, executor=pool)),
            raised(lambda: read_chrome_traces(ranks, workers=0)),
        )


def test_both_entry_points_take_the_same_options() -> None:
    def options(function: Callable[..., object]) -> dict[str, object]:
        return {
            name: parameter.default
            for name, parameter in inspect.signature(function).parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        }

    shared = options(read_chrome_traces)
    assert set(shared) >= {"salvage", "progress", "workers", "allow_mixed_jobs", "executor"}
    assert options(KernelTable.from_chrome_trace) == shared


# --------------------------------------------------------------------------- CLI


@pytest.mark.fixtures
def test_cli_dask_scheduler_prints_what_the_local_read_prints(
    ranks: Path, traces: Path, dask_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    address = str(dask_client.scheduler.address)  # type: ignore[union-attr]
    for extra in (["--json", "--per-rank"], ["--per-rank", "--diff", str(traces / RANKS[1])]):
        assert main(["kernels", str(ranks), *extra]) == 0
        local = capsys.readouterr().out
        assert main(["kernels", str(ranks), *extra, "--dask-scheduler", address]) == 0
        remote = capsys.readouterr()
        assert remote.out == local
        assert remote.err == ""


def test_cli_dask_scheduler_without_distributed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    assert main(["kernels", str(trace), "--dask-scheduler", "tcp://127.0.0.1:8786"]) == 2
    assert capsys.readouterr().err == (
        "probewise kernels: error: --dask-scheduler needs distributed (Dask): "
        "pip install 'probewise[dask]'\n"
    )


def test_cli_dask_scheduler_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli_kernels, "_CONNECT_TIMEOUT_S", 1)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    address = f"tcp://127.0.0.1:{port}"
    assert main(["kernels", str(trace), "--dask-scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"probewise kernels: error: --dask-scheduler: cannot connect to {address}: "
    )
    assert err.count("\n") == 1
    for bad, says in (
        ("nonsense", "give tcp://HOST:PORT (the scheduler's address), got 'nonsense'"),
        ("ucx://127.0.0.1:8786", "protocol 'ucx' is not taken here (tcp, tls, ws, wss)"),
    ):
        assert main(["kernels", str(trace), "--dask-scheduler", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"probewise kernels: error: --dask-scheduler: {says}")
        assert err.count("\n") == 1


# ------------------------------------------------------------------ arm shards

# Made-up replies, one per prompt; the factory below pickles (a partial of stdlib
# callables over a dict), so the generator is built where each shard runs.
REPLIES = (
    "I can't help with that.",
    "Sure. First, preheat the oven to 180 degrees.",
    "",
    "Here is a short list: apples, pears, plums.",
)
PROMPTS = {f"id{i}": f"prompt {i}" for i in range(30)}
ANSWERS = {prompt: REPLIES[i % len(REPLIES)] for i, prompt in enumerate(PROMPTS.values())}


def test_run_arm_shards_equal_one_run_here_and_on_dask(dask_client: Client) -> None:
    whole = run_arm(PROMPTS, ANSWERS.__getitem__, progress=False)
    assert sum(1 for n in (whole.complied, whole.refused, whole.empty) if n) == 3
    items = list(PROMPTS.items())
    shards = [dict(items[i::3]) for i in range(3)]
    make = functools.partial(operator.attrgetter("__getitem__"), ANSWERS)
    assert run_arm_shards(shards, make) == whole
    assert run_arm_shards(shards, make, executor=dask_client.get_executor()) == whole
    assert run_arm_shards([], make) == ArmTally()
    # A caller's rubric travels to the tasks too (a Rubric pickles as its fields).
    rubric = Rubric(
        refusal=(Rule(id="cant", pattern=r"can't help"), Rule(id="apples", pattern="apples")),
        axes={"baking": (Rule(id="oven", pattern="oven"),)},
        timeout=5.0,
    )
    here = run_arm(PROMPTS, ANSWERS.__getitem__, rubric, progress=False)
    assert here != whole  # the rubric decides something the default does not
    there = run_arm_shards(shards, make, rubric, executor=dask_client.get_executor())
    assert there == here


def test_a_rubric_pickles_as_its_fields() -> None:
    rubric = Rubric(
        refusal=(Rule(id="cant", pattern=r"can't help"),),
        axes={"baking": (Rule(id="oven", pattern="oven"),), 3: ()},
        timeout=2.5,
        opening_chars=123,
    )
    for original in (rubric, Rubric.default()):
        copy = pickle.loads(pickle.dumps(original))
        fields = ("refusal", "deflection", "preamble", "timeout", "opening_chars")
        assert all(getattr(copy, name) == getattr(original, name) for name in fields)
        assert dict(copy.axes) == dict(original.axes)
        for reply in REPLIES:
            for axis in (None, "baking"):
                assert classify(reply, copy, axis=axis) == classify(reply, original, axis=axis)


def test_run_arm_shards_refuses_overlap_and_raises_what_a_task_raised() -> None:
    make = functools.partial(operator.attrgetter("__getitem__"), ANSWERS)
    with pytest.raises(InvalidInputError, match="1 prompt ids are in more than one shard"):
        run_arm_shards([{"id0": "prompt 0"}, {"id0": "prompt 0", "id1": "prompt 1"}], make)
    broken = functools.partial(operator.itemgetter(0), [])  # raises IndexError when called
    with ThreadPoolExecutor(2) as pool, pytest.raises(IndexError):
        run_arm_shards([PROMPTS], broken, executor=pool)
