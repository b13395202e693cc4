"""A crawl with a user's fastText classifier: its scores reach every table, the WARC and the curation."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from warcio.archiveiterator import ArchiveIterator

from cleaner.quality.train import TrainConfig, train_classifier
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

WEB = TestWebConfig(n_hosts=12, seed=4)


def tiny_dclm_model(path: Path) -> Path:
    """A DCLM-scheme model (`__label__hq` vs `__label__cc`) trained on the test web's own main texts."""
    model = SiteModel(WEB)
    pages = model.pages_frame().sample(400, seed=1)
    rows = []
    for row in pages.iter_rows(named=True):
        text = model.render(row["host"], row["path"]).main_text
        if text:
            rows.append((text, "hq" if row["high_quality"] else "cc"))
    random.Random(0).shuffle(rows)
    config = TrainConfig(epoch=10, dim=16, bucket=20_000, holdout=0.1)
    train_classifier(rows, path, config, positive_label="hq")
    return path


def test_crawl_scores_with_a_user_classifier_and_curates_by_it(tmp_path: Path) -> None:
    model_path = tiny_dclm_model(tmp_path / "dclm.bin")
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    run = tmp_path / "run"
    with TestWebProcess(WEB, web_dir) as web:
        result = hostcrawl(
            "crawl",
            *web.seed_urls,
            "--out",
            str(run),
            "--proxy",
            web.proxy_url,
            "--allow-private",
            "--min-delay",
            "0.05",
            "--max-pages",
            "80",
            "--classifier",
            f"dclm={model_path}",
            "--no-progress",
            "--timeout",
            "4",
            timeout=300,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    pages = pl.read_parquet(run / "pages.parquet")
    scored = pages.filter(pl.col("score_dclm").is_not_null())
    assert scored.height >= 20
    assert scored["score_dclm"].is_between(0.0, 1.0).all()
    assert "score_heuristic_v3" in pages.columns, "the default scorer still runs beside it"
    assert (scored["curated"] == (scored["score_dclm"] > 0.5)).all(), "the first scorer decides curation"
    metadata = []
    for path in (run / "warc").glob("*.warc.gz"):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "metadata":
                    metadata.append(json.loads(record.content_stream().read()))
    assert metadata and all("dclm" in m["scores"] for m in metadata)


def test_missing_classifier_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = hostcrawl(
        "crawl",
        "http://a.example/",
        "--out",
        str(run),
        "--classifier",
        f"dclm={tmp_path / 'nope.bin'}",
        timeout=60,
    )
    assert result.returncode == 2
    assert "no model file" in result.stderr and "nope.bin" in result.stderr
    assert not run.exists()
