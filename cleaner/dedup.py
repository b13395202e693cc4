"""Corpus deduplication: exact copies by normalised-text hash, near copies by MinHash LSH (datasketch).

Documents are taken in order (a crawl's text/ is in fetch order) and the first of each group is
kept: every later exact or near copy is removed, and the kept document lists the ids of the copies
it stands for. A copy is compared with the kept documents only, so a chain of small edits cannot
walk one document into an unrelated one.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import regex
from datasketch import MinHash, MinHashLSH
from datasketch.hashfunc import sha1_hash32

from cleaner.quality.segment import segment_scripts

# Word 5-grams as shingles, as Gopher/MassiveText and FineWeb's MinHash do: shorter shingles make
# unrelated pages on one topic look alike (shared phrases), longer ones let one edited word hide
# more of a near copy (each edit breaks SHINGLE_WORDS shingles).
SHINGLE_WORDS = 5
# Jaccard similarity of the shingle sets at or above which a page is a near copy. Lee et al. (2022)
# and SlimPajama use 0.8, FineWeb's 14 bands x 8 rows put the S-curve's midpoint near 0.75. We take
# 0.7: a syndicated copy keeps the article but not always the chrome the cleaner lets through under
# the other host's template. On the test web (seeds 0 and 1, 11 languages, pages cleaned by
# blocks_v1) the least similar near copy of each language sits at 0.78-0.90 with its original over
# their prose lines (below), syndicated ones at 0.95-1.0, while distinct pages, even of one host and
# template, stay below 0.05.
NEAR_THRESHOLD = 0.7
# Candidates come from MinHash LSH, and each is then checked by the exact Jaccard similarity of the
# two shingle sets (kept as sorted 32-bit hashes), so the signature's estimation error (0.04 at
# J=0.7 with 128 permutations) never decides. LSH_BANDS x LSH_ROWS = NUM_PERM: a pair at J=0.7 shares
# a band with probability 1 - (1 - 0.7^4)^32 = 0.99985 (at 0.8, 1 - 3e-7), one at 0.3 with 0.23.
# (datasketch's own choice for a threshold of 0.55, 21 x 6, left 7% of the pairs at 0.7 unproposed.)
NUM_PERM = 128
LSH_BANDS, LSH_ROWS = 32, 4
# Near copies are compared on their prose: lines of at least PROSE_LINE_WORDS words and PROSE_LINE_CHARS
# characters (in their words), when they hold at least MIN_PROSE_WORDS words. The headings, link lists
# and bylines a cleaner lets through differ from host to host around one syndicated article, and on a
# short article they would outweigh it. The characters are for Japanese and Thai, where a segmenter's
# words are short (MeCab cuts particles and endings apart): on the test web (seed 0, 11 languages,
# blocks_v1) Japanese link titles reach 14 words in 23 characters and Thai ones 10 words in 36, while
# no line of chrome has both 10 words and 40 characters; the prose lines this drops (list items of
# Chinese and Japanese articles) drop from the copy and its original alike.
PROSE_LINE_WORDS = 10
PROSE_LINE_CHARS = 40
MIN_PROSE_WORDS = 50
MINHASH_SEED = 1
# Punctuation and symbols; combining marks stay (Devanagari and Thai vowel signs are parts of words).
PUNCT_RE = regex.compile(r"[\p{P}\p{S}]+")
SPACE_RE = regex.compile(r"\s+")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def normalise(text: str) -> str:
    """Text up to case, Unicode form, punctuation and whitespace: what an exact copy shares."""
    return SPACE_RE.sub(" ", PUNCT_RE.sub(" ", _fold(text))).strip()


def text_hash(text: str) -> str:
    return hashlib.sha1(normalise(text).encode("utf-8")).hexdigest()


def _word_shingles(words: list[str]) -> set[bytes]:
    if len(words) <= SHINGLE_WORDS:
        return {" ".join(words).encode("utf-8")} if words else set()
    starts = range(len(words) - SHINGLE_WORDS + 1)
    return {" ".join(words[i : i + SHINGLE_WORDS]).encode("utf-8") for i in starts}


def words(line: str) -> list[str]:
    """The normalised words of a line; runs of Han, kana and Thai are cut by their script's segmenter."""
    return PUNCT_RE.sub(" ", segment_scripts(_fold(line))).split()


def shingles(text: str) -> set[bytes]:
    """Word SHINGLE_WORDS-grams of the prose lines, or of all the text when it has too little prose.

    Words never depend on the page's detected language: a copied article under a template in another
    language is detected as that language when the chrome outweighs it, and must still cut the same."""
    lines = [words(line) for line in text.splitlines()]
    prose = [ws for ws in lines if len(ws) >= PROSE_LINE_WORDS and sum(map(len, ws)) >= PROSE_LINE_CHARS]
    if sum(map(len, prose)) >= MIN_PROSE_WORDS:
        lines = prose
    return _word_shingles([word for words in lines for word in words])


def shingle_hashes(text: str) -> np.ndarray:
    """The 32-bit hashes of `shingles(text)`, sorted and unique: what the exact similarity compares."""
    return np.unique(np.fromiter(map(sha1_hash32, shingles(text)), dtype=np.uint32))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted unique hash arrays."""
    common = np.intersect1d(a, b, assume_unique=True).size
    return common / max(1, a.size + b.size - common)


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    text: str


@dataclass(slots=True)
class DedupResult:
    """`removed`: copy id -> the kept id it duplicates; `duplicates`: kept id -> its copies' ids."""

    docs: int = 0
    removed: dict[str, str] = field(default_factory=dict)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    exact: int = 0
    near: int = 0

    def stats(self) -> dict[str, int]:
        return {
            "dedup/docs_in": self.docs,
            "dedup/docs_kept": self.docs - len(self.removed),
            "dedup/removed/exact": self.exact,
            "dedup/removed/near": self.near,
        }


def deduplicate(docs: Iterable[Doc]) -> DedupResult:
    """Find every exact and near copy of an earlier document."""
    result = DedupResult()
    by_hash: dict[str, str] = {}
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(LSH_BANDS, LSH_ROWS))
    kept: dict[str, np.ndarray] = {}  # kept id -> its shingle hashes
    for doc in docs:
        result.docs += 1
        if doc.id in kept or doc.id in result.removed:
            continue  # the same record twice (a resumed run's repeated page): nothing new
        digest = text_hash(doc.text)
        keeper = by_hash.get(digest)
        if keeper is not None:
            result.exact += 1
        else:
            hashes = shingle_hashes(doc.text)
            minhash = MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED, hashfunc=int)
            minhash.update_batch(hashes.tolist())
            similar = [(jaccard(kept[c], hashes), c) for c in lsh.query(minhash)]
            best = max((pair for pair in similar if pair[0] >= NEAR_THRESHOLD), default=None)
            if best is None:
                by_hash[digest] = doc.id
                kept[doc.id] = hashes
                lsh.insert(doc.id, minhash)
                continue
            keeper = best[1]
            result.near += 1
        result.removed[doc.id] = keeper
        result.duplicates.setdefault(keeper, []).append(doc.id)
    return result
