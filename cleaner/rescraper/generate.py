"""ReScraper's model call: the Stage 2 system prompt, the chat template with thinking off, and sampling as the
paper's inference (Table 4: temperature 1.0, top-p 1.0, at most 3,072 new tokens, prompts over 29,696 tokens
omitted), through vLLM on a GPU or transformers on a CPU.

The labeller turns each answer into a checked program (program.py) or a reason it has none: `overflow`,
`truncated` (the token limit cut the answer), `engine_error`, or the grammar's reason.
"""

from __future__ import annotations

import functools
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cleaner.labeller import Labeller, NoLabels
from cleaner.model_source import ModelSource
from cleaner.rescraper.page_lines import RenderedPage
from cleaner.rescraper.program import Outcome, outcome

LOGGER = logging.getLogger(__name__)

DEFAULT_MODEL = "cx-cmu/ReScraper"
MODEL_ENV = "HOSTCRAWL_RESCRAPER_MODEL"
REVISION_ENV = "HOSTCRAWL_RESCRAPER_REVISION"
MAX_PROMPT_TOKENS = 29_696
MAX_NEW_TOKENS = 3_072
TEMPERATURE = 1.0
TOP_P = 1.0
PROMPT_FILE = Path(__file__).with_name("system_prompt.txt")


@functools.cache
def system_prompt() -> str:
    """Appendix D.3's Stage 2 prompt, transcribed from the paper (the release's file was not reachable)."""
    return PROMPT_FILE.read_text(encoding="utf-8").strip()


def chat_prompt(tokenizer: Any, page: RenderedPage) -> str:
    """System prompt + the numbered page as the user turn, generation prompt on, thinking off."""
    messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": page.numbered()}]
    return str(
        tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
    )


@dataclass(frozen=True, slots=True)
class Generated:
    text: str
    finished: bool  # False: the answer stopped at the token limit


class Engine(Protocol):
    tokenizer: Any

    def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[Generated]:
        """One sampled answer per prompt, in order."""
        ...


def seed_of(prompt: str) -> int:
    """A page's sampling seed: the same page gets the same answer on every run and worker."""
    return zlib.crc32(prompt.encode("utf-8"))


class TransformersEngine:
    """transformers on the CPU (or one GPU without vLLM): one page at a time, sampled as the paper's vLLM."""

    def __init__(self, source: ModelSource, device: str | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs = source.load_kwargs()
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(source.model, **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(source.model, **kwargs)
        self.model = model.to(self.device).eval()

    def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[Generated]:
        out = []
        eos = self.tokenizer.eos_token_id
        for prompt in prompts:
            ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(self.device)
            self.torch.manual_seed(seed_of(prompt))
            with self.torch.inference_mode():
                tokens = self.model.generate(
                    **ids, do_sample=True, temperature=TEMPERATURE, top_p=TOP_P, top_k=0,
                    max_new_tokens=max_new_tokens, pad_token_id=eos if eos is not None else 0,
                )  # fmt: skip
            new = tokens[0, ids["input_ids"].shape[1] :].tolist()
            finished = len(new) < max_new_tokens or (eos is not None and new[-1] == eos)
            out.append(Generated(str(self.tokenizer.decode(new, skip_special_tokens=True)), finished))
        return out


class VllmEngine:  # pragma: no cover - needs the vllm extra and a GPU (benchmarks/gpu_check.sh)
    """vLLM's offline engine: every page of a batch in one continuous-batching call."""

    def __init__(self, source: ModelSource, **engine_args: Any) -> None:
        from vllm import LLM

        self.llm = LLM(model=source.model, max_model_len=MAX_PROMPT_TOKENS + MAX_NEW_TOKENS,
                       **source.load_kwargs(), **engine_args)  # fmt: skip
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts: Sequence[str], max_new_tokens: int) -> list[Generated]:
        from vllm import SamplingParams

        params = [
            SamplingParams(temperature=TEMPERATURE, top_p=TOP_P, max_tokens=max_new_tokens, seed=seed_of(p))
            for p in prompts
        ]
        outputs = self.llm.generate(list(prompts), params)
        return [Generated(o.outputs[0].text, o.outputs[0].finish_reason != "length") for o in outputs]


def default_engine() -> Engine:
    """vLLM when it and a GPU are here, else transformers."""
    source = ModelSource.from_env(MODEL_ENV, REVISION_ENV, DEFAULT_MODEL)
    try:
        import torch
        import vllm  # noqa: F401

        if torch.cuda.is_available():  # pragma: no cover - needs a GPU
            return VllmEngine(source)
    except ImportError:
        pass
    return TransformersEngine(source)


class RescraperLabeller(Labeller[RenderedPage, Outcome | NoLabels]):
    """Prompts that fit -> one generate call for the batch -> each answer parsed and applied to its page."""

    name = "rescraper"

    def __init__(
        self, engine: Engine, max_prompt_tokens: int = MAX_PROMPT_TOKENS, max_new_tokens: int = MAX_NEW_TOKENS
    ) -> None:
        self.engine = engine
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens

    def label(self, pages: Sequence[RenderedPage]) -> list[Outcome | NoLabels]:
        out: list[Outcome | NoLabels] = [NoLabels("overflow")] * len(pages)
        todo, prompts = [], []
        for i, page in enumerate(pages):
            prompt = chat_prompt(self.engine.tokenizer, page)
            if len(self.engine.tokenizer.encode(prompt)) <= self.max_prompt_tokens:
                todo.append(i)
                prompts.append(prompt)
        for i, answer in zip(todo, self._generate(prompts), strict=True):
            out[i] = (
                answer
                if isinstance(answer, NoLabels)
                else outcome(answer.text, answer.finished, pages[i].lines)
            )
        return out

    def _generate(self, prompts: list[str]) -> list[Generated | NoLabels]:
        """One call for the batch. If it raises for several pages the error goes up, and the cleaner labels
        them one by one (LabellerCleaner.label_each); one page is then skipped (engine_error)."""
        if not prompts:
            return []
        try:
            return list(self.engine.generate(prompts, self.max_new_tokens))
        except Exception as exc:
            if len(prompts) > 1:
                raise
            LOGGER.warning("rescraper: generation failed (%r); the page is skipped", exc)
            return [NoLabels("engine_error")]
