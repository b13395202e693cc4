"""Language identification per page: a packaged identifier by default, fastText lid.176 on request.

The default (py3langid, a maintained langid.py with its model inside the wheel) needs no download
and knows about 140 languages; fastText's lid.176 (`.bin` or `.ftz`) is used when its path is given.
Language matters to the analyses because most quality classifiers are English-trained: a host's
low scores may only mean it writes in another language.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cleaner.quality.fasttext_scorer import LABEL_PREFIX, load_fasttext_model

if TYPE_CHECKING:
    from cleaner.quality.langid_batch import BatchClassifier

DEFAULT_LANGID = "py3langid"
PY3LANGID_INSTALL = "pip install 'py3langid>=0.3'"
# The head of a page settles its language; identifying whole books costs time and buys nothing.
MAX_LANGID_CHARS = 2_000
# Below this many letters any verdict is a guess (a title, a cookie notice): report no language.
MIN_LETTERS = 20
LETTER_RE = re.compile(r"[^\W\d_]")
RECENT_HEADS = 256  # a batch of pages is identified by the pipeline, then scored
# From this many heads on, py3langid's DFA is stepped for all of them at once (langid_batch.py); below,
# page by page through the remembered verdicts. (One step per byte costs about what 10-20 pages' walk does.)
BATCH_WALK_MIN = 32


@dataclass(frozen=True, slots=True)
class Language:
    """An ISO 639 code (as the model spells it) and the model's confidence in [0, 1]."""

    code: str
    score: float


def _enough_letters(text: str) -> bool:
    """Count letters only up to the minimum: this runs on every page."""
    return any(count >= MIN_LETTERS for count, _ in enumerate(LETTER_RE.finditer(text), 1))


class LanguageIdentifier(ABC):
    """Base of the identifiers: `identify_batch` is the one method a subclass writes."""

    name: str

    @abstractmethod
    def identify_batch(self, texts: Sequence[str]) -> list[Language | None]:
        """One language per text, None when the text is too short to tell."""

    def identify(self, text: str) -> Language | None:
        return self.identify_batch([text])[0]


@functools.cache
def _packaged_model() -> Any:
    try:
        from py3langid.langid import MODEL_FILE
        from py3langid.langid import LanguageIdentifier as _Model
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"language id needs the py3langid package: {PY3LANGID_INSTALL}") from exc
    return _Model.from_model_file(MODEL_FILE, norm_probs=True)


@functools.lru_cache(maxsize=RECENT_HEADS)
def _classify(head: str) -> Language | None:
    """py3langid's verdict on a page's head, remembered for the page's next asker."""
    if not _enough_letters(head):
        return None
    code, prob = _packaged_model().classify(head)
    return Language(str(code), float(prob))


class PackagedIdentifier(LanguageIdentifier):
    """py3langid's bundled naive-Bayes model over byte n-grams; no file to download.

    The model is loaded once per process, and the verdicts on the last RECENT_HEADS page heads are
    remembered: a page's language is asked for by the crawl and again by heuristic_v3, which holds
    the page to its language's rules (about 10 ms a page for 2,000 characters of Cyrillic). A batch of
    BATCH_WALK_MIN heads or more is identified in one walk (langid_batch.py), with the same verdicts.
    """

    name = "py3langid_v1"

    def __init__(self) -> None:
        self.model = _packaged_model()

    def identify_batch(self, texts: Sequence[str]) -> list[Language | None]:
        heads = [text[:MAX_LANGID_CHARS] for text in texts]
        if len(heads) < BATCH_WALK_MIN:
            return list(map(_classify, heads))
        known = [i for i, head in enumerate(heads) if _enough_letters(head)]
        verdicts = _batch_classifier().classify([heads[i] for i in known])
        out: list[Language | None] = [None] * len(heads)
        for i, (code, prob) in zip(known, verdicts, strict=True):
            out[i] = Language(str(code), float(prob))
        return out


@functools.cache
def _batch_classifier() -> BatchClassifier:
    from cleaner.quality.langid_batch import BatchClassifier  # imports py3langid, as _packaged_model does

    return BatchClassifier(_packaged_model())


class FastTextIdentifier(LanguageIdentifier):
    """fastText lid.176 (or any model with `__label__<code>` labels), flattened onto one line."""

    name = "fasttext_lid176"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.model = load_fasttext_model(self.path)

    def identify_batch(self, texts: Sequence[str]) -> list[Language | None]:
        heads = [" ".join(text[:MAX_LANGID_CHARS].split()) for text in texts]
        keep = [i for i, head in enumerate(heads) if _enough_letters(head)]
        out: list[Language | None] = [None] * len(texts)
        if not keep:
            return out
        labels, probs = self.model.predict([heads[i] for i in keep], k=1)
        for i, label, prob in zip(keep, labels, probs, strict=True):
            out[i] = Language(label[0].removeprefix(LABEL_PREFIX), min(1.0, float(prob[0])))
        return out


def get_language_identifier(spec: str | None = DEFAULT_LANGID) -> LanguageIdentifier:
    """`py3langid` (default) or the path of a fastText language-id model such as lid.176.bin."""
    if spec is None or spec in {DEFAULT_LANGID, PackagedIdentifier.name}:
        return PackagedIdentifier()
    path = spec.split("=", 1)[1] if spec.startswith("lid176=") else spec
    return FastTextIdentifier(Path(path))


def describe_identifier(identifier: LanguageIdentifier) -> dict[str, Any]:
    """Provenance of the language column."""
    path = getattr(identifier, "path", None)
    return {"name": identifier.name, "path": str(path) if path else None}


def primary_language(languages: Iterable[str | None]) -> tuple[str | None, float]:
    """A host's most common page language and the share of its pages in it (unknown pages count)."""
    counts = Counter(languages)
    total = sum(counts.values())
    known = [(n, code) for code, n in counts.items() if code is not None]
    if not known:
        return None, 0.0
    n, code = min(known, key=lambda item: (-item[0], item[1]))  # ties: alphabetical, so stable
    return code, n / total
