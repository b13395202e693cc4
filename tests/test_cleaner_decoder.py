"""The decoder labeller: prompt, chat template, constraint, parsing and fallback, with the engine replaced.

vLLM needs a GPU; the engine here is a stand-in that records what it is asked and answers from a
script, with a tiny tokenizer built here whose chat template works as a Qwen/Hunyuan-style one does.
"""

from __future__ import annotations

import logging
import re
import sys
import types
from collections.abc import Sequence
from typing import Any

import pytest

from cleaner.decoder import (
    REVISION_ENV,
    DecoderCleaner,
    DecoderLabeller,
    DecoderParseError,
    answer_regex,
    build_prompt,
    chat_prompt,
    dummy_answer,
    page_labels,
    parse_response,
    prompt_item_ids,
    regex_sampling_params,
)
from cleaner.item_labeller import item_page
from cleaner.labeller import NoLabels
from cleaner.model_source import TRUST_REMOTE_CODE_ENV, RemoteCodeError

PAGE = (
    "<html><head><title>Harbour</title></head><body><div class='menu'><a href='/'>Home</a></div>"
    "<article><h1>Harbour reopens</h1>"
    "<p>The harbour master said the quay opens in May after two years of work.</p></article>"
    "<footer>Copyright Harbour Times</footer></body></html>"
)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def chat_tokenizer() -> Any:
    """A tiny byte-level BPE with a chat template (no hub)."""
    pytest.importorskip("transformers")
    from cleaner.encoder import train_tokenizer

    tokenizer = train_tokenizer([PAGE, build_prompt(item_page(PAGE).simplified)] * 5, vocab_size=600)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


class ScriptedEngine:
    """Answers from a list, recording what it was asked."""

    def __init__(self, answers: Sequence[str | None], tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else chat_tokenizer()
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.regexes: list[str] = []

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:
        self.prompts += prompts
        self.regexes += regexes
        return [self.answers.pop(0) for _ in prompts]


class Fixed:
    """A fallback cleaner that marks what it cleaned."""

    def __init__(self) -> None:
        self.calls = 0

    def extract(self, html: str, url: str | None = None) -> Any:
        from cleaner.base import CleanedPage

        self.calls += 1
        return CleanedPage(text="fallback text", markdown="fallback text", title=None, cleaner="x")


def test_the_prompt_is_the_simplified_page_in_the_short_compact_template_through_the_chat_template() -> None:
    page = item_page(PAGE)
    assert page.item_ids == ["1", "2", "3", "4"]
    prompt = build_prompt(page.simplified)
    assert prompt.startswith('As an HTML expert, classify elements with "_item_id" as "main" or "other"')
    assert prompt.endswith("Input HTML:\n" + page.simplified)
    assert '<h1 _item_id="2">Harbour reopens</h1>' in prompt
    user, sent = chat_prompt(chat_tokenizer(), prompt)
    assert user == f"<|im_start|>user\n{prompt}<|im_end|>\n"
    assert sent == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_one_regex_per_label_alphabet_admits_labelled_ids_in_answer_tags() -> None:
    assert answer_regex() is answer_regex()  # built once, so vLLM compiles it once
    regex = re.compile(answer_regex())
    assert regex.fullmatch("<answer>1other2main3main4other</answer>")
    assert regex.fullmatch("<answer>\n1main\n</answer>")
    for bad in ("1other2main", "<answer></answer>", "<answer>1maybe</answer>", "<answer>0main</answer>"):
        assert not regex.fullmatch(bad), bad


def test_answers_parse_as_the_package_reads_them_and_must_label_exactly_the_pages_ids() -> None:
    assert parse_response("<answer>1main2other3main</answer>") == {"1": "main", "2": "other", "3": "main"}
    assert parse_response('{"1": "main", "2": "other"}') == {"1": "main", "2": "other"}
    assert parse_response('noise {"1": "main", "2": "oth') == {"1": "main"}  # a cut JSON answer
    with pytest.raises(DecoderParseError):
        parse_response("nothing here")
    ids = ["1", "2", "3"]
    assert page_labels("<answer>1main2other3main</answer>", ids) == {"1": "main", "2": "other", "3": "main"}
    for bad in ("<answer>1main2other</answer>", "<answer>1main2other3main4main</answer>", '{"1": "x"}'):
        with pytest.raises(DecoderParseError):
            page_labels(bad, ids)


def test_decoder_labels_pages_and_gives_up_on_bad_answers_overflow_and_engine_errors() -> None:
    pages = [
        item_page(PAGE),
        item_page(PAGE),
        item_page("<body>" + "<p>word word word</p>" * 3000 + "</body>"),
    ]
    engine = ScriptedEngine(["<answer>1other2main3main4other</answer>", "garbage"])
    labeller = DecoderLabeller(engine, max_model_tokens=20_000)
    first, second, third = labeller.label(pages)
    assert first == {"1": "other", "2": "main", "3": "main", "4": "other"}
    assert second == NoLabels("parse") and third == NoLabels("overflow")
    assert len(engine.prompts) == 2 and engine.regexes == [answer_regex()] * 2
    assert labeller.counts == {
        "decoder/fallback/overflow": 1,
        "decoder/labelled": 1,
        "decoder/fallback/parse": 1,
    }

    class Broken(ScriptedEngine):
        def generate(
            self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
        ) -> list[str | None]:
            raise RuntimeError("CUDA out of memory")

    broken = DecoderLabeller(Broken([], engine.tokenizer))
    assert broken.label([item_page(PAGE)]) == [NoLabels("engine_error")]
    assert broken.counts == {"decoder/fallback/engine_error": 1}


def test_a_generation_error_costs_only_the_page_it_fails_on_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One page vLLM refuses (say, over its context) used to cost the whole batch of 64 its labels: the
    batch is labelled again page by page, and only that page goes to the fallback."""
    poison = PAGE.replace("Harbour reopens", "POISON")

    class Picky(ScriptedEngine):
        def generate(
            self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
        ) -> list[str | None]:
            if any("POISON" in p for p in prompts):
                raise ValueError("prompt too long")
            return super().generate(prompts, regexes, max_tokens)

    answer = "<answer>1other2main3main4other</answer>"
    cleaner = DecoderCleaner(engine=Picky([answer, answer]), fallback=Fixed())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        first, bad, third = cleaner.clean_batch([PAGE, poison, PAGE], ["http://a.example/"] * 3)
    for good in (first, third):
        assert good.page is not None and good.page.cleaner == "decoder_v2" and good.fallback is None
        assert good.page.text == (
            "Harbour reopens\nThe harbour master said the quay opens in May after two years of work."
        )
    assert (
        bad.page is not None
        and bad.page.text == "fallback text"
        and bad.fallback == "decoder_v2/engine_error"
    )
    assert cleaner.labeller().counts == {"decoder/labelled": 2, "decoder/fallback/engine_error": 1}
    assert any("retrying one by one" in r.message for r in caplog.records)


def test_a_page_whose_sent_prompt_overflows_goes_to_the_fallback_not_to_the_engine() -> None:
    """The package's check measures the user turn; the text sent adds the system turn and the generation
    prompt, so a page just under the check overflowed the context at the engine."""
    engine = ScriptedEngine([])
    page = item_page(PAGE)
    user, sent = chat_prompt(engine.tokenizer, build_prompt(page.simplified))
    answer = dummy_answer(prompt_item_ids(user))
    limit = len(engine.tokenizer.encode(user + "\n\n" + answer))  # the package's check just passes
    assert len(engine.tokenizer.encode(sent + answer)) > limit
    labeller = DecoderLabeller(engine, max_model_tokens=limit)
    assert labeller.label([page]) == [NoLabels("overflow")] and engine.prompts == []


def test_decoder_cleaner_renders_the_blocks_the_model_chose_and_falls_back_to_trafilatura() -> None:
    engine = ScriptedEngine(["<answer>1other2main3main4other</answer>", "<answer>1main</answer>"])
    cleaner = DecoderCleaner(engine=engine)
    page = cleaner.clean(PAGE)
    assert page is not None and page.cleaner == "decoder_v2" and page.title == "Harbour"
    assert page.text == (
        "Harbour reopens\nThe harbour master said the quay opens in May after two years of work."
    )
    assert page.markdown.startswith("# Harbour reopens")
    fallback = DecoderCleaner(engine=engine).fallback_cleaner()
    assert fallback.name == "trafilatura_v1"
    [again] = cleaner.clean_batch([PAGE], ["http://a.example/"])  # one of four blocks labelled: fallback
    assert again.page is not None and "quay opens in May" in again.page.text
    assert again.page.cleaner == "trafilatura_v1", "a fallback's text is recorded under the fallback's name"
    assert again.fallback == "decoder_v2/parse"
    assert cleaner.labeller().counts["decoder/fallback/parse"] == 1


def test_remote_code_is_refused_without_a_pinned_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUST_REMOTE_CODE_ENV, "true")
    monkeypatch.delenv(REVISION_ENV, raising=False)
    with pytest.raises(RemoteCodeError, match=REVISION_ENV):
        DecoderCleaner().labeller()


def _fake_vllm(monkeypatch: pytest.MonkeyPatch, constraint_class: str) -> None:
    """A stand-in for vLLM (it needs a GPU): only its sampling classes, in one API or the other."""

    class Params:
        def __init__(self, **kwargs: object) -> None:
            self.kwargs = kwargs

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = Params  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    setattr(sampling, constraint_class, Params)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)


@pytest.mark.parametrize(
    ("api", "field"),
    [("StructuredOutputsParams", "structured_outputs"), ("GuidedDecodingParams", "guided_decoding")],
)
def test_regex_constraint_reaches_vllm_in_its_old_and_new_api(
    monkeypatch: pytest.MonkeyPatch, api: str, field: str
) -> None:
    _fake_vllm(monkeypatch, api)
    params = regex_sampling_params(answer_regex(), 12).kwargs
    assert params["temperature"] == 0.0 and params["top_k"] == 1 and params["max_tokens"] == 12
    assert params[field].kwargs == {"regex": answer_regex()}, params


def test_a_fallback_reaches_the_page_record_under_the_fallbacks_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """What pages.parquet, the text record and stats.json (clean/fallback/decoder_v2/parse) are built from."""
    from cleaner import pipeline

    cleaner = DecoderCleaner(engine=ScriptedEngine(["<answer>1main2other3main4other</answer>", "garbage"]))
    monkeypatch.setattr(pipeline, "cached_cleaner", lambda name: cleaner)
    labelled, fell_back = pipeline.process_pages([(PAGE, "http://a.example/1"), (PAGE, "http://a.example/2")],
                                                 "decoder_v2", ())  # fmt: skip
    assert (labelled.cleaner, labelled.fallback) == ("decoder_v2", None)
    assert (fell_back.cleaner, fell_back.fallback) == ("trafilatura_v1", "decoder_v2/parse")
    assert "quay opens in May" in fell_back.text and fell_back.error is None
