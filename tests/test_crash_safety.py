"""The pieces behind crash safety: sinks cut back to the frontier's last commit, counters summed over
the processes of a run, and a frontier that holds no pickle and refuses one."""

from __future__ import annotations

import pickle
import random
import subprocess
from pathlib import Path

import pytest
import zstandard
from hostcrawl_cli import HOSTCRAWL

from crawler.pages.sinks import (
    PAGES_SPOOL,
    PageSpool,
    SinkCheckpoint,
    TextSink,
    cut_to_checkpoint,
    read_text_shards,
)
from crawler.run.crawl_run import recover_run
from crawler.run.run_stats import ATTEMPTS, STATS_META, dumps_stats, merge_stats
from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.policies import make_policy
from scheduler.resume import load_frontier
from scheduler.sqlite_store import FrontierError, SQLiteFrontier, decode_meta, encode_meta


def frames_are_closed(path: Path) -> bool:
    """A strict reader (the zstd CLI, datatrove) needs every frame ended, not only the bytes present."""
    data = path.read_bytes()
    while data:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        decoder.decompress(data)
        if not decoder.eof:
            return False
        data = decoder.unused_data
    return True


def test_sinks_are_cut_back_to_the_last_commit_and_left_readable(tmp_path: Path) -> None:
    text, spool = TextSink(tmp_path / "text", docs_per_file=3), PageSpool(tmp_path / PAGES_SPOOL)
    for i in range(4):  # a full shard, then one more document
        text.write({"id": i})
        spool.write({"url": f"u{i}"})
    committed = SinkCheckpoint(spool.position(), *text.position())
    for i in range(4, 9):  # written, never committed: the process is killed here
        text.write({"id": i})
        spool.write({"url": f"u{i}"})
    # no close(): the shard being written has no frame end, like after a kill -9
    cut, _ = cut_to_checkpoint(tmp_path, committed)
    assert cut == {"rows": 5, "docs": 5}
    assert [d["id"] for d in read_text_shards(tmp_path / "text")] == [0, 1, 2, 3]
    assert (tmp_path / PAGES_SPOOL).read_text().count("\n") == 4
    assert all(frames_are_closed(p) for p in (tmp_path / "text").glob("*.zst"))
    resumed = TextSink(tmp_path / "text", docs_per_file=3)  # a resumed run starts a new shard after them
    resumed.write({"id": 9})
    resumed.close()
    assert [d["id"] for d in read_text_shards(tmp_path / "text")] == [0, 1, 2, 3, 9]


def test_a_cut_at_any_document_keeps_every_committed_document(tmp_path: Path) -> None:
    """Page-sized documents (kilobytes, several zstd blocks each): a cut right after document k keeps
    exactly k + 1 of them, and cutting again before any new commit keeps the same ones."""
    rng = random.Random(7)
    words = ["crawl", "host", "quality", "sample", "frontier", "politeness"]
    for k in range(0, 40, 3):
        run = tmp_path / f"cut{k}"
        text, spool = TextSink(run / "text"), PageSpool(run / PAGES_SPOOL)
        committed = SinkCheckpoint()
        for i in range(40):
            n_words = rng.randrange(50, 4000)
            body = " ".join(rng.choice(words) + str(rng.randrange(10**6)) for _ in range(n_words))
            text.write({"id": i, "text": body})
            spool.write({"url": f"u{i}"})
            if i == k:
                committed = SinkCheckpoint(spool.position(), *text.position())
        cut, now = cut_to_checkpoint(run, committed)
        assert [d["id"] for d in read_text_shards(run / "text")] == list(range(k + 1)), f"cut after doc {k}"
        assert cut["docs"] == 39 - k
        cut_to_checkpoint(run, now)  # killed again before the resumed run committed anything
        assert [d["id"] for d in read_text_shards(run / "text")] == list(range(k + 1))


def test_no_checkpoint_means_no_page_was_committed(tmp_path: Path) -> None:
    text, spool = TextSink(tmp_path / "text"), PageSpool(tmp_path / PAGES_SPOOL)
    text.write({"id": 0})
    spool.write({"url": "u0"})
    cut_to_checkpoint(tmp_path, SinkCheckpoint.from_json(None))
    assert read_text_shards(tmp_path / "text") == [] and (tmp_path / PAGES_SPOOL).read_bytes() == b""


def test_counters_add_up_over_the_processes_of_a_run() -> None:
    first = {"page/curated": 5, "clean/queue_peak": 40, "start_time": "t0", "finish_reason": "shutdown"}
    second = {"page/curated": 7, "clean/queue_peak": 30, "start_time": "t1", "finish_reason": "finished"}
    merged = merge_stats(first, second)
    assert merged == {
        "page/curated": 12, "clean/queue_peak": 40, "start_time": "t0", "finish_reason": "finished"
    }  # fmt: skip


def test_a_process_killed_before_its_first_commit_still_counts_as_an_attempt(tmp_path: Path) -> None:
    """CI killed a resumed crawl before it committed a page: stats.json said 3 attempts of 4."""
    store = SQLiteFrontier(tmp_path / "frontier.sqlite3")
    store.set_meta(STATS_META, dumps_stats({ATTEMPTS: 1, "page/curated": 5}))  # the first process, committed
    store.close()
    assert recover_run(tmp_path)[ATTEMPTS] == 1  # the second starts; it is killed before any commit
    prior = recover_run(tmp_path)  # so the third finds no counters of the second's
    assert prior[ATTEMPTS] == 2 and prior["page/curated"] == 5
    assert recover_run(tmp_path)[ATTEMPTS] == 3


def test_request_meta_is_stored_as_json() -> None:
    meta = {"retry_times": 1, "redirect_urls": ["http://a.example/"]}
    extra = encode_meta(meta)
    assert extra is not None and extra.startswith(b"{")
    assert decode_meta(extra) == meta


class _Payload:
    """Unpickling this would create a file: proof that nothing was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (str(self.marker), "code ran"))  # type: ignore[return-value]


def test_a_frontier_row_holding_a_pickle_is_refused_without_unpickling_it(tmp_path: Path) -> None:
    run, marker = tmp_path / "run", tmp_path / "pwned"
    run.mkdir()
    (run / "config.toml").write_text('seeds = ["http://a.example/"]\n')
    store = SQLiteFrontier(run / "frontier.sqlite3")
    payload = pickle.dumps(_Payload(marker))
    store.push_many([(store.new_row_id(), "a.example", "http://a.example/x", 0, 0, payload, 0, 0, None)])
    store.close()
    command = [*HOSTCRAWL, "crawl", "--no-progress", "--resume", str(run)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "not JSON" in result.stderr and "frontier.sqlite3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()
    assert not (run / "warc").exists() and not (run / "pages.parquet").exists()  # nothing half-written


def _frontier(path: Path, budget: int) -> HostFrontier:
    return HostFrontier(SQLiteFrontier(path), make_policy("bfs"), FrontierLimits(budget=budget), lambda: 0.0)


def test_a_page_fetched_but_not_scored_is_cleaned_again_not_fetched_again(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    frontier = _frontier(path, budget=3)
    for host in ("a", "b", "c"):  # one request in flight per host
        frontier.add(f"http://{host}.example/", 0)
    first, second = frontier.next(), frontier.next()
    assert first is not None and second is not None
    for lease in (first, second):
        frontier.fetch_ended(lease, True, 0.0)
    frontier.store.fetched(first.row_id, {"url": first.url, "phase": first.phase.value}, "<p>kept</p>")
    frontier.commit()
    frontier.store.close()  # killed: `first` awaits its score, `second` was archived but not committed

    resumed = _frontier(path, budget=3)
    assert load_frontier(resumed) == 1  # only `second` goes back to the queue
    [(lease, page)] = resumed.recovered
    assert (lease.url, page.html, lease.fetched) == (first.url, "<p>kept</p>", True)
    assert resumed.progress.fetched == 1 and resumed.budget_left() == 2  # its fetch stays spent
    handed = [resumed.next(), resumed.next()]
    assert {h.url for h in handed if h} == {second.url, "http://c.example/"}
    assert resumed.next() is None  # budget spent; `first` is never handed out again
    resumed.observe(lease, 0.9)
    assert not list(resumed.store.fetched_pages())  # scored: done, gone from the frontier


def test_a_host_or_politeness_row_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    store = SQLiteFrontier(path)
    store.db.execute("INSERT INTO politeness VALUES ('a.example', 'robots', ?)", (pickle.dumps({"x": 1}),))
    store.close()
    store = SQLiteFrontier(path)
    with pytest.raises(FrontierError, match=r"politeness state 'robots' of host 'a\.example' is not JSON"):
        store.check()
