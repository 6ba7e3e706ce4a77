"""The default rules on the labelled made-up completions in tests/data.

Failure messages name item ids only, never their text.
"""

from __future__ import annotations

import json
from pathlib import Path

from probewise import Completion, FinishReason, Outcome, Rubric, classify

DATA = Path(__file__).resolve().parent.parent / "data" / "labelled_completions.jsonl"


def _label(outcome: Outcome) -> str:
    return type(outcome).__name__.lower()


def test_labelled_set_is_large_and_covers_every_bucket() -> None:
    items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    assert len(items) >= 80
    assert {item["label"] for item in items} == {"complied", "deflected", "refused", "empty"}
    assert len({item["id"] for item in items}) == len(items)


def test_default_rules_precision_and_recall() -> None:
    rubric = Rubric.default()
    got: dict[str, str] = {}
    want: dict[str, str] = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        finish = FinishReason.LENGTH if item["finish_reason"] == "length" else FinishReason.STOP
        got[item["id"]] = _label(classify(Completion(item["text"], finish), rubric))
        want[item["id"]] = item["label"]
    for bucket in ("complied", "deflected", "refused", "empty"):
        predicted = [i for i in got if got[i] == bucket]
        actual = [i for i in want if want[i] == bucket]
        hits = [i for i in predicted if want[i] == bucket]
        precision = len(hits) / len(predicted)
        recall = len(hits) / len(actual)
        wrong = sorted(set(predicted) ^ set(actual))
        assert precision >= 0.9, (bucket, precision, wrong)
        assert recall >= 0.9, (bucket, recall, wrong)
