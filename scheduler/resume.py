"""--resume: a frontier's working set rebuilt from its store (scheduler/sqlite_store.py)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from scheduler.hosts import PARKED, Phase, restore_host
from scheduler.lease import Lease

if TYPE_CHECKING:
    from scheduler.core import HostFrontier


def load_frontier(frontier: HostFrontier) -> int:
    """Rebuild the working set from the store; returns the number of owed URLs (in flight when a run
    died, this one's or an earlier one's that was killed before it handed them out again).

    Queued URLs stay in the store: each host's queue knows its length and pages its URLs in when a policy
    reads them; the URLs in flight when the last run died are at the front, fetched first.
    """
    store = frontier.store
    in_flight = store.owed_hosts()
    store.requeue_leased()
    frontier.seen.load()
    for name, data in store.hosts():
        record = frontier.host(name)
        restore_host(record, data)
        if record.drop_reason == PARKED:  # this run ends by marking it again if it still waits then
            record.drop_reason = None
    for name, count in store.queued_counts():
        frontier.host(name).queue.stored(count)
    frontier.urgent.update(in_flight)
    for page in frontier.store.fetched_pages():
        record = frontier.host(page.host)
        phase = Phase(page.page.get("phase") or Phase.DEEPEN.value)
        lease = Lease(page.host, page.url, page.depth, page.row_id, page.seq, phase, None)
        lease.sitemap, lease.fetched, lease.ended = page.discover, True, True
        record.fetched += 1  # spent budget, though not yet settled
        record.sample_handed += phase is Phase.SAMPLE
        frontier.unobserved += 1
        frontier.recovered.append((lease, page))
    frontier.seq = itertools.count(store.top_position() + 1)
    frontier.progress.fetched = sum(r.fetched for r in frontier.hosts.values())
    for lease, _ in frontier.recovered:
        lease.fetch_number = frontier.progress.fetched
    frontier.progress.explore_fetches = int(frontier.store.get_meta("explore_fetches") or 0)
    for record in frontier.hosts.values():
        record.in_flight = 0
        record.ready_at = 0.0
        frontier.touch(record)
    frontier.store.commit()
    return sum(in_flight.values())
