"""Generation through an inference server that speaks the OpenAI-compatible HTTP API.

vLLM, SGLang, TGI, llama.cpp's server and most hosted providers answer
``POST {base_url}/chat/completions`` (and ``/completions``) alike.
:class:`OpenAICompatibleGenerator` is a :class:`~probewise.BatchGenerate` for
:func:`~probewise.run_arm` and :func:`~probewise.run_paired`: each batch of prompts
goes out concurrently (at most ``concurrency`` requests in flight), and each
completion comes back :class:`~probewise.Sealed` at once.

What never leaves it: a response body. The completion text is sealed as soon as it
is parsed; a failure is a fresh :class:`~probewise.errors.InferenceServerError`
whose message names the endpoint, the HTTP status and the attempts, built outside
any ``except`` block so that it chains to nothing (no httpx exception, which would
hold the response, rides along as ``__context__``), and returned rather than
raised (so it has no traceback frames). httpx logs one INFO line per request and
httpcore DEBUG lines about connection states: request lines and statuses, never a
body (tests/responses/test_openai_generator.py searches every channel).

The event loop: callers call :meth:`~OpenAICompatibleGenerator.generate_batch`
synchronously; each call runs its own loop with :func:`asyncio.run` and one
``httpx.AsyncClient`` (its connection pool serves every request of the batch).
Called from a thread that is already running a loop (a notebook, an async app),
the batch runs on a short-lived worker thread with its own loop instead, since
``asyncio.run`` refuses to nest. A new loop per batch keeps no thread or socket
alive between batches, so there is nothing to close; the price is one new
connection per slot per batch, small beside a generation.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import math
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, cast, runtime_checkable

from probewise._extras import Extra, requires
from probewise._validation import int_at_least
from probewise.errors import (
    EmptyChoicesError,
    InferenceServerError,
    InvalidInputError,
    MalformedResponseError,
    ServerStatusError,
    ServerTimeoutError,
)
from probewise.responses.classifier import Completion
from probewise.responses.outcome import FinishReason
from probewise.responses.sealed import Sealed

if TYPE_CHECKING:
    import ssl

    import httpx
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
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
_FINISH = {"length": FinishReason.LENGTH, "content_filter": FinishReason.CONTENT_FILTER}


def shown_url(url: str) -> str:
    """``url`` without user info (``user:password@``), as repr and messages show it."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


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
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a "-0000" zone parses as naive
        when = when.replace(tzinfo=datetime.UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _parse(
    content: bytes, *, chat: bool, url: str, attempts: int
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
    finish = (
        _FINISH.get(reason, FinishReason.STOP) if isinstance(reason, str) else FinishReason.STOP
    )
    return Completion(Sealed(text), finish)


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
    server asks for in ``Retry-After`` (seconds or an HTTP date) or else a jittered
    exponential backoff (``backoff`` seconds, doubling per attempt, each wait
    between half and all of that), every wait capped at ``max_wait`` seconds. A
    request keeps its slot while it waits, so a server asking to slow down gets
    fewer requests. ``rng`` draws the jitter (pass a seeded ``random.Random`` for a
    reproducible schedule). ``timeout`` bounds each network operation (connecting,
    sending, and the wait for each read, which for a non-streamed answer is the
    whole generation).

    Results: a 2xx answer gives a :class:`~probewise.Completion` whose text is the
    first choice's (``finish_reason`` ``"length"`` -> ``LENGTH``,
    ``"content_filter"`` -> ``CONTENT_FILTER``, anything else -> ``STOP``; no
    content counts as blank). A prompt that gets none is returned as an
    :class:`~probewise.errors.InferenceServerError`:
    :class:`~probewise.errors.ServerStatusError` (an error status, after the
    retries for the retried ones), :class:`~probewise.errors.ServerTimeoutError`,
    :class:`~probewise.errors.MalformedResponseError` (not JSON, wrong shape),
    :class:`~probewise.errors.EmptyChoicesError`, or the base class when the
    connection failed. :func:`~probewise.run_arm` counts each as
    ``Error(kind=GENERATION)`` with that class as ``exception_type``.

    ``repr`` shows the base URL (without user info) and the model; the API key is
    sent as ``Authorization: Bearer`` and shown nowhere.
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
    ) -> None:
        _url(base_url)
        _text("model", model, what="the server's model name")
        int_at_least("max_tokens", max_tokens, 1)
        int_at_least("concurrency", concurrency, 1)
        int_at_least("retries", retries, 0)
        if batch_size is not None:
            int_at_least("batch_size", batch_size, 1)
        _seconds("temperature", temperature, zero=True)
        _seconds("timeout", timeout, zero=False)
        _seconds("backoff", backoff, zero=True)
        _seconds("max_wait", max_wait, zero=True)
        if api_key is not None:
            _text("api_key", api_key, what="or None")
        if system_prompt is not None:
            _text("system_prompt", system_prompt, what="or None", empty=True)
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
        self.base_url: str = base_url.rstrip("/")
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
        self._batch_size = 4 * concurrency if batch_size is None else batch_size
        self._api_key = api_key
        self._rng = random.Random() if rng is None else rng
        self._path = "/chat/completions" if chat else "/completions"
        self._url = shown_url(self.base_url) + self._path
        self._tls: ssl.SSLContext | None = None

    @property
    def batch_size(self) -> int:
        """Prompts per :meth:`generate_batch` call (what :func:`~probewise.run_arm` hands it)."""
        return self._batch_size

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleGenerator(base_url={shown_url(self.base_url)!r}, "
            f"model={self.model!r}, chat={self.chat}, concurrency={self.concurrency})"
        )

    def __call__(self, prompt: str) -> Completion:
        """One prompt's completion; raises the prompt's :class:`InferenceServerError`."""
        result = self.generate_batch([prompt])[0]
        if isinstance(result, BaseException):
            raise result  # built fresh, outside any except block: it chains to nothing
        return result

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[Completion | BaseException]:
        """One result per prompt, in order: a completion, or the error it got instead."""
        batch = list(prompts)
        for prompt in batch:
            if not isinstance(prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise InvalidInputError(f"prompts must be strings, got a {type(prompt).__name__}")
        if not batch:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the usual case
            return asyncio.run(self._batch(batch))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probewise-http") as pool:
            return pool.submit(asyncio.run, self._batch(batch)).result()

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
        return body

    async def _batch(self, prompts: list[str]) -> list[Completion | BaseException]:
        import httpx

        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        slots = asyncio.Semaphore(self.concurrency)
        if self._tls is None:  # made once (tens of ms), shared by every batch's client
            self._tls = httpx.create_ssl_context()
        async with httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            verify=self._tls,
            timeout=httpx.Timeout(self.timeout),
            limits=limits,
            follow_redirects=False,
        ) as client:
            return list(
                await asyncio.gather(*(self._one(client, slots, prompt) for prompt in prompts))
            )

    async def _one(
        self, client: httpx.AsyncClient, slots: asyncio.Semaphore, prompt: str
    ) -> Completion | BaseException:
        async with slots:
            try:
                return await self._attempts(client, prompt)
            except Exception as error:  # not expected; its message might hold anything
                what = type(error).__name__
            return InferenceServerError(f"failed unexpectedly ({what})", url=self._url, attempts=1)

    async def _attempts(self, client: httpx.AsyncClient, prompt: str) -> Completion | BaseException:
        import httpx

        body = self._body(prompt)
        attempt = 0
        while True:
            attempt += 1
            status: int | None = None
            asked: float | None = None
            kind: type[InferenceServerError]
            try:
                response = await client.post(self._path, json=body)
            except httpx.TimeoutException:
                kind, message = ServerTimeoutError, f"no answer within {self.timeout:g} s"
            except httpx.TransportError as error:
                kind, message = InferenceServerError, f"connection failed ({type(error).__name__})"
            else:
                status = response.status_code
                if response.is_success:
                    return _parse(response.content, chat=self.chat, url=self._url, attempts=attempt)
                asked = _retry_after(response.headers.get("retry-after"))
                del response
                kind, message = ServerStatusError, f"HTTP {status}"
                if not (status in _RETRY_STATUSES or status >= 500):
                    return kind(message, url=self._url, attempts=attempt, status=status)
            if attempt > self.retries:
                return kind(message, url=self._url, attempts=attempt, status=status)
            await asyncio.sleep(self._wait(attempt, asked))

    def _wait(self, attempt: int, asked: float | None) -> float:
        """Seconds before attempt ``attempt + 1``: the server's ask, or a jittered backoff."""
        if asked is not None:
            return min(asked, self.max_wait)
        full = min(self.max_wait, self.backoff * 2.0 ** min(attempt - 1, 64))  # no overflow
        return full / 2.0 + self._rng.uniform(0.0, full / 2.0)


def _url(value: object) -> None:
    parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = repr(shown_url(value)) if isinstance(value, str) else f"a {type(value).__name__}"
        raise InvalidInputError(
            f"base_url must be an http(s) URL such as http://localhost:8000/v1, got {shown}"
        )


def _text(name: str, value: object, *, what: str, empty: bool = False) -> None:
    if not isinstance(value, str) or not (value or empty):
        kind = "a string" if empty else "a non-empty string"
        raise InvalidInputError(f"{name} must be {kind} ({what})")


def _seconds(name: str, value: object, *, zero: bool) -> None:
    bound = ">= 0" if zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
            f"{name} must be a finite number {bound}, got {type(value).__name__}"
        )
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise InvalidInputError(f"{name} must be a finite number {bound}, got {value!r}")


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


class _Generates(Protocol):
    def generate(self, **kwargs: object) -> object: ...


class TransformersGenerator:
    """Greedy (by default) batched generation with a local transformers model.

    Decodes only the new tokens; a completion that reached ``max_new_tokens``
    without an end-of-sequence token is :attr:`FinishReason.LENGTH`. Prompts go
    through the tokenizer's chat template as one user turn when ``chat_template``
    and the tokenizer has one. A batch that fails (out of memory, say) is retried
    prompt by prompt; a prompt that still fails is returned as its exception, which
    :func:`run_arm` counts as ``Error(GENERATION)``. Completions are returned
    :class:`Sealed`, and are never logged.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 128,
        batch_size: int = 8,
        chat_template: bool = True,
        do_sample: bool = False,
    ) -> None:
        if max_new_tokens < 1:
            raise InvalidInputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self._batch_size = batch_size
        self.chat_template = chat_template
        self.do_sample = do_sample

    @property
    def batch_size(self) -> int:
        """Prompts per ``generate`` call."""
        return self._batch_size

    def __repr__(self) -> str:
        return (
            f"TransformersGenerator(model={type(self.model).__name__}, "
            f"max_new_tokens={self.max_new_tokens}, batch_size={self._batch_size})"
        )

    def __call__(self, prompt: str) -> Completion:
        result = self.generate_batch([prompt])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _texts(self, prompts: Sequence[str]) -> list[str]:
        template = getattr(self.tokenizer, "chat_template", None)
        if not (self.chat_template and template):
            return list(prompts)
        texts: list[str] = []
        for prompt in prompts:
            rendered = self.tokenizer.apply_chat_template(  # pyright: ignore[reportUnknownMemberType]
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            texts.append(str(rendered))
        return texts

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(v for v in cast("Sequence[object]", value) if isinstance(v, int))
        return ids

    def _run(self, prompts: Sequence[str]) -> list[Completion]:
        with requires(Extra.TORCH, "TransformersGenerator"):
            import torch

        tokenizer = self.tokenizer
        tokenizer.padding_side = "left"  # decoder-only: new tokens start at one column
        pad_id = tokenizer.pad_token_id
        eos = self._eos_ids()
        if pad_id is None:
            pad_id = min(eos) if eos else 0
            tokenizer.pad_token_id = pad_id
        device = next(self.model.parameters()).device
        encoded = tokenizer(self._texts(prompts), return_tensors="pt", padding=True)
        input_ids = cast("torch.Tensor", encoded["input_ids"]).to(device)
        attention_mask = cast("torch.Tensor", encoded["attention_mask"]).to(device)
        with torch.no_grad():
            output = cast(
                "torch.Tensor",
                cast("_Generates", self.model).generate(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=self.do_sample,
                    pad_token_id=pad_id,
                ),
            )
        new_tokens = cast("list[list[int]]", output[:, input_ids.shape[1] :].tolist())  # pyright: ignore[reportUnknownMemberType]
        completions: list[Completion] = []
        for row in new_tokens:
            cut = next((i for i, token in enumerate(row) if token in eos), None)
            finish = FinishReason.LENGTH if cut is None else FinishReason.STOP
            kept = row if cut is None else row[:cut]
            text: object = tokenizer.decode(kept, skip_special_tokens=True)  # pyright: ignore[reportUnknownMemberType]
            completions.append(Completion(Sealed(str(text)), finish))
        return completions

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[Completion | BaseException]:
        """One completion (or exception) per prompt; a failed batch is retried one by one."""
        try:
            return self._run(prompts)
        except Exception:
            if len(prompts) == 1:
                raise
        results: list[Completion | BaseException] = []
        for prompt in prompts:
            try:
                results.extend(self._run([prompt]))
            except Exception as error:
                results.append(error)
        return results
