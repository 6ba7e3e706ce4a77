"""What a checkpoint is bound to: a run's generator, rubric and prompts, by digest.

A run's identity (:class:`RunIdentity`) is the generator's description of itself
(``run_identity()``: the shipped generators name their server without user info,
their model and the settings that change an answer) and the rubric's fingerprint
(:func:`rubric_fingerprint`: every rule's id and pattern, the axes, the time limit
and the opening length). Each prompt's :func:`prompt_digest` travels in its own
journal record. ``probewise.responses._journal`` writes them and compares them on
resume.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from typing import TypeAlias, cast, final

import attrs

from probewise.responses.rubric import Rubric
from probewise.responses.rules import Rule

__all__ = [
    "RunIdentity",
    "Scalar",
    "differences",
    "digest",
    "generator_identity",
    "is_scalar",
    "prompt_digest",
    "rubric_fingerprint",
]

Scalar: TypeAlias = str | int | float | bool | None
"""A value in a run identity's generator description."""


def digest(data: bytes) -> str:
    """16 hex digits of ``data``'s SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def prompt_digest(prompt: object) -> str | None:
    """A prompt's digest: of its UTF-8 text, of bytes as they are, or of its canonical
    JSON; ``None`` for a prompt that is none of these (it is then not compared)."""
    if isinstance(prompt, str):
        return digest(b"s" + prompt.encode("utf-8", "surrogatepass"))
    if isinstance(prompt, bytes):
        return digest(b"b" + prompt)
    try:
        text = json.dumps(prompt, sort_keys=True, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return digest(b"j" + text.encode("ascii"))


def _rules(rules: Iterable[Rule]) -> list[list[str]]:
    return [[rule.id, rule.pattern] for rule in rules]


def rubric_fingerprint(rubric: Rubric) -> str:
    """A digest of everything in ``rubric`` that decides an outcome: its rules (ids and
    patterns, in order), its axes, its time limit, its opening length and whether it
    reads the model's own voice."""
    named = {f"{type(key).__name__}:{key!r}"[:200]: _rules(r) for key, r in rubric.axes.items()}
    axes = [[name, named[name]] for name in sorted(named)]
    document = {
        "refusal": _rules(rubric.refusal),
        "deflection": _rules(rubric.deflection),
        "preamble": _rules(rubric.preamble),
        "axes": axes,
        "timeout": rubric.timeout,
        "opening_chars": rubric.opening_chars,
    }
    # Named only where set, so a rubric without them keeps the digest it had before
    # either existed (a checkpoint made with it still resumes).
    if rubric.later:
        document["later"] = _rules(rubric.later)
    if not rubric.own_voice:
        document["own_voice"] = False
    return digest(json.dumps(document, sort_keys=True, ensure_ascii=True).encode("ascii"))


def generator_identity(generate: object) -> dict[str, Scalar]:
    """What ``generate`` says about itself: its ``run_identity()`` (the shipped
    generators have one; a caller's may), a dict of JSON scalars. Empty for a
    generator without one (or whose answer is not such a dict): nothing is known
    about it, so nothing is compared."""
    describe: object = getattr(generate, "run_identity", None)
    if not callable(describe):
        return {}
    described: object = describe()
    if not isinstance(described, dict):
        return {}
    items = cast("dict[object, object]", described).items()
    if not all(isinstance(k, str) and is_scalar(v) for k, v in items):
        return {}
    return cast("dict[str, Scalar]", dict(items))


def is_scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)  # JSON has no NaN or infinity
    return value is None or isinstance(value, str | int | bool)


@final
@attrs.frozen(kw_only=True)
class RunIdentity:
    """What a checkpoint is bound to: the generator's description and the rubric's
    fingerprint (each prompt's digest travels in its own record)."""

    generator: tuple[tuple[str, Scalar], ...]
    rubric: str

    @classmethod
    def of(cls, generate: object, rubric: Rubric, *, stops: bool = False) -> RunIdentity:
        """The identity of a run of ``generate`` under ``rubric`` (``stops``: it stops
        replies once decided, which marks their outcomes so)."""
        described = generator_identity(generate)
        if stops:
            described["stop_when_decided"] = True
        return cls(generator=tuple(sorted(described.items())), rubric=rubric_fingerprint(rubric))

    def to_json(self) -> dict[str, object]:
        return {"generator": dict(self.generator), "rubric": self.rubric}


def _shown(value: Scalar) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


def differences(stored: RunIdentity, current: RunIdentity) -> list[str]:
    """What differs between a checkpoint's identity and this run's, in words."""
    out: list[str] = []
    old, new = dict(stored.generator), dict(current.generator)
    for key in sorted(old.keys() | new.keys()):
        if key not in old:
            out.append(f"the generator's {key} is new ({_shown(new[key])})")
        elif key not in new:
            out.append(f"the generator's {key} is gone (was {_shown(old[key])})")
        elif old[key] != new[key] or type(old[key]) is not type(new[key]):
            out.append(f"the generator's {key} was {_shown(old[key])}, now {_shown(new[key])}")
    if stored.rubric != current.rubric:
        out.append("the rubric differs (its outcomes cannot be classified again: no text is kept)")
    return out
