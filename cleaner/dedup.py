"""Corpus deduplication: exact copies by normalised-text hash, near copies by MinHash LSH (datasketch).

Documents are taken in order (a crawl's text/ is in fetch order) and the first of each group is
kept: every later exact or near copy is removed, and the kept document lists the ids of the copies
it stands for. A copy is compared with the kept documents only, so a chain of small edits cannot
walk one document into an unrelated one.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from datasketch import MinHash, MinHashLSH

from cleaner.quality.segment import segment

# Word 5-grams as shingles, as Gopher/MassiveText and FineWeb's MinHash do: shorter shingles make
# unrelated pages on one topic look alike (shared phrases), longer ones let one edited word hide
# more of a near copy (each edit breaks SHINGLE_WORDS shingles).
SHINGLE_WORDS = 5
# Estimated Jaccard similarity of the shingle sets at or above which a page is a near copy. Lee et al.
# (2022) and SlimPajama use 0.8, FineWeb's 14 bands x 8 rows put the S-curve's midpoint near 0.75.
# We take 0.7: a syndicated copy keeps the article but not the chrome the cleaner lets through
# under the other host's template. On the test web (seed 0, pages cleaned by blocks_v1) copies sit at
# 0.77-0.95 with their originals over the whole text and 0.87-1.0 over their prose lines (below),
# while distinct pages, even of one host and template, stay below 0.3; 0.7 leaves room for the
# estimate's error and for heavier edits than the test web makes. Candidates come from an LSH tuned
# to a lower similarity, so banding misses (nearly) none of the pairs above NEAR_THRESHOLD; the
# estimate then decides.
NEAR_THRESHOLD = 0.7
LSH_THRESHOLD = 0.55
# Permutations of the MinHash signature: the similarity estimate's standard error is about
# sqrt(J(1-J)/NUM_PERM), 0.04 at J=0.7 with 128; datasketch picks the LSH bands for LSH_THRESHOLD.
NUM_PERM = 128
# Near copies are compared on their prose: lines of at least PROSE_LINE_WORDS words, when they hold at
# least MIN_PROSE_WORDS words. The headings, link lists and bylines a cleaner lets through differ from
# host to host around one syndicated article, and on a short article they would outweigh it.
PROSE_LINE_WORDS = 10
MIN_PROSE_WORDS = 50
MINHASH_SEED = 1
PUNCT_RE = re.compile(r"[^\w\s]+")
SPACE_RE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Text up to case, Unicode form, punctuation and whitespace: what an exact copy shares."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return SPACE_RE.sub(" ", PUNCT_RE.sub(" ", text)).strip()


def text_hash(text: str) -> str:
    return hashlib.sha1(normalise(text).encode("utf-8")).hexdigest()


def _word_shingles(words: list[str]) -> set[bytes]:
    if len(words) <= SHINGLE_WORDS:
        return {" ".join(words).encode("utf-8")} if words else set()
    starts = range(len(words) - SHINGLE_WORDS + 1)
    return {" ".join(words[i : i + SHINGLE_WORDS]).encode("utf-8") for i in starts}


def shingles(text: str, language: str | None = None) -> set[bytes]:
    """Word SHINGLE_WORDS-grams of the prose lines (words segmented in zh, ja, th), or of all the text
    when it has too little prose to go by."""
    lines = [normalise(line).split() for line in segment(text, language).splitlines()]
    prose = [words for words in lines if len(words) >= PROSE_LINE_WORDS]
    if sum(map(len, prose)) >= MIN_PROSE_WORDS:
        lines = prose
    return _word_shingles([word for words in lines for word in words])


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    text: str
    language: str | None = None


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
    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    signatures: dict[str, MinHash] = {}
    for doc in docs:
        result.docs += 1
        if doc.id in signatures or doc.id in result.removed:
            continue  # the same record twice (a resumed run's repeated page): nothing new
        digest = text_hash(doc.text)
        keeper = by_hash.get(digest)
        if keeper is not None:
            result.exact += 1
        else:
            minhash = MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED)
            minhash.update_batch(list(shingles(doc.text, doc.language)))
            candidates = [c for c in lsh.query(minhash) if signatures[c].jaccard(minhash) >= NEAR_THRESHOLD]
            if candidates:
                keeper = max(candidates, key=lambda c: (signatures[c].jaccard(minhash), c))
                result.near += 1
            else:
                by_hash[digest] = doc.id
                signatures[doc.id] = minhash
                lsh.insert(doc.id, minhash)
                continue
        result.removed[doc.id] = keeper
        result.duplicates.setdefault(keeper, []).append(doc.id)
    return result
