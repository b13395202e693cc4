"""What became of a URL, named once: the outcome column's values and which fetch failures are refusals.

Free of polars and pyarrow: the CLI (`run_counts`, `--help`) reads it without loading the table engines.
"""

from __future__ import annotations

# What became of a URL: only `fetched` and `http_error` rows had a response.
OUTCOMES = ("fetched", "http_error", "robots_refused", "refused", "failed")
REFUSED_BY_US = ("private_address", "crawl_delay_too_long", "ignored")
# fetch/failed/<reason>s that are the crawl obeying a rule (robots.txt, its own), not failures
REFUSALS = frozenset({"robots_forbidden", *REFUSED_BY_US})
