"""A second detector beside the rules: Judge, JudgeVerdict, judge_completion, and the
agreement of rules and judge over an arm (JudgeAgreement); TransformersJudge, a local
sequence-classification model as a judge.

The judge reads the completion's text through :func:`probewise.responses.classifier.read_completion`
(the classifier stays the only module that opens a :class:`~probewise.Sealed`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast, final

import attrs

from probewise import _json
from probewise._extras import Extra, requires
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses.classifier import read_completion
from probewise.responses.sealed import Completion, Sealed
from probewise.responses.stats import OutcomeBucket

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["Judge", "JudgeAgreement", "JudgeVerdict", "TransformersJudge", "judge_completion"]


@enum.unique
class JudgeVerdict(enum.Enum):
    """What a second detector (a :class:`Judge`) says of a completion: never text."""

    COMPLIED = "complied"
    DEFLECTED = "deflected"
    REFUSED = "refused"


class Judge(Protocol):
    """A second detector beside the rules: text in, a :class:`JudgeVerdict` out.

    It is called from :func:`judge_completion`, which has the :class:`Sealed` opened
    for it by the classifier's module (the only place that opens one); what the judge
    does with the text is the caller's, so it must not print or log it.
    """

    def __call__(self, text: str, /) -> JudgeVerdict: ...


def judge_completion(
    completion: str | Completion | Sealed | BaseException, judge: Judge
) -> JudgeVerdict | None:
    """The judge's verdict, or ``None`` when there is none to give.

    ``None`` for an exception, a non-text, a provider-filtered or blank completion,
    or a judge that raised or returned something other than a :class:`JudgeVerdict`
    (its exception is dropped: its message might quote the text). Never raises an
    ``Exception``; a ``KeyboardInterrupt`` (or other ``BaseException``) from the judge
    is raised again as a fresh instance of its class holding no text.
    """
    try:
        verdict = read_completion(completion, judge)
    except BaseException:  # a fresh one holding no text: and this frame drops the completion
        del completion
        raise
    return verdict if isinstance(verdict, JudgeVerdict) else None


def _cells(
    value: Mapping[tuple[OutcomeBucket, JudgeVerdict], int],
) -> Mapping[tuple[OutcomeBucket, JudgeVerdict], int]:
    from types import MappingProxyType

    for key, count in value.items():
        if not (isinstance(cast("object", key), tuple) and len(key) == 2):
            raise InvalidInputError("cells are keyed by (OutcomeBucket, JudgeVerdict)")
        bucket, verdict = cast("tuple[object, object]", key)
        if not isinstance(bucket, OutcomeBucket) or not isinstance(verdict, JudgeVerdict):
            raise InvalidInputError("cells are keyed by (OutcomeBucket, JudgeVerdict)")
        if isinstance(count, bool) or not isinstance(cast("object", count), int):
            raise ArgumentTypeError(f"cell counts must be ints, got {type(count).__name__}")
        if count < 0:
            raise InvalidInputError("cell counts must be >= 0")
    return MappingProxyType(dict(value))


_AGREES = {
    JudgeVerdict.COMPLIED: OutcomeBucket.COMPLIED,
    JudgeVerdict.DEFLECTED: OutcomeBucket.DEFLECTED,
    JudgeVerdict.REFUSED: OutcomeBucket.REFUSED,
}


def _dump_cells(value: object) -> _json.JsonValue:
    """``cells`` as ``[{"rules": bucket, "judge": verdict, "count": n}]``, sorted."""
    cells = cast("Mapping[tuple[OutcomeBucket, JudgeVerdict], int]", value)
    return [
        {"rules": b.value, "judge": v.value, "count": n}
        for (b, v), n in sorted(
            cells.items(), key=lambda item: (item[0][0].value, item[0][1].value)
        )
    ]


def _load_cells(value: _json.JsonValue) -> dict[tuple[OutcomeBucket, JudgeVerdict], object]:
    """The inverse of :func:`_dump_cells` (the counts are checked by the field's converter)."""
    if not isinstance(value, list):
        raise InvalidInputError("JudgeAgreement.cells must be an array")
    cells: dict[tuple[OutcomeBucket, JudgeVerdict], object] = {}
    for cell in value:
        if not isinstance(cell, dict) or set(cell) != {"rules", "judge", "count"}:
            raise InvalidInputError("JudgeAgreement.cells must hold {rules, judge, count} objects")
        try:
            key = (OutcomeBucket(cell["rules"]), JudgeVerdict(cell["judge"]))
        except ValueError:
            raise InvalidInputError(
                "JudgeAgreement.cells: unknown rules bucket or judge verdict"
            ) from None
        cells[key] = cell["count"]
    return cells


@_json.shaped(
    _json.Shape(
        after={"judged": "unjudged", "agree": "judged", "disagree": "agree"},
        codecs={"cells": _json.Codec(dump=_dump_cells, load=_load_cells)},
    )
)
@final
@attrs.frozen(kw_only=True)
class JudgeAgreement:
    """Rules against judge over one arm: counts per (rules' bucket, judge's verdict).

    ``unjudged`` counts completions the judge gave no verdict on (generation
    errors, blanks, provider filters, a judge that failed).
    """

    cells: Mapping[tuple[OutcomeBucket, JudgeVerdict], int] = attrs.field(converter=_cells)
    unjudged: int = 0

    def count(self, bucket: OutcomeBucket, verdict: JudgeVerdict) -> int:
        """Completions the rules put in ``bucket`` and the judge called ``verdict``."""
        return self.cells.get((bucket, verdict), 0)

    @property
    def judged(self) -> int:
        """Completions with a verdict from both."""
        return sum(self.cells.values())

    @property
    def agree(self) -> int:
        """Completions where the judge's verdict is the rules' bucket."""
        return sum(n for (b, v), n in self.cells.items() if _AGREES[v] is b)

    @property
    def disagree(self) -> int:
        """Completions where they differ."""
        return self.judged - self.agree

    @property
    def missed_refusals(self) -> int:
        """The judge says refused; the rules said complied or deflected."""
        return self.count(OutcomeBucket.COMPLIED, JudgeVerdict.REFUSED) + self.count(
            OutcomeBucket.DEFLECTED, JudgeVerdict.REFUSED
        )

    @property
    def missed_declines(self) -> int:
        """The judge says deflected or refused; the rules said complied."""
        return self.count(OutcomeBucket.COMPLIED, JudgeVerdict.DEFLECTED) + self.count(
            OutcomeBucket.COMPLIED, JudgeVerdict.REFUSED
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return _json.to_dict(self)


class TransformersJudge:
    """A local sequence-classification model as a :class:`Judge`.

    ``label_map`` maps the model's label names (``config.id2label``) to verdicts;
    a predicted label it does not map is a failed judgement (no verdict). Texts
    are truncated to ``max_length`` tokens.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        label_map: Mapping[str, JudgeVerdict],
        max_length: int = 512,
    ) -> None:
        if not label_map:
            raise InvalidInputError("label_map is empty: map the model's labels to verdicts")
        self.model: PreTrainedModel = model
        self.tokenizer: PreTrainedTokenizerBase = tokenizer
        self.label_map: dict[str, JudgeVerdict] = dict(label_map)
        self.max_length: int = max_length

    def __repr__(self) -> str:
        return (
            f"TransformersJudge(model={type(self.model).__name__}, labels={sorted(self.label_map)})"
        )

    def __call__(self, text: str, /) -> JudgeVerdict:
        with requires(Extra.TORCH, "TransformersJudge"):
            import torch

        encoded = self.tokenizer(
            text, return_tensors="pt", truncation=True, max_length=self.max_length
        )
        device = next(self.model.parameters()).device
        pairs = cast("dict[str, torch.Tensor]", dict(encoded))
        inputs = {k: v.to(device) for k, v in pairs.items()}
        with torch.no_grad():
            logits = cast("torch.Tensor", cast("_Classifies", self.model)(**inputs).logits)
        index = int(logits[0].argmax().item())
        id2label = cast("Mapping[int, str]", getattr(self.model.config, "id2label", {}))
        label = id2label.get(index, str(index))
        if label not in self.label_map:
            raise InvalidInputError(f"label {label!r} is not in label_map")
        return self.label_map[label]


class _Output(Protocol):
    @property
    def logits(self) -> object: ...


class _Classifies(Protocol):
    def __call__(self, **kwargs: object) -> _Output: ...
