"""Aggregators used from several threads at once (each thread its own
aggregator) give the same results as in one thread, for both implementations."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

from conftest import load_scenarios
from streams import result_view, splits, sse_body

BODIES = [sse_body(case["chunks"]) for case in load_scenarios()]


def aggregate_all(impl: ModuleType, seed: int) -> list[dict[str, object]]:
    views = []
    for body in BODIES:
        agg = impl.StreamAggregator()
        for piece in splits(body, seed, max_piece=7):
            agg.feed(piece)
        views.append(result_view(agg.close()))
    return views


def test_f7_aggregators_in_parallel_threads_agree_with_one_thread(impl: ModuleType) -> None:
    expected = aggregate_all(impl, 0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda seed: aggregate_all(impl, seed), range(16)))
    assert all(r == expected for r in results)
