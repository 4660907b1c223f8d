"""``feed_chunk()`` of google-genai objects against a naive Python text join (performance.md, G4).

The chunks are the corpus events as the SDK holds them
(``GenerateContentResponse.model_validate`` of each payload, as its streaming
path builds them). Timed per stream:

- ``naive join``: ``"".join(c.text or "" for c in chunks)``, what a user of the
  SDK writes to get the answer (the SDK's warning about non-text parts is
  silenced so that logging is not timed);
- ``feed_chunk``: a ``StreamAggregator()`` (deltas on) fed every object, then
  ``close()``: the fields are read directly (G4);
- ``model_dump path``: each object dumped with ``model_dump(by_alias=True,
  exclude_none=True)`` and the dict fed: the conversion before G4.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

import fastagg
from fastagg._chunks import _GENAI_LOCAL_FIELDS

from . import corpus, turns
from .verdict import judge

__all__ = ["sdk_chunks_markdown"]

TARGET = 5.0


def _objects(name: str, settings: Any) -> list[Any]:
    from google.genai import types

    stream = corpus.build(name, scale=0.2 if settings.quick else 1.0, giant_mb=1.0)
    return [types.GenerateContentResponse.model_validate(orjson.loads(p)) for p in stream.payloads]


def _feed(chunks: list[Any], *, dump: bool = False) -> Callable[[], Any]:
    def run() -> Any:
        agg = fastagg.StreamAggregator()
        for chunk in chunks:
            if dump:
                chunk = chunk.model_dump(
                    by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS
                )
            agg.feed_chunk(chunk)
        return agg.close()

    return run


def _in_turns(fns: list[Callable[[], Any]], settings: Any) -> list[tuple[float, float]]:
    """K6: (median seconds per run, median ratio to ``fns[0]`` within a round) of each
    of ``fns``, which take turns in every round (:func:`turns.in_turns`), each run as
    often as fits an equal slice of it, sized by one run first."""
    timed = []
    for fn in fns:
        t0 = time.perf_counter()
        fn()
        timed.append((fn, turns.runs_per_slice(time.perf_counter() - t0, settings)))
    samples = turns.in_turns(timed, settings)
    base = samples[0]
    return [
        (statistics.median(mine), statistics.median(a / b for a, b in zip(mine, base, strict=True)))
        for mine in samples
    ]


def sdk_chunks_markdown(settings: Any) -> str:
    """The table: per stream, the join, ``feed_chunk()`` and the model_dump path in turns."""
    try:
        import google.genai  # noqa: F401
    except ImportError:
        return "google-genai is not installed: skipped."
    logging.getLogger("google_genai.types").setLevel(logging.ERROR)
    lines = [
        "| stream | chunks | naive join | feed_chunk | ÷ join | model_dump path | ÷ join |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for name in settings.streams:
        chunks = _objects(name, settings)
        (join, _), (fast, fast_x), (dump, dump_x) = _in_turns(
            [
                lambda ch=chunks: "".join(c.text or "" for c in ch),  # type: ignore[misc]
                _feed(chunks),
                _feed(chunks, dump=True),
            ],
            settings,
        )
        worst = max(worst, fast_x)
        per = 1e6 / len(chunks)
        lines.append(
            f"| {name} | {len(chunks)} | {join * per:.2f} µs | {fast * per:.2f} µs | "
            f"{fast_x:.2f}x | {dump * per:.2f} µs | {dump_x:.2f}x |"
        )
    lines += [
        "",
        "Times per chunk (medians over rounds in which the three take turns); `÷ join` is "
        "the median of the ratios within a round. Target (performance.md): feed_chunk ≤ "
        f"{TARGET:g}x the naive join on every stream: "
        f"{judge(settings, worst <= TARGET)} (worst {worst:.2f}x).",
    ]
    return "\n".join(lines)
