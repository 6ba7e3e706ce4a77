"""A planted canary never leaves the library, through any channel."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import pickle
import traceback
import typing
import warnings

import attrs
import pytest

from probewise import (
    ArmTally,
    Completion,
    Complied,
    Deflected,
    Empty,
    Error,
    FinishReason,
    Outcome,
    Refused,
    Rubric,
    Rule,
    Sealed,
    SealedError,
    classify,
    compare_arms,
)
from probewise.responses import rules as rules_module
from probewise.responses.rules import compile_rule

CANARY = "zq-canary-7f3e9b"
TEXTS = [
    f"I can't help with that. {CANARY}",
    f"{CANARY} here is the answer",
    f"I'd recommend speaking with a doctor. {CANARY}",
    f"\u200b{CANARY}\u200b",
    CANARY,
]


class _Evil(str):
    """A str subclass whose methods raise with the canary in the message."""

    def casefold(self) -> str:
        raise RuntimeError(CANARY)

    def lower(self) -> str:
        raise RuntimeError(CANARY)

    def __getitem__(self, key: object) -> str:
        raise RuntimeError(CANARY)

    def __str__(self) -> str:
        raise RuntimeError(CANARY)


def _channels(value: object) -> list[str]:
    out = [repr(value), str(value)]
    try:
        out.append(json.dumps(attrs.asdict(value), default=repr))  # type: ignore[arg-type]
    except Exception as error:
        out.append(repr(error))
    out.append(repr(pickle.dumps(value)))
    return out


def _assert_clean(*items: str) -> None:
    for item in items:
        # Never show the text in a failure message: report only that it leaked.
        assert CANARY not in item, "canary leaked"


def _tb_text(error: BaseException) -> str:
    parts = ["".join(traceback.format_exception(error))]
    chain: BaseException | None = error
    while chain is not None:
        parts.append(repr(chain.args))
        tb = chain.__traceback__
        while tb is not None:
            for local in tb.tb_frame.f_locals.values():
                parts.append(repr(local))
            tb = tb.tb_next
        chain = chain.__cause__ or chain.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("finish", list(FinishReason))
def test_outcomes_and_tallies_carry_no_text(
    text: str,
    finish: FinishReason,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger().setLevel(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcomes = [
            classify(text),
            classify(Sealed(text)),
            classify(Completion(text, finish)),
            classify(Completion(Sealed(text), finish), Rubric.default()),
            classify(RuntimeError(text)),
            classify(_Evil(text)),
            classify(Completion(_Evil(text))),
        ]
    tally = ArmTally.of(outcomes)
    verdict = compare_arms(tally, tally)
    for value in [*outcomes, tally, verdict, tally.rate(Complied)]:
        _assert_clean(*_channels(value))
    _assert_clean(json.dumps(tally.to_dict()), json.dumps(verdict.to_dict()), verdict.summary())
    _assert_clean(*(str(w.message) for w in caught))
    _assert_clean(caplog.text, *(r.getMessage() for r in caplog.records))
    captured = capsys.readouterr()
    _assert_clean(captured.out, captured.err)


def test_sealed_dunders_refuse_without_text() -> None:
    sealed = Sealed(CANARY)
    completion = Completion(CANARY)
    _assert_clean(repr(sealed), repr(completion))
    assert repr(sealed) == f"Sealed(<{len(CANARY)} chars>)"
    attempts = [
        lambda: str(sealed),
        lambda: f"{sealed}",
        lambda: format(sealed, ""),
        lambda: "%s" % sealed,  # noqa: UP031
        lambda: pickle.dumps(sealed),
        lambda: pickle.dumps(completion),
        lambda: copy.copy(sealed),
        lambda: copy.deepcopy(sealed),
        lambda: sealed == sealed,
        lambda: sealed != "x",
        lambda: hash(sealed),
        lambda: {sealed},
        lambda: json.dumps(sealed),
    ]
    for attempt in attempts:
        with pytest.raises((SealedError, TypeError)) as info:
            attempt()
        _assert_clean(_tb_text(info.value))
    with pytest.raises(TypeError):

        class _Sub(Sealed):  # type: ignore[misc]
            pass


def test_logging_a_sealed_value_does_not_leak(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("probewise-test-leak")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        logger.warning("value %r", Sealed(CANARY))
        # Formatting with %s fails; logging reports it (pytest's capture handler re-raises).
        with contextlib.suppress(SealedError):
            logger.warning("value %s", Sealed(CANARY))
    finally:
        logger.removeHandler(handler)
    captured = capsys.readouterr()
    _assert_clean(stream.getvalue(), captured.out, captured.err)


def test_no_outcome_field_can_hold_a_str() -> None:
    allowed = {"bool", "tuple[Rule, ...]", "Rule | None", "ErrorKind", "type[BaseException] | None"}
    outcome_types = typing.get_args(Outcome)  # every member of the union classify returns
    assert set(outcome_types) == {Complied, Deflected, Refused, Empty, Error}
    for cls in outcome_types:
        for field in attrs.fields(cls):
            assert field.type in allowed, (cls.__name__, field.name, field.type)
            assert "str" not in str(field.type)


class Boom(Exception):
    pass


def test_exception_raised_while_classifying_is_dropped() -> None:
    class _ExplodingPattern:
        groups = 0
        pattern = "x"

        def search(self, *_args: object, **_kwargs: object) -> None:
            raise Boom(CANARY)

    rule = Rule("explodes", "x")
    compile_rule(rule)  # cached for the rule's lifetime; then its pattern is replaced
    rules_module._COMPILED[id(rule)] = _ExplodingPattern()  # type: ignore[assignment]
    rubric = Rubric(refusal=[rule])
    outcome = classify(f"text {CANARY}", rubric)
    assert outcome == Error(kind=outcome.kind, exception_type=Boom)  # type: ignore[union-attr]
    _assert_clean(*_channels(outcome))
    assert outcome.exception_type is Boom  # type: ignore[union-attr]


def test_deflected_rule_is_from_the_rubric() -> None:
    rubric = Rubric.default()
    outcome = classify(f"How about a poem instead? {CANARY}", rubric)
    assert isinstance(outcome, Deflected)
    assert any(outcome.rule is rule for rule in rubric.deflection)
