"""``probewise calibrate LABELS.jsonl --out calibration.json``: measure the rubric's
error on rows a person labelled (what it does: ``DESCRIPTION``, its ``--help``).

The rows' text goes to :func:`probewise.classify` and nowhere else: not to stdout,
stderr, the file written, or an error message (which names the file, the line and
the field, never a value).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from probewise.cli._jsonl import json_object, numbered_lines
from probewise.errors import ArgumentTypeValueError, InvalidInputError

if TYPE_CHECKING:
    from probewise.responses.calibration import Calibration, HumanLabel
    from probewise.responses.rubric import Rubric
    from probewise.responses.sealed import Completion
    from probewise.responses.stats import Proportion

HELP = "measure the rubric's error on labelled rows; write a calibration for arms"
DESCRIPTION = """``probewise calibrate``: the rubric's measured error on rows a person labelled.

LABELS is a JSONL file, one row a line: ``{"text": "...", "label": "complied"}``,
the label one of ``complied``, ``declined`` (a decline of any kind), ``refused`` or
``deflected`` (:class:`~probewise.HumanLabel`), and optionally ``"finish_reason"``:
``stop`` (the default), ``length`` or ``content_filter``. Each text is classified
with the default rubric, or with ``--rubric MODULE:NAME`` (a
:class:`~probewise.Rubric`, or a function that returns one, imported with the current
directory on the path).

It prints the counts (rubric bucket by human label), sensitivity and specificity per
label with Wilson intervals, and how many rows to label: for each row count (``--rows``,
and the rows given), the expected interval widths at the measured rates and the chance
that :meth:`~probewise.Calibration.correct` could not correct with such a sample. It
writes ``--out``: the counts only (:meth:`~probewise.Calibration.to_dict`), what
``probewise arms --calibration`` reads. No text of a row is printed or written, not
even in an error message.

Exit status: 0 when the file was written; 2 for bad input (one line on stderr).
"""
RAW_DESCRIPTION = True

# The row counts the planning table shows when --rows does not name them.
PLANNED_ROWS = (100, 200, 400, 800, 1600)
# Outcomes of a binomial count further than this many standard deviations from its
# mean are left out of the expectations (their weight is below 1e-12).
_SPREAD = 8.0


def read_labels(path: Path) -> Iterator[tuple[Completion, HumanLabel]]:
    """The rows of a labels file: one JSON object a line, ``{"text": str, "label":
    "complied" | "declined" | "refused" | "deflected"}`` and optionally
    ``"finish_reason": "stop" | "length" | "content_filter"``; blank lines skipped."""
    from probewise.responses.calibration import HumanLabel
    from probewise.responses.outcome import FinishReason
    from probewise.responses.sealed import Completion

    labels = {label.value: label for label in HumanLabel}
    reasons = {reason.value: reason for reason in FinishReason}
    for number, line in numbered_lines(path):  # a FIFO or a device is refused, never read
        fields = json_object(path, number, line)
        text, label = fields.get("text"), fields.get("label")
        reason = fields.get("finish_reason", "stop")
        if not isinstance(text, str):
            raise InvalidInputError(f'{path}:{number}: "text" must be a string')
        if not isinstance(label, str) or label not in labels:
            raise InvalidInputError(f'{path}:{number}: "label" must be one of {", ".join(labels)}')
        if not isinstance(reason, str) or reason not in reasons:
            raise InvalidInputError(
                f'{path}:{number}: "finish_reason" must be one of {", ".join(reasons)}'
            )
        yield Completion(text, finish_reason=reasons[reason]), labels[label]


def load_rubric(spec: str | None) -> Rubric:
    """The rubric ``MODULE:NAME`` names (a :class:`~probewise.Rubric`, or a function of
    no arguments that returns one), imported with the current directory on the path;
    the default rubric for None."""
    from probewise.responses.rubric import Rubric

    if spec is None:
        return Rubric.default()
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise InvalidInputError(f"--rubric {spec!r}: give MODULE:NAME (e.g. my_rubrics:STRICT)")
    added = "" not in sys.path
    if added:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        # a value: the type named is the error's, not the argument's
        raise InvalidInputError(
            f"--rubric: cannot import {module_name}: {type(error).__name__}"
        ) from None
    finally:
        if added:
            sys.path.remove("")
    found: object = getattr(module, name, None)
    if not isinstance(found, Rubric) and callable(found):
        try:
            found = found()
        except Exception as error:
            # a value: the type named is the error's, not the argument's
            raise InvalidInputError(f"--rubric: {spec}() raised {type(error).__name__}") from None
    if not isinstance(found, Rubric):
        raise ArgumentTypeValueError(
            f"--rubric: {spec} is not a Rubric (got {type(found).__name__})"
        )
    return found


class Planned(NamedTuple):
    """What labelling ``rows`` rows would give, at the measured rates."""

    rows: int
    sensitivity_width: float
    specificity_width: float
    cannot_correct: float
    """The chance that :meth:`~probewise.Calibration.correct` would raise
    CalibrationError (the rubric's Youden J interval reaching 0) on such a sample."""


def _pmf(trials: int, rate: float) -> list[tuple[int, float]]:
    """The binomial distribution's weights, where they are not negligible."""
    if trials == 0:
        return [(0, 1.0)]
    if rate <= 0.0 or rate >= 1.0:
        return [(round(rate * trials), 1.0)]
    spread = _SPREAD * math.sqrt(trials * rate * (1.0 - rate)) + 1.0
    low = max(0, math.floor(trials * rate - spread))
    high = min(trials, math.ceil(trials * rate + spread))
    log_p, log_q = math.log(rate), math.log1p(-rate)
    whole = math.lgamma(trials + 1)
    return [
        (
            k,
            math.exp(
                whole
                - math.lgamma(k + 1)
                - math.lgamma(trials - k + 1)
                + k * log_p
                + (trials - k) * log_q
            ),
        )
        for k in range(low, high + 1)
    ]


def cannot_correct(sensitivity: Proportion, specificity: Proportion) -> bool:
    """Whether :meth:`~probewise.Calibration.correct` refuses a calibration with these
    rates: Newcombe's interval of Youden's J (sensitivity + specificity - 1) reaches 0."""
    se, sp = sensitivity, specificity
    j = se.estimate + sp.estimate - 1.0
    return j - math.hypot(se.estimate - se.low, sp.estimate - sp.low) <= 0.0


def plan(
    rows: int, sensitivity: float, specificity: float, declined_share: float, confidence: float
) -> Planned:
    """The expected Wilson interval widths of sensitivity and specificity, and the
    chance that the calibration cannot correct, for ``rows`` labelled rows of which a
    ``declined_share`` are declines (rounded: the classes' sizes are taken as fixed),
    when the rubric's true rates are the ones given. Exact sums over the binomial
    counts; the test for "cannot correct" is the one ``Calibration.correct`` applies
    (Newcombe's interval of Youden's J reaching 0)."""
    from probewise.responses.stats import Proportion

    declines = round(rows * declined_share)
    answers = rows - declines
    sens = [
        (k, w, Proportion.wilson(k, declines, confidence=confidence))
        for k, w in _pmf(declines, sensitivity)
    ]
    spec = [
        (k, w, Proportion.wilson(k, answers, confidence=confidence))
        for k, w in _pmf(answers, specificity)
    ]
    sensitivity_width = sum(w * (p.high - p.low) for _, w, p in sens) if declines else 1.0
    specificity_width = sum(w * (p.high - p.low) for _, w, p in spec) if answers else 1.0
    if not declines or not answers:
        return Planned(rows, sensitivity_width, specificity_width, 1.0)
    cannot = sum(
        w_se * w_sp for _, w_se, se in sens for _, w_sp, sp in spec if cannot_correct(se, sp)
    )
    return Planned(rows, sensitivity_width, specificity_width, min(1.0, cannot))


def _figures(calibration: Calibration, confidence: float) -> dict[str, dict[str, Proportion]]:
    """Sensitivity and specificity per label: every decline (the binary view), and
    REFUSED and DEFLECTED where some rows carry those labels."""
    from probewise.responses.calibration import HumanLabel

    found: dict[str, dict[str, Proportion]] = {}
    for label in (HumanLabel.DECLINED, HumanLabel.REFUSED, HumanLabel.DEFLECTED):
        sensitivity = calibration.recall(label, confidence=confidence)
        if label is not HumanLabel.DECLINED and sensitivity.trials == 0:
            continue
        found[label.value] = {
            "sensitivity": sensitivity,
            "specificity": calibration.specificity(label, confidence=confidence),
        }
    return found


def _shown(proportion: Proportion) -> str:
    if proportion.trials == 0:
        return "- (no rows)"
    return (
        f"{proportion.estimate:.3f} [{proportion.low:.3f}, {proportion.high:.3f}] "
        f"({proportion.successes}/{proportion.trials})"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("labels", type=Path, metavar="LABELS", help="JSONL: text and label")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="write the calibration here"
    )
    parser.add_argument(
        "--rubric", metavar="MODULE:NAME", help="a Rubric (or a function returning one)"
    )
    parser.add_argument("--rows", type=int, nargs="+", metavar="N", help="row counts to plan for")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="interval level (default 0.95)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from probewise.responses.calibration import Calibration, HumanLabel
    from probewise.responses.classifier import classify

    confidence: float = args.confidence
    if not 0.0 < confidence < 1.0:
        raise InvalidInputError(f"--confidence must be between 0 and 1, got {confidence}")
    planned_rows: list[int] = list(args.rows or PLANNED_ROWS)
    if any(rows < 2 for rows in planned_rows):
        raise InvalidInputError("--rows must be 2 or more")
    rubric = load_rubric(args.rubric)
    calibration = Calibration.of(
        (classify(completion, rubric), label) for completion, label in read_labels(args.labels)
    )
    if calibration.n == 0:
        raise InvalidInputError(f"{args.labels} holds no rows")
    out: Path = args.out
    try:
        out.write_text(json.dumps(calibration.to_dict(), indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        # a value: the type named is the error's, not the argument's
        raise InvalidInputError(f"cannot write {out}: {type(error).__name__}") from None
    figures = _figures(calibration, confidence)
    declined = figures[HumanLabel.DECLINED.value]
    se, sp = declined["sensitivity"], declined["specificity"]
    share = se.trials / calibration.labelled if calibration.labelled else 0.0
    planning = (
        [
            plan(rows, se.estimate, sp.estimate, share, confidence)
            for rows in sorted({*planned_rows, calibration.labelled} - {0})
        ]
        if se.trials and sp.trials
        else []
    )
    document: dict[str, object] = {
        "rows": calibration.n,
        "labelled": calibration.labelled,
        "empty": calibration.empty,
        "error": calibration.error,
        "rubric": args.rubric or "default",
        "confidence": confidence,
        "out": str(out),
        "counts": calibration.to_dict(),
        "labels": {
            label: {name: value.to_dict() for name, value in pair.items()}
            for label, pair in figures.items()
        },
        "youden": None if math.isnan(calibration.youden) else calibration.youden,
        "declined_share": share,
        "planning": [row._asdict() for row in planning],
    }
    if args.json:
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    _print_report(calibration, figures, planning, args, share)
    return 0


def _print_report(
    calibration: Calibration,
    figures: dict[str, dict[str, Proportion]],
    planning: list[Planned],
    args: argparse.Namespace,
    share: float,
) -> None:
    from probewise.responses.calibration import HumanLabel
    from probewise.responses.outcome import Complied, Deflected, Refused

    print(
        f"{calibration.n} rows, rubric {args.rubric or 'default'}: {calibration.labelled} "
        f"answers counted, {calibration.empty} Empty and {calibration.error} Error left out"
    )
    print()
    labels = list(HumanLabel)
    print("| rubric \\ human | " + " | ".join(label.value for label in labels) + " |")
    print("|---|" + "---:|" * len(labels))
    buckets = ((Complied, "Complied"), (Refused, "Refused"), (Deflected, "Deflected"))
    for bucket, name in buckets:
        counts = " | ".join(str(calibration.count(bucket, label)) for label in labels)
        print(f"| {name} | {counts} |")
    print()
    level = f"{100 * args.confidence:g}%"
    print(f"| label | sensitivity [{level}] | specificity [{level}] |")
    print("|---|---|---|")
    for label, pair in figures.items():
        print(f"| {label} | {_shown(pair['sensitivity'])} | {_shown(pair['specificity'])} |")
    youden = calibration.youden
    print()
    print(f"Youden's J (declined): {'-' if math.isnan(youden) else f'{youden:.3f}'}")
    print()
    if planning:
        print(
            f"How many rows to label: expected {level} interval width at the measured "
            f"rates, {100 * share:.0f}% of rows declines"
        )
        print()
        print("| rows | sensitivity width | specificity width | correct() cannot correct |")
        print("|---:|---:|---:|---:|")
        for row in planning:
            print(
                f"| {row.rows} | {row.sensitivity_width:.3f} | {row.specificity_width:.3f} "
                f"| {100 * row.cannot_correct:.1f}% |"
            )
        print()
    else:
        print("How many rows to label: label some declines and some answers first.")
        print()
    print(f"Wrote {args.out} (counts only): probewise arms ... --calibration {args.out}")
