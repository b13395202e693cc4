"""A recrawl plan's settings and their checks, apart from the planner (DuckDB): `hostcrawl recrawl plan`
builds its options from these defaults without loading the planner."""

from __future__ import annotations

from dataclasses import dataclass

from analytics.study_inputs import DEFAULT_QUALITY, InputError


@dataclass(slots=True)
class PlanConfig:
    budget: int = 10_000  # pages in all
    per_host_cap: int = 1_000
    max_tld_share: float = 0.3
    max_language_share: float = 0.6
    quality: str = DEFAULT_QUALITY
    crawl: str | None = None
    scheme: str | None = None  # None: each host's from a previous run, else https

    def check(self) -> None:
        if self.budget < 1:
            raise InputError(f"--budget {self.budget}: a plan needs at least one page")
        if self.per_host_cap < 1:
            raise InputError(f"--per-host-cap {self.per_host_cap}: must be at least 1")
        for flag, value in (
            ("--max-tld-share", self.max_tld_share),
            ("--max-language-share", self.max_language_share),
        ):
            if not 0 < value <= 1:
                raise InputError(f"{flag} {value}: a share in (0, 1]")
        if self.scheme not in (None, "http", "https"):
            raise InputError(f"--scheme {self.scheme}: http or https")
