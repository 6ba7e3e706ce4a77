from __future__ import annotations

import json

import pytest

from probewise.cli import main


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
