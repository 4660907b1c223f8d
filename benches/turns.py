"""Timing in turns (K6): functions take turns in every round, so that a drift of the
machine moves both sides of a ratio alike. Shared by the contenders table and the
feed_chunk() rows."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["in_turns", "runs_per_slice"]


def runs_per_slice(once: float, settings: Any) -> int:
    """How many runs of a function that took ``once`` seconds fill one slice of a round."""
    return max(1, int(settings.budget / settings.max_reps / max(once, 1e-9)))


def in_turns(timed: Sequence[tuple[Callable[[], Any], int]], settings: Any) -> list[list[float]]:
    """Seconds per run of each ``(fn, runs)``, one sample per round: every function in
    turn, ``runs`` times, the collector run before each; at least ``settings.min_reps``
    rounds and at most ``max_reps``, stopping once ``budget`` per function is spent."""
    samples: list[list[float]] = [[] for _ in timed]
    start = time.perf_counter()
    while True:
        for (fn, runs), out in zip(timed, samples, strict=True):
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(runs):
                fn()
            out.append((time.perf_counter() - t0) / runs)
        rounds = len(samples[0])
        if rounds >= settings.max_reps:
            break
        if rounds >= settings.min_reps and time.perf_counter() - start >= settings.budget * len(
            timed
        ):
            break
    return samples
