"""The graded test web: realistic scorer noise, and host quality tied to size, in-links and language."""

from __future__ import annotations

import tracemalloc

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from crawler.bench.replay_scores import auc, random_pages, score_pages
from crawler.testweb.config import MAX_HOST_PAGES, graded_config
from crawler.testweb.model import SiteModel

SCORERS = ("heuristic_v3", "heuristic_v1")


def test_default_scorer_ranks_graded_pages_with_the_configured_auc_and_another_scorer_disagrees() -> None:
    web = SiteModel(graded_config(n_hosts=200, seed=12, robots_dir=""))
    scored = score_pages(web, random_pages(web, 300, seed=1), SCORERS)
    high = scored["high"].to_numpy()
    assert 0.3 * len(high) > high.sum() > 0.1 * len(high)  # a web mostly of low-quality pages
    v3 = auc(scored["heuristic_v3"].to_numpy(), high)
    assert 0.80 <= v3 <= 0.90, f"heuristic_v3 AUC {v3:.3f} outside the configured 0.85 +- 0.05"
    # the two scorers call a page high or low differently on a good share of pages (listing blurbs)
    calls = scored.select((pl.col("heuristic_v3") > 0.5) != (pl.col("heuristic_v1") > 0.5))
    assert calls.to_series().mean() >= 0.05
    grades = web.pages_frame().group_by("grade").len()
    assert set(grades["grade"]) == {"high", "mediocre", "junk"}

    noisier = SiteModel(graded_config(n_hosts=200, seed=12, robots_dir="", scorer_auc=0.75))
    scored = score_pages(noisier, random_pages(noisier, 300, seed=1), SCORERS[:1])
    lower = auc(scored["heuristic_v3"].to_numpy(), scored["high"].to_numpy())
    assert lower <= v3 - 0.04, f"asking for AUC 0.75 gave {lower:.3f} (0.85 gave {v3:.3f})"


def test_host_quality_follows_the_configured_correlations_with_size_links_and_language() -> None:
    cfg = graded_config(
        n_hosts=1500,
        seed=3,
        robots_dir="",
        size_tail="lognormal",
        pages_range=(5, 400),
        pages_sigma=0.8,
        size_quality_corr=0.5,
        inlinks_quality_corr=-0.4,
        language_quality_shift=-0.15,
    )
    hosts = SiteModel(cfg).hosts_frame()
    q = hosts["q"].to_numpy()
    assert spearmanr(q, hosts["n_pages"]).statistic == pytest.approx(0.5, abs=0.07)
    # in-links are a noisy count of link popularity, so they correlate a little less than it does
    assert -0.45 < spearmanr(q, hosts["in_links"]).statistic < -0.25
    english = (hosts["language"] == "en").to_numpy()
    assert q[~english].mean() - q[english].mean() == pytest.approx(-0.15, abs=0.04)
    assert q.mean() == pytest.approx(cfg.mean_quality, abs=0.03)
    # the pages' truth follows the hosts' densities
    realised = hosts["n_high"].to_numpy() / hosts["n_pages"].to_numpy()
    assert np.corrcoef(realised, q)[0, 1] > 0.9

    paper = SiteModel(graded_config(n_hosts=1500, seed=3, robots_dir="")).hosts_frame()
    assert spearmanr(paper["q"], paper["in_links"]).statistic < -0.05  # the paper's centrality, rho -0.12
    assert paper["n_pages"].max() > 20 * paper["n_pages"].median()  # a heavy tail of host sizes


def test_a_host_of_a_hundred_thousand_pages_costs_no_memory_until_its_pages_are_served() -> None:
    cfg = graded_config(n_hosts=40, seed=2, robots_dir="", pareto_alpha=0.2, pages_median=50_000)
    tracemalloc.start()
    web = SiteModel(cfg)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    sizes = [h.n_pages for h in web.hosts]
    assert max(sizes) == MAX_HOST_PAGES and sum(sizes) > 1_500_000
    # a table of its pages (as the default web keeps) would hold over 100 MB: 2 M pages, 3 M links
    assert peak < 40_000_000, f"building a web of {sum(sizes)} pages peaked at {peak / 1e6:.0f} MB"
    assert kept < 5_000_000, f"the built web of {sum(sizes)} pages holds {kept / 1e6:.0f} MB"
    big = next(h for h in web.hosts if h.n_pages == MAX_HOST_PAGES)
    last = web.render(big.name, big.page_path(MAX_HOST_PAGES - 1))
    assert last.status == 200 and last.label == web.page_label(big, MAX_HOST_PAGES - 1)[0]
    assert web.render(big.name, big.page_path(MAX_HOST_PAGES - 1)).body == last.body  # the same every time
