"""A small OpenAI-compatible server on 127.0.0.1 for the generator and ``probewise arms`` tests.

The prompt picks the answer: its part before the first ``:`` names a behaviour
(``stop:3`` and ``stop:4`` both answer "stop"). Every reply that carries text
carries ``CANARY``, so tests can search every channel for it. The server is bounded:
it answers at most ``max_requests`` requests (503 after that), a slow answer sleeps
at most ``slow_seconds`` and gives up early when the server stops, and handler
threads are daemons that never print.

Behaviours: stop, refuse, deflect, length, empty, filter (no content,
``content_filter``), e500 (always 500), e404, e429 (429 with ``Retry-After`` on a
prompt's first attempt, then stop), flaky (500 on a prompt's first attempt, then
stop), slow (sleeps, then stop), malformed (a 200 body that is not JSON), nochoices
(``choices: []``), shape (a choice whose content is not a string), hold (waits
``hold_seconds``, then stop: for counting concurrent requests).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol, TypeVar

CANARY = "zq-canary-5d1c8a"

_TEXTS = {
    "stop": f"Sure, here is the answer you asked for. {CANARY}",
    "refuse": f"I can't help with that. {CANARY}",
    "deflect": f"I'd recommend speaking with a licensed professional. {CANARY}",
    "length": f"Of course! The function below sorts the list in place and {CANARY}",
    "empty": "",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops simultaneous connects (1 s SYN retries)

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.max_requests = 400
        self.slow_seconds = 1.0
        self.hold_seconds = 0.05
        self.retry_after = "0"
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict[str, object]] = []
        self.paths: list[str] = []
        self.auth: list[str | None] = []
        self.handler_errors = 0

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that timed out closes its socket; writing then fails. Counted, never printed.
        with self.lock:
            self.handler_errors += 1


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # the base's name
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _reply(self, behaviour: str, chat: bool) -> None:
        if behaviour == "filter":
            text: str | None = None
            finish = "content_filter"
        else:
            text = _TEXTS.get(behaviour, _TEXTS["stop"])
            finish = "length" if behaviour == "length" else "stop"
        choice: dict[str, object] = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            if chat
            else {"index": 0, "text": text, "finish_reason": finish}
        )
        document = {"id": CANARY, "object": "chat.completion", "choices": [choice]}
        self._send(200, json.dumps(document).encode())

    def do_POST(self) -> None:
        server = self.server
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        chat = self.path.endswith("/chat/completions")
        prompt = str(body["messages"][-1]["content"] if chat else body["prompt"])
        behaviour = prompt.split(":", 1)[0]
        with server.lock:
            server.requests += 1
            over = server.requests > server.max_requests
            server.attempts[prompt] += 1
            attempt = server.attempts[prompt]
            server.bodies.append(body)
            server.paths.append(self.path)
            server.auth.append(self.headers.get("Authorization"))
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            if over:
                self._send(503, b"{}")
            elif behaviour == "e500":
                self._send(500, json.dumps({"error": CANARY}).encode())
            elif behaviour == "e404":
                self._send(404, json.dumps({"error": CANARY}).encode())
            elif behaviour == "e429" and attempt == 1:
                self._send(
                    429, json.dumps({"error": CANARY}).encode(), {"Retry-After": server.retry_after}
                )
            elif behaviour == "flaky" and attempt == 1:
                self._send(503, json.dumps({"error": CANARY}).encode())
            elif behaviour == "malformed":
                self._send(200, f'{{"choices": [{{"text": "{CANARY}'.encode())
            elif behaviour == "nochoices":
                self._send(200, json.dumps({"choices": [], "note": CANARY}).encode())
            elif behaviour == "shape":
                choice = {"message": {"content": [CANARY]}} if chat else {"text": [CANARY]}
                self._send(200, json.dumps({"choices": [choice]}).encode())
            else:
                if behaviour == "slow":
                    server.stopping.wait(server.slow_seconds)
                elif behaviour == "hold":
                    server.stopping.wait(server.hold_seconds)
                self._reply(behaviour, chat)
        finally:
            with server.lock:
                server.in_flight -= 1


class _Stoppable(Protocol):
    stopping: threading.Event
    server_address: tuple[str | bytes | bytearray, int] | tuple[object, ...]

    def serve_forever(self, poll_interval: float = ...) -> None: ...
    def shutdown(self) -> None: ...
    def server_close(self) -> None: ...


S = TypeVar("S", bound=_Stoppable)


@contextmanager
def started(server: S) -> Iterator[S]:
    """``server`` serving on a daemon thread; on exit its slow handlers are released
    (``server.stopping``), and it is shut down and closed."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serving() -> Iterator[_Server]:
    """A started server (``server.server_address`` has its port); stopped on exit."""
    with started(_Server()) as server:
        yield server


def base_url(server: _Stoppable, userinfo: str = "") -> str:
    """The server's ``/v1`` URL (with ``userinfo``, e.g. ``"user:pw@"``, before the host)."""
    host, port = server.server_address[:2]
    return f"http://{userinfo}{host!s}:{port}/v1"
