"""A run's headline counts, each defined once, so the end line, report.md and the status page say the
same number under the same name (README: what the counts mean).

A crawl of 400 pages used to end with "578 responses" (robots.txt, tdmrep.json, redirects and retries
counted too) beside a progress line at 400/400 and a report of 496 rows: three true numbers under one
word. Each now has its own name.
"""

from __future__ import annotations

from typing import Any

# name -> (the stats.json key it is read from, what it counts)
COUNTS: dict[str, tuple[str, str]] = {
    "fetched": (
        "frontier/fetched",
        "pages fetched: URLs the frontier handed out whose fetch ended, answered or failed; what "
        "--max-pages counts and the progress line shows",
    ),
    "page_rows": (
        "page/recorded",
        "page rows: rows of pages.parquet, one per fetched URL's outcome, failures and redirects included",
    ),
    "responses": (
        "response_received_count",
        "responses: every HTTP answer received, robots.txt, tdmrep.json, redirect hops and retried "
        "attempts included",
    ),
    "curated": ("page/curated", "pages curated: pages whose text went to text/*.jsonl.zst"),
}
# fetch/failed/<reason> reasons that are the crawler obeying a rule, not a failure: not counted as errors
REFUSALS = frozenset({"robots_forbidden", "crawl_delay_too_long", "private_address"})


def run_counts(stats: dict[str, Any]) -> dict[str, int]:
    """The headline counts of a run's stats (a distributed run's merged stats too)."""
    out = {name: int(stats.get(key, 0) or 0) for name, (key, _) in COUNTS.items()}
    if not out["fetched"]:  # a distributed worker's own stats: the run's frontier counted them
        out["fetched"] = int(stats.get("frontier/run/fetched", 0) or 0)
    return out


def label(name: str) -> str:
    """The count's name as users read it, e.g. "pages fetched"."""
    return COUNTS[name][1].split(":", 1)[0]


def errors(stats: dict[str, Any]) -> dict[str, int]:
    """fetch/failed/<reason> counts that are failures; refusals by robots.txt and our own rules are not."""
    prefix = "fetch/failed/"
    return {
        key[len(prefix) :]: int(value)
        for key, value in stats.items()
        if key.startswith(prefix) and key[len(prefix) :] not in REFUSALS
    }


def refusals(stats: dict[str, Any]) -> dict[str, int]:
    prefix = "fetch/failed/"
    return {
        key[len(prefix) :]: int(value)
        for key, value in stats.items()
        if key.startswith(prefix) and key[len(prefix) :] in REFUSALS
    }
