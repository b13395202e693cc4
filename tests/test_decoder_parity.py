"""decoder_v2 against mineru-html 1.1.2 (Dripper) on the real WCXB dev pages.

The package's own functions build the prompt, run its vLLM backend's `process` (chat template,
length check, per-page constraint) against a recording stand-in for vLLM, and parse answers; the
decoder must send byte-identical prompts, give up on the same pages, and read answers the same way.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Sequence
from typing import Any

import pytest

from cleaner.decoder import (
    DecoderParseError,
    answer_regex,
    build_prompt,
    chat_prompt,
    fits,
    page_labels,
    parse_response,
)
from cleaner.item_labeller import item_page
from tests.reference_packages import reference_module, wcxb_pages
from tests.test_cleaner_decoder import chat_tokenizer

# Small enough that the longest WCXB pages overflow it with the tiny tokenizer.
CONTEXT = 12_000


class RecordingLLM:
    """Stands in for vllm.LLM: records prompts and constraints, answers every block as main."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.regexes: list[str] = []

    def generate(self, prompts: Sequence[str], sampling_params: Sequence[Any]) -> list[Any]:
        out = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            regex = params.kwargs["structured_outputs"].kwargs["regex"]
            self.prompts.append(prompt)
            self.regexes.append(regex)
            ids = re.findall(r'_item_id="(\d+)"', prompt)
            text = "<answer>" + "".join(f"{i}main" for i in ids) + "</answer>"
            output = types.SimpleNamespace(text=text, token_ids=[])
            out.append(types.SimpleNamespace(prompt=prompt, prompt_token_ids=[], outputs=[output]))
        return out


def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    class Params:
        def __init__(self, **kwargs: object) -> None:
            self.kwargs = kwargs

    vllm = types.ModuleType("vllm")
    vllm.LLM = RecordingLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = Params  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = Params  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)


def test_prompts_overflow_and_constraints_match_the_packages_vllm_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_vllm(monkeypatch)
    prompts = reference_module(monkeypatch, "mineru_html.process.build_prompt")
    base = reference_module(monkeypatch, "mineru_html.base")
    backend_module = reference_module(monkeypatch, "mineru_html.inference.vllm_backend")
    tokenizer = chat_tokenizer()
    backend = backend_module.VLLMInferenceBackend("stand-in", CONTEXT, "compact")
    backend._tokenizer, backend._llm = tokenizer, RecordingLLM()

    pages = {name: page for name, html in wcxb_pages() if (page := item_page(html)).blocks}
    ours_sent: dict[str, str] = {}
    for name, page in pages.items():
        prompt = build_prompt(page.simplified)
        assert prompt == prompts.get_full_prompt(page.simplified, "short_compact"), name
        user, sent = chat_prompt(tokenizer, prompt)
        if fits(tokenizer, user, CONTEXT):
            ours_sent[name] = sent
    inputs = {
        name: base.MinerUHTMLGenerateInput(full_prompt=build_prompt(p.simplified))
        for name, p in pages.items()
    }
    outputs, errors = backend.process(inputs)

    assert set(errors) == set(pages) - set(ours_sent) and errors, "the same pages overflow"
    assert backend._llm.prompts == list(ours_sent.values()), "byte-identical prompts, in order"
    ours_regex = re.compile(answer_regex())
    for (name, page), regex in zip(
        [(n, p) for n, p in pages.items() if n in ours_sent], backend._llm.regexes, strict=True
    ):
        answer = outputs[name].response
        assert re.fullmatch(regex, answer) and ours_regex.fullmatch(answer), name
        assert page_labels(answer, page.item_ids) == {i: "main" for i in page.item_ids if i is not None}


RESPONSES = [
    "<answer>1main2other3main</answer>",
    "1other2main",
    "<answer>\n1main 2other\n</answer>",
    '{"1": "main", "2": "other"}',
    '```json\n{"1": "main", "2": "other"}\n```',
    '{"1": "main", "2": "other", "3": "ma',
    "1main1other",
    "no labels at all",
    "{ broken",
]


@pytest.mark.parametrize("response", RESPONSES)
def test_answers_are_read_as_the_package_reads_them(monkeypatch: pytest.MonkeyPatch, response: str) -> None:
    parse = reference_module(monkeypatch, "mineru_html.process.parse_result").parse_llm_response
    try:
        expected: dict[str, str] | None = parse(response)
    except Exception:
        expected = None
    try:
        ours: dict[str, str] | None = parse_response(response)
    except DecoderParseError:
        ours = None
    assert ours == expected
