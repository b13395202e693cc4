"""`crawl --plan plan.parquet`: seeds, budgets and priors from a recrawl plan (`hostcrawl recrawl plan`).

Each planned host is seeded with its home page (robots.txt and its sitemaps are found as in any crawl); the
scheduler's on_new_host hook gives it its page budget as a per-host cap and starts its density estimate from
the plan's (scheduler/host_priors.py). What a host cannot use (it ran out of pages, turned out bad, or could
not be reached) is handed on to the next planned hosts still at their cap, in plan order
(PlanBudgetSpill).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import polars as pl
import pyarrow.parquet as pq
from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured

from analytics.recrawl_plan import PLAN_COLUMNS
from analytics.schema import SchemaError, check_columns
from crawler.run.crawl_config import ConfigError, CrawlConfig
from crawler.run.seed_urls import check_seed
from scheduler.hosts import HostState
from scheduler.scrapy_scheduler import engine_wake

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

SPILL_INTERVAL_S = 0.25
FINISHED = (HostState.EXHAUSTED, HostState.DROPPED, HostState.BLOCKED)


def load_plan(path: Path) -> pl.DataFrame:
    """The plan's rows in plan order; a ConfigError naming the file when it cannot be crawled."""
    try:
        check_columns(path, PLAN_COLUMNS)
        plan = pl.read_parquet(path, columns=[c.name for c in PLAN_COLUMNS])
    except SchemaError as exc:
        raise ConfigError(f"--plan {exc}") from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ConfigError(f"--plan {path}: not a readable plan ({exc})") from None
    if not plan.height:
        raise ConfigError(f"--plan {path}: the plan has no hosts")
    if plan["budget"].min() < 0 or plan["budget"].sum() < 1:  # type: ignore[operator]
        raise ConfigError(f"--plan {path}: budgets must be >= 0 and give at least one page in all")
    duplicated = plan.filter(pl.col("host").str.to_lowercase().is_duplicated())["host"].to_list()
    if duplicated:
        raise ConfigError(f"--plan {path}: host {duplicated[0]} is planned twice")
    for i, url in enumerate(plan["seed_url"].to_list()):
        check_seed(url, f"--plan {path}: row {i + 1}")
    return plan.filter(pl.col("budget") > 0)


@dataclass(frozen=True)
class PlannedHosts:
    """What the rest of the crawl's set-up needs of a plan: its hosts, and the run it was made from."""

    hosts: frozenset[str]
    source_run: Path | None  # a plan made with `recrawl plan --previous RUN`: that run is revisited

    def keeps(self, url: str) -> bool:
        return (urlsplit(url).hostname or "") in self.hosts


def plan_source_run(path: Path) -> Path | None:
    """The run a plan was made from (its summary's `source_run`), when that run directory is here."""
    meta = pq.read_schema(path).metadata or {}
    try:
        summary = json.loads(meta.get(b"hostcrawl_plan", b"{}"))
    except ValueError:
        return None
    run = summary.get("source_run") if isinstance(summary, dict) else None
    if not isinstance(run, str):
        return None
    if not (Path(run) / "pages.parquet").is_file():
        logger.warning("the plan's source run %s is not here: its pages are not revisited", run)
        return None
    return Path(run)


def apply_plan(config: CrawlConfig, path: Path, max_pages: int | None) -> PlannedHosts:
    """`crawl --plan`: the plan's home pages as seeds, its total as the budget (unless --max-pages)."""
    plan = load_plan(path)
    config.seeds = config.seeds + plan_seeds(plan)
    config.policy.plan = str(path.resolve())
    config.fetch.follow_cross_host = False  # the plan's hosts, not what they link to
    if max_pages is None:
        config.fetch.max_pages = plan_budget(plan)
    return PlannedHosts(frozenset(str(h).lower() for h in plan["host"].to_list()), plan_source_run(path))


def plan_seeds(plan: pl.DataFrame) -> list[str]:
    return [str(u) for u in plan["seed_url"].to_list()]


def plan_budget(plan: pl.DataFrame) -> int:
    return int(plan["budget"].sum())


class PlanBudgetSpill:
    """Hands the budget finished planned hosts did not use to the next planned hosts at their cap.

    Stateless, so a resumed crawl recomputes it: pages still available = the plan's total minus what
    unfinished hosts may still take (their caps) minus what finished hosts fetched.
    """

    def __init__(self, crawler: Crawler, plan: pl.DataFrame) -> None:
        self.crawler = crawler
        self.order = [str(h).lower() for h in plan["host"].to_list()]
        self.planned = dict(zip(self.order, (int(b) for b in plan["budget"].to_list()), strict=True))
        self.total = sum(self.planned.values())
        self.loop: Any = None
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)
        crawler.signals.connect(self.idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        path = crawler.settings.get("HOSTCRAWL_PLAN")
        if not path:
            raise NotConfigured
        return cls(crawler, load_plan(Path(path)))

    def opened(self, spider: Any) -> None:
        from twisted.internet import task

        self.loop = task.LoopingCall(self.spill)
        self.loop.start(SPILL_INTERVAL_S, now=False)

    def closed(self, spider: Any) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()

    def idle(self, spider: Any) -> None:
        if self.spill():
            raise DontCloseSpider

    def _frontier(self) -> Any:
        scheduler = self.crawler.engine.scheduler if self.crawler.engine is not None else None
        return getattr(scheduler, "frontier", None)  # our HostScheduler's; None for another scheduler

    def spill(self) -> int:
        """Raise the caps of capped planned hosts by the unused pages; returns the pages handed on."""
        frontier = self._frontier()
        if frontier is None:
            return 0
        records = [frontier.hosts.get(h) for h in self.order]
        committed = 0
        for host, record in zip(self.order, records, strict=True):
            if record is None:
                committed += self.planned[host]
            elif record.state in FINISHED:
                committed += record.fetched
            else:
                committed += record.budget
        available = self.total - committed
        given = 0
        for host, record in zip(self.order, records, strict=True):
            if available <= 0:
                break
            if record is None or record.state in FINISHED or not record.queue:
                continue
            if record.fetched + record.in_flight < record.budget:
                continue  # not at its cap
            extra = min(available, max(1, self.planned[host]), len(record.queue))
            record.budget += extra
            available -= extra
            given += extra
            frontier.touch(record)
        if given:
            self.crawler.stats.inc_value("plan/budget_spilled", given)
            if (wake := engine_wake(self.crawler)) is not None:
                wake()
        return given
