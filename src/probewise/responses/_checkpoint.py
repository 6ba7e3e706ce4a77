"""The checkpoint file of a run: outcomes by prompt id, never text.

A JSON document ``{"format": "probewise.arm-checkpoint/1", "outcomes": {id: record}}``
where a record names the bucket, the truncation flag, and the rule ids (resolved
against the rubric on resume), the provider flag and the error kind. Prompt ids must
be strings or ints (JSON keys; ints are written with a type tag so they come back as
ints). It is rewritten atomically (a temporary file in the same folder, then
``os.replace``) after every batch, so a crash loses no counted outcome.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import cast

from probewise.errors import InvalidInputError
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    Outcome,
    Refused,
)
from probewise.responses.rubric import Rubric, Rule

FORMAT = "probewise.arm-checkpoint/1"


def _key(prompt_id: Hashable) -> str:
    if isinstance(prompt_id, bool) or not isinstance(prompt_id, str | int):
        raise InvalidInputError(
            f"a checkpoint needs prompt ids that are str or int, got a {type(prompt_id).__name__}"
        )
    return f"i:{prompt_id}" if isinstance(prompt_id, int) else f"s:{prompt_id}"


def _unkey(key: str) -> Hashable:
    tag, _, rest = key.partition(":")
    if tag == "i":
        return int(rest)
    if tag == "s":
        return rest
    raise InvalidInputError(f"checkpoint key {key!r} is not tagged i: or s:")


def _record(outcome: Outcome) -> dict[str, object]:
    match outcome:
        case Complied(truncated=truncated, evidence=evidence):
            return {"b": "complied", "t": truncated, "ev": [r.id for r in evidence]}
        case Deflected(truncated=truncated, rule=rule):
            return {"b": "deflected", "t": truncated, "r": None if rule is None else rule.id}
        case Refused(truncated=truncated, rule=rule, by_provider=by_provider):
            return {
                "b": "refused",
                "t": truncated,
                "r": None if rule is None else rule.id,
                "p": by_provider,
            }
        case Empty(truncated=truncated):
            return {"b": "empty", "t": truncated}
        case Error(kind=kind):
            return {"b": "error", "k": kind.value}


def _find(rules: tuple[Rule, ...], rule_id: object) -> Rule | None:
    if rule_id is None:
        return None
    for rule in rules:
        if rule.id == rule_id:
            return rule
    raise InvalidInputError(
        f"the checkpoint names rule {rule_id!r}, which this rubric does not hold: "
        "resume with the rubric the run started with"
    )


def _outcome(record: Mapping[str, object], rubric: Rubric) -> Outcome:
    bucket = record.get("b")
    truncated = record.get("t") is True
    if bucket == "complied":
        axis_rules = tuple(rule for rules in rubric.axes.values() for rule in rules)
        ids = record.get("ev")
        evidence = (
            [_find(axis_rules, i) for i in cast("list[object]", ids)]
            if isinstance(ids, list)
            else []
        )
        return Complied(truncated=truncated, evidence=tuple(r for r in evidence if r is not None))
    if bucket == "deflected":
        return Deflected(truncated=truncated, rule=_find(rubric.deflection, record.get("r")))
    if bucket == "refused":
        return Refused(
            truncated=truncated,
            rule=_find(rubric.refusal, record.get("r")),
            by_provider=record.get("p") is True,
        )
    if bucket == "empty":
        return Empty(truncated=truncated)
    if bucket == "error":
        try:
            kind = ErrorKind(record.get("k"))
        except ValueError:
            raise InvalidInputError(
                f"checkpoint error kind {record.get('k')!r} is unknown"
            ) from None
        return Error(kind=kind)
    raise InvalidInputError(f"checkpoint bucket {bucket!r} is unknown")


def load(path: Path, rubric: Rubric) -> dict[Hashable, Outcome]:
    """Outcomes by prompt id from a checkpoint (empty when the file does not exist)."""
    if not path.exists():
        return {}
    try:
        document: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"cannot read the checkpoint {path}: {error}") from None
    if not isinstance(document, dict):
        raise InvalidInputError(f"{path} is not a probewise checkpoint")
    doc = cast("dict[str, object]", document)
    if doc.get("format") != FORMAT:
        raise InvalidInputError(f"{path} is not a probewise checkpoint ({FORMAT})")
    records = doc.get("outcomes")
    if not isinstance(records, dict):
        raise InvalidInputError(f"{path}: no outcomes")
    out: dict[Hashable, Outcome] = {}
    for key, record in cast("dict[str, object]", records).items():
        if not isinstance(record, dict):
            raise InvalidInputError(f"{path}: record {key!r} is not an object")
        out[_unkey(key)] = _outcome(cast("dict[str, object]", record), rubric)
    return out


def save(path: Path, outcomes: Mapping[Hashable, Outcome]) -> None:
    """Write the checkpoint atomically."""
    document = {"format": FORMAT, "outcomes": {_key(k): _record(v) for k, v in outcomes.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
