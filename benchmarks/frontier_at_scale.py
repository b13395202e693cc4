"""The embedded frontier at 100M queued URLs on 1M hosts (issue 27): resume, enqueue, hand-out, peak RSS.

    python -m benchmarks.frontier_at_scale [--hosts 1000000] [--urls 1000000,100000000] [--new 500000]
        [--leases 200000] [--dir DIR] [--keep]

Queueing 100M URLs through `HostFrontier.add_links` takes about four hours on this machine (7k URLs/s at
1M hosts, `benchmarks/scheduler_cost.py`). So each size's frontier file is first written in SQL
(`prefill`): the queue rows `add_links` writes for `scheduler_cost.urls(hosts, total)`, each with its URL
shape and in its host's queue order, and each URL's dedup fingerprint, computed by the frontier's own
`fingerprint` (tests/test_frontier_prefill.py checks the file against one the frontier wrote). Then a fresh
process opens it as `crawl --resume` does (`load_frontier`) and is timed on what a crawl of that frontier
does: queue `--new` links, 100 per page to 100 different hosts, with a commit per page, then hand out,
fetch and score `--leases` pages with the adaptive policy. Its peak RSS is the frontier's own. Every size
is measured the same way, so the rates at 100M are compared with the rates at 1M (target: within 2x, peak
RSS under 2 GB).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.scheduler_cost import hand_out, link_pages, page_url, peak_rss_mb, urls
from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.policies import PolicyConfig, make_policy
from scheduler.resume import load_frontier
from scheduler.sqlite_store import SQLiteFrontier
from scheduler.urls import fingerprint, url_shape

# the prefill's own SQLite page cache (2 GB); the measured process keeps the frontier's default
BUILD_CACHE_KIB = 2_000_000

# scheduler_cost.urls in SQL: host h's URL k (0 <= k < per_host), row i = h * per_host + k
PREFILL_QUEUE = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < :rows)
INSERT INTO queue (id, host, url, depth, seq, position, shape)
SELECT i + 1, 'h' || (i / :per_host) || '.example',
       'http://h' || (i / :per_host) || '.example/s' || ((i % :per_host) % 7)
           || '/p' || (i % :per_host) || '.html',
       1, i, i, :shape
FROM n
"""


def prefill(db: Path, hosts: int, total: int) -> int:
    """Write the frontier file `HostFrontier.add_links` would leave after queueing `urls(hosts, total)`
    (as the embedded crawl stores it: a queue row per URL with its shape, in queue order, and the URL's
    dedup fingerprint; hosts that were never fetched have no host row); returns the URLs written."""
    per_host = max(1, total // hosts)
    shapes = {url_shape(url) for url in urls(1, min(per_host, 1000))}
    if len(shapes) != 1:
        raise ValueError(f"the generated URLs have several shapes {sorted(shapes)}; the prefill writes one")
    SQLiteFrontier(db).close()  # the schema, application id and version, as a crawl creates them
    conn = sqlite3.connect(db, isolation_level=None)
    try:  # one transaction with no journal: a failed build leaves a file to delete, not a frontier
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute(f"PRAGMA cache_size=-{BUILD_CACHE_KIB}")
        conn.create_function("fingerprint", 1, fingerprint, deterministic=True)
        rows = hosts * per_host
        conn.execute("BEGIN")
        conn.execute("DROP INDEX queue_host")  # built once after the rows: a sort instead of 100M inserts
        conn.execute(PREFILL_QUEUE, {"rows": rows, "per_host": per_host, "shape": shapes.pop()})
        conn.execute("INSERT OR IGNORE INTO seen SELECT fingerprint(url) FROM queue ORDER BY 1")
        conn.execute("CREATE INDEX queue_host ON queue(host, position)")
        conn.execute("COMMIT")
    finally:
        conn.close()
    return rows


def new_links(hosts: int, per_host: int, count: int) -> Iterator[list[str]]:
    """`count` URLs not queued yet, as pages of 100 links to 100 hosts each (the last page may be shorter)."""
    return link_pages(page_url(j % hosts, per_host + j // hosts) for j in range(count))


def measure_resumed(db: Path, hosts: int, total: int, new: int, leases: int) -> dict[str, float]:
    """Open the prefilled frontier as --resume does, queue `new` links, hand out `leases` pages (this
    process's peak RSS is the frontier's)."""
    clock = [0.0]
    started = time.perf_counter()
    frontier = HostFrontier(
        SQLiteFrontier(db),
        make_policy("adaptive", PolicyConfig()),
        FrontierLimits(budget=10**9),
        lambda: clock[0],
    )
    load_frontier(frontier)
    resume_s = time.perf_counter() - started
    rss_resumed = peak_rss_mb()
    queued_hosts = len(frontier.hosts)
    started = time.perf_counter()
    refused = 0
    for page in new_links(hosts, max(1, total // hosts), new):
        refused += sum(reason is not None for reason in frontier.add_links(page, 1))
        frontier.commit()
    enqueue = new / (time.perf_counter() - started)
    next_rate = hand_out(frontier, leases, clock)
    frontier.store.close()
    return {
        "hosts": queued_hosts,
        "resume_s": resume_s,
        "rss_resumed_mb": rss_resumed,
        "enqueue": enqueue,
        "refused": refused,
        "next": next_rate,
        "rss_mb": peak_rss_mb(),
        "db_mb": db.stat().st_size / 2**20,
    }


def positive(text: str) -> int:
    """An argparse type: a whole number above 0 (else exit code 2 with one line)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return value


def sizes(text: str) -> list[int]:
    """--urls: comma-separated numbers of URLs, e.g. 1000000,100000000."""
    return [positive(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=positive, default=1_000_000)
    parser.add_argument(
        "--urls",
        type=sizes,
        default="1000000,100000000",
        help="comma-separated sizes; the first is the baseline",
    )
    parser.add_argument(
        "--new", type=positive, default=500_000, help="links queued into each resumed frontier"
    )
    parser.add_argument("--leases", type=positive, default=200_000)
    parser.add_argument(
        "--dir", type=Path, help="where the frontier files go (default: a temp dir; 100M: ~13 GB)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the frontier files")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # internal: one resumed measurement
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure_resumed(args.measure, args.hosts, args.urls[0], args.new, args.leases)))
        return
    root = Path(tempfile.mkdtemp(prefix="frontier-at-scale-", dir=args.dir))
    print(
        f"{args.hosts:,} hosts, {args.new:,} new links, {args.leases:,} leases, policy adaptive; "
        f"files in {root}"
    )
    base: dict[str, float] | None = None
    base_rows = 0
    try:
        for total in args.urls:
            db = root / f"frontier-{total}.sqlite3"
            started = time.perf_counter()
            rows = prefill(db, args.hosts, total)
            built = time.perf_counter() - started
            print(
                f"{rows:>12,} URLs  prefilled in {built:.0f} s ({db.stat().st_size / 2**30:.1f} GB)",
                flush=True,
            )
            command = [sys.executable, "-m", "benchmarks.frontier_at_scale", "--measure", str(db)]
            command += ["--hosts", str(args.hosts), "--urls", str(total), "--new", str(args.new)]
            command += ["--leases", str(args.leases)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{'':>14}resume {r['resume_s']:.0f} s ({r['hosts']:,} hosts, {r['rss_resumed_mb']:.0f} MB)  "
                f"enqueue {r['enqueue']:.0f}/s ({r['refused']} refused)  next+end+observe {r['next']:.0f}/s  "
                f"peak RSS {r['rss_mb']:.0f} MB",
                flush=True,
            )
            if base is None:
                base, base_rows = r, rows
            else:
                print(
                    f"{'':>14}x {base_rows:,} URLs: enqueue "
                    f"{r['enqueue'] / base['enqueue']:.2f}  next {r['next'] / base['next']:.2f}  "
                    f"resume {r['resume_s'] / base['resume_s']:.1f}  "
                    f"peak RSS {r['rss_mb'] / base['rss_mb']:.2f}",
                    flush=True,
                )
            if not args.keep:
                db.unlink()
                for suffix in ("-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
