"""blocks_v1 vs trafilatura on WCXB dev: 5-fold CV grouped by domain (precision, recall and F1 per page type)
and pages/s on one core.

Fold 0 is the held-out split of cleaner/wcxb_heldout.json: its model is trained on exactly the pages the
shipped model is trained on. Also scored: article pages with a comment, related, teaser or newsletter section
beside the article (blocks under such class/id words that are not in the truth), where precision is at stake.

Usage: python -m benchmarks.clean_blocks_cv [--data ../shared/data/wcxb-dev] [--passes 2] [--limit N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cleaner.blocks_model import BlocksCleaner
from cleaner.blocks_train import Example, domain_folds, load_examples, train_model
from cleaner.evaluate import PageScore, TypeScores, score_page, type_scores
from cleaner.labeller import keep_mask
from cleaner.registry import get_cleaner
from cleaner.render import render_text
from cleaner.wcxb import iter_pages, page_ids

FOLDS = 5
SPEED_PAGES = 300
# An article page counts as having a section beside the article when this many of its words sit in
# non-main blocks under comment/related/teaser/newsletter class or id words.
SECTION_MIN_WORDS = 50
# Targets (issue 16): F1 lead over trafilatura, speed ratio, article recall slack.
TARGET_LEAD = 0.05
TARGET_SPEED = 2.0
RECALL_SLACK = 0.01


def has_side_sections(ex: Example) -> bool:
    """An article page whose boilerplate includes a marked comment/related/teaser/newsletter section."""
    words = sum(b.n_words for b, lab in zip(ex.page.blocks, ex.labels, strict=True) if b.sections and not lab)
    return ex.page_type == "article" and words >= SECTION_MIN_WORDS


def _print_table(title: str, scores: dict[str, dict[str, TypeScores]]) -> None:
    names = list(scores)
    print(f"\n{title}: macro word precision / recall / F1")
    print(f"{'type':<15}{'pages':>6}" + "".join(f"{n:>24}" for n in names))
    for page_type, first in scores[names[0]].items():
        cells = "".join(
            f"{s.precision:>8.3f}{s.recall:>8.3f}{s.f1:>8.3f}" for s in (scores[n][page_type] for n in names)
        )
        print(f"{page_type:<15}{first.pages:>6}{cells}")


def _speed(data: Path, ids: list[str], model_cleaner: BlocksCleaner) -> float:
    pages = list(iter_pages(data, ids[:SPEED_PAGES]))
    timings = {}
    for name, cleaner in (("trafilatura_v1", get_cleaner("trafilatura_v1")), ("blocks_v1", model_cleaner)):
        start = time.perf_counter()
        for tp in pages:
            cleaner.clean(tp.html, tp.url)
        timings[name] = len(pages) / (time.perf_counter() - start)
    print(
        f"\npages/s on one core over {len(pages)} pages: "
        + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
    )
    ratio = timings["blocks_v1"] / timings["trafilatura_v1"]
    print(f"ratio blocks_v1 / trafilatura_v1: {ratio:.2f}x")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"
    )
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    ids = page_ids(args.data)
    if args.limit:
        ids = ids[: args.limit]
    truth = {tp.id: tp for tp in iter_pages(args.data, ids)}
    examples = load_examples(args.data, ids)
    folds = domain_folds([e.domain for e in examples], FOLDS)
    trafilatura = get_cleaner("trafilatura_v1")
    rows: dict[str, dict[str, PageScore]] = {"blocks_v1": {}, "trafilatura_v1": {}}
    for ex in examples:
        page = trafilatura.clean(truth[ex.id].html, truth[ex.id].url)
        rows["trafilatura_v1"][ex.id] = score_page(truth[ex.id], page.text if page else "")
    gains = []
    for f in range(FOLDS):
        start = time.perf_counter()
        model = train_model([e for e, g in zip(examples, folds, strict=True) if g != f], passes=args.passes)
        test = [e for e, g in zip(examples, folds, strict=True) if g == f]
        for ex in test:
            text = render_text(ex.page, keep_mask(model.predict(ex.page), model.threshold))
            rows["blocks_v1"][ex.id] = score_page(truth[ex.id], text)
        fold = {n: type_scores(r[e.id] for e in test)["all"].f1 for n, r in rows.items()}
        gains.append(fold["blocks_v1"] - fold["trafilatura_v1"])
        print(f"fold {f}{' (held-out split)' if f == 0 else ''}: {len(test)} pages, blocks_v1 "
              f"{fold['blocks_v1']:.3f} vs trafilatura {fold['trafilatura_v1']:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
    overall = {n: type_scores(r.values()) for n, r in rows.items()}
    _print_table(f"all {FOLDS} folds", overall)
    held = [e.id for e, g in zip(examples, folds, strict=True) if g == 0]
    _print_table("fold 0 (held-out split)", {n: type_scores(r[i] for i in held) for n, r in rows.items()})
    sides = [e.id for e in examples if has_side_sections(e)]
    side = {n: type_scores(r[i] for i in sides) for n, r in rows.items()}
    _print_table("article pages with a comment/related/teaser/newsletter section", side)
    print("\ngain per fold: " + ", ".join(f"{d:+.3f}" for d in gains))
    ratio = _speed(args.data, ids, BlocksCleaner(model=train_model(examples, passes=args.passes)))
    ours, base = overall["blocks_v1"], overall["trafilatura_v1"]
    lead = ours["all"].f1 - base["all"].f1
    art, art_base = ours["article"], base["article"]
    print(f"\ntarget F1 lead >= +{TARGET_LEAD}: {lead:+.3f} {'met' if lead >= TARGET_LEAD else 'MISSED'}")
    print(f"target speed >= {TARGET_SPEED}x: {ratio:.2f}x {'met' if ratio >= TARGET_SPEED else 'MISSED'}")
    ok = art.precision >= art_base.precision and art.recall >= art_base.recall - RECALL_SLACK
    print(f"target article precision >= trafilatura's ({art.precision:.3f} vs {art_base.precision:.3f}), "
          f"recall at most {RECALL_SLACK} below ({art.recall:.3f} vs {art_base.recall:.3f}): "
          f"{'met' if ok else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
