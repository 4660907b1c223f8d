"""R20: the binding does not pause the cyclic garbage collector while it builds a result's
Python objects (measured: no gain a user would notice). A collection may now run inside
a build, and so may a finalizer it calls, which may build another result: every value
must come out whole and the collector must be left as it was.

The Rust binding only (the twin's values come from ``orjson.loads`` and Python code).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import fastagg

PARTS = 600  # 600 small calls (3 dicts and a list each): well over a collection's threshold


def _event(tag: str) -> dict[str, Any]:
    parts = [
        {"functionCall": {"id": f"{tag}{i}", "name": "f", "args": {"k": [i, {"x": tag}]}}}
        for i in range(PARTS)
    ]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"},
        ],
        "usageMetadata": {"totalTokenCount": PARTS},
    }


def _result(tag: str) -> fastagg.AggregatedResponse:
    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed(b"data: " + orjson.dumps(_event(tag)) + b"\r\n\r\n")
    return agg.close()


@pytest.fixture
def collections() -> Iterator[list[str]]:
    """The phases of every collection from here on, with a threshold of 50 containers."""
    seen: list[str] = []

    def note(phase: str, info: dict[str, int]) -> None:
        seen.append(phase)

    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.collect()
    gc.set_threshold(50, 10, 10)
    gc.enable()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*threshold)
        if not enabled:
            gc.disable()


def test_r20_collections_run_inside_a_build_and_every_value_comes_out_whole(
    collections: list[str],
) -> None:
    result = _result("a")
    before = len(collections)
    parts = result.parts
    # Before 3.12 an allocation can start a collection, so one runs inside this build; from
    # 3.12 on the interpreter runs it at the next bytecode boundary, after the build.
    if sys.version_info < (3, 12):
        assert len(collections) - before > 0
    assert parts == _event("a")["candidates"][0]["content"]["parts"]
    assert result.function_calls[599] == {
        "id": "a599",
        "name": "f",
        "args": {"k": [599, {"x": "a"}]},
    }
    assert gc.isenabled() is True


class _Builds:
    """Cyclic garbage whose finalizer builds another result's parts."""

    def __init__(self, other: fastagg.AggregatedResponse, out: list[object]) -> None:
        self.me = self
        self.other = other
        self.out = out

    def __del__(self) -> None:
        self.out.append(self.other.parts)


def test_r20_a_finalizer_that_builds_inside_a_build_gets_whole_values(
    collections: list[str],
) -> None:
    outer, inner = _result("o"), _result("i")
    built_inside: list[object] = []
    _Builds(inner, built_inside)  # garbage now; freed by the next collection
    parts = outer.parts
    gc.collect()  # the finalizer has run, inside the build or here
    assert parts == _event("o")["candidates"][0]["content"]["parts"]
    assert built_inside == [_event("i")["candidates"][0]["content"]["parts"]]


@pytest.mark.parametrize("enabled", [True, False])
def test_r20_the_collector_is_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        agg = fastagg.StreamAggregator(deltas=True)
        deltas = agg.feed(b"data: " + orjson.dumps(_event("c")) + b"\r\n\r\n")
        result = agg.close()
        assert len(result.parts) == PARTS
        assert [d.call["id"] for d in deltas if isinstance(d, fastagg.CallEnd)][-1] == "c599"
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
