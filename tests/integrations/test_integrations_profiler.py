"""kernel_table_handler on real torch.profiler runs (CPU): each summary it writes is the
kernel table of the trace it wrote, and ``probewise kernels DIR --per-rank`` reads the
folder of a two-rank run (gloo on 127.0.0.1) as its two ranks.

A CPU profile has no device kernels, so the tables hold no kernel rows; what is held
equal is the whole table (excluded events, steps, sources), read twice."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from probewise import KernelTable
from probewise.cli import main
from probewise.integrations.profiler import kernel_table_handler, summary_path

torch = pytest.importorskip("torch")

# A schedule that repeats warns, once, that each cycle's events are cleared (what is
# wanted here: one trace per cycle). Raised as an error inside the profiler's C++
# callback, the warning would crash the interpreter.
pytestmark = pytest.mark.filterwarnings("ignore:Warning. Profiler clears events:UserWarning")


def profile_steps(
    folder: Path, worker_name: str | None, *, use_gzip: bool = False, repeat: int = 2
) -> None:
    """A few CPU training steps of a small model, one trace per cycle (two by default)."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=repeat)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        on_trace_ready=kernel_table_handler(folder, worker_name=worker_name, use_gzip=use_gzip),
    ) as prof:
        for _ in range(3 * repeat):
            model(torch.randn(4, 32)).sum().backward()
            prof.step()


def pairs(folder: Path) -> list[tuple[Path, Path]]:
    traces = sorted(p for p in folder.iterdir() if ".pt.trace.json" in p.name)
    return [(trace, summary_path(trace)) for trace in traces]


@pytest.mark.parametrize("use_gzip", [False, True], ids=["json", "gzip"])
def test_each_summary_is_the_table_of_the_trace_written(tmp_path: Path, use_gzip: bool) -> None:
    profile_steps(tmp_path, "worker", use_gzip=use_gzip)
    found = pairs(tmp_path)
    assert len(found) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        name for trace, summary in found for name in (trace.name, summary.name)
    )
    steps = []
    for trace, summary in found:
        assert trace.name.startswith("worker.")
        assert trace.name.endswith(".pt.trace.json.gz" if use_gzip else ".pt.trace.json")
        table = KernelTable.from_chrome_trace(trace)
        assert json.loads(summary.read_text()) == table.to_dict()
        assert KernelTable.from_json(summary.read_text()) == table
        steps.append([step.step for step in table.steps])
    assert steps == [[1, 2], [4, 5]]  # two active steps after one warm-up, twice


def test_the_default_worker_name_is_torchs(tmp_path: Path) -> None:
    profile_steps(tmp_path, None)
    ((trace, _summary), _) = pairs(tmp_path)
    assert trace.name.startswith(f"{socket.gethostname()}_{os.getpid()}.")


# One rank of a two-rank job, in a fresh interpreter (fork would copy the profiler's
# threads of the tests before, and can hang; spawn would import this test module again).
RANK = """
import sys
from pathlib import Path
import torch
from probewise.integrations.profiler import kernel_table_handler
torch.distributed.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU],
    schedule=torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1),
    on_trace_ready=kernel_table_handler(Path(sys.argv[2])),
) as prof:
    for _ in range(3):
        model(torch.randn(4, 32)).sum().backward()
        prof.step()
torch.distributed.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_two_rank_folder_reads_per_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(rank), str(tmp_path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    for process in ranks:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
    found = pairs(tmp_path)
    assert len(found) == 2
    for trace, summary in found:
        assert KernelTable.from_json(summary.read_text()) == KernelTable.from_chrome_trace(trace)
    assert main(["kernels", str(tmp_path), "--per-rank", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    ranks = sorted(source["rank"] for table in document["per_rank"] for source in table["sources"])
    assert ranks == [0, 1]
