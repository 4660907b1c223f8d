"""Turn loop: abort, clocks, precedence, wrap-up, clean exit (turn-loop.md L6, L7, L8, L10, L14)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from fastagg import events
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import WRAPUP_NOTE, _fmt_duration, run_turn
from fastagg.loop.clock import TurnClock
from fastagg.testing.chunks import chunk, text
from fastagg.tools import Tool, ToolContext
from scripted_model import (
    USER,
    Reply,
    ScriptedModel,
    answer,
    assert_replayable,
    calls,
    pending_tasks,
    turn,
)


async def lookup(q: str) -> str:
    return f"found {q}"


async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slow done"


def tail(n: int) -> str:
    calls_ = "1 tool call" if n == 1 else f"{n} tool calls"
    return f"I completed {calls_} before stopping; ask me to continue and I'll pick up from there."


def aborted_message(n: int) -> str:
    calls_ = "1 tool call" if n == 1 else f"{n} tool calls"
    return f"This turn was stopped before I could finish. I completed {calls_} before stopping."


ABORTED = {"error": "aborted"}


def response_of(contents: list[dict[str, Any]], i: int = 0) -> Any:
    return contents[-1]["parts"][i]["functionResponse"]["response"]


# -- L6 abort ------------------------------------------------------------------


async def test_l6_abort_mid_stream_closes_the_response_and_sends_nothing_more() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(Reply([chunk(text("Let me check"))], stall_after=1))

    def on_event(event: Any) -> None:
        if isinstance(event, events.AnswerDelta):
            abort.set()

    result = await turn(model, abort=abort, on_event=on_event, tools=[lookup])
    assert result.stop_reason is StopReason.ABORTED
    assert len(model.requests) == 1
    assert model.closed == 1
    assert result.message == aborted_message(0)
    assert result.text == f"Let me check\n\n{aborted_message(0)}"
    assert result.finish_reason is None
    assert result.contents == USER
    assert_replayable(result.contents)


async def test_l6_abort_between_steps_issues_no_further_request() -> None:
    abort = asyncio.Event()

    async def lookup_then_abort(q: str) -> str:
        abort.set()
        return f"found {q}"

    model = ScriptedModel(calls(("lookup_then_abort", {"q": "a"})))
    result = await turn(
        model, abort=abort, tools=[lookup_then_abort], limits=TurnLimits(max_steps=1)
    )
    assert result.stop_reason is StopReason.ABORTED
    assert len(model.requests) == 1  # no next step and no final-answer request
    assert result.tool_call_count == 1
    assert response_of(result.contents) == {"output": "found a"}
    assert result.message == aborted_message(1)
    assert_replayable(result.contents)


async def test_l6_abort_before_the_first_step_sends_nothing() -> None:
    abort = asyncio.Event()
    abort.set()
    model = ScriptedModel()
    result = await turn(model, abort=abort)
    assert result.stop_reason is StopReason.ABORTED
    assert model.requests == []
    assert result.steps_used == 0


async def test_l6_abort_during_a_slow_tool_answers_every_call_aborted() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("slow", {"seconds": 10}), ("lookup", {"q": "b"})))
    seen: list[Any] = []

    def on_event(event: Any) -> None:
        seen.append(event)
        if isinstance(event, events.ToolCallEnd) and event.name == "lookup":
            abort.set()

    result = await turn(model, abort=abort, on_event=on_event, tools=[slow, lookup])
    assert result.stop_reason is StopReason.ABORTED
    assert len(model.requests) == 1
    assert response_of(result.contents, 0) == ABORTED
    assert response_of(result.contents, 1) == {"output": "found b"}
    assert (
        result.tool_call_count == 1
    )  # the aborted call is not counted as a failure or a completion
    ends = [(e.name, e.status) for e in seen if isinstance(e, events.ToolCallEnd)]
    assert ends == [("lookup", "ok"), ("slow", "aborted")]
    assert result.message == aborted_message(1)
    assert_replayable(result.contents)


async def test_l6_tool_context_carries_the_abort_event_and_deadline() -> None:
    abort = asyncio.Event()
    got: list[Any] = []

    async def probe(ctx: ToolContext) -> str:
        got.append((ctx.abort is abort, ctx.remaining() <= 2.0, ctx.tool_name, ctx.call_id))
        return "ok"

    model = ScriptedModel(calls(("probe", {}), seed="p"), answer("Done."))
    result = await turn(model, abort=abort, tools=[Tool("probe", probe, timeout=2.0)])
    assert result.stop_reason is StopReason.COMPLETED
    assert got == [(True, True, "probe", "p-0")]


async def test_l6_caller_cancellation_propagates_after_cleanup() -> None:
    model = ScriptedModel(Reply([chunk(text("Hi"))], stall_after=1))
    task = asyncio.create_task(run_turn(model, list(USER)))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pending_tasks() == []
    assert model.closed == model.opened == 1


async def test_l6_caller_cancellation_during_tools_cancels_the_tools() -> None:
    cancelled = []

    async def wedge() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    model = ScriptedModel(calls(("wedge", {})))
    task = asyncio.create_task(run_turn(model, list(USER), tools=[wedge]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == [True]
    assert pending_tasks() == []


# -- L7 clocks -----------------------------------------------------------------


async def test_l7_deadline_during_a_slow_tool_is_time_limit_not_step_cap() -> None:
    model = ScriptedModel(calls(("slow", {"seconds": 10})))
    result = await turn(model, tools=[slow], limits=TurnLimits(turn_timeout=0.1, max_steps=1))
    assert result.stop_reason is StopReason.TIME_LIMIT
    assert (
        result.message
        == f"I had to stop after 0.1s — this turn hit its processing time limit. {tail(0)}"
    )
    assert "step limit" not in result.text and "-step" not in result.text
    assert len(model.requests) == 1
    assert response_of(result.contents) == ABORTED
    assert_replayable(result.contents)


async def test_l7_deadline_during_a_model_stream_is_time_limit() -> None:
    model = ScriptedModel(Reply([chunk(text("Thinking out loud"))], stall_after=1))
    result = await turn(model, limits=TurnLimits(turn_timeout=0.08))
    assert result.stop_reason is StopReason.TIME_LIMIT
    assert result.text == (
        f"Thinking out loud\n\nI had to stop after 0.1s — this turn hit its processing time limit. {tail(0)}"
    )
    assert result.finish_reason is None
    assert result.contents == USER
    # The request got the time remaining, not a default: all of it on a loop whose clock has
    # not moved since the turn began (uvloop's counts milliseconds), and never more (L36).
    assert 0 < model.timeouts[0] <= 0.08


async def test_l7_stalled_model_stream() -> None:
    model = ScriptedModel(Reply([chunk(text("Hi"))], stall_after=1))
    result = await turn(model, limits=TurnLimits(stall_timeout=0.05))
    assert result.stop_reason is StopReason.STALLED
    assert result.message == (
        "I had to stop because this turn made no progress for 0.05s — a tool or model call appears to "
        f"be stuck. {tail(0)}"
    )


async def test_l7_first_output_timeout_counts_as_stalled() -> None:
    model = ScriptedModel(Reply([chunk(text("late"))], delay=5.0))
    result = await turn(model, limits=TurnLimits(first_output_timeout=0.05, stall_timeout=0.02))
    assert result.stop_reason is StopReason.STALLED
    assert "no progress for 0.05s" in (result.message or "")


async def test_l7_slow_chunks_within_stall_timeout_are_progress() -> None:
    # Together the pauses (0.75 s) outlast stall_timeout, each alone is well within it: the
    # turn completes only because every chunk restarts the stall clock, and a loaded machine
    # has 0.45 s of slack per pause.
    events_ = [chunk(text(f"w{i} ")) for i in range(4)]
    model = ScriptedModel(
        Reply([*events_, chunk(finish_reason="STOP")], pause_after={1: 0.25, 2: 0.25, 3: 0.25})
    )
    result = await turn(model, limits=TurnLimits(stall_timeout=0.7))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "w0 w1 w2 w3 "


async def test_l7_l22_tool_longer_than_stall_timeout_within_tool_timeout_is_not_a_stall() -> None:
    model = ScriptedModel(calls(("slow", {"seconds": 0.15})), answer("Done."))
    result = await turn(
        model, tools=[slow], limits=TurnLimits(stall_timeout=0.05, tool_timeout=1.0)
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert response_of(model.requests[1]["contents"]) == {"output": "slow done"}


async def test_l7_tool_without_own_timeout_stalls_unless_it_heartbeats() -> None:
    async def quiet() -> str:
        await asyncio.sleep(0.5)
        return "done"

    async def chatty(ctx: ToolContext) -> str:
        # 1.2 s in all, twice stall_timeout; a heartbeat every 0.05 s leaves a loaded
        # machine 0.55 s of slack per beat
        for _ in range(24):
            await asyncio.sleep(0.05)
            ctx.heartbeat()
        return "done"

    model = ScriptedModel(calls(("quiet", {})))
    result = await turn(
        model, tools=[Tool("quiet", quiet, timeout=math.inf)], limits=TurnLimits(stall_timeout=0.1)
    )
    assert result.stop_reason is StopReason.STALLED

    model = ScriptedModel(calls(("chatty", {})), answer("Ok."))
    result = await turn(
        model,
        tools=[Tool("chatty", chatty, timeout=math.inf)],
        limits=TurnLimits(stall_timeout=0.6),
    )
    assert result.stop_reason is StopReason.COMPLETED


async def test_l7_l21_precedence_deadline_and_abort_coincide() -> None:
    abort = asyncio.Event()

    async def block_loop() -> str:
        abort.set()
        time.sleep(0.08)
        return "late"

    model = ScriptedModel(calls(("block_loop", {})))
    result = await turn(
        model, abort=abort, tools=[block_loop], limits=TurnLimits(turn_timeout=0.05)
    )
    assert result.stop_reason is StopReason.TIME_LIMIT
    assert (
        result.message
        == f"I had to stop after 0.1s — this turn hit its processing time limit. {tail(1)}"
    )


async def test_l7_precedence_abort_over_provider_error() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(Reply(error=ProviderError(400, "INVALID_ARGUMENT", "bad", False)))
    model.on_request = lambda n: abort.set()
    result = await turn(model, abort=abort)
    assert result.stop_reason is StopReason.ABORTED


def test_l10_l25_duration_format() -> None:
    assert [_fmt_duration(s) for s in (0.05, 0.5, 1, 45, 59.6, 60, 125, 300, 3725)] == [
        "0.1s",
        "0.5s",
        "1s",
        "45s",
        "1m",
        "1m",
        "2m 5s",
        "5m",
        "1h 2m 5s",
    ]


# -- L8 wrap-up nudge ----------------------------------------------------------


async def test_l8_l28_wrapup_nudge_once_when_little_time_remains() -> None:
    model = ScriptedModel(
        calls(("lookup", {"q": "a"}), seed="a"),
        calls(("lookup", {"q": "b"}), seed="b"),
        answer("Ok."),
    )
    seen: list[Any] = []
    result = await turn(
        model,
        tools=[lookup],
        on_event=seen.append,
        # 10.4 s: "10s" is what remains (rounded) for the first 0.9 s of the turn
        limits=TurnLimits(turn_timeout=10.4, wrapup_lead=100.0),
    )
    assert result.stop_reason is StopReason.COMPLETED
    first = model.requests[1]["contents"][-1]["parts"]
    assert first[-1] == {"text": WRAPUP_NOTE.format(remaining="10s")}
    assert "functionResponse" in first[0]
    second = model.requests[2]["contents"][-1]["parts"]
    assert [list(p) for p in second] == [["functionResponse"]]
    assert [e.phase for e in seen if isinstance(e, events.Lifecycle)] == ["wrapup"]


async def test_l8_no_nudge_without_a_finite_budget() -> None:
    model = ScriptedModel(calls(("lookup", {"q": "a"})), answer("Ok."))
    await turn(model, tools=[lookup], limits=TurnLimits(turn_timeout=math.inf, wrapup_lead=1e9))
    assert [list(p) for p in model.requests[1]["contents"][-1]["parts"]] == [["functionResponse"]]
    assert model.timeouts == [None, None]


# -- L14 clean exit on every path ------------------------------------------------


EXITS = {
    "completed": (lambda: ScriptedModel(answer("Hi.")), {}),
    "step-cap": (
        lambda: ScriptedModel(calls(("lookup", {"q": "a"})), answer("Final.")),
        {"max_steps": 1},
    ),
    "time-limit": (lambda: ScriptedModel(Reply(hang=True)), {"turn_timeout": 0.03}),
    "stalled": (lambda: ScriptedModel(Reply(hang=True)), {"stall_timeout": 0.03}),
    "provider-error": (
        lambda: ScriptedModel(Reply(error=ProviderError(400, None, "bad", False))),
        {},
    ),
    "context-cap": (
        lambda: ScriptedModel(calls(("lookup", {"q": "a"}), prompt=99)),
        {"max_context_tokens": 100},
    ),
}


@pytest.mark.parametrize("path", sorted(EXITS))
async def test_l14_no_pending_tasks_or_open_responses_after_every_exit_path(path: str) -> None:
    make, limits = EXITS[path]
    model = make()
    abort = asyncio.Event()
    result = await run_turn(
        model, list(USER), tools=[lookup], abort=abort, limits=TurnLimits(**limits)
    )
    assert result.stop_reason.value == path
    assert pending_tasks() == []
    assert model.closed == model.opened


async def test_l14_no_pending_tasks_after_abort_during_tools() -> None:
    abort = asyncio.Event()
    model = ScriptedModel(calls(("slow", {"seconds": 5}), ("slow", {"seconds": 5})))
    asyncio.get_running_loop().call_later(0.03, abort.set)
    result = await run_turn(model, list(USER), tools=[slow], abort=abort)
    assert result.stop_reason is StopReason.ABORTED
    assert pending_tasks() == []


# -- L36: the time a turn has left is never more than its turn_timeout -----------


async def test_l36_time_left_never_exceeds_turn_timeout_on_a_clock_that_has_not_moved() -> None:
    # deadline - now rounds above the turn's timeout on a clock reading like this one
    # ((T + 300) - T == 300.00000000000364): uvloop's clock counts milliseconds, so
    # a request sent as the turn begins reads the same T as the turn's start. The
    # CI run of stop 35 gave a request 300.0000000000073 s of a 300 s turn.
    reading = 32728.185951439325
    assert (reading + 300.0) - reading == 300.00000000000364
    clock = TurnClock(TurnLimits(turn_timeout=300.0), None)
    clock.bind(asyncio.current_task())  # type: ignore[arg-type]
    clock.time = lambda: reading
    clock.start()
    try:
        assert clock.remaining() == 300.0
        assert clock.call_timeout() == 300.0
        assert clock.call_timeout_within(clock.remaining()) == 300.0
    finally:
        clock.stop()


async def test_l29_tool_context_remaining_is_within_zero_and_the_calls_timeout() -> None:
    # ToolContext.remaining(): never more than the call's own timeout, however
    # deadline - now rounds ((T + 30) - T == 30.000000000000227 here), never below 0.
    start = 2029.6235381277454
    reading = [start]
    assert (start + 30.0) - start == 30.000000000000227
    ctx = ToolContext(
        abort=asyncio.Event(),
        deadline=start + 30.0,
        heartbeat=lambda: None,
        clock=lambda: reading[0],
        timeout=30.0,
    )
    assert ctx.timeout == 30.0
    assert ctx.remaining() == 30.0
    reading[0] += 10.0
    assert ctx.remaining() == (start + 30.0) - (start + 10.0)
    reading[0] += 25.0
    assert ctx.remaining() == 0.0


async def test_l29_a_tool_is_told_its_own_timeout() -> None:
    got: list[float] = []

    async def probe(ctx: ToolContext) -> str:
        got.append(ctx.timeout)
        return "ok"

    model = ScriptedModel(calls(("probe", {}), seed="p"), answer("Done."))
    result = await turn(model, tools=[Tool("probe", probe, timeout=2.0)])
    assert result.stop_reason is StopReason.COMPLETED
    assert got == [2.0]
