"""Typed crawl configuration: one TOML file plus CLI flags, validated before anything is written."""

from __future__ import annotations

import dataclasses
import re
import socket
import tomllib
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomli_w

from cleaner.quality import ScorerSpec, ScorerSpecError, scorer_names
from cleaner.registry import cleaner_names, missing_module
from crawler import __version__
from crawler.errors import ConfigError, install_hint
from crawler.run.seed_urls import check_seed
from scheduler.frontier_limits import KEEP_BUSY
from scheduler.policies import POLICIES, TRUTH_POLICIES, PolicyConfig
from scheduler.queue_window import MEMORY_URLS
from scheduler.urls import MAX_LINKS_PER_PAGE, MAX_URL_LENGTH

SCRAPY_SCHEDULER = "scrapy"  # Scrapy's own host-blind scheduler, kept as a benchmark baseline
POLICY_NAMES = (*POLICIES, SCRAPY_SCHEDULER)
DEFAULT_CONTACT_URL = "https://github.com/hostcrawl/hostcrawl#crawler"


@dataclass(slots=True)
class PolitenessConfig:
    user_agent: str = f"hostcrawl/{__version__}"
    contact_url: str = DEFAULT_CONTACT_URL
    min_delay: float = 1.0  # seconds between two requests to one host, before robots' Crawl-delay
    max_crawl_delay: float = 60.0  # hosts asking for a longer Crawl-delay are skipped, not rushed
    per_host_concurrency: int = 1
    group_concurrency: int = 1  # in flight per group of hosts sharing an IP or registered domain; 0: none
    obey_robots: bool = True
    allow_private: bool = False  # loopback/private/link-local targets are refused unless set
    backoff_base: float = 2.0  # first wait after a 429/503 without Retry-After
    backoff_max: float = 600.0
    max_park: float = 6 * 3600.0  # Retry-After beyond backoff_max parks a host this long at most, then blocks
    breaker_failures: int = 6  # timeouts/connection failures in a row that block a host
    robots_attempts: int = (
        4  # robots.txt 429/5xx/unreachable this often in a row: host parked (retried later)
    )
    robots_ttl: float = 24 * 3600.0  # a cached robots.txt is fetched again after this long (RFC 9309)
    address_ttl: float = 300.0  # seconds a host's address verdict is kept
    hosts_file: str | None = None  # /etc/hosts-style NAME -> ADDRESS overrides, consulted before DNS
    retry_times: int = 2

    def full_user_agent(self) -> str:
        return f"{self.user_agent} (+{self.contact_url})"


@dataclass(slots=True)
class FetchConfig:
    max_pages: int = 1000  # global page budget
    max_depth: int = 0  # 0 = unlimited
    concurrency: int = 32  # requests in flight over all hosts
    timeout: float = 30.0
    max_page_bytes: int = 4 * 2**20  # raw bytes kept; longer bodies are cut and marked truncated
    max_decoded_bytes: int = 16 * 2**20  # after content decoding (gzip bombs stop here)
    max_redirects: int = 5
    max_links_per_page: int = MAX_LINKS_PER_PAGE  # links followed from one page; the rest counted
    max_url_length: int = MAX_URL_LENGTH  # longer URLs are not queued (frontier/dropped/trap/url_too_long)
    follow_cross_host: bool = True
    allow: list[str] = field(default_factory=list)  # follow only links matching one of these regexes
    deny: list[str] = field(default_factory=list)  # never follow links matching one of these regexes
    proxy: str | None = None  # http proxy every request goes through (the local test web)
    previous: str | None = None  # a previous run: its pages are revisited with conditional GETs
    # queued URLs the frontier holds in memory beyond each host's queue head, the rest on disk in
    # RUN/frontier.sqlite3; 0 = every queued URL in memory (faster, ~700 bytes per URL)
    frontier_memory_urls: int = MEMORY_URLS
    # pages leased and not yet scored, at most, when the policy learns from scores; a pool that falls
    # behind makes the crawl wait for scores instead of fetching ahead of them. 0 = concurrency + two
    # batches per cleaning worker (96 on 2 cores), or a tenth of a max_pages under 960 (at least 8)
    max_unscored: int = 0


_POLICY_DEFAULTS = PolicyConfig()


@dataclass(slots=True)
class CrawlPolicyConfig:
    """The [policy] table: which policy, and the settings a user may change; their defaults are the
    scheduler's (scheduler/policy_base.py PolicyConfig), written once there."""

    name: str = "adaptive"  # bfs | uniform | hc_depth | sample_deepen | adaptive | oracle
    sample_pages: int = _POLICY_DEFAULTS.sample_pages  # k pages sampled per host before it is ranked
    # sample_deepen, adaptive: budget share for discovering and sampling hosts
    explore_share: float = _POLICY_DEFAULTS.explore_share
    # share of the request slots kept busy with hosts the policy would rather not fetch now (its fillers)
    # while its best hosts rest: 0 = best pages per fetch, 1 = best pages per hour (README: the clock)
    keep_busy: float = KEEP_BUSY
    per_host_budget: int = 0  # pages per host, 0 = no cap
    priors: str | None = None  # ranks parquet (hostcrawl graph ingest) for HC/PR priors
    truth: str | None = None  # the test web's hosts.parquet: only the oracle policy reads it
    plan: str | None = None  # a recrawl plan (hostcrawl recrawl plan): seeds, per-host budgets, priors


@dataclass(slots=True)
class CleaningConfig:
    cleaner: str = "blocks_v1"  # the trained block model: better than trafilatura and 4x faster
    scorers: list[str] = field(default_factory=lambda: ["heuristic_v3"])
    threshold: float = 0.5  # a page is curated when its first scorer exceeds this
    # per-language thresholds in place of `threshold`, e.g. {zh = 0.4}; the scheduler judges hosts by them
    language_thresholds: dict[str, float] = field(default_factory=dict)
    workers: int = 0  # cleaning processes, 0 = one per core; for a model cleaner, model processes (0 = one)
    # Pages that opt out of AI training (noai, TDMRep) are archived but not curated unless this is set.
    curate_optout: bool = False
    # rescraper_v1's <rewrite> pages are text a model wrote, not the page's own: false keeps them out of
    # the curated text (archived and counted, page/kept_out/generated)
    allow_rewrite: bool = True


@dataclass(slots=True)
class OutputConfig:
    warc_max_bytes: int = 2**30
    text_docs_per_file: int = 10_000


@dataclass(slots=True)
class CrawlConfig:
    seeds: list[str] = field(default_factory=list)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    policy: CrawlPolicyConfig = field(default_factory=CrawlPolicyConfig)
    cleaning: CleaningConfig = field(default_factory=CleaningConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    scrapy: dict[str, Any] = field(default_factory=dict)  # Scrapy settings passed through (`-s NAME=VALUE`)

    def to_toml(self) -> str:
        """Input tables by absolute path, so `crawl --config RUN/config.toml` repeats from any folder."""
        data = _drop_none(dataclasses.asdict(self))
        for key in TABLE_KEYS:
            if key in data["policy"]:
                data["policy"][key] = str(Path(data["policy"][key]).resolve())
        return f"# hostcrawl {__version__} resolved configuration\n" + tomli_w.dumps(data)


# [policy] keys naming an input table, with the columns it must have (any one of the sets).
TABLE_KEYS: dict[str, tuple[frozenset[str], ...]] = {
    "priors": (frozenset({"host", "hc_percentile", "pr_percentile"}), frozenset({"host", "in_links"})),
    "truth": (frozenset({"host", "q"}),),
}

SECTIONS: dict[str, type] = {
    "politeness": PolitenessConfig,
    "fetch": FetchConfig,
    "policy": CrawlPolicyConfig,
    "cleaning": CleaningConfig,
    "output": OutputConfig,
}


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def _line_of(text: str, section: str | None, key: str) -> int | None:
    """Line number of `key = ...` inside `[section]` (top level when section is None)."""
    current: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"^\[\s*([^\]]+?)\s*\]", stripped)
        if header:
            current = header.group(1)
            if section is not None and current == section and key == "":
                return number
            continue
        if current == section and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return number
    return None


def _where(path: Path, text: str, section: str | None, key: str) -> str:
    line = _line_of(text, section, key)
    return f"{path}:{line}" if line else str(path)


def _coerce(value: Any, default: Any, annotation: str) -> Any:
    """Check a TOML value against the field's default type; ints are accepted for floats."""
    if "None" in annotation and value is None:
        return value
    if isinstance(default, bool) or annotation == "bool":
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if isinstance(default, float) or annotation.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError("expected a number")
        return float(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("expected an integer")
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
        ):
            raise TypeError("expected a table of numbers, e.g. {zh = 0.4}")
        return {str(k): float(v) for k, v in value.items()}
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("expected a list of strings")
        return value
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _build_section(cls: type, values: dict[str, Any], path: Path, text: str, name: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    defaults = cls()
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        where = _where(path, text, name, key)
        if key not in known:
            choices = ", ".join(sorted(known))
            raise ConfigError(f"{where}: unknown key '{key}' in [{name}]; known keys: {choices}")
        try:
            kwargs[key] = _coerce(value, getattr(defaults, key), str(known[key].type))
        except TypeError as exc:
            raise ConfigError(f"{where}: [{name}] {key} = {value!r}: {exc}") from None
    return cls(**kwargs)


def load_config(path: Path) -> CrawlConfig:
    """Read a crawl TOML file; every error names the file and line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config is not UTF-8 ({exc.reason})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    config = CrawlConfig()
    for key, value in data.items():
        if key == "seeds":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{_where(path, text, None, key)}: seeds must be a list of URLs")
            config.seeds = [
                check_seed(url, f"{_where(path, text, None, key)}: seed {i + 1}")
                for i, url in enumerate(value)
            ]
        elif key == "scrapy" and isinstance(value, dict):
            config.scrapy = dict(value)
        elif key in SECTIONS and isinstance(value, dict):
            setattr(config, key, _build_section(SECTIONS[key], value, path, text, key))
        else:
            known = ", ".join(["seeds", *(f"[{s}]" for s in SECTIONS), "[scrapy]"])
            raise ConfigError(
                f"{_where(path, text, None, key)}: unknown top-level key '{key}'; known: {known}"
            )
    for key in TABLE_KEYS:
        value = getattr(config.policy, key)
        if value is not None:
            resolved = path.parent / value  # relative to the config file, not to where it is run from
            if not resolved.exists() and Path(value).exists():
                resolved = Path(value)  # an older run's config.toml, written relative to its crawl's folder
            setattr(config.policy, key, str(resolved))
            where = _where(path, text, "policy", key)
            if problem := table_problem(resolved, key):
                raise ConfigError(f"{where}: [policy] {key} = {value!r}: {problem}")
    validate(config, str(path))
    return config


def table_problem(path: Path, key: str) -> str | None:
    """Why the parquet table given as policy.priors/truth cannot be read, or None."""
    if not path.is_file():
        return "no such file" if not path.exists() else "not a file"
    import polars as pl  # (loaded only when a table is given: the command line starts without it)

    try:
        columns = set(pl.read_parquet_schema(path))
    except Exception as exc:  # polars raises several types for a file that is not parquet
        return f"not a parquet file ({type(exc).__name__})"
    needs = TABLE_KEYS[key]
    if not any(need <= columns for need in needs):
        wanted = " or ".join("+".join(sorted(need)) for need in needs)
        return f"needs columns {wanted}; it has {', '.join(sorted(columns)) or 'none'}"
    return None


def proxy_problem(url: str, timeout: float = 3.0) -> str | None:
    """A proxy that does not accept connections fails every fetch: say so before the crawl starts."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "has an invalid port"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) proxy URL"
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        return f"does not accept connections ({exc.strerror or exc})"
    return None


HC_NEEDS_PRIORS = "policy hc_depth orders hosts by centrality: give --priors RANKS (hostcrawl graph ingest)"


def validate(config: CrawlConfig, source: str = "config") -> None:
    """Reject values that would make a crawl impolite or meaningless."""
    p, f, c, pol = config.politeness, config.fetch, config.cleaning, config.policy
    checks = [
        (pol.name in POLICY_NAMES, f"policy.name must be one of {', '.join(POLICY_NAMES)}"),
        (pol.sample_pages >= 1, "policy.sample_pages must be >= 1"),
        (0.0 <= pol.explore_share <= 1.0, "policy.explore_share must be within [0, 1]"),
        (0.0 <= pol.keep_busy <= 1.0, "policy.keep_busy must be within [0, 1]"),
        (pol.name not in TRUTH_POLICIES or bool(pol.truth), f"the {pol.name} policy needs policy.truth"),
        (pol.per_host_budget >= 0, "policy.per_host_budget must be >= 0 (0: no cap)"),
        (pol.name != "hc_depth" or bool(pol.priors or pol.plan), HC_NEEDS_PRIORS),
        (p.min_delay >= 0, "politeness.min_delay must be >= 0 seconds"),
        (p.per_host_concurrency >= 1, "politeness.per_host_concurrency must be >= 1"),
        (p.max_crawl_delay > 0, "politeness.max_crawl_delay must be > 0"),
        (bool(p.user_agent.strip()), "politeness.user_agent must not be empty"),
        (p.contact_url.startswith(("http://", "https://", "mailto:")), "contact_url must be a URL"),
        (f.max_pages >= 1, "fetch.max_pages must be >= 1"),
        (f.concurrency >= 1, "fetch.concurrency must be >= 1"),
        (f.frontier_memory_urls >= 0, "fetch.frontier_memory_urls must be >= 0"),
        (f.max_unscored >= 0, "fetch.max_unscored must be >= 0"),
        (f.timeout > 0, "fetch.timeout must be > 0"),
        (f.max_page_bytes > 0, "fetch.max_page_bytes must be > 0"),
        (f.max_links_per_page >= 1, "fetch.max_links_per_page must be >= 1"),
        (f.max_url_length >= 64, "fetch.max_url_length must be >= 64"),
        (0.0 <= c.threshold <= 1.0, "cleaning.threshold must be within [0, 1]"),
        (
            all(0.0 < t < 1.0 for t in c.language_thresholds.values()),
            "cleaning.language_thresholds: in (0, 1)",
        ),
        (bool(c.scorers), "cleaning.scorers must name at least one scorer"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"{source}: {message}")
    for name, patterns in (("allow", f.allow), ("deny", f.deny)):
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"{source}: fetch.{name} {pattern!r} is not a regex ({exc})") from None
    for name in config.scrapy:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise ConfigError(f"{source}: Scrapy setting {name!r} is not a setting name (NAME=VALUE)")
    if c.cleaner not in cleaner_names():
        raise ConfigError(f"{source}: unknown cleaner {c.cleaner!r}; known: {', '.join(cleaner_names())}")
    if module := missing_module(c.cleaner):
        raise ConfigError(f"{source}: cleaner {c.cleaner} needs {install_hint(module)}")
    for spec in c.scorers:
        try:
            parsed = ScorerSpec.parse(spec)
        except ScorerSpecError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        if parsed.path is None and parsed.name not in scorer_names():
            raise ConfigError(f"{source}: unknown scorer {parsed.name!r}; known: {', '.join(scorer_names())}")
        if parsed.path is not None and not Path(parsed.path).is_file():
            raise ConfigError(f"{source}: classifier {parsed.name}: no model file at {parsed.path}")


def default_run_dir(kind: str) -> Path:
    return Path("runs") / f"{kind}-{datetime.now():%Y%m%d-%H%M%S}"
