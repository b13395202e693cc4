"""Counters of a run that took several processes (kill -9, Ctrl-C, --resume): one stats.json for all.

Each process checkpoints its own counters in the frontier with every page it commits (so a killed
process's counters match the rows it left); a resume folds them into the earlier attempts' totals.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

STATS_META = "stats"  # this attempt's counters, as of its last committed page
PRIOR_STATS_META = "stats_prior"  # every earlier attempt's counters, merged
ATTEMPTS = "hostcrawl/attempts"  # processes the run took: 1 per process, summed
FIRST = frozenset({"start_time"})
# gauges and derived figures: the latest attempt's value is the run's
LATEST = frozenset(
    {"finish_reason", "finish_time", "frontier/fetched", "memusage/startup", "hostcrawl/pages_per_second"}
)


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def merge_stats(prior: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Counters and seconds add up; maxima and peaks take the larger; means, gauges and text the latest."""
    out = dict(prior)
    for key, value in current.items():
        old = out.get(key)
        if key in FIRST and old is not None:
            continue
        last = key.rsplit("/", 1)[-1]
        if key in LATEST or not (_number(value) and _number(old)) or last.endswith("_mean"):
            out[key] = value
        elif "max" in last or "peak" in last:
            out[key] = max(old, value)
        else:
            out[key] = old + value
    return out


def loads_stats(text: str | None) -> dict[str, Any]:
    data = json.loads(text) if text else {}
    return data if isinstance(data, dict) else {}


def dumps_stats(stats: dict[str, Any]) -> str:
    return json.dumps({k: jsonable(v) for k, v in stats.items()}, separators=(",", ":"), sort_keys=True)
