"""OpenAICompatibleGenerator against a hostile server (tests/_hostile_server.py).

Each case here reproduced on 462239f: body bytes in httpcore's DEBUG log, a URL
password in httpx's INFO line, a raw UnicodeEncodeError holding the key, whole
bodies in memory, a timeout per read rather than per request, an OverflowError
from Retry-After, and finish_reason values read as a whole answer.
"""

from __future__ import annotations

import gc
import logging
import random
import time
import traceback
import tracemalloc
from collections.abc import Iterator, Sequence

import pytest

from _hostile_server import CANARY, HostileServer, hostile, hostile_url
from probewise import Completion, Complied, FinishReason, OpenAICompatibleGenerator, classify
from probewise.errors import (
    InferenceServerError,
    InvalidInputError,
    MalformedResponseError,
    ProbewiseError,
    ResponseTooLargeError,
    ServerStatusError,
    ServerTimeoutError,
    UnknownFinishReasonError,
)
from probewise.responses.decide import StopWhenDecided

# Private: that a date past the calendar is ignored shows only in the parser's return value.
from probewise.responses.generators import _retry_after

PASSWORD = "pw-d41d8cd9"
KEY = "sk-key-7f3a9b2c"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with hostile() as running:
        yield running


class _Everything(logging.Handler):
    """Every record, formatted with its exception and stack, as the root sees it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self.lines.append(repr(record.args))
        self.lines.append(repr(record.msg))


@pytest.fixture
def logs() -> Iterator[_Everything]:
    """Root and every httpx/httpcore/h11/asyncio logger at DEBUG, into one handler."""
    handler = _Everything()
    root = logging.getLogger()
    names = ["httpx", "httpcore", "httpcore.http11", "httpcore.connection", "h11", "asyncio"]
    saved = [(root, root.level)] + [
        (logging.getLogger(n), logging.getLogger(n).level) for n in names
    ]
    root.addHandler(handler)
    for logger, _ in saved:
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for logger, level in saved:
            logger.setLevel(level)


def _generator(server: HostileServer, **overrides: object) -> OpenAICompatibleGenerator:
    options: dict[str, object] = {
        "max_tokens": 8,
        "timeout": 1.0,
        "retries": 0,
        "backoff": 0.01,
        "max_wait": 0.2,
        "rng": random.Random(0),
        "concurrency": 1,
    }
    userinfo = str(overrides.pop("userinfo", ""))
    options.update(overrides)
    return OpenAICompatibleGenerator(hostile_url(server, userinfo), "m", **options)  # type: ignore[arg-type]


def _chain(error: BaseException) -> list[str]:
    """Every text an exception and its chain carry."""
    out: list[str] = []
    seen: BaseException | None = error
    while seen is not None:
        out += [str(seen), repr(seen), repr(seen.args), repr(vars(seen))]
        out.append("".join(traceback.format_exception(seen)))
        seen = seen.__cause__ or seen.__context__
    return out


def _channels(
    logs: _Everything, generator: OpenAICompatibleGenerator, results: Sequence[object]
) -> list[str]:
    """The logs, the generator's reprs and every result with its exception chain (each
    error built fresh: it chains to nothing)."""
    channels = [*list(logs.lines), repr(generator), generator.base_url]
    assert any(line.startswith("httpx INFO") for line in logs.lines)  # the capture works
    for result in results:
        channels += [repr(result), str(result)]
        if isinstance(result, BaseException):
            assert result.__context__ is None
            assert result.__cause__ is None
            channels += _chain(result)
    return channels


def _clean(channels: list[str], *secrets: str) -> None:
    for secret in (CANARY, *secrets):
        hits = sum(secret in item for item in channels)
        assert hits == 0, f"a planted secret reached {hits} channel(s)"  # never shown


HOSTILE = [
    "short:1",
    "stop:1",
    "nocontent:1",
    "stop:2",
    "statusline:1",
    "stop:3",
    "reason:1",
    "stop:4",
    "finish-abort:1",
    "big:1",
    "endless:1",
    "gzipbomb:1",
    "dribble:1",
    "interim:1",
    "retryyear:1",
]


def test_no_body_byte_key_or_password_reaches_any_log(
    server: HostileServer, logs: _Everything, capfd: pytest.CaptureFixture[str]
) -> None:
    server.dribble_seconds = 0.1
    generator = _generator(
        server, userinfo=f"user:{PASSWORD}@", api_key=KEY, max_response_bytes=1024 * 1024
    )
    results = generator.generate_batch(HOSTILE)
    assert server.auth[0] is not None
    assert server.auth[0].startswith("Basic ")
    # A short Content-Length and a 204 with a body leave bytes behind; a fresh
    # connection per request means the next prompt never reads them.
    by_prompt = dict(zip(HOSTILE, results, strict=True))
    for prompt in ("stop:1", "stop:2", "stop:3", "stop:4", "short:1"):
        assert isinstance(by_prompt[prompt], Completion), prompt
    assert type(by_prompt["statusline:1"]) is InferenceServerError
    assert isinstance(by_prompt["reason:1"], ServerStatusError)
    assert isinstance(by_prompt["finish-abort:1"], UnknownFinishReasonError)
    for prompt in ("big:1", "endless:1", "gzipbomb:1"):
        assert isinstance(by_prompt[prompt], ResponseTooLargeError), prompt
    for prompt in ("dribble:1", "interim:1"):
        assert isinstance(by_prompt[prompt], ServerTimeoutError), prompt
    assert isinstance(by_prompt["retryyear:1"], ServerStatusError)
    channels = _channels(logs, generator, results)
    assert any(line.startswith("httpcore") for line in logs.lines)
    for prompt in ("statusline:1", "reason:1"):
        try:
            generator(prompt)
        except InferenceServerError as error:
            channels += _chain(error)
    del results, by_prompt
    gc.collect()
    captured = capfd.readouterr()
    channels += [captured.out, captured.err]
    _clean(channels, PASSWORD, KEY)


def test_logs_outside_a_batch_are_left_alone(logs: _Everything) -> None:
    logging.getLogger("httpcore.http11").debug("receive_response_headers.complete detail=1")
    assert any("detail=1" in line for line in logs.lines)


@pytest.mark.parametrize(
    "key", ["sk-\u00e9t\u00e9-key", "sk-key\r\nX-Evil: 1", "sk key", "sk-\x00"]
)
def test_a_bad_api_key_is_refused_without_showing_it(key: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        OpenAICompatibleGenerator("http://127.0.0.1:9/v1", "m", max_tokens=1, api_key=key)
    error = info.value
    assert "api_key" in str(error)
    assert "\n" not in str(error)
    texts = [*_chain(error), repr(info.traceback)]
    for part in ("t\u00e9", "X-Evil", "sk key", "sk-key"):
        assert not any(part in t for t in texts)


def test_a_url_password_is_sent_as_basic_auth_and_kept_nowhere(server: HostileServer) -> None:
    generator = _generator(server, userinfo=f"user:{PASSWORD}@")
    assert PASSWORD not in generator.base_url
    assert PASSWORD not in repr(generator)
    assert isinstance(generator("stop:1"), Completion)
    import base64

    assert server.auth[-1] == "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()


def _peak(generator: OpenAICompatibleGenerator, prompt: str) -> tuple[object, int]:
    tracemalloc.start()
    try:
        (result,) = generator.generate_batch([prompt])
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("behaviour", ["big", "endless", "gzipbomb"])
def test_a_body_past_the_cap_is_refused_and_never_held(
    server: HostileServer, behaviour: str
) -> None:
    server.big_bytes = 8 * 1024 * 1024
    server.bomb()  # made before memory is measured (the server runs in this process)
    generator = _generator(server, max_response_bytes=256 * 1024, timeout=10.0)
    generator.generate_batch(["stop:0"])  # warm: imports, the TLS context (megabytes)
    start = time.monotonic()
    result, peak = _peak(generator, f"{behaviour}:1")
    assert isinstance(result, ResponseTooLargeError)
    assert "max_response_bytes (262144)" in str(result)
    assert time.monotonic() - start < 5.0
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes"


def test_a_body_within_the_cap_is_read(server: HostileServer) -> None:
    (result,) = _generator(server, max_response_bytes=4096).generate_batch(["stop:1"])
    assert isinstance(result, Completion)
    (small,) = _generator(server, max_response_bytes=16).generate_batch(["stop:1"])
    assert isinstance(small, ResponseTooLargeError)


@pytest.mark.parametrize("behaviour", ["dribble", "slowheaders", "interim"])
def test_one_deadline_covers_the_whole_request(server: HostileServer, behaviour: str) -> None:
    server.dribble_seconds = 0.1  # every single read comes well within the timeout
    generator = _generator(server, timeout=0.6)
    start = time.monotonic()
    (result,) = generator.generate_batch([f"{behaviour}:1"])
    elapsed = time.monotonic() - start
    assert isinstance(result, ServerTimeoutError)
    assert elapsed < 2.0, f"{elapsed:.1f} s"


def test_a_retry_after_past_the_calendar_is_ignored(server: HostileServer) -> None:
    assert _retry_after("Fri, 31 Dec 9999999999 23:59:59 GMT") is None
    assert _retry_after("Fri, 31 Dec 99999999999999999999 23:59:59 GMT") is None
    generator = _generator(server, retries=1)
    (result,) = generator.generate_batch(["retryyear:1"])
    assert isinstance(result, Completion)
    assert server.attempts["retryyear:1"] == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("eos_token", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("max_tokens", FinishReason.LENGTH),
        ("model_length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("abort", None),
        ("error", None),
        ("tool_calls", None),
        ("Stop", None),
        ("none", None),
        ("absent", None),
    ],
)
def test_finish_reasons_are_mapped_and_unknown_ones_are_errors(
    server: HostileServer, value: str, expected: FinishReason | None
) -> None:
    (result,) = _generator(server).generate_batch([f"finish-{value}:1"])
    if expected is None:
        assert isinstance(result, UnknownFinishReasonError)
        assert isinstance(result, MalformedResponseError)
        assert value not in str(result)
    else:
        assert isinstance(result, Completion)
        assert result.finish_reason is expected


def test_the_caller_extends_the_finish_reason_map(server: HostileServer) -> None:
    generator = _generator(
        server, finish_reasons={"abort": FinishReason.LENGTH, "stop": FinishReason.LENGTH}
    )
    aborted, stopped, other = generator.generate_batch(
        ["finish-abort:1", "finish-stop:1", "finish-error:1"]
    )
    assert isinstance(aborted, Completion)
    assert aborted.finish_reason is FinishReason.LENGTH
    assert isinstance(stopped, Completion)
    assert stopped.finish_reason is FinishReason.LENGTH
    assert isinstance(other, UnknownFinishReasonError)
    assert generator.finish_reasons["length"] is FinishReason.LENGTH


@pytest.mark.parametrize("bad", [{"x": "stop"}, {1: FinishReason.STOP}, ["stop"], {"x": None}])
def test_a_bad_finish_reason_map_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        OpenAICompatibleGenerator("http://h/v1", "m", max_tokens=1, finish_reasons=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [0, -1, True, 1.5])
def test_a_bad_cap_is_refused(cap: object) -> None:
    with pytest.raises(ProbewiseError):
        OpenAICompatibleGenerator("http://h/v1", "m", max_tokens=1, max_response_bytes=cap)  # type: ignore[arg-type]


STREAMED = [
    "sse:1",
    "stop:5",  # a server that answers a stream request with one JSON body
    "ssejunk:1",
    "sseerror:1",
    "ssedribble:1",
    "ssegzip:1",
    "ssefinish-abort:1",
    "ssenofinish:1",
    "sselong:1",
]


@pytest.mark.parametrize("chat", [True, False])
def test_no_streamed_byte_key_or_password_reaches_any_log(
    server: HostileServer, logs: _Everything, capfd: pytest.CaptureFixture[str], chat: bool
) -> None:
    """The streaming path keeps every guarantee of the whole-body one: one deadline,
    the byte cap, errors that name the shape only, logs without a byte of the stream."""
    server.dribble_seconds = 0.05
    server.slow_seconds = 6.0
    generator = _generator(
        server,
        userinfo=f"user:{PASSWORD}@",
        api_key=KEY,
        max_response_bytes=256 * 1024,
        stream=True,
        chat=chat,
        timeout=2.0,
        concurrency=4,
    )
    results = [*generator.generate_batch(STREAMED, stop=StopWhenDecided())]
    # A stream past the cap (asked without a stop: its opening would decide it first).
    results += generator.generate_batch(["ssebig:1"])
    by_prompt = dict(zip([*STREAMED, "ssebig:1"], results, strict=True))
    for prompt in ("sse:1", "stop:5"):
        result = by_prompt[prompt]
        assert isinstance(result, Completion), prompt
        assert result.finish_reason is FinishReason.STOP
        assert classify(result) == Complied()
    decided = by_prompt["sselong:1"]
    assert isinstance(decided, Completion)
    assert decided.finish_reason is FinishReason.DECIDED
    assert classify(decided) == Complied(decided=True)  # never truncated
    for prompt in ("ssejunk:1", "sseerror:1", "ssegzip:1"):
        assert type(by_prompt[prompt]) is MalformedResponseError, prompt
    assert isinstance(by_prompt["ssebig:1"], ResponseTooLargeError)
    assert isinstance(by_prompt["ssedribble:1"], ServerTimeoutError)
    for prompt in ("ssefinish-abort:1", "ssenofinish:1"):
        assert isinstance(by_prompt[prompt], UnknownFinishReasonError), prompt
    channels = _channels(logs, generator, results)
    del results, by_prompt, decided
    gc.collect()
    captured = capfd.readouterr()
    channels += [captured.out, captured.err]
    _clean(channels, PASSWORD, KEY)


def test_a_decided_stream_is_closed_early(server: HostileServer) -> None:
    server.slow_seconds = 3.0
    generator = _generator(server, stream=True, timeout=5.0)
    start = time.monotonic()
    (result,) = generator.generate_batch(["sselong:1"], stop=StopWhenDecided())
    assert isinstance(result, Completion)
    assert result.finish_reason is FinishReason.DECIDED
    assert time.monotonic() - start < 2.0
    deadline = time.monotonic() + 2.0
    while server.streams_cut == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.streams_cut == 1  # the server saw the stream closed under it
    # Without a stop the same stream runs until the server ends it, with no finish reason.
    server.slow_seconds = 0.3
    (whole,) = generator.generate_batch(["sselong:2"])
    assert isinstance(whole, UnknownFinishReasonError)
    assert "ended without a finish_reason" in str(whole)


def test_stream_needs_a_bool(server: HostileServer) -> None:
    with pytest.raises(InvalidInputError, match="stream must be a bool"):
        _generator(server, stream="yes")
    assert _generator(server, stream=True).can_stop_when_decided
    assert not _generator(server).can_stop_when_decided
