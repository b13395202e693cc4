"""One crawl = one self-describing run directory: config, WARC, text, tables, stats and report."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from scrapy.crawler import CrawlerProcess

from cleaner.quality import score_column
from crawler.archive.archived_fetch import mark_archived_in_flight
from crawler.archive.warc import recover_open_files
from crawler.archive.warc_files import index_unindexed
from crawler.fetch.politeness import Politeness
from crawler.fetch.spider import HostSpider
from crawler.pages.sinks import CHECKPOINT_META, SinkCheckpoint, cut_to_checkpoint
from crawler.pages.tables import write_tables
from crawler.pages.text_dedup import dedup_text
from crawler.run.crawl_config import ConfigError, CrawlConfig, validate
from crawler.run.plan_report import plan_section
from crawler.run.run_report import write_report
from crawler.run.run_stats import (
    ATTEMPTS,
    PRIOR_STATS_META,
    STATS_META,
    dumps_stats,
    jsonable,
    loads_stats,
    merge_stats,
)
from crawler.run.settings import build_settings
from crawler.run.storage_stop import STORAGE_STAT
from scheduler.scrapy_scheduler import FRONTIER_FILE
from scheduler.sqlite_store import SQLiteFrontier, refused_by_disk

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class RunResult:
    run_dir: Path
    stats: dict[str, Any]
    crawl_delays: dict[str, float]
    note: str | None = None  # what the user must still do (a worker: merge the run from other machines)

    def stat(self, key: str, default: Any = 0) -> Any:
        return self.stats.get(key, default)

    @property
    def storage_error(self) -> str | None:
        """ "PATH: reason" of the write the disk refused, which stopped the crawl; None if none was."""
        return self.stats.get(STORAGE_STAT)

    @property
    def interrupted(self) -> bool:
        """Stopped by SIGINT or SIGTERM (Scrapy's graceful shutdown), not finished."""
        return self.stats.get("finish_reason") == "shutdown"


def prepare_run_dir(run_dir: Path, ignore: frozenset[str] | set[str] = frozenset()) -> None:
    """A run never writes into someone else's results."""
    if run_dir.exists() and any(p.name not in ignore for p in run_dir.iterdir()):
        raise ConfigError(
            f"{run_dir}: run directory exists and is not empty; choose a new --out or remove it"
        )
    run_dir.mkdir(parents=True, exist_ok=True)


def recover_run(run_dir: Path) -> dict[str, Any]:
    """Make a stopped run's files whole again before crawling on; returns the earlier attempts' stats.

    The page spool and the curated text are cut back to the frontier's last commit (see
    crawler/pages/sinks.py): pages beyond it are still in the frontier, fetched (cleaned again) or in flight.
    """
    if not (run_dir / FRONTIER_FILE).exists():
        raise ConfigError(f"{run_dir}: no {FRONTIER_FILE} here; --resume needs a hostcrawl run directory")
    store = SQLiteFrontier(run_dir / FRONTIER_FILE)  # a foreign or corrupt file fails here, clearly
    try:
        store.check()  # and so does a row that is not JSON (a pickle): before anything is changed
        recovered = recover_open_files(run_dir / "warc") if (run_dir / "warc").exists() else {}
        if (run_dir / "warc").exists():
            index_unindexed(run_dir / "warc")
        for path, records in recovered.items():
            logger.info("recovered %s with %d complete records", path, records)
        if archived := mark_archived_in_flight(store, list(recovered)):
            logger.info("resume: %d requests in flight are read back from their WARC records", archived)
        cut, now = cut_to_checkpoint(run_dir, SinkCheckpoint.from_json(store.get_meta(CHECKPOINT_META)))
        store.set_meta(CHECKPOINT_META, now.to_json())  # a second cut before any commit keeps the same pages
        logger.info("resume: cut %d rows and %d documents of uncommitted pages", cut["rows"], cut["docs"])
        earlier, last = store.get_meta(PRIOR_STATS_META), loads_stats(store.get_meta(STATS_META))
        # the frontier is here, so a process ran: one killed before its first commit left no
        # counters, and it still counts as an attempt
        last.setdefault(ATTEMPTS, 1)
        prior = merge_stats(loads_stats(earlier), last)
        store.set_meta(PRIOR_STATS_META, dumps_stats(prior))
        store.set_meta(STATS_META, "{}")
    finally:
        store.close()
    return prior


def run_crawl(
    config: CrawlConfig,
    run_dir: Path,
    *,
    progress: bool = True,
    ignore: frozenset[str] | set[str] = frozenset(),
    resume: bool = False,
    status_port: int | None = None,
    status_bind: str = "127.0.0.1",
) -> RunResult:
    """Crawl in this process (Scrapy's reactor runs once per process) and write the run directory."""
    validate(config)
    if not config.seeds:
        raise ConfigError("no seeds: give --seeds FILE, seeds in the config, or URLs")
    prior: dict[str, Any] = {}
    try:
        if resume:
            prior = recover_run(run_dir)  # again and again until there is room: it cuts, never adds
        else:
            prepare_run_dir(run_dir, ignore)
        (run_dir / "config.toml").write_text(config.to_toml(), encoding="utf-8")
    except (OSError, sqlite3.OperationalError) as exc:  # still full or read-only: nothing crawled yet
        if isinstance(exc, sqlite3.OperationalError) and not refused_by_disk(exc):
            raise
        where = getattr(exc, "filename", None) or run_dir / FRONTIER_FILE  # sqlite names no file
        return RunResult(run_dir, {STORAGE_STAT: f"{where}: {getattr(exc, 'strerror', None) or exc}"}, {})
    settings = build_settings(
        config, run_dir, progress=progress, status_port=status_port, status_bind=status_bind
    )
    return crawl_and_finish(settings, config, run_dir, prior)


def crawl_and_finish(
    settings: dict[str, Any], config: CrawlConfig, run_dir: Path, prior: dict[str, Any] | None = None
) -> RunResult:
    """Run the crawl in this process's reactor, then write its tables, stats and report however it
    ended, unless the disk refused a write: then nothing more goes onto it, and the frontier's last
    commit is what `--resume` goes on from (crawler/run/storage_stop.py)."""
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(HostSpider)
    started = time.monotonic()
    try:
        process.crawl(crawler, seeds=config.seeds, follow_cross_host=config.fetch.follow_cross_host)
        process.start()
    finally:
        wall = time.monotonic() - started
        stats = {k: jsonable(v) for k, v in crawler.stats.get_stats().items()}
        politeness = crawler.get_extension(Politeness)
        delays = {h: s.delay for h, s in politeness.hosts.items()} if politeness else {}
        if STORAGE_STAT not in stats:
            stats = finish_run(run_dir, config, stats, delays, wall, prior)
    return RunResult(run_dir, stats, delays)


def finish_run(
    run_dir: Path,
    config: CrawlConfig,
    stats: dict[str, Any],
    crawl_delays: dict[str, float],
    wall_seconds: float,
    prior: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Tables, stats.json and report.md; also what a crashed run can be finished with.

    `stats` are this process's; `prior` those of the run's earlier attempts. Returns the whole run's."""
    scorers = list(config.cleaning.scorers)
    write_tables(run_dir, scorers, crawl_delays)
    stats["hostcrawl/wall_seconds"] = round(wall_seconds, 3)
    frontier = run_dir / FRONTIER_FILE
    if frontier.exists():  # the next resume folds this attempt in whole, close-time figures included
        store = SQLiteFrontier(frontier)
        store.set_meta(STATS_META, dumps_stats(stats))
        store.close()
    stats = merge_stats(prior or {}, stats)
    stats.update(dedup_text(run_dir / "text"))  # of the whole run's text, so after the merge
    fetched, wall = stats.get("response_received_count", 0), stats["hostcrawl/wall_seconds"]
    stats.update(
        {
            "hostcrawl/pages_per_second": round(fetched / wall, 3) if wall else 0,
            "hostcrawl/policy": stats.get("hostcrawl/policy", config.policy.name),
            "hostcrawl/cleaner": config.cleaning.cleaner,
            "hostcrawl/scorers": ",".join(scorers),
        }
    )
    (run_dir / "stats.json").write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n")
    render_report(run_dir, config, stats, plan_section(run_dir, config))
    return stats


def render_report(
    run_dir: Path,
    config: CrawlConfig,
    stats: dict[str, Any],
    extra_sections: list[str] | None = None,
) -> Path:
    pages = pl.read_parquet(run_dir / "pages.parquet")
    hosts = pl.read_parquet(run_dir / "hosts.parquet")
    score = score_column(config.cleaning.scorers[0])
    return write_report(run_dir, pages, hosts, stats, score, config.cleaning.threshold, extra_sections)
