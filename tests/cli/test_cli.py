from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from probewise.cli import main
from probewise.errors import InvalidInputError
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


_SECONDS_TABLE = """\
-------------------------------  ------------  ------------  ------------  ------------
                           Name     Self CPU     CPU total     Self CUDA    CUDA total
-------------------------------  ------------  ------------  ------------  ------------
                       aten::mm      20.000us        1.790s        1.740s        1.740s
         ampere_sgemm_128x64_tn       0.000us       0.000us        1.740s        1.740s
                       memset32       0.000us       0.000us       5.000us       5.000us
-------------------------------  ------------  ------------  ------------  ------------
Self CPU time total: 1.820s
Self CUDA time total: 1.745s
"""


def test_kernels_unreconciled_table_is_not_a_clean_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "table.txt"
    path.write_text("".join("# " + line for line in _SECONDS_TABLE.splitlines(keepends=True)))
    assert main(["kernels", str(path)]) == 1
    out = capsys.readouterr().out
    assert "UNRECONCILED" in out
    assert "4.995 ms of device time unaccounted" in out
    assert "comment prefix '#'" in out
    assert "NOT A CLEAN TOTAL" in out
    assert main(["kernels", str(path), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["reconciled"] is False
    (reading,) = document["printed_tables"]
    assert reading["unaccounted_device_us"] == 4995.0
    assert reading["kernel_sum_us"] == 1_740_005.0
    assert any("exceeds the counted rows" in note for note in reading["notes"])
    assert document["memset_us"] == 5.0


def test_kernels_reconciled_table_exits_0_and_says_so(
    shared_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (shared_fixtures / "profiler_tables" / "legacy_cuda_event_timing.txt").read_text()
    path = tmp_path / "quoted.md"
    path.write_text("".join("> " + line for line in text.splitlines(keepends=True)))
    assert main(["kernels", str(path)]) == 0
    out = capsys.readouterr().out
    assert "counted rows add up to the footer (1.763 ms)" in out
    assert "kernel 1.763 ms" in out


def test_kernels_latin_1_table_gets_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(_SECONDS_TABLE.replace("ampere", "amp\u00e8re").encode("latin-1"))
    assert main(["kernels", str(path)]) == 1
    out = capsys.readouterr().out
    assert "not UTF-8" in out
    assert "Latin-1" in out
    assert "\ufffd" not in out
    assert "amp\u00e8re_sgemm_128x64_tn" in out


def _rank_trace(path: Path, rank: int, world_size: int) -> Path:
    event = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": world_size}
    document = {"distributedInfo": {"rank": rank, "world_size": world_size}, "traceEvents": [event]}
    path.write_text(json.dumps(document))
    return path


def test_kernels_refuses_traces_of_different_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = _rank_trace(tmp_path / "two.json", 0, 2)
    one = _rank_trace(tmp_path / "one.json", 0, 1)
    assert main(["kernels", str(two), str(one)]) == 2
    err = capsys.readouterr().err
    assert str(two) in err
    assert str(one) in err
    assert "--allow-mixed-jobs" in err
    assert main(["kernels", str(two), str(one), "--allow-mixed-jobs"]) == 0
    out = capsys.readouterr().out
    assert f"job 1 (world size 1): rank 0  {one}" in out
    assert f"job 2 (world size 2): rank 0  {two}" in out
    assert "kernel 0.003 ms" in out
    assert main(["kernels", str(two), str(one), "--allow-mixed-jobs", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["jobs"] == [{"job": 1, "paths": [str(one)]}, {"job": 2, "paths": [str(two)]}]
    assert [(s["path"], s["world_size"]) for s in document["sources"]] == [
        (str(one), 1),
        (str(two), 2),
    ]


def test_kernels_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "FIFO"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "probewise.cli", "kernels", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-500:]
    assert "named pipe (FIFO)" in done.stderr
    assert "Traceback" not in done.stderr


def test_kernels_deep_nesting_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [' + "[" * 200_000 + "]" * 200_000 + "]}")
    assert main(["kernels", str(path)]) == 2
    err = capsys.readouterr().err
    assert "too deeply" in err
    assert err.count("\n") == 1


def _lengths_file(tmp_path: Path) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    values = rng.lognormal(6, 1, 3000).astype(int) + 1
    path = tmp_path / "lengths.jsonl"
    path.write_text(
        "".join(
            json.dumps({"length": int(v), "src": "abc"[i % 3]}) + "\n" for i, v in enumerate(values)
        )
    )
    return path


def test_lengths_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _lengths_file(tmp_path)
    argv = ["lengths", str(path), "--source-field", "src", "--batch-size", "16"]
    argv += ["--sweep", "16,256,4096", "--vocab", "16384", "--budget", "1GiB"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3,000 sequences" in out
    assert "3 sources" in out
    assert "length histogram" in out
    assert "padding (batches of 16, in file order)" in out
    assert "megabatch (HF)" in out
    assert out.count("length buckets") == 3
    assert "least waste: width 16" in out
    assert "CE chunk plan (vocab 16,384, bfloat16 logits, 14 bytes per logit" in out


def test_lengths_json_matches_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise import ce_chunk_plan, padding_waste, read_lengths, sweep_buckets

    path = _lengths_file(tmp_path)
    argv = ["lengths", str(path), "--tokens-per-batch", "8192", "--json"]
    argv += ["--vocab", "32000", "--budget", "512MiB", "--bytes-per-logit", "12.3"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    data = read_lengths(path)
    report = padding_waste(data, tokens_per_batch=8192)
    assert document["padding"] == report.to_dict()
    plan = ce_chunk_plan(
        report.largest_batch_slots, 32000, budget_bytes=512 << 20, bytes_per_logit=12.3
    )
    assert document["ce_plan"] == plan.to_dict()
    assert document["stats"]["count"] == 3000
    assert document["sweep"] is None
    assert main(["lengths", str(path), "--batch-size", "8", "--sweep", "64,512", "--json"]) == 0
    swept = json.loads(capsys.readouterr().out)
    assert swept["sweep"] == sweep_buckets(data, batch_size=8, bucket_sizes=[64, 512]).to_dict()


def test_lengths_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    path = _lengths_file(tmp_path)
    out_png = tmp_path / "sweep.png"
    argv = [
        "lengths",
        str(path),
        "--batch-size",
        "16",
        "--sweep",
        "64,1024",
        "--plot",
        str(out_png),
    ]
    assert main(argv) == 0
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {out_png}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep", "64"], "--sweep needs --batch-size"),
        (["--batch-size", "4", "--sweep", "a,b"], "comma-separated"),
        (["--vocab", "100"], "both --vocab and --budget"),
        (["--vocab", "100", "--budget", "1GiB"], "tokens per step"),
        (["--vocab", "100", "--budget", "eight", "--ce-tokens", "9"], "as a size"),
        (["--logits-dtype", "int4"], "unknown logits dtype"),
        (["--batch-size", "0"], "batch_size must be >= 1"),
    ],
)
def test_lengths_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    path = tmp_path / "l.txt"
    path.write_text("5\n9\n")
    assert main(["lengths", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("probewise lengths: error:")
    assert message in err


def test_lengths_bad_file_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text('{"length": 5}\n{"length": 0}\n')
    assert main(["lengths", str(path)]) == 2
    assert f"{path}:2" in capsys.readouterr().err
    assert main(["lengths", str(tmp_path / "missing.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8GiB", 8 << 30),
        ("512 MiB", 512 << 20),
        ("2e9", 2 * 10**9),
        ("1.5G", 3 << 29),
        ("10GB", 10**10),
    ],
)
def test_budget_units(text: str, expected: int) -> None:
    from probewise.cli.lengths import parse_bytes

    assert parse_bytes(text) == expected


def test_import_probewise_stays_light() -> None:
    # DESIGN: torch and transformers are imported only where a module needs them.
    import subprocess
    import sys

    code = "import sys, probewise; print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_fit_tables_and_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "512:0.11", "1024:0.25", "2048:0.61", "4096:1.7"]) == 0
    out = capsys.readouterr().out
    assert "4 points at 4 lengths, 512..4,096 tokens" in out
    assert "dof 1" in out
    assert "1 x 4,096 tokens vs 2 x 2,048" in out
    assert main(["fit", "512:0.11", "1024:0.25", "2048:0.61"]) == 0
    assert "exactly determined" in capsys.readouterr().out


def test_fit_json_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from probewise import ScalingFit, ScalingPoint

    csv_path = tmp_path / "steps.csv"
    csv_path.write_text("length,seconds,batch\n512,0.21,2\n1024,0.5,2\n\n2048,1.2,2\n")
    assert (
        main(["fit", str(csv_path), "4096:1.7", "--json", "--loss", "soft_l1", "--at", "8192"]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    points = [ScalingPoint(512, 0.21, 2), ScalingPoint(1024, 0.5, 2), ScalingPoint(2048, 1.2, 2)]
    expected = ScalingFit.fit([*points, ScalingPoint(4096, 1.7)], loss="soft_l1").to_dict()
    assert {k: document[k] for k in expected} == expected
    assert document["shares_at"]["length"] == 8192
    assert any("extrapolation" in w for w in document["warnings"])


def test_fit_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out_png = tmp_path / "fit.png"
    assert (
        main(["fit", "512:0.11", "1024:0.25", "2048:0.61", "4096:1.7", "--plot", str(out_png)]) == 0
    )
    assert out_png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["512:0.11", "1024:0.25"], "at least three distinct lengths, got 2"),
        (["512:0.11", "1024:fast", "2048:1"], "LENGTH:SECONDS"),
        (["512:0", "1024:1", "2048:2"], "seconds must be finite and > 0"),
        (["512:1:2:3"], "LENGTH:SECONDS"),
        (["missing.csv"], "neither LENGTH:SECONDS nor a CSV file"),
        (["512:1", "1024:2", "2048:3", "--batch", "0"], "--batch must be >= 1"),
    ],
)
def test_fit_bad_input(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["fit", *argv]) == 2
    assert message in capsys.readouterr().err


def test_fit_csv_bad_line_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = tmp_path / "steps.csv"
    csv_path.write_text("512,0.1\n1024,-1\n")
    assert main(["fit", str(csv_path)]) == 2
    assert f"{csv_path}:2" in capsys.readouterr().err


def test_demo_part_two_runs_tiny_local_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    local = json.loads(capsys.readouterr().out)["local_models"]
    a, b = local["tally_a"], local["tally_b"]
    buckets = ("complied", "deflected", "refused", "empty", "error")
    assert sum(a[k] for k in buckets) == 8
    assert sum(b[k] for k in buckets) == 8
    assert a["counted"] == b["counted"] == 8  # the local models count their tokens
    assert [m["bucket"] for m in local["mcnemar"]] == [
        "complied",
        "deflected",
        "refused",
        "empty",
        "error",
    ]
    for m in local["mcnemar"]:
        assert m["only_a"] - m["only_b"] == a[m["bucket"]] - b[m["bucket"]]
    assert main(["demo", "--no-model"]) == 0
    assert "part 2" not in capsys.readouterr().out
    assert main(["demo"]) == 0
    assert "McNemar p" in capsys.readouterr().out


def test_buckets_subcommand_is_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise import read_lengths, sweep_buckets

    path = _lengths_file(tmp_path)
    assert main(["buckets", str(path), "--batch-size", "8", "--sizes", "64,512", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = sweep_buckets(read_lengths(path), batch_size=8, bucket_sizes=[64, 512]).to_dict()
    assert document["sweep"] == expected
    assert main(["buckets", str(path), "--batch-size", "8", "--source-field", "src"]) == 0
    out = capsys.readouterr().out
    assert out.count("length buckets") == 9  # the default widths, 16 .. 4,096
    assert main(["buckets", str(path), "--batch-size", "8", "--sizes", "x"]) == 2
    assert "comma-separated" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# The error contract (issue 19): 2 bad input, 3 internal error, 130 interrupted


def _raising(error: BaseException) -> Callable[[argparse.Namespace], int]:
    def handler(_args: argparse.Namespace) -> int:
        raise error

    return handler


def test_an_unexpected_exception_is_exit_3_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise.cli import fit as _cli_fit

    monkeypatch.delenv("PROBEWISE_DEBUG", raising=False)
    monkeypatch.setattr(_cli_fit, "run", _raising(ZeroDivisionError("secret-canary")))
    assert main(["fit", "1:1"]) == 3
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("probewise fit: internal error: ZeroDivisionError at ")
    assert "PROBEWISE_DEBUG=1" in lines[0]
    assert "Traceback" not in captured.err
    assert "secret-canary" not in captured.err + captured.out


def test_probewise_debug_prints_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise.cli import fit as _cli_fit

    monkeypatch.setenv("PROBEWISE_DEBUG", "1")
    monkeypatch.setattr(_cli_fit, "run", _raising(RecursionError("deep")))
    assert main(["fit", "1:1"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith("probewise fit: internal error: RecursionError")


def test_ctrl_c_is_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise.cli import fit as _cli_fit

    monkeypatch.setattr(_cli_fit, "run", _raising(KeyboardInterrupt()))
    assert main(["fit", "1:1"]) == 130
    assert capsys.readouterr().err == "probewise fit: interrupted\n"


def test_a_probewise_error_is_one_line_even_with_newlines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise.cli import fit as _cli_fit

    monkeypatch.setattr(_cli_fit, "run", _raising(InvalidInputError("first\nsecond\r\nthird")))
    assert main(["fit", "1:1"]) == 2
    assert capsys.readouterr().err == "probewise fit: error: first second third\n"


def test_usage_errors_stay_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["lengths", "--bins-per-octave", "1e8", "x"])
    assert caught.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lengths", "{dir}/fifo"], "FIFO"),
        (["buckets", "{dir}/fifo", "--batch-size", "2"], "FIFO"),
        (["fit", "{dir}/fifo"], "FIFO"),
        (["lengths", "{dir}/loop"], "symbolic links"),
        (["lengths", "{dir}"], "a folder"),
        (["lengths", "{dir}/ok.txt", "--tokenizer", "{dir}/missing"], "no tokenizer folder"),
        (["lengths", "{dir}/ok.txt", "--bins-per-octave", "100000000"], "between 1 and 256"),
        (["lengths", "{dir}/huge.txt"], "above the bound of 2**40"),
        (["lengths", "{dir}/ok.txt", "--pack-to", str(10**30)], "at most 2**40"),
        (["fit", "1:5e-324", "2:1", "3:2"], "too small"),
        (["fit", f"{10**40}:1", "2:1", "3:2"], "at most 2**40"),
        (["fit", "1:1", "2:2", "3:3", "--at", str(10**48)], "at most 2**40"),
    ],
)
def test_damaged_input_is_exit_2_with_a_named_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "ok.txt").write_text("5\n9\n")
    (tmp_path / "huge.txt").write_text(f"5\n{2**40 + 1}\n")
    assert main([a.format(dir=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["lengths", "{dir}/big.txt", "--batch-size", "2", "--sweep", "16,999999999999"],
        ["buckets", "{dir}/big.txt", "--batch-size", str(10**30), "--sizes", str(10**30)],
    ],
)
def test_huge_values_are_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    (tmp_path / "big.txt").write_text(f"5\n{10**12}\n")
    assert main([a.format(dir=tmp_path) for a in argv]) == 0
    assert "bucket sweep" in capsys.readouterr().out


def test_ctrl_c_while_the_subcommands_import_is_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise import cli

    def interrupted() -> argparse.ArgumentParser:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["fit", "1:1"]) == 130
    assert capsys.readouterr().err == "probewise: interrupted\n"


@pytest.mark.parametrize(
    ("scan", "built", "expected"),
    [
        (True, True, "compiled scanner"),
        (False, True, "pure Python, PROBEWISE_PURE_PYTHON is set"),
        (False, False, "pure Python, the compiled scanner was not built"),
    ],
)
def test_version_names_the_trace_reader(
    scan: bool,
    built: bool,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from probewise import __version__
    from probewise.throughput import TraceReader, trace_reader

    # Private: the scanner's SCAN and BUILT are patched, so each reader --version names is seen.
    from probewise.throughput.readers import _native

    def never(*_args: object) -> None:
        raise AssertionError("--version reads no trace")

    monkeypatch.setattr(_native, "SCAN", never if scan else None)
    monkeypatch.setattr(_native, "BUILT", built)
    assert trace_reader() is TraceReader(expected)
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert out == f"probewise {__version__}\ntrace reader: {expected}\n"
    assert err == ""


def test_this_install_reports_its_own_scanner() -> None:
    """Unpatched: the reader named is the one this environment has (CI builds it)."""
    from probewise.throughput import TraceReader, trace_reader

    try:
        # Private: whether the compiled scanner imports is read apart from trace_reader().
        import probewise.throughput.readers._scan  # noqa: F401
    except ImportError:
        built = False
    else:
        built = True
    off = os.environ.get("PROBEWISE_PURE_PYTHON", "") not in ("", "0")
    if not built:
        assert trace_reader() is TraceReader.NOT_BUILT
    else:
        assert trace_reader() is (TraceReader.TURNED_OFF if off else TraceReader.COMPILED)
    if os.environ.get("PROBEWISE_REQUIRE_NATIVE") == "1":
        assert trace_reader() is TraceReader.COMPILED
