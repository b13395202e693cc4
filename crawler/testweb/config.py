"""Configuration of the local test web: one frozen dataclass, saved next to the ground truth."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHARED_DATA_ENV = "HOSTCRAWL_SHARED_DATA"
# Relative to the working directory: the layout of a development checkout next to ../shared.
DEFAULT_SHARED_ROBOTS = Path("..") / "shared" / "data" / "robots"
SIZE_TAILS = ("lognormal", "pareto")
MAX_HOST_PAGES = 100_000  # the graded preset's largest host


@dataclass(frozen=True, slots=True)
class TestWebConfig:
    """Everything that shapes the generated web; the same config always yields the same bytes."""

    __test__ = False  # not a pytest test class despite the name

    n_hosts: int = 500
    seed: int = 0
    hostile_share: float = 0.05
    mean_quality: float = 0.3
    icc: float = 0.5
    crawl_delay_share: float = 0.2
    crawl_delay_range: tuple[float, float] = (0.2, 1.0)
    real_robots_share: float = 0.2
    robots_missing_share: float = 0.05
    # None: $HOSTCRAWL_SHARED_DATA/robots, else ../shared/data/robots if present; "": none.
    robots_dir: str | None = None
    slow_seconds: tuple[float, float] = (2.0, 6.0)
    latency_s: float = 0.0  # every answer takes at least this long (a far server: requests in flight overlap)
    pages_median: float = 40.0
    pages_sigma: float = 1.2
    pages_range: tuple[int, int] = (5, 5000)
    # `ratelimit` hosts answer 429 once more than this many requests fall in the window.
    ratelimit_requests: int = 3
    ratelimit_window: float = 5.0
    retry_after_range: tuple[int, int] = (1, 2)
    error_share: float = 0.5
    # kinds from politeness_hosts.POLITENESS_KINDS, given to hosts 0, 1, ... in this order
    politeness_hosts: tuple[str, ...] = ()
    shared_ip_hosts: int = 0  # the hosts after those share one address in the resolver (shared hosting)
    farm_hosts: int = 0  # the last hosts are subdomains of one registered domain, farm.example
    # Well-behaved hosts whose pages carry robots directives, AI opt-outs, nofollow links, redirects to
    # seen and trap URLs, gzipped sitemaps and tdmrep.json (crawler/testweb/directive_hosts.py).
    directives_share: float = 0.1
    # languages of the hosts (crawler/testweb/words/), drawn uniformly; () is en 70%, de/fr/es 10% each
    languages: tuple[str, ...] = ()
    # share of high-quality pages planted as copies (testweb/duplicates.py); 0 plants none
    duplicate_share: float = 0.0
    # Revisits: the web as of this epoch; each page changes in each epoch with this probability.
    epoch: int = 0
    change_share: float = 0.2
    validators_share: float = 1.0  # hosts whose answers carry ETag and Last-Modified (the others send none)
    # Graded webs (testweb/graded.py): pages of graded quality (good, mediocre, junk) drawn lazily, and
    # host quality tied to size, in-links and language by the fields below (ignored otherwise).
    graded: bool = False
    scorer_auc: float = 0.85  # the default scorer's AUC against the truth: sets the share of mediocre pages
    size_tail: str = "lognormal"  # host sizes: "lognormal" (pages_sigma) or "pareto" (pareto_alpha)
    pareto_alpha: float = 1.1
    size_quality_corr: float = 0.0  # Spearman of host size with density (the paper gives none)
    inlinks_quality_corr: float = -0.12  # of link popularity with density (paper: HC, rho -0.119)
    # mean density of non-English hosts minus English ones (paper: Nemotron-Q medians 0.37 vs 0.49)
    language_quality_shift: float = -0.12

    def __post_init__(self) -> None:
        if self.n_hosts < 1:
            raise ValueError("n_hosts must be at least 1")
        if not 0.0 < self.icc < 1.0 or not 0.0 < self.mean_quality < 1.0:
            raise ValueError("icc and mean_quality must lie strictly between 0 and 1")
        if self.epoch < 0 or self.latency_s < 0:
            raise ValueError("epoch and latency_s must be >= 0")
        for name in (
            "hostile_share",
            "crawl_delay_share",
            "real_robots_share",
            "error_share",
            "directives_share",
            "duplicate_share",
            "change_share",
            "validators_share",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")

        if self.size_tail not in SIZE_TAILS:
            raise ValueError(f"size_tail must be one of {', '.join(SIZE_TAILS)}")
        if self.pareto_alpha <= 0.0 or self.pages_range[0] < 1 or self.pages_range[1] < self.pages_range[0]:
            raise ValueError("pareto_alpha must be > 0 and pages_range (lo, hi) with 1 <= lo <= hi")
        for name in ("size_quality_corr", "inlinks_quality_corr", "language_quality_shift"):
            if not -1.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie strictly between -1 and 1")
        if not 0.5 < self.scorer_auc <= 1.0:
            raise ValueError("scorer_auc must lie in (0.5, 1]")
        if self.graded and self.duplicate_share > 0:
            raise ValueError("a graded web plants no duplicates: duplicate_share must be 0")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestWebConfig:
        """Rebuild from JSON, where tuples came back as lists."""
        names = {f.name for f in dataclasses.fields(cls)}
        clean: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names
        }
        return cls(**clean)

    @classmethod
    def from_json(cls, text: str) -> TestWebConfig:
        return cls.from_dict(json.loads(text))


def resolve_robots_dir(cfg: TestWebConfig) -> Path | None:
    """Where real robots.txt files come from, or None: the test web must work without them."""
    if cfg.robots_dir == "":
        return None
    if cfg.robots_dir is not None:
        path = Path(cfg.robots_dir)
        return path if path.is_dir() else None
    env = os.environ.get(SHARED_DATA_ENV)
    candidate = Path(env) / "robots" if env else DEFAULT_SHARED_ROBOTS
    return candidate.resolve() if candidate.is_dir() else None


def graded_config(**fields: Any) -> TestWebConfig:
    """The graded preset: realistic scorer noise, heavy-tailed host sizes up to MAX_HOST_PAGES pages."""
    preset: dict[str, Any] = {
        "graded": True,
        "size_tail": "pareto",
        "pages_range": (5, MAX_HOST_PAGES),
    }
    return TestWebConfig(**{**preset, **fields})
