"""The durable frontier: URL queue, dedup fingerprints and host table in SQLite (WAL), one file per run.

Nothing in it is executable: request meta, page records and host records are JSON, a fetched page's HTML
is zstd-compressed text. A row that does not decode as JSON (a pickle from an older hostcrawl, or a file
someone prepared) is refused with a FrontierError; it is never unpickled.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from scheduler.queue_window import QueuedUrl, queued_shape

APPLICATION_ID = 0x68637277  # "hcrw": marks the file as a hostcrawl frontier
# 2: request meta as JSON (1 pickled it), fetched pages kept until scored; 3: each queued URL's place in
# its host's queue (`position`), so that the queue can be paged in from disk in order (queue_window.py);
# 4: each queued URL's shape (urls.url_shape), so that a queue paged in again is not parsed again;
# 5: state 3, owed (in flight when a run died, queued again and not yet handed out: still taken first)
SCHEMA_VERSION = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS seen (fp INTEGER PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    url TEXT NOT NULL,
    depth INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    position INTEGER NOT NULL DEFAULT 0,  -- order within the host's queue: back pushes +n, front pushes -n
    state INTEGER NOT NULL DEFAULT 0,  -- 0 pending, 1 handed out (in flight), 2 fetched, not yet scored,
                                       -- 3 owed: in flight when a run died, queued again, taken first
    discover INTEGER NOT NULL DEFAULT 0,  -- sitemaps: fetched first, never a quality sample
    extra BLOB,  -- JSON request meta a retry or redirect keeps
    shape TEXT,  -- urls.url_shape(url); NULL in a queue of schema 3 or older (computed as it is read)
    page TEXT,  -- state 2: the page record (JSON) written once its score is back
    html BLOB  -- state 2: the page's HTML (zstd), cleaned again on resume instead of fetched again
);
-- a host's queue in order, paged in as it drains (by state alone only a resume looks, scanning once)
CREATE INDEX IF NOT EXISTS queue_host ON queue(host, position);
CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY, record TEXT NOT NULL);
-- the crawler's politeness state per host and part (timing, robots), JSON, wall-clock times
CREATE TABLE IF NOT EXISTS politeness (
    host TEXT NOT NULL, part TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (host, part)
) WITHOUT ROWID;
"""
PENDING, LEASED, FETCHED, OWED = 0, 1, 2, 3
# A queued URL is pending or owed. Owed stays owed until it is handed out again, so a run killed before
# it got to them owes them still: its response may be in a WARC already and must get its page row.
QUEUED = f"state IN ({PENDING}, {OWED})"
FIRST_POSITION = -(1 << 63)  # below every queue position
# a queue row: id, host, url, depth, seq, extra, discover, position, shape
QueueRow = tuple[int, str, str, int, int, bytes | None, int, int, str | None]


class FrontierError(RuntimeError):
    """The frontier file cannot be used; the message says what to do."""


def encode_meta(meta: dict[str, Any]) -> bytes | None:
    """Request meta a retry or redirect keeps (counts, URLs, reasons), as JSON."""
    return json.dumps(meta, separators=(",", ":"), sort_keys=True).encode("utf-8") if meta else None


def decode_meta(extra: bytes | None, where: str = "frontier") -> dict[str, Any]:
    """The inverse of `encode_meta`; anything else is refused, never unpickled."""
    if not extra:
        return {}
    try:
        meta = json.loads(bytes(extra).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        meta = None
    if not isinstance(meta, dict):
        raise FrontierError(
            f"{where}: a queued request's meta is not JSON (a pickle from an older hostcrawl, or a file "
            "prepared by someone else); it is not loaded: start a new run with a fresh --out"
        )
    return meta


@dataclass(slots=True)
class FetchedPage:
    """A page fetched and archived whose score had not come back when the process stopped."""

    row_id: int
    host: str
    url: str
    depth: int
    seq: int
    discover: bool
    page: dict[str, Any]  # its page record, as the spider made it
    html: str


@dataclass(slots=True)
class StoredUrl:
    row_id: int
    host: str
    url: str
    depth: int
    seq: int
    extra: bytes | None
    discover: bool


def refused_by_disk(exc: sqlite3.Error) -> bool:
    """A write the disk refused (full, read-only, I/O error), not a foreign or damaged file."""
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CANTOPEN"))


class SQLiteFrontier:
    """Storage only: the scheduler keeps the working set in memory and writes through here.

    Writes accumulate in one transaction that `commit()` closes; the crawl commits once per page,
    so a kill -9 loses at most the page being processed (which is then fetched again).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_id: int | None = None  # the largest queue row id given out (None: not read yet)
        existed = path.exists() and path.stat().st_size > 0
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if existed:
                self._check_foreign()
            else:
                self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self.db.executescript(SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            if refused_by_disk(exc):  # the file is fine, the disk is not: the caller says so
                raise
            raise FrontierError(
                f"{path}: not a usable hostcrawl frontier ({exc}); "
                "start a new run with a fresh --out instead of --resume"
            ) from None
        self.db.execute("BEGIN")

    def _check_foreign(self) -> None:
        app_id = self.db.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise FrontierError(
                f"{self.path}: this SQLite file is not a hostcrawl frontier (application_id {app_id}); "
                "point --resume at a run directory hostcrawl created"
            )
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None and int(row[0]) in (2, 3, 4):
            self._migrate_from(int(row[0]))
            return
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise FrontierError(
                f"{self.path}: frontier schema {row and row[0]} is not {SCHEMA_VERSION}; "
                "resume it with the hostcrawl version that created it"
            )

    def _migrate_from(self, version: int) -> None:
        """Schema 2 kept no queue positions (each host's queue is in row order, as its resume read it), and
        schemas 2 and 3 no URL shapes (NULL: computed as the rows are read). Schema 4 only lacks the owed
        state, which its rows cannot be in."""
        self.db.execute("BEGIN")
        if version == 2:
            self.db.execute("ALTER TABLE queue ADD COLUMN position INTEGER NOT NULL DEFAULT 0")
            self.db.execute("UPDATE queue SET position=id")
            self.db.execute("DROP INDEX IF EXISTS queue_state")
        if version in (2, 3):
            self.db.execute("ALTER TABLE queue ADD COLUMN shape TEXT")
        self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        self.db.execute("COMMIT")

    def commit(self) -> None:
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def close(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")
        self.db.close()

    def abandon(self) -> None:
        """Close without committing: the file keeps what the last commit holds (a full disk, a stop)."""
        with contextlib.suppress(sqlite3.Error):
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        self.db.close()

    def add_seen(self, fps: Iterable[int]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO seen VALUES (?)", ((fp,) for fp in fps))

    def seen_among(self, fps: list[int]) -> set[int]:
        """Those of `fps` already seen: one query for a page's links (a JSON array, one cached statement)."""
        query = "SELECT fp FROM seen WHERE fp IN (SELECT value FROM json_each(?))"
        return {int(fp) for (fp,) in self.db.execute(query, (json.dumps(fps),))}

    def new_row_id(self) -> int:
        """The id of the next queued URL's row. Given out here, not by SQLite (the only writer is this
        process), so that a page's links go in with one `push_many`."""
        if self.last_id is None:
            self.last_id = int(self.db.execute("SELECT coalesce(max(id), 0) FROM queue").fetchone()[0])
        self.last_id += 1
        return self.last_id

    def push_many(self, rows: Iterable[QueueRow]) -> None:
        """Queue rows (id from `new_row_id`, host, url, depth, seq, extra, discover, position, shape)."""
        self.db.executemany(
            "INSERT INTO queue (id, host, url, depth, seq, extra, discover, position, shape) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def queued(self, host: str, after: int | None, limit: int, skip: int = 0) -> list[QueuedUrl]:
        """The host's queued URLs in queue order, after position `after` (None: from the front) and the
        `skip` that follow it; `limit` -1: all of them."""
        query = (
            "SELECT url, depth, seq, id, extra, discover, position, shape FROM queue "
            f"WHERE host=? AND {QUEUED} AND position>? ORDER BY position LIMIT ? OFFSET ?"
        )
        first = FIRST_POSITION if after is None else after
        rows = self.db.execute(query, (host, first, limit, skip))
        return [
            QueuedUrl(url, depth, seq, row_id, extra, bool(d), pos, queued_shape(url, shape))
            for url, depth, seq, row_id, extra, d, pos, shape in rows
        ]

    def queued_shapes(self, host: str, after: int | None, limit: int) -> list[str | None]:
        """The shapes of the host's queued URLs, as `queued` orders them (None: a discovery URL)."""
        query = (
            "SELECT discover, shape, iif(shape IS NULL, url, NULL) FROM queue "
            f"WHERE host=? AND {QUEUED} AND position>? ORDER BY position LIMIT ?"
        )
        rows = self.db.execute(query, (host, FIRST_POSITION if after is None else after, limit))
        return [None if d else queued_shape(url, shape) for d, shape, url in rows]

    def drop_queued(self, host: str) -> None:
        self.db.execute(f"DELETE FROM queue WHERE host=? AND {QUEUED}", (host,))

    def lease(self, row_id: int) -> None:
        self.db.execute("UPDATE queue SET state=? WHERE id=?", (LEASED, row_id))

    def fetched(self, row_id: int, page: dict[str, Any], html: str) -> None:
        """The page is archived and parsed (its links queued): from the next commit on, a resume cleans
        it again from here instead of fetching it again."""
        record = json.dumps(page, separators=(",", ":"), default=str)
        body = _ZSTD.compress(html.encode("utf-8"))
        query = "UPDATE queue SET state=?, page=?, html=? WHERE id=?"
        self.db.execute(query, (FETCHED, record, body, row_id))

    def done(self, row_id: int) -> None:
        self.db.execute("DELETE FROM queue WHERE id=?", (row_id,))

    def save_hosts(self, records: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO hosts VALUES (?, ?)",
            ((host, json.dumps(data, separators=(",", ":"))) for host, data in records),
        )

    def save_politeness(self, host: str, part: str, state: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO politeness VALUES (?, ?, ?)",
            (host, part, json.dumps(state, separators=(",", ":"))),
        )

    def politeness(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for host, part, state in self.db.execute("SELECT host, part, state FROM politeness"):
            yield host, part, self._json_object(state, f"the politeness state {part!r} of host {host!r}")

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- resume ---------------------------------------------------------------------------------

    def lease_again(self, meta_of: Callable[[str], dict[str, Any] | None]) -> int:
        """Queued or in-flight requests (not fetched as far as this store knows) for which `meta_of(url)`
        has meta to add: they get it and count as in flight at the stop, so `requeue_leased` puts them
        first and the resumed run takes them whatever its budget or their host's standing. Returns how
        many."""
        query = "SELECT id, url, extra FROM queue WHERE state!=?"
        leased = 0
        for row_id, url, extra in self.db.execute(query, (FETCHED,)).fetchall():
            if (added := meta_of(url)) is not None:
                meta = decode_meta(extra, f"{self.path}: row {row_id}") | added
                update = "UPDATE queue SET extra=?, state=? WHERE id=?"
                self.db.execute(update, (encode_meta(meta), LEASED, row_id))
                leased += 1
        return leased

    def requeue_leased(self) -> int:
        """Requests handed out when the process died go back to the front of their hosts' queues (the
        latest first), owed: at most those are refetched. Returns how many went back now (`owed_hosts`
        counts them with those a run killed before it handed them out again left owed)."""
        front = -self.top_position() - 1
        query = "UPDATE queue SET state=?, position=?-id WHERE state=?"
        return self.db.execute(query, (OWED, front, LEASED)).rowcount

    def owed_hosts(self) -> dict[str, int]:
        """Host -> its URLs in flight when a run died and not handed out again since."""
        query = "SELECT host, count(*) FROM queue WHERE state IN (?, ?) GROUP BY host"
        return {host: int(n) for host, n in self.db.execute(query, (LEASED, OWED))}

    def queued_counts(self) -> Iterator[tuple[str, int]]:
        query = f"SELECT host, count(*) FROM queue WHERE {QUEUED} GROUP BY host"
        for host, count in self.db.execute(query):
            yield host, int(count)

    def top_position(self) -> int:
        """The largest sequence number or queue position in use (-1: none): new ones start above it."""
        seq, position = self.db.execute("SELECT max(seq), max(abs(position)) FROM queue").fetchone()
        return -1 if seq is None else max(int(seq), int(position))

    def seen(self) -> Iterator[int]:
        for (fp,) in self.db.execute("SELECT fp FROM seen"):
            yield int(fp)

    def pending(self) -> Iterator[StoredUrl]:
        """Queued and in-flight URLs (not the fetched ones: see `fetched_pages`)."""
        query = "SELECT id, host, url, depth, seq, extra, discover FROM queue WHERE state!=? ORDER BY id"
        for row_id, host, url, depth, seq, extra, discover in self.db.execute(query, (FETCHED,)):
            decode_meta(extra, f"{self.path}: row {row_id}")
            yield StoredUrl(row_id, host, url, depth, seq, extra, bool(discover))

    def fetched_pages(self) -> Iterator[FetchedPage]:
        query = "SELECT id, host, url, depth, seq, discover, page, html FROM queue WHERE state=? ORDER BY id"
        for row_id, host, url, depth, seq, discover, page, html in self.db.execute(query, (FETCHED,)):
            try:
                record = json.loads(page)
                text = zstandard.ZstdDecompressor().decompress(html).decode("utf-8")
            except (TypeError, ValueError, zstandard.ZstdError):
                record = None
            if not isinstance(record, dict):
                raise FrontierError(f"{self.path}: row {row_id}: the fetched page is not JSON and text")
            yield FetchedPage(row_id, host, url, depth, seq, bool(discover), record, text)

    def check(self) -> None:
        """Decode every stored row (a resume's first step): a bad one fails here, before any crawling."""
        for _ in self.pending():
            pass
        for _ in self.fetched_pages():
            pass
        for _ in self.hosts():
            pass
        for _ in self.politeness():
            pass

    def hosts(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for host, record in self.db.execute("SELECT host, record FROM hosts"):
            yield host, self._json_object(record, f"the record of host {host!r}")

    def _json_object(self, text: Any, what: str) -> dict[str, Any]:
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            data = None
        if not isinstance(data, dict):
            raise FrontierError(f"{self.path}: {what} is not JSON; start a new run with a fresh --out")
        return data


_ZSTD = zstandard.ZstdCompressor(level=1)  # kept only until the page is scored
