"""Fuzzing the ``probewise`` command (issue 19): damaged input never gives a traceback.

For every damaged input the command must answer with a typed error on one line of
stderr and exit 2 (or do its job and exit 0), never print a Python traceback, never
exit 3 (an internal error), and finish in bounded time and memory.

Most cases run in-process against :func:`probewise.cli.main` (a subprocess costs
about 0.3 s to start); a handful that need a real process run as one: a FIFO given
as a file (which must be refused, not block: the subprocess has a timeout), and
inputs whose *values* once set the memory (run under ``RLIMIT_AS``, so that an
allocation sized by a value fails instead of swapping). ``kernels``, ``masks`` and
``preflight`` get hand-written damaged files only, here: their readers are fuzzed
in their own suites.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise.cli import main

_SECONDS = 20.0
"""Bound on one in-process run; every case here takes well under a second."""
_CHILD_MEMORY = 1 << 30
"""RLIMIT_AS for a subprocess: ``probewise lengths`` on a tiny file runs in 0.5 GiB."""


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """``probewise ARGV`` in-process: (exit status, stdout, stderr), argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:  # argparse: usage errors and --help
            code = stop.code if isinstance(stop.code, int) else 2
    assert time.monotonic() - start < _SECONDS, f"probewise {argv[0]} took too long"
    return code, out.getvalue(), err.getvalue()


def assert_contract(code: int, out: str, err: str, *, allowed: Sequence[int] = (0, 2)) -> None:
    """Exit 0 (or 1 where a check may fail) or 2 with one error line; no traceback."""
    assert "Traceback" not in out + err, err
    assert code in allowed, f"exit {code}: {err}"
    if code == 2 and "usage:" not in err:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("probewise "), err
        assert ": error: " in lines[0], err


# ---------------------------------------------------------------------------------------
# Damaged files, in-process


_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2**40, 2**40 + 1, 10**12, 2**61, 2**63, 10**30]),
).map(str)
_ODD = st.sampled_from(
    ["nan", "Infinity", "-inf", "2.5", "1e3", "", " ", "\x00", "\x1b[31m", "\ufeff5", "9" * 5000]
)
_RECORDS = st.fixed_dictionaries(
    {
        "length": st.one_of(
            _NUMBERS.map(int),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=6),
            st.none() | st.booleans(),
            st.lists(st.integers(), max_size=3),
        )
    },
    optional={"src": st.text(max_size=4) | st.integers() | st.none() | st.lists(st.none())},
).map(json.dumps)
_DEEP = st.sampled_from([50, 5_000, 200_000]).map(
    lambda depth: '{"length": 5, "src": ' + "[" * depth + "]" * depth + "}"
)


@st.composite
def lengths_files(draw: st.DrawFn) -> bytes:
    line = st.one_of(_NUMBERS, _ODD, _RECORDS, _DEEP, st.text(max_size=10))
    lines = draw(st.lists(line, max_size=8))
    data = draw(st.sampled_from(["\n", "\r\n", "\x0b"])).join(lines).encode("utf-8", "replace")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    match draw(st.sampled_from(["plain", "gzip", "truncated_gzip"])):
        case "gzip":
            data = gzip.compress(data)
        case "truncated_gzip":
            whole = gzip.compress(data)
            data = whole[: draw(st.integers(min_value=1, max_value=len(whole) - 1))]
        case _:
            pass
    return data


_VALID_FILES = st.lists(
    st.integers(min_value=1, max_value=2**40) | st.integers(min_value=1, max_value=300),
    min_size=1,
    max_size=30,
).map(lambda values: "".join(f"{v}\n" for v in values).encode())
"""Good lengths, so that the options, not the file, meet the damage."""

_INTS = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.sampled_from([2**31, 2**40, 2**40 + 1, 999_999_999_999, 2**63, 10**30]),
).map(str)


@st.composite
def lengths_options(draw: st.DrawFn) -> list[str]:
    argv: list[str] = []
    batching = draw(st.sampled_from([None, "--batch-size", "--tokens-per-batch", "--pack-to"]))
    if batching is not None:
        argv += [batching, draw(_INTS)]
    if batching == "--batch-size" and draw(st.booleans()):
        argv += ["--sweep", ",".join(draw(st.lists(_INTS, min_size=1, max_size=4)))]
    if draw(st.booleans()):
        argv += ["--bins-per-octave", draw(_INTS)]
    if draw(st.booleans()):
        argv += [
            "--vocab",
            draw(_INTS),
            "--budget",
            draw(st.sampled_from(["1GiB", "1e300", "0", "x"])),
        ]
        argv += ["--ce-tokens", draw(_INTS)]
    if draw(st.booleans()):
        argv += ["--seed", draw(_INTS)]
    if draw(st.booleans()):
        argv += ["--source-field", "src"]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-cli")


@settings(max_examples=120)
@given(data=lengths_files() | _VALID_FILES, options=lengths_options())
def test_lengths_on_damaged_files(scratch: Path, data: bytes, options: list[str]) -> None:
    path = scratch / "lengths.txt"
    path.write_bytes(data)
    code, out, err = run_cli(["lengths", str(path), *options])
    assert_contract(code, out, err)
    if code == 0 and "--json" in options:
        json.loads(out)


@settings(max_examples=60)
@given(
    data=lengths_files() | _VALID_FILES, batch=_INTS, sizes=st.lists(_INTS, min_size=1, max_size=3)
)
def test_buckets_on_damaged_files(scratch: Path, data: bytes, batch: str, sizes: list[str]) -> None:
    path = scratch / "buckets.txt"
    path.write_bytes(data)
    code, out, err = run_cli(
        ["buckets", str(path), "--batch-size", batch, "--sizes", ",".join(sizes)]
    )
    assert_contract(code, out, err)


_SECONDS_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-1", "5e-324", "1e308", "NaN", "fast", "", "1_0"]),
)
_POINTS = st.one_of(
    st.tuples(_INTS, _SECONDS_TEXT).map(":".join),
    st.tuples(_INTS, _SECONDS_TEXT, _INTS).map(":".join),
    st.text(max_size=12).filter(lambda s: not s.startswith("-")),
)


@settings(max_examples=80)
@given(
    points=st.lists(_POINTS, min_size=1, max_size=6),
    extra=st.lists(
        st.sampled_from(
            [
                ["--loss", "soft_l1"],
                ["--at", "7"],
                ["--at", str(10**48)],
                ["--json"],
                ["--batch", "3"],
            ]
        ),
        max_size=2,
    ),
)
def test_fit_on_damaged_points(scratch: Path, points: list[str], extra: list[list[str]]) -> None:
    # A point that happens to name a file must not read one of the repository's.
    with contextlib.chdir(scratch):
        code, out, err = run_cli(["fit", *itertools.chain(*extra), "--", *points])
    assert_contract(code, out, err)


@settings(max_examples=40)
@given(
    rows=st.lists(
        st.lists(st.one_of(_INTS, _SECONDS_TEXT, st.text(max_size=5)), max_size=4), max_size=6
    )
)
def test_fit_on_damaged_csv(scratch: Path, rows: list[list[str]]) -> None:
    path = scratch / "points.csv"
    path.write_text("\n".join(",".join(row) for row in rows), encoding="utf-8", errors="replace")
    code, out, err = run_cli(["fit", str(path)])
    assert_contract(code, out, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--no-model"],
        ["demo", "--no-model", "--json"],
        ["demo", "--no-model", "--bogus"],
        ["demo", "--no-model", "extra"],
        ["demo", "--json=1"],
    ],
)
def test_demo_arguments(argv: list[str]) -> None:
    code, out, err = run_cli(argv)
    assert_contract(code, out, err)


# ---------------------------------------------------------------------------------------
# Hand-written damaged files for the other subcommands (their readers are fuzzed in
# their own suites); only cases that hold on this branch are listed.


_DAMAGED: dict[str, bytes] = {
    "empty.json": b"",
    "truncated.json.gz": gzip.compress(
        b'{"traceEvents": [' + b'{"name":"k","ph":"X","ts":1,"dur":2,"cat":"kernel"},' * 200 + b"]}"
    )[:-40],
    "nan.json": b'{"traceEvents": [{"name":"k","ph":"X","ts":NaN,"dur":Infinity,"cat":"kernel"}]}',
    "control.json": b'{"traceEvents": [{"name":"k\x01\x02","ph":"X","ts":1,"dur":2,"cat":"kernel"}]}',
    "bom.json": b'\xef\xbb\xbf{"traceEvents": []}',
    "wrong.json": b'{"traceEvents": {"a": 1}}',
    "huge.json": b'{"traceEvents": [{"name":"k","ph":"X","ts":1e400,"dur":-99999999999999999999999,"cat":"kernel"}]}',
    "list.json": b"[1, 2]",
    "bom-config.json": b'\xef\xbb\xbf{"model_type": "llama"}',
    "deep.json": b'{"traceEvents": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    "deep-config.json": b'{"model_type": "llama", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("damaged")
    for name, data in _DAMAGED.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        *(
            ["kernels", name]
            for name in ("empty.json", "truncated.json.gz", "nan.json", "control.json")
        ),
        *(["kernels", name] for name in ("bom.json", "wrong.json", "huge.json", "deep.json")),
        ["masks", "deep-config.json", "--seq", "16"],
        ["preflight", "--config", "deep-config.json"],
        ["masks", "empty.json", "--seq", "16"],
        ["masks", "list.json", "--seq", "16"],
        ["masks", "bom-config.json", "--seq", "16"],
        ["masks", "missing.json"],
        ["preflight", "--config", "empty.json"],
        ["preflight", "--config", "list.json"],
    ],
)
def test_other_subcommands_on_damaged_files(damaged: Path, argv: list[str]) -> None:
    resolved = [str(damaged / a) if a.endswith((".json", ".gz")) else a for a in argv]
    code, out, err = run_cli(resolved)
    assert_contract(code, out, err, allowed=(0, 1, 2))


# ---------------------------------------------------------------------------------------
# In a real process: FIFOs (must not block) and memory set by values (RLIMIT_AS)


def run_child(
    argv: Sequence[str], *, timeout: float = 60.0, memory: int | None = _CHILD_MEMORY
) -> tuple[int, str]:
    """``python -m probewise.cli ARGV`` under RLIMIT_AS (``memory`` bytes; None: no
    limit, for commands that import torch) and a timeout: (status, stderr)."""

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PROBEWISE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "probewise.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
        env=env,
        check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done.returncode, done.stderr


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "lengths.fifo"
    os.mkfifo(fifo)
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("5\n9\n")
    for argv in (
        ["lengths", str(fifo)],
        ["buckets", str(fifo), "--batch-size", "2"],
        ["fit", str(fifo)],
    ):
        code, err = run_child(argv, timeout=30)
        assert code == 2, err
        assert "FIFO" in err
    for argv in (  # a FIFO as the output: writing one would wait for a reader
        ["lengths", str(lengths), "--plot", str(fifo)],
        ["fit", "1:1", "2:2", "3:4", "--plot", str(fifo)],
    ):
        code, err = run_child(argv, timeout=30)
        assert code == 2, err
        assert "not a regular file" in err
    trace = tmp_path / "trace.json"
    os.mkfifo(trace)
    for argv, memory in (  # the readers of traces and model configs refuse one too
        (["kernels", str(trace)], _CHILD_MEMORY),
        (["masks", str(fifo), "--seq", "16"], None),
        (["preflight", "--config", str(fifo), "--seq", "16"], None),
    ):
        code, err = run_child(argv, timeout=60, memory=memory)
        assert code == 2, err
        assert "FIFO" in err


@pytest.mark.parametrize(
    ("values", "argv"),
    [
        # Once 1.4 GB and 466 GiB: count arrays sized by the largest bucket id.
        ([5, 10**10], ["lengths", "--batch-size", "2", "--sweep", "1,16"]),
        ([5, 10**12], ["buckets", "--batch-size", "2"]),
        # The finest histogram over the widest range the bound allows.
        ([1, 2**40], ["lengths", "--bins-per-octave", "256", "--pack-to", str(2**40)]),
    ],
)
def test_memory_is_set_by_the_input_not_its_values(
    tmp_path: Path, values: list[int], argv: list[str]
) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text("".join(f"{v}\n" for v in values))
    code, err = run_child([argv[0], str(path), *argv[1:]], timeout=60)
    assert code == 0, err


def test_a_value_that_asked_for_memory_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text(f"5\n{2**61}\n")
    code, err = run_child(["lengths", str(path), "--batch-size", "2", "--sweep", "1"], timeout=60)
    assert code == 2
    assert f"{path}:2" in err
    assert "2**40" in err


# ---------------------------------------------------------------------------------------
# Deeper, for `-m slow` runs


_DEEPER_EXAMPLES = int(os.environ.get("PROBEWISE_FUZZ_EXAMPLES", "400"))
"""Examples of the deeper run (about 20 ms each); raise it to fuzz longer."""


@pytest.mark.slow
@settings(max_examples=_DEEPER_EXAMPLES)
@given(data=lengths_files() | _VALID_FILES, options=lengths_options())
def test_lengths_on_damaged_files_deeper(scratch: Path, data: bytes, options: list[str]) -> None:
    test_lengths_on_damaged_files.hypothesis.inner_test(scratch, data, options)  # type: ignore[attr-defined]
