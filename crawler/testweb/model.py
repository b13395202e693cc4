"""The generated web as data: per-host parameters and per-page labels, vectorised from one seed."""

from __future__ import annotations

import numpy as np
import polars as pl

from crawler.testweb import directive_hosts as directives_mod
from crawler.testweb import robots as robots_mod
from crawler.testweb.config import TestWebConfig, resolve_robots_dir
from crawler.testweb.duplicates import DUPLICATE_KINDS, TWIN_PREFIX, plant
from crawler.testweb.graded import PAGE_KINDS, SHORT_HIGH, GradedPages, draw_hosts
from crawler.testweb.graded_text import MEDIOCRE_TYPES
from crawler.testweb.hostile import HOSTILE_KINDS, MIN_HOSTS_FOR_EVERY_KIND
from crawler.testweb.site import render
from crawler.testweb.specs import HostSpec, Rendered
from crawler.testweb.templates import CLASS_PREFIXES, FAMILIES
from crawler.testweb.text import LANGUAGES, LOW_TYPES, Lexicon, load_lexicons

KINDS = ("news", "blog", "shop", "forum", "wiki", "docs", "edu", "recipes")
KIND_WEIGHTS = (0.2, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07, 0.1)
KIND_SECTIONS: dict[str, tuple[str, ...]] = {
    "news": ("politics", "economy", "science", "sports", "culture", "world"),
    "blog": ("diary", "travel", "ideas", "notes", "reviews", "life"),
    "shop": ("products", "offers", "home", "garden", "kitchen", "outdoor"),
    "forum": ("general", "help", "hardware", "software", "offtopic", "announcements"),
    "wiki": ("history", "geography", "biology", "people", "places", "events"),
    "docs": ("guide", "reference", "tutorials", "api", "faq", "changelog"),
    "edu": ("courses", "research", "admissions", "events", "library", "faculty"),
    "recipes": ("breakfast", "soups", "mains", "baking", "desserts", "drinks"),
}
SECTIONS_PER_HOST = (2, 6)
LANGUAGE_WEIGHTS = (0.7, 0.1, 0.1, 0.1)  # of LANGUAGES; a config's own `languages` are drawn uniformly
MOJIBAKE = ("de", "fr", "es")  # bad-charset hosts write these: mojibake needs accented Latin text
COOKIE_BANNER_SHARE = 0.6
SEARCH_DISALLOW_SHARE = 0.5  # generated robots.txt that also disallow /search
BADBOT_SHARE = 0.3  # generated robots.txt with an extra group for another agent
MAX_CROSS_LINKS = 3  # per content page, 0..MAX
POPULARITY_SIGMA = 1.5  # lognormal spread of how often a host is linked to
HIGH_KINDS = frozenset(PAGE_KINDS[: SHORT_HIGH + 1])


def _rng(seed: int, stream: int) -> np.random.Generator:
    """One independent stream per drawn quantity, so adding a quantity changes no other."""
    return np.random.default_rng(np.random.SeedSequence([seed, stream]))


class SiteModel:
    """Pure description of the web: which hosts exist, what each page is, and its bytes."""

    def __init__(self, cfg: TestWebConfig) -> None:
        self.cfg = cfg
        self.languages = tuple(cfg.languages) or LANGUAGES
        self.lexicons: dict[str, Lexicon] = load_lexicons(tuple(dict.fromkeys((*self.languages, *MOJIBAKE))))
        self.real_robots = robots_mod.load_real_robots(
            resolve_robots_dir(cfg) if cfg.real_robots_share > 0 else None
        )
        self._build()
        self._by_name = {h.name: h for h in self.hosts}
        self.plants = plant(_rng(cfg.seed, 13), cfg.duplicate_share, self.page_high, self.page_host)

    def _build(self) -> None:
        cfg, n = self.cfg, self.cfg.n_hosts
        kind_i = _rng(cfg.seed, 1).choice(len(KINDS), n, p=KIND_WEIGHTS)
        weights = LANGUAGE_WEIGHTS if not cfg.languages else None  # a chosen list: uniform
        lang_i = _rng(cfg.seed, 2).choice(len(self.languages), n, p=weights)
        languages = np.array(self.languages, dtype=object)[lang_i]
        self.graded: GradedPages | None = None
        if cfg.graded:
            q, n_pages, popularity = draw_hosts(cfg, languages == "en", _rng(cfg.seed, 3))
        else:
            total_ab = 1.0 / cfg.icc - 1.0
            q = _rng(cfg.seed, 3).beta(cfg.mean_quality * total_ab, (1 - cfg.mean_quality) * total_ab, n)
            lo, hi = cfg.pages_range
            raw = _rng(cfg.seed, 4).lognormal(np.log(cfg.pages_median), cfg.pages_sigma, n)
            n_pages = np.clip(np.round(raw), lo, hi).astype(np.int64)

        hostile = np.full(n, -1)
        if cfg.hostile_share > 0:
            n_hostile = round(cfg.hostile_share * n)
            if n >= MIN_HOSTS_FOR_EVERY_KIND:
                n_hostile = max(n_hostile, len(HOSTILE_KINDS))
            chosen = _rng(cfg.seed, 5).permutation(n)[: min(n_hostile, n)]
            hostile[chosen] = np.arange(len(chosen)) % len(HOSTILE_KINDS)
        bad_cs = hostile == HOSTILE_KINDS.index("bad_charset")
        languages[bad_cs] = np.array(MOJIBAKE, dtype=object)[np.arange(n)[bad_cs] % 3]

        r = _rng(cfg.seed, 6)
        src_u, delay_u, file_u = r.random(n), r.random(n), r.random(n)
        search_u, badbot_u = r.random(n), r.random(n)
        delays = np.round(r.uniform(*cfg.crawl_delay_range, n), 2)
        t = _rng(cfg.seed, 8)
        family, prefix = t.integers(0, len(FAMILIES), n), t.integers(0, len(CLASS_PREFIXES), n)
        cookie, n_sec = t.random(n) < COOKIE_BANNER_SHARE, t.integers(*SECTIONS_PER_HOST, n + 1)
        n_sec, rot = n_sec[:n], t.integers(0, 6, n)
        s = _rng(cfg.seed, 9)
        slow = s.uniform(*cfg.slow_seconds, n)
        retry = s.integers(cfg.retry_after_range[0], cfg.retry_after_range[1] + 1, n)

        self.page_offset = np.concatenate([[0], np.cumsum(n_pages)])
        if cfg.graded:
            self.graded = GradedPages(cfg, q, n_pages, popularity)
            n_high, in_links = self.graded.n_high, self.graded.in_links
            self.page_high, self.page_host = np.zeros(0, bool), np.zeros(0, np.int64)
        else:
            n_high, in_links = self._binary_pages(q, n_pages)

        directive_u = _rng(cfg.seed, 13).random(n)
        real_share = cfg.real_robots_share if self.real_robots else 0.0
        self.hosts: list[HostSpec] = []
        for i in range(n):
            kind = KINDS[kind_i[i]]
            all_sections = KIND_SECTIONS[kind]
            sections = tuple(all_sections[(rot[i] + k) % 6] for k in range(n_sec[i]))
            name = f"{kind}-{i}.farm.example" if i >= n - cfg.farm_hosts else f"{kind}-{i}.example"
            delay: float | None = float(delays[i]) if delay_u[i] < cfg.crawl_delay_share else None
            disallow: tuple[str, ...]
            if src_u[i] < cfg.robots_missing_share:
                source, disallow, delay = "missing", (), None
            elif src_u[i] < cfg.robots_missing_share + real_share:
                real = self.real_robots[int(file_u[i] * len(self.real_robots))]
                source = f"real:{real.name}"
                disallow = (robots_mod.PRIVATE_PREFIX, *real.disallow)
                if real.has_delay and delay is None:
                    delay = float(delays[i])  # ours overrides the file's, keeping demos fast
            else:
                source = "generated"
                disallow = (robots_mod.PRIVATE_PREFIX,)
                if search_u[i] < SEARCH_DISALLOW_SHARE:
                    disallow += (robots_mod.SEARCH_PREFIX,)
            self.hosts.append(
                HostSpec(
                    name=name,
                    index=i,
                    kind=kind,
                    language=str(languages[i]),
                    q=float(q[i]),
                    n_pages=int(n_pages[i]),
                    n_high=int(n_high[i]),
                    hostile=HOSTILE_KINDS[hostile[i]] if hostile[i] >= 0 else None,
                    crawl_delay=delay,
                    robots_source=source,
                    disallow=disallow,
                    in_links=int(in_links[i]),
                    template=FAMILIES[family[i]],
                    class_prefix=CLASS_PREFIXES[prefix[i]],
                    cookie_banner=bool(cookie[i]),
                    sections=sections,
                    slow_delay=float(slow[i]),
                    retry_after=int(retry[i]),
                    badbot_group=bool(badbot_u[i] < BADBOT_SHARE),
                    directives=bool(directive_u[i] < cfg.directives_share and hostile[i] < 0),
                )
            )

        for i, kind in enumerate(cfg.politeness_hosts[:n]):
            self.hosts[i].hostile = kind  # politeness_hosts.py: opt-in, the rest of the web is unchanged
            self.hosts[i].directives = False  # one behaviour per host, so each check sees what it tests

    def _binary_pages(self, q: np.ndarray, n_pages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The default web's pages, one entry each: high or one junk type, and cross-host links."""
        cfg, n = self.cfg, self.cfg.n_hosts
        total = int(self.page_offset[-1])
        q_rep = np.repeat(q, n_pages)
        self.page_high = _rng(cfg.seed, 10).random(total) < q_rep
        self.page_low = _rng(cfg.seed, 11).integers(0, len(LOW_TYPES), total).astype(np.int8)
        self.page_host = np.repeat(np.arange(n), n_pages)
        n_high = np.bincount(self.page_host, weights=self.page_high, minlength=n).astype(np.int64)

        lk = _rng(cfg.seed, 12)
        popularity = lk.lognormal(0.0, POPULARITY_SIGMA, n)
        per_page = lk.integers(0, MAX_CROSS_LINKS + 1, total)
        self.link_offset = np.concatenate([[0], np.cumsum(per_page)])
        targets = lk.choice(n, int(self.link_offset[-1]), p=popularity / popularity.sum())
        if n > 1:
            link_source = np.repeat(self.page_host, per_page)
            targets = np.where(targets == link_source, (targets + 1) % n, targets)
        self.link_target = targets
        self.link_page = (lk.random(len(targets)) * n_pages[targets]).astype(np.int64)
        in_links = np.bincount(targets, minlength=n) if n > 1 else np.zeros(n, np.int64)
        return n_high, in_links

    def host(self, name: str) -> HostSpec | None:
        return self._by_name.get(name.lower().split(":", 1)[0])

    def seed_urls(self) -> list[str]:
        return [h.home for h in self.hosts]

    def duplicate(self, spec: HostSpec, j: int) -> tuple[str, HostSpec, int] | None:
        """(kind, original's host, original's page) when content page j is a planted copy."""
        if self.graded is not None:
            return None  # graded webs plant no copies
        g = int(self.page_offset[spec.index]) + j
        if self.plants.kind[g] < 0:
            return None
        source = int(self.plants.source[g])
        host = self.hosts[int(self.page_host[source])]
        return DUPLICATE_KINDS[self.plants.kind[g]], host, source - int(self.page_offset[host.index])

    def duplicates_frame(self) -> pl.DataFrame:
        """Ground truth of the planted copies: url, the url of the original, kind."""
        rows = []
        for g in np.flatnonzero(self.plants.kind >= 0).tolist():
            spec = self.hosts[int(self.page_host[g])]
            j = g - int(self.page_offset[spec.index])
            kind, host, source_j = self.duplicate(spec, j) or ("", spec, j)
            url = f"http://{spec.name}{spec.page_path(j)}"
            if kind == "twin":
                rows.append((f"http://{spec.name}{TWIN_PREFIX}{spec.page_path(j)}", url, kind))
            else:
                rows.append((url, f"http://{host.name}{host.page_path(source_j)}", kind))
        return pl.DataFrame(rows, schema=["url", "original_url", "kind"], orient="row")

    def page_kind(self, spec: HostSpec, j: int) -> str:
        """What content page j is: "high", "short_high" (graded webs), or its low type."""
        if self.graded is not None:
            return self.graded.kind(spec.index, j)
        g = int(self.page_offset[spec.index]) + j
        return "high" if self.page_high[g] else LOW_TYPES[self.page_low[g]]

    def page_label(self, spec: HostSpec, j: int) -> tuple[bool, str | None]:
        """(high quality, low type or None) of content page j."""
        kind = self.page_kind(spec, j)
        high = kind in HIGH_KINDS
        return high, None if high else kind

    def cross_links(self, spec: HostSpec, j: int) -> list[str]:
        if self.graded is not None:
            targets, pages = self.graded.links(spec.index, np.array([j]))
        else:
            g = int(self.page_offset[spec.index]) + j
            lo, hi = int(self.link_offset[g]), int(self.link_offset[g + 1])
            targets, pages = self.link_target[lo:hi], self.link_page[lo:hi]
        out = []
        for t, p in zip(targets, pages, strict=True):
            target = self.hosts[int(t)]
            out.append(f"http://{target.name}{target.page_path(int(p))}")
        return out

    def robots_txt(self, spec: HostSpec) -> bytes | None:
        if spec.robots_source == "missing":
            return None
        if spec.robots_source.startswith("real:"):
            name = spec.robots_source.split(":", 1)[1]
            real = next(r for r in self.real_robots if r.name == name)
            body = robots_mod.merged(real.body, spec.name, spec.crawl_delay)
            return body.replace(b"/sitemap.xml\n", b"/sitemap.xml.gz\n") if spec.directives else body
        body = robots_mod.generated(spec.name, spec.crawl_delay, spec.disallow, spec.badbot_group)
        return body.replace(b"/sitemap.xml\n", b"/sitemap.xml.gz\n") if spec.directives else body

    def render(self, host: str, path: str) -> Rendered:
        """The response to `GET http://host/path` (may carry a query), minus transport effects."""
        return render(self, host, path)

    def _page_truth(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(host index, kind name, high quality) of every content page, in page order."""
        if self.graded is None:
            return self.page_host, np.array(LOW_TYPES)[self.page_low], self.page_high
        n_pages = self.graded.n_pages
        page_host = np.repeat(np.arange(len(n_pages)), n_pages)
        codes = np.concatenate(
            [self.graded.kinds(i, np.arange(n)) for i, n in enumerate(n_pages.tolist())]
            or [np.zeros(0, np.int8)]
        )
        return page_host, np.array(PAGE_KINDS)[codes], codes <= SHORT_HIGH

    def hosts_frame(self) -> pl.DataFrame:
        """Ground truth per host, as written to hosts.parquet."""
        hs = self.hosts
        return pl.DataFrame(
            {
                "host": [h.name for h in hs],
                "kind": [h.kind for h in hs],
                "language": [h.language for h in hs],
                "q": [h.q for h in hs],
                "n_pages": [h.n_pages for h in hs],
                "n_high": [h.n_high for h in hs],
                "hostile": [h.hostile for h in hs],
                "crawl_delay": [h.crawl_delay for h in hs],
                "robots_source": [h.robots_source for h in hs],
                "disallow": [list(h.disallow) for h in hs],
                "in_links": [h.in_links for h in hs],
                "template": [h.template for h in hs],
                "directives": [h.directives for h in hs],
                "tdm_reserved_section": [directives_mod.tdm_reserved_section(h) for h in hs],
            },
            schema_overrides={
                "hostile": pl.String,
                "tdm_reserved_section": pl.String,
                "crawl_delay": pl.Float64,
                "disallow": pl.List(pl.String),
                "n_pages": pl.Int64,
                "n_high": pl.Int64,
                "in_links": pl.Int64,
            },
        )

    def pages_frame(self) -> pl.DataFrame:
        """Ground truth per content page, as written to pages.parquet (built vectorised)."""
        names = np.array([h.name for h in self.hosts])
        page_host, low, high = self._page_truth()
        starts = self.page_offset[:-1]
        j = np.arange(len(page_host)) - starts[page_host]
        n_sec = np.array([len(h.sections) for h in self.hosts])
        sec_table = [s for h in self.hosts for s in h.sections]
        sec_start = np.concatenate([[0], np.cumsum(n_sec)])[:-1]
        section = np.array(sec_table)[sec_start[page_host] + j % n_sec[page_host]]
        directive_host = np.array([h.directives for h in self.hosts])[page_host]
        slot = j % directives_mod.CYCLE
        kinds = pl.Series([None, *directives_mod.PAGE_KINDS], dtype=pl.String)
        kind = np.where(directive_host & (slot % 2 == 1), slot // 2 + 1, 0)
        reserved = np.array([directives_mod.tdm_reserved_section(h) or "" for h in self.hosts])
        grade = np.where(high, "high", np.where(np.isin(low, MEDIOCRE_TYPES), "mediocre", "junk"))
        df = pl.DataFrame(
            {
                "host": names[page_host],
                "section": section,
                "j": j,
                "high": high,
                "directive": kinds.gather(kind),
                "tdm_reserved": section == reserved[page_host],
            }
        )
        return df.select(
            pl.concat_str(
                [
                    pl.lit("http://"),
                    "host",
                    pl.lit("/"),
                    "section",
                    pl.lit("/"),
                    "j",
                    pl.lit(".html"),
                ]
            ).alias("url"),
            "host",
            pl.concat_str([pl.lit("/"), "section", pl.lit("/"), "j", pl.lit(".html")]).alias("path"),
            pl.col("high").alias("high_quality"),
            pl.when(pl.col("high")).then(None).otherwise(pl.Series(low)).alias("low_type"),
            pl.Series("grade", grade),  # high, mediocre (graded webs) or junk
            "directive",  # what the page says about itself (testweb/directive_hosts.py), or null
            "tdm_reserved",  # its host's tdmrep.json reserves it
        )
