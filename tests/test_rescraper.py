"""rescraper_v1: the answer grammar and its executor (every error case), the `<lid:N>` rendering, the cleaner
on scripted answers, and the real transformers loading and sampling code on a tiny Qwen3 model built here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cleaner.base import EMPTY
from cleaner.labeller import NoLabels
from cleaner.registry import cleaner_names, get_cleaner
from cleaner.rescraper.generate import (
    MAX_NEW_TOKENS,
    Generated,
    RescraperLabeller,
    chat_prompt,
    system_prompt,
)
from cleaner.rescraper.page_lines import RenderedPage, render_page
from cleaner.rescraper.program import Outcome, Program, ProgramError, execute, outcome, parse_program
from cleaner.rescraper.rescraper_cleaner import RescraperCleaner

LINES = [
    "Home | News | Sport",
    "Harbour reopens after two years",
    "The harbour master said the quay opens in May. Share on Facebook",
    "Work on the sea wall ends this week.",
    "Copyright Harbour Times",
]
PAGE = (
    "<html><head><title>Harbour</title></head><body><nav><a href='/'>Home</a> | <a href='/n'>News</a></nav>"
    "<article><h1>Harbour reopens after two years</h1>"
    "<p>The harbour master said the quay opens in May.</p><p>Work on the sea wall &lt;b&gt;ends&lt;/b&gt; "
    "this week.</p></article><footer>Copyright Harbour Times</footer></body></html>"
)


def test_each_operation_parses_and_runs_on_the_pages_own_lines() -> None:
    keep = parse_program("<keep>\n<extract>\nrm 1\nrm 5\n<keep>\n", 5)
    assert keep == Program("keep", frozenset({1, 5}))
    assert execute(keep, LINES) == "\n".join(LINES[1:4])
    edit = parse_program('<edit>\n<extract>\nrm 1\nrm 5\n<edit>\nrm 4\nsub 3: " Share on Facebook"', 5)
    assert edit.remove == frozenset({4}) and edit.subs == ((3, " Share on Facebook"),)
    assert (
        execute(edit, LINES)
        == "Harbour reopens after two years\nThe harbour master said the quay opens in May."
    )
    delete = parse_program("<delete>\n<extract>\nrm 1-3\n<delete>", 5)
    assert delete.extract == frozenset({1, 2, 3}) and execute(delete, LINES) is None
    rewrite = parse_program(
        "<rewrite>\n<extract>\nrm 1\n<rewrite>\nThe quay opens in May.\nThe wall is done.", 5
    )
    assert execute(rewrite, LINES) == "The quay opens in May.\nThe wall is done."
    assert parse_program("<keep>\n<extract>\n<keep>", 5).extract == frozenset()  # extracts nothing


@pytest.mark.parametrize(
    ("answer", "reason", "extract_only"),
    [
        ("keep\n<extract>\n<keep>", "bad_tag", False),  # no decision tag
        ("<maybe>\n<extract>\n<maybe>", "bad_tag", False),
        ("<keep>\nrm 1\n<keep>", "no_extract", False),
        ("<keep>\n<extract>\nremove 1\n<keep>", "bad_op", False),
        ("<keep>\n<extract>\nrm 0\n<keep>", "out_of_range", False),
        ("<keep>\n<extract>\nrm 4-9\n<keep>", "out_of_range", False),
        ("<keep>\n<extract>\nrm 3-2\n<keep>", "out_of_range", False),
        ("<keep>\n<extract>\nrm 1\nrm 2", "truncated", False),  # cut inside the extraction ops
        ("<keep>\n<extract>\nrm 1\n<other>", "bad_tag", False),
        ("<keep>\n<extract>\nrm 1\n<edit>\nrm 2", "tag_mismatch", True),
        ("<keep>\n<extract>\nrm 1\n<keep>\nrm 2", "payload_after_keep", True),
        ("<delete>\n<extract>\nrm 1\n<delete>\nwhy", "payload_after_delete", True),
        ("<edit>\n<extract>\nrm 1\n<edit>\nrm 9", "out_of_range", True),
        ("<edit>\n<extract>\nrm 1\n<edit>\ndrop line 2", "bad_op", True),
        ('<edit>\n<extract>\nrm 1\n<edit>\nsub 3: "unclosed', "bad_op", True),
        ('<edit>\n<extract>\nrm 1\n<edit>\nsub 3: ""', "bad_op", True),
        ('<edit>\n<extract>\nrm 1\n<edit>\nsub 3: "not on that line"', "sub_not_in_line", True),
        ('<edit>\n<extract>\nrm 1\n<edit>\nsub 1: "Home"', "sub_on_removed_line", True),
        ("<rewrite>\n<extract>\nrm 1\n<rewrite>\n", "empty_rewrite", True),
        ("<rewrite>\n<extract>\nrm 1\n<rewrite>\nThe quay opens.\nrm 4", "leaked_syntax", True),
        ("<rewrite>\n<extract>\nrm 1\n<rewrite>\nThe <lid:3> quay opens.", "leaked_syntax", True),
    ],
)
def test_a_malformed_rescraper_answer_is_named_and_never_half_applied(
    answer: str, reason: str, extract_only: bool
) -> None:
    lines = LINES[:4] if "rm 4-9" in answer else LINES
    result = outcome(answer, True, lines)
    assert result.reason == reason
    if extract_only:  # well formed through its second tag: the extraction alone is applied
        assert result == Outcome("\n".join(lines[1:]), "extract_only", reason)
    else:
        assert result == Outcome(None, "skipped", reason)


def test_a_rescraper_answer_cut_by_the_token_limit_is_truncated_even_when_it_parses() -> None:
    """A rewrite stopped at 3,072 tokens parses but lost its end: it is not taken as the page."""
    cut = outcome("<rewrite>\n<extract>\nrm 1\n<rewrite>\nThe quay opens in", False, LINES)
    assert cut == Outcome(None, "skipped", "truncated")
    with pytest.raises(ProgramError) as error:
        parse_program("<keep>\n<extract>\nrm 1", 5)
    assert error.value.reason == "truncated" and error.value.extract is None


def test_rescraper_renders_visible_blocks_one_per_line_with_lid_ids_and_no_markup() -> None:
    page, reason, truncated = render_page(PAGE)
    assert page is not None and reason is None and not truncated
    assert page.lines[1:] == [
        "Harbour reopens after two years",
        "The harbour master said the quay opens in May.",
        "Work on the sea wall ends this week.",  # the escaped <b> tags shown as text are stripped
        "Copyright Harbour Times",
    ]
    assert page.title == "Harbour"
    numbered = page.numbered().split("\n")
    assert numbered[1] == "<lid:2>Harbour reopens after two years" and len(numbered) == len(page.lines)
    short, why, _ = render_page("<html><body><p>Too short.</p></body></html>")  # under 20 characters
    assert short is None and why == "too_short"


class ScriptedEngine:
    """Answers from a list; records prompts (no model)."""

    def __init__(self, answers: Sequence[str | Generated], tokenizer: Any) -> None:
        self.answers = list(answers)
        self.tokenizer = tokenizer
        self.prompts: list[str] = []

    def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[Generated]:
        assert max_new_tokens == MAX_NEW_TOKENS
        self.prompts += prompts
        out = []
        for _ in prompts:
            answer = self.answers.pop(0)
            out.append(answer if isinstance(answer, Generated) else Generated(answer, True))
        return out


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from test_cleaner_decoder import CHAT_TEMPLATE

    pytest.importorskip("transformers")
    from cleaner.encoder import train_tokenizer

    trained = train_tokenizer([PAGE, system_prompt()] * 3, vocab_size=800)
    trained.chat_template = CHAT_TEMPLATE
    return trained


def test_the_prompt_is_the_stage_2_system_prompt_and_the_numbered_page(tokenizer: Any) -> None:
    page = RenderedPage(LINES, "Harbour")
    prompt = chat_prompt(tokenizer, page)
    assert prompt.startswith("<|im_start|>system\nYou are a web page cleaner for LLM pre-training data.")
    assert "Line 2: <extract>" in prompt and "THE REFINEMENT RULES" in prompt
    assert f"<|im_start|>user\n<lid:1>{LINES[0]}\n<lid:2>{LINES[1]}" in prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # thinking off


def test_the_cleaner_records_what_each_page_became(tokenizer: Any) -> None:
    n = len(render_page(PAGE)[0].lines)  # type: ignore[union-attr]
    answers = [
        f"<keep>\n<extract>\nrm 1\nrm {n}\n<keep>",
        "<rewrite>\n<extract>\nrm 1\n<rewrite>\nThe harbour opens again in May.",
        f"<delete>\n<extract>\nrm 1-{n}\n<delete>",
        '<edit>\n<extract>\nrm 1\n<edit>\nsub 2: "nowhere"',  # sub string not in its line
        "<keep>\nrm 1",  # broken before the extraction ended
        Generated("<rewrite>\n<extract>\n<rewrite>\nThe harbour", False),  # cut at the token limit
    ]
    cleaner = RescraperCleaner(engine=ScriptedEngine(answers, tokenizer))
    keep, rewrite, delete, edit, broken, cut = cleaner.clean_batch([PAGE] * 6, ["http://a.example/"] * 6)
    assert keep.page is not None and keep.page.operation == "keep" and not keep.page.generated
    assert keep.page.text.startswith("Harbour reopens") and "Copyright" not in keep.page.text
    assert keep.page.cleaner == "rescraper_v1" and keep.page.title == "Harbour" and keep.fallback is None
    assert rewrite.page is not None and rewrite.page.generated and rewrite.page.operation == "rewrite"
    assert rewrite.page.text == "The harbour opens again in May."
    assert delete.page is None and delete.error == f"{EMPTY}/deleted"
    assert edit.page is not None and edit.page.operation == "extract_only"
    assert edit.fallback == "rescraper_v1/sub_not_in_line" and "Copyright" in edit.page.text
    assert broken.page is None and broken.error == f"{EMPTY}/malformed_no_extract"
    assert cut.page is None and cut.error == f"{EMPTY}/malformed_truncated"


def test_a_page_over_the_prompt_limit_is_not_sent_and_an_engine_error_costs_one_page(tokenizer: Any) -> None:
    class Picky(ScriptedEngine):
        def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[Generated]:
            if any("POISON" in p for p in prompts):
                raise RuntimeError("CUDA error")
            return super().generate(prompts, max_new_tokens)

    page = RenderedPage(LINES, None)
    cleaner = RescraperCleaner(engine=Picky(["<keep>\n<extract>\n<keep>"], tokenizer))
    poison = "<html><body><p>POISON line of the page</p></body></html>"
    kept, failed = cleaner.clean_batch([PAGE, poison], ["http://a.example/"] * 2)  # batch, then one by one
    assert kept.page is not None and kept.page.operation == "keep"
    assert kept.page.text == "\n".join(render_page(PAGE)[0].lines)  # type: ignore[union-attr]
    assert failed.page is None and failed.error == f"{EMPTY}/engine_error"
    small = RescraperLabeller(ScriptedEngine([], tokenizer), max_prompt_tokens=50)
    assert small.label([page]) == [NoLabels("overflow")]


def test_rescraper_is_a_registered_cleaner_listed_by_crawl_help() -> None:
    from hostcrawl_cli import hostcrawl

    assert "rescraper_v1" in cleaner_names()
    shown = " ".join(hostcrawl("crawl", "--help").stdout.split())
    assert [name for name in cleaner_names() if name not in shown] == []  # every cleaner, rescraper_v1 too


def test_the_real_loading_and_sampling_code_runs_a_tiny_qwen3_on_cpu(
    tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random 2-layer Qwen3 built here stands in for cx-cmu/ReScraper (no hub): loaded from a folder by
    $HOSTCRAWL_RESCRAPER_MODEL, sampled as the paper's inference, seeded per page so a rerun agrees."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=8192,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    folder = tmp_path / "rescraper-tiny"
    Qwen3ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    monkeypatch.setenv("HOSTCRAWL_RESCRAPER_MODEL", str(folder))
    runs = []
    for _ in range(2):
        cleaner = get_cleaner("rescraper_v1")
        labeller = cleaner.labeller()  # type: ignore[attr-defined]
        assert type(labeller.engine).__name__ == "TransformersEngine"
        labeller.max_new_tokens = 40  # the paper's 3,072 would take a random model a minute per page
        runs.append(cleaner.clean_batch([PAGE], ["http://a.example/"]))
    [first], [second] = runs
    # a random model writes no valid program: the page is counted and skipped, never half-applied
    assert first.page is None and first.error is not None and first.error.startswith(f"{EMPTY}/malformed_")
    assert (second.page, second.error) == (first.page, first.error)


@pytest.mark.parametrize("allow_rewrite", [True, False])
def test_what_the_model_did_reaches_the_row_the_text_record_and_the_stats(
    tmp_path: Path, allow_rewrite: bool
) -> None:
    """pages.parquet's `operation`, the text record's `operation`/`generated`, clean/operation/<op>; with
    `[cleaning] allow_rewrite = false` a rewritten page stays out of the curated text."""
    from scrapy.utils.test import get_crawler

    from cleaner.pipeline import PageResult
    from crawler.pages.store_pipeline import CleanScoreStorePipeline

    settings = {
        "HOSTCRAWL_RUN_DIR": str(tmp_path), "HOSTCRAWL_CLEANER": "rescraper_v1", "HOSTCRAWL_SCORERS": ["q"],
        "HOSTCRAWL_THRESHOLD": 0.5, "HOSTCRAWL_ALLOW_REWRITE": allow_rewrite,
    }  # fmt: skip
    crawler = get_crawler(settings_dict=settings)
    crawler.stats.open_spider()
    pipeline = CleanScoreStorePipeline(crawler)
    docs: list[dict[str, Any]] = []
    pipeline.text = type("Sink", (), {"write": lambda self, doc: docs.append(doc)})()  # type: ignore[assignment]
    item = {"url": "http://a.example/1", "host": "a.example", "fetched_at": "2026-12-05T00:00:00Z",
            "policy": "adaptive", "warc_record_id": None}  # fmt: skip
    result = PageResult(text="The quay opens.", scores={"q": 0.9}, cleaner="rescraper_v1", n_words=3,
                        operation="rewrite", generated=True)  # fmt: skip
    row = dict(item, cleaner=None, operation=None, curated=False, phase="deepen")
    pipeline._record(item, row, result)
    assert row["operation"] == "rewrite" and row["cleaner"] == "rescraper_v1"
    stats = crawler.stats.get_stats()
    assert stats["clean/operation/rewrite"] == 1
    if allow_rewrite:
        assert row["curated"] and docs[0]["metadata"]["operation"] == "rewrite"
        assert docs[0]["metadata"]["generated"] is True
    else:
        assert not row["curated"] and docs == [] and stats["page/kept_out/generated"] == 1
