"""The default rules on real, human-labelled completions (``../shared/data/responses``).

The figures come from ``scripts/eval_rubric.py``, the command that docs/measurements.md
quotes, so the floors here hold the documented figures. Every set is a development
set (the rules were tuned on it: figures in-sample). Floors are the targets of issue
#17 where the rules meet them, and the measured level (rounded down) where they do
not yet. Failure messages carry counts and row ids only, never a completion's text.
The data are read through the ``shared_responses`` fixture: the test skips when they
are absent, and fails then under ``PROBEWISE_REQUIRE_FIXTURES=1``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "eval_rubric.py"


@pytest.fixture(scope="module")
def evaluation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_rubric", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("eval_rubric", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(evaluation: ModuleType, shared_responses: Path) -> Any:
    return evaluation.evaluate_real(shared_responses, misses=True)


def _group(report: Any, name: str, model: str) -> Any:
    return report["sets"][name]["groups"][model]


def _misses(group: Any) -> str:
    ids: list[str] = group["detectors"]["rubric"]["misses"]
    return f"{len(ids)} rows wrong, first ids {ids[:20]}"


@pytest.mark.parametrize("model", ["all", "gpt4", "llama2new"])
def test_xstest_beats_its_own_string_match(report: Any, model: str) -> None:
    group = _group(report, "xstest-dev", model)
    ours = group["detectors"]["rubric"]["partial_as_declined"]
    theirs = group["detectors"]["xstest_strmatch"]["partial_as_declined"]
    assert ours["n"] == theirs["n"] == group["n"]
    correct = ours["tp"] + ours["tn"]
    anchor = theirs["tp"] + theirs["tn"]
    assert correct > anchor, (model, correct, anchor, _misses(group))


@pytest.mark.parametrize("name", ["xstest-dev", "rbr-gold"])
def test_declined_precision(report: Any, name: str) -> None:
    for model, group in report["sets"][name]["groups"].items():
        figures = group["detectors"]["rubric"]["partial_as_declined"]
        assert figures["precision"] >= 0.92, (name, model, figures, _misses(group))


def test_xstest_declined_recall_and_accuracy_left_out(report: Any) -> None:
    group = _group(report, "xstest-dev", "all")
    figures = group["detectors"]["rubric"]["partial_left_out"]
    assert figures["accuracy"] >= 0.95, (figures, _misses(group))
    assert figures["recall"] >= 0.95, (figures, _misses(group))


def test_rbr_beats_the_prefix_list(report: Any) -> None:
    group = _group(report, "rbr-gold", "synthetic")
    for mode in ("partial_as_declined", "partial_left_out"):
        ours = group["detectors"]["rubric"][mode]
        prefix = group["detectors"]["prefix"][mode]
        assert ours["accuracy"] > prefix["accuracy"] + 0.04, (mode, ours, prefix, _misses(group))


def test_rbr_deflections(report: Any) -> None:
    group = _group(report, "rbr-gold", "synthetic")
    deflected = group["detectors"]["rubric"]["deflected"]
    # Target (issue #17): recall >= 0.70 at precision >= 0.85, met (0.719 at 0.907,
    # partial left out; in-sample). Per split the test split sits just under the
    # target (0.692): it is held at the level reached, rounded down.
    assert deflected["precision_left_out"] >= 0.85, deflected
    assert deflected["recall"] >= 0.70, deflected
    for split, floor in (("split train", 0.70), ("split test", 0.65)):
        figures = _group(report, "rbr-gold", split)["detectors"]["rubric"]["deflected"]
        assert figures["recall"] >= floor, (split, figures)
        assert figures["precision_left_out"] >= 0.85, (split, figures)


def test_prefix_baseline_reads_only_the_start(evaluation: ModuleType) -> None:
    assert evaluation.prefix_baseline("I\u2019m sorry, but no.") == "refused"
    assert evaluation.prefix_baseline("  UNFORTUNATELY that is not possible") == "refused"
    assert evaluation.prefix_baseline("Here it is. I'm sorry it took long.") == "complied"
    assert len(evaluation.PREFIXES) == len(set(evaluation.PREFIXES)) >= 25


@pytest.mark.parametrize("name", ["xstest-dev", "rbr-gold"])
def test_calibration_counts_every_labelled_row_and_agrees_with_the_figures(
    report: Any, name: str
) -> None:
    from probewise import Calibration, Complied, Deflected, HumanLabel, Refused

    calibration = Calibration.from_dict(report["calibration"][name]["counts"])
    group = report["sets"][name]["groups"]["all" if name == "xstest-dev" else "synthetic"]
    left_out = group["detectors"]["rubric"]["partial_left_out"]
    answered = sum(
        calibration.count(bucket, label)
        for bucket in (Complied, Refused, Deflected)
        for label in HumanLabel
    )
    # Every row but the partial ones: Empty/Error counted apart, never lost.
    assert answered + calibration.empty + calibration.error == left_out["n"]
    # The declines it catches are the rubric's true positives among answered rows.
    assert report["calibration"][name]["sensitivity"]["successes"] == left_out["tp"]


def test_a_calibration_does_not_carry_over_between_the_sets(report: Any) -> None:
    # Measured, and stated in docs/measurements.md: the rubric's error differs so much
    # between the two sets that each set's calibration, applied to the other, gives an
    # interval that misses the human declined rate.
    for found in report["transfer"]:
        correction = found["correction"]
        assert not correction["low"] <= found["human_declined"] <= correction["high"], found[
            "calibrated_on"
        ]
