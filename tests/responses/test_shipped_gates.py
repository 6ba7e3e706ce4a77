"""The shipped gates (src/probewise/responses/_default_gates.json) are the gates that
the gate compiler derives from the shipped rules today, and a stale file stays sound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probewise import Rubric, Rule
from probewise.responses import rubric
from probewise.responses.default_rules import DEFAULT_DEFLECTION, DEFAULT_PREAMBLE, DEFAULT_REFUSAL
from probewise.responses.rubric import _gate, _gates_document, _term_data, _vet_shipped

SHIPPED = (*DEFAULT_REFUSAL, *DEFAULT_DEFLECTION, *DEFAULT_PREAMBLE)
GATES_FILE = Path(rubric.__file__).with_name(rubric._SHIPPED_GATES)


def test_the_shipped_gates_are_derived_from_the_shipped_rules() -> None:
    assert GATES_FILE.read_text() == _gates_document(SHIPPED), (
        f"{GATES_FILE.name} is stale: the shipped rules changed since it was built. "
        "Run `python scripts/build_gates.py` and commit the file."
    )


def test_every_shipped_rule_got_its_gate_from_the_file() -> None:
    stored = json.loads(GATES_FILE.read_text())["gates"]
    for rule in Rubric.default().refusal + Rubric.default().deflection:
        assert rule._gate is not None, rule.id
        derived = _gate(rule.pattern)
        assert derived is not None, rule.id
        assert [_term_data(t) for t in rule._gate] == stored[rule.pattern]
        assert sorted(map(str, map(_term_data, rule._gate))) == sorted(
            map(str, map(_term_data, derived))
        ), rule.id


@pytest.mark.parametrize("content", ["", "{", '{"format": 0, "gates": {}}', "[]"])
def test_a_missing_damaged_or_stale_file_derives_the_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    """A pattern the file does not hold gets the gate that _vet would give it."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    if content:
        (folder / rubric._SHIPPED_GATES).write_text(content)
    monkeypatch.setattr(rubric.importlib.resources, "files", lambda _package: folder)
    rule, plain = Rule("kiwi", r"\bkiwi (?:fruit|bird)\b"), Rule("kiwi", r"\bkiwi (?:fruit|bird)\b")
    _vet_shipped([rule])
    rubric._vet([plain])
    assert rule._gate == plain._gate
    assert rule._gate is not None
    assert rule._gate[0].words
