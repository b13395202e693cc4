"""Encoder labeller: packing and mapping on any machine; the real transformers path on a tiny local model."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cleaner.encoder import (
    MAIN_LABEL,
    MODEL_ENV,
    BlockPacker,
    EncoderCleaner,
    EncoderLabeller,
    batches,
    main_label,
    pack_chunks,
    save_random_encoder,
    scatter,
)
from cleaner.registry import get_cleaner
from cleaner.simplify import simplify

SEP, CLS = 2, 1


def test_blocks_are_packed_in_order_with_a_separator_after_each() -> None:
    blocks = [[10, 11], [12], [13, 14, 15]]
    (chunk,) = pack_chunks(0, blocks, SEP, [CLS], max_tokens=32)
    assert chunk.ids == [CLS, 10, 11, SEP, 12, SEP, 13, 14, 15, SEP]
    assert chunk.blocks == [0, 1, 2] and chunk.seps == [3, 5, 9]
    assert all(chunk.ids[i] == SEP for i in chunk.seps)


def test_chunks_never_exceed_the_limit_and_long_blocks_are_cut() -> None:
    blocks = [[5] * 3, [6] * 4, [7] * 50, [8] * 2]
    chunks = pack_chunks(3, blocks, SEP, [CLS], max_tokens=8)
    assert all(len(c.ids) <= 8 and c.ids[0] == CLS and c.page == 3 for c in chunks)
    assert [b for c in chunks for b in c.blocks] == [0, 1, 2, 3]
    assert sum(len(c.seps) for c in chunks) == len(blocks)
    with pytest.raises(ValueError, match="no room"):
        pack_chunks(0, blocks, SEP, [CLS], max_tokens=1)


def test_batches_bound_padded_tokens_and_labels_map_back_per_page() -> None:
    pages = [[[1] * 30] * 5, [[1] * 3] * 2]
    chunks = [c for i, blocks in enumerate(pages) for c in pack_chunks(i, blocks, SEP, [], max_tokens=64)]
    grouped = batches(chunks, batch_tokens=128)
    assert sorted(id(c) for b in grouped for c in b) == sorted(id(c) for c in chunks)
    assert all(max(len(c.ids) for c in b) * len(b) <= 128 for b in grouped)
    probs = [np.array([0.1 * (b + 1) for b in c.blocks]) + c.page for c in chunks]
    first, second = scatter(chunks, probs, [5, 2])
    assert np.allclose(first, [0.1, 0.2, 0.3, 0.4, 0.5]) and np.allclose(second, [1.1, 1.2])


def test_the_main_label_is_the_one_the_model_config_names() -> None:
    assert main_label({0: "content", 1: "boilerplate"}) == 0
    assert main_label({"0": "other", "1": "Main"}) == 1
    assert main_label({0: "LABEL_0", 1: "LABEL_1"}) == MAIN_LABEL
    assert main_label(None) == MAIN_LABEL


# --- The real transformers path on a tiny EuroBERT (Pulpie's family) trained here on a toy pattern ---

MAIN_WORDS = (
    "river", "mountain", "forest", "valley", "garden", "harvest", "winter", "summer", "village", "bridge",
    "orchard", "meadow",
)  # fmt: skip
NAV_WORDS = (
    "home", "about", "contact", "login", "privacy", "terms", "cookies", "subscribe", "share", "menu",
    "search", "account",
)  # fmt: skip
# Chunks this short put every test page across several chunks, and several pages' chunks in one batch.
SMALL_CHUNK = 24
SMALL_BATCH = 72
TRAIN_STEPS = 80
TRAIN_PAGES_PER_STEP = 8
# Probabilities from batched and lone forward passes agree to float32 noise (relative: trained ones saturate).
SAME_RTOL, SAME_ATOL = 1e-4, 1e-7


def require_encoder_stack() -> None:
    """Skip without torch/transformers (the `gpu` extra), but fail under CI=true, where they are installed."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        message = f"{exc}: pip install 'hostcrawl[gpu]' (torch CPU is enough) to run the encoder tests"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def toy_block(rng: random.Random, main: bool) -> str:
    words = MAIN_WORDS if main else NAV_WORDS
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 7)))


def train_toy_model(path: Path) -> None:
    """Teach the tiny model the toy pattern (main words -> main) at block separators, as Pulpie trains."""
    import torch
    from transformers import AutoTokenizer, EuroBertForTokenClassification

    rng = random.Random(0)
    corpus = [toy_block(rng, rng.random() < 0.5) for _ in range(400)]
    save_random_encoder(path, corpus, hidden_size=32, num_hidden_layers=2)
    model = EuroBertForTokenClassification.from_pretrained(path)
    packer = BlockPacker(AutoTokenizer.from_pretrained(path), max_tokens=SMALL_CHUNK)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(0)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small train several times faster on one thread
    try:
        train_steps(model, packer, optimiser, rng)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path)


def train_steps(model: Any, packer: BlockPacker, optimiser: Any, rng: random.Random) -> None:
    """Random toy pages, loss only at the separators."""
    import torch

    for _ in range(TRAIN_STEPS):
        chunks, targets = [], []
        for page in range(TRAIN_PAGES_PER_STEP):
            flags = [rng.random() < 0.4 for _ in range(rng.randint(1, 8))]
            chunks += packer.pack(page, [toy_block(rng, f) for f in flags])
            targets.append(flags)
        width = max(len(c.ids) for c in chunks)
        ids = torch.full((len(chunks), width), packer.pad_id)
        mask = torch.zeros((len(chunks), width), dtype=torch.long)
        labels = torch.full((len(chunks), width), -100)
        for row, chunk in enumerate(chunks):
            ids[row, : len(chunk.ids)] = torch.tensor(chunk.ids)
            mask[row, : len(chunk.ids)] = 1
            for sep, block in zip(chunk.seps, chunk.blocks, strict=True):
                labels[row, sep] = int(targets[chunk.page][block])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


@pytest.fixture(scope="module")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_encoder_stack()
    path = tmp_path_factory.mktemp("toy-encoder")
    train_toy_model(path)
    return path


def toy_page(rng: random.Random, n_main: int, n_nav: int) -> tuple[str, list[bool]]:
    flags = [True] * n_main + [False] * n_nav
    rng.shuffle(flags)
    body = "".join(f"<p>{toy_block(rng, f)}</p>" if f else f"<nav>{toy_block(rng, f)}</nav>" for f in flags)
    return f"<html><body>{body}</body></html>", flags


def test_every_block_of_pages_spanning_several_chunks_gets_its_own_label(toy_model: Path) -> None:
    labeller = EncoderLabeller(str(toy_model), max_tokens=SMALL_CHUNK, batch_tokens=SMALL_BATCH)
    rng = random.Random(1)
    docs = [toy_page(rng, n_main, n_nav) for n_main, n_nav in [(6, 6), (1, 0), (3, 9), (0, 2)]]
    pages = [simplify(html) for html, _ in docs]
    assert max(len(labeller.packer.pack(0, [b.text for b in p.blocks])) for p in pages) >= 3
    probs = labeller.label(pages)
    for p, page, (_, flags) in zip(probs, pages, docs, strict=True):
        assert len(p) == len(page.blocks) == len(flags)
        assert ((p > 0.5) == np.array(flags)).all(), (p, flags)


def test_labels_do_not_depend_on_which_pages_share_a_padded_batch(toy_model: Path) -> None:
    import torch

    labeller = EncoderLabeller(str(toy_model), max_tokens=SMALL_CHUNK, batch_tokens=SMALL_BATCH)
    rng = random.Random(2)
    pages = [simplify(toy_page(rng, m, n)[0]) for m, n in [(8, 8), (1, 1), (2, 0), (0, 1), (4, 3)]]
    together = labeller.label(pages)
    alone = [labeller.label([page])[0] for page in pages]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a, b, rtol=SAME_RTOL, atol=SAME_ATOL)
    # The test has teeth: some batch pads a short chunk, and without the mask its labels would move.
    chunks = [c for i, p in enumerate(pages) for c in labeller.packer.pack(i, [b.text for b in p.blocks])]
    padded = [b for b in batches(chunks, labeller.batch_tokens) if len({len(c.ids) for c in b}) > 1]
    assert padded
    batch = padded[0]
    short = min(batch, key=lambda c: len(c.ids))
    width = max(len(c.ids) for c in batch)
    ids = torch.tensor([short.ids + [labeller.packer.pad_id] * (width - len(short.ids))])
    with torch.inference_mode():
        unmasked = torch.softmax(labeller.model(input_ids=ids).logits, -1)[0, short.seps, 1].numpy()
    assert not np.allclose(unmasked, together[short.page][short.blocks], rtol=SAME_RTOL, atol=SAME_ATOL)


def test_the_cleaner_from_the_model_env_keeps_the_blocks_the_model_calls_main(
    toy_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODEL_ENV, str(toy_model))
    cleaner = get_cleaner("encoder_v1")
    assert isinstance(cleaner, EncoderCleaner)
    html = (
        "<html><head><title>t</title></head><body><nav>home about contact login</nav>"
        "<article><p>river mountain forest</p><p>winter village bridge orchard</p></article>"
        "<footer>privacy terms cookies</footer></body></html>"
    )
    first, empty = cleaner.extract_batch([html, ""])
    assert first is not None and empty is None
    assert first.text.split("\n") == ["river mountain forest", "winter village bridge orchard"]
    assert first.cleaner == "encoder_v1"


def test_tokenizers_without_sep_or_cls_end_blocks_with_eos_and_open_chunks_with_bos(tmp_path: Path) -> None:
    require_encoder_stack()
    from transformers import AutoTokenizer

    texts = ["river mountain", "home about"] * 20
    plain = BlockPacker(AutoTokenizer.from_pretrained(save_random_encoder(tmp_path / "plain", texts)))
    with_sep = BlockPacker(
        AutoTokenizer.from_pretrained(save_random_encoder(tmp_path / "sep", texts, sep_cls=True))
    )
    tok = plain.tokenizer
    (chunk,) = plain.pack(0, ["river mountain", "home"])
    assert chunk.ids[0] == tok.bos_token_id and [chunk.ids[i] for i in chunk.seps] == [tok.eos_token_id] * 2
    (chunk,) = with_sep.pack(0, ["river mountain", "home"])
    assert chunk.ids[0] == with_sep.tokenizer.cls_token_id
    assert [chunk.ids[i] for i in chunk.seps] == [with_sep.tokenizer.sep_token_id] * 2


def test_chunks_are_capped_at_the_models_position_limit(tmp_path: Path) -> None:
    require_encoder_stack()
    path = save_random_encoder(tmp_path, ["river mountain home about"] * 20, max_position_embeddings=32)
    labeller = EncoderLabeller(str(path))
    page = simplify("<body>" + "<p>river mountain forest valley</p>" * 40 + "</body>")
    chunks = labeller.packer.pack(0, [b.text for b in page.blocks])
    assert len(chunks) > 1 and all(len(c.ids) <= 32 for c in chunks)
    assert len(labeller.label([page])[0]) == 40
