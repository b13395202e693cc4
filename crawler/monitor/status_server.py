"""`--status-port`: the live status page, /api/status (JSON) and /metrics (Prometheus), served from a thread.

Requests are answered from a thread of their own, never on the reactor: a poll reads the latest snapshot
(one reference, replaced once per second by monitor/status.py) and encodes it, so watching the crawl does
not slow it. The server keeps serving the final snapshot until the process exits (`--status-linger`
keeps the process up for a last look or a last Prometheus scrape after the run directory is written).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any, Self

from prometheus_client import CONTENT_TYPE_LATEST
from rich.console import Console
from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.monitor.metrics import metrics_registry, render
from crawler.monitor.status import CrawlStatus
from crawler.run.crawl_config import ConfigError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

PAGE = "status_page.html"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_SERVING: list[StatusServer] = []  # servers of this process, for `linger`


def page_html() -> bytes:
    return resources.files("crawler.monitor").joinpath(PAGE).read_bytes()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        owner = self.server.owner
        if path in ("/", "/index.html"):
            self._send(200, "text/html; charset=utf-8", owner.page)
        elif path == "/api/status":
            self._send(200, "application/json", json.dumps(owner.snapshot()).encode())
        elif path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, render(owner.registry))
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /, /api/status or /metrics\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("status %s - %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: StatusServer


class _Server6(_Server):
    address_family = socket.AF_INET6


def listen(bind: str, port: int) -> _Server:
    """A server bound to (bind, port), not yet serving; ConfigError says why it cannot be."""
    server = _Server6 if ":" in bind else _Server
    try:
        return server((bind, port), _Handler)
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"--status-port {port}: cannot listen on {bind}: {reason}") from None


def check_listen(bind: str, port: int | None) -> None:
    """Before anything is written: the page's port can be had (a busy port is a bad flag, exit 2)."""
    if port is not None:
        listen(bind, port).server_close()


class StatusServer:
    """Scrapy extension, on when HOSTCRAWL_STATUS_PORT is set (0: a free port); prints the page's URL."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        port = settings.get("HOSTCRAWL_STATUS_PORT")
        if port in (None, ""):
            raise NotConfigured
        self.crawler = crawler
        self.status: CrawlStatus | None = None
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        self.page = page_html()
        self.registry = metrics_registry(self.snapshot)
        bind = settings.get("HOSTCRAWL_STATUS_BIND") or "127.0.0.1"
        try:
            self.httpd = listen(bind, int(port))
        except ConfigError as exc:  # taken since the command checked it: crawl on, without the page
            logger.error("no status page: %s", exc)
            Console(stderr=True).print(f"[red]no status page:[/] {exc}", highlight=False)
            raise NotConfigured(str(exc)) from None
        self.httpd.owner = self
        host, bound = str(self.httpd.server_address[0]), self.httpd.server_address[1]
        self.url = f"http://[{host}]:{bound}/" if ":" in host else f"http://{host}:{bound}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="hostcrawl-status", daemon=True)
        self.thread.start()
        _SERVING.append(self)
        note = "" if bind in LOOPBACK else "  (not loopback: anyone who can reach it can read it)"
        logger.info("status page: %s  (/api/status, /metrics)%s", self.url, note)
        Console(stderr=True).print(f"status page: {self.url}{note}", highlight=False, soft_wrap=True)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def engine_started(self) -> None:
        self.status = self.crawler.get_extension(CrawlStatus)

    def snapshot(self) -> dict[str, Any]:
        status = self.status  # read from the server's threads: one reference, swapped whole
        return status.snapshot if status is not None else {"state": "starting"}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self in _SERVING:
            _SERVING.remove(self)


def linger(seconds: float) -> None:
    """Keep this process's status pages up `seconds` longer (Ctrl-C ends it), then close them."""
    if not _SERVING:
        return
    if seconds > 0:
        urls = ", ".join(server.url for server in _SERVING)
        Console(stderr=True).print(f"status page {urls} stays up {seconds:.0f}s (Ctrl-C to quit)")
        # Scrapy's shutdown handlers outlive its reactor and would swallow Ctrl-C and SIGTERM here
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(seconds)
    for server in list(_SERVING):
        server.close()
