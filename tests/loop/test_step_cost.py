"""What a step costs the loop, counted (L70, L71); the time it takes is in benches/RESULTS.md.

The counts come from ``benches/loop.py`` (the benchmark's own turn: 20 one-call tool steps
with an async tool, then an answer; 21 requests), run once under ``sys.setprofile``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import fastagg
from fastagg.loop.clock import loop_clock

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``benches`` lives in the source tree, it is not installed
    sys.path.insert(0, str(ROOT))

from benches import loop as bench  # noqa: E402

TOOL_STEPS = bench.STEPS  # then one answer step


def test_l70_run_turn_without_on_event_builds_no_turn_event() -> None:
    counts = bench.counts()
    assert counts["TurnEvent objects"] == 0
    assert counts["no-op emission awaits"] == 0


def _aggregators_asked(monkeypatch: Any, on_event: Any) -> list[Any]:
    """The ``deltas`` argument of every aggregator the benchmark's turn makes."""
    from fastagg.loop import wire

    asked: list[Any] = []
    real = wire.StreamAggregator

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("deltas"))
        return real(*args, **kwargs)

    monkeypatch.setattr(wire, "StreamAggregator", recording)
    asyncio.run(bench.one_turn(bench.turn_bodies(), bench.lookup, on_event))
    return asked


def test_l70_run_turn_without_on_event_asks_the_core_for_no_deltas(monkeypatch: Any) -> None:
    # L3's visible-output check reads the aggregator's own flag (R5) instead.
    assert _aggregators_asked(monkeypatch, None) == [False] * (TOOL_STEPS + 1)


def test_l70_with_on_event_the_core_reports_the_displayed_deltas(monkeypatch: Any) -> None:
    received: list[Any] = []
    assert _aggregators_asked(monkeypatch, received.append) == ["display"] * (TOOL_STEPS + 1)
    assert len(received) == 6 * TOOL_STEPS + 4 + 1


def test_l70_with_on_event_every_event_built_is_delivered() -> None:
    received: list[Any] = []
    counts = bench.counts(received.append)
    # a tool step: StepStart, ThoughtDelta, ToolCallDelta, StepEnd, ToolCallStart,
    # ToolCallEnd; the answer: StepStart, two AnswerDelta, StepEnd; then TurnEnd
    assert len(received) == 6 * TOOL_STEPS + 4 + 1
    assert counts["TurnEvent objects"] == len(received)


def test_l71_a_tool_step_schedules_no_timer_and_creates_no_task() -> None:
    counts = bench.counts()
    assert counts["timers scheduled by fastagg"] == 1  # the turn deadline, once a turn
    assert counts["tasks created"] == 1  # the turn's own task
    assert counts["inspect calls"] == 1  # once a turn: is the tool a coroutine function


def test_l71_json_is_serialized_only_for_the_tool_results() -> None:
    counts = bench.counts()
    # L26 normalizes each tool result with one dumps and one loads; L47 copies the
    # derived schema once a turn the same way. The request is never serialized here.
    assert counts["JSON serializations"] == 2 * TOOL_STEPS + 2


def test_l71_a_tool_step_reads_the_clock_six_times() -> None:
    counts = bench.counts()
    # a tool step: the checkpoint, the request's timeout, the batch's start and progress,
    # the call's start, the stall hold's exit (L22); the answer step: the first two; the
    # turn: its start and elapsed. Without a stall timeout the body's start and chunks
    # are no progress to record (L60 needs it only for the watchdog).
    assert counts["clock reads by fastagg"] == 6 * TOOL_STEPS + 2 + 2
    assert counts["context managers entered"] == TOOL_STEPS + (TOOL_STEPS + 1)  # hold, body


def test_l71_the_stock_loop_clock_is_read_through_monotonic() -> None:
    async def clock() -> Any:
        return loop_clock(asyncio.get_running_loop())

    assert asyncio.run(clock()) is time.monotonic


async def lookup(key: str) -> dict[str, str]:
    """Look a key up, letting the event loop run its timers meanwhile.

    Args:
        key: what to look up.
    """
    await asyncio.sleep(0)
    return {"value": key.upper()}


class _LaterLoop(asyncio.SelectorEventLoop):
    """An event loop with a clock of its own: 1000 s ahead of time.monotonic()."""

    def time(self) -> float:
        return time.monotonic() + 1000.0


def test_l71_a_loop_with_its_own_clock_times_the_turn_by_it() -> None:
    loop = _LaterLoop()
    try:
        assert loop_clock(loop) == loop.time
        limits = fastagg.TurnLimits(turn_timeout=60.0, max_steps=TOOL_STEPS + 4)
        model = bench.CannedModel(bench.turn_bodies())
        result = loop.run_until_complete(
            fastagg.run_turn(model, bench.CONTENTS, tools=[lookup], limits=limits)
        )
    finally:
        loop.close()
    # read through time.monotonic, the deadline's timer would fire at the first wait
    assert result.stop_reason is fastagg.StopReason.COMPLETED
    assert result.tool_call_count == TOOL_STEPS
    assert 0.0 <= result.elapsed < 60.0


def test_l71_the_callgrind_mode_runs_the_benchmark_turn_and_prints_nothing(
    capsys: Any, monkeypatch: Any
) -> None:
    turns: list[int] = []
    real = bench.one_turn

    async def counting(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        turns.append(result.tool_call_count)
        return result

    monkeypatch.setattr(bench, "one_turn", counting)
    assert bench.main(["--just", "3"]) == 0
    assert turns == [TOOL_STEPS] * (2 + 3)  # two warm-up turns, then three
    assert capsys.readouterr().out == ""
