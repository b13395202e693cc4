"""Encoder cleaner pages/s end to end on WCXB dev pages: CPU preparation on all cores, the model on one GPU.

    python -m benchmarks.clean_encoder --model PATH_OR_HUB_ID          # trained weights (a Pulpie model)
    python -m benchmarks.clean_encoder --random 210m                   # EuroBERT-210m shape, random weights
    python -m benchmarks.clean_encoder --random tiny --pages 50        # CPU smoke run
    python -m benchmarks.clean_encoder --stage DIR --pages 800         # WCXB-format subset to carry elsewhere

End to end is: MinerU simplification (Pulpie's input), tokenize and pack in a process pool (all cores but
one), forward passes in this process on one device (bf16 on CUDA), labels mapped back to `_item_id`s, the
main content cut from the marked DOM and rendered as plain text (in this process, as the crawl's GPU
worker does). A randomly initialised model of the published shape costs the same forward time as
trained weights; its tokenizer is trained here on the pages (byte-level BPE), so report tokens/page with it.
Baselines measured in the same run: simplification alone on the same pool, and the forward passes alone.
Target (issue 5): >= 100 pages/s for a 210M encoder on one H200.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleaner.encoder import BATCH_TOKENS, MAX_CHUNK_TOKENS, BlockPacker, Chunk, EncoderLabeller, block_labels
from cleaner.item_labeller import ItemPage, item_page, render_main
from cleaner.model_source import ModelSource
from cleaner.wcxb import iter_pages, page_ids

# Pages whose chunks go to the model together: enough to fill a few batches, little latency.
GROUP_PAGES = 64
# Pages whose block texts train a random model's tokenizer (untimed).
TOKENIZER_PAGES = 300
VOCAB = {"tiny": 4_096, "210m": 32_768}
# Pool tasks handed to a worker at once: amortises IPC without starving the tail.
POOL_CHUNKSIZE = 2
TARGET_PAGES_S = 100.0
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"


@dataclass(slots=True)
class Prepared:
    """One page after the CPU stages: its chunks, the simplified page, and what each stage cost."""

    chunks: list[Chunk]
    page: ItemPage
    simplify_s: float
    pack_s: float


@functools.lru_cache(maxsize=1)
def _packer(model: str, max_tokens: int) -> BlockPacker:
    """One tokenizer per worker process, loaded by the pool initializer."""
    return BlockPacker.load(ModelSource(model), max_tokens)


def prepare(task: tuple[str, int, str]) -> Prepared:
    """HTML -> `_item_id` blocks -> token chunks."""
    model, max_tokens, html = task
    t0 = time.perf_counter()
    page = item_page(html)
    t1 = time.perf_counter()
    chunks = _packer(model, max_tokens).pack(0, page.blocks)
    return Prepared(chunks, page, t1 - t0, time.perf_counter() - t1)


def simplify_only(html: str) -> int:
    """The baseline stage: simplification alone."""
    return len(item_page(html).blocks)


def block_texts(html: str) -> str:
    """A page's simplified HTML, for training the random model's tokenizer."""
    return item_page(html).simplified


def label_group(labeller: EncoderLabeller, group: list[Prepared]) -> tuple[list[str], float, float]:
    """Forward one group of pages and render each page's main content; returns texts and (forward, map) s."""
    chunks: list[Chunk] = []
    for index, prepared in enumerate(group):
        for chunk in prepared.chunks:
            chunk.page = index
            chunks.append(chunk)
    t0 = time.perf_counter()
    probs = labeller.label_chunks(chunks, [len(p.page.blocks) for p in group])
    t1 = time.perf_counter()
    out = []
    for prepared, p in zip(group, probs, strict=True):
        cleaned = render_main(prepared.page, block_labels(prepared.page.item_ids, p), "encoder_v2")
        out.append(cleaned.text if cleaned is not None else "")
    return out, t1 - t0, time.perf_counter() - t1


def stage(data: Path, out: Path, n_pages: int) -> None:
    """Copy an evenly spread WCXB-format subset (HTML as is, ground truth reduced to the URL) to `out`."""
    ids = page_ids(data)
    chosen = ids[:: max(len(ids) // n_pages, 1)][:n_pages]
    meta = json.loads((data / "metadata.json").read_text(encoding="utf-8"))["files"]
    (out / "html").mkdir(parents=True, exist_ok=True)
    (out / "ground-truth").mkdir(exist_ok=True)
    for file_id in chosen:
        (out / "html" / f"{file_id}.html.gz").write_bytes((data / "html" / f"{file_id}.html.gz").read_bytes())
        truth = json.loads((data / "ground-truth" / f"{file_id}.json").read_text(encoding="utf-8"))
        (out / "ground-truth" / f"{file_id}.json").write_text(json.dumps({"url": truth.get("url", "")}))
    (out / "metadata.json").write_text(json.dumps({"files": {i: meta.get(i, {}) for i in chosen}}))
    (out / "LICENSE").write_text(f"WCXB dev pages by Murrough Foley, CC-BY-4.0 (see {data / 'LICENSE'}).\n")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"staged {len(chosen)} pages in {out} ({size / 2**20:.1f} MiB)")


def load_htmls(data: Path, n_pages: int | None) -> list[str]:
    """Evenly spread pages of the folder, decoded as the crawler decodes them."""
    ids = page_ids(data)
    if n_pages:
        ids = ids[:: max(len(ids) // n_pages, 1)][:n_pages]
    return [page.html for page in iter_pages(data, ids)]


def describe(labeller: EncoderLabeller) -> str:
    """Parameters, dtype and device of the loaded model."""
    model = labeller.model
    params = sum(p.numel() for p in model.parameters())
    dtype = next(model.parameters()).dtype
    where = str(labeller.device)
    torch = labeller.torch
    if labeller.device.type == "cuda":
        where += f" ({torch.cuda.get_device_name(labeller.device)})"
    import transformers

    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    return f"{type(model).__name__}, {params / 1e6:.1f}M parameters, {dtype}, on {where} ({versions})"


def run(args: argparse.Namespace, model: str, htmls: list[str], plain: Any) -> None:
    """Baselines and the end-to-end run, printed with the split of time."""
    labeller = EncoderLabeller(
        model,
        device=args.device,
        max_tokens=args.max_tokens,
        batch_tokens=args.batch_tokens,
        attn_implementation=args.attn,
    )
    max_tokens = labeller.packer.max_tokens
    attn = labeller.model.config._attn_implementation
    print(f"model: {describe(labeller)}, {attn} attention")
    print(f"chunks <= {max_tokens} tokens, batches <= {args.batch_tokens} tokens; workers {args.workers}")
    work = htmls * args.repeat
    t0 = time.perf_counter()
    list(plain.imap_unordered(simplify_only, work, chunksize=POOL_CHUNKSIZE))
    simplify_rate = len(work) / (time.perf_counter() - t0)
    # Warm-up (kernels, allocator, lazy imports): a few pages end to end, untimed.
    label_group(labeller, [prepare((model, max_tokens, h)) for h in htmls[:8]])
    tasks = [(model, max_tokens, h) for h in work]
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(args.workers, initializer=_packer, initargs=(model, max_tokens)) as pool:
        list(pool.imap_unordered(simplify_only, htmls[: args.workers * 4]))  # workers up and loaded
        wait = forward = mapping = 0.0
        groups: list[list[Prepared]] = []
        group: list[Prepared] = []
        kept_pages = 0
        t0 = time.perf_counter()
        results = pool.imap_unordered(prepare, tasks, chunksize=POOL_CHUNKSIZE)
        while True:
            t = time.perf_counter()
            prepared = next(results, None)
            wait += time.perf_counter() - t
            if prepared is not None:
                group.append(prepared)
            if group and (prepared is None or len(group) >= args.group_pages):
                texts, f, m = label_group(labeller, group)
                forward, mapping = forward + f, mapping + m
                kept_pages += sum(bool(t) for t in texts)
                groups.append(group)
                group = []
            if prepared is None:
                break
        total = time.perf_counter() - t0
    t0 = time.perf_counter()
    for g in groups:
        labeller.label_chunks([c for p in g for c in p.chunks], [len(p.page.blocks) for p in g])
    forward_alone = time.perf_counter() - t0
    pages = [p for g in groups for p in g]
    n = len(pages)
    tokens = [sum(len(c.ids) for c in p.chunks) for p in pages]
    chars = sum(len(b) for p in pages for b in p.page.blocks)
    cpu = [p.simplify_s + p.pack_s for p in pages]
    rate = n / total
    print(f"{n} pages ({len(htmls)} x {args.repeat}); {kept_pages} with kept text")
    print(
        f"tokens/page: mean {statistics.mean(tokens):.0f}, median {statistics.median(tokens):.0f}, "
        f"max {max(tokens)}; chunks/page {sum(len(p.chunks) for p in pages) / n:.2f}; "
        f"chars/token {chars / max(sum(tokens), 1):.2f}"
    )
    print(f"simplify alone (prep workers):    {simplify_rate:8.1f} pages/s")
    print(
        f"forward alone (one device):      {n / forward_alone:8.1f} pages/s "
        f"({sum(tokens) / forward_alone:,.0f} tokens/s)"
    )
    print(
        f"end to end:                      {rate:8.1f} pages/s  "
        f"({rate / simplify_rate:.2f}x simplify alone; target >= {TARGET_PAGES_S:.0f} for 210M on one H200)"
    )
    print(
        f"main process: {total:.2f} s = waiting on preparation {wait:.2f} s ({wait / total:.0%}), "
        f"forward {forward:.2f} s ({forward / total:.0%}), "
        f"map back and render {mapping:.2f} s ({mapping / total:.0%})"
    )
    per_page = {k: 1e3 * sum(getattr(p, k) for p in pages) / n for k in ("simplify_s", "pack_s")}
    print(
        f"preparation CPU per page: simplify {per_page['simplify_s']:.1f} ms, tokenize+pack "
        f"{per_page['pack_s']:.1f} ms -> pool capacity "
        f"{args.workers * n / sum(cpu):.0f} pages/s"
    )
    bound = "preparation (CPU)" if wait > forward else "forward (device)"
    print(f"bottleneck: {bound}")
    torch = labeller.torch
    if labeller.device.type == "cuda":
        print(f"peak device memory: {torch.cuda.max_memory_allocated(labeller.device) / 2**30:.1f} GiB")


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a WCXB-format folder")
    parser.add_argument("--pages", type=int, default=0, help="evenly spread pages to use (0: all)")
    parser.add_argument("--repeat", type=int, default=1, help="times each page goes through (longer runs)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="local model folder or hub id of a token-classification encoder")
    source.add_argument("--random", choices=sorted(VOCAB), help="random EuroBERT of this shape, built here")
    source.add_argument("--stage", type=Path, help="write a WCXB subset of --pages pages here, exit")
    parser.add_argument("--model-dir", type=Path, help="with --random: keep the model here")
    parser.add_argument("--attn", help="attention implementation (transformers' default: sdpa)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    parser.add_argument("--workers", type=int, default=max((os.cpu_count() or 2) - 1, 1))
    parser.add_argument("--max-tokens", type=int, default=MAX_CHUNK_TOKENS)
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS)
    parser.add_argument("--group-pages", type=int, default=GROUP_PAGES)
    args = parser.parse_args()
    if args.stage:
        stage(args.data, args.stage, args.pages or len(page_ids(args.data)))
        return
    # Each worker tokenizes one page at a time; Rust-side threads would only fight the pool for cores.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    htmls = load_htmls(args.data, args.pages or None)
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(args.workers) as plain, tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if args.random:
            from cleaner.encoder import save_random_encoder

            texts = plain.map(block_texts, htmls[:TOKENIZER_PAGES])
            out = args.model_dir or Path(tmp)
            model = str(save_random_encoder(out, texts, args.random, VOCAB[args.random]))
        run(args, model, htmls, plain)


if __name__ == "__main__":
    main()
