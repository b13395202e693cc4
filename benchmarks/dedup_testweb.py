"""Are the test web's planted copies found, and are distinct pages left alone?

Builds a test web that plants copies (twins under a second URL form, syndicated copies on other
hosts, near copies with a new title and an added sentence), cleans every high-quality page (and
every twin URL) with the default cleaner as a crawl does, shuffles them into a fetch order, and runs
the corpus deduplication (cleaner/dedup.py) over the texts.

    python -m benchmarks.dedup_testweb [--seed 1] [--hosts 200] [--share 0.1] [--languages]

A copy counts as found when it and its original end up in one group (either may be the one kept);
shares are printed per kind and per language of the original (`found/zh`). The false-positive rate is
the share of distinct pages (neither a copy nor an original) that were removed as a copy of anything.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from cleaner.dedup import DedupResult, Doc, deduplicate
from cleaner.pipeline import process_page
from crawler.testweb.config import TestWebConfig
from crawler.testweb.model import SiteModel
from crawler.testweb.text import ALL_LANGUAGES

CLEANER = "blocks_v1"


@dataclass(frozen=True, slots=True)
class Copy:
    original: str  # url
    kind: str
    language: str  # of the original's host


@dataclass(slots=True)
class Planted:
    docs: list[Doc]
    copies: dict[str, Copy]  # by the copy's url


def planted_corpus(seed: int, n_hosts: int, share: float, languages: tuple[str, ...] = ()) -> Planted:
    """Cleaned text of every high-quality page and twin URL, in a random fetch order; ids are URLs."""
    cfg = TestWebConfig(
        n_hosts=n_hosts,
        seed=seed,
        hostile_share=0.0,
        robots_dir="",
        duplicate_share=share,
        languages=languages,
    )
    model = SiteModel(cfg)
    hosts = model.hosts_frame()
    host_language = dict(zip(hosts["host"], hosts["language"], strict=True))
    copies = {
        url: Copy(original, kind, host_language[urlsplit(original).netloc])
        for url, original, kind in model.duplicates_frame().iter_rows()
    }
    urls = model.pages_frame().filter("high_quality")["url"].to_list()
    urls += [url for url, copy in copies.items() if copy.kind == "twin"]
    random.Random(seed).shuffle(urls)
    docs = []
    for url in urls:
        parts = urlsplit(url)
        rendered = model.render(parts.netloc, parts.path)
        result = process_page(rendered.body.decode("utf-8"), url, CLEANER, (), "py3langid")
        docs.append(Doc(url, result.markdown or result.text))
    return Planted(docs, copies)


def evaluate(planted: Planted, result: DedupResult) -> dict[str, float]:
    """Copies found (overall, per kind, per language) and false positives among distinct pages."""

    def group(url: str) -> str:
        return result.removed.get(url, url)

    by_kind: dict[str, list[bool]] = {}
    by_language: dict[str, list[bool]] = {}
    for url, copy in planted.copies.items():
        hit = group(url) == group(copy.original)
        by_kind.setdefault(copy.kind, []).append(hit)
        by_language.setdefault(copy.language, []).append(hit)
    in_pairs = set(planted.copies) | {copy.original for copy in planted.copies.values()}
    distinct = [doc.id for doc in planted.docs if doc.id not in in_pairs]
    wrong = [url for url in distinct if url in result.removed]
    out: dict[str, float] = {}
    for key, hits in sorted(by_kind.items()) + sorted(by_language.items()):
        out[f"found/{key}"] = sum(hits) / len(hits)
    all_hits = [hit for hits in by_kind.values() for hit in hits]
    return out | {
        "copies": len(all_hits),
        "found": sum(all_hits) / len(all_hits),
        "distinct": len(distinct),
        "false_positives": len(wrong),
        "false_positive_rate": len(wrong) / max(1, len(distinct)),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--share", type=float, default=0.1, help="share of high-quality pages planted as copies")
    p.add_argument("--languages", action="store_true", help=f"hosts in {len(ALL_LANGUAGES)} languages")
    args = p.parse_args(argv)
    started = time.perf_counter()
    planted = planted_corpus(args.seed, args.hosts, args.share, ALL_LANGUAGES if args.languages else ())
    built = time.perf_counter()
    result = deduplicate(planted.docs)
    took = time.perf_counter() - built
    figures = evaluate(planted, result)
    print(
        f"seed {args.seed}, {args.hosts} hosts, {len(planted.docs)} cleaned pages ({built - started:.0f} s)"
    )
    print(f"deduplicated in {took:.2f} s ({len(planted.docs) / took:.0f} docs/s): {result.stats()}")
    for key, value in figures.items():
        print(f"  {key:22} {value:.4f}" if isinstance(value, float) else f"  {key:22} {value}")
    met = figures["found"] == 1.0 and figures["false_positive_rate"] < 0.01
    print(f"target (every copy found, false positives < 1%): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
