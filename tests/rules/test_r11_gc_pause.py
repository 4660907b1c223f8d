"""R11: the cyclic garbage collector is paused while a result's Python objects
are built, and left as it was.

The Rust binding only (the twin's values come from ``orjson.loads`` and Python
code, which it does not pause). A collection is seen through ``gc.callbacks``;
the threshold is lowered so that an unpaused build of these results would set
off dozens of collections.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fastagg

PARTS = 600  # 600 small calls (3 dicts and a list each), one call and usage of 1,201 containers


def _tree(n: int) -> str:
    """A JSON object of ``n`` keys, each a dict holding a list: 2n + 1 containers."""
    return "{" + ",".join(f'"k{i}": {{"n": [{i}]}}' for i in range(n)) + "}"


def _body() -> bytes:
    parts = ",".join(
        f'{{"functionCall": {{"id": "c{i}", "name": "f", "args": {{"k": [{i}, {{"x": 1}}]}}}}}}'
        for i in range(PARTS)
    )
    big_call = f'{{"functionCall": {{"id": "big", "name": "g", "args": {_tree(PARTS)}}}}}'
    event = (
        f'{{"candidates": [{{"content": {{"role": "model", "parts": [{parts},{big_call}]}}, '
        f'"finishReason": "STOP"}}], "usageMetadata": {_tree(PARTS)}}}'
    )
    return f"data: {event}\r\n\r\n".encode()


BODY = _body()

READS: dict[str, Callable[[Any], object]] = {
    "parts": lambda result: result.parts,
    "content": lambda result: result.content,
    "function_calls": lambda result: result.function_calls,
    "candidates[0].parts": lambda result: result.candidates[0].parts,
    "usage": lambda result: result.usage,
}


@pytest.fixture
def collections() -> Iterator[list[str]]:
    """The phases of every collection from here on, with a low threshold."""
    seen: list[str] = []

    def note(phase: str, info: dict[str, int]) -> None:
        seen.append(phase)

    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.collect()
    gc.set_threshold(100, 10, 10)
    gc.enable()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*threshold)
        if not enabled:
            gc.disable()


def _pending_work_runs() -> None:
    """Nothing: entering a Python function is where 3.12+ runs a scheduled collection."""


def _collections_during(build: Callable[[], object], collections: list[str]) -> tuple[int, int]:
    """(collections during ``build()``, collections set off by the next container made).

    Only ints are made between the counts (no container): any container would set
    off the collection owed by the build's allocations before it could be counted.
    Up to Python 3.11 the container runs that collection as it is made; from 3.12
    it schedules it for the interpreter's next check for pending work, which a
    call makes.
    """
    before = len(collections)
    value = build()
    built = len(collections)
    trigger: list[object] = []
    _pending_work_runs()
    after = len(collections)
    assert value  # built, and not empty
    del trigger
    return (built - before) // 2, (after - built) // 2


@pytest.mark.parametrize("read", list(READS))
def test_r11_building_a_result_sets_off_no_collection(read: str, collections: list[str]) -> None:
    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed(BODY)
    result = agg.close()
    # None while it builds; the one its allocations are owed (not skipped) right after.
    assert _collections_during(lambda: READS[read](result), collections) == (0, 1)


def test_r11_call_end_call_is_built_with_the_collector_paused(collections: list[str]) -> None:
    agg = fastagg.StreamAggregator(deltas=True)
    ends = [d for d in agg.feed(BODY) if isinstance(d, fastagg.CallEnd)]
    assert len(ends) == PARTS + 1
    big = ends[-1]
    assert _collections_during(lambda: big.call, collections) == (0, 1)
    call = big.call
    assert call["name"] == "g"
    assert len(call["args"]) == PARTS
    assert call["args"]["k7"] == {"n": [7]}


@pytest.mark.parametrize("enabled", [True, False])
def test_r11_the_collector_is_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        agg = fastagg.StreamAggregator(deltas=True)
        deltas = agg.feed(BODY)
        result = agg.close()
        for read in READS.values():
            read(result)
        _ = [d.call for d in deltas if isinstance(d, fastagg.CallEnd)]
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
