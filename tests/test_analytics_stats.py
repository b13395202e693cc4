"""The numbers behind the studies agree with the reference implementations (pingouin, scipy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import polars as pl
import pytest
from scipy import stats as sps

from analytics import db
from analytics.stats import average_ranks, icc1_from_sums, spearman, spearman_brown, spearman_ci
from analytics.studies import icc
from analytics.study import Output, pages_view
from analytics.study_inputs import Inputs


def _pages(tmp_path: Path, frame: pl.DataFrame) -> Inputs:
    path = tmp_path / "pages.parquet"
    frame.write_parquet(path)
    return Inputs(pages=path)


@pytest.mark.parametrize(
    ("hosts", "pages_per_host", "between_sd"), [(50, 3, 1.0), (300, 6, 0.4), (20, 12, 2.0)]
)
def test_icc1_equals_pingouin_icc1_on_balanced_hosts(
    tmp_path: Path, hosts: int, pages_per_host: int, between_sd: float
) -> None:
    rng = np.random.default_rng(hosts)
    effect = rng.normal(0, between_sd, hosts)
    rows = [(f"h{h}.example", f"https://h{h}.example/{j}", j, effect[h] + rng.normal())
            for h in range(hosts) for j in range(pages_per_host)]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["host", "url", "page", "score_q"])
    ref = pg.intraclass_corr(frame, targets="host", raters="page", ratings="score_q").set_index("Type")
    table = icc.run(
        db.connect(),
        _pages(tmp_path, pl.from_pandas(frame[["url", "host", "score_q"]])),
        Output(tmp_path, "icc"),
        min_pages=(1,),
    )
    assert table["icc1"][0] == pytest.approx(ref.loc["ICC(1,1)", "ICC"], abs=1e-9)
    low, high = ref.loc["ICC(1,1)", "CI95"]
    assert (round(table["ci_low"][0], 2), round(table["ci_high"][0], 2)) == (low, high)


def test_icc1_with_unequal_host_sizes_matches_the_anova_computed_by_hand() -> None:
    # Hosts of 2, 3 and 4 pages: a = [1, 3], b = [4, 5, 6], c = [7, 9, 8, 8].
    groups = [[1.0, 3.0], [4.0, 5.0, 6.0], [7.0, 9.0, 8.0, 8.0]]
    values = [v for g in groups for v in g]
    grand = sum(values) / len(values)  # 56 / 9
    ss_between = sum(len(g) * (np.mean(g) - grand) ** 2 for g in groups)
    ss_within = sum((v - np.mean(g)) ** 2 for g in groups for v in g)  # 2 + 2 + 2 = 6
    msb, msw = ss_between / 2, ss_within / 6
    k0 = (9 - (4 + 9 + 16) / 9) / 2
    expected = (msb - msw) / (msb + (k0 - 1) * msw)
    result = icc1_from_sums(3, 9, ss_between, ss_within, 29.0)
    assert ss_within == pytest.approx(6.0)
    assert result.k0 == pytest.approx(k0)
    assert result.icc1 == pytest.approx(expected, abs=1e-12)


def test_icc_sql_sums_match_the_hand_computed_anova(tmp_path: Path) -> None:
    scores = {"a.example": [1.0, 3.0], "b.example": [4.0, 5.0, 6.0], "c.example": [7.0, 9.0, 8.0, 8.0]}
    frame = pl.DataFrame(
        [
            {"url": f"https://{h}/{i}", "host": h, "score_q": s}
            for h, ss in scores.items()
            for i, s in enumerate(ss)
        ]
    )
    con = db.connect()
    pages_view(con, _pages(tmp_path, frame).need("pages", "--pages"), None, language=False)
    con.execute(f"CREATE TEMP TABLE g AS {icc.host_groups_sql('score_q')}")
    groups, obs, ssb, ssw, sum_n2 = db.one_row(con, icc.anova_sums_sql("g", 3))  # host a (2 pages) excluded
    grand = 47.0 / 7
    assert (groups, obs, sum_n2) == (2, 7, 25)
    assert ssw == pytest.approx(2.0 + 2.0)
    assert ssb == pytest.approx(3 * (5 - grand) ** 2 + 4 * (8 - grand) ** 2)


def test_spearman_sql_equals_scipy_with_ties(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, 400).astype(float)  # heavy ties, as densities of 3-page samples have
    y = x + rng.integers(0, 4, 400)
    con = db.connect()
    con.register("t", pl.DataFrame({"x": x, "y": y}).to_arrow())
    n, rho = db.one_row(con, db.spearman_sql("t", "x", "y"))
    assert n == 400
    assert rho == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
    assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)


def test_grouped_spearman_sql_ranks_within_each_group() -> None:
    con = db.connect()
    frame = pl.DataFrame({"g": [1, 1, 1, 1, 2, 2, 2], "x": [1, 2, 3, 4, 1, 2, 3], "y": [1, 2, 4, 3, 3, 2, 1]})
    con.register("t", frame.to_arrow())
    rows = dict((g, rho) for g, _, rho in con.execute(db.spearman_sql("t", "x", "y", "g")).fetchall())
    assert rows[1] == pytest.approx(0.8)  # d = (0, 0, 1, 1): 1 - 6 * 2 / (4 * 15)
    assert rows[2] == pytest.approx(-1.0)


def test_average_ranks_equal_scipy_rankdata() -> None:
    values = np.array([3.0, 1.0, 3.0, 2.0, 3.0, 1.0])
    assert average_ranks(values).tolist() == sps.rankdata(values).tolist()


def test_spearman_brown_gives_the_papers_ceiling_for_five_pages() -> None:
    assert spearman_brown(0.5, 5) == pytest.approx(5 / 6)  # paper: about 0.83, ceiling about 0.9


def test_spearman_interval_contains_rho_and_narrows_with_more_hosts() -> None:
    small, large = spearman_ci(0.5, 50), spearman_ci(0.5, 5000)
    assert small[0] < large[0] < 0.5 < large[1] < small[1]
