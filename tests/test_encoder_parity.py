"""encoder_v2 against pulpie 0.0.2 on the real WCXB dev pages: the same token ids, the same labels.

The tokenizer and model are tiny and built here (no hub): a byte-level BPE with EuroBERT's special
tokens and Pulpie's `<|sep|>`, and a randomly initialised EuroBERT token classifier. What is compared
is everything between the HTML and the labels: simplification, blocks, tokenization, chunk layout
(`[BOS] block <|sep|> ... [EOS]`, 8,192 tokens or a smaller limit), separator positions, the
post-load fixes and the mapping of logits back to `_item_id` labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cleaner.encoder import (
    MAX_CHUNK_TOKENS,
    SEP_TOKEN,
    BlockPacker,
    EncoderLabeller,
    block_labels,
    save_random_encoder,
)
from cleaner.item_labeller import item_page
from tests.reference_packages import reference_module, wcxb_pages
from tests.test_cleaner_encoder import require_encoder_stack

# A chunk limit small enough that most pages span several chunks.
SMALL_CHUNK = 512
LIMITS = (MAX_CHUNK_TOKENS, SMALL_CHUNK)
# Labels are compared where the model is not on the fence (batched and lone passes differ by ~1e-6).
TIE = 1e-4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_encoder_stack()
    corpus = [item_page(html).simplified for _, html in wcxb_pages(stride=97)]
    return save_random_encoder(tmp_path_factory.mktemp("tiny-pulpie"), corpus, vocab_size=2_000)


def pulpie_tokenizer(path: Path) -> tuple[Any, int]:
    """The tokenizer as pulpie's loader prepares it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if SEP_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [SEP_TOKEN]})
    return tokenizer, tokenizer.convert_tokens_to_ids(SEP_TOKEN)


def test_token_ids_of_every_chunk_match_pulpie(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoTokenizer

    ref_simplify = reference_module(monkeypatch, "pulpie.simplify").simplify
    chunker = reference_module(monkeypatch, "pulpie.chunker")
    theirs_tok, sep = pulpie_tokenizer(tiny_model)
    packers = {limit: BlockPacker(AutoTokenizer.from_pretrained(tiny_model), limit) for limit in LIMITS}
    assert all(packer.sep_id == sep for packer in packers.values())
    differ: list[str] = []
    pages = wcxb_pages()[::2]
    n_chunks = 0
    for name, html in pages:
        blocks = item_page(html).blocks
        token_ids = chunker.tokenize_blocks(chunker.extract_blocks(ref_simplify(html)[0]), theirs_tok)
        for limit, packer in packers.items():
            ours = [(c.ids, c.blocks) for c in packer.pack(0, blocks)]
            theirs = chunker.pack_chunks(
                token_ids,
                max_tokens=limit,
                sep_token_id=sep,
                bos_token_id=theirs_tok.bos_token_id,
                eos_token_id=theirs_tok.eos_token_id,
            )
            n_chunks += len(theirs)
            if ours != theirs:
                differ.append(f"{name}@{limit}")
    assert n_chunks > 2 * len(pages)  # the small limit splits pages: the packing rule is exercised
    assert not differ, f"{len(differ)} of {2 * len(pages)} page packings differ from pulpie: {differ[:10]}"


def test_labels_match_pulpies_extractor(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    extractor = reference_module(monkeypatch, "pulpie.extractor")
    ref_simplify = reference_module(monkeypatch, "pulpie.simplify").simplify
    theirs = extractor.Extractor(model=str(tiny_model), device="cpu", max_tokens=SMALL_CHUNK)
    ours = EncoderLabeller(str(tiny_model), device="cpu", max_tokens=SMALL_CHUNK)
    torch.testing.assert_close(ours.model.model.rotary_emb.inv_freq, theirs.model.model.rotary_emb.inv_freq)
    pages = wcxb_pages()[::6]
    compared = differ = 0
    for _, html in pages:
        page = item_page(html)
        chunks = ours.packer.pack(0, page.blocks)
        if not chunks:
            continue
        (p_main,) = ours.label_chunks(chunks, [len(page.blocks)])
        labels = block_labels(page.item_ids, p_main)  # what ours.label returns, without a second pass
        expected = theirs._classify(ref_simplify(html)[0])
        assert list(labels) == list(expected)
        sure = np.abs(p_main - 0.5) > TIE
        ids = [i for i, s in zip(page.item_ids, sure, strict=True) if s and i is not None]
        compared += len(ids)
        differ += sum(labels[i] != expected[i] for i in ids)
    assert compared > 500 and differ == 0, f"{differ} of {compared} block labels differ from pulpie"
