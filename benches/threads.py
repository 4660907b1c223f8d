"""N threads x M streams: ``feed()`` without the GIL (spec/performance.md R3).

Each of N threads aggregates M streams of its own, one after the other
(``StreamAggregator(deltas=False)``, ``feed()`` per chunk, ``close()``); the
wall time of all N x M streams is compared with one thread doing M. Chunks of
64 KiB are fed without the GIL, 4 KiB ones with it (the R3 threshold is
16 KiB), so the two columns show what releasing it buys. The machine's own
parallelism at the time of the run is shown by a calibration row: SHA-256 of
a buffer, which CPython computes without the GIL, in the same N threads.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import fastagg

from . import corpus

__all__ = ["threads_markdown"]

THREADS = (1, 2, 4)


def _wall(n: int, work: Callable[[], Any], reps: int) -> float:
    """Fastest of ``reps`` wall times of ``work`` run in ``n`` threads at once."""
    best = float("inf")
    for _ in range(reps):
        start = threading.Barrier(n + 1)

        def run(start: threading.Barrier = start) -> None:
            start.wait()
            work()

        threads = [threading.Thread(target=run) for _ in range(n)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return best


def _streams(chunks: Sequence[bytes], m: int) -> Callable[[], None]:
    def work() -> None:
        for _ in range(m):
            agg = fastagg.StreamAggregator(deltas=False)
            for c in chunks:
                agg.feed(c)
            agg.close()

    return work


def threads_markdown(settings: Any) -> str:
    mb = 0.5 if settings.quick else 4.0
    m = 1 if settings.quick else 4
    reps = 1 if settings.quick else 5
    body = corpus.giant_arg(mb)
    # The calibration hashes 4x the body per stream: about as long as aggregating it.
    buffer = b"\0" * (4 * len(body))
    rows: list[tuple[str, Callable[[], None]]] = [
        ("SHA-256 (calibration)", lambda: [hashlib.sha256(buffer).digest() for _ in range(m)]),
        ("64 KiB chunks (GIL released)", _streams(corpus.split(body, 65536), m)),
        ("4 KiB chunks (GIL held)", _streams(corpus.split(body, 4096), m)),
    ]
    head = " | ".join(f"{n} thread{'s' if n > 1 else ''}" for n in THREADS)
    lines = [
        f"| work ({m} x {len(body) / 1e6:.1f} MB per thread) | {head} |",
        "|---|" + "---:|" * len(THREADS),
    ]
    for label, work in rows:
        one = _wall(1, work, reps)
        cells = []
        for n in THREADS:
            wall = one if n == 1 else _wall(n, work, reps)
            cells.append(f"{wall * 1e3:.0f} ms ({n * one / wall:.2f}x)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Wall time of all threads' streams (fastest of the repetitions); in brackets the "
        "throughput against one thread (N x the one-thread time ÷ the N-thread time: N is "
        "perfect scaling, 1 is none). The SHA-256 row is the parallelism the machine gave "
        "this run (on 2 cores shared with other work it is below 2); the fastagg rows are "
        "read against it.",
    ]
    return "\n".join(lines)
