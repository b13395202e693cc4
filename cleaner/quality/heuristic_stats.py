"""Word, token, stop-word and n-gram statistics of a text, computed in numpy for heuristic_v1/v2.

Per-word Python loops made long pages 5x too slow for the 2,000 docs/s target (issue 4). These give
the same values as the per-word definitions (`\\w*[^\\W\\d_]\\w*` words, `str.split` tokens): the
character classes come from those very regex classes, and words are told apart by 64-bit hashes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cleaner.quality.stopwords import STOP_WORDS

UNICODE_SIZE = 0x110000
# Character groups (`\s`, `\w`, the rest); a word is a run of WORD characters with a letter in it.
OTHER, SPACE, WORD = 0, 1, 2
# Words hash to a polynomial in their code points mod 2^64 (the base is odd, so it has an inverse
# and a word's hash does not depend on where it stands); two of a page's words collide with odds ~2^-45.
WORD_HASH_BASE = 0xC2B2AE3D27D4EB4F
WORD_HASH_INVERSE = pow(WORD_HASH_BASE, -1, 1 << 64)
POWER_TABLE_SIZE = 1 << 16  # texts up to this many characters share one cached table of powers
# odd 64-bit constant (2^64 / golden ratio) for the polynomial n-gram hash
NGRAM_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
RADIX_MIN_KEYS = 600  # from here on, radix passes group n-gram keys faster than a comparison sort
# Word ids are multiplied by this odd constant (a bijection) before n-gram hashing: a one-letter word's
# id is its code point, and keys that differ only in low bits would defeat the radix grouping.
WORD_ID_MIX = np.uint64(0xFF51AFD7ED558CCD)
# times the text's number, added to its n-gram keys: equal n-grams of two texts in a batch never group
TEXT_SALT = np.uint64(0xD6E8FEB86659FD93)
# Stop words and windows sit in collision-free hash tables small enough to stay in cache; a multiplier
# is searched for once (for ~250 stop words in 2^13 slots, about one in 45 works).
STOP_WORD_TABLE_BITS = 13
WINDOW_TABLE_BITS = 10
HASH_TABLE_FIRST_MULTIPLIER = 0x2545F4914F6CDD1D
HASH_TABLE_TRIES = 100_000


@dataclass(frozen=True, slots=True)
class TextStats:
    """What the word- and token-level rules need from a text."""

    tokens: int  # whitespace-separated tokens, as `str.split` counts them
    letter_tokens: int  # tokens that contain a letter
    word_ids: np.ndarray  # uint64 hash of each word, in text order
    word_lengths: np.ndarray  # int64 characters of each word
    window_starts: np.ndarray  # where one of the requested windows occurs (ascending offsets)
    window_ids: np.ndarray  # which window occurs there (index into the requested ones)


@dataclass(frozen=True, slots=True)
class _HashTable:
    """A collision-free table: slot = (key * multiplier) >> shift."""

    multiplier: np.uint64
    shift: np.uint64
    keys: np.ndarray  # key per slot (0: empty)
    values: np.ndarray  # value per slot (uint8)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of `keys` are in the table, and the value of each one that is."""
        slots = (keys * self.multiplier) >> self.shift
        found = self.keys.take(slots) == keys
        return found, self.values.take(slots[found])


def _hash_table(entries: dict[int, int], bits: int) -> _HashTable:
    keys = np.array(list(entries), dtype=np.uint64)
    shift = np.uint64(64 - bits)
    for k in range(HASH_TABLE_TRIES):
        multiplier = np.uint64(HASH_TABLE_FIRST_MULTIPLIER + 2 * k)
        slots = (keys * multiplier) >> shift
        if len(np.unique(slots)) == len(keys):
            break
    else:
        raise RuntimeError(f"no collision-free multiplier for {len(keys)} keys in 2^{bits} slots")
    table_keys = np.zeros(1 << bits, dtype=np.uint64)
    table_keys[slots] = keys
    values = np.zeros(1 << bits, dtype=np.uint8)
    values[slots] = list(entries.values())
    return _HashTable(multiplier, shift, table_keys, values)


@functools.cache
def _char_groups(marks: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Group (OTHER, SPACE, WORD) and letter flag of every code point, surrogates included.

    Built once per process (~0.3 s) from the very regex classes the rules are written in. `marks`:
    combining marks (Unicode M*: Thai and Devanagari vowel signs, Arabic harakat) are letters of the
    word they sit in, where `\\w` would cut the word at them (heuristic_v3).
    """
    chars = "".join(map(chr, range(UNICODE_SIZE)))
    groups = np.full(UNICODE_SIZE, OTHER, dtype=np.uint8)
    letters = np.zeros(UNICODE_SIZE, dtype=bool)
    for table, value, pattern in (
        (groups, SPACE, r"\s+"),
        (groups, WORD, r"\w+"),
        (letters, True, r"[^\W\d_]+"),
    ):
        for match in re.finditer(pattern, chars):
            table[match.start() : match.end()] = value
    if marks:
        is_mark = np.array([unicodedata.category(c)[0] == "M" for c in chars], dtype=bool)
        groups[is_mark], letters[is_mark] = WORD, True
    groups.flags.writeable = letters.flags.writeable = False
    return groups, letters


def _compute_powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64."""
    out = np.ones(n, dtype=np.uint64)
    if n > 1:
        out[1:] = np.cumprod(np.full(n - 1, base, dtype=np.uint64))
    return out


@functools.cache
def _power_table(base: int) -> np.ndarray:
    table = _compute_powers(base, POWER_TABLE_SIZE)
    table.flags.writeable = False
    return table


def _powers(base: int, n: int) -> np.ndarray:
    return _power_table(base)[:n] if n <= POWER_TABLE_SIZE else _compute_powers(base, n)


def _string_hash(text: str) -> int:
    """The hash `text_stats` gives a word or window with these characters."""
    return sum(ord(c) * pow(WORD_HASH_BASE, i, 1 << 64) for i, c in enumerate(text)) % (1 << 64)


@functools.cache
def _window_table(windows: tuple[str, ...]) -> _HashTable:
    if len({len(w) for w in windows}) != 1 or len(set(windows)) != len(windows):
        raise ValueError(f"windows must be distinct and of one length: {windows}")
    return _hash_table({_string_hash(w): i for i, w in enumerate(windows)}, WINDOW_TABLE_BITS)


def _shifted_starts(change: np.ndarray) -> np.ndarray:
    """Segment starts from the offsets after which the value changes: [0, change + 1...]."""
    starts = np.empty(len(change) + 1, dtype=np.intp)
    starts[0] = 0
    np.add(change, 1, out=starts[1:])
    return starts


def text_stats(lower: str, windows: tuple[str, ...] = (), marks: bool = False) -> TextStats:
    """Tokens, tokens with a letter, words (`\\w` runs with a letter) and `windows` of a lowercased text.

    `marks`: combining marks belong to the word they sit in (see `_char_groups`)."""
    none = np.zeros(0, dtype=np.intp)
    if not lower:
        return TextStats(0, 0, np.zeros(0, dtype=np.uint64), none, none, none)
    codes = np.frombuffer(lower.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    n = len(codes)
    groups, is_letter = _char_groups(marks)
    groups, is_letter = groups.take(codes), is_letter.take(codes)
    # segments: maximal runs of one group (space, other, word); tokens and words are made of them
    seg_starts = _shifted_starts((groups[1:] != groups[:-1]).nonzero()[0])
    seg_ends = np.empty_like(seg_starts)
    seg_ends[:-1] = seg_starts[1:]
    seg_ends[-1] = n
    letters = np.empty(n + 1, dtype=np.int32)
    letters[0] = 0
    np.cumsum(is_letter, out=letters[1:])
    # a segment with a letter is a word
    words = (letters.take(seg_ends) > letters.take(seg_starts)).nonzero()[0]
    # tokens: the runs of segments between space segments (which never touch each other)
    seg_space = groups.take(seg_starts) == SPACE
    tokens = int(np.count_nonzero(seg_space)) + 1 - int(seg_space[0]) - int(seg_space[-1])
    token_of_word = seg_space.cumsum().take(words)  # ascending; equal within a token
    letter_tokens = int(np.count_nonzero(token_of_word[1:] != token_of_word[:-1])) + 1 if len(words) else 0
    starts, ends = seg_starts.take(words), seg_ends.take(words)
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    np.cumsum(np.multiply(codes, _powers(WORD_HASH_BASE, n), dtype=np.uint64), out=prefix[1:])
    inverse = _powers(WORD_HASH_INVERSE, n)
    ids = (prefix.take(ends) - prefix.take(starts)) * inverse.take(starts)
    window_starts, window_ids = none, none
    if windows and n >= len(windows[0]):
        width = len(windows[0])
        window_hashes = (prefix[width:] - prefix[:-width]) * inverse[: n - width + 1]
        found, window_ids = _window_table(windows).lookup(window_hashes)
        window_starts = found.nonzero()[0]
    return TextStats(tokens, letter_tokens, ids, ends - starts, window_starts, window_ids)


@functools.cache
def _stop_word_table() -> tuple[_HashTable, np.ndarray]:
    """Every stop word's hash with a bit per language whose list holds it; the languages of each mask."""
    masks: dict[int, int] = {}
    for i, words in enumerate(STOP_WORDS.values()):
        text = " ".join(sorted(words))
        ids = text_stats(text).word_ids
        if len(ids) != len(words):
            raise ValueError(f"cleaner/quality/stopwords.py: a stop word is not exactly one word in {text!r}")
        for word_id in ids.tolist():
            masks[word_id] = masks.get(word_id, 0) | 1 << i
    n_masks = 1 << len(STOP_WORDS)
    languages = np.array([[(m >> i) & 1 for m in range(n_masks)] for i in range(len(STOP_WORDS))])
    return _hash_table(masks, STOP_WORD_TABLE_BITS), languages


def stop_word_shares(word_ids: Sequence[np.ndarray]) -> list[float]:
    """Per text, the best stop-word share over the languages we know (en, de, fr, es)."""
    sizes = [len(ids) for ids in word_ids]
    if not any(sizes):
        return [0.0] * len(sizes)
    table, languages = _stop_word_table()
    found, masks = table.lookup(np.concatenate(word_ids))
    n_masks = languages.shape[1]
    text_of_word = np.repeat(np.arange(len(sizes)), sizes)
    per_mask = np.bincount(text_of_word[found] * n_masks + masks, minlength=len(sizes) * n_masks)
    best = (per_mask.reshape(len(sizes), n_masks) @ languages.T).max(axis=1)
    return [b / size if size else 0.0 for b, size in zip(best.tolist(), sizes, strict=True)]


def _grouping_order(keys: np.ndarray) -> np.ndarray:
    """A stable order that puts equal keys next to each other (not necessarily sorted).

    Long arrays go through two 16-bit radix passes on the keys' top 32 bits (linear time: 3x
    faster than a comparison sort at 4,000 keys); if two different keys share those bits (about
    one batch in 15), a comparison sort decides.
    """
    if len(keys) < RADIX_MIN_KEYS:
        return keys.argsort(kind="stable")
    order = (keys >> np.uint64(32)).astype(np.uint16).argsort(kind="stable")
    order = order.take((keys.take(order) >> np.uint64(48)).astype(np.uint16).argsort(kind="stable"))
    grouped = keys.take(order)
    top = grouped >> np.uint64(32)
    if np.any((top[1:] == top[:-1]) & (grouped[1:] != grouped[:-1])):
        return keys.argsort(kind="stable")
    return order


@dataclass(slots=True)
class _Groups:
    """Equal n-gram keys side by side; positions ascend within a group (stable orders)."""

    starts: np.ndarray  # word position of each occurrence, grouped
    keys: np.ndarray
    first: np.ndarray  # index of each group's first occurrence
    counts: np.ndarray  # occurrences per group


def _group(starts: np.ndarray, keys: np.ndarray) -> _Groups:
    order = _grouping_order(keys)
    keys, starts = keys.take(order), starts.take(order)
    new = np.empty(len(keys), dtype=bool)
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    first = new.nonzero()[0]
    counts = np.empty(len(first), dtype=np.intp)
    np.subtract(first[1:], first[:-1], out=counts[:-1])
    counts[-1] = len(keys) - first[-1]
    return _Groups(starts, keys, first, counts)


def ngram_char_shares(
    word_ids: Sequence[np.ndarray],
    word_lengths: Sequence[np.ndarray],
    top_ns: Sequence[int],
    dup_ns: Sequence[int],
) -> list[tuple[dict[int, float], dict[int, float]]]:
    """Gopher's repetition statistics of each text, as shares of its word characters.

    For n in `top_ns` (2, 3, ...): the characters of the most frequent n-gram times its count (ties:
    the first seen). For n in `dup_ns` (the lengths after those): the characters inside any n-gram
    seen twice or more. An n-gram can only repeat where the (n-1)-gram it starts with repeats, so
    each n groups the survivors of n-1 only. All texts go through each step together (their
    n-gram keys are salted with the text), so numpy's per-call cost is paid once per batch.
    """
    top_ns, dup_ns = tuple(top_ns), tuple(dup_ns)
    if not top_ns or top_ns + dup_ns != tuple(range(2, 2 + len(top_ns) + len(dup_ns))):
        raise ValueError(f"n-gram lengths must run on from 2: {top_ns} then {dup_ns}")
    results = [(dict.fromkeys(top_ns, 0.0), dict.fromkeys(dup_ns, 0.0)) for _ in word_ids]
    width = max(top_ns + dup_ns)
    sizes = np.array([len(ids) for ids in word_ids], dtype=np.intp)
    if not sizes.any():
        return results
    # every text's words, then `width` sentinels (distinct ids, so no n-gram running over them repeats)
    slots = sizes + width
    offsets = np.zeros(len(sizes), dtype=np.intp)
    np.cumsum(slots[:-1], out=offsets[1:])
    text_of = np.repeat(np.arange(len(sizes)), slots)
    is_word = np.arange(len(text_of)) - offsets.take(text_of) < sizes.take(text_of)
    padded = (np.arange(1, len(text_of) + 1, dtype=np.uint64)) * NGRAM_HASH_MULTIPLIER
    padded[is_word] = np.concatenate(word_ids) * WORD_ID_MIX
    cumulative = np.zeros(len(text_of) + 1, dtype=np.int64)
    cumulative[1:][is_word] = np.concatenate(word_lengths)
    np.cumsum(cumulative, out=cumulative)
    totals = cumulative.take(offsets + sizes) - cumulative.take(offsets)
    starts = is_word.nonzero()[0]
    keys = padded.take(starts) + (text_of.take(starts) + 1).astype(np.uint64) * TEXT_SALT
    for n in top_ns + dup_ns:
        keys = keys * NGRAM_HASH_MULTIPLIER + padded.take(starts + (n - 1))
        groups = _group(starts, keys)
        repeated = groups.counts > 1
        if not repeated.any():
            break  # no repeated n-gram: no longer one either
        if n in top_ns:
            _top_shares(groups, repeated, text_of, cumulative, totals, n, results)
        survivors = repeated.repeat(groups.counts)
        starts, keys = groups.starts[survivors], groups.keys[survivors]
        if n in dup_ns:
            # the union of [start, start + n) over the repeated n-grams' starts: each start owns its
            # words up to the next such start (never past its text: repeats hold no sentinel)
            ordered = np.sort(starts)
            following = np.empty_like(ordered)
            following[:-1] = ordered[1:]
            following[-1] = len(text_of)
            chars = cumulative.take(np.minimum(ordered + n, following)) - cumulative.take(ordered)
            covered = np.bincount(text_of.take(ordered), weights=chars, minlength=len(sizes))
            for i in covered.nonzero()[0].tolist():
                results[i][1][n] = float(covered[i]) / int(totals[i])
    return results


def _top_shares(
    groups: _Groups,
    repeated: np.ndarray,
    text_of: np.ndarray,
    cumulative: np.ndarray,
    totals: np.ndarray,
    n: int,
    results: list[tuple[dict[int, float], dict[int, float]]],
) -> None:
    """Per text: the most frequent n-gram's count times its characters (ties: the first seen)."""
    counts = groups.counts[repeated]
    seen = groups.starts.take(groups.first[repeated])  # where each repeated n-gram is first seen
    text = text_of.take(seen)
    best = np.zeros(len(totals), dtype=np.intp)
    np.maximum.at(best, text, counts)
    is_best = counts == best.take(text)
    first_best = np.full(len(totals), len(text_of), dtype=np.intp)
    np.minimum.at(first_best, text[is_best], seen[is_best])
    for i in (best >= 2).nonzero()[0].tolist():
        start, count = int(first_best[i]), int(best[i])
        chars = int(cumulative[start + n] - cumulative[start])
        results[i][0][n] = min(1.0, count * chars / int(totals[i]))
