"""The light install: without the [torch] and [plot] extras, the light half works and
the rest says which extra to install, in one line.

Two ways, both run by default:

- in a subprocess whose imports of torch, transformers, tokenizers and matplotlib fail
  as they do when they are not installed (a meta path finder; seconds);
- in a fresh virtualenv made by a plain ``pip install .`` of this checkout, where
  torch is simply absent (43-56 s on the 2-core development machine, measured with
  ``pytest tests/test_light_install.py -k plain_pip --durations=1``: pip builds the
  wheel and installs the light dependencies from its cache or the package index).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise import MissingExtraError, ProbewiseError

# Private: requires() is tried with every module of every extra (_PROVIDES), not only those hit.
from probewise._extras import _PROVIDES, Extra, requires

REPO_ROOT = Path(__file__).resolve().parent.parent
EXTRA_MODULES = ("torch", "transformers", "tokenizers", "matplotlib")

# Makes the extras' modules unimportable, as in an environment without them.
BLOCK_EXTRAS = f"""
import importlib.abc, sys
_EXTRAS = {EXTRA_MODULES!r}
class _NoExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _EXTRAS:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NoExtras())
"""

# Runs ``probewise`` once per argument list in argv[1] (JSON), in one interpreter
# (a fresh one per call would cost a second or two each on a loaded machine); prints
# [exit status, stdout, stderr] per call.
CLI_CALLS = """
import contextlib, io, json, sys
from probewise.cli import main
results = []
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    results.append([status, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""

# Made-up completions; what matters is that classify runs.
LIBRARY = (
    f"_EXTRAS = {EXTRA_MODULES!r}\n"
    + """
import json, pathlib, sys
import probewise
from probewise import (
    Complied, LengthStats, MaskScenario, MissingExtraError, Refused,
    ScalingFit, ScalingPoint, ce_chunk_plan, classify, probe_masks, KernelTable,
)
from probewise.throughput import LogitsDtype, measure_bytes_per_logit
from probewise.integrations.torch import check_forward
from probewise.integrations.profiler import kernel_table_handler

class dtype:  # what a torch dtype looks like, without torch
    __module__ = "torch"
    def __str__(self):
        return "torch.float32"

out = {}
out["refused"] = isinstance(classify("I can't help with that."), Refused)
out["complied"] = isinstance(classify("Sure, here are the steps."), Complied)
out["p50"] = LengthStats.of([100, 200, 300, 400, 500]).p50
out["plan"] = ce_chunk_plan(8192, 32000, budget_bytes=1 << 30, logits_dtype=dtype()).logits_dtype.value
fit = ScalingFit.fit([ScalingPoint(length=n, seconds=1e-4 * n + 1e-8 * n * n) for n in (512, 1024, 2048, 4096)])
out["fit_points"] = fit.n_points
out["kernel_us"] = KernelTable.from_chrome_trace(pathlib.Path(sys.argv[1])).kernel_us
errors = []
for call in (
    lambda: probe_masks("llama3-8b", MaskScenario(seq_len=64), dtype="bf16"),
    lambda: measure_bytes_per_logit(lambda logits, labels: logits.sum()),
    lambda: check_forward(object(), {"input_ids": [[1, 2]]}),
    lambda: __import__("probewise.integrations.transformers"),
):
    try:
        call()
    except MissingExtraError as error:
        errors.append([str(error), error.extra, error.module])
out["errors"] = errors
out["handler"] = callable(kernel_table_handler(sys.argv[1] + ".traces"))
out["loaded"] = sorted(m for m in sys.modules if m.partition(".")[0] in _EXTRAS)
print(json.dumps(out))
"""
)


def write_trace(folder: Path) -> Path:
    events = [
        {"ph": "X", "pid": 0, "tid": 7, "ts": 1.0, "cat": "kernel", "name": "gemm", "dur": 2.5},
        {"ph": "X", "pid": 0, "tid": 7, "ts": 5.0, "cat": "kernel", "name": "gemm", "dur": 1.5},
        {"ph": "X", "pid": 0, "tid": 7, "ts": 9.0, "cat": "gpu_memset", "name": "Memset", "dur": 1},
    ]
    path = folder / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def run(command: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        list(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def check_light_cli(python: str, tmp_path: Path, *, prelude: str = "") -> None:
    """What a light install must do on the command line, run by ``python`` (after
    running ``prelude``)."""
    trace = write_trace(tmp_path)
    (tmp_path / "lengths.txt").write_text("\n".join(map(str, range(100, 2100, 100))) + "\n")
    plot_fit = ["fit", "512:0.1", "1024:0.2", "2048:0.5", "--plot", str(tmp_path / "f.png")]
    calls = [
        ["kernels", str(trace), "--json"],
        ["lengths", str(tmp_path / "lengths.txt"), "--json"],
        ["fit", "512:0.11", "1024:0.25", "2048:0.61", "--json"],
        ["demo", "--no-model", "--json"],
        ["masks", "llama3-8b", "--seq", "64"],
        ["preflight"],
        ["demo", "--json"],
        plot_fit,
    ]
    done = run([python, "-c", prelude + CLI_CALLS, json.dumps(calls)], tmp_path)
    assert done.returncode == 0, done.stderr
    kernels, lengths, fit, demo, masks, preflight, demo_models, plot = json.loads(done.stdout)

    assert kernels[0] == 0, kernels[2]
    assert json.loads(kernels[1])["kernel_us"] == 4.0
    assert lengths[0] == 0, lengths[2]
    assert json.loads(lengths[1])["stats"]["count"] == 20
    assert fit[0] == 0, fit[2]
    assert json.loads(fit[1])["n_points"] == 3
    assert demo[0] == 0, demo[2]
    assert json.loads(demo[1])["control"]["state"] == "one_arm"

    needs = "needs torch and transformers: pip install 'probewise[torch]'"
    for (status, _, err), expected in (
        (masks, f"probewise masks: error: probe_masks {needs}"),
        (preflight, f"probewise preflight: error: probe_masks {needs}"),
        (
            demo_models,
            f"probewise demo: error: demo's part 2 (tiny local models; --no-model skips it) {needs}",
        ),
        (plot, "probewise fit: error: --plot needs matplotlib: pip install 'probewise[plot]'"),
    ):
        assert (status, err) == (2, expected + "\n")


def check_light_library(python: str, tmp_path: Path, *, prelude: str = "") -> None:
    """What a light install must do as a library, run by ``python`` (after ``prelude``)."""
    trace = write_trace(tmp_path)
    out = run([python, "-c", prelude + LIBRARY, str(trace)], tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["refused"]
    assert result["complied"]
    assert result["p50"] == 300.0
    assert result["plan"] == "float32"  # a torch dtype recognised without torch
    assert result["fit_points"] == 4
    assert result["kernel_us"] == 4.0
    needs = "needs torch and transformers: pip install 'probewise[torch]'"
    assert result["errors"] == [
        [f"probe_masks {needs}", "torch", "torch"],
        [f"measure_bytes_per_logit {needs}", "torch", "torch"],
        [f"check_forward {needs}", "torch", "torch"],
        [f"PreflightCallback {needs}", "torch", "torch"],
    ]
    assert result["handler"]
    assert result["loaded"] == []


def test_light_half_runs_with_the_extras_unimportable(tmp_path: Path) -> None:
    check_light_library(sys.executable, tmp_path, prelude=BLOCK_EXTRAS)


def test_light_cli_with_the_extras_unimportable(tmp_path: Path) -> None:
    check_light_cli(sys.executable, tmp_path, prelude=BLOCK_EXTRAS)


def test_a_plain_pip_install_is_torch_free_and_works(tmp_path: Path) -> None:
    """``pip install .`` into a fresh virtualenv: the default dependencies only."""
    started = time.monotonic()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO_ROOT)],
        tmp_path,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    for module in EXTRA_MODULES:
        found = run([str(python), "-c", f"import {module}"], tmp_path)
        assert found.returncode != 0, f"{module} was installed by a plain pip install"
    licensed = run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; d = m.distribution('probewise'); "
            "print(d.metadata['License-Expression'], d.read_text('licenses/LICENSE').splitlines()[0])",
        ],
        tmp_path,
    )
    assert licensed.stdout.strip() == "MIT MIT License", licensed.stderr
    # The wheel carries its data and stubs, and (with a C compiler, as in CI) the scanner.
    shipped = run(
        [
            str(python),
            "-c",
            "from importlib.resources import files; r = files('probewise'); "
            "print((r / 'py.typed').is_file(), "
            "(r / 'throughput/attention/configs/llama3-8b.json').is_file(), "
            "(r / 'responses/_default_gates.json').is_file(), "
            "(r / 'throughput/readers/_scan.pyi').is_file())",
        ],
        tmp_path,
    )
    assert shipped.stdout.split() == ["True"] * 4, shipped.stderr
    if os.environ.get("PROBEWISE_REQUIRE_NATIVE") == "1":
        built = run([str(python), "-c", "import probewise.throughput.readers._scan"], tmp_path)
        assert built.returncode == 0, built.stderr[-2000:]
    check_light_library(str(python), tmp_path)
    check_light_cli(str(python), tmp_path)
    # and the console script itself
    script = run(
        [str(env_dir / "bin" / "probewise"), "kernels", str(tmp_path / "trace.json")], tmp_path
    )
    assert script.returncode == 0, script.stderr
    assert "kernel" in script.stdout
    # How long this costs, for the record (-rP shows it).
    print(f"light virtualenv: {time.monotonic() - started:.1f} s")


def test_a_wheel_built_without_a_c_compiler_has_no_scanner_and_builds(tmp_path: Path) -> None:
    """The trace scanner is optional: with no C compiler (CC is a program that fails),
    the wheel still builds, without ``_scan``'s extension, with its stub and not its source
    (the reader then takes its pure-Python paths: tests/throughput/readers/test_chrome_native.py
    checks those give the same tables)."""
    import shutil
    import zipfile

    # A copy of what the build reads: the checkout may hold a build/ folder and an
    # in-place extension from earlier builds, which a wheel would pick up.
    source = tmp_path / "source"
    shutil.copytree(
        REPO_ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CC"] = "false"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir",
         "--disable-pip-version-check", "-w", str(tmp_path), str(source)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("probewise-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    readers = "probewise/throughput/readers/"
    assert f"{readers}_scan.pyi" in names
    assert f"{readers}_native.py" in names
    assert f"{readers}_scan.c" not in names
    assert not [
        name
        for name in names
        if name.startswith(f"{readers}_scan.") and name.endswith((".so", ".pyd"))
    ]


@pytest.mark.parametrize("extra", list(Extra))
def test_requires_names_the_extra(extra: Extra) -> None:
    for module in _PROVIDES[extra]:
        with pytest.raises(MissingExtraError) as caught, requires(extra, "thing"):
            raise ModuleNotFoundError(f"No module named {module!r}", name=f"{module}.sub")
        error = caught.value
        assert isinstance(error, ProbewiseError)
        assert isinstance(error, ImportError)
        assert (error.extra, error.module, error.feature) == (extra.value, module, "thing")
        assert str(error).endswith(f"pip install 'probewise[{extra.value}]'")
        assert isinstance(error.__cause__, ModuleNotFoundError)


@given(
    st.sampled_from(list(Extra)),
    st.from_regex(r"[a-z_][a-z0-9_]{0,12}(\.[a-z_]{1,5})?", fullmatch=True),
)
def test_requires_passes_other_errors_through(extra: Extra, name: str) -> None:
    if name.partition(".")[0] in _PROVIDES[extra]:
        return
    with pytest.raises(ModuleNotFoundError) as caught, requires(extra, "thing"):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    assert not isinstance(caught.value, MissingExtraError)
    # An installed extra that fails to import for another reason is not "missing".
    module = _PROVIDES[extra][0]
    with pytest.raises(ImportError) as broken, requires(extra, "thing"):
        raise ImportError(f"cannot import name 'x' from {module!r}", name=module)
    assert not isinstance(broken.value, MissingExtraError)
