"""The frontier as a Scrapy scheduler component (SCHEDULER = "scheduler.scrapy_scheduler.HostScheduler")."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from scrapy import Request, signals

from scheduler.core import HostFrontier
from scheduler.frontier_limits import KEEP_BUSY, FrontierLimits, fill_hosts, request_slots
from scheduler.host_priors import apply_prior, load_priors, load_truth
from scheduler.hosts import HostRecord
from scheduler.lease import Lease
from scheduler.policies import PolicyConfig, make_policy
from scheduler.queue_window import MEMORY_URLS
from scheduler.resume import load_frontier
from scheduler.sqlite_store import SQLiteFrontier, decode_meta, encode_meta, refused_by_disk
from scheduler.urls import MAX_URL_LENGTH, TrapGuard, canonical, redirected_back

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

LEASE_META = "hostcrawl_lease"
DISCOVER_META = "hostcrawl_discover"  # sitemaps and the like: fetched first, not quality samples
POLICY_META = "hostcrawl_policy"
# Set on a request robots.txt sent back ("not now"): it goes to the back of its host's queue, so one
# unreachable origin of a host (a link to a closed port) never stands in front of the host's other URLs.
LATER_META = "hostcrawl_later"
FRONTIER_FILE = "frontier.sqlite3"
KEPT_META = ("retry_times", "redirect_times", "redirect_ttl", "redirect_urls", "redirect_reasons")
# Sent by the crawler's pipeline for every page it records: lease=..., score=float | None, and
# checkpoint={meta key: text} that the frontier commits with the page (where the sinks end, counters).
page_scored = object()
# Sent by the pipeline when a page reaches it, before cleaning: lease=..., page=record, html=str.
page_fetched = object()
# Sent by the scheduler when it opens, once per page fetched by an earlier run but never scored:
# lease=..., page=record, html=str; the pipeline cleans it again.
page_recovered = object()
# Sent by the crawler's politeness component after every fetch: host=..., ready_at=monotonic seconds.
host_ready_at = object()
# Sent by the crawler's politeness components when a host must get no more requests: host=..., reason=...
host_blocked = object()
# Sent by the crawler's address guard once a host's public address is known: host=..., address=str.
host_address = object()
# Sent by this scheduler when it first hears of a host (queued or resumed): host=...
host_discovered = object()
# Sent by the crawler's politeness components when a host's state changed: host=..., part=str, state=dict
# (JSON-able, wall-clock times); stored in the frontier, committed with the next page.
politeness_changed = object()
# Sent by this scheduler on open, with what a previous run stored: rows=[(host, part, state), ...]; and by
# a distributed worker with each claim (claimed=True), with what the run's workers stored of those hosts
politeness_restored = object()
# Sent by the spider with a page's links, already filtered as its links (depth, length, --allow/--deny):
# urls=[absolute URL, ...], depth=their depth. The frontier queues them in one go: as a Scrapy Request each,
# a link went through the spider middlewares, the engine and a signal of its own (crawler/fetch/spider.py).
links_found = object()
# Sent by whatever the disk refuses a write (full, read-only, over quota; the WARC, the sinks, the
# frontier itself): where=path, error=str. The frontier commits nothing more, so the run on disk stays
# as it was at the last page committed, and the crawl stops: `--resume` goes on from there.
storage_failed = object()


def engine_wake(crawler: Crawler) -> Callable[[], None] | None:
    """What makes the engine ask the scheduler for requests now, instead of at its next 5 s heartbeat
    (None before the spider opens). Scrapy 2.19 has no public way: the engine's `_slot.nextcall` is
    the call its own scheduling uses."""
    slot = getattr(crawler.engine, "_slot", None)
    return None if slot is None else slot.nextcall.schedule


class HostScheduler:
    """Hands out only requests of hosts that are ready, in the policy's order, within the budget."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.run_dir = Path(settings["HOSTCRAWL_RUN_DIR"])
        defaults = PolicyConfig()
        config = PolicyConfig(
            sample_pages=settings.getint("HOSTCRAWL_SAMPLE_PAGES", defaults.sample_pages),
            explore_share=settings.getfloat("HOSTCRAWL_EXPLORE_SHARE", defaults.explore_share),
            truth=load_truth(settings.get("HOSTCRAWL_TRUTH")),
        )
        self.policy = make_policy(settings.get("HOSTCRAWL_POLICY", "bfs"), config)
        self.guard = TrapGuard(max_url_length=settings.getint("HOSTCRAWL_MAX_URL_LENGTH", MAX_URL_LENGTH))
        self.slots = request_slots(settings)  # pages in flight, at most (Scrapy's downloader has more)
        self.limits = FrontierLimits(
            budget=settings.getint("HOSTCRAWL_MAX_PAGES"),
            per_host_budget=settings.getint("HOSTCRAWL_PER_HOST_BUDGET"),
            concurrency_per_host=settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
            concurrency_per_group=settings.getint("HOSTCRAWL_GROUP_CONCURRENCY", 1),
            threshold=settings.getfloat("HOSTCRAWL_THRESHOLD"),
            fill_hosts=fill_hosts(self.slots, settings.getfloat("HOSTCRAWL_KEEP_BUSY", KEEP_BUSY)),
            memory_urls=settings.getint("HOSTCRAWL_FRONTIER_MEMORY_URLS", MEMORY_URLS),
            max_unscored=settings.getint("HOSTCRAWL_MAX_UNSCORED", 0),
            run_max_unscored=settings.getint("HOSTCRAWL_RUN_MAX_UNSCORED", 0),
            park_horizon=settings.getfloat("HOSTCRAWL_BACKOFF_MAX", 600.0),
        )
        # a recrawl plan carries the hosts' percentiles itself, and their budgets and density priors
        self.priors = load_priors(settings.get("HOSTCRAWL_PLAN") or settings.get("HOSTCRAWL_PRIORS"))
        self.frontier: HostFrontier | None = None
        self.spider: Any = None
        self.wakeup: Any = None
        self.frozen = False  # the disk refused a write: nothing more is committed (storage_failed)
        crawler.signals.connect(self.freeze, signal=storage_failed)
        crawler.signals.connect(self.left_downloader, signal=signals.request_left_downloader)
        # A host is released when its response has passed the downloader middlewares, which may fetch
        # more of it first (tdmrep.json): until then no other host on its address is sent (as in Redis mode).
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.callback_failed, signal=signals.spider_error)
        crawler.signals.connect(self.callback_failed, signal=signals.item_error)
        crawler.signals.connect(self.scored, signal=page_scored)
        crawler.signals.connect(self.fetched, signal=page_fetched)
        crawler.signals.connect(self.host_timer, signal=host_ready_at)
        crawler.signals.connect(self.host_blocked, signal=host_blocked)
        crawler.signals.connect(self.host_address, signal=host_address)
        crawler.signals.connect(self.politeness_changed, signal=politeness_changed)
        crawler.signals.connect(self.enqueue_links, signal=links_found)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _count(self, key: str) -> None:
        self.stats.inc_value(key)

    def open(self, spider: Any) -> None:
        self.spider = spider
        store = SQLiteFrontier(self.run_dir / FRONTIER_FILE)
        self.frontier = HostFrontier(
            store,
            self.policy,
            self.limits,
            time.monotonic,
            self._count,
            guard=self.guard,
            on_new_host=self._apply_prior,
        )
        requeued = load_frontier(self.frontier)
        rows = list(store.politeness())
        if rows:  # a resumed run: delays, backoffs and robots.txt go on where they stopped
            self.crawler.signals.send_catch_log(signal=politeness_restored, rows=rows)
            self.stats.set_value("frontier/resumed_politeness_hosts", len({host for host, _, _ in rows}))
        self.stats.set_value("frontier/resumed_in_flight", requeued)
        self.stats.set_value("frontier/fetched", self.frontier.progress.fetched)
        self.stats.set_value("hostcrawl/policy", self.policy.name)
        logger.info(
            "frontier: %d hosts, %d requeued, %d to clean again, policy %s",
            len(self.frontier.hosts),
            requeued,
            len(self.frontier.recovered),
            self.policy.name,
        )
        self.stats.set_value("frontier/resumed_fetched", len(self.frontier.recovered))
        for lease, page in self.frontier.recovered:
            self.crawler.signals.send_catch_log(
                signal=page_recovered, lease=lease, page=page.page, html=page.html
            )

    def freeze(self, where: str, error: str) -> None:
        self.frozen = True

    def _store_failed(self, exc: sqlite3.Error) -> None:
        """The frontier's own file refused a write: the transaction is lost, as in a kill -9."""
        if not refused_by_disk(exc):
            raise exc
        where = str(self.run_dir / FRONTIER_FILE)
        self.crawler.signals.send_catch_log(signal=storage_failed, where=where, error=str(exc))

    def close(self, reason: str) -> None:
        if self.wakeup is not None and self.wakeup.active():
            self.wakeup.cancel()
        if self.frontier is not None and self.frozen:
            self.frontier.store.abandon()  # what the last commit holds is what the resume finds
        elif self.frontier is not None:
            for key, value in self.frontier.score_lag.stats().items():
                self.stats.set_value(key, value)
            self.stats.set_value("frontier/queue_paged_in", self.frontier.windows.paged_in)
            if parked := self.frontier.mark_parked():
                self.stats.set_value("frontier/parked_at_end", parked)
                logger.info(
                    "%d hosts still parked (Retry-After, robots.txt): --resume goes on with them", parked
                )
            self.frontier.commit()
            self.frontier.store.close()

    def __len__(self) -> int:
        return 0 if self.frontier is None else sum(len(h.queue) for h in self.frontier.hosts.values())

    def has_pending_requests(self) -> bool:
        return self.frontier is not None and self.frontier.has_pending()

    def _apply_prior(self, record: HostRecord) -> None:
        apply_prior(record, None if self.priors is None else self.priors.lookup(record.host))
        self.crawler.signals.send_catch_log(signal=host_discovered, host=record.host)

    def enqueue_request(self, request: Request) -> bool:
        assert self.frontier is not None
        old: Lease | None = request.meta.get(LEASE_META)
        if old is not None:
            if not old.ended:  # a retry after a network error, or robots.txt said "not now"
                self._end(old, old.fetched)
            self.frontier.retire(old)  # a retry or redirect of a request we handed out
        if self._redirect_loop(request, old):
            return False
        # Only a retry (the same URL again) skips dedup and trap checks. Scrapy copies `dont_filter`
        # onto a redirect, but a redirect names a new URL: it is checked like any discovered link.
        redirect = old is not None and canonical(request.url) != canonical(old.url)
        kept = {k: request.meta[k] for k in KEPT_META if k in request.meta}
        extra = encode_meta(kept)
        reason = self._over_budget(request.url) if redirect else None
        reason = reason or self.frontier.add(
            request.url,
            int(request.meta.get("depth", 0)),
            extra=extra,
            force=request.dont_filter and not redirect,
            after=old,
            discover=bool(request.meta.get(DISCOVER_META)),
            behind=bool(request.meta.get(LATER_META)),
        )
        if reason is not None:
            self.stats.inc_value(f"frontier/dropped/{reason}")
            if redirect:
                self.stats.inc_value(f"redirect/dropped/{reason}")
            return False
        self.stats.inc_value("frontier/enqueued")
        if redirect:
            self.stats.inc_value("redirect/followed")
        return True

    def enqueue_links(self, urls: list[str], depth: int, discover: bool = False) -> None:
        """A page's links or a sitemap's entries (links_found), each queued as `enqueue_request` queues a
        new link (`discover`: sitemaps, in front of their hosts' pages)."""
        assert self.frontier is not None
        for reason in self.frontier.add_links(urls, depth, discover=discover):
            self.stats.inc_value("frontier/enqueued" if reason is None else f"frontier/dropped/{reason}")

    def _redirect_loop(self, request: Request, old: Lease | None) -> bool:
        """A redirect back to a URL of its own chain (itself, an empty Location, around a loop): not
        queued, counted (both schedulers)."""
        if old is None or not redirected_back(request.url, request.meta.get("redirect_urls", ())):
            return False
        for key in ("frontier/dropped/redirect_loop", "redirect/dropped/redirect_loop"):
            self.stats.inc_value(key)
        return True

    def _over_budget(self, url: str) -> str | None:
        """A redirect to a host whose page budget is spent is not queued (it could never be fetched)."""
        assert self.frontier is not None
        record = self.frontier.hosts.get((urlsplit(canonical(url)).hostname or "").lower())
        if record is not None and record.budget and record.fetched + record.in_flight >= record.budget:
            return "host_budget"
        return None

    def pages_in_flight(self) -> int:
        """Pages handed to the downloader whose fetch has not ended."""
        return 0 if self.frontier is None else self.frontier.in_flight

    def free_slots(self) -> int:
        """Pages the crawl may hand out now: `--concurrency` less those in flight. The rest of Scrapy's
        slots are for the robots.txt and tdmrep.json fetches of hosts whose pages wait for them."""
        return self.slots - self.pages_in_flight()

    def next_request(self) -> Request | None:
        assert self.frontier is not None
        if self.frozen:  # stopping: what is left stays queued for the resume
            return None
        if self.free_slots() <= 0:
            return None
        lease = self.frontier.next()
        if lease is None:
            self._wake_when_ready()
            return None
        meta: dict[str, Any] = decode_meta(lease.extra)
        meta.update({"depth": lease.depth, LEASE_META: lease, POLICY_META: self.policy.name})
        self.stats.inc_value(f"frontier/handed_out/{lease.phase.value}")
        return Request(
            lease.url,
            callback=self.spider.parse,
            errback=getattr(self.spider, "failed", None),
            meta=meta,
            dont_filter=True,
        )

    def _nudge(self) -> None:
        if (wake := engine_wake(self.crawler)) is not None:
            wake()

    def _wake_when_ready(self) -> None:
        """Hosts waiting for their delay: nudge the engine then, instead of its 5 s heartbeat."""
        assert self.frontier is not None
        ready_at = self.frontier.next_ready_at()
        if ready_at is None:
            return
        from twisted.internet import reactor

        delay = max(0.0, ready_at - time.monotonic()) + 0.001
        if self.wakeup is not None and self.wakeup.active():
            # one host parked for an hour must not make every other host wait for the 5 s heartbeat
            if self.wakeup.getTime() - reactor.seconds() <= delay:  # type: ignore[misc]
                return
            self.wakeup.cancel()

        if (wake := engine_wake(self.crawler)) is not None:
            self.wakeup = reactor.callLater(delay, wake)  # type: ignore[arg-type]

    def _end(self, lease: Lease, fetched: bool) -> None:
        """The host is free again: the response has passed the downloader middlewares, or it never came."""
        if lease.ended or self.frontier is None:
            return
        self.frontier.fetch_ended(lease, fetched, 0.0)
        if fetched:
            self.stats.inc_value("frontier/fetched")

    def left_downloader(self, request: Request) -> None:
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is not None and not lease.ended:
            lease.fetched = True  # reached the network: it costs budget, whatever happens next

    def response_received(self, response: Any, request: Request, spider: Any = None) -> None:
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is not None:  # (not fetched: a response the archive kept from before a crash)
            self._end(lease, lease.fetched)

    def callback_failed(self, failure: Any, response: Any, spider: Any = None, item: Any = None) -> None:
        """A page whose parsing or recording raised never gets a score: it is settled without one, so its
        host and the crawl's end do not wait for it for good (a bug, counted and logged by Scrapy)."""
        request = getattr(response, "request", None)
        lease: Lease | None = None if request is None else request.meta.get(LEASE_META)
        if lease is not None and not lease.settled:
            self.stats.inc_value("frontier/settled_after_error")
            self.scored(lease, None)

    def fetched(self, lease: Lease, page: dict[str, Any], html: str) -> None:
        """Archived and parsed: commit it with its links, so a crash from here on costs no refetch."""
        if self.frontier is None or lease.settled or self.frozen:
            return
        try:
            self.frontier.store.fetched(lease.row_id, page, html)
            self.frontier.commit()
        except sqlite3.OperationalError as exc:
            self._store_failed(exc)

    def scored(self, lease: Lease, score: float | None, checkpoint: dict[str, str] | None = None) -> None:
        if self.frontier is None or self.frozen:
            return
        try:
            for key, value in (checkpoint or {}).items():
                self.frontier.store.set_meta(key, value)  # committed by `observe`, with this page
            if not lease.ended:  # a network error, or dropped before the network (robots.txt, private addr.)
                self._end(lease, lease.fetched)
            self.frontier.observe(lease, score)
        except sqlite3.OperationalError as exc:
            self._store_failed(exc)
        self._nudge()  # a score can make a host eligible; don't wait for the engine's heartbeat

    def host_timer(self, host: str, ready_at: float) -> None:
        """Politeness says when the host may be fetched again (delay, Crawl-delay, backoff)."""
        record = None if self.frontier is None else self.frontier.hosts.get(host)
        if record is not None and self.frontier is not None:
            record.ready_at = max(record.ready_at, ready_at)
            self.frontier.touch(record)  # from the heap to the wait list, if it was eligible

    def host_blocked(self, host: str, reason: str) -> None:
        """robots.txt or the host's health says no more: none of its queued URLs is handed out."""
        if self.frontier is not None:
            self.frontier.block(host, reason)

    def host_address(self, host: str, address: str) -> None:
        """Hosts on one IP address share a politeness group (scheduler/groups.py)."""
        if self.frontier is not None:
            self.frontier.host(host)
            self.frontier.groups.join(host, f"ip:{address}")

    def politeness_changed(self, host: str, part: str, state: dict[str, Any]) -> None:
        if self.frontier is not None and not self.frozen:
            self.frontier.store.save_politeness(host, part, state)
