"""Evaluate ``Rubric.default()`` against the hand-labelled completions.

Usage::

    python scripts/eval_rubric.py [PATH] [--json]

Prints per-bucket support, precision, recall and F1, overall accuracy, a confusion
matrix and the ids of misclassified items. Completion text is never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TypedDict

import probewise

DEFAULT_PATH = (
    Path(__file__).resolve().parent.parent / "tests" / "data" / "labelled_completions.jsonl"
)

BUCKETS: tuple[str, ...] = ("complied", "deflected", "refused", "empty")
PREDICTED: tuple[str, ...] = (*BUCKETS, "error")


class Item(TypedDict):
    id: str
    label: str
    finish_reason: str
    text: str


class BucketStats(TypedDict):
    support: int
    predicted: int
    precision: float
    recall: float
    f1: float


class Miss(TypedDict):
    id: str
    expected: str
    got: str


class Report(TypedDict):
    path: str
    total: int
    accuracy: float
    buckets: dict[str, BucketStats]
    confusion: dict[str, dict[str, int]]
    misclassified: list[Miss]


def load(path: Path) -> list[Item]:
    items: list[Item] = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            label = str(raw["label"])
            if label not in BUCKETS:
                raise SystemExit(f"{path}:{lineno}: unknown label {label!r}")
            items.append(
                Item(
                    id=str(raw["id"]),
                    label=label,
                    finish_reason=str(raw.get("finish_reason", "stop")),
                    text=str(raw["text"]),
                )
            )
    return items


def outcome_label(outcome: object) -> str:
    if isinstance(outcome, probewise.Complied):
        return "complied"
    if isinstance(outcome, probewise.Deflected):
        return "deflected"
    if isinstance(outcome, probewise.Refused):
        return "refused"
    if isinstance(outcome, probewise.Empty):
        return "empty"
    if isinstance(outcome, probewise.Error):
        return "error"
    raise TypeError(f"unexpected outcome type {type(outcome).__name__}")


def classify_all(items: list[Item]) -> list[str]:
    rubric = probewise.Rubric.default()
    got: list[str] = []
    for item in items:
        reason = (
            probewise.FinishReason.LENGTH
            if item["finish_reason"] == "length"
            else probewise.FinishReason.STOP
        )
        completion = probewise.Completion(item["text"], finish_reason=reason)
        got.append(outcome_label(probewise.classify(completion, rubric)))
    return got


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def evaluate(path: Path, items: list[Item], got: list[str]) -> Report:
    confusion: dict[str, dict[str, int]] = {e: dict.fromkeys(PREDICTED, 0) for e in BUCKETS}
    misses: list[Miss] = []
    for item, label in zip(items, got, strict=True):
        confusion[item["label"]][label] += 1
        if label != item["label"]:
            misses.append(Miss(id=item["id"], expected=item["label"], got=label))
    buckets: dict[str, BucketStats] = {}
    for bucket in BUCKETS:
        tp = confusion[bucket][bucket]
        support = sum(confusion[bucket].values())
        predicted = sum(confusion[e][bucket] for e in BUCKETS)
        precision = _ratio(tp, predicted)
        recall = _ratio(tp, support)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        buckets[bucket] = BucketStats(
            support=support, predicted=predicted, precision=precision, recall=recall, f1=f1
        )
    correct = sum(confusion[b][b] for b in BUCKETS)
    misses.sort(key=lambda m: (m["expected"], m["got"], m["id"]))
    return Report(
        path=str(path),
        total=len(items),
        accuracy=_ratio(correct, len(items)),
        buckets=buckets,
        confusion=confusion,
        misclassified=misses,
    )


def render_markdown(report: Report) -> str:
    lines: list[str] = [
        f"Items: {report['total']}  Accuracy: {report['accuracy']:.3f}",
        "",
        "| bucket | support | predicted | precision | recall | F1 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for bucket, s in report["buckets"].items():
        lines.append(
            f"| {bucket} | {s['support']} | {s['predicted']} | {s['precision']:.3f} "
            f"| {s['recall']:.3f} | {s['f1']:.3f} |"
        )
    lines += [
        "",
        "Confusion matrix (rows: expected, columns: got)",
        "",
        "| expected \\ got | " + " | ".join(PREDICTED) + " |",
        "|---|" + "---:|" * len(PREDICTED),
    ]
    for expected, row in report["confusion"].items():
        lines.append(f"| {expected} | " + " | ".join(str(row[g]) for g in PREDICTED) + " |")
    lines += ["", f"Misclassified: {len(report['misclassified'])}"]
    groups: dict[tuple[str, str], list[str]] = {}
    for miss in report["misclassified"]:
        groups.setdefault((miss["expected"], miss["got"]), []).append(miss["id"])
    for (expected, got), ids in groups.items():
        lines.append(f"- expected {expected}, got {got} ({len(ids)}): {', '.join(ids)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    path: Path = args.path
    items = load(path)
    report = evaluate(path, items, classify_all(items))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
