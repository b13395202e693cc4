"""What a run's Redis frontier holds and hands out per URL: queued requests (compact for a host's own
links, JSON otherwise, never pickle), new URLs for ENQUEUE, and claimed leases."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

COMPACT_SCHEMES = {"|": "http", "!": "https"}  # a compact payload's scheme mark (QueuedRequest)
COMPACT = re.compile(r"(\d{1,4})([|!])(/.*)", re.DOTALL)


@dataclass(slots=True)
class QueuedRequest:
    """What a host's queue holds, never pickle. Most URLs are plain links of the queue's own host, kept as
    DEPTH, a scheme mark ('|' http, '!' https) and the path: `2|/a/b.html` (the host is the queue's name, so
    an URL costs its path). Anything else (another origin, a port, kept meta, a discovery fetch) is JSON."""

    url: str
    depth: int
    meta: dict[str, Any]  # request meta a retry or redirect keeps (counts, URLs, reasons)
    discover: bool = False

    def encode(self, host: str = "") -> str:
        if host and not self.meta and not self.discover:
            for mark, scheme in COMPACT_SCHEMES.items():
                origin = f"{scheme}://{host}"
                if self.url.startswith(origin + "/"):
                    return f"{self.depth}{mark}{self.url[len(origin) :]}"
        data: dict[str, Any] = {"u": self.url, "d": self.depth}
        if self.meta:
            data["m"] = self.meta
        if self.discover:
            data["v"] = 1
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str, host: str = "") -> QueuedRequest | None:
        """None for anything that is not one of ours: it is counted and skipped by the caller."""
        compact = COMPACT.fullmatch(raw)
        if compact is not None:
            depth, mark, path = compact.groups()
            return cls(f"{COMPACT_SCHEMES[mark]}://{host}{path}", int(depth), {}) if host else None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("u"), str):
            return None
        meta, depth = data.get("m", {}), data.get("d", 0)
        if not isinstance(meta, dict) or not isinstance(depth, int):
            return None
        return cls(data["u"], depth, meta, bool(data.get("v")))


@dataclass(slots=True)
class Claimed:
    lease_id: str
    host: str
    request: QueuedRequest | None  # None: see `skipped`
    host_record: dict[str, Any]  # the host's shared record ({} for a host nobody has scored)
    # why there is no request: invalid_payload (not JSON of ours: counted, never run), only_bad_urls_left
    # (the policy wants none of the host's URLs), gone (the lease expired or the host was blocked meanwhile)
    skipped: str | None = None
    urgent: bool = False  # a dead worker's URL, already paid for (RECLAIM): fetched whatever the budget


# The caller's choice among a leased host's first queued URLs: (host, record, requests (None: not
# ours), urgent (a dead worker's URL leads: take it)) -> index, or None for none of them.
Pick = Callable[[str, dict[str, Any], list["QueuedRequest | None"], bool], "int | None"]


@dataclass(slots=True)
class NewUrl:
    host: str
    request: QueuedRequest
    front: bool = False  # a retry, redirect or sitemap: before anything new of its host
    force: bool = False  # a retry: no dedup
    priority: float = 0.0  # the host's rank if it has none yet
    op: int = 0  # a forced URL's number in its worker's sequence (0: none): one sent again is queued once
    # a retry or hand-back of a dead worker's URL (Claimed.urgent): back at the front, still urgent, so a
    # claim that takes the front as the dead worker's takes it, and the run does not end without it
    urgent: bool = False
