"""The offline replay behind `bench yield`'s budget curve: the real frontier over the test web's model."""

from __future__ import annotations

from crawler.replay import replay
from crawler.testweb import TestWebConfig
from crawler.testweb.model import SiteModel


def test_replay_spends_the_budget_and_ranks_host_aware_policies_far_above_breadth_first() -> None:
    model = SiteModel(TestWebConfig(n_hosts=80, seed=1, robots_dir=""))
    budget = int(sum(h.n_pages for h in model.hosts) * 0.1)
    runs = {policy: replay(model, policy, 0.1) for policy in ("bfs", "adaptive")}
    for policy, sim in runs.items():
        assert len(sim.hits) == budget, policy
    bfs, adaptive = (sum(runs[p].hits) / budget for p in ("bfs", "adaptive"))
    assert adaptive >= 2 * bfs, f"adaptive {adaptive:.3f} vs bfs {bfs:.3f} high-quality pages per fetch"
    assert runs["adaptive"].by_phase["sample"][0] > 0, "adaptive samples hosts before deepening them"
