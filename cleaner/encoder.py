"""Pulpie-style encoder labeller: blocks packed into chunks with a separator after each, one forward pass.

torch and transformers are imported only inside `EncoderLabeller` (the `gpu` extra), so the packing
and mapping code here runs and is tested on any machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
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
MAIN_LABEL = 1


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


class EncoderLabeller(BlockLabeller):
    """Token classification at each block's separator with a transformers model (local path or hub id)."""

    name = "encoder"

    def __init__(self, model: str, device: str | None = None, max_tokens: int = MAX_CHUNK_TOKENS) -> None:
        try:
            import torch
            from transformers import AutoModelForTokenClassification, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(
                "the encoder labeller needs torch and transformers: pip install 'hostcrawl[gpu]'"
            ) from exc
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=True)
        self.model: Any = AutoModelForTokenClassification.from_pretrained(
            model, trust_remote_code=True, torch_dtype=dtype
        ).to(self.device)
        self.model.eval()
        sep = self.tokenizer.sep_token_id
        self.sep_id = int(sep if sep is not None else self.tokenizer.eos_token_id)
        cls = (
            self.tokenizer.cls_token_id
            if self.tokenizer.cls_token_id is not None
            else self.tokenizer.bos_token_id
        )
        self.prefix = [int(cls)] if cls is not None else []
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self.max_tokens = max_tokens

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        chunks: list[Chunk] = []
        for i, page in enumerate(pages):
            texts = [b.text[:MAX_BLOCK_CHARS] for b in page.blocks]
            ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
            chunks += pack_chunks(i, ids, self.sep_id, self.prefix, self.max_tokens)
        probs: dict[int, np.ndarray] = {}
        for batch in batches(chunks, BATCH_TOKENS):
            for chunk, p in zip(batch, self._forward(batch), strict=True):
                probs[id(chunk)] = p
        return scatter(chunks, [probs[id(c)] for c in chunks], [len(p.blocks) for p in pages])

    def _forward(self, batch: Sequence[Chunk]) -> list[np.ndarray]:  # pragma: no cover - needs torch
        torch = self.torch
        width = max(len(c.ids) for c in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, chunk in enumerate(batch):
            ids[row, : len(chunk.ids)] = torch.tensor(chunk.ids)
            mask[row, : len(chunk.ids)] = 1
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            main = torch.softmax(logits.float(), dim=-1)[..., MAIN_LABEL].cpu().numpy()
        return [main[row, chunk.seps] for row, chunk in enumerate(batch)]


class EncoderCleaner(LabellerCleaner):
    """`encoder_v1`: the model from $HOSTCRAWL_ENCODER_MODEL (a path or hub id), bf16 on CUDA."""

    name = "encoder_v1"

    def __init__(self, labeller: EncoderLabeller | None = None) -> None:
        self._labeller = labeller

    def labeller(self) -> EncoderLabeller:
        if self._labeller is None:
            self._labeller = EncoderLabeller(os.environ.get(MODEL_ENV, DEFAULT_MODEL))
        return self._labeller
