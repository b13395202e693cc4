"""Purpose-built misbehaving servers for the hostile-server tests: a real aiohttp server on a loopback
port, in a thread of the test process, whose answers a test writes as plain handlers, and which logs
every request it receives (host, path, time), so what a crawl did is checked from the server's side.

It answers origin-form requests (a crawl that reaches it through a hosts file) and absolute-form
ones (a crawl that uses it as its `--proxy`) alike; the logged host is the one the client asked for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Hit:
    host: str
    path: str
    at: float  # time.time() the request arrived
    user_agent: str


@dataclass
class HostileServer:
    """Routes are (host, path) -> handler; (host, "*") matches any path of a host, ("*", path) any host."""

    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.ServerRunner | None = None

    def route(self, host: str, path: str, handler: Handler) -> None:
        self.routes[(host, path)] = handler

    def requests_to(self, host: str) -> list[Hit]:
        return [h for h in self.hits if h.host == host]

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        host = (request.host or "").lower().rsplit(":", 1)[0] if request.host else ""
        self.hits.append(Hit(host, request.path_qs, time.time(), request.headers.get("User-Agent", "")))
        for key in ((host, request.path), (host, "*"), ("*", request.path), ("*", "*")):
            if key in self.routes:
                return await self.routes[key](request)
        return web.Response(status=404, text="not here\n")

    def __enter__(self) -> HostileServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def start() -> None:
                self._runner = web.ServerRunner(web.Server(self._handle), shutdown_timeout=1.0)
                await self._runner.setup()
                site = web.TCPSite(self._runner, "127.0.0.1", 0)
                await site.start()
                self.port = int(self._runner.addresses[0][1])

            loop.run_until_complete(start())
            ready.set()
            loop.run_forever()
            assert self._runner is not None
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


def answer(status: int = 200, body: bytes | str = b"", **headers: str) -> Handler:
    """A handler that always gives the same answer."""
    data = body.encode() if isinstance(body, str) else body

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(
            status=status, body=data, headers={k.replace("_", "-"): v for k, v in headers.items()}
        )

    return handler


def html_page(title: str, links: list[str] | tuple[str, ...] = (), words: int = 400) -> str:
    """A plain page with enough prose for the cleaner to keep, and the given links."""
    prose = " ".join(
        [
            "The",
            "committee",
            "published",
            "its",
            "annual",
            "report",
            "on",
            "regional",
            "water",
            "quality",
            "and",
            "the",
            "measures",
            "it",
            "proposes.",
        ]
        * (words // 15 + 1)
    )
    anchors = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1><p>{prose}</p><ul>{anchors}</ul></body></html>"
    )


@pytest.fixture(name="server")
def hostile_server_fixture() -> Iterator[HostileServer]:
    """A fresh server per test (its routes and its request log are the test's own)."""
    with HostileServer() as srv:
        yield srv
