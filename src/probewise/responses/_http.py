"""One HTTP exchange for :class:`~probewise.OpenAICompatibleGenerator`, bounded and quiet.

What a hostile (or broken) server cannot do through this module:

- *Hold a slot.* Each attempt runs under one deadline (:func:`asyncio.timeout`)
  covering the connect, the request, the status line and headers, any number of
  interim (1xx) responses, and the body: a server that sends a byte at a time,
  or ``102 Processing`` forever, is cut off when the deadline passes.
- *Fill memory.* The body is streamed undecoded and refused past ``cap`` bytes (a
  Content-Length above the cap is refused before any of it is read); a gzip or
  deflate body is inflated in pieces and refused past ``cap`` inflated bytes. Any
  other Content-Encoding is refused.
- *Leave bytes for the next request.* Every request says ``Connection: close``
  and the pool keeps no idle connection, so no connection is used twice: bytes a
  short Content-Length (or a 204 with a body) leave behind are dropped with the
  socket, never read as the next response's status line.
- *Reach a log.* httpx logs one INFO line per request (with the reason phrase) and
  httpcore DEBUG lines that quote response headers and exceptions (an h11
  "illegal status line" error quotes the bytes it got). While a generator's batch
  runs, a filter on those loggers (:class:`_Quiet`, installed on them once, and
  doing nothing to any other caller's requests) rewrites each of its records to
  the event name, the method, the URL without user info and the status code.
- *Ride out on an exception.* What comes back is a :class:`Reply` or a
  :class:`Failure` member, never an httpx exception (whose message may quote the
  bytes); the caller builds its own error from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import logging
import urllib.parse
import zlib
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, final

import attrs

if TYPE_CHECKING:
    import httpx

__all__ = ["Failure", "Reply", "Streamed", "exchange", "quiet_logs", "shown_url", "stream_exchange"]

# Every logger httpx and httpcore write to (httpcore names one per module).
_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("probewise_quiet", default=False)
_CHUNK = 65536


def shown_url(url: str) -> str:
    """``url`` without user info (``user:password@``), as repr and messages show it."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


class _Quiet(logging.Filter):
    """Rewrites httpx's and httpcore's records made inside :func:`quiet_logs`.

    httpx's request line keeps its method, URL (without user info) and status code
    and drops the reason phrase; an httpcore trace line keeps its event name
    (``receive_response_headers.failed``) and drops what it quoted (headers, an
    exception's message). Records made outside :func:`quiet_logs` pass unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not _QUIET.get():
            return True
        args = record.args
        if (
            record.name == "httpx"
            and isinstance(args, tuple)
            and len(args) == 5
            and isinstance(args[3], int)
        ):
            record.msg = "HTTP Request: %s %s %d"
            record.args = (str(args[0]), shown_url(str(args[1])), args[3])
        else:
            event = str(record.msg).split(" ", 1)[0][:80]
            record.msg = f"{event} (details withheld by probewise)"
            record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


_FILTER = _Quiet()


@contextlib.contextmanager
def quiet_logs() -> Generator[None]:
    """httpx's and httpcore's records made inside (in this context, and in the tasks
    it starts) hold no header, body, exception message or URL user info."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


class Failure(enum.Enum):
    """Why an exchange gave no reply."""

    TIMEOUT = "timeout"
    """The deadline passed."""
    CONNECTION = "connection"
    """The connection failed, or the server broke the protocol."""
    TOO_LARGE = "too_large"
    """The body (or its inflated form) passed the cap."""
    ENCODING = "encoding"
    """A Content-Encoding that is not gzip or deflate, or a body that does not inflate."""


@final
@attrs.frozen(kw_only=True)
class Reply:
    """A response: its status, its ``Retry-After`` header, and (for a 2xx) its body."""

    status: int
    retry_after: str | None
    body: bytes | None = attrs.field(repr=False)


def _inflate(raw: bytes, encoding: str, cap: int) -> bytes | Failure:
    """``raw`` decoded per its Content-Encoding, at most ``cap`` bytes of it."""
    if encoding in ("", "identity"):
        return raw
    if encoding in ("gzip", "x-gzip"):
        modes = [zlib.MAX_WBITS | 16]
    elif encoding == "deflate":  # zlib-wrapped as the RFC says, or raw as some servers send
        modes = [zlib.MAX_WBITS, -zlib.MAX_WBITS]
    else:
        return Failure.ENCODING
    for mode in modes:
        inflater = zlib.decompressobj(mode)
        out = bytearray()
        pending = raw
        try:
            while pending:
                out += inflater.decompress(pending, cap + 1 - len(out))
                if len(out) > cap:
                    return Failure.TOO_LARGE
                pending = inflater.unconsumed_tail
            out += inflater.flush(cap + 1 - len(out))
        except zlib.error:
            continue
        if len(out) > cap:
            return Failure.TOO_LARGE
        return bytes(out)
    return Failure.ENCODING


async def _body(response: httpx.Response, cap: int) -> bytes | Failure:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:  # refused before a byte of it is read
        return Failure.TOO_LARGE
    raw = bytearray()
    async for chunk in response.aiter_raw(_CHUNK):
        raw += chunk
        if len(raw) > cap:
            return Failure.TOO_LARGE
    encoding = response.headers.get("content-encoding", "").strip().lower()
    return _inflate(bytes(raw), encoding, cap)


async def exchange(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, object],
    *,
    deadline: float,
    cap: int,
) -> Reply | Failure:
    """POST ``body`` as JSON to ``path``: the reply, or why there is none.

    ``deadline`` (seconds) bounds the whole exchange; ``cap`` bounds the body in
    bytes, before and after inflating.
    """
    import httpx

    failure: Failure | None = None
    try:
        async with asyncio.timeout(deadline):
            async with client.stream("POST", path, json=body) as response:
                status = response.status_code
                retry_after = response.headers.get("retry-after")
                if not response.is_success:
                    return Reply(status=status, retry_after=retry_after, body=None)
                content = await _body(response, cap)
                if isinstance(content, Failure):
                    return content
                return Reply(status=status, retry_after=retry_after, body=content)
    except (TimeoutError, httpx.TimeoutException):
        failure = Failure.TIMEOUT
    except httpx.TransportError:  # its message may quote what the server sent: dropped
        failure = Failure.CONNECTION
    return failure


class Streamed(enum.Enum):
    """How a stream of server-sent events ended (its events went to the caller's feed)."""

    DONE = "done"
    """The server sent ``data: [DONE]``."""
    CLOSED = "closed"
    """The server closed the stream without ``[DONE]``."""
    STOPPED = "stopped"
    """The feed asked to stop: the stream was closed from this side."""


def _events(buffer: bytearray, feed: Callable[[bytes], bool]) -> Streamed | None:
    """Hands each complete event's data in ``buffer`` to ``feed`` (and removes it):
    ``DONE`` at ``[DONE]``, ``STOPPED`` when ``feed`` says to stop, else None."""
    while True:
        end = buffer.find(b"\n\n")
        if end < 0:
            return None
        event = bytes(buffer[:end])
        del buffer[: end + 2]
        data = [
            line[5:].removeprefix(b" ")
            for line in event.split(b"\n")
            if line.startswith(b"data:")  # comments (":"), "event:", "id:", "retry:": skipped
        ]
        if not data:
            continue
        payload = b"\n".join(data)
        if payload.strip() == b"[DONE]":
            return Streamed.DONE
        if feed(payload):
            return Streamed.STOPPED


async def _stream(
    response: httpx.Response, cap: int, feed: Callable[[bytes], bool]
) -> Streamed | Failure:
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):  # asked for identity: a server that packs anyway
        return Failure.ENCODING
    read = 0
    buffer = bytearray()
    pending = b""  # a CR that ended a chunk: it may start a CR LF
    async for chunk in response.aiter_raw(_CHUNK):
        read += len(chunk)
        if read > cap:
            return Failure.TOO_LARGE
        piece, pending = pending + chunk, b""
        if piece.endswith(b"\r"):
            piece, pending = piece[:-1], b"\r"
        buffer += piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        ended = _events(buffer, feed)
        if ended is not None:
            return ended
    buffer += b"\n" * len(pending) + b"\n\n"  # a last event without its blank line
    ended = _events(buffer, feed)
    return Streamed.CLOSED if ended is None else ended


async def stream_exchange(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, object],
    *,
    deadline: float,
    cap: int,
    feed: Callable[[bytes], bool],
) -> Reply | Streamed | Failure:
    """POST ``body`` (which asks for a stream) as JSON to ``path`` and read the
    server-sent events, each event's data to ``feed`` (which returns True to stop:
    the stream is closed then, with its connection). Under the same bounds as
    :func:`exchange`: ``deadline`` over the whole exchange, ``cap`` on the bytes of
    the stream; the stream is asked for unpacked (a packed one is refused). A server
    that answers with a whole JSON body instead (it does not stream) gives a
    :class:`Reply` with that body, as :func:`exchange` would.
    """
    import httpx

    failure: Failure | None = None
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
    try:
        async with asyncio.timeout(deadline):
            async with client.stream("POST", path, json=body, headers=headers) as response:
                status = response.status_code
                retry_after = response.headers.get("retry-after")
                if not response.is_success:
                    return Reply(status=status, retry_after=retry_after, body=None)
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind != "text/event-stream":
                    content = await _body(response, cap)
                    if isinstance(content, Failure):
                        return content
                    return Reply(status=status, retry_after=retry_after, body=content)
                return await _stream(response, cap, feed)
    except (TimeoutError, httpx.TimeoutException):
        failure = Failure.TIMEOUT
    except httpx.TransportError:  # its message may quote what the server sent: dropped
        failure = Failure.CONNECTION
    return failure
