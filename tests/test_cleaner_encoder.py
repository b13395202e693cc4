"""Encoder labeller: Pulpie's packing and mapping anywhere; the real transformers path on a tiny model."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cleaner.encoder import (
    MODEL_ENV,
    REVISION_ENV,
    SEP_TOKEN,
    BlockPacker,
    EncoderCleaner,
    EncoderLabeller,
    batches,
    block_labels,
    fix_rotary_embeddings,
    pack_chunks,
    save_random_encoder,
    scatter,
)
from cleaner.item_labeller import item_page
from cleaner.model_source import TRUST_REMOTE_CODE_ENV, ModelSource, RemoteCodeError
from cleaner.registry import get_cleaner

SEP, BOS, EOS = 2, 0, 1


def test_chunks_are_bos_blocks_each_followed_by_sep_then_eos() -> None:
    (chunk,) = pack_chunks(0, [[10, 11], [12], [13, 14, 15]], SEP, BOS, EOS, max_tokens=32)
    assert chunk.ids == [BOS, 10, 11, SEP, 12, SEP, 13, 14, 15, SEP, EOS]
    assert chunk.blocks == [0, 1, 2] and chunk.seps == [3, 5, 9]
    assert all(chunk.ids[i] == SEP for i in chunk.seps)


def test_chunks_never_exceed_the_limit_and_long_blocks_are_cut() -> None:
    blocks = [[5] * 3, [6] * 4, [7] * 50, [8] * 2]
    chunks = pack_chunks(3, blocks, SEP, BOS, EOS, max_tokens=8)
    assert all(len(c.ids) <= 8 and c.ids[0] == BOS and c.ids[-1] == EOS and c.page == 3 for c in chunks)
    assert [b for c in chunks for b in c.blocks] == [0, 1, 2, 3]
    assert [c.ids for c in chunks][2] == [BOS, 7, 7, 7, 7, 7, SEP, EOS]  # 50 tokens cut to fit
    with pytest.raises(ValueError, match="no room"):
        pack_chunks(0, blocks, SEP, BOS, EOS, max_tokens=3)


def test_batches_bound_padded_tokens_and_labels_map_back_per_page() -> None:
    pages = [[[1] * 30] * 5, [[1] * 3] * 2]
    chunks = [c for i, blocks in enumerate(pages) for c in pack_chunks(i, blocks, SEP, None, None, 64)]
    grouped = batches(chunks, batch_tokens=128)
    assert sorted(id(c) for b in grouped for c in b) == sorted(id(c) for c in chunks)
    assert all(max(len(c.ids) for c in b) * len(b) <= 128 for b in grouped)
    probs = [np.array([0.1 * (b + 1) for b in c.blocks]) + c.page for c in chunks]
    first, second = scatter(chunks, probs, [5, 2])
    assert np.allclose(first, [0.1, 0.2, 0.3, 0.4, 0.5]) and np.allclose(second, [1.1, 1.2])


def test_a_block_is_main_when_its_main_logit_wins() -> None:
    labels = block_labels(["1", "2", None, "4"], np.array([0.9, 0.2, 0.99, 0.51]))
    assert labels == {"1": "main", "2": "other", "4": "main"}


def test_remote_code_needs_an_explicit_flag_and_a_pinned_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ModelSource("org/model").load_kwargs() == {"revision": None, "trust_remote_code": False}
    monkeypatch.setenv(MODEL_ENV, "org/model")
    monkeypatch.setenv(TRUST_REMOTE_CODE_ENV, "1")
    for revision in (None, "main", "abc123"):
        if revision:
            monkeypatch.setenv(REVISION_ENV, revision)
        with pytest.raises(RemoteCodeError, match=f"set {REVISION_ENV} to the 40-hex commit"):
            EncoderCleaner().labeller()
    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv(REVISION_ENV, commit)
    source = ModelSource.from_env(MODEL_ENV, REVISION_ENV, "x")
    assert source.load_kwargs() == {"revision": commit, "trust_remote_code": True}
    monkeypatch.delenv(TRUST_REMOTE_CODE_ENV)
    assert ModelSource.from_env(MODEL_ENV, REVISION_ENV, "x").trust_remote_code is False


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
SMALL_CHUNK = 40
SMALL_BATCH = 120
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


def toy_page(rng: random.Random, n_main: int, n_other: int) -> tuple[str, list[bool]]:
    """Main blocks are paragraphs of main words, the others menu divs of navigation words."""
    flags = [True] * n_main + [False] * n_other
    rng.shuffle(flags)
    body = "".join(
        f"<p>{toy_block(rng, f)}</p>" if f else f"<div class='menu'>{toy_block(rng, f)}</div>" for f in flags
    )
    return f"<html><body>{body}</body></html>", flags


def train_toy_model(path: Path) -> None:
    """Teach the tiny model the toy pattern at block separators, on pages fed as labelling feeds them."""
    import torch
    from transformers import AutoTokenizer, EuroBertForTokenClassification

    rng = random.Random(0)
    corpus = [item_page(toy_page(rng, 3, 3)[0]).simplified for _ in range(100)]
    save_random_encoder(path, corpus, hidden_size=32, num_hidden_layers=2)
    model = EuroBertForTokenClassification.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # Short chunks (the packing tests) and whole pages in one chunk (the cleaner, at its default size):
    # trained on short chunks only, the model never sees a page's first block at its place in a page.
    packers = [BlockPacker(tokenizer, max_tokens=SMALL_CHUNK), BlockPacker(tokenizer)]
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(0)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small train several times faster on one thread
    try:
        train_steps(model, packers, optimiser, rng)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path)


def train_steps(model: Any, packers: list[BlockPacker], optimiser: Any, rng: random.Random) -> None:
    """Random toy pages through item_page and the packers in turn, loss only at the separators."""
    import torch

    for step in range(TRAIN_STEPS):
        packer = packers[step % len(packers)]
        chunks, targets = [], []
        for page in range(TRAIN_PAGES_PER_STEP):
            html, flags = toy_page(rng, rng.randint(0, 4), rng.randint(0, 4))
            blocks = item_page(html).blocks
            assert len(blocks) == len(flags)
            chunks += packer.pack(page, blocks)
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


def test_every_block_of_pages_spanning_several_chunks_gets_its_own_label(toy_model: Path) -> None:
    labeller = EncoderLabeller(str(toy_model), max_tokens=SMALL_CHUNK, batch_tokens=SMALL_BATCH)
    rng = random.Random(1)
    docs = [toy_page(rng, n_main, n_other) for n_main, n_other in [(6, 6), (1, 0), (3, 9), (0, 2)]]
    pages = [item_page(html) for html, _ in docs]
    assert max(len(labeller.packer.pack(0, p.blocks)) for p in pages) >= 3
    for labels, page, (_, flags) in zip(labeller.label(pages), pages, docs, strict=True):
        assert labels is not None and list(labels) == page.item_ids
        assert [v == "main" for v in labels.values()] == flags


def test_labels_do_not_depend_on_which_pages_share_a_padded_batch(toy_model: Path) -> None:
    import torch

    labeller = EncoderLabeller(str(toy_model), max_tokens=SMALL_CHUNK, batch_tokens=SMALL_BATCH)
    rng = random.Random(2)
    pages = [item_page(toy_page(rng, m, n)[0]) for m, n in [(8, 8), (1, 1), (2, 0), (0, 1), (4, 3)]]
    chunks = [c for i, p in enumerate(pages) for c in labeller.packer.pack(i, p.blocks)]
    together = labeller.label_chunks(chunks, [len(p.blocks) for p in pages])
    alone = [labeller.label_chunks(labeller.packer.pack(0, p.blocks), [len(p.blocks)])[0] for p in pages]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a, b, rtol=SAME_RTOL, atol=SAME_ATOL)
    # The test has teeth: some batch pads a short chunk, and without the mask its labels would move.
    padded = [b for b in batches(chunks, labeller.batch_tokens) if len({len(c.ids) for c in b}) > 1]
    assert padded
    batch = padded[0]
    short = min(batch, key=lambda c: len(c.ids))
    width = max(len(c.ids) for c in batch)
    ids = torch.tensor([short.ids + [labeller.packer.pad_id] * (width - len(short.ids))])
    mask = torch.tensor([[1] * len(short.ids) + [0] * (width - len(short.ids))])
    with torch.inference_mode():
        masked = labeller.model(input_ids=ids, attention_mask=mask).logits[0, short.seps]
        unmasked = labeller.model(input_ids=ids).logits[0, short.seps]
    assert (masked - unmasked).abs().max() > 1e-3


def test_the_cleaner_from_the_model_env_keeps_the_blocks_the_model_calls_main(
    toy_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODEL_ENV, str(toy_model))
    cleaner = get_cleaner("encoder_v2")
    assert isinstance(cleaner, EncoderCleaner)
    html = (
        "<html><head><title>Toy</title></head><body><div class='menu'>home about contact login</div>"
        "<article><p>river mountain forest</p><p>winter village bridge orchard</p></article>"
        "<div class='menu'>privacy terms cookies</div></body></html>"
    )
    first, empty = cleaner.extract_batch([html, ""])
    assert first is not None and empty is None
    assert first.text.split("\n") == ["river mountain forest", "winter village bridge orchard"]
    assert first.cleaner == "encoder_v2" and first.title == "Toy"
    menu = "<div class='menu'>home about contact</div>"
    only_menus = f"<html><body>{menu}{menu}</body></html>"
    assert cleaner.extract(only_menus) is None  # no relative threshold: a page the model calls other is empty


def test_the_loader_adds_sep_grows_the_embeddings_and_fixes_the_rotary_frequencies(tmp_path: Path) -> None:
    require_encoder_stack()
    import torch

    texts = ['<p _item_id="1">river mountain</p>', '<div _item_id="2">home about</div>'] * 20
    path = save_random_encoder(tmp_path, texts, with_sep=False)
    labeller = EncoderLabeller(str(path))
    tokenizer, model = labeller.packer.tokenizer, labeller.model
    assert tokenizer.convert_ids_to_tokens(labeller.packer.sep_id) == SEP_TOKEN
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) == model.config.vocab_size
    (chunk,) = labeller.packer.pack(0, texts[:2])
    assert [chunk.ids[0], chunk.ids[-1]] == [tokenizer.bos_token_id, tokenizer.eos_token_id]
    assert [chunk.ids[i] for i in chunk.seps] == [labeller.packer.sep_id] * 2
    head_dim = model.config.head_dim
    expected = 1.0 / (250_000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    rotary = model.model.rotary_emb
    torch.testing.assert_close(rotary.inv_freq, expected)
    rotary.inv_freq = torch.zeros_like(expected)  # what a checkpoint load can leave behind
    fix_rotary_embeddings(model)
    torch.testing.assert_close(rotary.inv_freq, expected)
    torch.testing.assert_close(rotary.original_inv_freq, expected)


def test_chunks_are_capped_at_the_models_position_limit(tmp_path: Path) -> None:
    require_encoder_stack()
    path = save_random_encoder(tmp_path, ["river mountain home about"] * 20, max_position_embeddings=32)
    labeller = EncoderLabeller(str(path))
    page = item_page("<body>" + "<p>river mountain forest valley</p>" * 40 + "</body>")
    chunks = labeller.packer.pack(0, page.blocks)
    assert len(chunks) > 1 and all(len(c.ids) <= 32 for c in chunks)
    (labels,) = labeller.label([page])
    assert labels is not None and len(labels) == 40
