"""The replay scores pages as the crawl's cleaner and scorer do; `bench yield --webs` tabulates a family."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from crawler.bench.family import BASELINES, FAMILIES, FAMILY_POLICIES, format_family_table, ratio_interval
from crawler.bench.replay import replay
from crawler.bench.replay_scores import ScoreSampler
from crawler.testweb.config import graded_config
from crawler.testweb.model import SiteModel
from tests.hostcrawl_cli import hostcrawl


def test_scored_replay_believes_mediocre_pages_are_good_where_the_truth_replay_does_not() -> None:
    web = SiteModel(graded_config(n_hosts=60, seed=1, robots_dir=""))
    sampler = ScoreSampler.measure(web, per_cell=8)
    by_truth = replay(web, "sample_deepen", 0.1)
    by_score = replay(web, "sample_deepen", 0.1, scores=sampler)
    judged = {name: sum(r.high for r in sim.frontier.hosts.values()) for name, sim in
              (("truth", by_truth), ("scored", by_score))}  # fmt: skip
    # with true labels the frontier never calls more pages high than were; the scorer passes
    # machine-translated and listing pages, so the scored replay believes in more than it gets
    assert judged["truth"] <= sum(by_truth.hits)
    assert judged["scored"] > 1.2 * sum(by_score.hits)
    assert by_score.hits != by_truth.hits  # it crawls differently, not only counts differently
    sampled = [sampler.score(web, h.name, h.page_path(0)) for h in web.hosts]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in sampled)
    assert len({round(s or 0, 6) for s in sampled}) > 10  # scores, not labels
    assert sampler.score(web, web.hosts[0].name, "/") is None  # a home page is not an article


def test_bench_yield_webs_prints_every_policy_and_ratio_for_every_web_of_the_family(tmp_path: Path) -> None:
    out = tmp_path / "family.json"
    result = hostcrawl("bench", "yield", "--webs", "tiny", "--hosts", "30", "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    per_fetch, clock = result.stdout.split(CLOCK_TITLE)
    rows = [line.split() for line in per_fetch.splitlines() if re.match(r"^\S+\s+\S+\s+\d\.\d{3}\s", line)]
    webs = [variant.name for variant in FAMILIES["tiny"]]
    assert [(r[0], r[1]) for r in rows] == [(w, p) for w in webs for p in FAMILY_POLICIES]
    for row in rows:
        assert len(row) == 3 + len(BASELINES) and all(re.fullmatch(r"\d+\.\d\d", x) for x in row[3:])
        if row[1] in BASELINES:
            assert row[3 + BASELINES.index(row[1])] == "1.00"  # each baseline is 1.00x itself
    saved = json.loads(out.read_text())["mean"]
    assert set(saved) == set(webs) and all(set(v) == set(FAMILY_POLICIES) for v in saved.values())
    assert "replay, scored pages" in result.stdout
    _check_clock_table(clock, json.loads(out.read_text())["clock"], webs, list(FAMILY_POLICIES))


CLOCK_TITLE = "the clock and the ceiling"


def _check_clock_table(table: str, saved: dict[str, Any], webs: list[str], policies: list[str]) -> None:
    """The clock table has a row per web and policy; no policy passes the ceiling (it cannot: each
    high-quality page is fetched once at most), idle shares are shares, and the JSON says what it prints."""
    rows = {(r[0], r[1]): r for r in (line.split() for line in table.splitlines()) if len(r) == 9}
    rows.pop(("web", "policy"), None)
    assert sorted(rows) == sorted((w, p) for w in webs for p in policies)
    for (web, policy), row in rows.items():
        ceiling, share, per_hour, idle = float(row[2]), float(row[3]), float(row[4]), float(row[6])
        figures = saved[web][policy]
        assert 0 < ceiling <= 1 and share <= 1.0, (web, policy, row)
        assert 0 <= idle <= 1 and per_hour > 0 and 0 <= float(row[8]) < 1, (web, policy, row)
        assert row[4] == f"{figures['hq_per_hour']:.0f}" and row[2] == f"{figures['ceiling']:.3f}"
        if policy == "sample_deepen":
            assert row[5] == "1.00"


def test_a_negative_score_lag_is_refused_with_exit_code_2() -> None:
    result = hostcrawl("bench", "yield", "--webs", "tiny", "--score-lag", "-3")
    assert result.returncode == 2
    assert "--score-lag: -3 pages: a lag is 0 or more pages" in result.stderr.splitlines()[-1]


def _two_seeds(out: Path, jobs: int) -> tuple[str, dict[str, Any]]:
    """`bench yield --webs tiny` over seeds 3 and 4 with `jobs` replays at once: its stdout and JSON."""
    result = hostcrawl(
        "bench", "yield", "--webs", "tiny", "--hosts", "30", "--seed", "3", "--seeds", "2", "--jobs",
        str(jobs), "--policies", "sample_deepen,adaptive", "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, json.loads(out.read_text())


def test_bench_yield_webs_over_several_seeds_prints_each_webs_mean_and_the_seeds_below_sample_deepen(
    tmp_path: Path,
) -> None:
    stdout, saved = _two_seeds(tmp_path / "family.json", jobs=2)
    assert "means over seeds 3-4" in stdout
    stdout, clock = stdout.split(CLOCK_TITLE)
    per_seed, means = saved["seeds"], saved["mean"]
    assert sorted(per_seed) == ["3", "4"]
    webs = [variant.name for variant in FAMILIES["tiny"]]
    assert per_seed["3"] != per_seed["4"]  # two different webs per variant, not one run twice
    rows = {
        (r[0], r[1]): r
        for r in (line.split() for line in stdout.splitlines())
        if len(r) > 2 and re.fullmatch(r"\d\.\d{3}", r[2])
    }
    assert sorted(rows) == sorted((w, p) for w in webs for p in ("sample_deepen", "adaptive"))
    for web in webs:
        for policy in ("sample_deepen", "adaptive"):
            mean = (per_seed["3"][web][policy] + per_seed["4"][web][policy]) / 2
            assert means[web][policy] == pytest.approx(mean)
            assert rows[(web, policy)][2] == f"{mean:.3f}"
        fell = sum(per_seed[s][web]["adaptive"] < per_seed[s][web]["sample_deepen"] for s in ("3", "4"))
        assert rows[(web, "adaptive")][-1] == f"{fell}/2"
        assert rows[(web, "sample_deepen")][-1] == "0/2"
    _check_clock_table(clock, saved["clock"], webs, ["sample_deepen", "adaptive"])
    _, serial = _two_seeds(tmp_path / "serial.json", jobs=1)
    assert serial == saved  # replays in parallel give what one process gives


def test_the_table_says_how_far_the_seeds_drawn_could_move_a_ratio() -> None:
    """One web where adaptive is steadily ahead, one where single seeds swing from 0.5x to 1.9x: the first
    interval is narrow and above 1x, the second wide and across it, and each holds the table's ratio."""
    steady = {"sample_deepen": [0.30, 0.32, 0.29, 0.31, 0.30], "adaptive": [0.36, 0.39, 0.35, 0.37, 0.36]}
    swinging = {"sample_deepen": [0.40, 0.20, 0.30, 0.35, 0.25], "adaptive": [0.20, 0.38, 0.33, 0.18, 0.40]}
    per_seed = {
        seed: {
            "steady": {p: v[i] for p, v in steady.items()},
            "swinging": {p: v[i] for p, v in swinging.items()},
        }
        for i, seed in enumerate(range(500, 505))
    }
    means = {
        web: {p: sum(v) / 5 for p, v in runs.items()}
        for web, runs in (("steady", steady), ("swinging", swinging))
    }
    table = format_family_table(means, "synthetic", per_seed)
    rows = {(r[0], r[1]): r for r in (line.split() for line in table.splitlines()) if len(r) > 3}
    assert "90% interval" in table
    for web, runs in (("steady", steady), ("swinging", swinging)):
        low, high = ratio_interval(runs["adaptive"], runs["sample_deepen"]) or (0.0, 0.0)
        ratio = means[web]["adaptive"] / means[web]["sample_deepen"]
        assert low <= ratio <= high
        assert rows[(web, "adaptive")][-2] == f"{low:.2f}-{high:.2f}"
        assert rows[(web, "sample_deepen")][-2] == "-"
    steady_low, steady_high = ratio_interval(steady["adaptive"], steady["sample_deepen"]) or (0.0, 0.0)
    swing_low, swing_high = ratio_interval(swinging["adaptive"], swinging["sample_deepen"]) or (0.0, 0.0)
    assert steady_low > 1.0 and steady_high - steady_low < 0.1
    assert swing_low < 1.0 < swing_high and swing_high - swing_low > 0.3
    assert ratio_interval([0.3, 0.4], [0.2, 0.5]) is None  # two seeds say nothing about the spread


def test_zero_seeds_are_refused_with_exit_code_2() -> None:
    result = hostcrawl("bench", "yield", "--webs", "tiny", "--seeds", "0")
    assert result.returncode == 2
    assert "--seeds: 0: must be 1 or more" in result.stderr.splitlines()[-1]
