"""``feed_chunk()`` of plain dicts against ``feed_event()`` of the same bytes (aggregation.md D2a).

The chunks are the corpus events, ``orjson.loads``-ed (what a caller with its own JSON
parser holds). Timed per stream, the three taking turns, each into a fresh
``StreamAggregator()`` then ``close()``:

- ``feed_event(bytes)``: each payload's bytes, parsed by the core;
- ``feed_chunk(dict)``: each dict, read by the core itself (D2a: plain JSON types);
- ``Python walk``: each dict behind a ``types.MappingProxyType``, which is not a
  ``dict``, so it takes ``fastagg._chunks.chunk_to_mapping``'s walk, as every dict did
  before the core read plain ones.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import orjson

import fastagg

from . import corpus
from .sdk_chunks import _in_turns

__all__ = ["dict_chunks_markdown"]


def _feeding(method: str, items: list[Any]) -> Callable[[], Any]:
    def run() -> Any:
        agg = fastagg.StreamAggregator()
        feed = getattr(agg, method)
        for item in items:
            feed(item)
        return agg.close()

    return run


def contenders(name: str, settings: Any) -> tuple[int, list[Callable[[], Any]]]:
    """The chunk count and the three runs of stream ``name``, bytes first."""
    stream = corpus.build(name, scale=0.2 if settings.quick else 1.0, giant_mb=1.0)
    payloads = list(stream.payloads)
    dicts = [orjson.loads(p) for p in payloads]
    proxies = [types.MappingProxyType(d) for d in dicts]
    return len(payloads), [
        _feeding("feed_event", payloads),
        _feeding("feed_chunk", dicts),
        _feeding("feed_chunk", proxies),
    ]


def dict_chunks_markdown(settings: Any) -> str:
    """The table: per stream, the bytes, the plain dicts and the Python walk in turns."""
    lines = [
        "| stream | chunks | feed_event(bytes) | feed_chunk(dict) | ÷ bytes "
        "| Python walk | ÷ bytes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in settings.streams:
        count, runs = contenders(name, settings)
        (raw, _), (plain, plain_x), (walk, walk_x) = _in_turns(runs, settings)
        per = 1e6 / count
        lines.append(
            f"| {name} | {count} | {raw * per:.2f} µs | {plain * per:.2f} µs | "
            f"{plain_x:.2f}x | {walk * per:.2f} µs | {walk_x:.2f}x |"
        )
    lines += [
        "",
        "Times per chunk (medians over rounds in which the three take turns); `÷ bytes` is "
        "the median of the ratios within a round. The Python walk is what every dict "
        "chunk cost before the core read plain ones itself (D2a).",
    ]
    return "\n".join(lines)
