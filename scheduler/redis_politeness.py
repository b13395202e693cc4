"""What a run's workers learn of each host's politeness, shared in Redis: its robots.txt and its timing.

One hash per run, `politeness`, with a field per host and part (`HOST|robots`, `HOST|timing`). A claim
brings the claimed hosts' latest timing (another worker may have backed a host off) and their robots.txt. A
robots.txt may be 500 KiB and changes about once a day, so a short digest is stored beside each one
(`HOST|robots@`): a worker remembers the digest of every body it has and reads a body again only when its
digest has moved.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DIGEST_PART = "robots@"
REMEMBERED_HOSTS = 500_000  # digests a worker keeps (8 bytes each and a name); past it it starts afresh


def politeness_fields(host: str, part: str, state: str) -> dict[str, str]:
    """The hash fields one saved part of a host's politeness writes (its JSON `state`)."""
    fields = {f"{host}|{part}": state}
    if part == "robots":
        fields[f"{host}|{DIGEST_PART}"] = hashlib.blake2b(state.encode(), digest_size=8).hexdigest()
    return fields


class PolitenessReader:
    """One worker's reads of the shared politeness: timing every time, robots.txt bodies when they changed."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = client
        self.key = key  # the run's politeness hash
        self.known: dict[str, str] = {}  # host -> digest of the robots.txt this worker already has
        self.bodies_read = 0  # robots.txt bodies read from Redis, and their bytes
        self.bytes_read = 0

    def rows(self, hosts: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
        """(host, part, state) of what other workers learnt of these hosts that this worker lacks."""
        if not hosts:
            return []
        fields = [f"{h}|timing" for h in hosts] + [f"{h}|{DIGEST_PART}" for h in hosts]
        values = _strings(self.client.hmget(self.key, fields))
        timings, digests = values[: len(hosts)], values[len(hosts) :]
        # no digest: not read yet by anyone, or saved by a version that wrote none; the body is asked for
        stale = [(h, d) for h, d in zip(hosts, digests, strict=True) if d is None or d != self.known.get(h)]
        bodies = _strings(self.client.hmget(self.key, [f"{h}|robots" for h, _ in stale])) if stale else []
        if len(self.known) > REMEMBERED_HOSTS:
            self.known.clear()
        rows = []
        for (host, digest), body in zip(stale, bodies, strict=True):
            if body is None:
                continue
            self.bodies_read += 1
            self.bytes_read += len(body)
            if digest is not None:
                self.known[host] = digest
            rows.extend(_row(host, "robots", body))
        for host, timing in zip(hosts, timings, strict=True):
            rows.extend(_row(host, "timing", timing))
        return rows


def _strings(values: list[Any]) -> list[str | None]:
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def _row(host: str, part: str, raw: str | None) -> list[tuple[str, str, dict[str, Any]]]:
    if raw is None:
        return []
    try:
        state = json.loads(raw)
    except ValueError:
        return []
    return [(host, part, state)] if isinstance(state, dict) else []
