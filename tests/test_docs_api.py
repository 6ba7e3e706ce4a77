"""The API reference documents every public name once, at its import path; references resolve.

The pages (``docs/api.md`` and ``docs/api/*.md``) are grouped by hand, so nothing but
this test notices a name that was exported and never documented, documented twice, or
documented under a path nobody imports it from. A name in ``probewise.__all__`` is
documented as ``probewise.X``; any other name of a face's ``__all__`` as
``probewise.responses.X`` or ``probewise.throughput.X`` (the face, never the module
that defines it, since modules move and faces do not). The directives are read from
the Markdown source; nothing is built.

The other pages refer to those names with MyST roles ({class}`probewise.KernelTable`).
Sphinx, without nitpicky mode, leaves a reference that resolves nowhere as plain text
without a word, so the last test checks each one against the documented paths.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from pathlib import Path

import probewise
import probewise.integrations.profiler
import probewise.integrations.torch
import probewise.integrations.transformers
import probewise.responses
import probewise.throughput

DOCS = Path(__file__).resolve().parent.parent / "docs"
API_PAGES = sorted([DOCS / "api.md", *(DOCS / "api").glob("**/*.md")])
FACES = (probewise.responses, probewise.throughput)
# The integrations have no face: each name is documented at its module, the path it is
# imported from (``from probewise.integrations.torch import check_forward``).
INTEGRATIONS = (
    probewise.integrations.torch,
    probewise.integrations.transformers,
    probewise.integrations.profiler,
)

# An object description: ``.. autoclass:: target`` (or ``py:data`` and kin) inside an
# eval-rst block, or the MyST fence ```{autoclass} target```.
_KINDS = r"(?:auto|py:)(?:class|function|exception|data|attribute|method|decorator)"
_DIRECTIVE = re.compile(
    rf"^\s*(?:\.\.\s+{_KINDS}::|(?:`{{3,}}|:{{3,}})\{{{_KINDS}\}})\s*([\w.]+)", re.MULTILINE
)

# A MyST role naming a Python object: {class}`probewise.X`, {py:func}`~probewise.f`,
# {meth}`title <probewise.X.m>`.
_ROLE = re.compile(
    r"\{(?:py:)?(?:class|func|meth|attr|exc|data|obj|mod)\}`(?:[^`<]*<)?~?([\w.]+)>?`"
)
# A module target (``py:module``), or a module documented with its members (``automodule``).
_MODULE = re.compile(r"^\s*(?:\.\.\s+|(?:`{3,}|:{3,})\{)(auto|py:)module(?:::|\})\s*([\w.]+)", re.M)
PAGES = sorted(path for path in DOCS.glob("**/*.md") if "_build" not in path.parts)


def referenced(text: str) -> list[str]:
    """The target of every Python cross-reference role in ``text``, in order."""
    return _ROLE.findall(text)


def documented(text: str) -> list[str]:
    """The target of every object directive in ``text``, in order."""
    return _DIRECTIVE.findall(text)


def expected_paths() -> dict[str, str]:
    """Each public name and the one path it is documented under.

    The two faces share no name (tests/cli/test_cli_startup.py holds them to that), so a
    name not at the top level has one face.
    """
    paths = {name: f"probewise.{name}" for name in probewise.__all__}
    for face in (*FACES, *INTEGRATIONS):
        for name in face.__all__:
            paths.setdefault(name, f"{face.__name__}.{name}")
    return paths


def _targets() -> list[str]:
    return [target for page in API_PAGES for target in documented(page.read_text())]


def _load(path: str) -> object:
    """The object at a dotted path: a module, or a name in one."""
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


def _resolves(target: str, objects: set[str], modules: set[str], with_members: set[str]) -> bool:
    """A documented object or module, or a member reached from one whose members show."""
    if target in objects or target in modules:
        return True
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        owner = ".".join(parts[:cut])
        if owner in objects or owner in with_members:
            found: object = _load(owner)
            for part in parts[cut:]:
                if not hasattr(found, part):
                    return False
                found = getattr(found, part)
            return True
    return False


def test_the_parser_reads_both_directive_forms() -> None:
    text = (
        "```{eval-rst}\n.. autoclass:: probewise.responses.Judge\n   :members:\n"
        ".. py:data:: probewise.Outcome\n```\n"
        "```{autofunction} probewise.throughput.time_step\n```\n"
        "Prose naming probewise.classify is not a directive.\n"
    )
    assert documented(text) == [
        "probewise.responses.Judge",
        "probewise.Outcome",
        "probewise.throughput.time_step",
    ]


def test_every_public_name_is_documented_exactly_once() -> None:
    paths = expected_paths()
    # Counted by the last part, so a core name documented under its face too counts twice.
    counts = Counter(target.rpartition(".")[2] for target in _targets())
    missing = sorted(paths[name] for name in paths if counts[name] == 0)
    twice = sorted(f"{paths[name]} ({counts[name]} times)" for name in paths if counts[name] > 1)
    assert (missing, twice) == ([], [])


def test_every_documented_name_is_public_at_that_path() -> None:
    public = set(expected_paths().values())
    wrong = sorted(target for target in _targets() if target not in public)
    assert wrong == []


def test_the_role_parser_reads_every_form() -> None:
    text = (
        "{class}`probewise.KernelTable`, {py:func}`~probewise.throughput.time_step`, "
        "{meth}`the door <probewise.KernelTable.from_chrome_trace>` and `probewise.X`."
    )
    assert referenced(text) == [
        "probewise.KernelTable",
        "probewise.throughput.time_step",
        "probewise.KernelTable.from_chrome_trace",
    ]
    objects, none = {"probewise.KernelTable"}, set[str]()
    assert _resolves("probewise.KernelTable.from_chrome_trace", objects, none, none)
    assert not _resolves("probewise.KernelTable.no_such_member", objects, none, none)
    assert not _resolves("KernelTable", objects, none, none)
    errors = {"probewise.errors"}
    assert _resolves("probewise.errors.ProbewiseError", none, errors, errors)
    assert not _resolves("probewise.errors.ProbewiseError", none, errors, none)


def test_every_cross_reference_in_the_docs_resolves() -> None:
    texts = {page: page.read_text() for page in PAGES}
    objects = {target for text in texts.values() for target in documented(text)}
    found = [match for text in texts.values() for match in _MODULE.findall(text)]
    modules = {module for _kind, module in found}
    with_members = {module for kind, module in found if kind == "auto"}
    wrong = sorted(
        f"{page.relative_to(DOCS)}: {target}"
        for page, text in texts.items()
        for target in referenced(text)
        if not _resolves(target, objects, modules, with_members)
    )
    assert wrong == []
