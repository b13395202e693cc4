"""Scrapy settings for hostcrawl, all in one place.

Groups: (1) politeness: robots.txt, per-host concurrency and delay, backoff, identity;
(2) fetching limits: budget, timeouts, sizes, redirects; (3) the components hostcrawl adds
(middlewares, extensions, pipeline) and the Scrapy ones it switches off; (4) logging.
Every `HOSTCRAWL_*` setting is read by exactly one of our components.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crawler.pages.batch_cleaner import budget_unscored_bound, unscored_bound
from crawler.run.crawl_config import SCRAPY_SCHEDULER, ConfigError, CrawlConfig
from scheduler.frontier_limits import DOWNLOADER_SLOTS_PER_REQUEST_SLOT

# Components, by the order Scrapy calls them. The WARC capture sits next to the downloader so it
# sees bodies before decompression and every response, robots.txt included.
DOWNLOADER_MIDDLEWARES = {
    "crawler.fetch.addresses.PrivateAddressGuard": 40,
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    # the spider sets no allowed_domains, so Scrapy's offsite filter lets everything through, at the price
    # of a signal handler on every scheduled request (each link): 7% of the crawling process at 256 in flight
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    "crawler.fetch.robots_policy.RobotsPolicy": 100,
    "crawler.fetch.politeness.CrawlDelayGate": 110,  # right after robots.txt is known
    "crawler.fetch.politeness.HostReadyGate": 115,  # a host that must wait frees the request slot
    "crawler.fetch.tdmrep.TdmRepPolicy": 120,  # a host's tdmrep.json, once, before its first page is sent
    "crawler.fetch.redirect_targets.RedirectSchemeGuard": 605,  # sees a 3xx before RedirectMiddleware (600)
    "crawler.fetch.routing.ProxyEverything": 745,
    "crawler.fetch.failures.FailureCounter": 940,  # every failed attempt, also those retried later
    # --previous: conditional GETs; a 304 gets its stored payload
    "crawler.archive.revisit.RevisitMiddleware": 945,
    "crawler.archive.archived_fetch.ArchivedFetch": 948,  # --resume: a response archived just before a kill
    "crawler.archive.warc_capture.WarcCaptureMiddleware": 950,
}
EXTENSIONS = {
    "scrapy.extensions.telnet.TelnetConsole": None,
    "scrapy.extensions.remote_control.RemoteControl": None,
    "crawler.fetch.politeness.Politeness": 10,
    "crawler.fetch.shutdown.StopDeadline": 15,  # a stop cancels requests that only wait for a host's delay
    "crawler.run.storage_stop.StorageStop": 16,  # a full or read-only disk stops the crawl, resumable
    "crawler.fetch.limits.ResponseSizeCap": 10,
    "crawler.monitor.status.CrawlStatus": 490,  # the snapshot the progress line and the status page show
    "crawler.monitor.status.WorkerGauges": 495,  # a distributed run's worker: gauges go with its heartbeat
    "crawler.monitor.progress.LiveProgress": 500,
    "crawler.run.plan_seeds.PlanBudgetSpill": 20,  # only with a recrawl plan
    "crawler.monitor.status_server.StatusServer": 510,
}
DOWNLOAD_HANDLERS = {
    "http": "crawler.fetch.politeness.PoliteDownloadHandler",
    "https": "crawler.fetch.politeness.PoliteDownloadHandler",
}
ITEM_PIPELINES = {"crawler.pages.store_pipeline.CleanScoreStorePipeline": 300}
SPIDER_MIDDLEWARES = {
    "crawler.fetch.urlfilter.UrlFilter": 600,  # --allow / --deny on followed links
    # a link's Referer header would be thrown away: the frontier keeps its URL, depth and a few meta keys,
    # and hands out a new request (no Referer is sent); computing it cost 6% of the crawling process
    "scrapy.spidermiddlewares.referer.RefererMiddleware": None,
}
ITEMS_PER_RESPONSE = 4  # CONCURRENT_ITEMS: a response's output is its record and maybe Requests, all quick
# Scrapy settings hostcrawl sets itself that `-s NAME=VALUE` may still change: none of them touches
# politeness, the frontier or where outputs go.
OVERRIDABLE = frozenset({"LOG_LEVEL", "LOGSTATS_INTERVAL", "REACTOR_THREADPOOL_MAXSIZE", "DOWNLOAD_WARNSIZE"})


def scrapy_scheduler(max_pages: int) -> dict[str, Any]:
    """Scrapy's own scheduler, breadth-first over a downloader-aware queue: the baseline to beat."""
    return {
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "CLOSESPIDER_PAGECOUNT": max_pages,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    }


def check_scrapy_settings(config: CrawlConfig, source: str) -> None:
    """`-s NAME=VALUE` may set any Scrapy setting except those hostcrawl's own options decide."""
    ours = set(_own_settings(config, Path("."), progress=False)) - OVERRIDABLE
    taken = sorted(name for name in config.scrapy if name in ours or name.startswith("HOSTCRAWL_"))
    if taken:
        raise ConfigError(
            f"{source}: Scrapy setting {taken[0]} is set by hostcrawl itself (politeness, frontier or "
            "outputs); use hostcrawl's option or config key for it (see `hostcrawl crawl --help`)"
        )


def build_settings(
    config: CrawlConfig,
    run_dir: Path,
    *,
    progress: bool = True,
    status_port: int | None = None,
    status_bind: str = "127.0.0.1",
) -> dict[str, Any]:
    own = _own_settings(config, run_dir, progress=progress, status_port=status_port, status_bind=status_bind)
    return {**own, **config.scrapy}


def _own_settings(
    config: CrawlConfig,
    run_dir: Path,
    *,
    progress: bool,
    status_port: int | None = None,
    status_bind: str = "127.0.0.1",
) -> dict[str, Any]:
    p, f, c, o = config.politeness, config.fetch, config.cleaning, config.output
    pol = config.policy
    return {
        # (1) politeness
        "ROBOTSTXT_OBEY": p.obey_robots,
        "USER_AGENT": p.full_user_agent(),
        "ROBOTSTXT_USER_AGENT": p.user_agent,
        "CONCURRENT_REQUESTS_PER_DOMAIN": p.per_host_concurrency,
        "CONCURRENT_REQUESTS_PER_IP": 0,  # the frontier's politeness groups do this (scheduler/groups.py)
        "HOSTCRAWL_GROUP_CONCURRENCY": p.group_concurrency,
        "DOWNLOAD_DELAY": p.min_delay,
        "DOWNLOAD_DELAY_JITTER": 0.0,  # jitter would dip below the floor (not RANDOMIZE_...: deprecated)
        "HOSTCRAWL_MAX_CRAWL_DELAY": p.max_crawl_delay,
        "HOSTCRAWL_BACKOFF_BASE": p.backoff_base,
        "HOSTCRAWL_BACKOFF_MAX": p.backoff_max,
        "HOSTCRAWL_MAX_PARK": p.max_park,
        "HOSTCRAWL_BREAKER_FAILURES": p.breaker_failures,
        "HOSTCRAWL_ROBOTS_ATTEMPTS": p.robots_attempts,
        "HOSTCRAWL_ROBOTS_TTL": p.robots_ttl,
        "HOSTCRAWL_ALLOW_PRIVATE": p.allow_private,
        "HOSTCRAWL_ADDRESS_TTL": p.address_ttl,
        "HOSTCRAWL_HOSTS_FILE": p.hosts_file,
        "TWISTED_DNS_RESOLVER": "crawler.fetch.addresses.GuardedResolver",  # checks the address connected to
        "RETRY_ENABLED": True,
        "RETRY_TIMES": p.retry_times,
        "RETRY_HTTP_CODES": [500, 502, 503, 504, 522, 524, 408, 429],
        "COOKIES_ENABLED": False,
        "AUTOTHROTTLE_ENABLED": False,
        # (2) fetching limits
        "HOSTCRAWL_MAX_PAGES": f.max_pages,  # the scheduler stops handing out requests there
        "DEPTH_LIMIT": f.max_depth,
        # the host-aware frontier (scheduler/): policy order, politeness gates, durable in RUN/
        "SCHEDULER": "scheduler.scrapy_scheduler.HostScheduler",
        "HOSTCRAWL_POLICY": pol.name,
        "HOSTCRAWL_SAMPLE_PAGES": pol.sample_pages,
        "HOSTCRAWL_EXPLORE_SHARE": pol.explore_share,
        "HOSTCRAWL_KEEP_BUSY": pol.keep_busy,
        "HOSTCRAWL_PER_HOST_BUDGET": pol.per_host_budget,
        "HOSTCRAWL_FRONTIER_MEMORY_URLS": f.frontier_memory_urls,
        "HOSTCRAWL_MAX_UNSCORED": f.max_unscored
        or unscored_bound(f.concurrency, c.cleaner, c.workers, f.max_pages),
        # the same over every worker of a Redis run (one process: the bound above is already within it)
        "HOSTCRAWL_RUN_MAX_UNSCORED": f.max_unscored or budget_unscored_bound(f.max_pages),
        "HOSTCRAWL_PRIORS": pol.priors,
        "HOSTCRAWL_TRUTH": pol.truth,
        "HOSTCRAWL_PLAN": pol.plan,
        "HOSTCRAWL_PREVIOUS": f.previous,
        "HOSTCRAWL_CONCURRENCY": f.concurrency,  # pages in flight: the frontier's cap
        "CONCURRENT_REQUESTS": f.concurrency
        * (1 if pol.name == SCRAPY_SCHEDULER else DOWNLOADER_SLOTS_PER_REQUEST_SLOT),
        "DOWNLOAD_TIMEOUT": f.timeout,
        "DOWNLOAD_MAXSIZE": f.max_decoded_bytes,
        "DOWNLOAD_WARNSIZE": 0,
        "HOSTCRAWL_MAX_PAGE_BYTES": f.max_page_bytes,
        "DOWNLOAD_FAIL_ON_DATALOSS": False,  # keep what arrived; the WARC record says it was cut
        "REDIRECT_MAX_TIMES": f.max_redirects,
        "HOSTCRAWL_MAX_LINKS_PER_PAGE": f.max_links_per_page,
        "HOSTCRAWL_MAX_URL_LENGTH": f.max_url_length,
        "METAREFRESH_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,  # every status becomes a row in pages.parquet
        "HOSTCRAWL_FOLLOW_CROSS_HOST": f.follow_cross_host,
        "HOSTCRAWL_ALLOW": list(f.allow),
        "HOSTCRAWL_DENY": list(f.deny),
        "HOSTCRAWL_PROXY": f.proxy,
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        # Scrapy starts this many asyncio tasks for every response's output, however little it holds (a
        # page yields its record, and Requests only when the frontier does not take its links in a batch):
        # its default 100 cost 12% of the crawling process at 512 requests in flight
        "CONCURRENT_ITEMS": ITEMS_PER_RESPONSE,
        **(scrapy_scheduler(f.max_pages) if pol.name == SCRAPY_SCHEDULER else {}),
        # (3) components and outputs
        "DOWNLOADER_MIDDLEWARES": DOWNLOADER_MIDDLEWARES,
        "DOWNLOAD_HANDLERS": DOWNLOAD_HANDLERS,
        "EXTENSIONS": EXTENSIONS,
        "ITEM_PIPELINES": ITEM_PIPELINES,
        "SPIDER_MIDDLEWARES": SPIDER_MIDDLEWARES,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "HOSTCRAWL_RUN_DIR": str(run_dir),
        "HOSTCRAWL_CLEANER": c.cleaner,
        "HOSTCRAWL_SCORERS": list(c.scorers),
        "HOSTCRAWL_THRESHOLD": c.threshold,
        "HOSTCRAWL_CURATE_OPTOUT": c.curate_optout,
        "HOSTCRAWL_ALLOW_REWRITE": c.allow_rewrite,
        "HOSTCRAWL_LANGUAGE_THRESHOLDS": dict(c.language_thresholds),
        "HOSTCRAWL_CLEAN_WORKERS": c.workers,
        "HOSTCRAWL_WARC_MAX_BYTES": o.warc_max_bytes,
        "HOSTCRAWL_TEXT_DOCS_PER_FILE": o.text_docs_per_file,
        "HOSTCRAWL_PROGRESS": progress,
        "HOSTCRAWL_STATUS_PORT": status_port,  # None: no status page; 0: a free port
        "HOSTCRAWL_STATUS_BIND": status_bind,
        # (4) logging: the log file keeps details, the terminal shows the live progress
        "LOG_LEVEL": "INFO",
        "LOG_FILE": str(run_dir / "crawl.log"),
        "LOG_FILE_APPEND": True,
        "LOGSTATS_INTERVAL": 10.0,
    }
