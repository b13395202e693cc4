"""Pulpie-style encoder labeller: blocks packed into chunks with a separator after each, one forward pass.

torch and transformers are imported only inside functions (the `gpu` extra), so the packing and
mapping code here runs and is tested on any machine. Tokenizing and packing (`BlockPacker`) need no
torch, so they can run in CPU worker processes while one process drives the GPU (`label_chunks`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cleaner.labeller import BlockLabeller, LabellerCleaner
from cleaner.simplify import SimplePage

DEFAULT_MODEL = "feyninc/pulpie-orange-small"
MODEL_ENV = "HOSTCRAWL_ENCODER_MODEL"
# Longest chunk the published models were trained on, separators and prefix included.
MAX_CHUNK_TOKENS = 8_192
# Tokens per forward batch (padded length x rows); bounds GPU memory whatever the page sizes.
BATCH_TOKENS = 65_536
# Characters of a block sent to the tokenizer; a block's label is decided by its start.
MAX_BLOCK_CHARS = 4_000
# Logit index of "main content" when the model's label names do not say which one it is.
MAIN_LABEL = 1
# Batch widths are rounded up to a multiple of this (tensor-core and attention-kernel friendly shapes).
PAD_MULTIPLE = 8
MAIN_LABEL_NAMES = frozenset({"main", "content", "main_content", "maincontent", "keep"})
GPU_EXTRA_HINT = "the encoder labeller needs torch and transformers: pip install 'hostcrawl[gpu]'"


@dataclass(slots=True)
class Chunk:
    """Token ids of consecutive blocks of one page; `seps` are the separator positions, one per block."""

    page: int
    ids: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    seps: list[int] = field(default_factory=list)


def pack_chunks(
    page: int, block_ids: Sequence[Sequence[int]], sep_id: int, prefix: Sequence[int], max_tokens: int
) -> list[Chunk]:
    """Pack a page's tokenized blocks in order; a block too long for a chunk is cut to fit."""
    room = max_tokens - len(prefix) - 1
    if room < 1:
        raise ValueError(f"max_tokens {max_tokens} leaves no room after a {len(prefix)}-token prefix")
    chunks: list[Chunk] = []
    current = Chunk(page, list(prefix))
    for index, ids in enumerate(block_ids):
        piece = list(ids[:room])
        if current.blocks and len(current.ids) + len(piece) + 1 > max_tokens:
            chunks.append(current)
            current = Chunk(page, list(prefix))
        current.ids.extend(piece)
        current.ids.append(sep_id)
        current.seps.append(len(current.ids) - 1)
        current.blocks.append(index)
    if current.blocks:
        chunks.append(current)
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


def main_label(id2label: Mapping[Any, str] | None) -> int:
    """The logit index of main content: the one the config names so, else `MAIN_LABEL`."""
    for index, name in (id2label or {}).items():
        if str(name).strip().lower().replace("-", "_") in MAIN_LABEL_NAMES:
            return int(index)
    return MAIN_LABEL


class BlockPacker:
    """The tokenizer half of the encoder (no torch): block texts -> chunks, fit for CPU worker processes."""

    def __init__(self, tokenizer: Any, max_tokens: int = MAX_CHUNK_TOKENS) -> None:
        self.tokenizer = tokenizer
        name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
        sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if sep is None:
            raise ValueError(f"tokenizer {name!r} has neither a sep nor an eos token to end each block with")
        self.sep_id = int(sep)
        cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.prefix = [int(cls)] if cls is not None else []
        # Padding sits under a zero attention mask, so any id will do when the tokenizer has none.
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.sep_id)
        self.max_tokens = max_tokens

    @classmethod
    def load(
        cls, model: str, max_tokens: int = MAX_CHUNK_TOKENS, trust_remote_code: bool = True
    ) -> BlockPacker:
        """The tokenizer of a local model folder or hub id."""
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(GPU_EXTRA_HINT) from exc
        return cls(AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code), max_tokens)

    def pack(self, page: int, texts: Sequence[str]) -> list[Chunk]:
        """One page's block texts -> its chunks (none for a page without blocks)."""
        if not texts:
            return []
        cut = [t[:MAX_BLOCK_CHARS] for t in texts]
        ids = self.tokenizer(cut, add_special_tokens=False)["input_ids"]
        return pack_chunks(page, ids, self.sep_id, self.prefix, self.max_tokens)


class EncoderLabeller(BlockLabeller):
    """Token classification at each block's separator with a transformers model (local path or hub id).

    `trust_remote_code` runs the model repository's own Python: the published Pulpie models need it,
    a model folder of an architecture transformers ships (EuroBERT, ModernBERT, BERT) does not.
    """

    name = "encoder"

    def __init__(
        self,
        model: str,
        device: str | None = None,
        max_tokens: int = MAX_CHUNK_TOKENS,
        batch_tokens: int = BATCH_TOKENS,
        trust_remote_code: bool = True,
        attn_implementation: str | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForTokenClassification
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(GPU_EXTRA_HINT) from exc
        self.torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        on_gpu = self.device.type == "cuda"
        self.model: Any = AutoModelForTokenClassification.from_pretrained(
            model,
            trust_remote_code=trust_remote_code,
            dtype=torch.bfloat16 if on_gpu else torch.float32,
            attn_implementation=attn_implementation,
        ).to(self.device)
        self.model.eval()
        # A chunk longer than the model's positions would crash (BERT) or leave its training range.
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_tokens
        self.packer = BlockPacker.load(model, min(max_tokens, int(limit)), trust_remote_code)
        self.main_index = main_label(getattr(self.model.config, "id2label", None))
        self.batch_tokens = batch_tokens
        self.pin = on_gpu

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        chunks: list[Chunk] = []
        for i, page in enumerate(pages):
            chunks += self.packer.pack(i, [b.text for b in page.blocks])
        return self.label_chunks(chunks, [len(p.blocks) for p in pages])

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
            main_np = torch.softmax(logits, dim=-1)[..., self.main_index].cpu().numpy()
        return [main_np[row, chunk.seps] for row, chunk in enumerate(batch)]


class EncoderCleaner(LabellerCleaner):
    """`encoder_v1`: the model from $HOSTCRAWL_ENCODER_MODEL (a path or hub id), bf16 on CUDA."""

    name = "encoder_v1"

    def __init__(self, labeller: EncoderLabeller | None = None) -> None:
        self._labeller = labeller

    def labeller(self) -> EncoderLabeller:
        if self._labeller is None:
            self._labeller = EncoderLabeller(os.environ.get(MODEL_ENV, DEFAULT_MODEL))
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
# Llama-3 style special tokens, as EuroBERT's tokenizer has them (no sep/cls: eos ends each block).
BOS, EOS, MASK = "<|begin_of_text|>", "<|end_of_text|>", "<|mask|>"


def train_tokenizer(texts: Sequence[str], vocab_size: int, sep_cls: bool = False) -> Any:
    """A byte-level BPE tokenizer trained on `texts`, with EuroBERT's specials (and [SEP]/[CLS] if asked)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [BOS, EOS, MASK] + (["[SEP]", "[CLS]"] if sep_cls else [])
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
    extra = {"sep_token": "[SEP]", "cls_token": "[CLS]"} if sep_cls else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS, mask_token=MASK, **extra
    )


def save_random_encoder(
    out_dir: Path,
    texts: Sequence[str],
    shape: str = "tiny",
    vocab_size: int = 4_096,
    seed: int = 0,
    sep_cls: bool = False,
    **dims: int,
) -> Path:
    """Write a randomly initialised EuroBERT token classifier and a tokenizer trained on `texts`.

    `dims` override the shape's config values (e.g. max_position_embeddings).
    """
    import torch
    from transformers import EuroBertConfig, EuroBertForTokenClassification

    if shape not in RANDOM_SHAPES:
        raise ValueError(f"unknown model shape {shape!r}; known: {', '.join(RANDOM_SHAPES)}")
    tokenizer = train_tokenizer(texts, vocab_size, sep_cls)
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
    }
    config = EuroBertConfig(**sizes)
    torch.manual_seed(seed)
    EuroBertForTokenClassification(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
