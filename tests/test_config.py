"""Bad config and seeds files are rejected with the line to fix, and nothing is written."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostcrawl_cli import hostcrawl

from crawler.run.crawl_config import ConfigError, CrawlConfig, load_config
from crawler.run.seed_urls import check_seed, load_seeds


def test_seed_file_with_bad_url_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# my seeds\nhttp://good.example/\n\nhtp:/broken\n")
    run = tmp_path / "run"
    result = hostcrawl("crawl", "--seeds", str(seeds), "--out", str(run), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{seeds}:4" in result.stderr
    assert "htp:/broken" in result.stderr
    assert not run.exists()


def test_config_with_invalid_toml_names_the_line_and_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text('seeds = ["http://a.example/"]\n[fetch]\nmax_pages = 10\ntimeout = = 3\n')
    run = tmp_path / "run"
    result = hostcrawl("crawl", "--config", str(config), "--out", str(run), cwd=tmp_path)
    assert result.returncode == 2
    assert "line 4" in result.stderr
    assert not run.exists()


def test_unknown_key_and_wrong_type_name_their_lines(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[politeness]\nmin_delay = 1.5\nmin_dely = 2\n")
    with pytest.raises(ConfigError, match=r"crawl\.toml:3: unknown key 'min_dely'"):
        load_config(config)
    config.write_text('[fetch]\n\nmax_pages = "many"\n')
    with pytest.raises(ConfigError, match=r"crawl\.toml:3: .*expected an integer"):
        load_config(config)


def test_impolite_values_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[politeness]\nper_host_concurrency = 0\n")
    with pytest.raises(ConfigError, match="per_host_concurrency"):
        load_config(config)


def test_resolved_config_round_trips_through_toml(tmp_path: Path) -> None:
    config = CrawlConfig(seeds=["http://a.example/"])
    config.fetch.max_pages = 77
    config.politeness.min_delay = 0.5
    path = tmp_path / "config.toml"
    path.write_text(config.to_toml())
    again = load_config(path)
    assert again == config
    assert tomllib.loads(path.read_text())["fetch"]["max_pages"] == 77


def test_seeds_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/  # first\n\n# nothing\nhttps://b.example/x\n")
    assert load_seeds(seeds) == ["http://a.example/", "https://b.example/x"]


def test_existing_run_directory_is_not_overwritten(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("someone's results")
    result = hostcrawl("crawl", "http://a.example/", "--out", str(run), cwd=tmp_path)
    assert result.returncode == 2
    assert "not empty" in result.stderr
    assert sorted(p.name for p in run.iterdir()) == ["keep.txt"]


def test_help_explains_the_commands(tmp_path: Path) -> None:
    result = hostcrawl("--help", cwd=tmp_path)
    assert result.returncode == 0
    for word in ("demo", "crawl", "testweb", "run directory"):
        assert word in result.stdout
    crawl_help = hostcrawl("crawl", "--help", cwd=tmp_path).stdout
    assert "--allow-private" in crawl_help and "--contact" in crawl_help


def _options(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif action.option_strings and not isinstance(
            action, (argparse._HelpAction, argparse._VersionAction)
        ):
            yield path, action


def _help_shows_default(action: argparse.Action) -> bool:
    default, text = action.default, action.help or ""
    if "default" in text:
        return True
    forms = {str(default)}
    if isinstance(default, int | float):
        forms |= {f"{default:,}", f"{default:g}"}
    if isinstance(default, Path):
        forms.add(default.name)
    if isinstance(default, list):
        forms.add(" ".join(map(str, default)))
    return any(form in text for form in forms)


def test_every_option_with_a_default_says_what_it_is_in_its_help() -> None:
    from crawler.cli import build_parser

    hidden = [
        f"{path} {action.option_strings[0]}"
        for path, action in _options(build_parser(), "hostcrawl")
        if action.default not in (None, False, True, [], argparse.SUPPRESS)
        and not _help_shows_default(action)
    ]
    assert not hidden, f"--help hides these defaults: {hidden}"


def test_seeds_file_with_a_byte_order_mark_reads_its_first_line(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes("\ufeffhttp://a.example/\nhttp://b.example/\n".encode())
    assert load_seeds(seeds) == ["http://a.example/", "http://b.example/"]


@pytest.mark.parametrize(
    "url", ["http://exa mple.com/", "http://[::1/", "http://a.example:99999/", "http://a..b/"]
)
def test_malformed_seed_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="not an absolute http"):
        check_seed(url, "seeds.txt:1")
