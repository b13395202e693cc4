"""What the real cleaner and scorer make of the test web's pages: the replay's page scores, and AUCs.

A live crawl never sees a page's truth, only the score the scorer gives its cleaned text. The replay
reproduces that without cleaning every page: it scores a sample of rendered pages of each kind (good,
short good, each junk and mediocre type) and language through the crawl's own cleaner and scorer, and
then gives each replayed page a score drawn from its cell (the draw is a hash of the page, so a page
always gets the same score).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from cleaner.pipeline import process_pages
from cleaner.quality.scorer_specs import DEFAULT_SCORER
from crawler.testweb.graded import page_uniforms
from crawler.testweb.model import HIGH_KINDS, SiteModel

CLEANER = "blocks_v1"  # the crawl's default cleaner (crawler/run/crawl_config.py)
CELL_PAGES = 24  # scored pages per (kind, language): a cell's quantiles are stable to a few hundredths
PAGES_PER_HOST = 40  # pages looked at per host when filling the cells
BATCH = 16
HIGH_THRESHOLD = 0.5  # the crawl's default --threshold: a page above it counts as high for its host
SCORE_STREAM = 99  # page-hash stream of the replay's score draws (graded.py uses 0-5)


def sample_pages(model: SiteModel, per_cell: int, seed: int = 0) -> list[tuple[str, str, str, str]]:
    """(url, kind, language, host) of up to `per_cell` content pages per (kind, language), from
    well-behaved hosts in a seeded random order."""
    rng = np.random.default_rng(seed)
    counts: dict[tuple[str, str], int] = {}
    chosen = []
    for index in rng.permutation(len(model.hosts)).tolist():
        spec = model.hosts[index]
        if spec.hostile or spec.directives:
            continue
        for j in range(min(spec.n_pages, PAGES_PER_HOST)):
            cell = (model.page_kind(spec, j), spec.language)
            if counts.get(cell, 0) < per_cell:
                counts[cell] = counts.get(cell, 0) + 1
                chosen.append((f"http://{spec.name}{spec.page_path(j)}", *cell, spec.name))
    return chosen


def random_pages(model: SiteModel, n: int, seed: int = 0) -> list[tuple[str, str, str, str]]:
    """(url, kind, language, host) of `n` content pages drawn uniformly from well-behaved hosts."""
    rng = np.random.default_rng(seed)
    hosts = [h for h in model.hosts if not h.hostile and not h.directives]
    sizes = np.array([h.n_pages for h in hosts], np.float64)
    chosen = []
    for index in rng.choice(len(hosts), n, p=sizes / sizes.sum()).tolist():
        spec = hosts[index]
        j = int(rng.integers(spec.n_pages))
        chosen.append(
            (f"http://{spec.name}{spec.page_path(j)}", model.page_kind(spec, j), spec.language, spec.name)
        )
    return chosen


def score_pages(
    model: SiteModel, pages: list[tuple[str, str, str, str]], scorers: tuple[str, ...] = (DEFAULT_SCORER,)
) -> pl.DataFrame:
    """Render, clean and score each page as a crawl does: url, kind, language, high, a column per scorer."""
    rows: dict[str, list[object]] = {"url": [], "kind": [], "language": [], "high": []}
    rows.update({name: [] for name in scorers})
    for start in range(0, len(pages), BATCH):
        batch = pages[start : start + BATCH]
        html = []
        for url, _, _, host in batch:
            body = model.render(host, url.split(host, 1)[1]).body
            html.append((body.decode("utf-8", "replace"), url))
        for (url, kind, language, _), result in zip(
            batch, process_pages(html, CLEANER, scorers, None), strict=True
        ):
            rows["url"].append(url)
            rows["kind"].append(kind)
            rows["language"].append(language)
            rows["high"].append(kind in HIGH_KINDS)
            for name in scorers:
                rows[name].append(result.scores.get(name, 0.0))
    return pl.DataFrame(rows)


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a positive outscores a negative (ties count half): the ROC AUC."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass(slots=True)
class ScoreSampler:
    """Scores per (kind, language) from the real pipeline; a page's score is drawn from its cell."""

    cells: dict[tuple[str, str], np.ndarray]
    seed: int

    @classmethod
    def measure(cls, model: SiteModel, per_cell: int = CELL_PAGES) -> ScoreSampler:
        frame = score_pages(model, sample_pages(model, per_cell, model.cfg.seed))
        cells = {
            (str(kind), str(language)): np.sort(group[DEFAULT_SCORER].to_numpy())
            for (kind, language), group in frame.group_by("kind", "language")
        }
        return cls(cells, model.cfg.seed)

    def scored_density(self, model: SiteModel, threshold: float = HIGH_THRESHOLD) -> dict[str, float]:
        """Each host's share of pages the scorer calls high: the most a policy can learn from scores."""
        share = {cell: float((scores > threshold).mean()) for cell, scores in self.cells.items()}
        density = {}
        for spec in model.hosts:
            kinds = Counter(model.page_kind(spec, j) for j in range(spec.n_pages))
            high = sum(
                n * share.get((kind, spec.language), float(kind in HIGH_KINDS)) for kind, n in kinds.items()
            )
            density[spec.name] = high / max(1, spec.n_pages)
        return density

    def score(self, model: SiteModel, host: str, path: str) -> float | None:
        """The score a content page would get (None for other pages: home, listings, sitemaps)."""
        spec = model.host(host)
        parts = path.split("/")
        if spec is None or len(parts) != 3 or not parts[2].endswith(".html") or not parts[2][:-5].isdigit():
            return None
        j = int(parts[2][:-5])
        if j >= spec.n_pages or spec.page_path(j) != path:
            return None
        cell = self.cells.get((model.page_kind(spec, j), spec.language))
        if cell is None or not len(cell):
            return 1.0 if model.page_label(spec, j)[0] else 0.0  # a cell the sample missed: the truth
        u = page_uniforms(self.seed, SCORE_STREAM, spec.index, np.array([j]))[0]
        return float(cell[int(u * len(cell))])
