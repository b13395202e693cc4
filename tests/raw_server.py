"""A server that writes bytes, not HTTP: for the answers no HTTP library will send (a Content-Length
longer than the body, broken chunked encoding, a body that trickles in forever, header values with raw
spaces and non-ASCII bytes). A real TCP server on a loopback port, one thread per connection; every
request's Host and path are logged, so what a crawl asked for is checked from the server's side.

An answer is bytes written as they are, or a function of the connection that writes what it likes.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

Writer = Callable[[socket.socket], None]
COUNTED_BYTES = 64 * 1024  # an answer this small leaves in one write, whatever the client does
Answer = bytes | Writer


@dataclass(slots=True)
class RawHit:
    host: str
    path: str
    at: float


@dataclass
class RawServer:
    """Answers are keyed (host, path); (host, "*") matches any path of the host. Unknown: 404."""

    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    hits: list[RawHit] = field(default_factory=list)
    port: int = 0
    # Each answer of up to COUNTED_BYTES is held `hold_s` before it is written and counted while held, so
    # a second request that arrives meanwhile shows; larger answers (a 10 MB robots.txt) are not counted:
    # the crawler may stop reading one at its cap and go on while the server is still blocked writing it.
    hold_s: float = 0.0
    most_at_once: int = 0  # answers being held or written at one time, at most (a trickle's not counted)
    overlaps: list[list[str]] = field(default_factory=list)  # "host path" of answers written together
    _active: dict[int, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socketserver.ThreadingTCPServer | None = None

    def route(self, host: str, path: str, answer: Answer) -> None:
        self.answers[(host, path)] = answer

    def requests_to(self, host: str) -> list[str]:
        return [h.path for h in self.hits if h.host == host]

    def _serve_one(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ")
        path = parts[1] if len(parts) > 1 else "/"
        host = ""
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "host":
                host = value.strip().rsplit(":", 1)[0].lower()
        self.hits.append(RawHit(host, path, time.time()))
        answer = self.answers.get((host, path), self.answers.get((host, "*")))
        if answer is None:
            answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        if not isinstance(answer, bytes):
            answer(conn)
            return
        if len(answer) > COUNTED_BYTES:
            conn.sendall(answer)
            return
        with self._lock:
            self._active[id(conn)] = f"{host} {path}"
            self.most_at_once = max(self.most_at_once, len(self._active))
            if len(self._active) > 1:
                self.overlaps.append(sorted(self._active.values()))
        try:
            time.sleep(self.hold_s)
            conn.sendall(answer)
        finally:
            with self._lock:
                del self._active[id(conn)]

    def __enter__(self) -> RawServer:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with contextlib.suppress(OSError):  # the crawler hung up: that is its right
                    outer._serve_one(self.request)

        socketserver.ThreadingTCPServer.daemon_threads = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def http(status: str, body: bytes, *headers: str, close: bool = True) -> bytes:
    """A whole answer as bytes: the status line, the headers as given, then the body."""
    head = [f"HTTP/1.1 {status}", *headers, *(["Connection: close"] if close else [])]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def trickle(head: bytes, byte_every_s: float, for_s: float) -> Writer:
    """The head, then one byte every `byte_every_s` for at most `for_s` seconds (or until hung up)."""

    def write(conn: socket.socket) -> None:
        conn.sendall(head)
        ends = time.monotonic() + for_s
        while time.monotonic() < ends:
            conn.sendall(b"x")
            time.sleep(byte_every_s)

    return write


@pytest.fixture(name="raw")
def raw_server_fixture() -> Iterator[RawServer]:
    with RawServer() as srv:
        yield srv
