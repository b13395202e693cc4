"""Planted duplicates: the copies a crawl's deduplication must find, and their ground truth.

With `duplicate_share` > 0, that share of the high-quality content pages become copies (the default
test web plants none). Each is one of:
  twin        the page is also served at /amp/<its path> (the same bytes under a second URL form, as
              http/https or AMP twins are) and links there
  syndicated  the page carries the main text of a high-quality page of another host, under its
              own host's template (a syndicated article)
  near        as syndicated, with the title changed and one sentence added (a lightly edited copy)
Sources are never copies themselves, so every copy has exactly one original.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DUPLICATE_KINDS = ("twin", "syndicated", "near")
TWIN_PREFIX = "/amp"


@dataclass(frozen=True, slots=True)
class Plants:
    """Per global page index: the kind of copy it is (-1: none) and the page it copies (-1: none)."""

    kind: np.ndarray
    source: np.ndarray


def plant(rng: np.random.Generator, share: float, page_high: np.ndarray, page_host: np.ndarray) -> Plants:
    """Choose the copies and their originals among the high-quality pages."""
    total = len(page_high)
    kind, source = np.full(total, -1, np.int8), np.full(total, -1, np.int64)
    high = np.flatnonzero(page_high)
    n_copies = round(share * len(high))
    if share <= 0 or n_copies == 0 or len(high) < 2:
        return Plants(kind, source)
    copies = rng.choice(high, n_copies, replace=False)
    originals = np.setdiff1d(high, copies)
    for i, page in enumerate(copies.tolist()):
        k = i % len(DUPLICATE_KINDS)
        kind[page] = k
        if DUPLICATE_KINDS[k] == "twin":
            source[page] = page
            continue
        for _ in range(100):  # an original on another host (almost always the first draw)
            candidate = int(originals[rng.integers(len(originals))])
            if page_host[candidate] != page_host[page]:
                break
        source[page] = candidate
    return Plants(kind, source)
