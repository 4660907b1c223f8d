"""Agent-loop cost (report section 6): a request-step of ``run_turn`` beyond aggregation.

``python -m benches.loop [--rounds N] [--turns N] [--counts] [--just N]``

The turn: 20 steps (a thought chunk and one signed ``lookup`` call each),
then a 3-chunk answer; 21 requests, served in process by :class:`CannedModel`
with a trivial async tool and no ``on_event``. Timed with
``time.process_time()`` (the CPU of this process: another process's load does
not count), ``turns`` turns per round in one event loop; the aggregation is
the same bodies fed to a bare ``StreamAggregator`` with the options the loop
uses (``feed``, ``finish``, ``close``), timed in a round of its own right
after each loop round. Overhead = median(loop round) - median(aggregation
round), per request-step.

``counts()`` runs one turn under ``sys.setprofile`` and tells per
request-step how often the loop reads the clock, schedules timers, creates
tasks, enters context managers, builds dataclass instances and events,
calls ``inspect``, serializes JSON and awaits no-op event emission: the
things a profile shows as small, and that add up. (Dict copies, ``dict(x)``
or ``{**x}``, are invisible to a profiler; a step makes them only of the
tool's arguments, to pass them as keyword arguments.)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import inspect
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import fastagg
import fastagg.events
from fastagg.loop.emit import DeltaEvents, Emitter

from . import corpus

STEPS = 20
CONTENTS = [{"role": "user", "parts": [{"text": "Look up twenty keys."}]}]
# Made once, as a caller would: validating limits per turn is not the loop's cost.
LIMITS = fastagg.TurnLimits(max_steps=STEPS + 5)


class CannedModel:
    """A ``ModelClient`` that answers request ``n`` with the canned body ``bodies[n]``."""

    def __init__(
        self, bodies: Sequence[list[bytes]], model: str = "gemini-3-flash-preview"
    ) -> None:
        self.model = model
        self.bodies = bodies
        self.calls = 0

    def stream(self, request: dict[str, Any], *, timeout: float | None) -> Any:
        chunks = self.bodies[self.calls]
        self.calls += 1
        return _Body(chunks)


class _Body:
    """One canned response: its own async context manager and chunk iterator.

    A class, not ``asynccontextmanager`` over an async generator: two async
    generators per request (their first-iteration hooks and weak-set
    bookkeeping) would put the harness's own cost into the loop's numbers.
    """

    __slots__ = ("_chunks",)

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = iter(chunks)

    async def __aenter__(self) -> AsyncIterator[bytes]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        for chunk in self._chunks:
            return chunk
        raise StopAsyncIteration


async def lookup(key: str) -> dict[str, str]:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return {"value": key.upper()}


def lookup_sync(key: str) -> dict[str, str]:
    """Look a key up (a synchronous tool: the loop runs it in a worker thread).

    Args:
        key: what to look up.
    """
    return {"value": key.upper()}


def turn_bodies(steps: int = STEPS) -> list[list[bytes]]:
    """The canned bodies of one turn: ``steps`` tool steps, then the answer."""
    import random

    rng = random.Random(7)
    bodies = []
    for i in range(steps):
        events = [
            corpus._gemini_event(
                [{"text": corpus._words(rng, 12), "thought": True}],
                f"r{i}",
                corpus._usage(900, 0, 12),
            ),
            corpus._gemini_event(
                [
                    {
                        "functionCall": {
                            "id": f"call-{i}",
                            "name": "lookup",
                            "args": {"key": f"k{i}"},
                        },
                        "thoughtSignature": corpus._signature(rng),
                    }
                ],
                f"r{i}",
                corpus._usage(900, 20, 12),
                "STOP",
            ),
        ]
        bodies.append(corpus.split(corpus.frame(events)))
    final = [
        corpus._gemini_event([{"text": corpus._words(rng, 20)}], "rf", corpus._usage(900, 20)),
        corpus._gemini_event([{"text": corpus._words(rng, 20)}], "rf", corpus._usage(900, 40)),
        corpus._gemini_event(
            [{"text": "", "thoughtSignature": corpus._signature(rng)}],
            "rf",
            corpus._usage(900, 41),
            "STOP",
        ),
    ]
    bodies.append(corpus.split(corpus.frame(final)))
    return bodies


async def one_turn(
    bodies: Sequence[list[bytes]], tool: Any, on_event: Callable[[Any], object] | None = None
) -> Any:
    model = CannedModel(bodies)
    return await fastagg.run_turn(model, CONTENTS, tools=[tool], limits=LIMITS, on_event=on_event)


def check(bodies: Sequence[list[bytes]], tool: Any) -> None:
    """The canned turn completes with every call run (or the numbers mean nothing)."""
    result = asyncio.run(one_turn(bodies, tool))
    if (
        result.stop_reason != fastagg.StopReason.COMPLETED
        or result.tool_call_count != len(bodies) - 1
    ):
        raise RuntimeError(f"canned turn did not complete: {result.stop_reason} {result.message}")


def _aggregate(bodies: Sequence[list[bytes]]) -> None:
    """What the loop asks of the core per request, and nothing else."""
    for chunks in bodies:
        agg = fastagg.StreamAggregator(deltas=False)  # as loop/wire.py asks without a sink (L70)
        for c in chunks:
            agg.feed(c)
        agg.finish()
        agg.close()


@dataclass(frozen=True)
class Overhead:
    steps_per_round: int
    rounds: int
    step_us: float  # median CPU µs per request-step of run_turn, aggregation included
    aggregation_us: float  # median CPU µs per request-step of the bare aggregation
    clock: str = "process_time"

    @property
    def overhead_us(self) -> float:
        return self.step_us - self.aggregation_us


def overhead(rounds: int = 15, turns: int = 20, tool: Any = lookup) -> Overhead:
    """CPU µs per request-step of ``run_turn`` with ``tool``, and of its aggregation alone."""
    bodies = turn_bodies()
    check(bodies, tool)
    steps = turns * len(bodies)

    async def loop_round() -> float:
        gc.collect()
        t0 = time.process_time()
        for _ in range(turns):
            await one_turn(bodies, tool)
        return (time.process_time() - t0) / steps * 1e6

    def agg_round() -> float:
        gc.collect()
        t0 = time.process_time()
        for _ in range(turns):
            _aggregate(bodies)
        return (time.process_time() - t0) / steps * 1e6

    async def run() -> tuple[list[float], list[float]]:
        looped, aggregated = [], []
        await loop_round()  # warm-up: imports, the L47 derivation cache
        for _ in range(rounds):
            looped.append(await loop_round())
            aggregated.append(agg_round())
        return looped, aggregated

    looped, aggregated = asyncio.run(run())
    return Overhead(steps, rounds, statistics.median(looped), statistics.median(aggregated))


def wall_per_step(reps: int, tool: Any) -> float:
    """Median wall µs per request-step over ``reps`` turns (everything included)."""
    bodies = turn_bodies()
    check(bodies, tool)

    async def many() -> list[float]:
        times = []
        for _ in range(reps):
            gc.collect()
            t0 = time.perf_counter()
            await one_turn(bodies, tool)
            times.append(time.perf_counter() - t0)
        return times

    return statistics.median(asyncio.run(many())) / len(bodies) * 1e6


# --------------------------------------------------------------------------
# counts
# --------------------------------------------------------------------------

_PKG = str(Path(fastagg.__file__).resolve().parent)
_LOOP = asyncio.BaseEventLoop
_TIMERS = {_LOOP.call_later.__code__, _LOOP.call_at.__code__}
_TASKS = {_LOOP.create_task.__code__}
_NO_OP = {Emitter.__call__.__code__, Emitter.lifecycle.__code__, DeltaEvents.deliver.__code__}
_EVENT_TYPES = tuple(
    cls
    for cls in vars(fastagg.events).values()
    if isinstance(cls, type) and cls.__module__ == "fastagg.events"
)
_SERIALIZERS = {orjson.dumps, orjson.loads}
_JSON = {json.dumps.__code__, json.loads.__code__}
_INSPECT = str(Path(inspect.__file__).resolve())

COUNTS = (
    "python calls",
    "clock reads by fastagg",
    "timers scheduled by fastagg",
    "tasks created",
    "event-loop iterations",
    "context managers entered",
    "dataclass instances",
    "TurnEvent objects",
    "inspect calls",
    "JSON serializations",
    "no-op emission awaits",
)


def counts(on_event: Callable[[Any], object] | None = None) -> collections.Counter[str]:
    """The counts of one turn of ``STEPS + 1`` requests with the async tool (module docstring).

    Only the caller's frame decides "by fastagg": a clock read or a timer the
    event loop does for itself is not the loop's. The harness's own body
    generator and ``asynccontextmanager`` count among the calls and context
    managers (one ``__aenter__`` per request is the harness's).
    """
    bodies = turn_bodies()
    check(bodies, lookup)
    n: collections.Counter[str] = collections.Counter()
    time_code = _LOOP.time.__code__
    run_once = _LOOP._run_once.__code__  # type: ignore[attr-defined]

    def ours(frame: Any) -> bool:
        back = frame.f_back
        return back is not None and back.f_code.co_filename.startswith(_PKG)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            n["python calls"] += 1
            if code is time_code:
                if ours(frame):
                    n["clock reads by fastagg"] += 1
            elif code in _TIMERS:
                if ours(frame):
                    n["timers scheduled by fastagg"] += 1
            elif code in _TASKS:
                n["tasks created"] += 1
            elif code is run_once:
                n["event-loop iterations"] += 1
            elif code.co_name in ("__enter__", "__aenter__"):
                n["context managers entered"] += 1
            elif code.co_name == "__init__" and code.co_filename == "<string>":
                n["dataclass instances"] += 1
                if isinstance(frame.f_locals.get("self"), _EVENT_TYPES):
                    n["TurnEvent objects"] += 1
            elif code in _NO_OP and on_event is None:
                n["no-op emission awaits"] += 1
            elif code in _JSON:
                n["JSON serializations"] += 1
            elif code.co_filename == _INSPECT and not frame.f_back.f_code.co_filename == _INSPECT:
                n["inspect calls"] += 1
        elif event == "c_call":
            if arg is time.monotonic:  # read directly (L71) or by loop.time()
                if frame.f_code.co_filename.startswith(_PKG):
                    n["clock reads by fastagg"] += 1
            elif arg in _SERIALIZERS:
                n["JSON serializations"] += 1

    async def run() -> None:
        await one_turn(bodies, lookup)  # warm-up
        sys.setprofile(profile)
        try:
            await one_turn(bodies, lookup, on_event)
        finally:
            sys.setprofile(None)

    asyncio.run(run())
    return n


def bytecodes(on_event: Callable[[Any], object] | None = None) -> int:
    """Bytecode instructions one turn executes in Python (``sys.settrace`` opcode events).

    The same for every run of the same code: a measure of the loop's work that
    the machine's load does not blur.
    """
    bodies = turn_bodies()
    n = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "opcode":
            n += 1
        return local

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    async def run() -> None:
        await one_turn(bodies, lookup)  # warm-up
        sys.settrace(trace)
        try:
            await one_turn(bodies, lookup, on_event)
        finally:
            sys.settrace(None)

    asyncio.run(run())
    return n


def just(turns: int) -> None:
    """Two warm-up turns, then ``turns`` turns (``--just``)."""
    bodies = turn_bodies()

    async def run(n: int) -> None:
        for _ in range(n):
            await one_turn(bodies, lookup)

    asyncio.run(run(2))
    asyncio.run(run(turns))


def _events_sink(event: Any) -> None:
    pass


def _otel_on() -> None:
    """T8: telemetry on, as an application would set it up (the exporter does no I/O)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.loop", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=20, help="turns per round")
    parser.add_argument("--counts", action="store_true", help="also print the per-step counts")
    parser.add_argument(
        "--just",
        type=int,
        metavar="N",
        help="run two warm-up turns and N turns, untimed, and print nothing: for callgrind, "
        "whose count of --just 20 less that of --just 10, divided by 210, is the "
        "instructions of a request-step",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="with OpenTelemetry on: the SDK's tracer and meter providers, an in-memory span "
        "exporter (a simple processor: each span exported as it ends) and metric reader",
    )
    args = parser.parse_args(argv)
    if args.otel:
        _otel_on()
    if args.just is not None:
        just(args.just)
        return 0
    result = overhead(args.rounds, args.turns)
    print(
        f"run_turn: {result.step_us:.1f} µs CPU per request-step, aggregation "
        f"{result.aggregation_us:.1f}, loop overhead {result.overhead_us:.1f} "
        f"(median of {result.rounds} rounds of {result.steps_per_round} steps)"
    )
    if args.counts:
        quiet = counts()
        loud = counts(_events_sink)
        requests = STEPS + 1
        print("| per request-step | no on_event | with on_event |")
        print("|---|---:|---:|")
        for key in COUNTS:
            print(f"| {key} | {quiet[key] / requests:.2f} | {loud[key] / requests:.2f} |")
        ops = bytecodes() / requests, bytecodes(_events_sink) / requests
        print(f"| bytecodes executed | {ops[0]:.0f} | {ops[1]:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
