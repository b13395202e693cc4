"""The decoder labeller: prompt, regex, parsing and fallback, with the engine replaced (vLLM needs a GPU)."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Sequence

import numpy as np
import pytest

from cleaner.decoder import (
    DecoderCleaner,
    DecoderLabeller,
    DecoderParseError,
    build_prompt,
    label_regex,
    parse_labels,
    regex_sampling_params,
)
from cleaner.labeller import BlockLabeller
from cleaner.simplify import SimplePage, simplify

PAGE = (
    "<nav><a href='/'>Home</a></nav><article><h1>Harbour reopens</h1>"
    "<p>The harbour master said the quay opens in May after two years of work.</p></article>"
    "<footer>Copyright Harbour Times</footer>"
)


class ScriptedEngine:
    """Answers from a list, recording what it was asked."""

    def __init__(self, answers: Sequence[str | None]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.regexes: list[str] = []

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:
        self.prompts += prompts
        self.regexes += regexes
        return [self.answers.pop(0) for _ in prompts]


class MarkAll(BlockLabeller):
    name = "mark_all"

    def __init__(self) -> None:
        self.calls = 0

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        self.calls += len(pages)
        return [np.full(len(p.blocks), 0.75, dtype=np.float32) for p in pages]


def test_prompt_numbers_every_block_from_one_and_regex_admits_one_label_each() -> None:
    page = simplify(PAGE)
    prompt = build_prompt(page)
    assert '<ul _item_id="1">' not in prompt and '_item_id="1">Home</' in prompt
    assert '<h1 _item_id="2">Harbour reopens</h1>' in prompt
    regex = re.compile(label_regex(len(page.blocks)))
    assert regex.fullmatch("1other2main3main4other")
    assert not regex.fullmatch("1other2main3main")
    assert not regex.fullmatch("1other2main3main4other5main")
    assert not regex.fullmatch("2main1other3main4other")


def test_parse_accepts_exact_answers_and_rejects_gaps_repeats_and_junk() -> None:
    assert parse_labels("1main2other3main", 3).tolist() == [1.0, 0.0, 1.0]
    for bad in ("1main2other", "1main1other2main", "1main2other3main4main", "1main 2other3main", "nope"):
        with pytest.raises(DecoderParseError):
            parse_labels(bad, 3)


def test_decoder_labels_pages_and_falls_back_on_bad_answer_or_overflow() -> None:
    pages = [simplify(PAGE), simplify(PAGE), simplify(("<p>" + "word " * 150 + "</p>") * 400)]
    engine = ScriptedEngine(["1other2main3main4other", "garbage"])
    fallback = MarkAll()
    labeller = DecoderLabeller(engine, fallback)
    first, second, huge = labeller.label(pages)
    assert first.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert second.tolist() == [0.75] * 4 and huge.tolist() == [0.75] * 400
    assert len(engine.prompts) == 2  # the oversized page never reached the model
    assert labeller.counts == {
        "decoder/fallback/overflow": 1,
        "decoder/labelled": 1,
        "decoder/fallback/parse": 1,
    }


def test_decoder_cleaner_renders_the_blocks_the_model_chose() -> None:
    cleaner = DecoderCleaner(engine=ScriptedEngine(["1other2main3main4other"]))
    page = cleaner.clean(PAGE)
    assert page is not None and page.cleaner == "decoder_v1"
    assert (
        page.text == "Harbour reopens\nThe harbour master said the quay opens in May after two years of work."
    )
    assert page.markdown.startswith("# Harbour reopens")


def test_engine_failure_sends_the_whole_batch_to_the_fallback() -> None:
    class Broken(ScriptedEngine):
        def generate(
            self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
        ) -> list[str | None]:
            raise RuntimeError("CUDA out of memory")

    labeller = DecoderLabeller(Broken([]), MarkAll())
    (labels,) = labeller.label([simplify(PAGE)])
    assert labels.tolist() == [0.75] * 4
    assert labeller.counts == {"decoder/fallback/engine_error": 1, "decoder/fallback/parse": 1}


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
    params = regex_sampling_params("(1:[MB]\\n)", 12).kwargs
    assert params["temperature"] == 0.0 and params["max_tokens"] == 12
    assert params[field].kwargs == {"regex": "(1:[MB]\\n)"}, params
