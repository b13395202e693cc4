"""What the frontier hands out for fetching, and how late the scores of those fetches come back."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.hosts import Phase


@dataclass(slots=True)
class Lease:
    """A URL handed out for fetching; returned to `fetch_ended` and `observe`."""

    host: str
    url: str
    depth: int
    row_id: int
    seq: int
    phase: Phase
    extra: bytes | None
    sitemap: bool = False  # a discovery URL: once read, the host's URLs are all known
    fetched: bool = False  # reached the network (costs budget and politeness)
    ended: bool = False  # the downloader is done with it
    settled: bool = False  # its outcome is recorded (observed, or replaced by a retry/redirect)
    fetch_number: int = 0  # the crawl's fetch count when this page arrived
    groups: tuple[str, ...] = ()  # the politeness groups it counts in while in flight
    paid: bool = False  # Redis: a dead worker's URL, its budget spent; a retry or hand-back of it stays so


@dataclass(slots=True)
class ScoreLag:
    """Pages fetched between a page's arrival and its score: how blind the policy's decisions are."""

    pages: int = 0
    total: int = 0
    peak: int = 0

    def add(self, lag: int) -> None:
        self.pages += 1
        self.total += lag
        self.peak = max(self.peak, lag)

    def stats(self) -> dict[str, float]:
        mean = self.total / self.pages if self.pages else 0.0
        return {"scheduler/score_lag_pages_mean": round(mean, 1), "scheduler/score_lag_pages_max": self.peak}
