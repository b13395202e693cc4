"""--resume: a frontier's working set rebuilt from its store (scheduler/frontier.py)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from scheduler.hosts import Phase, QueuedUrl, restore_host
from scheduler.lease import Lease

if TYPE_CHECKING:
    from scheduler.core import HostFrontier


def load_frontier(frontier: HostFrontier) -> int:
    """Rebuild the working set from the store; returns the number of requeued in-flight URLs."""
    leased = frontier.store.leased_ids()
    requeued = frontier.store.requeue_leased()
    frontier.seen.update(frontier.store.seen())
    for name, data in frontier.store.hosts():
        restore_host(frontier.host(name), data)
    top = -1
    for row in frontier.store.pending():
        record = frontier.host(row.host)
        item = QueuedUrl(row.url, row.depth, row.seq, row.row_id, row.extra, row.discover)
        if row.row_id in leased:
            record.queue.appendleft(item)
            frontier.urgent[row.host] = frontier.urgent.get(row.host, 0) + 1
        else:
            record.queue.append(item)
        top = max(top, row.seq)
    for page in frontier.store.fetched_pages():
        record = frontier.host(page.host)
        phase = Phase(page.page.get("phase") or Phase.DEEPEN.value)
        lease = Lease(page.host, page.url, page.depth, page.row_id, page.seq, phase, None)
        lease.sitemap, lease.fetched, lease.ended = page.discover, True, True
        record.fetched += 1  # spent budget, though not yet settled
        record.sample_handed += phase is Phase.SAMPLE
        frontier.unobserved += 1
        frontier.recovered.append((lease, page))
        top = max(top, page.seq)
    frontier.seq = itertools.count(top + 1)
    frontier.progress.fetched = sum(r.fetched for r in frontier.hosts.values())
    for lease, _ in frontier.recovered:
        lease.fetch_number = frontier.progress.fetched
    frontier.progress.explore_fetches = int(frontier.store.get_meta("explore_fetches") or 0)
    for record in frontier.hosts.values():
        record.in_flight = 0
        record.ready_at = 0.0
        frontier.touch(record)
    frontier.store.commit()
    return requeued
