"""Live crawl progress on the terminal: what the status page says, in one line that fits the terminal.

On a TTY the line is redrawn every second and cut to the terminal's width by leaving out its least
important parts (crawler/monitor/status.py `one_line`); otherwise a full line is printed every few seconds.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Self

from rich.console import Console
from rich.live import Live
from rich.text import Text
from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from crawler.monitor.status import CrawlStatus, one_line

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

TTY_REFRESH_S = 1.0  # the snapshot changes once per second
PLAIN_EVERY_S = 10.0
PLAIN_WIDTH = 10_000  # a log has no width: nothing is left out


class LiveProgress:
    """Pages and budget, rate, yield, hosts by state, politeness, cleaning, errors, policy, time."""

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("HOSTCRAWL_PROGRESS"):
            raise NotConfigured
        self.crawler = crawler
        self.console = Console(stderr=True)
        self.tty = sys.stderr.isatty()
        self.status: CrawlStatus | None = None
        self.loop: task.LoopingCall | None = None
        self.live: Live | None = None
        self.printed = ""
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def line(self) -> str:
        if self.status is None:
            return ""
        width = max(20, self.console.width - 1) if self.tty else PLAIN_WIDTH
        return one_line(self.status.snapshot, width)

    def opened(self) -> None:
        self.status = self.crawler.get_extension(CrawlStatus)
        if self.tty:
            self.live = Live(console=self.console, auto_refresh=False, transient=False)
            self.live.start()
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(TTY_REFRESH_S if self.tty else PLAIN_EVERY_S, now=False)

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(Text(self.line(), no_wrap=True, overflow="crop"), refresh=True)
        elif (line := self.line()) != self.printed:  # the last tick and the close may say the same
            self.printed = line
            self.console.print(f"[crawl] {line}", highlight=False, markup=False, soft_wrap=True)

    def closed(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.tick()
        if self.live is not None:
            self.live.stop()
