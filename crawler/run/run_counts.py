"""A run's headline counts, each defined once, so the end line, report.md and the status page say the
same number under the same name (README: what the counts mean).

A crawl of 400 pages used to end with "578 responses" (robots.txt, tdmrep.json, redirects and retries
counted too) beside a progress line at 400/400 and a report of 496 rows: three true numbers under one
word. Each now has its own name.
"""

from __future__ import annotations

from typing import Any

from crawler.pages.outcomes import REFUSALS

# name -> (the stats.json key it is read from, its name as users read it); README says what each counts
COUNTS: dict[str, tuple[str, str]] = {
    "fetched": ("frontier/fetched", "pages fetched"),  # what --max-pages counts and the progress line shows
    "page_rows": ("page/recorded", "page rows"),  # rows of pages.parquet, failures and redirects included
    "responses": ("response_received_count", "responses"),  # robots.txt, redirect hops and retries too
    "curated": ("page/curated", "pages curated"),  # pages whose text went to text/
}


def run_counts(stats: dict[str, Any]) -> dict[str, int]:
    """The headline counts of a run's stats (a distributed run's merged stats too)."""
    out = {name: int(stats.get(key, 0) or 0) for name, (key, _) in COUNTS.items()}
    if not out["fetched"]:  # a distributed worker's own stats: the run's frontier counted them
        out["fetched"] = int(stats.get("frontier/run/fetched", 0) or 0)
    return out


def label(name: str) -> str:
    """The count's name as users read it, e.g. "pages fetched"."""
    return COUNTS[name][1]


def split_failures(failed: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """fetch/failed/<reason> counts (status.counters' fetch_failures) as (errors, refusals): a refusal by
    robots.txt or by our own rules is the crawl obeying, not an error. Errors come most frequent first."""
    errors = {k: v for k, v in sorted(failed.items(), key=lambda kv: -kv[1]) if k not in REFUSALS}
    return errors, {k: v for k, v in failed.items() if k in REFUSALS}
