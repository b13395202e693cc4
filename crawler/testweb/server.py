"""The aiohttp server: every virtual host on one port, reached as a proxy; logs every request."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import struct
import time
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from crawler.testweb.config import TestWebConfig
from crawler.testweb.hostile import HUGE_BYTES, build_gzip_bomb, huge_chunks
from crawler.testweb.model import SiteModel
from crawler.testweb.politeness_hosts import (
    ADDRESSES_FILE,
    ROBOTS_429_RETRY_AFTER,
    ROBOTS_429_TIMES,
    addresses,
)
from crawler.testweb.revisions import not_modified, validators, with_validators
from crawler.testweb.site import Rendered

FLUSH_INTERVAL_S = 0.25  # request log reaches disk at least this often
STOP_GRACE_S = 1.0  # in-flight responses (slow hosts, huge pages) get this long at shutdown
HOSTS_FILE = "hosts.parquet"
PAGES_FILE = "pages.parquet"
DUPLICATES_FILE = "duplicates.parquet"  # planted copies, when the test web plants any
REQUESTS_FILE = "requests.jsonl"
CONFIG_FILE = "testweb-config.json"
SEEDS_FILE = "seeds.txt"  # every host's home page, one per line: `hostcrawl crawl --seeds` reads it
CLIENT_GONE_STATUS = 499  # logged when a client disconnects before any status was sent


def write_ground_truth(model: SiteModel, out_dir: Path) -> None:
    """hosts.parquet, pages.parquet and the config, so every label can be traced to its seed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    hosts = model.hosts_frame()
    hosts.write_parquet(out_dir / HOSTS_FILE)
    (out_dir / SEEDS_FILE).write_text("".join(f"http://{h}/\n" for h in hosts["host"]), encoding="utf-8")
    model.pages_frame().write_parquet(out_dir / PAGES_FILE)
    if model.cfg.duplicate_share > 0:
        model.duplicates_frame().write_parquet(out_dir / DUPLICATES_FILE)
    (out_dir / CONFIG_FILE).write_text(model.cfg.to_json() + "\n", encoding="utf-8")
    (out_dir / ADDRESSES_FILE).write_text(addresses(model), encoding="utf-8")


class RequestLog:
    """requests.jsonl, buffered in memory and flushed on a timer and at close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._buffer: list[dict[str, Any]] = []
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._flush_forever())

    def add(self, record: dict[str, Any]) -> None:
        self._buffer.append(record)

    def flush(self) -> None:
        if self._buffer:
            self._file.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self._buffer))
            self._buffer.clear()
        self._file.flush()

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            self.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.flush()
        self._file.close()


class TestWeb:
    """Serves a SiteModel on one port; requests come in proxy (absolute) form or with Host set."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, cfg: TestWebConfig, out_dir: str | Path, model: SiteModel | None = None):
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.model = model if model is not None else SiteModel(cfg)
        self.port: int | None = None
        self._runner: web.ServerRunner | None = None
        self._log: RequestLog | None = None
        self._rate: dict[str, tuple[list[float], float]] = {}  # host -> (recent, blocked until)
        self._robots_hits: dict[str, int] = {}  # robots_429 hosts: robots.txt requests so far
        self._bomb: bytes | None = None
        self._bomb_lock = asyncio.Lock()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Write the ground truth, then listen; returns the bound port."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, write_ground_truth, self.model, self.out_dir)
        self._log = RequestLog(self.out_dir / REQUESTS_FILE)
        self._log.start()
        # cancel handlers whose client hung up, so the log's ts_end is when the client left
        server = web.Server(self._handle, handler_cancellation=True)
        self._runner = web.ServerRunner(server, shutdown_timeout=STOP_GRACE_S)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        """Close connections (in-flight responses get STOP_GRACE_S), then flush the request log."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log is not None:
            await self._log.close()
            self._log = None

    async def __aenter__(self) -> TestWeb:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        rec: dict[str, Any] = {
            "ts_start": time.time(),
            "ts_end": None,
            "host": (request.host or "").lower().split(":", 1)[0],
            "method": request.method,
            "path": request.path_qs,
            "client": f"{peer[0]}:{peer[1]}" if peer else None,
            "user_agent": request.headers.get("User-Agent"),
            "status": 0,
            "bytes": 0,
            "aborted": False,
            "retry_after": None,
        }
        try:
            return await self._respond(request, rec)
        except ConnectionError:
            rec["aborted"] = True  # the client went away; aiohttp copes with the closed transport
            return web.Response(status=rec["status"] or CLIENT_GONE_STATUS)
        except asyncio.CancelledError:
            rec["aborted"] = True
            raise
        finally:
            rec["ts_end"] = time.time()
            if self._log is not None:
                self._log.add(rec)

    async def _respond(self, request: web.BaseRequest, rec: dict[str, Any]) -> web.StreamResponse:
        r = with_validators(self.cfg, rec["host"], rec["path"], self.model.render(rec["host"], rec["path"]))
        if r.status == 200 and not_modified(request.headers, r):
            return await self._send(request, rec, 304, validators(r), b"")  # conditional GET: no body
        if r.delay or self.cfg.latency_s:
            await asyncio.sleep(max(r.delay, self.cfg.latency_s))
        if r.effect == "ratelimit" and (wait := self._rate_limited(rec["host"], r)):
            headers = {"Retry-After": str(wait), "Content-Type": "text/plain"}
            rec["retry_after"] = wait  # lets an audit check the client waited that long
            return await self._send(request, rec, 429, headers, b"429 Too Many Requests\n")
        if r.effect == "robots_429":
            hits = self._robots_hits[rec["host"]] = self._robots_hits.get(rec["host"], 0) + 1
            if hits <= ROBOTS_429_TIMES:
                headers = {"Retry-After": str(ROBOTS_429_RETRY_AFTER), "Content-Type": "text/plain"}
                return await self._send(request, rec, 429, headers, b"429 Too Many Requests\n")
        if r.effect in ("huge_stream", "huge_length"):
            return await self._stream_huge(request, rec, r)
        if r.effect == "gzip_bomb":
            async with self._bomb_lock:
                if self._bomb is None:
                    self._bomb = await asyncio.get_running_loop().run_in_executor(None, build_gzip_bomb)
            return await self._send(request, rec, r.status, r.headers, self._bomb)
        if r.effect in ("reset", "reset_early"):
            return await self._reset(request, rec, r)
        return await self._send(request, rec, r.status, r.headers, r.body)

    def _rate_limited(self, host: str, r: Rendered) -> int:
        """Seconds to wait (0: allowed): past the window's budget or inside the penalty."""
        now = time.monotonic()
        recent, blocked_until = self._rate.get(host, ([], -math.inf))
        if now < blocked_until:
            return max(1, math.ceil(blocked_until - now))
        recent = [t for t in recent if now - t < self.cfg.ratelimit_window]
        if len(recent) >= self.cfg.ratelimit_requests:
            wait = int(r.extra.get("retry_after", "1"))
            self._rate[host] = ([], now + wait)  # a fresh budget once the client has waited
            return wait
        self._rate[host] = ([*recent, now], blocked_until)
        return 0

    async def _send(
        self,
        request: web.BaseRequest,
        rec: dict[str, Any],
        status: int,
        headers: dict[str, str],
        body: bytes,
    ) -> web.StreamResponse:
        resp = web.Response(status=status, headers=headers, body=body)
        rec["status"] = status
        if (retry_after := headers.get("Retry-After", "")).isdigit():
            rec["retry_after"] = int(retry_after)  # lets an audit check the client waited that long
        await resp.prepare(request)
        await resp.write_eof()
        rec["bytes"] = 0 if request.method == "HEAD" else len(body)
        return resp

    async def _stream_huge(
        self, request: web.BaseRequest, rec: dict[str, Any], r: Rendered
    ) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers=r.headers)
        if r.effect == "huge_length":
            resp.content_length = HUGE_BYTES
        else:
            resp.enable_chunked_encoding()
        rec["status"] = 200
        await resp.prepare(request)
        if request.method != "HEAD":
            for chunk in huge_chunks():
                await resp.write(chunk)
                rec["bytes"] += len(chunk)
        await resp.write_eof()
        return resp

    async def _reset(self, request: web.BaseRequest, rec: dict[str, Any], r: Rendered) -> web.StreamResponse:
        """Promise the whole body, send half (or nothing at all), then reset the connection."""
        resp = web.StreamResponse(status=r.status, headers=r.headers)
        if r.effect == "reset":
            resp.content_length = len(r.body)
            rec["status"] = r.status
            await resp.prepare(request)
            half = r.body[: len(r.body) // 2]
            await resp.write(half)
            rec["bytes"] = len(half)
        rec["aborted"] = True
        if request.transport is not None:
            sock = request.transport.get_extra_info("socket")
            if sock is not None:  # linger 0: close with RST, as a crashing server does
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.transport.abort()
        raise ConnectionResetError("test web reset the connection on purpose")
