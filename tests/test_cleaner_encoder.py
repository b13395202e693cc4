"""Encoder packing: one separator per block, chunks within the limit, labels mapped back in order."""

from __future__ import annotations

import numpy as np
import pytest

from cleaner.encoder import batches, pack_chunks, scatter

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
