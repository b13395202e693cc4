"""Dripper-style decoder labeller: a small LLM served by vLLM emits `1main2other...` under a regex."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from cleaner.heuristic_labeller import HeuristicLabeller
from cleaner.labeller import BlockLabeller, LabellerCleaner
from cleaner.simplify import SimplePage

DEFAULT_MODEL = "opendatalab/MinerU-HTML-v1.1-hunyuan0.5B-compact"
MODEL_ENV = "HOSTCRAWL_DECODER_MODEL"
# Context of the served model; a prompt plus its answer must fit, else the page goes to the fallback.
MAX_MODEL_TOKENS = 32_768
# Rough characters per token for sizing prompts before tokenizing (HTML-ish English text).
CHARS_PER_TOKEN = 3.5
# Answer tokens per block: the id digits, the label word, slack.
ANSWER_TOKENS_PER_BLOCK = 4
# Characters of each block shown to the model; the label depends on the start and the markup.
BLOCK_PREVIEW_CHARS = 600
LABELS = ("main", "other")
PAIR = re.compile(r"(\d+)(main|other)")
INSTRUCTION = (
    "Below is a web page split into numbered blocks. Label every block as main (the page's main "
    "content) or other (navigation, ads, footers, related links, boilerplate). Answer with each "
    "block number followed by its label and nothing else, e.g. 1other2main3main.\n\n"
)


class DecoderParseError(ValueError):
    """The model's answer does not label every block exactly once."""


class Engine(Protocol):
    """Generates one constrained answer per prompt; None where generation failed."""

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:
        """Answers in prompt order."""
        ...


def build_prompt(page: SimplePage) -> str:
    """The simplified page with 1-based block ids, as the instruction-tuned model expects."""
    lines = [INSTRUCTION]
    for block in page.blocks:
        text = " ".join(block.text.split())[:BLOCK_PREVIEW_CHARS]
        lines.append(f'<{block.tag} _item_id="{block.id + 1}">{text}</{block.tag}>')
    return "\n".join(lines)


def label_regex(n_blocks: int) -> str:
    """A regex admitting exactly one label per block id, in order."""
    choice = "(" + "|".join(LABELS) + ")"
    return "".join(f"{i}{choice}" for i in range(1, n_blocks + 1))


def parse_labels(answer: str, n_blocks: int) -> np.ndarray:
    """`1main2other...` -> 1.0/0.0 per block; raises DecoderParseError unless each id appears once."""
    labels = np.full(n_blocks, np.nan, dtype=np.float32)
    consumed = 0
    for match in PAIR.finditer(answer):
        if match.start() != consumed:
            raise DecoderParseError(
                f"unexpected text at offset {consumed}: {answer[consumed : consumed + 20]!r}"
            )
        consumed = match.end()
        block_id = int(match.group(1))
        if not 1 <= block_id <= n_blocks or not np.isnan(labels[block_id - 1]):
            raise DecoderParseError(f"block id {block_id} out of range or repeated (1..{n_blocks})")
        labels[block_id - 1] = 1.0 if match.group(2) == "main" else 0.0
    if answer[consumed:].strip():
        raise DecoderParseError(f"unexpected text at offset {consumed}: {answer[consumed : consumed + 20]!r}")
    missing = int(np.isnan(labels).sum())
    if missing:
        raise DecoderParseError(f"{missing} of {n_blocks} blocks have no label")
    return labels


def fits(prompt: str, n_blocks: int, max_tokens: int = MAX_MODEL_TOKENS) -> bool:
    """Whether prompt and answer fit the model's context (estimated without a tokenizer)."""
    return len(prompt) / CHARS_PER_TOKEN + n_blocks * ANSWER_TOKENS_PER_BLOCK <= max_tokens


def regex_sampling_params(regex: str, max_tokens: int) -> Any:
    """Greedy decoding constrained to `regex`, in the API of the installed vLLM."""
    from vllm import SamplingParams

    try:  # vLLM 0.11 on; 0.12 removed the guided_decoding field
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:  # vLLM 0.10
        from vllm.sampling_params import GuidedDecodingParams

        guided = GuidedDecodingParams(regex=regex)
        return SamplingParams(temperature=0.0, max_tokens=max_tokens, guided_decoding=guided)
    constraint = StructuredOutputsParams(regex=regex)
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, structured_outputs=constraint)


class VllmEngine:
    """vLLM offline engine with regex-constrained decoding (the `vllm` extra)."""

    def __init__(self, model: str, **engine_args: Any) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - needs the vllm extra and a GPU
            raise ImportError("the decoder labeller needs vLLM: pip install 'hostcrawl[vllm]'") from exc
        self.llm = LLM(model=model, max_model_len=MAX_MODEL_TOKENS, **engine_args)

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:  # pragma: no cover - needs a GPU
        params = [regex_sampling_params(r, m) for r, m in zip(regexes, max_tokens, strict=True)]
        outputs = self.llm.generate(list(prompts), params)
        return [o.outputs[0].text if o.outputs else None for o in outputs]


class DecoderLabeller(BlockLabeller):
    """Labels pages that fit the context with the decoder, every other page with the heuristic fallback."""

    name = "decoder"

    def __init__(self, engine: Engine, fallback: BlockLabeller | None = None) -> None:
        self.engine = engine
        self.fallback = fallback or HeuristicLabeller("trafilatura_v1")
        self.counts: dict[str, int] = {}

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(pages)
        todo: list[int] = []
        prompts: list[str] = []
        for i, page in enumerate(pages):
            prompt = build_prompt(page)
            if fits(prompt, len(page.blocks)):
                todo.append(i)
                prompts.append(prompt)
            else:
                self._count("decoder/fallback/overflow")
        if todo:
            regexes = [label_regex(len(pages[i].blocks)) for i in todo]
            budgets = [len(pages[i].blocks) * ANSWER_TOKENS_PER_BLOCK for i in todo]
            try:
                answers = self.engine.generate(prompts, regexes, budgets)
            except Exception:  # an engine failure costs the batch its model labels, not its pages
                self._count("decoder/fallback/engine_error")
                answers = [None] * len(todo)
            for i, answer in zip(todo, answers, strict=True):
                try:
                    if answer is None:
                        raise DecoderParseError("no answer")
                    out[i] = parse_labels(answer, len(pages[i].blocks))
                    self._count("decoder/labelled")
                except DecoderParseError:
                    self._count("decoder/fallback/parse")
        missing = [i for i, labels in enumerate(out) if labels is None]
        if missing:
            for i, labels in zip(missing, self.fallback.label([pages[i] for i in missing]), strict=True):
                out[i] = labels
        return [labels if labels is not None else np.zeros(0, dtype=np.float32) for labels in out]


class DecoderCleaner(LabellerCleaner):
    """`decoder_v1`: the model from $HOSTCRAWL_DECODER_MODEL (a path or hub id), served by vLLM."""

    name = "decoder_v1"

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine
        self._labeller: DecoderLabeller | None = None

    def labeller(self) -> DecoderLabeller:
        if self._labeller is None:
            engine = self._engine or VllmEngine(os.environ.get(MODEL_ENV, DEFAULT_MODEL))
            self._labeller = DecoderLabeller(engine)
        return self._labeller
