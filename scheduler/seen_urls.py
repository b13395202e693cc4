"""Dedup of queued URLs by fingerprint: in the frontier's store, or also in memory."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.sqlite_store import SQLiteFrontier


class SeenUrls:
    """Fingerprints of the URLs queued so far, for dedup: looked up in the store (no memory per URL), or
    with `in_memory` also held in a set (about 70 bytes per URL: the frontier before issue 13). Both are
    asked and told a page's links at once: one query and one insert per page, not per link."""

    def __init__(self, store: SQLiteFrontier, in_memory: bool) -> None:
        self.store = store
        self.memory: set[int] | None = set() if in_memory else None

    def among(self, fps: list[int]) -> set[int]:
        """Those of `fps` seen before."""
        if self.memory is not None:
            return {fp for fp in fps if fp in self.memory}
        return self.store.seen_among(fps) if fps else set()

    def add(self, fps: Iterable[int]) -> None:
        fps = list(fps)
        if self.memory is not None:
            self.memory.update(fps)
        self.store.add_seen(fps)

    def load(self) -> None:
        """A resumed run: the set is filled from the store (the store alone needs nothing)."""
        if self.memory is not None:
            self.memory.update(self.store.seen())
