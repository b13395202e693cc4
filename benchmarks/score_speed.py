"""Scorer speed (documents/s on one core) and `hostcrawl score` throughput (pages/s on WARC input).

    .venv/bin/python benchmarks/score_speed.py [--pages 400] [--warc-pages 300] [--cc-copies 300]
    .venv/bin/python benchmarks/score_speed.py --only-scorers   # the scorer table alone, ~2 min

The scorer table runs on three corpora: the default test web (70% English, de/fr/es), the same test
web in its 11 languages (zh, ja, th segmented by heuristic_v3) and the WCXB dev pages; after each
corpus, heuristic_v3's rate against heuristic_v2's (the language-aware scorer's cost over the English
one). Every scorer first scores each corpus once: heuristic_v3 builds a language's profile on its first
page in that language (about 1 s each), a per-process cost the table leaves out.

Targets (issue 4): heuristic >= 2,000 docs/s and fastText >= 5,000 docs/s on one core. Every figure
is printed with its ratio to a baseline measured in the same run (whitespace tokenisation of the
same texts for scorers; reading the same WARC without cleaning for `hostcrawl score`), so numbers
from a busy or a fast machine stay comparable. The fastText model is trained here with DCLM's label
scheme; real models are larger (2-4 GB), so their throughput is lower by cache misses, not by code.
The "fasttext floor" row (dim 16, no bigrams) is what fastText's own tokenising and hashing cost: no
fastText model scores a corpus faster, so a target above it is out of reach on that corpus's lengths.

`hostcrawl score` scaling: the real Common Crawl capture in ../shared/data/cc/warc (one Wikipedia page
with its warcinfo, request and metadata records) is copied --cc-copies times into one WARC and scored
with 1 and 2 workers. Each run is split into start-up (the same command on one task of pages per
worker: spawning and importing the workers, loading models) and steady pages/s, with CPU per page,
cores used and the load average around each run: the 2-worker ratio only means something when two
cores are free.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import WARCIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from cleaner import decode_html, process_page
from cleaner.quality import get_language_identifier, get_scorer
from cleaner.quality.langid import MAX_LANGID_CHARS, RECENT_HEADS, PackagedIdentifier
from cleaner.quality.train import fit_supervised
from crawler.archive.score_warcs import PAGES_PER_TASK, register_cli
from crawler.testweb import SiteModel, TestWebConfig
from crawler.testweb.text import ALL_LANGUAGES

REPO = Path(__file__).resolve().parent.parent
WCXB = REPO.parent / "shared" / "data" / "wcxb-dev"
CC_WARC = REPO.parent / "shared" / "data" / "cc" / "warc" / "cc-main-2024-22-whirlwind.warc.gz"
TARGETS = {"heuristic": 2_000.0, "fasttext": 5_000.0}
MIN_SECONDS = 2.0  # repeat each measurement until it has run this long


def docs_per_second(fn: Callable[[Sequence[str]], object], texts: Sequence[str]) -> float:
    """Best-of-repeats throughput of `fn` over the whole list, on this process's one core."""
    best, elapsed = 0.0, 0.0
    while elapsed < MIN_SECONDS:
        start = time.perf_counter()
        fn(texts)
        took = time.perf_counter() - start
        elapsed += took
        best = max(best, len(texts) / took)  # other work on a shared machine only ever slows a round
    return best


def language_known_rate(fn: Callable[[Sequence[str]], object], texts: Sequence[str]) -> float:
    """docs/s of `fn` on texts whose language the pipeline identified just before (untimed), page by
    page as process_pages does: heuristic_v3 then finds py3langid's verdicts remembered (RECENT_HEADS)."""
    identify, chunk = get_language_identifier().identify, RECENT_HEADS // 2
    best, elapsed = 0.0, 0.0
    while elapsed < MIN_SECONDS:
        took = 0.0
        for start in range(0, len(texts), chunk):
            for text in texts[start : start + chunk]:
                identify(text)
            began = time.perf_counter()
            for text in texts[start : start + chunk]:
                fn([text])
            took += time.perf_counter() - began
        elapsed += took
        best = max(best, len(texts) / took)
    return best


def test_web_html(n: int, languages: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    model = SiteModel(TestWebConfig(n_hosts=200, seed=11, hostile_share=0.0, languages=languages))
    rows = model.pages_frame().sample(n=n, seed=2).iter_rows(named=True)
    out = []
    for row in rows:
        body = model.render(row["host"], row["path"]).body
        out.append((row["url"], decode_html(body if isinstance(body, bytes) else body.encode())))
    return out


def wcxb_texts() -> list[str]:
    if not WCXB.is_dir():
        return []
    texts = []
    for path in sorted((WCXB / "ground-truth").glob("*.json")):
        text = json.loads(path.read_text())["ground_truth"].get("main_content") or ""
        if text.strip():
            texts.append(text)
    return texts


def train_dclm_like(texts: Sequence[str], root: Path, dim: int = 256, ngrams: int = 2) -> Path:
    """A model with DCLM's labels, trained on the benchmark's own texts (labels by length).

    DCLM's shape is 256 dimensions with word bigrams; dim 16 without bigrams is the floor: what
    fastText's own tokenising and hashing cost per document, whatever the model.
    """
    lines = [f"__label__{'hq' if len(t) > 2000 else 'cc'} {' '.join(t.split())}\n" for t in texts]
    (root / "train.txt").write_text("".join(lines))
    params = {"input": str(root / "train.txt"), "dim": dim, "wordNgrams": ngrams, "bucket": 200_000}
    out = root / f"dclm-{dim}-{ngrams}.bin"
    fit_supervised({**params, "epoch": 3, "thread": 1, "verbose": 0}, out)
    return out


def scorer_table(corpora: dict[str, list[str]], model: Path, floor: Path) -> None:
    classify = PackagedIdentifier().model.classify  # py3langid's own walk, as before langid_batch.py
    scorers = {
        "heuristic_v1": get_scorer("heuristic_v1").score_batch,
        "heuristic_v2": get_scorer("heuristic_v2").score_batch,
        "heuristic_v3": get_scorer("heuristic_v3").score_batch,
        "fasttext (dclm scheme)": get_scorer(f"dclm={model}").score_batch,
        "fasttext floor (dim 16)": get_scorer(f"dclm={floor}").score_batch,
        "langid py3langid": get_language_identifier().identify_batch,
        "langid page by page": lambda ts: [classify(t[:MAX_LANGID_CHARS]) for t in ts],
    }
    for fn in scorers.values():  # per-process tables, models and language profiles: built once, not timed
        for texts in corpora.values():
            fn(texts)
    print(f"\n{'scorer':<24}{'corpus':<12}{'docs/s':>10}{'x baseline':>12}{'target':>9}")
    for corpus, texts in corpora.items():
        baseline = docs_per_second(lambda ts: [len(t.split()) for t in ts], texts)
        print(f"{'baseline (str.split)':<24}{corpus:<12}{baseline:>10,.0f}{1.0:>12.3f}{'':>9}")
        rates = {}
        for name, fn in scorers.items():
            rates[name] = rate = docs_per_second(fn, texts)
            target = None if "floor" in name else TARGETS.get(name.split()[0].split("_")[0])
            verdict = "" if target is None else ("ok" if rate >= target else "BELOW")
            print(f"{name:<24}{corpus:<12}{rate:>10,.0f}{rate / baseline:>12.4f}{verdict:>9}")
        v3_page = language_known_rate(get_scorer("heuristic_v3").score_batch, texts)
        v2_page = language_known_rate(get_scorer("heuristic_v2").score_batch, texts)
        for name, rate in (("heuristic_v2 per page", v2_page), ("heuristic_v3 per page", v3_page)):
            print(f"{name:<24}{corpus:<12}{rate:>10,.0f}{rate / baseline:>12.4f}{'':>9}")
        slower = rates["heuristic_v2"] / rates["heuristic_v3"]
        print(f"{'':<24}{corpus:<12}heuristic_v3 is {slower:.2f}x slower than heuristic_v2 (batches);")
        print(f"{'':<36}{v2_page / v3_page:.2f}x page by page with the language known, as in a crawl")


def write_warc(pages: Sequence[tuple[str, str]], path: Path) -> None:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for url, html in pages:
        content_type = [("Content-Type", "text/html; charset=utf-8")]
        headers = StatusAndHeaders("200 OK", content_type, protocol="HTTP/1.1")
        payload = io.BytesIO(html.encode("utf-8"))
        writer.write_record(writer.create_warc_record(url, "response", payload=payload, http_headers=headers))
    path.write_bytes(buf.getvalue())


def read_only(path: Path) -> int:
    """Baseline: walk the WARC and read every payload, no cleaning."""
    n = 0
    with path.open("rb") as fh:
        for record in WARCIterator(fh):
            if record.rec_type == "response":
                record.content_stream().read()
                n += 1
    return n


@dataclass(frozen=True, slots=True)
class Run:
    """Wall and CPU seconds of one `hostcrawl score` run (children: the worker processes)."""

    wall: float
    cpu_main: float
    cpu_workers: float

    def __sub__(self, other: Run) -> Run:
        return Run(
            self.wall - other.wall, self.cpu_main - other.cpu_main, self.cpu_workers - other.cpu_workers
        )


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_score(warc: Path, out: Path, workers: int) -> Run:
    """One `hostcrawl score` run with the default cleaner and scorer."""
    parser = argparse.ArgumentParser()
    register_cli(parser.add_subparsers())
    argv = ["score", "--warc", str(warc), "--out", str(out), "--workers", str(workers), "--no-progress"]
    args = parser.parse_args(argv)
    wall, main, children = time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    with contextlib.redirect_stderr(io.StringIO()) as summary:  # its summary table, not the figures
        status = args.func(args)
    if status != 0:
        raise RuntimeError(f"hostcrawl score failed on {warc}:\n{summary.getvalue()}")
    return Run(
        time.perf_counter() - wall,
        _cpu(resource.RUSAGE_SELF) - main,
        _cpu(resource.RUSAGE_CHILDREN) - children,  # counted once the pool has joined its workers
    )


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def cc_scaling(copies: int, root: Path, repeats: int) -> None:
    """1 vs 2 workers on the real CC capture repeated `copies` times (gzip members concatenate).

    Runs alternate (1, 2, 1, 2, ...) and the best of `repeats` counts, as other work on a shared
    machine only ever slows a run down. Steady figures leave out start-up (the same run on one
    task's worth of pages per worker, so every worker has loaded its models). CPU per page shows
    whether two workers cost more work than one; cores used shows how much of the machine the run
    got (on 2 busy cores, 2 workers cannot beat 1).
    """
    member = CC_WARC.read_bytes()
    many = root / "cc-many.warc.gz"
    many.write_bytes(member * copies)
    pages = read_only(many)
    warm = {}
    for workers in (1, 2):
        warm[workers] = root / f"cc-warm-{workers}.warc.gz"
        warm[workers].write_bytes(member * (workers * PAGES_PER_TASK))
    print(f"\nhostcrawl score, real CC capture x{copies}: {pages} HTML pages, {many.stat().st_size:,} bytes")
    columns = (
        "workers",
        "start-up s",
        "total s",
        "pages/s",
        "steady p/s",
        "CPU ms/page",
        "cores used",
        "main CPU",
    )
    print("".join(f"{c:>12}" for c in columns) + "   load before -> after")
    best: dict[int, float] = {}
    for _ in range(repeats):
        for workers in (1, 2):
            before = load()
            startup = run_score(warm[workers], root / f"cc-warm-{workers}.parquet", workers)
            total = run_score(many, root / f"cc-many-{workers}.parquet", workers)
            steady, steady_pages = total - startup, pages - workers * PAGES_PER_TASK
            cpu = steady.cpu_main + steady.cpu_workers
            rate = steady_pages / max(steady.wall, 1e-9)
            best[workers] = max(best.get(workers, 0.0), rate)
            figures = (
                f"{workers:>12}{startup.wall:>12.2f}{total.wall:>12.2f}{pages / total.wall:>12.1f}"
                f"{rate:>12.1f}"
                f"{1000 * cpu / steady_pages:>12.1f}{cpu / max(steady.wall, 1e-9):>12.2f}"
                f"{steady.cpu_main / max(cpu, 1e-9):>12.0%}"
            )
            print(f"{figures}   {before} -> {load()}")
    ratio = best[2] / best[1]
    print(f"best steady pages/s: 1 worker {best[1]:.1f}, 2 workers {best[2]:.1f}: {ratio:.2f}x")
    print(f"(cores: {os.cpu_count()}; 2x needs two idle cores: compare 'cores used' and the load)")


def score_throughput(pages: Sequence[tuple[str, str]], root: Path) -> None:
    warc = root / "bench.warc.gz"
    write_warc(pages, warc)
    start = time.perf_counter()
    n = read_only(warc)
    baseline = n / (time.perf_counter() - start)
    start = time.perf_counter()
    for url, html in pages:
        process_page(html, url, "trafilatura_v1", ("heuristic_v2",))
    in_loop = len(pages) / (time.perf_counter() - start)
    print(f"\nhostcrawl score on {n} test-web pages ({warc.stat().st_size:,} bytes of WARC)")
    print(f"{'run':<34}{'pages/s':>10}{'x baseline':>12}")
    print(f"{'baseline: read WARC only':<34}{baseline:>10,.1f}{1.0:>12.4f}")
    print(f"{'process_page loop, 1 core':<34}{in_loop:>10,.1f}{in_loop / baseline:>12.4f}")
    for workers in (1, 2):
        rate = n / run_score(warc, root / f"pages-{workers}.parquet", workers).wall
        label = f"hostcrawl score --workers {workers}"
        print(f"{label:<34}{rate:>10,.1f}{rate / baseline:>12.4f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process {peak:,.0f} MiB (workers are separate processes)")


def main() -> int:
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--pages", type=int, default=400, help="test-web pages for scorer speed")
    parser.add_argument("--warc-pages", type=int, default=300, help="pages in the WARC for `hostcrawl score`")
    parser.add_argument("--cc-copies", type=int, default=300, help="copies of the real CC capture (0: skip)")
    parser.add_argument("--cc-repeats", type=int, default=2, help="alternating 1/2-worker rounds on it")
    parser.add_argument(
        "--only-cc", action="store_true", help="only the `hostcrawl score` scaling on the CC WARC"
    )
    parser.add_argument("--only-scorers", action="store_true", help="only the scorer table")
    args = parser.parse_args()
    if args.only_scorers:
        args.cc_copies = args.warc_pages = 0
    if args.only_cc or args.cc_copies:
        if not CC_WARC.is_file():
            print(f"no {CC_WARC}: skipping the CC scaling run")
        elif args.only_cc:
            with tempfile.TemporaryDirectory() as tmp:
                cc_scaling(args.cc_copies or 300, Path(tmp), args.cc_repeats)
            return 0
    html = test_web_html(max(args.pages, args.warc_pages))
    extracted = (process_page(h, u, "trafilatura_v1", (), None).text for u, h in html[: args.pages])
    web_texts = [text for text in extracted if text]
    html_ml = test_web_html(args.pages, ALL_LANGUAGES)
    ml_texts = [t for t in (process_page(h, u, "trafilatura_v1", (), None).text for u, h in html_ml) if t]
    corpora = {"test web": web_texts, "11 langs": ml_texts, "wcxb-dev": wcxb_texts()}
    corpora = {k: v for k, v in corpora.items() if v}
    for name, texts in corpora.items():
        print(f"{name}: {len(texts)} texts, mean {sum(map(len, texts)) / len(texts):,.0f} characters")
    with tempfile.TemporaryDirectory() as tmp:
        everything = [t for texts in corpora.values() for t in texts]
        model = train_dclm_like(everything, Path(tmp))
        floor = train_dclm_like(everything, Path(tmp), dim=16, ngrams=1)
        scorer_table(corpora, model, floor)
        if args.warc_pages:
            score_throughput(html[: args.warc_pages], Path(tmp))
        if args.cc_copies and CC_WARC.is_file():
            cc_scaling(args.cc_copies, Path(tmp), args.cc_repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
