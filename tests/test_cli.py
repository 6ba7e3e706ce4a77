from __future__ import annotations

import json
from pathlib import Path

import pytest

from probewise.cli import main
from probewise.throughput.kernels import KernelTable


def test_demo_prints_tallies_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "deflected" in out
    assert "control: one_arm" in out
    assert "Wilson" in out


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["control"]["state"] == "one_arm"
    a, b = document["arm_a"], document["arm_b"]
    assert a["deflected"] == 0
    assert b["deflected"] == 4
    assert sum(v for k, v in a.items() if k != "truncated") == 12


def test_kernels_on_a_trace(shared_fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = shared_fixtures / "traces" / "nccl_data.json.gz"
    assert main(["kernels", str(trace), "--top", "3", "--by-kind"]) == 0
    out = capsys.readouterr().out
    assert "kernel 162.532 ms" in out
    assert "missing ranks: 1" in out
    assert "gpu_user_annotation 30" in out
    assert "communication" in out
    assert "more rows" in out


def test_kernels_json_per_rank_and_diff(
    shared_fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = shared_fixtures / "traces"
    rank0, rank1 = traces / "sampled_rank-0.json.gz", traces / "sampled_rank-1.json.gz"
    assert (
        main(["kernels", str(rank0), str(rank1), "--json", "--per-rank", "--diff", str(rank1)]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["kernel_us"] == 606_519.0 + 651_026.0
    assert [r["sources"][0]["rank"] for r in document["per_rank"]] == [0, 1]
    assert document["diff"]["delta_kernel_us"] == -606_519.0
    assert len(document["missing_ranks"]) == 126
    assert (
        KernelTable.from_json(
            json.dumps({k: v for k, v in document.items() if k not in ("per_rank", "diff")})
        ).kernel_us
        == document["kernel_us"]
    )


def test_kernels_damaged_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "dur": 4},\n{"ph": "X", "cat": "kernel", "dur": N/A}]}'
    )
    assert main(["kernels", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "probewise kernels: error:" in err
    assert "byte" in err
    assert main(["kernels", str(broken), "--salvage"]) == 0
    out = capsys.readouterr().out
    assert "DAMAGED" in out
    assert "kernel 0.004 ms" in out


def test_kernels_printed_table(shared_fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = shared_fixtures / "profiler_tables" / "legacy_cuda_event_timing.txt"
    assert main(["kernels", str(table), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kernel_us"] == 1763.0
