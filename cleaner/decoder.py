"""Dripper (MinerU-HTML) as a labeller: its simplification, prompt, chat template, constraint and parser.

Reproduced from mineru-html 1.1.2's default path (`MinerUHTML`: vLLM, prompt "short_compact",
answers "compact") and checked against the package (tests/test_decoder_parity.py):
- the page is simplified by MinerU's rules (cleaner.mineru) and put into the short compact prompt;
- the prompt goes through the tokenizer's chat template twice, as the package's vLLM path does: first
  as the lone user message (`InferenceBackend.process`), then inside a system + user conversation
  with the generation prompt (`VLLMInferenceBackend.generate`);
- a page whose templated prompt plus a dummy answer overflows the context is not sent;
- the answer is parsed by the package's rules (`parse_llm_response`).
The package constrains each page with its own regex listing every item id; here one regex per label
alphabet (`answer_regex`) admits any id sequence, so vLLM compiles it once and reuses it for every
page, and the parser then requires exactly the page's ids (else the page goes to the fallback).
Pages the model cannot label are cleaned by trafilatura, as the package's default fallback does.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from cleaner.base import Cleaner
from cleaner.item_labeller import ItemLabellerCleaner, ItemPage, Labels
from cleaner.labeller import Labeller, NoLabels
from cleaner.mineru import MAIN, OTHER
from cleaner.model_source import ModelSource

DEFAULT_MODEL = "opendatalab/MinerU-HTML-v1.1-hunyuan0.5B-compact"
LOGGER = logging.getLogger(__name__)
MODEL_ENV = "HOSTCRAWL_DECODER_MODEL"
REVISION_ENV = "HOSTCRAWL_DECODER_REVISION"
# Context of the served model; a templated prompt plus a dummy answer must fit, else the fallback.
MAX_MODEL_TOKENS = 32_768
# The package's generation cap; the constraint ends the answer at </answer> long before.
MAX_ANSWER_TOKENS = 16 * 1024
LABELS = (MAIN, OTHER)
SYSTEM_PROMPT = "You are a helpful assistant."
ITEM_ID_IN_PROMPT = re.compile(r'\s_item_id="(\d+)"')
COMPACT_PAIR = re.compile(r"(\d+)(main|other)")
# mineru-html's "short_compact" prompt, verbatim.
SHORT_COMPACT_PROMPT = """As an HTML expert, classify elements with "_item_id" as "main" or "other", keeping only the main content and removing nav, metadata, etc.
Guidelines:
"Main": Includes primary content like article text, images in the article, original posts in forums, Q&A questions, and answers.
"Other": Includes navigation, metadata, ads, user info, and related content (e.g., sidebars, timestamps, suggested articles).
Output Format:
Return each _item_id and its corresponding category in the following format:
{{_item_id}}{{category}}{{_item_id}}{{category}}...
Here, {{_item_id}} may be 1, 2, 3..., and {{category}} is either "main" or "other", as shown in the example below:
"1main2other3other4main"
Input HTML:
{html_str}"""  # noqa: E501


class DecoderParseError(ValueError):
    """The model's answer cannot be read, or does not label exactly the page's blocks."""


class Engine(Protocol):
    """Generates one constrained answer per prompt; None where generation failed."""

    tokenizer: Any

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:
        """Answers in prompt order."""
        ...


def build_prompt(simplified_html: str) -> str:
    """The package's short compact prompt around the simplified page."""
    return SHORT_COMPACT_PROMPT.format(html_str=simplified_html)


def chat_prompt(tokenizer: Any, prompt: str) -> tuple[str, str]:
    """(the user-turn text the length check sees, the text sent to the model), as the package builds them."""
    user = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, enable_thinking=False
    )
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    sent = tokenizer.apply_chat_template(
        messages, tokenize=False, enable_thinking=False, add_generation_prompt=True
    )
    return user, sent


def prompt_item_ids(text: str) -> list[int]:
    """Item ids in a prompt, in order (the package's `get_all_item_ids`)."""
    return [int(m) for m in ITEM_ID_IN_PROMPT.findall(text)]


def dummy_answer(item_ids: Sequence[int]) -> str:
    """The longest plausible compact answer, for the package's length check."""
    return "".join(f"{i}other" for i in item_ids)


def fits(tokenizer: Any, user: str, max_tokens: int = MAX_MODEL_TOKENS, sent: str | None = None) -> bool:
    """The package's check: templated prompt + blank line + dummy answer within the context. The text
    sent wraps `user` once more (system turn, generation prompt), so with `sent` that must fit too: the
    package's check alone lets through pages a few tokens too long, whose error cost the whole batch."""
    answer = dummy_answer(prompt_item_ids(user))
    if len(tokenizer.encode(user + "\n\n" + answer)) > max_tokens:
        return False
    return sent is None or len(tokenizer.encode(sent + answer)) <= max_tokens


@functools.cache
def answer_regex(labels: tuple[str, ...] = LABELS) -> str:
    """One constraint per label alphabet: `<answer>`, then id+label pairs, then `</answer>`."""
    choice = "|".join(re.escape(label) for label in labels)
    return rf"<answer>\s*(?:[1-9][0-9]*(?:{choice}))+\s*</answer>"


def parse_response(response: str) -> dict[str, str]:
    """The package's `parse_llm_response`: a JSON object if the answer has braces, else id+label pairs."""
    first = response.find("{")
    if first == -1:
        pairs = COMPACT_PAIR.findall(response)
        if not pairs:
            raise DecoderParseError(f"not a valid answer: {response[:80]!r}")
        return dict(pairs)
    last = response.rfind("}")
    body = response[first:] if last == -1 else response[first : last + 1]
    try:
        return dict(json.loads(body))
    except Exception:
        pass
    for end in range(len(body), 1, -1):  # the longest prefix that closes into a JSON object
        try:
            return dict(json.loads(body[:end] + "}"))
        except Exception:
            continue
    raise DecoderParseError(f"cannot parse the JSON answer: {response[:80]!r}")


def page_labels(response: str, item_ids: Sequence[str | None]) -> Labels:
    """The answer's labels, which must cover exactly the page's item ids with known labels."""
    labels = {str(k): str(v) for k, v in parse_response(response).items()}
    wanted = {i for i in item_ids if i is not None}
    if set(labels) != wanted or not set(labels.values()) <= set(LABELS):
        raise DecoderParseError(f"the answer labels {len(labels)} ids, the page has {len(wanted)}")
    return labels


def regex_sampling_params(regex: str, max_tokens: int) -> Any:
    """Greedy decoding constrained to `regex`, in the API of the installed vLLM (the package's settings)."""
    from vllm import SamplingParams

    sampling = {"temperature": 0.0, "top_k": 1, "top_p": 0.95, "max_tokens": max_tokens}
    try:  # vLLM 0.11 on; 0.12 removed the guided_decoding field
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:  # vLLM 0.10
        from vllm.sampling_params import GuidedDecodingParams

        return SamplingParams(guided_decoding=GuidedDecodingParams(regex=regex), **sampling)
    return SamplingParams(structured_outputs=StructuredOutputsParams(regex=regex), **sampling)


class VllmEngine:
    """vLLM offline engine with regex-constrained decoding (the `vllm` extra)."""

    def __init__(self, source: ModelSource, **engine_args: Any) -> None:
        try:
            from transformers import AutoTokenizer
            from vllm import LLM
        except ImportError as exc:  # pragma: no cover - needs the vllm extra and a GPU
            raise ImportError("the decoder labeller needs vLLM: pip install 'hostcrawl[vllm]'") from exc
        kwargs = source.load_kwargs()
        self.tokenizer = AutoTokenizer.from_pretrained(source.model, **kwargs)
        self.llm = LLM(model=source.model, max_model_len=MAX_MODEL_TOKENS, **kwargs, **engine_args)

    def generate(
        self, prompts: Sequence[str], regexes: Sequence[str], max_tokens: Sequence[int]
    ) -> list[str | None]:  # pragma: no cover - needs a GPU
        params = [regex_sampling_params(r, m) for r, m in zip(regexes, max_tokens, strict=True)]
        outputs = self.llm.generate(list(prompts), params)
        return [o.outputs[0].text if o.outputs else None for o in outputs]


class DecoderLabeller(Labeller[ItemPage, Labels | NoLabels]):
    """Labels the pages that fit the context with the decoder; NoLabels(reason) for the rest (the cleaner
    falls back). A generation error costs only the pages it fails on: the batch is retried page by page."""

    name = "decoder"

    def __init__(self, engine: Engine, max_model_tokens: int = MAX_MODEL_TOKENS) -> None:
        self.engine = engine
        self.max_model_tokens = max_model_tokens
        self.counts: dict[str, int] = {}

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def label(self, pages: Sequence[ItemPage]) -> list[Labels | NoLabels]:
        out: list[Labels | NoLabels] = [NoLabels("overflow")] * len(pages)
        todo: list[int] = []
        prompts: list[str] = []
        tokenizer = self.engine.tokenizer
        for i, page in enumerate(pages):
            user, sent = chat_prompt(tokenizer, build_prompt(page.simplified))
            if fits(tokenizer, user, self.max_model_tokens, sent):
                todo.append(i)
                prompts.append(sent)
        answers = self._generate(prompts) if prompts else []
        for _ in range(len(pages) - len(todo)):  # counted once the batch went through (it may be retried)
            self._count("decoder/fallback/overflow")
        for i, answer in zip(todo, answers, strict=True):
            if isinstance(answer, NoLabels):
                out[i] = answer
                self._count(f"decoder/fallback/{answer.reason}")
                continue
            try:
                out[i] = page_labels(answer, pages[i].item_ids)
                self._count("decoder/labelled")
            except DecoderParseError:
                out[i] = NoLabels("parse")
                self._count("decoder/fallback/parse")
        return out

    def _generate(self, prompts: list[str]) -> list[str | NoLabels]:
        """One call for the batch. If it raises for several pages the error goes up, and the cleaner labels
        them one by one (LabellerCleaner.label_each); for one page it falls back (engine_error)."""
        regex = answer_regex()
        try:
            answers = self.engine.generate(
                prompts, [regex] * len(prompts), [MAX_ANSWER_TOKENS] * len(prompts)
            )
        except Exception as exc:
            if len(prompts) > 1:
                raise
            LOGGER.warning("decoder: generation failed (%r); the page goes to the fallback", exc)
            return [NoLabels("engine_error")]
        return [NoLabels("no_answer") if a is None else a for a in answers]


class DecoderCleaner(ItemLabellerCleaner):
    """`decoder_v2`: Dripper from $HOSTCRAWL_DECODER_MODEL (a path or hub id) on vLLM, trafilatura fallback.

    $HOSTCRAWL_DECODER_REVISION pins a hub commit; $HOSTCRAWL_TRUST_REMOTE_CODE=1 (with a pinned
    commit) lets the repository's own code run.
    """

    name = "decoder_v2"

    def __init__(self, engine: Engine | None = None, fallback: Cleaner | None = None) -> None:
        self._engine = engine
        self._fallback = fallback
        self._labeller: DecoderLabeller | None = None

    def labeller(self) -> DecoderLabeller:
        if self._labeller is None:
            engine = self._engine or VllmEngine(ModelSource.from_env(MODEL_ENV, REVISION_ENV, DEFAULT_MODEL))
            self._labeller = DecoderLabeller(engine)
        return self._labeller

    def fallback_cleaner(self) -> Cleaner:
        if self._fallback is None:
            from cleaner.registry import get_cleaner

            self._fallback = get_cleaner("trafilatura_v1")
        return self._fallback
