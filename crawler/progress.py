"""Live crawl progress on the terminal (a bar on a TTY, a line every few seconds otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

TTY_REFRESH_S = 0.5
PLAIN_EVERY_S = 10.0


class LiveProgress:
    """Pages, hosts, rate, curated and errors, read from the crawl's stats."""

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("HOSTCRAWL_PROGRESS"):
            raise NotConfigured
        self.stats = crawler.stats
        self.total = crawler.settings.getint("HOSTCRAWL_MAX_PAGES") or None
        self.console = Console(stderr=True)
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.hosts: set[str] = set()
        self.loop: task.LoopingCall | None = None
        self.progress: Progress | None = None
        self.task_id: Any = None
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)
        crawler.signals.connect(self.item_scraped, signal=signals.item_scraped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def item_scraped(self, item: dict[str, Any]) -> None:
        self.hosts.add(item.get("host", ""))

    def summary(self) -> str:
        get = self.stats.get_value
        pages = get("frontier/fetched", 0) or get("response_received_count", 0)
        elapsed = max(1e-6, time.monotonic() - self.started)
        failed = sum(v for k, v in self.stats.get_stats().items() if k.startswith("fetch/failed/"))
        robots = get("fetch/failed/robots_forbidden", 0)
        return (
            f"{pages} pages  {len(self.hosts)} hosts  {pages / elapsed:.1f}/s  "
            f"curated {get('page/curated', 0)}  failed {failed - robots}  robots-disallowed {robots}"
        )

    def opened(self) -> None:
        if self.tty:
            self.progress = Progress(
                TextColumn("[bold]crawl"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[line]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self.progress.start()
            self.task_id = self.progress.add_task("crawl", total=self.total, line="")
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(TTY_REFRESH_S if self.tty else PLAIN_EVERY_S, now=False)

    def tick(self) -> None:
        if self.progress is not None:
            done = self.stats.get_value("frontier/fetched", 0) or self.stats.get_value(
                "response_received_count", 0
            )
            self.progress.update(self.task_id, completed=done, line=self.summary())
        else:
            self.console.print(f"[crawl] {self.summary()}", highlight=False)

    def closed(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.tick()
        if self.progress is not None:
            self.progress.stop()
