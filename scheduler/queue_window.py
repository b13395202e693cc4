"""A host's queued URLs: the head of the queue in memory, the rest in the frontier's SQLite store.

Every queued URL is a row of the store (written through on enqueue); memory holds a prefix of each host's
queue in queue order. A host keeps `head` URLs while nothing looks further; when a policy looks further
(bfs's shallowest URL, a host's first linked page) more rows are paged in, and the hosts that did so most
recently keep them until the URLs held beyond the heads pass a budget: then the least recently used hosts
are trimmed back to their heads. A sample or a deepening pick pages nothing in: it reads the shapes of the
URLs it chooses from, and takes the one it chose. What is in memory is therefore at most
`head` x hosts + budget (+ the one window being read), whatever is queued on disk.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from scheduler.urls import url_shape

# Queued URLs each host keeps in memory while no policy looks further: the adaptive policy's priority reads
# a host's first linked page, which is nearly always the first or, behind the home page, the second. 2, not 4:
# each URL held costs about 230 bytes in every host of the table (benchmarks/scheduler_cost.py, 100,000
# hosts x 10 URLs: next+end+observe 2,140/s at 2 against 2,167/s at 4, peak RSS 350 MB against 393 MB).
MEMORY_HEAD = 2
# URLs the most recently used hosts keep in memory beyond their heads: ~25 MB (about 250 bytes a URL), enough
# for 1,500 hosts being deepened with a 64-URL window each, small next to 100,000 host records (~150 MB)
MEMORY_URLS = 100_000
UNBOUNDED = 1 << 62  # a head no queue reaches: every queued URL stays in memory
# Rows read per page-in at least: what iterates over a queue (bfs's shallowest URL, a host's first linked
# page) reads up to 64 URLs (policy_base.SHAPE_WINDOW); one query for most hosts instead of one per few.
PAGE_ROWS = 64


@dataclass(slots=True)
class QueuedUrl:
    url: str
    depth: int
    seq: int  # global enqueue order, for breadth-first across hosts
    row_id: int = 0  # its row in the frontier database
    extra: bytes | None = None  # JSON request meta a retry or redirect must keep
    discover: bool = False  # a sitemap: fetched before samples, never scored as one
    position: int = 0  # its place in the host's queue, as the store orders it
    # what kind of page it likely is (urls.url_shape), computed once when the URL is queued and stored with
    # it: the policies read the shapes of every URL they look at, and a queue paged in again from disk would
    # otherwise compute them again each time (at 100 URLs a host, most of the hand-out's time)
    shape: str = ""

    def __post_init__(self) -> None:
        if not self.shape:
            self.shape = queued_shape(self.url)


def queued_shape(url: str, stored: str | None = None) -> str:
    """A queued URL's shape: the one stored with it, or computed (a row queued by schema 3 or older); one
    string per shape, however many queued URLs hold it."""
    return sys.intern(stored or url_shape(url))


class QueueStore(Protocol):
    """What a window needs of the store: the host's queued rows in queue order, and dropping them."""

    def queued(self, host: str, after: int | None, limit: int, skip: int = 0) -> list[QueuedUrl]: ...

    def queued_shapes(self, host: str, after: int | None, limit: int) -> list[str | None]: ...

    def drop_queued(self, host: str) -> None: ...


class QueueWindows:
    """The memory budget shared by all hosts' queues, and the order in which they are trimmed."""

    def __init__(self, store: QueueStore | None, head: int, budget: int) -> None:
        """`budget` 0: no bound, every queued URL stays in memory (the frontier before issue 13)."""
        self.store = store
        self.head = UNBOUNDED if budget <= 0 else max(1, head)
        self.budget = budget
        self.in_memory = 0  # URLs held in memory, over all hosts
        self.hosts = 0  # queues sharing the budget
        self.recent: OrderedDict[HostQueue, None] = OrderedDict()  # queues longer than their head, LRU first
        self.paged_in = 0  # rows read back from the store (a stat: the cost of the bound)

    def queue(self, host: str) -> HostQueue:
        self.hosts += 1
        return HostQueue(host, self)

    def used(self, queue: HostQueue) -> None:
        if len(queue.items) > self.head:
            self.recent[queue] = None
            self.recent.move_to_end(queue)

    def trim(self) -> None:
        """Trim the least recently used windows back to their heads until the budget holds again."""
        limit = self.head * self.hosts + self.budget
        while self.in_memory > limit and self.recent:
            queue, _ = self.recent.popitem(last=False)
            items = queue.items
            while len(items) > self.head:
                items.pop()  # still a row of the store: paged in again when it is needed
                self.in_memory -= 1


class HostQueue:
    """One host's queue as the policies see it: its length counts what is on disk, reading pages it in."""

    __slots__ = ("host", "items", "size", "windows")

    def __init__(self, host: str = "", windows: QueueWindows | None = None) -> None:
        self.host = host
        # the first len(items) URLs of the queue; a list, not a deque: an empty deque takes 760 bytes, and a
        # frontier of a million hosts holds a queue for each (a list of a 2-URL head takes 72)
        self.items: list[QueuedUrl] = []
        self.size = 0  # queued URLs, in memory or not
        self.windows = windows  # None: a queue without a store (everything in memory)

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[QueuedUrl]:
        yield from self.items
        while len(self.items) < self.size:
            more = self._page_in(len(self.items) + 1)
            if not more:
                return
            yield from more

    def __getitem__(self, index: int) -> QueuedUrl:
        if index >= len(self.items):
            self._page_in(index + 1, head=self.windows is not None and index < self.windows.head)
        return self.items[index]

    def take(self, index: int) -> QueuedUrl:
        """Remove and return the URL at `index`; one beyond the window is read alone, and the URLs before
        it stay on disk."""
        windows = self.windows
        if index < len(self.items) or windows is None or windows.store is None:
            item = self.items.pop(index)
            if windows is not None:
                windows.in_memory -= 1
                windows.used(self)
        else:
            after = self.items[-1].position if self.items else None
            item = windows.store.queued(self.host, after, 1, skip=index - len(self.items))[0]
            windows.paged_in += 1
        self.size -= 1
        return item

    def shapes(self, limit: int) -> list[str | None]:
        """The shapes of the first `limit` queued URLs (None: a discovery URL), read from the store for those
        beyond the window without paging them in: a policy chooses one of up to 2,000 (a sample) or 64."""
        found = [None if item.discover else item.shape for item in self.items[:limit]]
        windows = self.windows
        if (
            len(found) < limit
            and len(self.items) < self.size
            and windows is not None
            and windows.store is not None
        ):
            after = self.items[-1].position if self.items else None
            found += windows.store.queued_shapes(self.host, after, limit - len(found))
        return found

    def append(self, item: QueuedUrl) -> None:
        """At the back: kept in memory only while the whole queue is and it is shorter than the head."""
        self.size += 1
        windows = self.windows
        if windows is None:
            self.items.append(item)
        elif len(self.items) == self.size - 1 and len(self.items) < windows.head:
            self.items.append(item)
            windows.in_memory += 1

    def appendleft(self, item: QueuedUrl) -> None:
        self.size += 1
        self.items.insert(0, item)
        if self.windows is not None:
            self.windows.in_memory += 1
            self.windows.used(self)

    def clear(self) -> int:
        """Drop every queued URL (its rows too); returns how many there were."""
        dropped = self.size
        if self.windows is not None:
            self.windows.in_memory -= len(self.items)
            self.windows.recent.pop(self, None)
            if self.windows.store is not None:
                self.windows.store.drop_queued(self.host)
        self.items.clear()
        self.size = 0
        return dropped

    def stored(self, count: int) -> None:
        """A resumed queue: `count` URLs are in the store, none in memory yet."""
        self.size += count

    def _page_in(self, wanted: int, head: bool = False) -> list[QueuedUrl]:
        """Read the next rows of the queue from the store, at least up to `wanted` URLs in memory; with
        `head`, only up to the head (a host's first URL looked at alone, as a resumed host's first link
        does: 64 rows each for a million hosts would be paged in to be trimmed again)."""
        windows = self.windows
        if windows is None or windows.store is None:
            return []
        held = len(self.items)
        # doubling: a policy that reads 2,000 URLs pages them in with a few queries, not hundreds
        if windows.head == UNBOUNDED:
            limit = -1
        elif head:
            limit = max(wanted, windows.head) - held
        else:
            limit = max(wanted - held, held, PAGE_ROWS)
        after = self.items[-1].position if self.items else None
        more = windows.store.queued(self.host, after, limit)
        self.items.extend(more)
        windows.in_memory += len(more)
        windows.paged_in += len(more)
        windows.used(self)
        return more
