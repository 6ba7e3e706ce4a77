"""The shipped gates (src/probewise/responses/_default_gates.json) are the gates that
the gate compiler derives from the shipped rules today, and a stale file stays sound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probewise import Rubric, Rule

# Private: the stored gates file is compared with what the gate compiler derives; none is public.
from probewise.responses import _gates
from probewise.responses._gates import derive_gate as _gate
from probewise.responses._gates import gate_of
from probewise.responses._gates import gates_document as _gates_document
from probewise.responses._gates import term_data as _term_data
from probewise.responses.default_rules import SHIPPED

GATES_FILE = Path(_gates.__file__).with_name(_gates.SHIPPED_GATES)


def test_the_shipped_gates_are_derived_from_the_shipped_rules() -> None:
    assert GATES_FILE.read_text() == _gates_document(SHIPPED), (
        f"{GATES_FILE.name} is stale: the shipped rules changed since it was built. "
        "Run `python scripts/build_gates.py` and commit the file."
    )


def test_every_shipped_rule_got_its_gate_from_the_file() -> None:
    stored = json.loads(GATES_FILE.read_text())["gates"]
    for rule in Rubric.default().refusal + Rubric.default().deflection:
        gate = gate_of(rule.pattern)
        assert gate is not None, rule.id
        derived = _gate(rule.pattern)
        assert derived is not None, rule.id
        assert [_term_data(t) for t in gate] == stored[rule.pattern]
        assert sorted(map(str, map(_term_data, gate))) == sorted(
            map(str, map(_term_data, derived))
        ), rule.id


@pytest.mark.parametrize("content", ["", "{", '{"format": 0, "gates": {}}', "[]"])
def test_a_missing_damaged_or_stale_file_derives_the_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    """A pattern the file does not hold gets the gate that vet would give it."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    if content:
        (folder / _gates.SHIPPED_GATES).write_text(content)
    monkeypatch.setattr(_gates.importlib.resources, "files", lambda _package: folder)
    rule, plain = Rule("kiwi", r"\bkiwi (?:fruit|bird)\b"), Rule("kiwi", r"\bkiwi (?:fruit|bird)\b")
    # (Gates are kept by pattern: the file's way and vet's way, each on its own.)
    shipped = _gates.shipped_gates([rule])[rule.pattern]
    plain_gate = _gates.derived_gates([plain])[plain.pattern]
    assert shipped == plain_gate
    assert shipped is not None
    assert shipped[0].words


def test_no_shipped_rule_has_more_branches_than_a_gate_has_terms() -> None:
    """A rule with more top-level branches than ``_TERM_LIMIT`` gets one term for all of
    them, the union of their conditions (deflection.change_subject's gate passed any
    opening with "how" or "about" that way): a new branch past the limit fails here."""
    for rule in SHIPPED:
        node = _gates._GateParser(rule.pattern).parse()  # pyright: ignore[reportPrivateUsage]
        branches = _gates._variants(node)  # pyright: ignore[reportPrivateUsage]
        assert len(branches) <= _gates._TERM_LIMIT, (rule.id, len(branches))  # pyright: ignore[reportPrivateUsage]
