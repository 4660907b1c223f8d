"""The concurrency bench's harness stays alive (``benches/concurrency.py``), at a tiny scale.

Untimed (performance.md: numbers live in ``benches/RESULTS.md``): every stream of every
round completes with the result one stream alone gives, the gather really has every stream
on its own connection, and the client process ends with the file descriptors it started with.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``benches`` lives in the source tree, it is not installed
    sys.path.insert(0, str(ROOT))

from benches import concurrency  # noqa: E402


def test_concurrency_bench_completes_every_stream_and_leaves_no_fd_open() -> None:
    rows = concurrency.measure(n=6, streams=("text", "tool_parallel"), scale=0.02, pairs=2)
    assert [(r.stream, r.client) for r in rows] == [
        ("text", "default"),
        ("text", "wide"),
        ("tool_parallel", "default"),
        ("tool_parallel", "wide"),
    ]
    for r in rows:
        # 2 rounds one at a time; the first round and 2 more all at once: 6 streams each.
        assert (r.one.streams, r.one.complete, r.one.failed) == (12, 12, [])
        assert (r.many.streams, r.many.complete, r.many.failed) == (18, 18, [])
        assert len(r.one.cpu) == len(r.many.cpu) == len(r.ratios) == 2
        assert r.connections == 6  # every stream of the gather on its own socket
        assert r.fds_after == r.fds_before
    table = concurrency.concurrency_markdown(rows, "python -m benches.concurrency --quick")
    assert table.count("| 30 of 30 |") == 4
    assert "did not complete" not in table


def test_concurrency_bench_counts_a_stream_that_fails() -> None:
    stream = concurrency.corpus.build("text", scale=0.02)
    tally = concurrency.Tally()
    good = concurrency.StreamAggregator(deltas=False)
    good.feed(stream.body)
    cut = concurrency.StreamAggregator(deltas=False)
    cut.feed(stream.body[: len(stream.body) // 2])
    outcomes = [
        (good.close(), stream.events, 1),
        (cut.close(), stream.events // 2, 1),
        ConnectionResetError("reset by peer"),
    ]
    concurrency._check(tally, outcomes, stream, concurrency._expected(stream))
    assert (tally.streams, tally.complete) == (3, 1)
    assert tally.failed[1] == "ConnectionResetError: reset by peer"
    assert tally.failed[0].startswith("incomplete: ")
    assert len(tally.failed) == 2


def test_concurrency_bench_paced_streams_all_complete() -> None:
    done = concurrency.completion(n=4, stream="text", scale=0.02, seconds=0.2, pairs=2, k=2)
    assert [c.client for c in done] == ["default", "wide"]
    for c in done:
        assert (c.first.streams, c.first.complete, c.first.failed) == (4, 4, [])
        # 2 rounds of 2 one at a time, 2 rounds of 4 at once
        assert (c.one.streams, c.one.complete, c.one.failed) == (4, 4, [])
        assert (c.many.streams, c.many.complete, c.many.failed) == (8, 8, [])
        assert len(c.ratios) == 2
        assert c.fds_after == c.fds_before
    table = concurrency.completion_markdown(done, "python -m benches.concurrency --paced 0.2")
    assert table.count("| 16 of 16 |") == 2
    assert "did not complete" not in table
