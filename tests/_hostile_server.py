"""A hostile OpenAI-compatible server on 127.0.0.1: raw sockets, so it can break HTTP.

The prompt's part before the first ``:`` picks the behaviour, as in
``tests/_http_server.py``; every byte it sends that is not protocol carries
``CANARY``, so a test can search every channel for it. Bounded: at most
``max_connections`` connections (each closed after ``socket_timeout`` seconds of
silence), every slow behaviour stops after ``slow_seconds`` or when the server
stops, and handler threads are daemons that never print.

Behaviours:

- ``stop``: a well-formed answer (finish_reason ``stop``).
- ``finish-X``: a well-formed answer whose finish_reason is ``X``
  (``finish-none`` sends null, ``finish-absent`` leaves the field out).
- ``short``: a Content-Length shorter than the body: the rest (canary bytes)
  stays on the connection, which is kept alive for the next request.
- ``nocontent``: a 204 that carries a body anyway (kept alive).
- ``statusline``: canary bytes where the status line should be.
- ``reason``: a 500 whose reason phrase and a header hold the canary.
- ``big``: a 200 whose body is ``big_bytes`` long (Content-Length given).
- ``endless``: a chunked 200 whose chunks never end (until ``slow_seconds``).
- ``gzipbomb``: a small gzip body that inflates to ``big_bytes``.
- ``dribble``: a whole answer, one byte every ``dribble_seconds``.
- ``slowheaders``: the status line and headers, one byte every ``dribble_seconds``.
- ``interim``: ``102 Processing`` interim responses, one every ``dribble_seconds``.
- ``retryyear``: a 429 whose Retry-After is a date past the calendar, then stop.
"""

from __future__ import annotations

import gzip
import json
import socket
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from _http_server import base_url, started

CANARY = "zq-canary-5d1c8a"
_STOP = f"Here is the answer you asked for. {CANARY}"


def answer(chat: bool, finish: object = "stop", *, absent: bool = False) -> bytes:
    """A well-formed completion document holding the canary."""
    choice: dict[str, object] = (
        {"index": 0, "message": {"role": "assistant", "content": _STOP}}
        if chat
        else {"index": 0, "text": _STOP}
    )
    if not absent:
        choice["finish_reason"] = finish
    return json.dumps({"id": CANARY, "choices": [choice]}).encode()


def _event(chat: bool, text: str | None, finish: object = None) -> bytes:
    """One server-sent event of a streamed completion."""
    choice: dict[str, object] = (
        {"index": 0, "delta": {} if text is None else {"content": text}}
        if chat
        else {"index": 0, "text": text or ""}
    )
    choice["finish_reason"] = finish
    return b"data: " + json.dumps({"id": CANARY, "choices": [choice]}).encode() + b"\n\n"


# Streamed behaviours (asked with "stream": true; any other answers a stream request
# with one JSON body, as a server that does not stream would).
STREAMED = frozenset(
    {"sse", "sselong", "ssejunk", "sseerror", "ssebig", "ssedribble", "ssegzip", "ssenofinish"}
)


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.max_connections = 200
        self.socket_timeout = 5.0
        self.slow_seconds = 4.0
        self.dribble_seconds = 0.2
        self.big_bytes = 4 * 1024 * 1024
        self.connections = 0
        self.requests = 0
        self.attempts: Counter[str] = Counter()
        self.auth: list[str | None] = []
        self.streams_cut = 0  # streams the client closed before their end
        self._bomb: tuple[int, bytes] | None = None

    def bomb(self) -> bytes:
        """The ``gzipbomb`` body (made once: call it before measuring memory)."""
        if self._bomb is None or self._bomb[0] != self.big_bytes:
            inflated = b'{"choices": [' + b" " * self.big_bytes + CANARY.encode()
            self._bomb = (self.big_bytes, gzip.compress(inflated))
        return self._bomb[1]

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up closes its socket: never printed

    def verify_request(self, request: object, client_address: object) -> bool:
        with self.lock:
            self.connections += 1
            return self.connections <= self.max_connections


def _read_request(stream: socket.socket, pending: bytearray) -> tuple[dict[str, str], bytes] | None:
    """One request's headers (lower-cased names) and body, or None at end of stream."""
    while b"\r\n\r\n" not in pending:
        data = stream.recv(65536)
        if not data:
            return None
        pending += data
    head, _, rest = bytes(pending).partition(b"\r\n\r\n")
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = bytearray(rest)
    while len(body) < length:
        data = stream.recv(65536)
        if not data:
            return None
        body += data
    pending[:] = body[length:]
    return headers, bytes(body[:length])


class _Handler(socketserver.BaseRequestHandler):
    server: HostileServer
    request: socket.socket

    def handle(self) -> None:
        self.request.settimeout(self.server.socket_timeout)
        pending = bytearray()
        while not self.server.stopping.is_set():
            read = _read_request(self.request, pending)
            if read is None:
                return
            headers, body = read
            document = json.loads(body)
            chat = "messages" in document
            prompt = str(document["messages"][-1]["content"] if chat else document["prompt"])
            behaviour = prompt.split(":", 1)[0]
            with self.server.lock:
                self.server.requests += 1
                self.server.attempts[prompt] += 1
                attempt = self.server.attempts[prompt]
                self.server.auth.append(headers.get("authorization"))
            if document.get("stream") is True and (
                behaviour in STREAMED or behaviour.startswith("ssefinish-")
            ):
                self.stream(behaviour, chat)
                return
            if not self.respond(behaviour, chat, attempt):
                return

    def send(self, data: bytes) -> None:
        self.request.sendall(data)

    def waiting(self) -> Iterator[None]:
        """One step per ``dribble_seconds``, for at most ``slow_seconds`` (or until stopped)."""
        end = time.monotonic() + self.server.slow_seconds
        while time.monotonic() < end and not self.server.stopping.wait(self.server.dribble_seconds):
            yield

    def slowly(self, data: bytes) -> None:
        for i, _ in zip(range(len(data)), self.waiting(), strict=False):
            self.send(data[i : i + 1])

    def stream(self, behaviour: str, chat: bool) -> None:
        """Answer with server-sent events, then close the connection."""
        encoding = "Content-Encoding: gzip\r\n" if behaviour == "ssegzip" else ""
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{encoding}\r\n"
        events = [b": a comment line\n\n", _event(chat, None)]
        events += [_event(chat, word) for word in _STOP.split(" ")]
        finish: object = behaviour.removeprefix("ssefinish-") if "finish-" in behaviour else "stop"
        try:
            self.send(head.encode())
            if behaviour == "ssedribble":
                self.slowly(b"".join(events))
            elif behaviour == "ssejunk":
                self.send(events[2] + f"data: not json {CANARY}\n\n".encode())
            elif behaviour == "sseerror":
                self.send(
                    events[2] + b'data: {"error": {"message": "' + CANARY.encode() + b'"}}\n\n'
                )
            elif behaviour in ("sselong", "ssebig"):
                # Words (sselong) or long runs of the canary (ssebig), until the client
                # closes the stream or slow_seconds pass; never a finish_reason.
                word = f" {CANARY} and more" if behaviour == "sselong" else CANARY * 4096
                self.send(b"".join(events[:-1]))
                end = time.monotonic() + self.server.slow_seconds
                while time.monotonic() < end and not self.server.stopping.wait(0.001):
                    self.send(_event(chat, word))
            elif behaviour == "ssenofinish":
                self.send(b"".join(events) + b"data: [DONE]\n\n")
            else:
                data = b"".join(events) + _event(chat, None, finish) + b"data: [DONE]\n\n"
                self.send(data if chat else data.replace(b"\n", b"\r\n"))  # both line ends
        except OSError:  # the client closed the stream
            with self.server.lock:
                self.server.streams_cut += 1

    def head(self, status: str, length: int | None, extra: str = "") -> bytes:
        sized = "" if length is None else f"Content-Length: {length}\r\n"
        return (
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{sized}{extra}\r\n"
        ).encode()

    def respond(self, behaviour: str, chat: bool, attempt: int) -> bool:
        """Answer one request; False closes the connection."""
        server = self.server
        if behaviour.startswith("finish-"):
            value = behaviour.removeprefix("finish-")
            body = answer(chat, None if value == "none" else value, absent=value == "absent")
            self.send(self.head("200 OK", len(body)) + body)
        elif behaviour == "short":
            body = answer(chat)
            self.send(self.head("200 OK", len(body)) + body + f"{CANARY} left over".encode())
        elif behaviour == "nocontent":
            self.send(self.head("204 No Content", None) + f"{CANARY} in a 204".encode())
        elif behaviour == "statusline":
            self.send(f"{CANARY} is no status line\r\n\r\n".encode())
            return False
        elif behaviour == "reason":
            self.send(self.head(f"500 {CANARY}", 2, f"X-Note: {CANARY}\r\n") + b"{}")
        elif behaviour == "big":
            chunk = (CANARY * 4096).encode()
            self.send(self.head("200 OK", server.big_bytes))
            sent = 0
            while sent < server.big_bytes and not server.stopping.is_set():
                part = chunk[: server.big_bytes - sent]
                self.send(part)
                sent += len(part)
        elif behaviour == "endless":
            self.send(self.head("200 OK", None, "Transfer-Encoding: chunked\r\n"))
            chunk = (CANARY * 4096).encode()
            end = time.monotonic() + server.slow_seconds
            while time.monotonic() < end and not server.stopping.wait(0.001):
                self.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            return False
        elif behaviour == "gzipbomb":
            body = server.bomb()
            self.send(self.head("200 OK", len(body), "Content-Encoding: gzip\r\n") + body)
        elif behaviour == "dribble":
            body = answer(chat)
            self.slowly(self.head("200 OK", len(body)) + body)
            return False
        elif behaviour == "slowheaders":
            body = answer(chat)
            self.slowly(self.head("200 OK", len(body)))
            self.send(body)
            return False
        elif behaviour == "interim":
            for _ in self.waiting():
                self.send(b"HTTP/1.1 102 Processing\r\n\r\n")
            return False
        elif behaviour == "retryyear" and attempt == 1:
            when = "Fri, 31 Dec 9999999999 23:59:59 GMT"
            self.send(self.head("429 Too Many Requests", 2, f"Retry-After: {when}\r\n") + b"{}")
        else:
            body = answer(chat)
            self.send(self.head("200 OK", len(body)) + body)
        return True


@contextmanager
def hostile() -> Iterator[HostileServer]:
    """A started hostile server; stopped (and its slow handlers released) on exit."""
    with started(HostileServer()) as server:
        yield server


def hostile_url(server: HostileServer, userinfo: str = "") -> str:
    return base_url(server, userinfo)
