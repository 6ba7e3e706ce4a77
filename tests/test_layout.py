"""The shape of the source tree: sizes, the module graph, and who may import what.

Read from the AST of ``src/probewise``; nothing is imported. Each rule is stated in
docs/contributing.md, where a new probe is placed.

- No module is over 600 lines, and no function over 60 (its docstring not counted: a
  long explanation is not a long function), but those listed in ``LONGER_MODULES`` and
  ``LONGER_FUNCTIONS`` with why, which keep to the old 800 and 80 and leave the lists
  once they fall under the new bounds.
- The module graph has no cycle. Every ``import`` counts, those inside functions and
  under ``TYPE_CHECKING`` too: a cycle hidden in a function is still a cycle. The
  package faces (``__init__`` modules that only re-export) are left out, since a face
  imports the modules beneath it by design and nothing beneath imports its face.
- ``responses`` and ``throughput`` never import each other, nor ``cli`` nor
  ``integrations``; ``integrations`` does not import ``cli``.
- The kernel model sits above its readers: nothing under ``throughput.readers`` reaches
  ``throughput.kernels``, directly or through another module (a reader returns plain
  parts, ``throughput._kernel_rows``, and the table builds itself from them), and that
  leaf module imports neither.
- No ``_`` name crosses a subpackage: a private module or name is used only inside the
  subpackage that holds it. The shared base at the top (``SHARED_BASE``:
  ``_validation``, ``_json``, ``_extras``, ``_files``, ``_lazy``,
  ``_progress``) is the one exception.
- A test under ``tests/`` that imports a private probewise module or name says why, in
  a ``# Private:`` comment above the import (read from the tests' AST, likewise).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "probewise"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
OLD_MAX_MODULE_LINES = 800  # (what the modules and functions listed below keep to)
OLD_MAX_FUNCTION_LINES = 80
SHARED_BASE = {
    "probewise._validation",
    "probewise._json",
    "probewise._extras",
    "probewise._lazy",
    "probewise._files",
    "probewise._progress",
}
MODEL = "probewise.throughput.kernels"
READERS = "probewise.throughput.readers"
MODEL_PARTS = "probewise.throughput._kernel_rows"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_face(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> Iterator[tuple[str, str | None, int]]:
    """(module imported, name imported from it or None, line) for every import in a module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield base, alias.name, node.lineno


def _target(module: str, name: str | None) -> str | None:
    """The probewise module an import reaches (a submodule when ``name`` is one)."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module if module in MODULES else None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES if not _is_face(name)}
    for name, edges in graph.items():
        for module, imported, _line in _imports(name):
            target = _target(module, imported)
            if target is not None and target != name and not _is_face(target):
                edges.add(target)
    return graph


def _half(name: str) -> str | None:
    parts = name.split(".")
    halves = {"responses", "throughput", "cli", "integrations"}
    return parts[1] if len(parts) > 1 and parts[1] in halves else None


# What is left above the bounds (600 lines, 60-line functions), each under the old
# bound (800, 80) and named with why it is not cut yet: a module or function not listed
# keeps to the new bound, a listed one to the old, and one that falls under the new
# bound leaves the list (the test says so).
LONGER_MODULES: dict[str, str] = {
    "probewise.responses.generators": "the OpenAI-compatible generator: retries, "
    "streaming and parsing around one request loop (the local one is apart)",
    "probewise.throughput.readers._events": "the pure-Python trace event reader, "
    "serial and parallel, beside the compiled scanner it stands in for",
    "probewise.responses._gates": "the gate compiler: a parser and an analysis of one regex syntax",
    "probewise.responses._journal": "the checkpoint format: writer, reader, lock and the "
    "old format's reader",
    "probewise.responses.classifier": "classify's one pass: normalising, the opening, "
    "answers and the later window",
    "probewise.throughput.attention.masks": "the mask probe's public types and its "
    "composition of the stages",
    "probewise.throughput.data.length_input": "every length source (files, columns, "
    "tokenizers) behind one reader",
}
LONGER_FUNCTIONS: dict[str, str] = {
    "probewise.cli._probe add_scenario_arguments": "one option after another",
    "probewise.responses.generators __init__": "its arguments checked one by one",
    "probewise.cli.arms run": "the arms command's steps in order",
    "probewise.throughput.readers._table_frames find_frames": "one scan of a printed table",
    "probewise.throughput.data.buckets sweep_buckets": "the sweep with its no-op guard",
    "probewise.responses.arms run_paired": "both arms' loop over one prompt list",
    "probewise.responses.arms _outcomes": "one generation loop with its error buckets",
    "probewise.throughput.attention._stand_ins structured_sdpa_mask": "transformers' "
    "mask function, mirrored argument for argument",
    "probewise.cli.kernels _print_summary": "one table's lines",
    "probewise.cli.arms add_arguments": "one option after another",
    "probewise.throughput.readers._totals add_lane": "the hot loop of a trace read, kept "
    "in one frame",
    "probewise.responses.generators _parse": "one response document's fields in order",
    "probewise.throughput.attention.sdpa _cudnn_reasons": "torch's cuDNN checks in their order",
    "probewise.cli.preflight _data_checks": "the data checks in the order printed",
    "probewise.throughput.attention._band _structure": "one pass over a mask's rows",
}


def _over(sizes: dict[str, int], bound: int, old_bound: int, longer: dict[str, str]) -> list[str]:
    wrong = [
        f"{name}: {n} > {bound}" for name, n in sizes.items() if n > bound and name not in longer
    ]
    wrong += [
        f"{name}: {sizes[name]} > {old_bound}" for name in longer if sizes.get(name, 0) > old_bound
    ]
    wrong += [
        f"{name}: {sizes.get(name, 0)} <= {bound}, so off the list"
        for name in longer
        if sizes.get(name, 0) <= bound
    ]
    return sorted(wrong)


def test_no_module_is_over_600_lines_but_those_listed() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert _over(sizes, MAX_MODULE_LINES, OLD_MAX_MODULE_LINES, LONGER_MODULES) == []


def test_the_size_check_finds_what_it_looks_for() -> None:
    longer = {"a": "why", "b": "why"}
    sizes = {"a": 700, "b": 500, "c": 650, "d": 100}
    assert _over(sizes, 600, 800, longer) == ["b: 500 <= 600, so off the list", "c: 650 > 600"]
    assert _over({**sizes, "a": 900, "b": 700, "c": 1}, 600, 800, longer) == ["a: 900 > 800"]


def _function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


def test_no_function_is_over_60_lines_but_those_listed() -> None:
    sizes: dict[str, int] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = f"{name} {node.name}"
                sizes[key] = max(sizes.get(key, 0), _function_lines(node))
    assert _over(sizes, MAX_FUNCTION_LINES, OLD_MAX_FUNCTION_LINES, LONGER_FUNCTIONS) == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_module_graph_has_no_cycle() -> None:
    assert _cycle(_graph()) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    ("importer", "forbidden"),
    [
        ("responses", "throughput"),
        ("throughput", "responses"),
        ("responses", "cli"),
        ("throughput", "cli"),
        # The integrations (torch, transformers, the profiler) sit on the training half:
        # nothing beneath them imports them, and they are not the CLI's.
        ("responses", "integrations"),
        ("throughput", "integrations"),
        ("integrations", "cli"),
    ],
)
def test_dependencies_point_one_way(importer: str, forbidden: str) -> None:
    wrong = sorted(
        f"{name}:{line} imports {module}"
        for name in MODULES
        if _half(name) == importer
        for module, imported, line in _imports(name)
        if (target := _target(module, imported)) is not None and _half(target) == forbidden
    )
    assert wrong == []


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_reader_reaches_the_kernel_model() -> None:
    """The readers sit below the model: each returns plain parts (``_kernel_rows``) and
    ``KernelTable`` builds itself from them, so nothing under ``throughput.readers``
    imports ``throughput.kernels``, nor a module that does (the table sets above both,
    ``trace_sets`` and ``table_readings``, may). The parts import neither."""
    graph = _graph()
    readers = [name for name in graph if name.startswith(f"{READERS}.")]
    assert readers
    wrong = sorted(name for name in readers if MODEL in _reaches(graph, name))
    assert wrong == []
    assert not {
        name for name in _reaches(graph, MODEL_PARTS) if name == MODEL or name.startswith(READERS)
    }
    # The model's doors call the readers: the edge runs model -> readers, never back.
    assert any(target.startswith(f"{READERS}.") for target in graph[MODEL])


def test_the_reach_finder_follows_imports() -> None:
    assert _reaches({"a": {"b"}, "b": {"c"}, "c": set()}, "a") == {"b", "c"}


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _private_crossings() -> list[str]:
    wrong: list[str] = []
    for name in MODULES:
        for module, imported, _line in _imports(name):
            if not module.startswith("probewise"):
                continue
            path = f"{module}.{imported}" if imported is not None else module
            parts = path.split(".")
            private_at = next((i for i, part in enumerate(parts) if _private(part)), None)
            if private_at is None or ".".join(parts[: private_at + 1]) in SHARED_BASE:
                continue
            owner = ".".join(parts[:private_at])  # the (sub)package the private name lives in
            if owner not in MODULES or not _is_face(owner):
                owner = owner.rpartition(".")[0]  # a private name inside a public module
            if not (name == owner or name.startswith(f"{owner}.")):
                wrong.append(f"{name} uses {path}")
    return sorted(wrong)


def test_no_private_name_crosses_a_subpackage() -> None:
    assert _private_crossings() == []


def test_the_test_folders_mirror_the_packages() -> None:
    """Each folder of tests is a package of the source, so a test is found beside the
    code it tests (``tests/throughput/readers`` for ``probewise/throughput/readers``)."""
    tests = Path(__file__).resolve().parent
    aside = {"data", "typing", "__pycache__"}
    folders = {
        folder.relative_to(tests)
        for folder in tests.rglob("*")
        if folder.is_dir() and not aside & set(folder.relative_to(tests).parts)
    }
    assert folders, tests
    packages = {
        folder.relative_to(SRC) for folder in SRC.rglob("*") if (folder / "__init__.py").exists()
    }
    assert folders - packages == set()


def _reaches_private(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        paths = [alias.name for alias in node.names]
    else:
        paths = [f"{node.module or ''}.{alias.name}" for alias in node.names]
    return any(
        path.startswith("probewise.") and any(_private(part) for part in path.split("."))
        for path in paths
    )


def _unexplained_private_imports(path: Path) -> list[int]:
    """Lines of ``path`` importing a private probewise module or name with no reason given.

    A reason is a ``# Private:`` comment on the line above the import, or above the run
    of private imports it stands in (one reason may cover the private imports it heads)."""
    lines = path.read_text().splitlines()
    imports = [
        node
        for node in ast.walk(ast.parse("\n".join(lines), str(path)))
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    starts = {  # every line of a private import -> its first line
        line: node.lineno
        for node in imports
        if _reaches_private(node)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    wrong: list[int] = []
    for node in imports:
        if not _reaches_private(node):
            continue
        above = node.lineno - 1  # lines are counted from 1
        while above in starts:
            above = starts[above] - 1
        if not (above >= 1 and lines[above - 1].strip().startswith("# Private:")):
            wrong.append(node.lineno)
    return wrong


def test_a_test_says_why_it_reaches_a_private_name() -> None:
    """A test that imports a private module or name says why in one line above it, so the
    names the code should be free to move are pinned only where a reason was written."""
    tests = Path(__file__).resolve().parent
    wrong = [
        f"{path.relative_to(tests)}:{line}"
        for path in sorted(tests.rglob("*.py"))
        for line in _unexplained_private_imports(path)
    ]
    assert wrong == []


def test_the_reason_finder_finds_an_unexplained_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json\n"
        "from probewise.responses import _gates\n"
        "# Private: the scanner is patched.\n"
        "from probewise.throughput.readers import _native\n"
        "from probewise.throughput.readers._native import SCAN\n"
        "from probewise import Rubric\n"
    )
    assert _unexplained_private_imports(probe) == [2]
