"""The scheduler's priors: any spelling of a host finds its release's HC/PR percentiles."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from graph.priors import HostPriors
from graph.ranks import ingest_ranks

HEADER = "#harmonicc_pos\t#harmonicc_val\t#pr_pos\t#pr_val\t#host_rev"


def ranks_parquet(tmp_path: Path, name: str, hosts_rev: list[str], domain: bool = False) -> Path:
    """A ranks parquet whose i-th host has hc_pos i+1 and pr_pos len-i (reverse order)."""
    n = len(hosts_rev)
    lines = [HEADER + ("\t#n_hosts" if domain else "")]
    for i, rev in enumerate(hosts_rev):
        lines.append(f"{i + 1}\t{1.0e7 - i}\t{n - i}\t{1.0e-3 / (n - i)}\t{rev}" + ("\t3" if domain else ""))
    src = tmp_path / f"{name}-{'domain' if domain else 'host'}-ranks.txt.gz"
    with gzip.open(src, "wt") as out:
        out.write("\n".join(lines) + "\n")
    out_path = tmp_path / f"{name}.parquet"
    ingest_ranks(src, out_path)
    return out_path


def test_old_release_without_www_answers_www_hosts(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "cc-main-2024-feb-apr-may", ["com.facebook", "com.google", "org.example"])
    priors = HostPriors.load(path)
    prior = priors.lookup("WWW.Facebook.com:443")
    assert prior is not None
    assert prior.hc_percentile == 1.0
    assert prior.pr_percentile == pytest.approx(1 / 3)
    assert prior.matched == "facebook.com"
    assert priors.release == "cc-main-2024-feb-apr-may" and len(priors) == 3


def test_new_release_with_www_answers_bare_hosts(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "cc-main-2026-apr-may-jun", ["com.facebook.www", "com.google.www"])
    prior = HostPriors.load(path).lookup("google.com")
    assert prior is not None and prior.matched == "www.google.com" and prior.hc_percentile == 0.5


def test_exact_spelling_wins_when_both_www_variants_are_ranked(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "r", ["com.example.www", "com.other", "com.example"])
    priors = HostPriors.load(path)
    with_www, bare = priors.lookup("www.example.com"), priors.lookup("example.com")
    assert with_www is not None and bare is not None
    assert with_www.hc_percentile > bare.hc_percentile


def test_unknown_and_malformed_hosts_have_no_prior(tmp_path: Path) -> None:
    priors = HostPriors.load(ranks_parquet(tmp_path, "r", ["com.facebook"]))
    assert priors.lookup("m.facebook.com") is None
    assert priors.lookup("not a host") is None
    assert priors.lookup("") is None


def test_domain_table_answers_for_any_host_of_the_domain(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "d", ["uk.co.bbc", "com.google"], domain=True)
    priors = HostPriors.load(path)
    prior = priors.lookup("news.bbc.co.uk")
    assert priors.kind == "domain"
    assert prior is not None and prior.matched == "bbc.co.uk" and prior.hc_percentile == 1.0


def test_index_is_rebuilt_when_the_parquet_changes(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "r", ["com.a", "com.b"])
    assert HostPriors.load(path).lookup("c.com") is None
    replacement = ranks_parquet(tmp_path, "r2", ["com.c", "com.a", "com.b"])
    os.replace(replacement, path)
    prior = HostPriors.load(path).lookup("c.com")
    assert prior is not None and prior.hc_percentile == 1.0


def test_index_goes_to_a_private_folder_when_the_data_folder_is_read_only(tmp_path: Path) -> None:
    path = ranks_parquet(tmp_path, "r", ["com.a", "com.b"])
    os.chmod(tmp_path, 0o555)
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        assert HostPriors.load(path).lookup("b.com") is not None
    finally:
        os.chmod(tmp_path, 0o755)


def test_missing_parquet_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="hostcrawl graph ingest"):
        HostPriors.load(tmp_path / "none.parquet")
