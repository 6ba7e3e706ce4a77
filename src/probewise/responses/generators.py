"""Generation through an inference server that speaks the OpenAI-compatible HTTP API.

vLLM, SGLang, TGI, llama.cpp's server and most hosted providers answer
``POST {base_url}/chat/completions`` (and ``/completions``) alike.
:class:`OpenAICompatibleGenerator` is a :class:`~probewise.BatchGenerate` for
:func:`~probewise.run_arm` and :func:`~probewise.run_paired`: each batch of prompts
goes out concurrently (at most ``concurrency`` requests in flight), and each
completion comes back :class:`~probewise.Sealed` at once.

What never leaves it: a response body, a URL password or the API key. The
completion text is sealed as soon as it is parsed; a failure is a fresh
:class:`~probewise.errors.InferenceServerError` whose message names the endpoint,
the HTTP status and the attempts, built outside any ``except`` block so that it
chains to nothing (no httpx exception, which would hold the response, rides along
as ``__context__``), and returned rather than raised (so it has no traceback
frames). The exchange itself (``probewise.responses._http``) bounds each attempt in
time and size, uses no connection twice, and rewrites httpx's and httpcore's log
records so that they hold no header, body or exception message
(tests/responses/test_openai_generator.py and test_hostile_server.py search every
channel, with logging at DEBUG).

The event loop: callers call :meth:`~OpenAICompatibleGenerator.generate_batch`
synchronously; each call runs its own loop with :func:`asyncio.run` and one
``httpx.AsyncClient`` (its connection pool serves every request of the batch).
Called from a thread that is already running a loop (a notebook, an async app),
the batch runs on a short-lived worker thread with its own loop instead, since
``asyncio.run`` refuses to nest. A new loop per batch keeps no thread or socket
alive between batches, so there is nothing to close; the price is one new
connection per request, small beside a generation.

:class:`TransformersGenerator` (a local model) is defined in ``_local`` and named here
too, where callers import it.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import hashlib
import json
import math
import random
import time
import types
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import (
    TYPE_CHECKING,
    Protocol,
    TypeAlias,
    TypeVar,
    assert_never,
    cast,
    runtime_checkable,
)

from probewise._validation import int_at_least
from probewise.errors import (
    ArgumentTypeValueError,
    EmptyChoicesError,
    InferenceServerError,
    InvalidInputError,
    MalformedResponseError,
    ResponseTooLargeError,
    ServerStatusError,
    ServerTimeoutError,
    UnknownFinishReasonError,
)
from probewise.responses._http import (
    Failure,
    Reply,
    Streamed,
    exchange,
    quiet_logs,
    shown_url,
    stream_exchange,
)
from probewise.responses._local import TransformersGenerator
from probewise.responses._server_args import (
    check_key,
    check_seconds,
    check_text,
    finish_map,
    url_credentials,
)
from probewise.responses._stream import StreamReader
from probewise.responses.decide import StopSpec, StopWhenDecided, per_prompt
from probewise.responses.outcome import FinishReason
from probewise.responses.sealed import Completion, Sealed

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "DEFAULT_FINISH_REASONS",
    "BatchGenerate",
    "Generate",
    "OpenAICompatibleGenerator",
    "TransformersGenerator",
    "shown_url",
]

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)

Generate: TypeAlias = Callable[[P], Completion | Sealed | str]
"""The caller's generator: a prompt in, a completion out (or an exception)."""

# Statuses worth another try: request timeout, too early, too many requests, and
# every server error. Any other status (400 bad request, 401, 404 unknown model)
# would fail the same way again.
_RETRY_STATUSES = frozenset({408, 425, 429})
# Keys the generator sets itself; extra_body may not override them ("stream" and
# "n" would change the shape of the answer).
_OWN_KEYS = frozenset({"model", "messages", "prompt", "max_tokens", "temperature", "stream", "n"})

DEFAULT_FINISH_REASONS: Mapping[str, FinishReason] = types.MappingProxyType(
    {
        # The model ended the answer: OpenAI, vLLM, SGLang, llama.cpp ("stop"), TGI
        # ("eos_token", "stop_sequence"), Anthropic-style servers ("end_turn").
        "stop": FinishReason.STOP,
        "eos_token": FinishReason.STOP,
        "stop_sequence": FinishReason.STOP,
        "end_turn": FinishReason.STOP,
        # The token limit cut it off: "length" (OpenAI and most), "max_tokens"
        # (Anthropic-style), "model_length" (vLLM, at the model's context length).
        "length": FinishReason.LENGTH,
        "max_tokens": FinishReason.LENGTH,
        "model_length": FinishReason.LENGTH,
        "content_filter": FinishReason.CONTENT_FILTER,
    }
)
"""How :class:`OpenAICompatibleGenerator` reads a choice's ``finish_reason``.

Any value not in the map (``"abort"``, ``"error"``, ``"tool_calls"``, null, a
missing field) gives an :class:`~probewise.errors.UnknownFinishReasonError` for
that prompt, counted as an ``Error``: never as a whole answer. The generator's
``finish_reasons`` argument adds to (or overrides) these entries."""

# The most bytes of a response body read (and of its inflated form), by default.
_MAX_RESPONSE_BYTES = 8 * 1024 * 1024


def _retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay seconds or an HTTP date.

    ``None`` when the header is absent or unreadable; a date in the past gives 0.
    ``now`` is the current time in seconds since the epoch (default: the clock).
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:  # an HTTP date is GMT; a "-0000" zone parses as naive
            when = when.replace(tzinfo=datetime.UTC)
        stamp = when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):  # a year past the calendar
        return None
    current = time.time() if now is None else now
    return max(0.0, stamp - current)


def _parse(
    content: bytes,
    *,
    chat: bool,
    url: str,
    attempts: int,
    finish_reasons: Mapping[str, FinishReason] = DEFAULT_FINISH_REASONS,
) -> Completion | InferenceServerError:
    """The completion in a 2xx body, sealed; or the error saying why there is none.

    The one place a response body is read. Error messages say what was wrong with
    the shape, never what the body held.
    """

    def malformed(what: str) -> MalformedResponseError:
        return MalformedResponseError(
            f"the response is {what}", url=url, attempts=attempts, status=None
        )

    try:
        document: object = json.loads(content)
    except (ValueError, RecursionError):  # JSONDecodeError keeps the document: dropped here
        return malformed("not JSON")
    if not isinstance(document, dict):
        return malformed("not a JSON object")
    choices = cast("dict[str, object]", document).get("choices")
    if not isinstance(choices, list):
        return malformed("missing its choices list")
    if not choices:
        return EmptyChoicesError(
            "the response has an empty choices list", url=url, attempts=attempts
        )
    first = cast("list[object]", choices)[0]
    if not isinstance(first, dict):
        return malformed("a choice that is not an object")
    choice = cast("dict[str, object]", first)
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            return malformed("a chat choice without a message")
        fields, key = cast("dict[str, object]", message), "content"
    else:
        fields, key = choice, "text"
    if key not in fields:
        return malformed(f"a choice without {key}")
    text = fields[key]
    if text is None:  # a provider filter (or a tool call) leaves null content: blank
        text = ""
    if not isinstance(text, str):
        return malformed("a choice whose text is not a string")
    reason = choice.get("finish_reason")
    finish = finish_reasons.get(reason) if isinstance(reason, str) else None
    if finish is None:  # the value is the server's: named by what it is not, never shown
        return UnknownFinishReasonError(
            "the response has a finish_reason that is missing or not in the "
            "generator's finish_reasons map",
            url=url,
            attempts=attempts,
        )
    usage = cast("dict[str, object]", document).get("usage")
    counted = (
        cast("dict[str, object]", usage).get("completion_tokens")
        if isinstance(usage, dict)
        else None
    )
    tokens = (
        counted
        if isinstance(counted, int) and not isinstance(counted, bool) and counted >= 0
        else None
    )
    return Completion(Sealed(text), finish, tokens=tokens)


class OpenAICompatibleGenerator:
    """A :class:`~probewise.BatchGenerate` over an OpenAI-compatible inference server.

    Each prompt is one ``POST {base_url}/chat/completions`` (one user message,
    after a system message when ``system_prompt`` is given), or with
    ``chat=False`` one ``POST {base_url}/completions`` with the prompt as is.
    ``base_url`` is what the server's API lives under, e.g.
    ``http://localhost:8000/v1``. ``extra_body`` adds fields to every request
    (``top_p``, ``seed``, ``stop``, a server's own options); it may not set the
    fields the generator sets (model, messages, prompt, max_tokens, temperature,
    stream, n).

    Concurrency and retries: at most ``concurrency`` requests are in flight; a
    batch is ``batch_size`` prompts (default four per slot: the run's checkpoint is
    written after each batch). A 408, 425, 429 or 5xx answer, a timeout or a broken
    connection is tried again up to ``retries`` more times, after the wait the
    server asks for in ``Retry-After`` (seconds or an HTTP date; one that cannot be
    read, such as a date past the calendar, is ignored) or else a jittered
    exponential backoff (``backoff`` seconds, doubling per attempt, each wait
    between half and all of that), every wait capped at ``max_wait`` seconds. A
    request keeps its slot while it waits, so a server asking to slow down gets
    fewer requests. ``rng`` draws the jitter (pass a seeded ``random.Random`` for a
    reproducible schedule).

    Bounds: ``timeout`` is one deadline per attempt, covering the connect, the
    request, the status line and headers, any interim (1xx) responses and the
    whole body (for a non-streamed answer, the whole generation): a server that
    sends a byte at a time is cut off when it passes. A prompt's longest time is
    thus ``(retries + 1) * timeout`` plus the waits. ``max_response_bytes`` caps a
    response body, before and after inflating a gzip or deflate body (default 8
    MiB); a bigger one is a :class:`~probewise.errors.ResponseTooLargeError`, read
    no further. No connection is used for two requests (each says
    ``Connection: close``): bytes a broken server leaves behind are never read as
    the next answer.

    Results: a 2xx answer gives a :class:`~probewise.Completion` whose text is the
    first choice's (no content counts as blank), and whose finish reason is read
    through ``finish_reasons``: :data:`DEFAULT_FINISH_REASONS` (``"stop"`` and
    the like -> ``STOP``; ``"length"``, ``"max_tokens"``, ``"model_length"`` ->
    ``LENGTH``; ``"content_filter"`` -> ``CONTENT_FILTER``) updated with the
    caller's own entries. A value in neither (``"abort"``, ``"error"``,
    ``"tool_calls"``, null, a missing field) is an
    :class:`~probewise.errors.UnknownFinishReasonError`, never a whole answer. A
    prompt that gets no completion is returned as an
    :class:`~probewise.errors.InferenceServerError`:
    :class:`~probewise.errors.ServerStatusError` (an error status, after the
    retries for the retried ones), :class:`~probewise.errors.ServerTimeoutError`,
    :class:`~probewise.errors.MalformedResponseError` (not JSON, wrong shape, an
    unsupported Content-Encoding; and its subclasses
    :class:`~probewise.errors.EmptyChoicesError`,
    :class:`~probewise.errors.ResponseTooLargeError` and
    :class:`~probewise.errors.UnknownFinishReasonError`), or the base class when
    the connection failed or the server broke HTTP. :func:`~probewise.run_arm`
    counts each as ``Error(kind=GENERATION)`` with that class as
    ``exception_type``.

    Secrets: the API key is sent as ``Authorization: Bearer`` and shown nowhere;
    it must be visible ASCII (no space, CR or LF), checked here with an error that
    does not show it. User info in ``base_url`` (``http://user:password@host/v1``)
    is sent as HTTP Basic auth and then removed: ``base_url``, ``repr``, every
    error and every log line show the URL without it. While a batch runs, httpx's
    and httpcore's log records are rewritten to hold no header, body, exception
    message or user info (see docs/reference/security.md).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int,
        temperature: float = 0.0,
        concurrency: int = 8,
        timeout: float = 60.0,
        retries: int = 3,
        chat: bool = True,
        system_prompt: str | None = None,
        extra_body: Mapping[str, object] | None = None,
        batch_size: int | None = None,
        backoff: float = 0.5,
        max_wait: float = 60.0,
        rng: random.Random | None = None,
        max_response_bytes: int = _MAX_RESPONSE_BYTES,
        finish_reasons: Mapping[str, FinishReason] | None = None,
        stream: bool = False,
    ) -> None:
        credentials = url_credentials(base_url)
        if not isinstance(stream, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeValueError(f"stream must be a bool, got a {type(stream).__name__}")
        int_at_least("max_response_bytes", max_response_bytes, 1)
        finish = finish_map(finish_reasons, DEFAULT_FINISH_REASONS)
        check_text("model", model, what="the server's model name")
        int_at_least("max_tokens", max_tokens, 1)
        int_at_least("concurrency", concurrency, 1)
        int_at_least("retries", retries, 0)
        if batch_size is not None:
            int_at_least("batch_size", batch_size, 1)
        check_seconds("temperature", temperature, zero=True)
        check_seconds("timeout", timeout, zero=False)
        check_seconds("backoff", backoff, zero=True)
        check_seconds("max_wait", max_wait, zero=True)
        if api_key is not None:
            check_key(api_key)
        if system_prompt is not None:
            check_text("system_prompt", system_prompt, what="or None", empty=True)
        extra = dict(extra_body or {})
        for key in extra:
            if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise InvalidInputError("extra_body keys must be strings")
        clash = sorted(_OWN_KEYS & extra.keys())
        if clash:
            raise InvalidInputError(
                f"extra_body may not set {', '.join(clash)}: the generator sets those itself"
            )
        try:
            json.dumps(extra)
        except (TypeError, ValueError):
            raise InvalidInputError("extra_body must be JSON-serialisable") from None
        self.base_url: str = shown_url(base_url).rstrip("/")
        self.model: str = model
        self.max_tokens: int = max_tokens
        self.temperature: float = float(temperature)
        self.concurrency: int = concurrency
        self.timeout: float = float(timeout)
        self.retries: int = retries
        self.chat: bool = chat
        self.system_prompt: str | None = system_prompt
        self.extra_body: Mapping[str, object] = extra
        self.backoff: float = float(backoff)
        self.max_wait: float = float(max_wait)
        self.max_response_bytes: int = max_response_bytes
        self.finish_reasons: Mapping[str, FinishReason] = finish
        self.stream: bool = stream
        self._batch_size = 4 * concurrency if batch_size is None else batch_size
        self._api_key = api_key
        self._credentials = credentials
        self._rng = random.Random() if rng is None else rng
        self._path = "/chat/completions" if chat else "/completions"
        self._url = self.base_url + self._path
        self._tls: ssl.SSLContext | None = None

    @property
    def batch_size(self) -> int:
        """Prompts per :meth:`generate_batch` call (what :func:`~probewise.run_arm` hands it)."""
        return self._batch_size

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleGenerator(base_url={self.base_url!r}, "
            f"model={self.model!r}, chat={self.chat}, concurrency={self.concurrency})"
        )

    def run_identity(self) -> dict[str, str | int | float | bool | None]:
        """What a checkpoint binds a run to: the server (without user info), the model
        and every setting that changes an answer (texts by digest); never the key, the
        timeout, the retries or the concurrency, which a resume may change."""

        def digest(value: object) -> str | None:
            if value is None:
                return None
            text = json.dumps(value, sort_keys=True, ensure_ascii=True)
            return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]

        return {
            "generator": "OpenAICompatibleGenerator",
            "base_url": self.base_url,
            "model": self.model,
            "chat": self.chat,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "system_prompt": digest(self.system_prompt),
            "extra_body": digest(dict(self.extra_body)),
            "finish_reasons": digest({k: v.value for k, v in self.finish_reasons.items()}),
        }

    def __call__(self, prompt: str) -> Completion:
        """One prompt's completion; raises the prompt's :class:`InferenceServerError`."""
        result = self.generate_batch([prompt])[0]
        if isinstance(result, BaseException):
            raise result  # built fresh, outside any except block: it chains to nothing
        return result

    @property
    def can_stop_when_decided(self) -> bool:
        """Whether :meth:`generate_batch` can stop a reply once decided (``stream=True``)."""
        return self.stream

    def generate_batch(
        self, prompts: Sequence[str], *, stop: StopSpec = None
    ) -> Sequence[Completion | BaseException]:
        """One result per prompt, in order: a completion, or the error it got instead.
        With ``stream=True`` and ``stop``, each reply's stream is closed once ``stop``
        says its outcome is decided (the completion ends with ``FinishReason.DECIDED``);
        ``stop`` is one for every prompt or a sequence of one (or None) per prompt."""
        batch = list(prompts)
        stops = per_prompt(stop, len(batch))
        for prompt in batch:
            if not isinstance(prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ArgumentTypeValueError(
                    f"prompts must be strings, got a {type(prompt).__name__}"
                )
        if not batch:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the usual case
            return asyncio.run(self._batch(batch, stops))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probewise-http") as pool:
            return pool.submit(asyncio.run, self._batch(batch, stops)).result()

    def _body(self, prompt: str) -> dict[str, object]:
        body: dict[str, object] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.chat:
            messages: list[dict[str, str]] = []
            if self.system_prompt is not None:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": prompt})
            body["messages"] = messages
        else:
            body["prompt"] = prompt
        body.update(self.extra_body)
        if self.stream:
            body["stream"] = True
        return body

    async def _batch(
        self, prompts: list[str], stops: list[StopWhenDecided | None]
    ) -> list[Completion | BaseException]:
        import httpx

        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate",  # the two that _http inflates under the cap
            "Connection": "close",  # no connection serves two requests (see _http)
        }
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=0)
        slots = asyncio.Semaphore(self.concurrency)
        if self._tls is None:  # made once (tens of ms), shared by every batch's client
            self._tls = httpx.create_ssl_context()
        with quiet_logs():
            async with httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                auth=None if self._credentials is None else httpx.BasicAuth(*self._credentials),
                verify=self._tls,
                timeout=httpx.Timeout(self.timeout),
                limits=limits,
                follow_redirects=False,
            ) as client:
                return list(
                    await asyncio.gather(
                        *(
                            self._one(client, slots, prompt, stop)
                            for prompt, stop in zip(prompts, stops, strict=True)
                        )
                    )
                )

    async def _one(
        self,
        client: httpx.AsyncClient,
        slots: asyncio.Semaphore,
        prompt: str,
        stop: StopWhenDecided | None,
    ) -> Completion | BaseException:
        async with slots:
            try:
                return await self._attempts(client, prompt, stop)
            except Exception as error:  # not expected; its message might hold anything
                what = type(error).__name__
            return InferenceServerError(f"failed unexpectedly ({what})", url=self._url, attempts=1)

    async def _exchange(
        self, client: httpx.AsyncClient, body: dict[str, object], reader: StreamReader | None
    ) -> Reply | Streamed | Failure:
        if reader is None:
            return await exchange(
                client, self._path, body, deadline=self.timeout, cap=self.max_response_bytes
            )
        return await stream_exchange(
            client,
            self._path,
            body,
            deadline=self.timeout,
            cap=self.max_response_bytes,
            feed=reader.feed,
        )

    async def _attempts(
        self, client: httpx.AsyncClient, prompt: str, stop: StopWhenDecided | None
    ) -> Completion | BaseException:
        body = self._body(prompt)
        attempt = 0
        while True:
            attempt += 1
            status: int | None = None
            asked: float | None = None
            kind: type[InferenceServerError]
            reader = (
                StreamReader(chat=self.chat, finish_reasons=self.finish_reasons, stop=stop)
                if self.stream
                else None
            )
            reply = await self._exchange(client, body, reader)
            if isinstance(reply, Streamed):
                assert reader is not None  # (only a stream ends so)
                return reader.result(reply, url=self._url, attempts=attempt)
            if isinstance(reply, Reply):
                status = reply.status
                if reply.body is not None:
                    return _parse(
                        reply.body,
                        chat=self.chat,
                        url=self._url,
                        attempts=attempt,
                        finish_reasons=self.finish_reasons,
                    )
                asked = _retry_after(reply.retry_after)
                kind, message = ServerStatusError, f"HTTP {status}"
                if not (status in _RETRY_STATUSES or status >= 500):
                    return kind(message, url=self._url, attempts=attempt, status=status)
            elif reply is Failure.TIMEOUT:
                kind, message = ServerTimeoutError, f"no answer within {self.timeout:g} s"
            elif reply is Failure.CONNECTION:
                kind, message = InferenceServerError, "connection failed or HTTP broken"
            elif reply is Failure.TOO_LARGE:
                return ResponseTooLargeError(
                    f"the response is over max_response_bytes ({self.max_response_bytes})",
                    url=self._url,
                    attempts=attempt,
                )
            elif reply is Failure.ENCODING:
                return MalformedResponseError(
                    "the response has a Content-Encoding other than gzip or deflate, "
                    "or does not inflate",
                    url=self._url,
                    attempts=attempt,
                )
            else:
                assert_never(reply)
            if attempt > self.retries:
                return kind(message, url=self._url, attempts=attempt, status=status)
            await asyncio.sleep(self._wait(attempt, asked))

    def _wait(self, attempt: int, asked: float | None) -> float:
        """Seconds before attempt ``attempt + 1``: the server's ask, or a jittered backoff."""
        if asked is not None:
            return min(asked, self.max_wait)
        full = min(self.max_wait, self.backoff * 2.0 ** min(attempt - 1, 64))  # no overflow
        return full / 2.0 + self._rng.uniform(0.0, full / 2.0)


@runtime_checkable
class BatchGenerate(Protocol[P_contra]):
    """A generator that does better in batches: :func:`run_arm` hands it ``batch_size`` prompts.

    ``generate_batch`` returns one result per prompt, in order: a completion, or the
    exception that prompt's generation raised.
    """

    @property
    def batch_size(self) -> int: ...

    def generate_batch(
        self, prompts: Sequence[P_contra]
    ) -> Sequence[Completion | BaseException]: ...
