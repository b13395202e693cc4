"""Pulpie's encoder labeller: MinerU-format blocks, `[BOS] block <|sep|> block <|sep|> ... [EOS]`, one pass.

This is what Pulpie's Orange models (EuroBERT token classifiers) were trained on, reproduced from
pulpie 0.0.2 and checked against it (tests/test_encoder_parity.py): each `_item_id` block of the
MinerU-simplified page (cleaner.mineru) is tokenized alone without special tokens, followed by the
`<|sep|>` token Pulpie adds to the tokenizer, and blocks are packed in order into chunks of at most
8,192 tokens between BOS and EOS; a block's label is the argmax of the logits at its separator
(index 1 = main). The loader applies Pulpie's post-load fixes: the embeddings grow to the tokenizer
with `<|sep|>`, and EuroBERT's rotary frequencies are recomputed.

torch and transformers are imported only inside functions (the `gpu` extra). Tokenizing and packing
(`BlockPacker`) need no torch, so they can run in CPU worker processes while one process drives the
GPU (`label_chunks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cleaner.item_labeller import ItemLabellerCleaner, ItemPage, Labels
from cleaner.labeller import Labeller, NoLabels
from cleaner.mineru import MAIN, OTHER
from cleaner.model_source import ModelSource

DEFAULT_MODEL = "feyninc/pulpie-orange-small"
MODEL_ENV = "HOSTCRAWL_ENCODER_MODEL"
REVISION_ENV = "HOSTCRAWL_ENCODER_REVISION"
SEP_TOKEN = "<|sep|>"
# Longest chunk the published models were trained on, BOS, separators and EOS included.
MAX_CHUNK_TOKENS = 8_192
# Tokens per forward batch (padded length x rows); bounds GPU memory whatever the page sizes.
BATCH_TOKENS = 65_536
# Logit index of "main content" in Pulpie's two-label head.
MAIN_LABEL = 1
# EuroBERT's rotary base when the config names none.
ROPE_THETA = 250_000.0
# Batch widths are rounded up to a multiple of this (tensor-core and attention-kernel friendly shapes).
PAD_MULTIPLE = 8
GPU_EXTRA_HINT = "the encoder labeller needs torch and transformers: pip install 'hostcrawl[gpu]'"


@dataclass(slots=True)
class Chunk:
    """Token ids of consecutive blocks of one page; `seps` are the separator positions, one per block."""

    page: int
    ids: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    seps: list[int] = field(default_factory=list)


def pack_chunks(
    page: int,
    block_ids: Sequence[Sequence[int]],
    sep_id: int,
    bos_id: int | None,
    eos_id: int | None,
    max_tokens: int = MAX_CHUNK_TOKENS,
) -> list[Chunk]:
    """Pulpie's packing: blocks in order, `<|sep|>` after each, BOS/EOS around every chunk.

    A block that does not fit the chunk opens the next one; a block longer than a whole chunk is
    cut to fit it.
    """
    budget = max_tokens - (bos_id is not None) - (eos_id is not None)
    if budget < 2:
        raise ValueError(f"max_tokens {max_tokens} leaves no room for a block and its separator")
    chunks: list[Chunk] = []
    body: list[int] = []
    blocks: list[int] = []
    seps: list[int] = []
    offset = int(bos_id is not None)

    def close() -> None:
        ids = ([bos_id] if bos_id is not None else []) + body + ([eos_id] if eos_id is not None else [])
        chunks.append(Chunk(page, ids, list(blocks), [offset + s for s in seps]))

    for index, tokens in enumerate(block_ids):
        cost = len(tokens) + 1
        piece = list(tokens)
        if len(body) + cost > budget:
            if body:
                close()
            body, blocks, seps = [], [], []
            if cost > budget:
                piece = piece[: budget - 1]
        body.extend(piece)
        seps.append(len(body))
        body.append(sep_id)
        blocks.append(index)
    if body:
        close()
    return chunks


def batches(chunks: Sequence[Chunk], batch_tokens: int) -> list[list[Chunk]]:
    """Group chunks of similar length so that padded rows x length stays under `batch_tokens`."""
    out: list[list[Chunk]] = []
    current: list[Chunk] = []
    for chunk in sorted(chunks, key=lambda c: len(c.ids)):
        if current and len(chunk.ids) * (len(current) + 1) > batch_tokens:
            out.append(current)
            current = []
        current.append(chunk)
    if current:
        out.append(current)
    return out


def scatter(
    chunks: Sequence[Chunk], probs: Sequence[np.ndarray], n_blocks: Sequence[int]
) -> list[np.ndarray]:
    """Per-chunk separator probabilities -> one array per page in block order."""
    out = [np.zeros(n, dtype=np.float32) for n in n_blocks]
    for chunk, p in zip(chunks, probs, strict=True):
        out[chunk.page][chunk.blocks] = p
    return out


def block_labels(item_ids: Sequence[str | None], p_main: np.ndarray) -> Labels:
    """Pulpie's mapping back: a block is main when its main logit wins (P(main) > 0.5)."""
    return {i: MAIN if p > 0.5 else OTHER for i, p in zip(item_ids, p_main, strict=True) if i is not None}


def add_sep_token(tokenizer: Any) -> int:
    """Pulpie's `<|sep|>`: added as a special token unless the tokenizer has it; returns its id."""
    if SEP_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [SEP_TOKEN]})
    return int(tokenizer.convert_tokens_to_ids(SEP_TOKEN))


def fix_rotary_embeddings(model: Any) -> None:
    """Pulpie's post-load fix: recompute EuroBERT's rotary inv_freq (a non-persistent buffer).

    Newer transformers may not restore it from the checkpoint; Pulpie recomputes it from the config
    after every load. Models without EuroBERT's rotary module are left alone.
    """
    import torch

    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rotary is None:
        return
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    base = getattr(config, "rope_theta", None) or (getattr(config, "rope_parameters", None) or {}).get(
        "rope_theta", ROPE_THETA
    )
    device = rotary.inv_freq.device if isinstance(getattr(rotary, "inv_freq", None), torch.Tensor) else None
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    rotary.inv_freq = inv_freq
    rotary.original_inv_freq = inv_freq


class BlockPacker:
    """The tokenizer half of the encoder (no torch): block strings -> chunks, fit for CPU workers."""

    def __init__(self, tokenizer: Any, max_tokens: int = MAX_CHUNK_TOKENS) -> None:
        self.tokenizer = tokenizer
        self.sep_id = add_sep_token(tokenizer)
        self.bos_id: int | None = tokenizer.bos_token_id
        self.eos_id: int | None = tokenizer.eos_token_id
        # Padding sits under a zero attention mask, so any id will do when the tokenizer has none.
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.sep_id)
        self.max_tokens = max_tokens

    @classmethod
    def load(cls, source: ModelSource, max_tokens: int = MAX_CHUNK_TOKENS) -> BlockPacker:
        """The tokenizer of a local model folder or hub id."""
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(GPU_EXTRA_HINT) from exc
        return cls(AutoTokenizer.from_pretrained(source.model, **source.load_kwargs()), max_tokens)

    def pack(self, page: int, blocks: Sequence[str]) -> list[Chunk]:
        """One page's block strings (`_item_id` HTML) -> its chunks (none for a page without blocks)."""
        if not blocks:
            return []
        ids = self.tokenizer(list(blocks), add_special_tokens=False)["input_ids"]
        return pack_chunks(page, ids, self.sep_id, self.bos_id, self.eos_id, self.max_tokens)


class EncoderLabeller(Labeller[ItemPage, Labels | NoLabels]):
    """Pulpie's token classification at each block's separator (local folder or hub id)."""

    name = "encoder"

    def __init__(
        self,
        source: ModelSource | str,
        device: str | None = None,
        max_tokens: int = MAX_CHUNK_TOKENS,
        batch_tokens: int = BATCH_TOKENS,
        attn_implementation: str | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForTokenClassification
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(GPU_EXTRA_HINT) from exc
        source = ModelSource(source) if isinstance(source, str) else source
        self.torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        on_gpu = self.device.type == "cuda"
        self.model: Any = AutoModelForTokenClassification.from_pretrained(
            source.model,
            num_labels=2,
            dtype=torch.bfloat16 if on_gpu else torch.float32,
            attn_implementation=attn_implementation or ("sdpa" if on_gpu else "eager"),
            **source.load_kwargs(),
        ).to(self.device)
        self.model.eval()
        # A chunk longer than the model's positions would crash (BERT) or leave its training range.
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_tokens
        self.packer = BlockPacker.load(source, min(max_tokens, int(limit)))
        if len(self.packer.tokenizer) > self.model.config.vocab_size:
            self.model.resize_token_embeddings(len(self.packer.tokenizer))
        fix_rotary_embeddings(self.model)
        self.batch_tokens = batch_tokens
        self.pin = on_gpu

    def label(self, pages: Sequence[ItemPage]) -> list[Labels | NoLabels]:
        chunks: list[Chunk] = []
        for i, page in enumerate(pages):
            chunks += self.packer.pack(i, page.blocks)
        probs = self.label_chunks(chunks, [len(p.blocks) for p in pages])
        return [block_labels(page.item_ids, p) for page, p in zip(pages, probs, strict=True)]

    def label_chunks(self, chunks: Sequence[Chunk], n_blocks: Sequence[int]) -> list[np.ndarray]:
        """Chunks packed anywhere (`BlockPacker`) -> P(main) per block, one array per page index."""
        probs: dict[int, np.ndarray] = {}
        for batch in batches(chunks, self.batch_tokens):
            for chunk, p in zip(batch, self._forward(batch), strict=True):
                probs[id(chunk)] = p
        return scatter(chunks, [probs[id(c)] for c in chunks], n_blocks)

    def _forward(self, batch: Sequence[Chunk]) -> list[np.ndarray]:
        torch = self.torch
        longest = max(len(c.ids) for c in batch)
        width = max(longest, min(-(-longest // PAD_MULTIPLE) * PAD_MULTIPLE, self.packer.max_tokens))
        ids = np.full((len(batch), width), self.packer.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, chunk in enumerate(batch):
            ids[row, : len(chunk.ids)] = chunk.ids
            mask[row, : len(chunk.ids)] = 1
        ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
        if self.pin:  # pragma: no cover - needs CUDA: pinned pages copy asynchronously
            ids_t, mask_t = ids_t.pin_memory(), mask_t.pin_memory()
        with torch.inference_mode():
            logits = self.model(
                input_ids=ids_t.to(self.device, non_blocking=self.pin),
                attention_mask=mask_t.to(self.device, non_blocking=self.pin),
            ).logits.float()
            main_np = torch.softmax(logits, dim=-1)[..., MAIN_LABEL].cpu().numpy()
        return [main_np[row, chunk.seps] for row, chunk in enumerate(batch)]


class EncoderCleaner(ItemLabellerCleaner):
    """`encoder_v2`: Pulpie's model from $HOSTCRAWL_ENCODER_MODEL (a path or hub id), bf16 on CUDA.

    $HOSTCRAWL_ENCODER_REVISION pins a hub commit; $HOSTCRAWL_TRUST_REMOTE_CODE=1 (with a pinned
    commit) lets the repository's own code run.
    """

    name = "encoder_v2"

    def __init__(self, labeller: EncoderLabeller | None = None) -> None:
        self._labeller = labeller

    def labeller(self) -> EncoderLabeller:
        if self._labeller is None:
            self._labeller = EncoderLabeller(ModelSource.from_env(MODEL_ENV, REVISION_ENV, DEFAULT_MODEL))
        return self._labeller


# Random models of the published shape measure speed when no trained weights are reachable.
# "210m" is EuroBERT-210m's shape (transformers' EuroBertConfig defaults: hidden 768, 12 layers,
# 12 heads, MLP 3,072, vocabulary 128,256, 8,192 positions), the base pulpie-orange-small is distilled on.
RANDOM_SHAPES: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": MAX_CHUNK_TOKENS,
    },
    "210m": {},
}  # fmt: skip
# Llama-3 style special tokens, as EuroBERT's tokenizer has them (Pulpie adds <|sep|> when loading).
BOS, EOS, MASK = "<|begin_of_text|>", "<|end_of_text|>", "<|mask|>"


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on `texts`, with EuroBERT's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [BOS, EOS, MASK]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS, mask_token=MASK
    )


def save_random_encoder(
    out_dir: Path,
    texts: Sequence[str],
    shape: str = "tiny",
    vocab_size: int = 4_096,
    seed: int = 0,
    with_sep: bool = True,
    **dims: int,
) -> Path:
    """Write a randomly initialised EuroBERT token classifier and a tokenizer trained on `texts`.

    As a trained Pulpie checkpoint, the tokenizer has `<|sep|>` and the embeddings cover it unless
    `with_sep` is False (then the loader adds both). `dims` override the shape's config values (e.g.
    max_position_embeddings); the rotary base is EuroBERT's, 250,000.
    """
    import torch
    from transformers import EuroBertConfig, EuroBertForTokenClassification

    if shape not in RANDOM_SHAPES:
        raise ValueError(f"unknown model shape {shape!r}; known: {', '.join(RANDOM_SHAPES)}")
    tokenizer = train_tokenizer(texts, vocab_size)
    if with_sep:
        add_sep_token(tokenizer)
    sizes: dict[str, Any] = dict(RANDOM_SHAPES[shape])
    if shape == "tiny":
        sizes["vocab_size"] = len(tokenizer)
    sizes |= dims | {
        "id2label": {0: "other", 1: "main"},
        "label2id": {"other": 0, "main": 1},
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "mask_token_id": tokenizer.mask_token_id,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
    }
    config = EuroBertConfig(**sizes)
    torch.manual_seed(seed)
    EuroBertForTokenClassification(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
