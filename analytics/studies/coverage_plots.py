"""Plots of the coverage study (the paper's Figures 6, 7 and 11 for one's own data)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from analytics.study import Output


def quality_by_coverage(bins: pl.DataFrame, out: Output) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    x = np.arange(bins.height)
    share = ax.twinx()
    share.bar(x, bins["host_share"].to_list(), color="#dddddd", label="share of hosts")
    share.set_ylabel("share of hosts")
    ax.set_zorder(share.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.plot(x, bins["median_density"].to_list(), marker="o", color="#4c72b0", label="median quality density")
    ax.fill_between(
        x, bins["p25_density"].to_list(), bins["p75_density"].to_list(), alpha=0.2, color="#4c72b0"
    )
    ax.set_xticks(x, bins["coverage_bin"].to_list(), rotation=45, fontsize=8)
    ax.set_xlabel("crawl coverage (nutch_fetched_pct)")
    ax.set_ylabel("quality density")
    ax.set_title("Quality density by crawl coverage (median, IQR)")
    return out.figure(fig, "coverage_quality")


def missed_grid(grid: pl.DataFrame, out: Output) -> str:
    cells = np.zeros((10, 10))
    for cov, dens, share in grid.select("coverage_from", "density_from", "missed_share").iter_rows():
        cells[min(round(dens * 10), 9), min(int(cov) // 10, 9)] = share or 0.0
    fig, ax = plt.subplots(figsize=(6.0, 4.8))
    image = ax.imshow(cells, origin="lower", cmap="viridis", aspect="auto")
    for (row, col), value in np.ndenumerate(cells):
        if value >= 0.01:
            ax.text(col, row, f"{100 * value:.0f}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xticks(range(10), [f"{10 * i}" for i in range(10)])
    ax.set_yticks(range(10), [f"{i / 10:.1f}" for i in range(10)])
    ax.set_xlabel("crawl coverage from (%)")
    ax.set_ylabel("quality density from")
    ax.set_title("Share of missed high-quality pages (%)")
    fig.colorbar(image, ax=ax)
    return out.figure(fig, "coverage_missed_grid")


def tld_bars(tlds: pl.DataFrame, out: Output) -> str:
    top = tlds.head(10)
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    x = np.arange(top.height)
    ax.bar(
        x - 0.2, top["missed_share"].to_list(), width=0.4, label="share of missed HQ pages", color="#c44e52"
    )
    ax.bar(x + 0.2, top["host_share"].to_list(), width=0.4, label="share of hosts", color="#bbbbbb")
    ax.set_xticks(x, [f".{t}" for t in top["tld"].to_list()])
    ax.set_ylabel("share")
    ax.set_title("Where the missed budget sits, by TLD")
    ax.legend(fontsize=8)
    return out.figure(fig, "coverage_tld")
