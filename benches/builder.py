"""The JSON text builder of the binding against jiter and orjson (spec/performance.md R7).

The input is what the core keeps of each stream (issue 12 item 1): for every
event payload of a corpus stream, every part object that is not plain
``{"text": ...}``, serialised with ``orjson.dumps`` (the raw part texts).
Each contender builds the Python value of every part text, once per round:

- ``fastagg`` — the binding's builder, through its private hook
  ``fastagg._fastagg._json_to_py`` (given a ``str``: the core hands it UTF-8
  text);
- ``jiter`` — ``jiter.from_json`` (bytes), pydantic's builder: its default
  caches every short string, keys and values; ``jiter (keys cache)`` caches
  keys only, as fastagg and orjson do (rows skipped when jiter is not
  installed: it is not a dependency);
- ``orjson.loads`` (bytes), the floor of the contenders table;
- ``serde Value + to_py`` — the path the builder replaces:
  ``fastagg._fastagg._json_to_py_via_value`` parses into a ``serde_json::Value``
  tree, then converts the tree.

The contenders run one after the other in each round, so a ratio is taken
between runs a few milliseconds apart: ``÷ fastagg`` is the median over the
rounds of the contender's time divided by fastagg's (above 1: slower than
fastagg). µs per part is the fastest round's. ``giant_arg`` is built at 2 MB
here (its parts are 16 KiB fragments: more of them adds nothing).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from fastagg import _fastagg

from . import corpus

__all__ = ["builder_markdown", "part_texts"]


def part_texts(stream: corpus.Stream) -> list[bytes]:
    """The raw JSON text of every kept part of ``stream`` (not plain text parts)."""
    texts = []
    for payload in stream.payloads:
        for candidate in orjson.loads(payload).get("candidates", []):
            for part in candidate.get("content", {}).get("parts", []):
                if set(part) != {"text"}:
                    texts.append(orjson.dumps(part))
    return texts


def _contenders() -> list[tuple[str, Callable[[Any], Any] | None, bool]]:
    """(name, function or None when missing, whether it takes ``str``)."""
    try:
        import jiter
    except ImportError:
        jiter_all = jiter_keys = None
    else:
        jiter_all = jiter.from_json

        def jiter_keys(data: bytes) -> Any:
            return jiter.from_json(data, cache_mode="keys")

    return [
        ("fastagg", _fastagg._json_to_py, True),
        ("jiter", jiter_all, False),
        ("jiter (keys cache)", jiter_keys, False),
        ("orjson.loads", orjson.loads, False),
        ("serde Value + to_py", _fastagg._json_to_py_via_value, True),
    ]


def _rounds(
    runs: Sequence[tuple[Callable[[Any], Any], list[Any]]], rounds: int
) -> list[list[float]]:
    """Seconds of each run over its inputs, per round (the runs interleaved)."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for seconds, (fn, inputs) in zip(times, runs, strict=True):
            t0 = time.perf_counter()
            for item in inputs:
                fn(item)
            seconds.append(time.perf_counter() - t0)
    return times


def builder_markdown(settings: Any) -> str:
    rounds = 1 if settings.quick else 40
    contenders = _contenders()
    lines = [
        "| stream | parts | bytes per part | contender | µs per part | MB/s | ÷ fastagg |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for name in settings.streams:
        stream = corpus.build(name, scale=settings.scale, giant_mb=0.25 if settings.quick else 2.0)
        texts = part_texts(stream)
        if not texts:
            continue
        strs = [t.decode("utf-8") for t in texts]
        size = sum(map(len, texts))
        present = [(label, fn, as_str) for label, fn, as_str in contenders if fn is not None]
        for label, fn, as_str in present:  # agreement first, untimed
            if fn is not orjson.loads and [fn(x) for x in (strs if as_str else texts)] != [
                orjson.loads(t) for t in texts
            ]:
                raise AssertionError(f"{name}: {label} builds other values than orjson.loads")
        times = _rounds([(fn, strs if as_str else texts) for _, fn, as_str in present], rounds)
        by_label = dict(zip((label for label, _, _ in present), times, strict=True))
        base = by_label["fastagg"]
        head = f"| {name} | {len(texts):,} | {size / len(texts):,.0f} "
        for label, fn, _ in contenders:
            if fn is None:
                lines.append(head + f"| {label} | - | - | - (not installed) |")
                continue
            seconds = by_label[label]
            best = min(seconds)
            ratio = statistics.median(s / b for s, b in zip(seconds, base, strict=True))
            lines.append(
                head + f"| {label} | {best * 1e6 / len(texts):.3f} | {size / best / 1e6:,.0f} "
                f"| {ratio:.2f}x |"
            )
    lines += [
        "",
        "Every contender builds the same values (checked before timing, against "
        "`orjson.loads`). fastagg is given `str` (from the core it gets UTF-8 text, no "
        "conversion); the others `bytes`, except the Value path. Rounds: "
        f"{rounds}, the contenders interleaved in each.",
    ]
    return "\n".join(lines)
