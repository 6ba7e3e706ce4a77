"""Start-up: ``probewise --help`` and each subcommand's ``--help`` import nothing heavy,
each command is one module with a typed entry, and the lazy package ``probewise``
exports exactly what it declares."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType, NoneType

import pytest

import probewise
import probewise.responses
import probewise.throughput
from probewise.cli import COMMANDS, command_name, main
from probewise.cli.fit import FIT_LOSSES
from probewise.throughput import FitLoss

HEAVY = ("numpy", "scipy", "torch", "transformers", "regex", "msgspec", "httpx")
LIGHT = [[], *([command_name(command)] for command in COMMANDS)]

# In a fresh interpreter: each command line's --help, then which heavy modules loaded,
# which modules from outside the standard library, and which of probewise's halves.
HELPS = """
import contextlib, io, json, sys
before = set(sys.modules)
from probewise.cli import main
codes = []
for args in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main([*args, "--help"])
        except SystemExit as done:
            codes.append([done.code, "usage: probewise" in out.getvalue()])
heavy = json.loads(sys.argv[2])
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in heavy)
new = {m.partition(".")[0] for m in set(sys.modules) - before}
outside = sorted(new - set(sys.stdlib_module_names) - {"probewise"})
halves = sorted(m for m in sys.modules if m.split(".")[1:2] in (["responses"], ["throughput"]))
print(json.dumps({"codes": codes, "loaded": loaded, "outside": outside, "halves": halves}))
"""


def _fresh(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_help_imports_nothing_heavy() -> None:
    result = _fresh(HELPS, json.dumps(LIGHT), json.dumps(HEAVY))
    assert result["codes"] == [[0, True]] * len(LIGHT)
    assert result["loaded"] == []
    assert result["outside"] == []  # the standard library and probewise only
    assert result["halves"] == []  # ... and of probewise, neither half


def test_import_probewise_imports_nothing_heavy() -> None:
    script = (
        "import json, sys, probewise; heavy = json.loads(sys.argv[1]); "
        "print(json.dumps({'loaded': sorted(m for m in sys.modules "
        "if m.partition('.')[0] in heavy)}))"
    )
    assert _fresh(script, json.dumps(HEAVY))["loaded"] == []


def test_unknown_arguments_of_a_light_command_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["fit", "1:1", "--no-such-option-anywhere"])
    assert caught.value.code == 2
    assert "probewise: error: unrecognized arguments: --no-such-option-anywhere" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("command", COMMANDS, ids=command_name)
def test_every_command_module_has_the_typed_entry(command: ModuleType) -> None:
    """``add_arguments(parser) -> None`` and ``run(args) -> int``, as ``Command`` states
    (the type checkers hold this too; here it is held at run time)."""
    assert typing.get_type_hints(command.add_arguments) == {
        "parser": argparse.ArgumentParser,
        "return": NoneType,
    }
    assert typing.get_type_hints(command.run) == {"args": argparse.Namespace, "return": int}
    assert isinstance(command.HELP, str)
    assert isinstance(command.DESCRIPTION, str)
    assert isinstance(command.RAW_DESCRIPTION, bool)


def test_fit_losses_are_the_fit_loss_values() -> None:
    assert tuple(loss.value for loss in FitLoss) == FIT_LOSSES


# --- No command imports another -----------------------------------------------------

CLI = Path(probewise.__file__).parent / "cli"
COMMAND_MODULES = frozenset(
    f"probewise.cli.{path.stem}" for path in CLI.glob("*.py") if not path.stem.startswith("_")
)
"""The command modules: cli/'s modules less the private shared ones (``_probe``,
``_sweep``, ``_tables``, ...) and ``__init__``/``__main__``."""


def _imported_commands(source: str, module: str) -> set[str]:
    """The command modules that ``module`` (of probewise.cli) imports, anywhere in it
    (inside functions and under TYPE_CHECKING too), other than itself."""
    package = "probewise.cli"
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package if node.level else ""
            if node.level > 1:
                base = ".".join(package.split(".")[: 1 - node.level])
            target = ".".join(part for part in (base, node.module or "") if part)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return (found & COMMAND_MODULES) - {module}


def test_the_command_modules_are_the_commands() -> None:
    """Every command module is registered, once, and registered by its module."""
    names = [command.__name__ for command in COMMANDS]
    assert sorted(names) == sorted(COMMAND_MODULES)
    assert all(isinstance(command, ModuleType) for command in COMMANDS)


def test_no_command_module_imports_another() -> None:
    """(``__init__`` imports them all: it registers them.)"""
    wrong = {
        f"probewise.cli.{path.stem}": imported
        for path in CLI.glob("*.py")
        if path.stem != "__init__"
        and (imported := _imported_commands(path.read_text(), f"probewise.cli.{path.stem}"))
    }
    assert wrong == {}


# What ``probewise --help`` imports may import at its top (outside functions and
# ``TYPE_CHECKING``), besides the standard library: probewise's light base modules,
# which import only the standard library themselves.
LIGHT_BASE = frozenset(
    {
        "probewise.errors",
        "probewise._extras",
        "probewise._files",
        "probewise._progress",
        "probewise.cli",
        "probewise.cli._jsonl",
        "probewise.cli._probe",
        "probewise.cli._sweep",
    }
)
STARTUP = sorted(COMMAND_MODULES | LIGHT_BASE)


def _top_imports(source: str) -> set[str]:
    """The modules a module imports at its top: outside functions and ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module not in (None, "__future__"):
            found.add(str(node.module))
    return found


def _source(module: str) -> str:
    found = importlib.util.find_spec(module)
    assert found is not None
    assert found.origin is not None
    return Path(found.origin).read_text()


@pytest.mark.parametrize("module", STARTUP)
def test_the_start_up_modules_import_only_the_standard_library_at_the_top(module: str) -> None:
    """The test above sees what one run loaded; this one names the import that broke it."""
    wrong = {
        name
        for name in _top_imports(_source(module))
        if name.partition(".")[0] not in sys.stdlib_module_names and name not in LIGHT_BASE
    }
    assert wrong == set(), f"{module}: import these inside the function that needs them"


def test_an_import_at_the_top_is_found() -> None:
    source = (
        "import json\nimport numpy\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\ndef f():\n    import scipy\n"
    )
    assert _top_imports(source) == {"json", "numpy", "typing"}


@pytest.mark.parametrize(
    "line",
    [
        "from probewise.cli.masks import x",
        "from probewise.cli import masks",
        "import probewise.cli.masks",
        "from . import masks",
        "from .masks import x",
        "def f():\n    from probewise.cli.masks import x",
    ],
)
def test_a_command_importing_another_is_found(line: str) -> None:
    assert _imported_commands(line, "probewise.cli.preflight") == {"probewise.cli.masks"}
    assert _imported_commands(line, "probewise.cli.masks") == set()
    assert _imported_commands("from probewise.cli._tables import x", "probewise.cli.arms") == set()


# --- The lazy package ----------------------------------------------------------------


FACES = [probewise, probewise.responses, probewise.throughput]


def _sources(face: ModuleType) -> dict[str, tuple[str, ...]]:
    """The face's ``if TYPE_CHECKING:`` block, read with ``ast`` here (not with the
    face's own reader): module -> names, each an explicit ``X as X`` re-export."""
    assert face.__file__ is not None
    tree = ast.parse(Path(face.__file__).read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    found: dict[str, tuple[str, ...]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        assert node.module is not None
        assert all(alias.asname == alias.name for alias in node.names), node.lineno
        found[node.module] = tuple(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_each_name_is_written_once_and_all_is_derived(face: ModuleType) -> None:
    """The re-export block is the face's only list: ``__all__`` is read from it."""
    names = [name for names in _sources(face).values() for name in names]
    assert len(names) == len(set(names))
    extra = ["__version__"] if face is probewise else []
    assert face.__all__ == [*names, *extra]
    assert set(face.__all__) <= set(dir(face))
    text = Path(str(face.__file__)).read_text()
    assert "__all__ =" not in text  # no second list to keep equal
    assert "_SOURCES" not in text


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_every_name_is_the_object_its_module_defines(face: ModuleType) -> None:
    for module, names in _sources(face).items():
        source = importlib.import_module(module)
        for name in names:
            assert getattr(face, name) is getattr(source, name), name
    exec_globals: dict[str, object] = {}
    exec(f"from {face.__name__} import *", exec_globals)
    assert set(face.__all__) <= set(exec_globals)


def test_the_top_level_reexports_from_the_faces_which_share_no_name() -> None:
    """The top level re-exports from the faces, and the two faces share no name."""
    halves = {
        "probewise.responses": probewise.responses,
        "probewise.throughput": probewise.throughput,
    }
    for module, names in _sources(probewise).items():
        if module in halves:
            assert set(names) <= set(halves[module].__all__), module
    assert set(probewise.responses.__all__).isdisjoint(probewise.throughput.__all__)


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("    from probewise.errors import ProbewiseError\n", "as ProbewiseError"),
        (
            "    from probewise.errors import ProbewiseError as ProbewiseError\n"
            "    from probewise.errors import ProbewiseError as ProbewiseError\n",
            "once",
        ),
        ("    import probewise.errors\n", "only `from MODULE import X as X`"),
        ("    from .errors import ProbewiseError as ProbewiseError\n", "only `from MODULE"),
    ],
)
def test_a_face_that_writes_a_name_wrongly_is_refused(
    tmp_path: Path, block: str, problem: str
) -> None:
    # Private: the faces' lazy-name reader is fed a hand-written broken face; no real face is one.
    from probewise._lazy import declared_names

    face = tmp_path / "__init__.py"
    face.write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n{block}")
    with pytest.raises(ImportError, match=re.escape(problem)):
        declared_names(str(face))


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
def test_an_unknown_name_is_an_attribute_error(face: ModuleType) -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = face.no_such_name
    with pytest.raises(ImportError):
        exec(f"from {face.__name__} import no_such_name", {})
