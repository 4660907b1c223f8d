"""Aggregators used from several threads at once (each thread its own
aggregator) give the same results as in one thread, for both implementations."""

from __future__ import annotations

import threading
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


# -- R3 feed() of large chunks without the GIL -----------------------------------------

# Chunks of 64 KiB: above the size from which feed() releases the GIL (R3).
BIG = 65536
SECOND_FEEDER = (
    "this StreamAggregator was fed from another thread first; an aggregator is fed from "
    "one thread (chunks from two threads would interleave): use one aggregator per stream"
)


def _big_body(tag: str, n: int = 64) -> bytes:
    text = {"candidates": [{"content": {"parts": [{"text": tag * 4000}]}}]}
    call = {
        "functionCall": {
            "id": tag,
            "name": "write",
            "partialArgs": [{"jsonPath": "$.body", "stringValue": tag * 9000}],
            "willContinue": True,
        }
    }
    events = [text] * n + [{"candidates": [{"content": {"parts": [call]}}]}] * n
    return sse_body(events) + sse_body(
        [{"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}]
    )


def _aggregate(impl: ModuleType, body: bytes) -> dict[str, object]:
    agg = impl.StreamAggregator()
    for i in range(0, len(body), BIG):
        agg.feed(body[i : i + BIG])
    return result_view(agg.close())


def test_r3_threads_feeding_their_own_aggregators_without_the_gil_get_exact_results(
    impl: ModuleType,
) -> None:
    bodies = [_big_body(tag) for tag in "ab"]
    expected = [_aggregate(impl, body) for body in bodies]
    start = threading.Barrier(2)

    def run(body: bytes) -> list[dict[str, object]]:
        start.wait()
        return [_aggregate(impl, body) for _ in range(8)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, bodies))
    assert results == [[expected[0]] * 8, [expected[1]] * 8]


def test_r3_a_second_thread_feeding_during_a_feed_without_the_gil_gets_the_d8_error(
    impl: ModuleType,
) -> None:
    body = _big_body("a", n=256)
    agg = impl.StreamAggregator(deltas=False)
    agg.feed(body[:BIG])
    fed = threading.Event()
    errors: list[str] = []
    seen: list[int] = []

    def intruder() -> None:
        fed.wait()
        for feed in (agg.feed, agg.feed_event, agg.feed_chunk) * 20:
            try:
                feed(b"data: {}\n\n" if feed is agg.feed else {"candidates": []})
            except RuntimeError as exc:
                errors.append(str(exc))
            seen.append(agg.events_seen)  # reading waits for the feeding thread

    worker = threading.Thread(target=intruder)
    worker.start()
    for i in range(BIG, len(body), BIG):
        agg.feed(body[i : i + BIG])
        fed.set()
    worker.join()
    assert errors == [SECOND_FEEDER] * 60
    assert seen == sorted(seen)
    assert agg.close().function_calls == [
        {"id": "a", "name": "write", "args": {"body": "a" * 9000 * 256}}
    ]
