"""What a distributed run looks like now, read from its Redis: the status page's snapshot for the whole run.

Same schema as crawler/monitor/status.py's (so `frontier status --serve` serves the same page, /api/status and
/metrics as `crawl --status-port`), plus `workers` and `frontier`. Counters are the sum of every worker's
counters as of its last committed page; pages fetched and queue sizes are the frontier's own.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from crawler.monitor.status import HOST_STATES, TOP_HOSTS, counters, scan_hosts_empty
from crawler.run.run_counts import split_failures
from crawler.run.run_stats import STATS_META, loads_stats, merge_stats
from crawler.run.worker_merge import ALIVE_S
from scheduler.export import host_state_frame
from scheduler.redis_frontier import RedisFrontier

WAITS_SAMPLED = 1000  # hosts waiting for politeness looked at for the mean wait


def worker_rows(frontier: RedisFrontier, now: float) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for worker, info in sorted(frontier.workers().items()):
        age = now - float(info.get("seen", 0))
        state = "finished" if info.get("finished") else ("running" if age < ALIVE_S else "gone")
        if state == "running" and info.get("paused"):
            state = "paused"
        out[worker] = {
            "state": state,
            "last_seen_s": round(age, 1),
            "fetched": int(info.get("fetched", 0)),
            "leases": int(info.get("leases", 0)),
            "pid": info.get("pid"),
            "scores_pending": int(info.get("scores_pending") or 0),
            "gauges": info.get("gauges") if isinstance(info.get("gauges"), dict) else {},
        }
    return out


def frontier_view(frontier: RedisFrontier) -> dict[str, Any]:
    """The run's hosts and leases by state, summed over its shards."""
    totals = [0] * 10
    for part in frontier.parts:
        totals = [a + b for a, b in zip(totals, _part_view(part), strict=True)]
    known, ready, new, waiting, busy, leases, blocked, dropped, urgent, dormant = totals
    names = ("hosts_known", "hosts_ready", "hosts_waiting", "hosts_busy", "leases")
    values = [known, ready + new, waiting, busy, leases, blocked, dropped + dormant, urgent]
    view: dict[str, Any] = dict(
        zip((*names, "hosts_blocked", "hosts_dropped", "hosts_requeued"), values, strict=True)
    )
    view["queued_urls"] = frontier.queued()
    view["state"] = frontier.meta().get("state", "unknown")
    return view


def _part_view(frontier: RedisFrontier) -> list[int]:
    key = frontier.key
    pipe = frontier.pipeline()
    pipe.hlen(key("prio"))
    pipe.zcard(key("eligible"))
    pipe.zcard(key("eligible_new"))
    pipe.zcard(key("waiting"))
    pipe.hlen(key("busy"))
    pipe.zcard(key("leases"))
    pipe.scard(key("blocked"))
    pipe.scard(key("dropped"))
    pipe.hlen(key("urgent"))
    pipe.scard(key("revivable"))
    return [int(n) for n in pipe.execute()]


def run_snapshot(frontier: RedisFrontier, curve: list[list[float]] | None = None) -> dict[str, Any]:
    now = time.time()
    meta = frontier.meta()
    started = float(meta.get("started", now))
    elapsed = max(1e-6, now - started)
    budget = int(meta.get("budget", 0))
    run_counters = frontier.counters()
    fetched = run_counters.get("fetched", 0)
    workers = worker_rows(frontier, now)
    stats: dict[str, Any] = {}
    for worker in workers:
        stats = merge_stats(stats, loads_stats(frontier.worker_meta(worker).get(STATS_META)))
    count = counters(stats)
    errors, refusals = split_failures(count["fetch_failures"])
    view = frontier_view(frontier)
    hosts = _hosts(frontier, view)
    if curve is not None:
        curve.append([round(elapsed, 1), fetched, count["curated"]])
    live = [w for w in workers.values() if w["state"] in ("running", "paused")]

    def gauges(part: str, name: str) -> int:
        """A worker gauge (crawler/monitor/status.py's WorkerGauges) summed over the running workers."""
        return sum(int((w["gauges"].get(part) or {}).get(name) or 0) for w in live)

    return {
        "state": "finished" if not live and view["leases"] == 0 and workers else "running",
        "finish_reason": None,
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "updated_at": datetime.now(UTC).isoformat(),
        "elapsed_s": round(elapsed, 2),
        "pages": {
            "fetched": fetched,
            "budget": budget,
            "budget_spent": round(fetched / budget, 4) if budget else None,
            "per_second": _recent_rate(curve) if curve else round(fetched / elapsed, 2),
            "per_second_mean": round(fetched / elapsed, 2),
            "high_quality": count["curated"],
            "high_quality_per_fetch": round(count["curated"] / fetched, 4) if fetched else None,
            "in_flight": view["hosts_busy"],
        },
        "curve": list(curve or []),
        "hosts": hosts,
        "politeness": {
            "hosts_waiting": view["hosts_waiting"],
            "mean_wait_s": hosts["mean_wait_s"],
            "hosts_tracked": view["hosts_known"],
            "hosts_backing_off": gauges("politeness", "hosts_backing_off"),
            "hosts_with_crawl_delay": gauges("politeness", "hosts_with_crawl_delay"),
            "hosts_too_slow": gauges("politeness", "hosts_too_slow"),
            "backoffs": count["backoffs"],
            "retry_after_honoured": count["retry_after_honoured"],
            "parked": count["parked"],
        },
        "cleaning": {  # each worker cleans its own pages: these are the sums over the running workers
            "cleaner": stats.get("hostcrawl/cleaner") or "",
            "workers": gauges("cleaning", "workers"),
            "queue_pages": gauges("cleaning", "queue_pages"),
            "queue_limit": gauges("cleaning", "queue_limit"),
            "held_back_pages": gauges("cleaning", "held_back_pages"),
            "batches_in_pool": gauges("cleaning", "batches_in_pool"),
            "scores_pending": sum(w["scores_pending"] for w in live),
            "score_lag_scored": 0,
            "score_lag_sum": 0,
            "score_lag_mean": None,
            "score_lag_max": None,
        },
        "errors": errors,
        "refusals": refusals,
        "policy": {"name": stats.get("hostcrawl/policy"), "settings": {"budget_pages": budget}},
        "counters": count,
        "workers": workers,
        "frontier": {**view, "counters": run_counters},
    }


def _hosts(frontier: RedisFrontier, view: dict[str, Any]) -> dict[str, Any]:
    records = frontier.host_records()
    out = scan_hosts_empty()
    by_state = dict.fromkeys(HOST_STATES, 0)
    for state, n in Counter(str(r.get("state", "new")) for r in records.values()).items():
        by_state[state] = n
    by_state["new"] += max(0, view["hosts_known"] - len(records))  # queued, nothing scored yet
    frame = host_state_frame(records.items(), {})
    scored = [row for row in frame.iter_rows(named=True) if row["scored_pages"]]
    top = heapq.nlargest(TOP_HOSTS, scored, key=lambda row: row["density_mean"])
    waits = [
        pair
        for part in frontier.parts
        for pair in part.client.zrange(part.key("waiting"), 0, WAITS_SAMPLED - 1, withscores=True)
    ]
    now_ms = time.time() * 1000
    wait_s = [max(0.0, (float(pair[1]) - now_ms) / 1000) for pair in waits]
    out.update(
        known=max(view["hosts_known"], len(records)),
        by_state=by_state,
        top=[
            {
                "host": row["host"],
                "state": row["state"],
                "density_mean": round(row["density_mean"], 4),
                "density_sd": round(row["density_sd"], 4),
                "samples": [],
                "sample_density": row["sample_density"],
                "scored": row["scored_pages"],
                "high_quality": 0,
                "fetched": row["scored_pages"],
                "queued": 0,
            }
            for row in top
        ],
        waiting=view["hosts_waiting"],
        mean_wait_s=round(sum(wait_s) / len(wait_s), 3) if wait_s else 0.0,
        discovered=view["hosts_known"],
    )
    return out


def _recent_rate(curve: list[list[float]], window_s: float = 10.0) -> float:
    last = curve[-1]
    first = next((p for p in curve if last[0] - p[0] <= window_s), last)
    return round((last[1] - first[1]) / (last[0] - first[0]), 2) if last[0] > first[0] else 0.0


def run_state(snap: dict[str, Any]) -> str:
    """finished (no live worker, no lease), draining (asked to stop), or running."""
    if snap["state"] == "finished":
        return "finished"
    return "draining" if snap["frontier"]["state"] == "draining" else "running"


def status_text(snap: dict[str, Any]) -> str:
    """`hostcrawl frontier status`: the run in a few lines."""
    f, pages = snap["frontier"], snap["pages"]
    budget = f"/{pages['budget']}" if pages["budget"] else ""
    lines = [
        # the run's state from its workers (the frontier's own says only running or draining: it said
        # "running" after the only worker had finished)
        f"run state {run_state(snap)}, {snap['elapsed_s']:.0f} s since it was seeded",
        f"pages fetched {pages['fetched']}{budget}, {pages['per_second_mean']} pages/s over the run, "
        f"high quality {pages['high_quality']}",
        f"hosts {f['hosts_known']} known: {f['hosts_ready']} ready, {f['hosts_waiting']} waiting for "
        f"politeness, {f['hosts_busy']} in flight, {f['hosts_blocked']} blocked, "
        f"{f['hosts_dropped']} dropped",
        f"queued URLs {f['queued_urls']}, leases {f['leases']} "
        f"(expired so far {f['counters'].get('lease_expired', 0)}, "
        f"requeued now {f['hosts_requeued']} hosts), "
        f"invalid payloads {f['counters'].get('invalid_payload', 0)}",
        "workers:",
    ]
    for name, w in snap["workers"].items():
        lines.append(
            f"  {name}: {w['state']}, last seen {w['last_seen_s']} s ago, {w['fetched']} fetched, "
            f"{w['leases']} leases"
        )
    if not snap["workers"]:
        lines.append("  none yet")
    return "\n".join(lines)
