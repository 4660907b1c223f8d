"""Where fastagg's time goes on each stream, stage by stage, against the floor.

Issue 12 asks that a missed target come with what limits it. A sampling
profiler (``perf``) is not on every machine this report runs on, so the
report measures the stages themselves, each on its own, in rounds that
interleave them (a ratio is taken between runs milliseconds apart):

- ``scan + aggregate``: ``feed()`` of every 4 KiB chunk and ``close()``
  (``deltas=False``): framing, the strict scan of each payload (R8) and
  the aggregation; no Python object of a part is built;
- ``.parts``: the first read of ``.parts`` of a closed result (the R7
  builder), on results made before the timer starts;
- ``of it, gc``: the time the cyclic garbage collector ran during
  ``.parts`` (``gc.callbacks``): a kept result's dicts and lists live on,
  so the collections its allocations trigger find them; the floor's
  objects die before one is due;
- ``kept parts, orjson``: ``orjson.loads`` of every part of the payloads
  that is not plain text (``builder.part_texts``): for a stream of complete
  calls, exactly the texts ``.parts`` builds from, so ``.parts`` at orjson's
  speed; a streamed call's chunks are merged instead, and ``.parts`` builds less;
- ``floor``: ``orjson.loads`` of every payload, the contenders table's floor.

µs per event are the fastest round's; the ratios are medians over the rounds.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

import fastagg

from . import builder, corpus

__all__ = ["Stages", "measure", "measure_all", "stages_markdown"]


class _GcClock:
    """Seconds the cyclic collector runs while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> _GcClock:  # noqa: PYI034 (never subclassed)
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


class Stages:
    """Per-round seconds of each stage on one stream."""

    NAMES = ("scan", "parts", "gc", "kept", "floor")

    def __init__(self, events: int) -> None:
        self.events = events
        self.rounds: dict[str, list[float]] = {name: [] for name in self.NAMES}

    def best(self, name: str) -> float:
        """µs per event of the fastest round of stage ``name``."""
        return min(self.rounds[name]) * 1e6 / self.events

    def ratio(self, name: str, base: str) -> float:
        """Median over the rounds of stage ``name`` ÷ stage ``base``."""
        pairs = zip(self.rounds[name], self.rounds[base], strict=True)
        return statistics.median(a / b for a, b in pairs)

    def total(self) -> list[float]:
        """Per-round seconds of the whole fastagg job (scan, then ``.parts``)."""
        return [a + b for a, b in zip(self.rounds["scan"], self.rounds["parts"], strict=True)]


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(stream: corpus.Stream, rounds: int, per_round: int) -> Stages:
    """The stages of ``stream``, ``per_round`` runs of each per round."""
    chunks = [stream.body[i : i + 4096] for i in range(0, len(stream.body), 4096)]
    payloads = stream.payloads
    kept = builder.part_texts(stream)
    stages = Stages(stream.events * per_round)

    def aggregate() -> Any:
        agg = fastagg.StreamAggregator(deltas=False)
        for chunk in chunks:
            agg.feed(chunk)
        return agg.close()

    def floor(texts: list[bytes]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(per_round):
                for text in texts:
                    orjson.loads(text)

        return run

    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        results = [aggregate() for _ in range(per_round)]
        stages.rounds["scan"].append(time.perf_counter() - t0)
        with _GcClock() as clock:
            t0 = time.perf_counter()
            for result in results:
                result.parts  # noqa: B018 (the first read builds them)
            # A collection the builds' allocations are owed and have not run yet
            # runs at the next container made, here, so that it is timed with them.
            owed: list[None] = [None]
            stages.rounds["parts"].append(time.perf_counter() - t0)
            del owed
        stages.rounds["gc"].append(clock.seconds)
        del results, result
        gc.collect()
        stages.rounds["kept"].append(_timed(floor(kept)))
        stages.rounds["floor"].append(_timed(floor(payloads)))
    return stages


def _plan(settings: Any) -> tuple[int, int]:
    return (2, 1) if settings.quick else (15, 3)


def measure_all(settings: Any) -> dict[str, Stages]:
    """The stages of every stream of ``settings`` (the bounds section reads them too)."""
    rounds, per_round = _plan(settings)
    return {
        name: measure(
            corpus.build(name, scale=settings.scale, giant_mb=0.25 if settings.quick else 2.0),
            rounds,
            per_round,
        )
        for name in settings.streams
    }


def stages_markdown(settings: Any, measured: dict[str, Stages] | None = None) -> str:
    rounds, per_round = _plan(settings)
    if measured is None:
        measured = measure_all(settings)
    lines = [
        "| stream | scan + aggregate | .parts | of it, gc | kept parts, orjson | floor "
        "| total ÷ floor | scan ÷ floor | .parts ÷ floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in measured.items():
        total = statistics.median(t / f for t, f in zip(s.total(), s.rounds["floor"], strict=True))
        lines.append(
            f"| {name} | {s.best('scan'):.2f} | {s.best('parts'):.2f} | {s.best('gc'):.2f} "
            f"| {s.best('kept'):.2f} | {s.best('floor'):.2f} | {total:.2f}x "
            f"| {s.ratio('scan', 'floor'):.2f}x | {s.ratio('parts', 'floor'):.2f}x |"
        )
    lines += [
        "",
        "µs per event (fastest round) of each stage, measured on its own "
        f"({rounds} rounds of {per_round} runs, the stages interleaved in each round); the "
        "ratios are medians over the rounds. `scan + aggregate` is `feed()` of every 4 KiB "
        "chunk and `close()`, with no Python object of a part built; `.parts` is its first "
        "read on a closed result, `of it, gc` the part of that time the cyclic garbage "
        "collector ran (`gc.callbacks`, including a collection the builds were owed that "
        "runs at the first container made after them); `kept parts, orjson` is `orjson.loads` of every part "
        "of the payloads that is not plain text (for complete calls, the texts `.parts` "
        "builds from); `floor` is `orjson.loads` of every "
        "payload. fastagg meets the floor when `scan ÷ floor` and `.parts ÷ floor` add up to "
        "at most 1: where `.parts` alone comes near `kept parts, orjson` and that is most of "
        "the floor, the objects themselves are the limit, and the scan is what is left to cut.",
    ]
    return "\n".join(lines)
