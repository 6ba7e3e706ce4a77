"""OpenAICompatibleGenerator against a real HTTP server on 127.0.0.1 (tests/_http_server.py)."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import logging
import random
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _http_server import CANARY, base_url, serving
from probewise import (
    Completion,
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    OpenAICompatibleGenerator,
    Refused,
    classify,
    run_arm,
    run_paired,
)
from probewise.errors import (
    EmptyChoicesError,
    InferenceServerError,
    InvalidInputError,
    MalformedResponseError,
    ServerStatusError,
    ServerTimeoutError,
)

# Private: header values and arbitrary bodies go to their parsers directly, no server per example.
from probewise.responses.generators import BatchGenerate, _parse, _retry_after


@pytest.fixture
def server() -> Iterator[object]:
    with serving() as running:
        yield running


def _generator(server: object, **overrides: object) -> OpenAICompatibleGenerator:
    options: dict[str, object] = {
        "max_tokens": 16,
        "timeout": 0.25,
        "retries": 1,
        "backoff": 0.01,
        "max_wait": 0.2,
        "rng": random.Random(0),
        "concurrency": 4,
    }
    options.update(overrides)
    return OpenAICompatibleGenerator(base_url(server), "tiny-model", **options)  # type: ignore[arg-type]


def _assert_clean(*items: str) -> None:
    for item in items:
        assert CANARY not in item, "canary leaked"  # never show the text itself


BEHAVIOURS = [
    "stop:1",
    "refuse:1",
    "deflect:1",
    "length:1",
    "empty:1",
    "filter:1",
    "e500:1",
    "e404:1",
    "e429:1",
    "flaky:1",
    "slow:1",
    "malformed:1",
    "nochoices:1",
    "shape:1",
]


@pytest.mark.parametrize("chat", [True, False])
def test_each_answer_becomes_its_result(server: object, chat: bool) -> None:
    generator = _generator(server, chat=chat)
    results = dict(zip(BEHAVIOURS, generator.generate_batch(BEHAVIOURS), strict=True))
    finishes = {
        "stop:1": FinishReason.STOP,
        "refuse:1": FinishReason.STOP,
        "deflect:1": FinishReason.STOP,
        "length:1": FinishReason.LENGTH,
        "empty:1": FinishReason.STOP,
        "filter:1": FinishReason.CONTENT_FILTER,
        "e429:1": FinishReason.STOP,
        "flaky:1": FinishReason.STOP,
    }
    for prompt, finish in finishes.items():
        result = results[prompt]
        assert isinstance(result, Completion), prompt
        assert result.finish_reason is finish, prompt
    errors: dict[str, type[InferenceServerError]] = {
        "e500:1": ServerStatusError,
        "e404:1": ServerStatusError,
        "slow:1": ServerTimeoutError,
        "malformed:1": MalformedResponseError,
        "nochoices:1": EmptyChoicesError,
        "shape:1": MalformedResponseError,
    }
    for prompt, kind in errors.items():
        assert type(results[prompt]) is kind, prompt
    outcomes = {p: classify(r) for p, r in results.items()}
    assert isinstance(outcomes["stop:1"], Complied)
    assert isinstance(outcomes["refuse:1"], Refused)
    assert isinstance(outcomes["deflect:1"], Deflected)
    assert outcomes["length:1"] == Complied(truncated=True)
    assert outcomes["empty:1"] == Empty()
    assert outcomes["filter:1"] == Refused(by_provider=True)
    for prompt, kind in errors.items():
        assert outcomes[prompt] == Error(kind=ErrorKind.GENERATION, exception_type=kind)


def test_retries_only_what_may_pass_and_count_attempts(server: object) -> None:
    generator = _generator(server, retries=2)
    results = generator.generate_batch(["e500:1", "e404:1", "e429:1", "flaky:1", "slow:1"])
    attempts = server.attempts  # type: ignore[attr-defined]
    assert attempts["e500:1"] == 3
    assert attempts["e404:1"] == 1  # a client error fails the same way again: not retried
    assert attempts["e429:1"] == 2
    assert attempts["flaky:1"] == 2
    assert attempts["slow:1"] == 3
    e500, e404, _, _, slow = results
    assert isinstance(e500, ServerStatusError)
    assert (e500.status, e500.attempts) == (500, 3)
    assert isinstance(e404, ServerStatusError)
    assert (e404.status, e404.attempts) == (404, 1)
    assert isinstance(slow, ServerTimeoutError)
    assert isinstance(slow, TimeoutError)
    assert slow.attempts == 3


def test_retry_after_is_honoured_and_capped(server: object) -> None:
    server.retry_after = "0.3"  # type: ignore[attr-defined]
    generator = _generator(server, backoff=0.001, max_wait=5.0)
    start = time.monotonic()
    (result,) = generator.generate_batch(["e429:a"])
    assert isinstance(result, Completion)
    assert time.monotonic() - start >= 0.3
    server.retry_after = "30"  # type: ignore[attr-defined]
    generator = _generator(server, backoff=0.001, max_wait=0.1)
    start = time.monotonic()
    (result,) = generator.generate_batch(["e429:b"])
    assert isinstance(result, Completion)
    assert time.monotonic() - start < 3.0
    server.retry_after = email.utils.formatdate(time.time() + 3, usegmt=True)  # type: ignore[attr-defined]
    generator = _generator(server, backoff=0.001, max_wait=0.3)
    start = time.monotonic()
    (result,) = generator.generate_batch(["e429:c"])
    assert isinstance(result, Completion)
    assert 0.3 <= time.monotonic() - start < 3.0


def test_retry_after_values() -> None:
    now = 1_700_000_000.0
    assert _retry_after(None) is None
    assert _retry_after("7") == 7.0
    assert _retry_after(" 1.5 ") == 1.5
    assert _retry_after("-1") is None
    assert _retry_after("nan") is None
    assert _retry_after("soon") is None
    assert _retry_after(email.utils.formatdate(now + 10, usegmt=True), now=now) == 10.0
    assert _retry_after(email.utils.formatdate(now - 10, usegmt=True), now=now) == 0.0
    assert _retry_after(email.utils.formatdate(now + 10), now=now) == 10.0  # "-0000": naive


@given(st.text(max_size=40))
def test_retry_after_never_raises_and_is_never_negative(value: str) -> None:
    seconds = _retry_after(value)
    assert seconds is None or seconds >= 0.0


@given(st.integers(1, 5000), st.floats(0.0, 10.0), st.floats(0.0, 100.0), st.integers(0, 2**32))
def test_backoff_is_jittered_exponential_and_capped(
    attempt: int, backoff: float, max_wait: float, seed: int
) -> None:
    def make() -> OpenAICompatibleGenerator:
        return OpenAICompatibleGenerator(
            "http://127.0.0.1:9/v1",
            "m",
            max_tokens=1,
            backoff=backoff,
            max_wait=max_wait,
            rng=random.Random(seed),
        )

    generator = make()
    full = min(max_wait, backoff * 2.0 ** min(attempt - 1, 64))
    wait = generator._wait(attempt, None)
    assert full / 2.0 <= wait <= full
    assert generator._wait(attempt, 1e9) == max_wait
    again = make()
    assert again._wait(attempt, None) == wait  # a seeded rng: the same schedule


def test_concurrency_is_bounded(server: object) -> None:
    server.hold_seconds = 0.1  # type: ignore[attr-defined]
    generator = _generator(server, concurrency=3, timeout=5.0)
    results = generator.generate_batch([f"hold:{i}" for i in range(12)])
    assert all(isinstance(r, Completion) for r in results)
    assert server.max_in_flight == 3  # type: ignore[attr-defined]


def test_requests_carry_the_settings(server: object) -> None:
    generator = _generator(
        server,
        api_key="sk-secret-key-1234",
        system_prompt="be brief",
        temperature=0.5,
        extra_body={"seed": 7, "top_p": 0.9},
    )
    generator.generate_batch(["stop:1"])
    body = server.bodies[-1]  # type: ignore[attr-defined]
    assert server.paths[-1] == "/v1/chat/completions"  # type: ignore[attr-defined]
    assert server.auth[-1] == "Bearer sk-secret-key-1234"  # type: ignore[attr-defined]
    assert body["model"] == "tiny-model"
    assert body["max_tokens"] == 16
    assert body["temperature"] == 0.5
    assert (body["seed"], body["top_p"]) == (7, 0.9)
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "stop:1"},
    ]
    plain = _generator(server, chat=False)
    plain.generate_batch(["stop:2"])
    assert server.paths[-1] == "/v1/completions"  # type: ignore[attr-defined]
    assert server.auth[-1] is None  # type: ignore[attr-defined]
    assert server.bodies[-1]["prompt"] == "stop:2"  # type: ignore[attr-defined]
    assert "messages" not in server.bodies[-1]  # type: ignore[attr-defined]


def test_repr_shows_url_and_model_never_the_key() -> None:
    generator = OpenAICompatibleGenerator(
        "https://user:pw-hidden@example.invalid/v1/",
        "big-model",
        api_key="sk-secret-key-1234",
        max_tokens=8,
    )
    shown = repr(generator)
    assert "https://example.invalid/v1" in shown
    assert "big-model" in shown
    assert "sk-secret" not in shown
    assert "pw-hidden" not in shown
    assert isinstance(generator, BatchGenerate)
    assert generator.batch_size == 32


@pytest.mark.parametrize(
    ("base", "options"),
    [
        ("localhost:8000/v1", {}),
        ("ftp://host/v1", {}),
        ("http:///v1", {}),
        ("http://h/v1", {"max_tokens": 0}),
        ("http://h/v1", {"max_tokens": True}),
        ("http://h/v1", {"concurrency": 0}),
        ("http://h/v1", {"retries": -1}),
        ("http://h/v1", {"timeout": 0.0}),
        ("http://h/v1", {"timeout": float("inf")}),
        ("http://h/v1", {"temperature": -0.1}),
        ("http://h/v1", {"batch_size": 0}),
        ("http://h/v1", {"api_key": ""}),
        ("http://h/v1", {"extra_body": {"stream": True}}),
        ("http://h/v1", {"extra_body": {"model": "other"}}),
        ("http://h/v1", {"extra_body": {"x": object()}}),
    ],
)
def test_bad_settings_are_refused(base: str, options: dict[str, object]) -> None:
    settings: dict[str, object] = {"max_tokens": 8}
    settings.update(options)
    with pytest.raises(InvalidInputError):
        OpenAICompatibleGenerator(base, "m", **settings)  # type: ignore[arg-type]


def test_works_from_inside_a_running_event_loop(server: object) -> None:
    generator = _generator(server)

    async def inside() -> object:
        return generator.generate_batch(["stop:1", "length:1"])

    results = asyncio.run(inside())
    assert [type(r) for r in results] == [Completion, Completion]  # type: ignore[attr-defined]


def test_call_raises_a_fresh_error_chained_to_nothing(server: object) -> None:
    generator = _generator(server)
    assert isinstance(generator("stop:1"), Completion)
    with pytest.raises(MalformedResponseError) as info:
        generator("malformed:1")
    error = info.value
    assert error.__cause__ is None
    assert error.__context__ is None


def test_composes_with_run_arm_and_run_paired_checkpoints(server: object, tmp_path: Path) -> None:
    prompts = {f"p{i}": b for i, b in enumerate(["stop:1", "refuse:1", "empty:1", "e404:1"])}
    tally = run_arm(prompts, _generator(server), progress=False)
    assert (tally.complied, tally.refused, tally.empty, tally.error) == (1, 1, 1, 1)
    checkpoint = tmp_path / "run.json"
    first = run_paired(
        prompts,
        _generator(server),
        _generator(server, chat=False),
        progress=False,
        checkpoint=checkpoint,
    )
    served = server.requests  # type: ignore[attr-defined]
    again = run_paired(
        prompts,
        _generator(server),
        _generator(server, chat=False),
        progress=False,
        checkpoint=checkpoint,
    )
    assert server.requests == served  # type: ignore[attr-defined]  # resumed: nothing re-sent
    assert again.tally_a == first.tally_a == tally
    assert again.tally_b == first.tally_b


def test_the_canary_leaves_through_no_channel(
    server: object,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "asyncio"):
        caplog.set_level(logging.DEBUG, logger=name)
    generator = _generator(server, retries=1)
    prompts = {i: b for i, b in enumerate(BEHAVIOURS)}
    checkpoint = tmp_path / "leak.json"
    result = run_paired(
        prompts, generator, _generator(server, chat=False), progress=True, checkpoint=checkpoint
    )
    direct = generator.generate_batch(BEHAVIOURS)
    channels: list[str] = [repr(generator), str(generator), repr(result), str(result)]
    for item in direct:
        channels += [repr(item), str(item)]
        if isinstance(item, BaseException):
            assert item.__cause__ is None
            assert item.__context__ is None
            assert item.__traceback__ is None
            channels += [
                repr(item.args),
                repr(vars(item)),
                "".join(traceback.format_exception(item)),
            ]
    raised = 0
    for prompt in BEHAVIOURS:
        try:
            generator(prompt)
        except InferenceServerError as error:
            raised += 1
            channels.append("".join(traceback.format_exception(error)))
            channels.append(
                repr([frame.f_locals for frame, _ in traceback.walk_tb(error.__traceback__)])
            )
    assert raised == 6
    del direct
    gc.collect()
    channels += [p.read_text() for p in tmp_path.iterdir()]
    assert len(list(tmp_path.iterdir())) == 2
    records = caplog.records
    assert any(r.name.startswith("httpx") for r in records)  # the capture sees httpx's lines
    channels += [r.getMessage() for r in records]
    channels += [repr(r.args) for r in records]
    captured = capfd.readouterr()
    channels += [captured.out, captured.err]
    assert "arm A" in captured.err  # the progress bar ran, to stderr
    _assert_clean(*channels)


def test_a_refused_connection_is_retried_then_an_error() -> None:
    import socket

    with socket.socket() as probe:  # a port that nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    generator = OpenAICompatibleGenerator(
        f"http://127.0.0.1:{port}/v1", "m", max_tokens=1, retries=2, backoff=0.001, timeout=1.0
    )
    (result,) = generator.generate_batch(["stop:1"])
    assert type(result) is InferenceServerError
    assert result.attempts == 3
    assert result.status is None
    assert result.__context__ is None
    assert f"POST http://127.0.0.1:{port}/v1/chat/completions: connection failed" in str(result)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "message": st.fixed_dictionaries({}, optional={"content": _JSON}) | _JSON,
        "text": _JSON,
        "finish_reason": _JSON,
    },
)


@given(
    st.booleans(),
    st.binary(max_size=40)
    | st.builds(
        lambda d: json.dumps(d).encode(),
        _JSON | st.fixed_dictionaries({"choices": st.lists(_CHOICE, max_size=2) | _JSON}),
    ),
)
def test_any_body_gives_a_completion_or_a_malformed_error(chat: bool, body: bytes) -> None:
    result = _parse(body, chat=chat, url="http://h/v1/x", attempts=1)
    assert isinstance(result, Completion | MalformedResponseError)
    if isinstance(result, MalformedResponseError):
        assert result.__context__ is None
        assert str(result).startswith("POST http://h/v1/x: the response ")
