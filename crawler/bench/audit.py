"""Checks a crawl from the server's side: the test web's request log and ground truth."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from crawler.fetch.addresses import address_class, literal_address, read_hosts_file
from crawler.fetch.robots_rules import RobotsRules
from crawler.testweb import SiteModel
from crawler.testweb import directive_hosts as dx
from crawler.testweb.politeness_hosts import ADDRESSES_FILE
from crawler.testweb.server import REQUESTS_FILE
from scheduler.groups import domain_group

TIMER_SLACK_S = 0.05  # loopback connect and timer granularity; anything beyond is a real violation
EXAMPLES_KEPT = 5


@dataclass(slots=True)
class PolitenessAudit:
    requests: int = 0
    hosts: int = 0
    overlapping: int = 0  # a request started before the previous one to the host had finished
    too_fast: int = 0  # started sooner than the host's delay after the previous one
    disallowed: int = 0  # robots.txt said no
    backoff_ignored: int = 0  # came back sooner than Retry-After
    robots_unavailable_ignored: int = (
        0  # a page requested while robots.txt had not been read (429, 5xx, none)
    )
    private_fetched: int = 0  # a request for a private, CGNAT, link-local... target reached the server
    group_overlapping: int = 0  # two requests in flight to hosts of one IP address or registered domain
    shared_groups: int = 0  # groups of more than one host that the crawl visited
    min_gap_ratio: float | None = None  # smallest (gap / required delay) over all hosts
    examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.overlapping
            or self.too_fast
            or self.disallowed
            or self.backoff_ignored
            or self.robots_unavailable_ignored
            or self.private_fetched
            or self.group_overlapping
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), clean=self.clean)


def read_request_log(path: Path, user_agent_token: str | None = None) -> pl.DataFrame:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    frame = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    if user_agent_token and frame.height:
        frame = frame.filter(pl.col("user_agent").str.contains(user_agent_token, literal=True))
    return frame


def audit_politeness(
    log: pl.DataFrame,
    robots: dict[str, str],
    crawl_delays: dict[str, float],
    min_delay: float,
    user_agent: str,
    addresses: dict[str, str] | None = None,
) -> PolitenessAudit:
    """`robots` maps host -> robots.txt text as served; `crawl_delays` host -> Crawl-delay seconds;
    `addresses` host -> the address the test web's resolver gives it."""
    audit = PolitenessAudit(requests=log.height)
    if not log.height:
        return audit
    parsers = {host: RobotsRules(text.encode("utf-8"), user_agent) for host, text in robots.items()}
    ratios: list[float] = []
    for (host,), group in log.sort("ts_start").group_by("host", maintain_order=True):
        audit.hosts += 1
        required = max(min_delay, crawl_delays.get(str(host), 0.0))
        previous: dict[str, Any] | None = None
        robots_read = False  # a robots.txt answer with rules (or a 4xx: no rules) has arrived
        if _forbidden_target(str(host), addresses or {}):
            audit.private_fetched += group.height
            _example(audit, f"{host}: a private or CGNAT target was requested")
        for row in group.iter_rows(named=True):
            path = row["path"]
            parser = parsers.get(str(host))
            if path.startswith("/robots.txt"):
                robots_read = robots_read or _robots_readable(row)
            elif not robots_read:
                audit.robots_unavailable_ignored += 1
                _example(audit, f"{host}{path} requested before its robots.txt could be read")
            if (
                parser is not None
                and not path.startswith("/robots.txt")
                and not parser.allowed(f"http://{host}{path}")
            ):
                audit.disallowed += 1
                _example(audit, f"{host}{path} is disallowed by robots.txt")
            if previous is not None:
                _check_pair(audit, str(host), previous, row, required, ratios)
            previous = row
    audit.min_gap_ratio = min(ratios) if ratios else None
    _check_groups(audit, log, addresses or {})
    return audit


def _check_groups(audit: PolitenessAudit, log: pl.DataFrame, addresses: dict[str, str]) -> None:
    """Hosts on one address, and hosts of one registered domain: one request in flight at a time."""
    hosts = log["host"].unique().to_list()
    keyed = log.with_columns(
        ip=pl.col("host").replace_strict(
            {h: addresses.get(h) for h in hosts}, default=None, return_dtype=pl.String
        ),
        domain=pl.col("host").replace_strict(
            {h: domain_group(h) for h in hosts}, default=None, return_dtype=pl.String
        ),
    )
    for column in ("ip", "domain"):
        for (key,), group in keyed.drop_nulls(column).sort("ts_start").group_by(column, maintain_order=True):
            if group["host"].n_unique() < 2:
                continue
            audit.shared_groups += 1
            busy_until = -1.0
            for row in group.iter_rows(named=True):
                if row["ts_start"] < busy_until - TIMER_SLACK_S:
                    audit.group_overlapping += 1
                    _example(audit, f"{column} group {key}: two requests in flight at {row['ts_start']:.3f}")
                busy_until = max(busy_until, row["ts_end"])


def _check_pair(
    audit: PolitenessAudit,
    host: str,
    previous: dict[str, Any],
    row: dict[str, Any],
    required: float,
    ratios: list[float],
) -> None:
    gap = row["ts_start"] - previous["ts_start"]
    if row["ts_start"] < previous["ts_end"] - TIMER_SLACK_S:
        audit.overlapping += 1
        _example(audit, f"{host}: two requests in flight at {row['ts_start']:.3f}")
    if required > 0:
        ratios.append(gap / required)
        if gap < required - TIMER_SLACK_S:
            audit.too_fast += 1
            _example(audit, f"{host}: {gap:.3f}s between requests, delay is {required:.3f}s")
    retry_after = previous.get("retry_after")
    if previous["status"] in (429, 503) and retry_after:
        waited = row["ts_start"] - previous["ts_end"]
        if waited < float(retry_after) - TIMER_SLACK_S:
            audit.backoff_ignored += 1
            _example(audit, f"{host}: came back after {waited:.2f}s, Retry-After was {retry_after}")


def _robots_readable(row: dict[str, Any]) -> bool:
    """RFC 9309 §2.3.1: 2xx and 4xx (but 429) are answers; 429, 5xx and aborted fetches are not."""
    status = int(row["status"] or 0)
    return not row["aborted"] and 200 <= status < 500 and status != 429


def _forbidden_target(host: str, addresses: dict[str, str]) -> bool:
    literal = literal_address(host)
    if literal is None and host in addresses:
        literal = literal_address(addresses[host])
    return literal is not None and address_class(literal) is not None


def _example(audit: PolitenessAudit | DirectivesAudit, text: str) -> None:
    if len(audit.examples) < EXAMPLES_KEPT:
        audit.examples.append(text)


def audit_test_web(
    web_dir: Path, model: SiteModel, min_delay: float, user_agent: str, only_agent: str | None = None
) -> tuple[pl.DataFrame, PolitenessAudit]:
    """The politeness audit of a crawl of the local test web: its request log (optionally only the
    requests whose User-Agent contains `only_agent`), robots.txt as served, and its Crawl-delays."""
    log = read_request_log(web_dir / REQUESTS_FILE, only_agent)
    hosts = log["host"].unique().to_list() if log.height else []
    robots = {h: model.render(h, "/robots.txt").body.decode("utf-8", "replace") for h in hosts}
    truth = pl.read_parquet(web_dir / "hosts.parquet", columns=["host", "crawl_delay"])
    delays = dict(truth.drop_nulls().iter_rows())
    table = read_hosts_file(web_dir / ADDRESSES_FILE) if (web_dir / ADDRESSES_FILE).exists() else {}
    addresses = {name: str(found[0]) for name, found in table.items()}
    return log, audit_politeness(log, robots, delays, min_delay, user_agent, addresses)


def yield_against_truth(pages: pl.DataFrame, truth_pages: pl.DataFrame, score: str) -> dict[str, Any]:
    """How much of what was fetched and kept is truly high quality, per the test web's labels."""
    joined = pages.filter(pl.col(score).is_not_null()).join(
        truth_pages.select("url", "high_quality"), on="url", how="inner"
    )
    fetched = joined.height
    if not fetched:
        return {"html_pages_with_truth": 0}
    high = int(joined["high_quality"].sum())
    curated = joined.filter(pl.col("curated"))
    curated_high = int(curated["high_quality"].sum()) if curated.height else 0
    return {
        "html_pages_with_truth": fetched,
        "high_quality_fetched": high,
        "high_quality_per_fetch": high / fetched,
        "curated": curated.height,
        "curated_precision": curated_high / curated.height if curated.height else None,
        "curated_recall": curated_high / high if high else None,
        "score_auc": auc(joined[score].to_list(), joined["high_quality"].to_list()),
    }


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """Probability that a random positive outscores a random negative (ties count half)."""
    frame = pl.DataFrame({"s": scores, "y": labels}).with_columns(r=pl.col("s").rank("average"))
    positives = int(frame["y"].sum())
    negatives = frame.height - positives
    if not positives or not negatives:
        return None
    rank_sum = float(frame.filter(pl.col("y"))["r"].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


@dataclass(slots=True)
class DirectivesAudit:
    """Links and page directives, checked against the test web's ground truth (testweb/directive_hosts.py)."""

    nofollow_only_requested: int = 0  # pages linked only through nofollow links or nofollow pages
    trap_targets_requested: int = 0  # redirect targets a trap guard must refuse
    tdmrep_refetched: int = (
        0  # tdmrep.json requested again after a readable answer (retries of 5xx/429 are fine)
    )
    curated_noindex: int = 0  # curated pages that asked not to be indexed
    curated_optout: int = 0  # curated pages that opted out of AI training (unless allowed)
    noindex_fetched: int = 0  # what the checks above had to check
    optout_fetched: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.nofollow_only_requested
            or self.trap_targets_requested
            or self.tdmrep_refetched
            or self.curated_noindex
            or self.curated_optout
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), clean=self.clean)


def audit_directives(
    log: pl.DataFrame, truth_pages: pl.DataFrame, pages: pl.DataFrame, curate_optout: bool = False
) -> DirectivesAudit:
    """From the server's request log: no nofollow-only page, no trap target, tdmrep.json once per host;
    from the run's pages.parquet and the truth: no noindex or opted-out page in the curated text."""
    audit = DirectivesAudit()
    if log.height:
        paths = log.select("host", "path")
        hidden = paths.filter(pl.col("path").str.starts_with(dx.HIDDEN_PREFIX))
        traps = paths.filter(pl.col("path").is_in(list(dx.TRAP_TARGETS)))
        readable = (pl.col("status") < 500) & (pl.col("status") != 429) & ~pl.col("aborted")
        tdmrep = (
            log.filter(pl.col("path") == dx.TDMREP_PATH)
            .sort("ts_start")
            .with_columns(after=readable.cast(pl.Int32).cum_sum().shift(1, fill_value=0).over("host"))
            .filter(pl.col("after") > 0)
        )
        audit.nofollow_only_requested = hidden.height
        audit.trap_targets_requested = traps.height
        audit.tdmrep_refetched = tdmrep.height
        for host, path in [*hidden.head(3).iter_rows(), *traps.head(2).iter_rows()]:
            _example(audit, f"{host}{path} should never have been requested")
    if "directive" not in truth_pages.columns or not pages.height:
        return audit
    fetched = pages.select("url", "curated").join(
        truth_pages.select("url", "directive", "tdm_reserved"), on="url", how="inner"
    )
    noindex = fetched.filter(pl.col("directive").is_in(list(dx.NOINDEX_KINDS)))
    optout = fetched.filter(pl.col("directive").is_in(list(dx.OPTOUT_KINDS)) | pl.col("tdm_reserved"))
    audit.noindex_fetched, audit.optout_fetched = noindex.height, optout.height
    audit.curated_noindex = int(noindex["curated"].fill_null(False).sum())
    if not curate_optout:
        audit.curated_optout = int(optout["curated"].fill_null(False).sum())
    for url in [
        *noindex.filter(pl.col("curated"))["url"].head(2),
        *optout.filter(pl.col("curated"))["url"].head(2),
    ]:
        _example(audit, f"{url} is in the curated text but asked to stay out")
    return audit


def audit_directives_of_run(
    web_dir: Path, run_dir: Path, only_agent: str | None = None, curate_optout: bool = False
) -> DirectivesAudit:
    """`audit_directives` over a finished crawl of the test web (its request log and ground truth)."""
    return audit_directives(
        read_request_log(web_dir / REQUESTS_FILE, only_agent),
        pl.read_parquet(web_dir / "pages.parquet"),
        pl.read_parquet(run_dir / "pages.parquet"),
        curate_optout,
    )
