"""The API reference documents every public name exactly once, at the path it is imported from.

The pages (``docs/api.md`` and ``docs/api/*.md``) are grouped by hand, so nothing but
this test notices a name that was exported and never documented, documented twice, or
documented under a path nobody imports it from. A name in ``probewise.__all__`` is
documented as ``probewise.X``; any other name of a face's ``__all__`` as
``probewise.responses.X`` or ``probewise.throughput.X`` (the face, never the module
that defines it, since modules move and faces do not). The directives are read from
the Markdown source; nothing is built.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import probewise
import probewise.responses
import probewise.throughput

DOCS = Path(__file__).resolve().parent.parent / "docs"
API_PAGES = sorted([DOCS / "api.md", *(DOCS / "api").glob("**/*.md")])
FACES = (probewise.responses, probewise.throughput)

# An object description: ``.. autoclass:: target`` (or ``py:data`` and kin) inside an
# eval-rst block, or the MyST fence ```{autoclass} target```.
_KINDS = r"(?:auto|py:)(?:class|function|exception|data|attribute|method|decorator)"
_DIRECTIVE = re.compile(
    rf"^\s*(?:\.\.\s+{_KINDS}::|(?:`{{3,}}|:{{3,}})\{{{_KINDS}\}})\s*([\w.]+)", re.MULTILINE
)


def documented(text: str) -> list[str]:
    """The target of every object directive in ``text``, in order."""
    return _DIRECTIVE.findall(text)


def expected_paths() -> dict[str, str]:
    """Each public name and the one path it is documented under.

    The two faces share no name (tests/test_cli_startup.py holds them to that), so a
    name not at the top level has one face.
    """
    paths = {name: f"probewise.{name}" for name in probewise.__all__}
    for face in FACES:
        for name in face.__all__:
            paths.setdefault(name, f"{face.__name__}.{name}")
    return paths


def _targets() -> list[str]:
    return [target for page in API_PAGES for target in documented(page.read_text())]


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
